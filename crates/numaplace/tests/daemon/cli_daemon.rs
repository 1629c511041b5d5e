//! `numaplace run` and `advise` as an operator runs them on this host.

use crate::common;

use common::{numaplace, text};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn bad_daemon_input_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad_key = dir.path().join("bad.toml");
    std::fs::write(&bad_key, "intervall = \"1s\"\n").unwrap();
    let bad_policy = dir.path().join("policy.toml");
    std::fs::write(&bad_policy, "[policy]\nname = \"dino2\"\n").unwrap();
    let state = dir.path().join("state.json");
    let st = state.to_str().unwrap();
    let me = std::process::id().to_string();
    for (args, want) in [
        (
            vec!["run", "--config", bad_key.to_str().unwrap(), "--all"],
            "unknown field `intervall`",
        ),
        (
            vec!["run", "--config", bad_policy.to_str().unwrap(), "--all"],
            "dino2",
        ),
        (
            vec!["run", "--config", "/nonexistent/np.toml", "--all"],
            "cannot read the config file",
        ),
        (
            vec!["run", "--policy", "dino2", "--all"],
            "unknown policy \"dino2\"",
        ),
        (vec!["run", "--all", "--interval", "0"], "at least 10ms"),
        (
            vec!["advise", "--all", "--journal", "/tmp/j.jsonl"],
            "--journal: the daemon's (numaplace run)",
        ),
        (
            vec!["advise", "--all", "--dry-run", "--state", st],
            "--dry-run, --state: the daemon's",
        ),
        (
            vec!["run", "--policy", "default"],
            "the scope names nothing",
        ),
        (
            vec!["run", "--pid", "999999999", "--state", st],
            "matches no running process",
        ),
        (
            vec!["run", "--all", "--cpus", "4000-4001"],
            "none of CPUs 4000-4001 is on this machine",
        ),
        (
            vec!["run", "--all", "--metrics", "0.0.0.0:9464"],
            "not a loopback address",
        ),
        (
            vec![
                "run",
                "--pid",
                &me,
                "--state",
                "/proc/self/nonexistent-dir/s.json",
            ],
            "state",
        ),
    ] {
        let o = numaplace(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted {want:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The placement these tests make: the busy child's (`sh`'s) thread on
/// CPU 0, every round. A fixed placement, not numad-like's: numad places a
/// process only on a node with room for the CPU it uses, so its choice on
/// a one-CPU view depends on whatever else runs on this machine.
const PIN_SH_TO_CPU_0: &str =
    "[policy]\nname = \"static\"\n[[policy.pins]]\nprocess = \"sh\"\nthread = 0\ncpus = \"0\"\n";

/// A busy child process that the tests' placement, confined to CPU 0, will pin;
/// killed when dropped, so a test that fails leaves no busy loop behind.
/// One at a time, so that the tests' pins do not load one another's CPU.
struct Busy(
    Child,
    #[allow(dead_code)] std::sync::MutexGuard<'static, ()>,
);

impl Busy {
    fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn busy_child() -> Busy {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let serial = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Busy(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
        serial,
    )
}

fn affinity(pid: u32) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Pins, SIGTERM restores; pins again, `kill -9`, the next start restores.
#[test]
fn restores_on_sigterm_and_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let journal = dir.path().join("journal.jsonl");
    let config = dir.path().join("np.toml");
    std::fs::write(&config, PIN_SH_TO_CPU_0).unwrap();
    let child = busy_child();
    let pid = child.id();
    let original = affinity(pid);
    let start = |rounds: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_numaplace"));
        c.args([
            "run",
            "--cpus",
            "0",
            "--interval",
            "100ms",
            "--pid",
            &pid.to_string(),
        ])
        .arg("--config")
        .arg(&config)
        .arg("--state")
        .arg(&state)
        .arg("--journal")
        .arg(&journal)
        .stderr(Stdio::piped());
        if let Some(n) = rounds {
            c.args(["--rounds", n]);
        }
        c.spawn().unwrap()
    };

    let daemon = start(None);
    wait_for("the pin", || affinity(pid) == "0");
    assert!(
        state.exists(),
        "the original affinity is written before the pin"
    );
    // SAFETY: kill with a valid pid and signal.
    common::signal(daemon.id(), libc::SIGTERM);
    let out = daemon.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(affinity(pid), original, "SIGTERM restores");
    assert!(!state.exists(), "nothing left to restore");

    let mut daemon = start(None);
    wait_for("the pin again", || affinity(pid) == "0");
    daemon.kill().unwrap(); // SIGKILL: no chance to restore
    daemon.wait().unwrap();
    assert_eq!(affinity(pid), "0", "still pinned after kill -9");
    // The next start restores before anything else; the default policy
    // then does nothing.
    let o = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args([
            "run",
            "--policy",
            "default",
            "--interval",
            "100ms",
            "--rounds",
            "1",
            "--pid",
            &pid.to_string(),
        ])
        .arg("--state")
        .arg(&state)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("did not stop cleanly"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(affinity(pid), original, "the restart restores");

    // The journal holds both runs' pins, each with its reason.
    let j = std::fs::read_to_string(&journal).unwrap();
    let pins = j
        .lines()
        .filter(|l| l.contains("\"action\":\"pin\"") && l.contains("\"outcome\":\"done\""))
        .count();
    assert!(pins >= 2, "{j}");
}

/// A bug in the loop (a panic, forced in test builds at round 3) ends the
/// daemon with exit 1 and one line saying so, after it put back the pin
/// it made: nothing is left for the next start.
#[test]
fn a_bug_in_the_loop_still_restores_before_exit() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let config = dir.path().join("np.toml");
    std::fs::write(&config, PIN_SH_TO_CPU_0).unwrap();
    let child = busy_child();
    let pid = child.id();
    let original = affinity(pid);
    let o = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(["run", "--cpus", "0", "--interval", "100ms", "--pid"])
        .arg(pid.to_string())
        .arg("--config")
        .arg(&config)
        .arg("--state")
        .arg(&state)
        .env("NUMAPLACE_TEST_PANIC_AT_ROUND", "3")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("a bug in round 3"), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("numaplace: error: stopped by a bug after 3 rounds")
            && last.contains("restored: 1 restored"),
        "{err}"
    );
    assert_eq!(affinity(pid), original, "the pin is put back");
    assert!(!state.exists(), "nothing left to restore");
}

