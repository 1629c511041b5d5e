//! `numaplace tasks`, `record` and `replay` as a user runs them.

#[path = "support/common.rs"]
mod common;

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
