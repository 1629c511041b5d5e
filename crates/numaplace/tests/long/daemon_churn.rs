//! The daemon under thread churn: 1,000 threads a second created and ended
//! for 30 s in the process it manages. No crash, no error storm, a journal
//! whose every line parses, and a clean stop.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use numaplace_policy::engine::JournalEntry;

#[test]
#[ignore = "runs 30 s: .ci/run runs it with --ignored"]
fn daemon_survives_thread_churn() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let state = dir.path().join("state.json");
    let me = std::process::id().to_string();
    // numad-like with low thresholds and a short cooldown, placing onto CPU
    // 0 only: on any machine it then pins this process's threads, new ones
    // included, every second, so the churn meets real actions.
    let config = dir.path().join("np.toml");
    std::fs::write(
        &config,
        "[policy]\nname = \"numad-like\"\nmin_cpu_percent = 5\nmin_memory_mib = 1\ncooldown_secs = 1\n",
    )
    .unwrap();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(["run", "--cpus", "0", "--pid", &me, "--interval", "200ms"])
        .arg("--config")
        .arg(&config)
        .arg("--journal")
        .arg(&journal)
        .arg("--state")
        .arg(&state)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // 1,000 short-lived threads a second for 30 s, each doing a little work
    // so the process is big enough in CPU for numad-like to look at it.
    let start = Instant::now();
    let mut next = start;
    let mut made = 0u64;
    while start.elapsed() < Duration::from_secs(30) {
        std::thread::Builder::new()
            .name("churn".into())
            .stack_size(64 * 1024)
            .spawn(|| {
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(300) {
                    std::hint::black_box(0u64);
                }
            })
            .unwrap();
        made += 1;
        next += Duration::from_millis(1);
        if let Some(w) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        if made % 1000 == 0 {
            assert!(
                daemon.try_wait().unwrap().is_none(),
                "the daemon died under churn"
            );
        }
    }
    assert!(made >= 25_000, "made only {made} threads");

    // SAFETY: kill with a valid pid and signal.
    assert_eq!(unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) }, 0);
    let out = daemon.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Warnings at start (missing signals) are fine; a storm is not.
    let lines = err.lines().count();
    assert!(lines < 40, "{lines} lines of warnings: {err}");
    assert!(err.contains("stopped after"), "{err}");

    let text = std::fs::read_to_string(&journal).unwrap();
    let mut done = 0;
    for (i, line) in text.lines().enumerate() {
        let e: JournalEntry = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("journal line {}: {e}: {line}", i + 1));
        assert_eq!(e.pid.to_string(), me);
        assert!(!e.reason.is_empty());
        if matches!(e.outcome, numaplace_model::Outcome::Done) {
            done += 1;
        }
    }
    assert!(done > 0, "no pin was applied: {text}");
    // Our threads have their CPUs back.
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let allowed = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list"))
        .unwrap();
    assert!(
        !allowed.trim_end().ends_with("\t0"),
        "still pinned: {allowed}"
    );
    // Everything pinned was restored: the state file is gone or empty.
    let left = std::fs::read_to_string(&state).unwrap_or_default();
    assert!(!left.contains("\"tid\""), "state left behind: {left}");
    eprintln!(
        "churned {made} threads; journal has {} lines",
        text.lines().count()
    );
}