#[test]
fn advise_prints_the_plan_and_applies_nothing() {
    let child = busy_child();
    let pid = child.id();
    let before = affinity(pid);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("np.toml");
    std::fs::write(&config, PIN_SH_TO_CPU_0).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args([
            "advise",
            "--cpus",
            "0",
            "--interval",
            "300ms",
            "--pid",
            &pid.to_string(),
        ])
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // From the CPUs the thread has to those proposed.
    assert!(
        out.contains(&format!(
            "(pid {pid}): pin thread {pid} from CPUs {before} to CPUs 0"
        )),
        "{out}"
    );
    assert!(out.contains("because static placement:"), "{out}");
    // It says what the kernel's own NUMA balancing does here, as read,
    // and what numaplace does about it (`[engine] memory_mover`).
    let mode = std::fs::read_to_string("/proc/sys/kernel/numa_balancing")
        .map(|m| format!("Note: kernel.numa_balancing={} (", m.trim()))
        .unwrap_or_else(|_| "Note: kernel.numa_balancing: not in this kernel".into());
    assert!(out.contains(&mode), "wanted {mode:?} in {out}");
    assert!(
        out.contains("; memory_mover = \"where-kernel-cannot\""),
        "{out}"
    );
    assert_eq!(affinity(pid), before, "advise applies nothing");
}

