//! Helpers the `numaplace` binary's integration tests share; each test
//! binary's main.rs (tests/it, long, deb) includes this with
//! `#[path = "../support/common.rs"] mod common;`, its modules `use
//! crate::common`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Sends `signal` to process `pid` (a child's `id()`), as `kill -SIGNAL`
/// would: SIGTERM and SIGHUP to a daemon under test.
pub(crate) fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) takes any pid and signal number and only sends; an
    // error (the process gone) is the caller's to notice.
    unsafe { libc::kill(pid as i32, signal) };
}

/// Runs the numaplace binary with `args`, without the caller's RUST_LOG.
pub(crate) fn numaplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run numaplace")
}

/// Runs the numaplace binary with `args`, which must succeed.
#[track_caller]
pub(crate) fn ok(args: &[&str]) -> Output {
    let o = numaplace(args);
    assert!(
        o.status.success(),
        "numaplace {args:?}: {}\n{}",
        o.status,
        text(&o.stderr)
    );
    o
}

/// Exit status 2, and stderr says `want`.
#[track_caller]
pub(crate) fn refused(args: &[&str], want: &str) {
    let o = numaplace(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "numaplace {args:?}: {err}");
    assert!(
        err.contains(want),
        "numaplace {args:?}: want {want:?} in:\n{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The repository's top directory.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// Fails the test (never skips it) when a program it needs is missing.
pub(crate) fn require_program(name: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{name} not found on PATH: this test needs it (Debian: apt-get install {package})"
    );
}

/// Runs a QEMU test-bed script of `tests/vm/` (after checking QEMU is
/// there) with `envs`, the path of its JSON result as its argument, and
/// returns that JSON text; its log goes to stderr, a failure fails the test.
pub(crate) fn run_guest_script(script: &str, envs: &[(&str, &std::ffi::OsStr)]) -> String {
    require_program("qemu-system-x86_64", "qemu-system-x86");
    let root = repo_root();
    let script = root.join("tests/vm").join(script);
    let dir = tempfile::tempdir().expect("temp dir");
    let json_path = dir.path().join("result.json");
    let start = std::time::Instant::now();
    let out = Command::new(&script)
        .arg(&json_path)
        .envs(envs.iter().copied())
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let log = String::from_utf8_lossy(&out.stderr);
    eprintln!("{log}");
    eprintln!("{} took {:.1?}", script.display(), start.elapsed());
    assert!(
        out.status.success(),
        "{} failed ({}) after {:.0?}; its whole output is above, what it said failed:\n{}",
        script.display(),
        out.status,
        start.elapsed(),
        what_failed(&log)
    );
    std::fs::read_to_string(&json_path).expect("the script's JSON output")
}

/// The lines of a test-bed script's log that say what went wrong (its
/// checks' `FAILED`, errors, a panic), at most 25, then its last 15 lines:
/// a failure's message carries them, so a cut CI log still shows why.
pub(crate) fn what_failed(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let telling = |l: &&str| {
        let l = l.to_ascii_lowercase();
        [
            "failed",
            "error",
            "panicked",
            "timed out",
            "refused",
            "cannot",
        ]
        .iter()
        .any(|w| l.contains(w))
    };
    let mut out: Vec<&str> = lines.iter().copied().filter(telling).take(25).collect();
    out.push("-- its last lines --");
    out.extend(&lines[lines.len().saturating_sub(15)..]);
    out.iter()
        .map(|l| format!("  | {}", l.chars().take(300).collect::<String>()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Kills and reaps a child (QEMU) when dropped, also when the test panics.
pub(crate) struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tid -> comm` of a process's threads, from /proc (empty once it is gone).
pub(crate) fn thread_names(pid: u32) -> std::collections::BTreeMap<i32, String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return std::collections::BTreeMap::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid: i32 = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        Some((tid, comm.trim_end_matches('\n').to_string()))
    })
    .collect()
}
