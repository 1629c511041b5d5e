//! Hostile input, as a local user who can write files and sockets the
//! daemon reads would try it: every case is refused with exit 2 and one
//! line, before any work; nothing aborts, hangs or grows without bound.

use crate::common;
use crate::lstopo;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{numaplace, text};

/// Exit 2, one line on stderr that says `want`, nothing like a panic.
#[track_caller]
fn refused(o: &Output, want: &str) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "want exit 2: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("numaplace: error: ") || err.starts_with("error: "),
        "{err}"
    );
    assert!(err.contains(want), "want {want:?} in: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A fixture sysfs tree whose `node/online` says 4294967295: hwloc's
/// node count wraps to 0 and it aborts on `_nbnodes >= 1`.
#[test]
fn a_sysfs_tree_with_a_huge_node_id_is_refused_before_hwloc_sees_it() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = lstopo::fixtures_dir().join("8em64t-2s2ca2c.tar.bz2");
    let root = lstopo::extract_fixture(&fixture, tmp.path());
    std::fs::write(root.join("sys/devices/system/node/online"), "4294967295\n").unwrap();
    let r = root.to_str().unwrap();
    let out = tmp.path().join("rec.jsonl");
    for args in [
        vec!["topology", "--sysfs-root", r],
        vec!["simulate", "--sysfs-root", r, "--policy", "default"],
        vec!["compare", "--sysfs-root", r, "--seeds", "1"],
        vec![
            "record",
            "--root",
            r,
            "-o",
            out.to_str().unwrap(),
            "--duration",
            "1s",
        ],
    ] {
        let o = numaplace(&args);
        refused(&o, "node/online");
        refused(&o, "ids 0..=1023");
    }
}

#[test]
fn a_synthetic_topology_too_large_to_build_is_refused() {
    refused(
        &numaplace(&["topology", "--synthetic", "core:8192 pu:2"]),
        "must be 1..=8192",
    );
}

#[test]
fn nonsense_policy_parameters_and_scopes_in_a_config_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let many: String = (0..2000).map(|i| format!("\"p{i}\",")).collect();
    let huge: String = (0..500_000).map(|i| format!("\"p{i}\",")).collect();
    for (toml, want) in [
        (
            "[policy]\nname = \"dino\"\nhysteresis-window = 100000000000\n",
            "hysteresis-window = 100000000000: must be 1..=10000",
        ),
        (
            "[policy]\nname = \"dino\"\ndevil-mpki = nan\n",
            "devil-mpki NaN",
        ),
        (
            "[policy]\nname = \"dino\"\ndevil-mpki = -5\n",
            "devil-mpki -5",
        ),
        (
            "[policy]\nname = \"dino\"\ndevil-mpki = 50.0\nsuper-devil-mpki = 10.0\n",
            "must be above devil-mpki",
        ),
        (
            "[policy]\nname = \"dino\"\nhysteresis-window = 0\n",
            "hysteresis-window = 0",
        ),
        (
            "[policy]\nname = \"dino\"\nhysteresis-needed = 11\n",
            "hysteresis-needed = 11: must be 1..=10",
        ),
        (
            "[policy]\nname = \"dino\"\nwindow-pages = 0\n",
            "window-pages = 0",
        ),
        (
            "[policy]\nname = \"brm\"\nreset-min-rounds = 400\n",
            "reset-min-rounds = 400: must be 1..=300",
        ),
        (
            "[policy]\nname = \"brm\"\nreset-min-rounds = 0\nreset-max-rounds = 0\n",
            "reset-max-rounds = 0",
        ),
        (
            "[policy]\nname = \"brm\"\nmin-uncore-requests-per-s = nan\n",
            "min-uncore-requests-per-s = NaN",
        ),
        ("[scope]\ncgroups = [\"/../../etc\"]\n", "without . or .."),
        (
            &format!("[scope]\ncomms = [{many}]\n"),
            "comms has 2000 entries: must be 0..=1024",
        ),
        (
            &format!("[scope]\ncomms = [{huge}]\n"),
            "larger than 1048576 bytes",
        ),
    ] {
        let cfg = write(dir.path(), "c.toml", toml);
        let o = numaplace(&[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--all",
            "--dry-run",
            "--rounds",
            "1",
        ]);
        refused(&o, want);
    }
}