/// Neither --policy nor a config's [policy]: `auto`, and `advise` and
/// `run` say it is the default; `--policy default` still leaves Linux
/// alone: no action planned or applied, nothing journalled.
#[test]
fn auto_is_the_default_and_policy_default_leaves_linux_alone() {
    let child = busy_child();
    let pid = child.id().to_string();
    let before = affinity(child.id());
    let dir = tempfile::tempdir().unwrap();
    let scope_only = dir.path().join("scope.toml");
    std::fs::write(&scope_only, format!("[scope]\npids = [{pid}]\n")).unwrap();
    let said_default =
        "policy auto (the default: neither --policy nor the config's [policy] names one";

    // advise: CPU 0 only, so numad's placement (auto's move) would pin the
    // busy child there if it used half a CPU over the round.
    let o = numaplace(&[
        "advise",
        "--cpus",
        "0",
        "--interval",
        "300ms",
        "--pid",
        &pid,
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains(&format!("Note: {said_default}")), "{out}");
    let plans: Vec<&str> = out.lines().filter(|l| l.contains("because ")).collect();
    assert!(
        plans
            .iter()
            .all(|l| l.trim_start().starts_with("because auto")),
        "{out}"
    );
    assert!(
        !plans.is_empty() || out.contains("auto: nothing to change."),
        "{out}"
    );
    assert_eq!(affinity(child.id()), before, "advise applies nothing");

    // A config whose [policy] is left out: auto as well.
    let o = numaplace(&[
        "advise",
        "--config",
        scope_only.to_str().unwrap(),
        "--interval",
        "100ms",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains(said_default),
        "{}",
        text(&o.stdout)
    );

    // run says so at start (-v: the start line is information).
    let o = numaplace(&[
        "-v",
        "run",
        "--dry-run",
        "--interval",
        "100ms",
        "--rounds",
        "2",
        "--pid",
        &pid,
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("running: {said_default}")), "{err}");

    // --policy default: nothing planned ...
    let o = numaplace(&[
        "advise", "--policy", "default", "--cpus", "0", "--pid", &pid,
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains("default: nothing to change."), "{out}");
    assert!(!out.contains("policy auto"), "{out}");
    // ... and, run for real on CPU 0 alone, nothing applied or journalled.
    let journal = dir.path().join("j.jsonl");
    let o = numaplace(&[
        "-v",
        "run",
        "--policy",
        "default",
        "--cpus",
        "0",
        "--interval",
        "100ms",
        "--rounds",
        "5",
        "--pid",
        &pid,
        "--state",
        dir.path().join("state.json").to_str().unwrap(),
        "--journal",
        journal.to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("running: policy default, "), "{err}");
    assert!(err.contains("stopped after 5 rounds"), "{err}");
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), "", "{err}");
    assert_eq!(affinity(child.id()), before);
}

/// On a machine without a core PMU (a VM without a virtual one, like the
/// test machines) nothing can be counted or sampled: each policy says, in
/// its own words, what it does without the signals it reads, and a policy
/// that reads none says nothing.
#[test]
fn policies_say_what_they_do_without_missing_signals() {
    let pmus = std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let core_pmu = pmus
        .iter()
        .any(|p| ["cpu", "cpu_core", "cpu_atom"].contains(&p.as_str()));
    let me = std::process::id().to_string();
    let advise = |policy: &str| {
        let o = numaplace(&[
            "advise",
            "--policy",
            policy,
            "--pid",
            &me,
            "--interval",
            "200ms",
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let out = advise("numad-like");
    assert!(
        !out.contains(" without "),
        "numad-like reads no counters: {out}"
    );
    if core_pmu {
        eprintln!("this machine has a core PMU ({pmus:?}): the notes depend on its events");
        return;
    }
    let out = advise("adaptive-mapping");
    assert!(
        out.contains(
            "Note: policy adaptive-mapping without sampled data addresses: measures [Bae12]"
        ) && out.contains("never votes"),
        "{out}"
    );
    assert!(
        out.contains("Note: policy adaptive-mapping without cycles per instruction:"),
        "{out}"
    );
    assert!(!out.contains("LLC misses per 1000"), "{out}");
    let out = advise("brm");
    assert!(
        out.contains("Note: policy brm without uncore occupancy and requests:"),
        "{out}"
    );
    assert!(!out.contains("sampled data addresses"), "{out}");
    // auto judges by instructions, which LLC misses and CPI both need: it
    // says what it does without them once, not once per signal; and what
    // DI-Migrate's layout does without sampled addresses.
    let out = advise("auto");
    let notes: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("Note: policy auto without"))
        .collect();
    assert_eq!(notes.len(), 2, "{out}");
    assert!(
        notes[0].starts_with(
            "Note: policy auto without LLC misses per 1000 instructions and cycles per instruction: "
        ),
        "{out}"
    );
    assert!(notes[1].contains("sampled"), "{out}");
}

/// Run as an unprivileged user against root's process: every pin is
/// refused with EPERM, each refusal is in the journal, and the loop goes on
/// to its last round.
#[test]
fn refusals_are_journalled_and_the_loop_goes_on() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Without root there is no other user's process to be refused on;
        // CI runs as root.
        eprintln!("not root: cannot set up another user's process; CI runs this as root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let own = dir.path().join("nobody");
    std::fs::create_dir(&own).unwrap();
    std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
    let config = dir.path().join("np.toml");
    std::fs::write(&config, PIN_SH_TO_CPU_0).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();

    let child = busy_child(); // root's
    let pid = child.id();
    let before = affinity(pid);
    let out = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args([
            "run",
            "--cpus",
            "0",
            "--interval",
            "200ms",
            "--rounds",
            "6",
            "--pid",
            &pid.to_string(),
        ])
        .arg("--config")
        .arg(&config)
        .arg("--state")
        .arg(own.join("state.json"))
        .arg("--journal")
        .arg(own.join("journal.jsonl"))
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("stopped after 6 rounds"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(affinity(pid), before, "nothing changed");
    let j = std::fs::read_to_string(own.join("journal.jsonl")).unwrap();
    let refused: Vec<&str> = j
        .lines()
        .filter(|l| l.contains("\"outcome\":\"refused\""))
        .collect();
    assert!(refused.len() >= 2, "refusals in more than one round: {j}");
    assert!(refused[0].contains("EPERM"), "{}", refused[0]);
}

/// A dry run needs no state directory and changes nothing.
#[test]
fn dry_run_needs_no_state_and_changes_nothing() {
    let child = busy_child();
    let pid = child.id();
    let before = affinity(pid);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("np.toml");
    std::fs::write(&config, PIN_SH_TO_CPU_0).unwrap();
    let journal = dir.path().join("j.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args([
            "run",
            "--dry-run",
            "--cpus",
            "0",
            "--interval",
            "100ms",
            "--rounds",
            "4",
            "--pid",
            &pid.to_string(),
        ])
        .args(["--state", "/nonexistent-numaplace-dir/state.json"])
        .arg("--config")
        .arg(&config)
        .arg("--journal")
        .arg(&journal)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("dry run: nothing was changed"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(affinity(pid), before);
    let j = std::fs::read_to_string(&journal).unwrap();
    assert!(j.contains("\"outcome\":\"not_applied\""), "{j}");
}

/// `GET /metrics` on a daemon's UNIX socket; empty while it does not
/// answer (not listening yet).
fn scrape(sock: &std::path::Path) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(sock) else {
        return String::new();
    };
    let mut body = String::new();
    if s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").is_err()
        || s.read_to_string(&mut body).is_err()
    {
        return String::new();
    }
    body
}

/// A metric's value in a scrape, where it has one.
fn metric(scrape: &str, name: &str) -> Option<u64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// A dry run is a diff: nothing is applied, so the test process keeps its
/// CPUs round after round, and yet the pin is proposed once over ten
/// rounds and more, journalled from the CPUs the thread has to those
/// proposed; `/metrics` counts it as the journal says, not applied, and
/// has no `applied` outcome at all.
#[test]
fn a_dry_run_journals_each_proposal_once_from_current_to_proposed() {
    let child = busy_child();
    let pid = child.id().to_string();
    let before = affinity(child.id());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("np.toml");
    std::fs::write(&config, PIN_SH_TO_CPU_0).unwrap();
    let journal = dir.path().join("j.jsonl");
    let sock = dir.path().join("metrics.sock");
    let log = dir.path().join("stderr");
    let mut daemon = Service(
        Command::new(env!("CARGO_BIN_EXE_numaplace"))
            .args(["run", "--dry-run", "--cpus", "0", "--interval", "100ms"])
            .args(["--pid", &pid, "--metrics"])
            .arg(format!("unix:{}", sock.display()))
            .arg("--config")
            .arg(&config)
            .arg("--journal")
            .arg(&journal)
            .env_remove("RUST_LOG")
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("ten rounds", || {
        metric(&scrape(&sock), "numaplace_rounds_total").is_some_and(|n| n >= 10)
    });
    let metrics = scrape(&sock);
    common::signal(daemon.id(), libc::SIGTERM);
    let status = daemon.wait().unwrap();
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{said}");
    assert_eq!(affinity(child.id()), before, "nothing applied");

    let j = std::fs::read_to_string(&journal).unwrap();
    let entries: Vec<serde_json::Value> = j
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 1, "one proposal, once: {j}");
    let e = &entries[0];
    assert_eq!(e["action"], "pin", "{j}");
    assert_eq!(e["task"]["tid"].to_string(), pid, "{j}");
    assert_eq!(e["cpus"], "0", "proposed: {j}");
    assert_eq!(e["current"]["cpus"], before.as_str(), "current: {j}");
    assert_eq!(e["outcome"], "not_applied", "{j}");

    assert_eq!(
        metric(&metrics, "numaplace_actions_total{outcome=\"not_applied\"}"),
        Some(1),
        "{metrics}"
    );
    assert!(!metrics.contains("outcome=\"applied\""), "{metrics}");
}

/// The service as the Debian package installs it: its config names no
/// scope, so it says so, places nothing and waits for SIGTERM (exit 0)
/// instead of failing and being restarted by systemd over and over.
#[test]
fn service_with_the_packaged_config_places_nothing_and_waits() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr");
    let config = common::repo_root().join("packaging/numaplace.toml");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--state")
        .arg(dir.path().join("state.json"))
        .env_remove("RUST_LOG")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for("the empty-scope warning", || {
        said().contains("names nothing")
    });
    assert!(daemon.try_wait().unwrap().is_none(), "it waits: {}", said());
    common::signal(daemon.id(), libc::SIGTERM);
    let status = daemon.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", said());
    assert!(said().contains("nothing was changed"), "{}", said());
}

/// A scope that matches nothing yet (a VM not started, a program not yet
/// run) waits for it, in a config or typed: one rule. A scope of pids
/// alone that matches nothing is an error either way: a pid that is gone
/// does not come back as the same process.
#[test]
fn a_scope_that_matches_nothing_yet_waits_typed_or_in_a_config() {
    let dir = tempfile::tempdir().unwrap();
    let waits = dir.path().join("waits.toml");
    std::fs::write(&waits, "[scope]\ncomms = [\"no-such-program-np\"]\n").unwrap();
    let gone = dir.path().join("gone.toml");
    std::fs::write(&gone, "[scope]\npids = [999999999]\n").unwrap();
    let state = dir.path().join("state.json");
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_numaplace"))
            .args(["run", "--interval", "100ms", "--rounds", "2", "--state"])
            .arg(&state)
            .args(extra)
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    for extra in [
        vec!["--config", waits.to_str().unwrap()],
        vec!["--comm", "no-such-program-np"],
    ] {
        let o = run(&extra);
        let err = text(&o.stderr);
        assert!(o.status.success(), "{extra:?}: {err}");
        assert!(err.contains("matches no running process yet"), "{err}");
        assert!(err.contains("stopped after 2 rounds"), "{err}");
    }
    for extra in [
        vec!["--config", gone.to_str().unwrap()],
        vec!["--pid", "999999999"],
    ] {
        let o = run(&extra);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains("none of those pids runs"), "{err}");
    }
}

/// A thread that chose its own CPUs is left alone, and `advise` says so:
/// which thread, and why (issue 32).
#[test]
fn advise_names_the_threads_it_leaves_alone_and_why() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: one CPU, nothing to narrow an affinity to");
        return;
    }
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // `taskset` execs the sleep: the same pid, its affinity CPU 1.
    let child = Kill(
        Command::new("taskset")
            .args(["-c", "1", "sleep", "30"])
            .stdout(Stdio::null())
            .spawn()
            .expect("taskset (util-linux)"),
    );
    let pid = child.0.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    let comm = || std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    while (affinity(pid) != "1" || comm().trim() != "sleep") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = numaplace(&[
        "advise",
        "--policy",
        "numad-like",
        "--cpus",
        "0-1",
        "--interval",
        "300ms",
        "--pid",
        &pid.to_string(),
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        out.contains("Left alone: 1 thread of processes in scope no policy may place:"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "sleep (pid {pid}), thread {pid}: chose its own CPUs: its affinity is 1, narrower \
             than the machine's CPUs 0-1"
        )),
        "{out}"
    );
    // `tasks` says the same of the processes it shows.
    let o = numaplace(&["tasks", "--pid", &pid.to_string()]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        out.contains(&format!(
            "sleep (pid {pid}), thread {pid}: chose its own CPUs: its affinity is 1, narrower \
             than the machine's CPUs"
        )),
        "{out}"
    );
}

