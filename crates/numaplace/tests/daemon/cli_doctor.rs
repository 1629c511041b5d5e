//! `numaplace doctor` with capabilities taken away (`setpriv
//! --bounding-set`, util-linux), as a unit's `CapabilityBoundingSet=` takes
//! them: the row of each feature names the capability it lacks and the
//! unit line that grants it, and the exit status says whether the policy
//! has what it reads. Needs root (only root holds the capabilities to drop).

use crate::common;

use std::process::{Command, Output};

use common::{require_program, text};
use serde_json::Value;

/// The capabilities the unit bounded before issue 34: no CAP_BPF, no
/// CAP_SYS_ADMIN.
const OLD_UNIT: &str = "-all,+sys_nice,+sys_ptrace,+perfmon,+dac_read_search";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: needs root (the capabilities to drop)");
    }
    root
}

/// `numaplace ARGS` under `setpriv --bounding-set=BOUNDING`.
fn doctor_bounded(bounding: &str, args: &[&str]) -> Output {
    require_program("setpriv", "util-linux");
    Command::new("setpriv")
        .arg(format!("--bounding-set={bounding}"))
        .arg(env!("CARGO_BIN_EXE_numaplace"))
        .arg("doctor")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run setpriv")
}

fn row<'a>(rows: &'a Value, id: &str) -> &'a Value {
    rows.as_array()
        .expect("doctor's JSON is an array of rows")
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row {id}: {rows}"))
}

/// A config that lets auto switch kernel.numa_balancing: scope all.
fn auto_machine_wide() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("numaplace.toml");
    std::fs::write(&path, "[scope]\nall = true\n").unwrap();
    let p = path.to_str().unwrap().to_string();
    (dir, p)
}

#[test]
fn the_old_units_bounding_set_is_named_cap_by_cap_with_the_line_that_grants_it() {
    if !is_root() {
        return;
    }
    let (_dir, config) = auto_machine_wide();
    let o = doctor_bounded(OLD_UNIT, &["--json", "--config", &config]);
    let rows: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&o.stdout), text(&o.stderr)));
    // The task iterator: CAP_BPF missing, not even in the bounding set.
    let it = row(&rows, "task-iterator");
    assert_eq!(it["status"], "partial", "{it}");
    assert_eq!(
        it["caps"]["missing"],
        serde_json::json!(["CAP_BPF"]),
        "{it}"
    );
    assert_eq!(
        it["caps"]["not_in_bounding_set"],
        serde_json::json!(["CAP_BPF"])
    );
    // The sysctl: tried, refused by the kernel, CAP_SYS_ADMIN named; auto
    // with scope all needs it, so doctor is not ready.
    let sysctl = row(&rows, "kernel-balancing-switch");
    assert_eq!(sysctl["status"], "missing", "{sysctl}");
    assert!(
        sysctl["source"]
            .as_str()
            .unwrap()
            .contains("refuses the write without CAP_SYS_ADMIN"),
        "{sysctl}"
    );
    assert_eq!(
        sysctl["caps"]["missing"],
        serde_json::json!(["CAP_SYS_ADMIN"])
    );
    assert_eq!(sysctl["needed"], true);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    // What the old unit had works.
    for id in ["pinning", "moving-memory", "memory-per-node"] {
        assert_eq!(row(&rows, id)["status"], "ok", "{id}: {rows}");
    }

    // The table says the same in words, with the unit line.
    let o = doctor_bounded(OLD_UNIT, &["--config", &config]);
    let out = text(&o.stdout);
    assert!(
        out.contains("missing CAP_BPF (CAP_BPF not even in the bounding set)"),
        "{out}"
    );
    assert!(out.contains("`CapabilityBoundingSet=CAP_BPF`"), "{out}");
    assert!(
        out.contains("`CapabilityBoundingSet=CAP_SYS_ADMIN`"),
        "{out}"
    );
    assert!(out.contains("kernel-balancing-switch"), "{out}");
    assert!(out.trim_end().ends_with("(exit status 3)"), "{out}");
    assert_eq!(o.status.code(), Some(3));
}

#[test]
fn the_exit_status_follows_what_the_policy_reads() {
    if !is_root() {
        return;
    }
    // numad-like reads the topology, pinning, page moves and memory per
    // node, and no counter: all there as root, on any machine.
    let all = doctor_bounded("+all", &["--policy", "numad-like"]);
    let out = text(&all.stdout);
    assert_eq!(all.status.code(), Some(0), "{out}{}", text(&all.stderr));
    assert!(
        out.trim_end()
            .ends_with("numad-like has everything it reads here (exit status 0)"),
        "{out}"
    );
    // Without CAP_SYS_NICE it pins only root's own tasks: not ready.
    let o = doctor_bounded("-sys_nice", &["--policy", "numad-like"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}{}", text(&o.stderr));
    assert!(
        out.contains("pinning other users' tasks needs CAP_SYS_NICE: missing CAP_SYS_NICE"),
        "{out}"
    );
    assert!(
        out.contains("numad-like reads what does not fully work here: pinning (exit status 3)"),
        "{out}"
    );
    // `default` places nothing: the same process is ready for it.
    let o = doctor_bounded("-sys_nice", &["--policy", "default"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    // A policy that does not exist is a bad argument, not a verdict.
    let o = doctor_bounded("+all", &["--policy", "nonesuch"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--policy"), "{}", text(&o.stderr));
}