#[test]
fn scenario_counts_and_steps_out_of_range_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let app = "[[app]]\nname = \"a\"\n";
    for (toml, want) in [
        (
            format!("machine = \"westmere-2s\"\n{app}copies = 1000000000\n"),
            "must be 1..=1024 (identical copies of the application), got 1000000000",
        ),
        (
            format!("machine = \"westmere-2s\"\n{app}threads = 9223372036854775807\n"),
            "must be 1..=4096 (threads of the application), got 9223372036854775807",
        ),
        (
            format!("machine = \"westmere-2s\"\nstep_ms = 1e-300\n{app}"),
            "must be between 0.01 and 10000, got 1e-300",
        ),
        (
            format!("machine = \"westmere-2s\"\nstep_ms = 0.01\nmax_seconds = 1000000\n{app}"),
            "model steps: must be at most",
        ),
    ] {
        let p = write(dir.path(), "s.toml", &toml);
        refused(
            &numaplace(&[
                "simulate",
                "--scenario",
                p.to_str().unwrap(),
                "--policy",
                "default",
            ]),
            want,
        );
    }
    // clap's own usage error: exit 2, the value and the range on the first
    // line (clap adds its "try --help" hint below).
    let o = numaplace(&["compare", "--seeds", "4294967296"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr)
            .lines()
            .next()
            .unwrap()
            .contains("4294967296 is not in 1..=10000"),
        "{}",
        text(&o.stderr)
    );
}

/// `/dev/zero` (and any device or FIFO) named where a file is meant is
/// refused at once instead of read for ever.
#[test]
fn devices_named_as_input_files_are_refused_without_reading_them() {
    let z = "/dev/zero";
    for args in [
        vec!["topology", "--xml", z],
        vec!["replay", z],
        vec!["run", "--config", z, "--all", "--dry-run"],
        vec!["simulate", "--scenario", z, "--policy", "default"],
        vec!["run", "--all", "--dry-run", "--counters-from", z],
        vec!["simulate", "--machine", z, "--policy", "default"],
    ] {
        refused(&numaplace(&args), "not a regular file");
    }
}

#[test]
fn smaller_input_faults_are_exit_2_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // simulate --journal through a symlink: refused, the target untouched.
    let victim = write(d, "victim", "precious\n");
    let link = d.join("journal.jsonl");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    refused(
        &numaplace(&[
            "simulate",
            "--policy",
            "default",
            "--journal",
            link.to_str().unwrap(),
        ]),
        "symbolic link",
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    // advise with an empty scope, or a pid that does not exist.
    refused(
        &numaplace(&["advise", "--policy", "default"]),
        "the scope names nothing",
    );
    refused(
        &numaplace(&["advise", "--pid", "999999999", "--interval", "10ms"]),
        "matches no running process",
    );
    // Metrics: a missing socket directory, a busy port.
    let me = std::process::id().to_string();
    refused(
        &numaplace(&[
            "run",
            "--pid",
            &me,
            "--dry-run",
            "--metrics",
            "unix:/nonexistent/dir/sock",
        ]),
        "does not exist",
    );
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().to_string();
    refused(
        &numaplace(&["run", "--pid", &me, "--dry-run", "--metrics", &port]),
        "cannot listen there",
    );
    // Outputs that cannot be written are refused before the work.
    refused(
        &numaplace(&["train", "--out", d.to_str().unwrap()]),
        "not a regular file",
    );
    refused(
        &numaplace(&["calibrate", "-o", "/missing/x.json"]),
        "does not exist",
    );
}