/// numaplace run inside a cpuset cgroup of one CPU (a container, a systemd
/// unit's `AllowedCPUs=`) still sees the whole machine, says at start that
/// it is confined itself, and would place others' threads on every CPU.
/// Needs root and a cpuset hierarchy (cgroup v1's, or v2 with the cpuset
/// controller); skipped without.
#[test]
fn confined_numaplace_sees_the_whole_machine_and_says_so() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: geteuid has no preconditions.
    if cpus < 2 || unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root and two CPUs");
        return;
    }
    let name = format!("numaplace-test-{}", std::process::id());
    let v1 = std::path::Path::new("/sys/fs/cgroup/cpuset");
    let v2 = std::path::Path::new("/sys/fs/cgroup");
    let (dir, procs) = if v1.join("cpuset.cpus").exists() {
        (v1.join(&name), "tasks")
    } else if std::fs::read_to_string(v2.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpuset"))
        && std::fs::write(v2.join("cgroup.subtree_control"), "+cpuset").is_ok()
    {
        (v2.join(&name), "cgroup.procs")
    } else {
        eprintln!("skipped: no cpuset cgroup hierarchy to make a cgroup in");
        return;
    };
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    if std::fs::create_dir(&dir).is_err() {
        eprintln!("skipped: cannot make {}", dir.display());
        return;
    }
    let _rm = Remove(dir.clone());
    std::fs::write(dir.join("cpuset.cpus"), "0").unwrap();
    std::fs::write(dir.join("cpuset.mems"), "0").unwrap();
    // A shell moves itself into the cgroup, then execs numaplace there.
    let in_box = |args: &[&str]| {
        Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(dir.join(procs))
            .arg(env!("CARGO_BIN_EXE_numaplace"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = in_box(&["topology", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t: numaplace_model::Topology = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        t.span().len(),
        cpus,
        "the whole machine, not the cgroup's CPU"
    );

    let me = std::process::id().to_string();
    let o = in_box(&[
        "-v",
        "run",
        "--policy",
        "default",
        "--dry-run",
        "--interval",
        "100ms",
        "--rounds",
        "1",
        "--pid",
        &me,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!(
            "numaplace itself may run only on CPUs 0 (its cgroup's cpuset or its affinity); it \
             sees the whole machine, CPUs 0-{}",
            cpus - 1
        )),
        "{}",
        text(&o.stderr)
    );
}

/// The daemon as the service runs it (`run --config FILE`), its state in
/// `dir`, its stderr to `log`; stopped with SIGTERM if a test fails with
/// it still running.
fn service(config: &std::path::Path, dir: &std::path::Path, log: &std::path::Path) -> Service {
    Service(
        Command::new(env!("CARGO_BIN_EXE_numaplace"))
            .args(["run", "--config"])
            .arg(config)
            .arg("--state")
            .arg(dir.join("state.json"))
            .env_remove("RUST_LOG")
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

struct Service(Child);

impl std::ops::Deref for Service {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Service {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            common::signal(self.0.id(), libc::SIGTERM);
            let _ = self.0.wait();
        }
    }
}

/// SIGHUP reloads the config: a new scope takes effect from the next
/// round; a config that does not load leaves the running one, says why,
/// and nothing is put back; SIGTERM then restores as ever (issue 34).
#[test]
fn sighup_reloads_the_scope_and_a_broken_config_changes_nothing() {
    let child = busy_child();
    let pid = child.id();
    let before = affinity(pid);
    let mut other = Command::new("sleep").arg("60").spawn().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("np.toml");
    let with_scope =
        |p: u32| format!("interval = \"100ms\"\n[scope]\npids = [{p}]\n{PIN_SH_TO_CPU_0}");
    std::fs::write(&config, with_scope(other.id())).unwrap();
    let log = dir.path().join("stderr");
    let mut daemon = service(&config, dir.path(), &log);
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for("the start line", || {
        said().contains("running: policy static")
    });
    // Out of scope: a few rounds leave it alone.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(affinity(pid), before, "{}", said());
    std::fs::write(&config, with_scope(pid)).unwrap();
    common::signal(daemon.id(), libc::SIGHUP);
    wait_for("the pin after the reload", || affinity(pid) == "0");
    assert!(
        said().contains("reloaded, from the next round: scope"),
        "{}",
        said()
    );
    std::fs::write(&config, "interval = [\n").unwrap();
    common::signal(daemon.id(), libc::SIGHUP);
    wait_for("the refusal", || said().contains("not reloaded"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(daemon.try_wait().unwrap().is_none(), "{}", said());
    assert_eq!(affinity(pid), "0", "nothing put back: {}", said());
    common::signal(daemon.id(), libc::SIGTERM);
    let status = daemon.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", said());
    assert_eq!(affinity(pid), before, "{}", said());
    let _ = other.kill();
    let _ = other.wait();
}

/// The service whose config names nothing starts placing once SIGHUP
/// brings a scope (`systemctl reload`), without a restart.
#[test]
fn a_service_waiting_for_a_scope_takes_one_on_sighup() {
    let child = busy_child();
    let pid = child.id();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("np.toml");
    std::fs::write(&config, "interval = \"100ms\"\n").unwrap();
    let log = dir.path().join("stderr");
    let mut daemon = service(&config, dir.path(), &log);
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for("the empty-scope warning", || {
        said().contains("names nothing")
    });
    let scoped = format!("interval = \"100ms\"\n[scope]\npids = [{pid}]\n{PIN_SH_TO_CPU_0}");
    std::fs::write(&config, scoped).unwrap();
    common::signal(daemon.id(), libc::SIGHUP);
    wait_for("the pin", || affinity(pid) == "0");
    common::signal(daemon.id(), libc::SIGTERM);
    assert_eq!(daemon.wait().unwrap().code(), Some(0), "{}", said());
    assert_ne!(affinity(pid), "0", "{}", said());
}

/// `numaplace config` prints what `run` would use, the flags on top of the
/// file; what it prints reads back as the same configuration; a bad file
/// is refused as `run` refuses it (issue 34).
#[test]
fn config_prints_the_effective_configuration_and_it_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let example = common::repo_root().join("examples/numaplace.toml");
    let o = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args([
            "config",
            "--interval",
            "3s",
            "--policy",
            "numad-like",
            "--config",
        ])
        .arg(&example)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let first = text(&o.stdout);
    assert!(first.contains("interval = \"3s\""), "{first}");
    assert!(first.contains("name = \"numad-like\""), "{first}");
    assert!(first.contains("[scope.exclude]"), "{first}");
    let file = dir.path().join("effective.toml");
    std::fs::write(&file, &first).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(["config", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), first);
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "intervall = \"1s\"\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(["config", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("unknown field `intervall`"));
}
