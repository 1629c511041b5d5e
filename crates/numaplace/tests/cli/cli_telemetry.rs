//! `numaplace tasks`, `record` and `replay` as a user runs them.

use crate::common;

use common::{numaplace, text};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use numaplace_model::Snapshot;

#[test]
fn tasks_lists_this_process() {
    let pid = std::process::id().to_string();
    let o = numaplace(&["tasks", "--pid", &pid, "--interval", "200ms"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("APPLICATION"), "{out}");
    assert!(out.contains(&format!(" {pid} ")), "{out}");
    assert!(out.contains("1 applications"), "{out}");

    let o = numaplace(&["tasks", "--pid", &pid, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s: Snapshot = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s.groups.len(), 1);
    assert_eq!(s.groups[0].pid.to_string(), pid);
    assert!(s.tasks.iter().all(|t| t.tgid.to_string() == pid));
    assert!(s.interval_ns > 0, "two rounds by default");

    // Kernel threads are left out unless asked for.
    let o = numaplace(&[
        "tasks",
        "--interval",
        "0",
        "--json",
        "--kernel",
        "--comm",
        "kthreadd",
    ]);
    let s: Snapshot = serde_json::from_slice(&o.stdout).unwrap();
    let o2 = numaplace(&["tasks", "--interval", "0", "--json", "--comm", "kthreadd"]);
    let s2: Snapshot = serde_json::from_slice(&o2.stdout).unwrap();
    assert!(s2.groups.len() <= s.groups.len());
    assert!(s2.groups.iter().all(|g| !g.is_kernel()));
}

#[test]
fn tasks_bad_input() {
    for (args, want) in [
        (&["tasks", "--interval", "5x"][..], "unknown unit"),
        (&["tasks", "--pid", "0"][..], "process ids are positive"),
        (
            &["tasks", "--cgroup", "system.slice"][..],
            "from the hierarchy's root",
        ),
        (
            &["tasks", "--root", "/nonexistent-np"][..],
            "cannot read the root",
        ),
        (
            &["record", "-o", "/tmp/x", "--interval", "1ms"][..],
            "at least 10ms",
        ),
        (&["replay", "/nonexistent-np"][..], "cannot open"),
    ] {
        let o = numaplace(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted {want:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn record_then_replay() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.jsonl");
    let f = file.to_str().unwrap();
    let o = numaplace(&[
        "record",
        "--interval",
        "100ms",
        "--duration",
        "350ms",
        "-o",
        f,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a recording holds command lines: owner only");

    let o = numaplace(&["replay", f]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("4 snapshots"), "{out}");
    assert!(out.contains("#0 "), "{out}");

    let o = numaplace(&["replay", "--json", f]);
    let snaps: Vec<Snapshot> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(snaps.len(), 4);
    assert!(snaps.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    assert!(snaps[1].interval_ns > 50_000_000);

    // --samples: sampled data addresses too, where the CPU has them;
    // without a core PMU (a VM without a virtual one) the start says so.
    let sampled = dir.path().join("sampled.jsonl");
    let o = numaplace(&[
        "record",
        "--samples",
        "--duration",
        "150ms",
        "--interval",
        "100ms",
        "-o",
        sampled.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let core_pmu = ["cpu", "cpu_core", "cpu_atom"].iter().any(|p| {
        std::path::Path::new("/sys/bus/event_source/devices")
            .join(p)
            .exists()
    });
    if !core_pmu {
        assert!(
            text(&o.stderr).contains("not recorded: sampled data addresses: "),
            "{}",
            text(&o.stderr)
        );
    }

    // The file is not overwritten without --force.
    let before = std::fs::read(&file).unwrap();
    let o = numaplace(&["record", "--duration", "100ms", "-o", f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("already exists"));
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[test]
fn record_stops_cleanly_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.jsonl");
    let child = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(["record", "--interval", "50ms", "-o", file.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    // SAFETY: kill with a valid pid and signal number.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("recorded"), "{}", text(&o.stderr));
    let o = numaplace(&["replay", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        !text(&o.stderr).contains("partial line"),
        "{}",
        text(&o.stderr)
    );
}

/// A capture of this host's /proc with a QEMU guest running under TCG
/// (tests/vm/gather-procfs.sh; see tests/fixtures/README.md).
#[test]
fn tasks_from_a_captured_root_with_a_vm() {
    let dir = tempfile::tempdir().unwrap();
    let tarball = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/procfs-qemu-vm.tar.xz");
    let st = Command::new("tar")
        .arg("-xf")
        .arg(&tarball)
        .arg("-C")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let root = dir.path().to_str().unwrap();
    let o = numaplace(&["tasks", "--root", root, "--vms", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s: Snapshot = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s.groups.len(), 1, "one VM");
    let vm = &s.groups[0];
    assert_eq!(
        vm.kind,
        numaplace_model::GroupKind::Vm {
            name: Some("fixture-vm".into()),
            accel: "TCG".into(),
            evidence: "qemu executable".into()
        }
    );
    let mut vcpus: Vec<(u32, String)> = s
        .tasks
        .iter()
        .filter_map(|t| t.vcpu.map(|v| (v, t.comm.clone())))
        .collect();
    vcpus.sort();
    assert_eq!(
        vcpus,
        vec![(0, "CPU 0/TCG".to_string()), (1, "CPU 1/TCG".to_string())]
    );
    let mem = vm.memory.as_ref().expect("numa_maps captured");
    assert!(mem[&0].anon > 1 << 20, "{mem:?}");

    // Without --vms the shell that captured it is there too, as a process.
    let o = numaplace(&["tasks", "--root", root, "--interval", "0"]);
    let out = text(&o.stdout);
    assert!(out.contains("vm:fixture-vm (TCG)"), "{out}");
    assert!(out.contains("CPU 1/TCG [vcpu1]"), "{out}");
    assert!(out.contains("2 applications, 5 threads"), "{out}");
}

/// A fixture root with two processes; one's `numa_maps` and one thread's
/// `status` cannot be read, one thread vanished (its directory is empty),
/// and one `stat` is truncated. `tasks` lists what it can and says what it
/// could not read.
#[test]
fn tasks_survive_denied_vanished_and_truncated_files() {
    use std::fs;
    use std::os::unix::process::CommandExt;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("sys/devices/system/cpu")).unwrap();
    let stat = |pid: i32, comm: &str| {
        format!(
            "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194304 101 0 0 0 7 3 0 0 20 0 1 0 255411 3133440 379 \
             18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
        )
    };
    let status = |pid: i32, tid: i32| {
        format!(
            "Name:\tx\nTgid:\t{pid}\nPid:\t{tid}\nPPid:\t1\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n"
        )
    };
    let write = |rel: &str, text: &str| {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    for (pid, comm) in [(100, "app) (x"), (200, "other")] {
        write(&format!("proc/{pid}/stat"), &stat(pid, comm));
        write(&format!("proc/{pid}/status"), &status(pid, pid));
        write(&format!("proc/{pid}/cmdline"), &format!("{comm}\0--flag\0"));
        write(&format!("proc/{pid}/cgroup"), "0::/test.slice\n");
        write(
            &format!("proc/{pid}/numa_maps"),
            "7f0000000000 default anon=256 dirty=256 N0=256 kernelpagesize_kB=4\n",
        );
        write(&format!("proc/{pid}/task/{pid}/stat"), &stat(pid, comm));
        write(&format!("proc/{pid}/task/{pid}/status"), &status(pid, pid));
    }
    // Thread 101: readable stat, unreadable status. Thread 102: vanished.
    // Thread 103: truncated stat.
    write("proc/100/task/101/stat", &stat(101, "worker"));
    write("proc/100/task/101/status", &status(100, 101));
    fs::create_dir_all(root.join("proc/100/task/102")).unwrap();
    write("proc/100/task/103/stat", "103 (cut) S 1 100");
    let deny = |rel: &str| {
        fs::set_permissions(root.join(rel), fs::Permissions::from_mode(0o000)).unwrap();
    };
    deny("proc/100/task/101/status");
    deny("proc/200/numa_maps");
    // Let an unprivileged user walk the tree.
    for d in walkdirs(root) {
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    }

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_numaplace"));
    cmd.args(["tasks", "--root", root.to_str().unwrap(), "--interval", "0"]);
    // As root, permissions do not bite: run as nobody.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let o = cmd.output().unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains("app) (x"), "{out}");
    assert!(out.contains("2 applications, 3 threads"), "{out}");
    assert!(out.contains(" 101  worker"), "{out}");
    assert!(!out.contains(" 102 ") && !out.contains(" 103 "), "{out}");
    assert!(out.contains("0:1MiB"), "{out}");
    assert!(
        out.contains("note: 2 files could not be read (permission denied"),
        "{out}"
    );
}

fn walkdirs(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(rd) = std::fs::read_dir(&out[i]) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    out.push(e.path());
                }
            }
        }
        i += 1;
    }
    out
}

/// A recording of a two-node machine, written as `numaplace record` writes
/// one: a busy 512 MiB process (pid 100, threads 100 and 101, named
/// `hog`) on node 0's CPUs with all its memory on node 0; node 1 idle.
fn two_node_recording(path: &std::path::Path, rounds: u64) {
    use numaplace_model::*;
    let topology = Topology::synthetic("pack:2 numa:1 core:2 pu:1").unwrap();
    let header = RecordHeader {
        format: RecordHeader::FORMAT.into(),
        version: RecordHeader::VERSION,
        writer: "test".into(),
        interval_ns: 1_000_000_000,
        topology,
        missing_signals: vec![],
    };
    let mut r = numaplace_linux::Recorder::create(path, &header, false).unwrap();
    let mib = 1u64 << 20;
    for seq in 0..rounds {
        let task = |tid: i32| Task {
            tid,
            tgid: 100,
            start_time: 1000 + tid as u64,
            comm: format!("hog{tid}"),
            state: 'R',
            last_cpu: Some(tid as u32 - 100),
            allowed_cpus: CpuSet::parse_list("0-3").unwrap(),
            allowed_mems: CpuSet::parse_list("0-1").unwrap(),
            confined_cpus: None,
            manager: None,
            utime: seq * 100,
            stime: 0,
            vcpu: None,
        };
        let meminfo = |free| NodeMeminfo {
            total: 4096 * mib,
            free,
        };
        let anon = NodeMemory {
            anon: 512 * mib,
            file: 0,
            huge: 0,
        };
        r.write(&Snapshot {
            seq,
            time_unix_ns: seq * 1_000_000_000,
            interval_ns: if seq == 0 { 0 } else { 1_000_000_000 },
            tasks: vec![task(100), task(101)],
            groups: vec![TaskGroup {
                pid: 100,
                start_time: 1100,
                comm: "hog".into(),
                cmdline: vec!["hog".into()],
                cgroup: None,
                kind: GroupKind::Process,
                threads: vec![100, 101],
                memory: Some([(0, anon)].into_iter().collect()),
            }],
            machine: MachineReadings {
                nodes: [(0, meminfo(1024 * mib)), (1, meminfo(3072 * mib))].into(),
                ..MachineReadings::default()
            },
            ..Snapshot::default()
        })
        .unwrap();
    }
}

/// `replay --policy`: the policy's decisions on a recording, each with its
/// reason; its pins and memory moves are shown to it in later rounds, so
/// numad-like moves the hog once and its memory over two rounds (256 MiB/s)
/// and then stops; counter-driven policies say what the recording lacks,
/// and `--counters-from` stands in for the missing counters.
#[test]
fn replay_a_policy_on_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two-node.jsonl");
    two_node_recording(&file, 6);
    let f = file.to_str().unwrap();

    let o = numaplace(&["replay", f, "--policy", "numad-like"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("replaying policy numad-like (nothing is applied)"),
        "{out}"
    );
    assert!(
        out.contains("hog (pid 100): pin thread 100 from CPUs 0-3 to CPUs 2-3"),
        "{out}"
    );
    assert!(
        out.contains("hog (pid 100): pin thread 101 from CPUs 0-3 to CPUs 2-3"),
        "{out}"
    );
    assert!(out.contains("50% of its 512 MiB is there so far"), "{out}");
    // Each from where the moves before it left the memory.
    assert!(
        out.contains("move memory to node 1 (now: node 0 512 MiB)\n"),
        "{out}"
    );
    assert!(
        out.contains("move memory to node 1 (now: node 0 256 MiB, node 1 256 MiB)\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "6 rounds: 2 pins of 2 threads, 2 memory moves and 0 page-window moves (131072 pages)"
        ),
        "{out}"
    );
    assert!(
        !out.contains("Note:"),
        "numad-like reads no counters: {out}"
    );

    // The journal's format, one decision a line.
    let o = numaplace(&["replay", f, "--policy", "numad-like", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(
        lines
            .iter()
            .all(|l| l["policy"] == "numad-like" && l["pid"] == 100)
    );
    assert!(text(&o.stderr).contains("6 rounds: 2 pins"));

    // A scope that matches nothing recorded: no decisions.
    let o = numaplace(&["replay", f, "--policy", "numad-like", "--pid", "7"]);
    assert!(
        text(&o.stdout).contains("6 rounds: 0 pins"),
        "{}",
        text(&o.stdout)
    );

    // di-plain without LLC misses in the recording: says so, moves nothing.
    let o = numaplace(&["replay", f, "--policy", "di-plain"]);
    let out = text(&o.stdout);
    assert!(out.contains("6 rounds: 0 pins"), "{out}");
    assert!(
        out.contains("Note: the recording has no LLC misses per 1000 instructions: policy di-plain classifies"),
        "{out}"
    );
    // ... and with made-up counters it spreads the two hogs over the nodes.
    let rules = dir.path().join("counters.toml");
    std::fs::write(
        &rules,
        "[[thread]]\ncomm = \"hog*\"\nllc_mpki = 40.0\nipc = 1.0\n",
    )
    .unwrap();
    let o = numaplace(&[
        "replay",
        f,
        "--policy",
        "di-plain",
        "--counters-from",
        rules.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(!out.contains("the recording has no LLC misses"), "{out}");
    // Thread 100 to core 0 (node 0); thread 101, whose rank puts it on
    // node 1 while its process's memory is on node 0, is left to Linux
    // within node 0's CPUs (DI steps aside where its memory would not
    // follow, issue 16; within the node, so that Linux does not move it
    // across nodes, away from its memory).
    let pins: Vec<&str> = out.lines().filter(|l| l.contains(": pin thread")).collect();
    assert_eq!(pins.len(), 2, "{out}");
    assert!(
        pins[0].ends_with("thread 100 from CPUs 0-3 to CPUs 0"),
        "{out}"
    );
    assert!(
        pins[1].ends_with("thread 101 from CPUs 0-3 to CPUs 0-1"),
        "{out}"
    );
    assert!(out.contains("left to Linux within them"), "{out}");

    // A config without [policy] replays auto, the daemon's default; the
    // recording counts no instructions, so auto would make numad's moves
    // unjudged, and says why once. Here the hog runs beside its memory
    // already (numad-like above moves it to the roomier node all the
    // same): auto's premise does not hold, it moves nothing.
    let config = dir.path().join("np.toml");
    std::fs::write(&config, "[scope]\npids = [100]\n").unwrap();
    let o = numaplace(&["replay", f, "--config", config.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("replaying policy auto (the default: neither --policy nor the config's [policy] names one"),
        "{out}"
    );
    assert!(out.contains("6 rounds: 0 pins"), "{out}");
    let notes: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("Note: the recording has no"))
        .collect();
    // One note for the counters auto judges by, one for the sampled
    // addresses DI-Migrate's layout follows with.
    assert_eq!(notes.len(), 2, "{out}");
    assert!(
        notes[0].starts_with("Note: the recording has no LLC misses per 1000 instructions and cycles per instruction: policy auto "),
        "{out}"
    );
    assert!(
        notes[1].starts_with("Note: the recording has no sampled data addresses: policy auto "),
        "{out}"
    );

    // Bad input: exit 2, naming what was wrong.
    for (args, want) in [
        (vec!["--policy", "dino2"], "unknown policy \"dino2\""),
        (vec!["--policy", "dino", "--cpus", "9"], "cpus 9: "),
        (
            vec!["--config", "/nonexistent/np.toml"],
            "cannot read the config file",
        ),
    ] {
        let mut all = vec!["replay", f];
        all.extend(args);
        let o = numaplace(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(want),
            "{all:?}: {}",
            text(&o.stderr)
        );
    }
}