fn spawn_daemon(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Two daemons on one state file: the second is refused with the first's
/// pid, and the first's journal is untouched. Needs root (a real run).
#[test]
fn a_second_daemon_on_the_same_state_file_is_refused_with_the_holders_pid() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let state = dir.path().join("state.json");
    let st = state.to_str().unwrap();
    let mut sleeper = Command::new("sleep").arg("600").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let mut first = spawn_daemon(&[
        "run",
        "--pid",
        &pid,
        "--policy",
        "default",
        "--state",
        st,
        "--interval",
        "100ms",
    ]);
    let lock = dir.path().join("state.json.lock");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&lock).map_or(true, |t| t.trim() != first.id().to_string()) {
        assert!(
            Instant::now() < deadline,
            "the first daemon never took the lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = numaplace(&[
        "run", "--pid", &pid, "--policy", "default", "--state", st, "--rounds", "1",
    ]);
    refused(
        &o,
        &format!("in use by another numaplace daemon (pid {})", first.id()),
    );
    // SAFETY: signalling a child we spawned.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    assert!(first.wait().unwrap().success());
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// Output cut short (`numaplace scenarios | head -0`): the command ends by
/// SIGPIPE, as a Unix filter does, without a panic on stderr.
#[test]
fn output_to_a_closed_pipe_ends_by_sigpipe_not_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    for args in [
        vec!["scenarios"],
        vec!["topology", "--synthetic", "pack:2 core:64 pu:2"],
    ] {
        // A pipe whose reader is gone before the child starts.
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors pipe(2) writes.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors were just created and are owned here.
        let (reader, writer) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_numaplace"))
            .args(&args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A thread named with bytes that are not UTF-8 and a right-to-left
/// override: `tasks` shows the bytes as `\xNN` and the override escaped,
/// and JSON keeps the two names apart.
#[test]
fn names_that_are_not_utf8_show_their_bytes_escaped() {
    let (named_tx, named_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // 15 bytes at most; \xe2\x80\xae is U+202E.
        let name = b"np\xff\xfe\xe2\x80\xaeok\0";
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
        // SAFETY: gettid has no preconditions.
        named_tx.send(unsafe { libc::gettid() }).unwrap();
        let _ = done_rx.recv();
    });
    let tid = named_rx.recv().unwrap();
    let pid = std::process::id().to_string();
    let o = numaplace(&["tasks", "--pid", &pid, "--interval", "0"]);
    let json = numaplace(&["tasks", "--pid", &pid, "--interval", "0", "--json"]);
    done_tx.send(()).unwrap();
    t.join().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.contains(&format!(" {tid} ")))
        .unwrap_or_else(|| panic!("no row for thread {tid}: {out}"));
    // The column cuts long names (with `~`); the escapes come first.
    assert!(row.contains("np\\xff\\xfe\\u{202e"), "{row}");
    assert!(
        !row.contains('\u{202e}') && !row.contains('\u{fffd}'),
        "{row}"
    );
    let s: numaplace_model::Snapshot = serde_json::from_slice(&json.stdout).unwrap();
    let comm = &s.task(tid).expect("the named thread").comm;
    assert_eq!(
        comm,
        &numaplace_model::task::name_from_bytes(b"np\xff\xfe\xe2\x80\xaeok")
    );
}

/// Every case of issue 18 from the outside, with `tests/host/hostile.sh`
/// on the binary built: each row `ok` (as root also two daemons on one
/// state file, kthreadd named in a state file, idle metrics connections,
/// a second daemon on a live metrics socket).
#[test]
fn the_hostile_sweep_finds_every_case_handled() {
    common::require_program("python3", "python3");
    let out = Command::new("bash")
        .arg(common::repo_root().join("tests/host/hostile.sh"))
        .arg(env!("CARGO_BIN_EXE_numaplace"))
        .output()
        .expect("run hostile.sh");
    let table = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{table}");
    assert!(!table.contains("BAD"), "{table}");
    assert!(
        table.lines().filter(|l| l.starts_with("ok ")).count() >= 33,
        "{table}"
    );
}
