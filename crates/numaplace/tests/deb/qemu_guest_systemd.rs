//! The Debian package's unit under Debian's systemd, in the 2-node QEMU
//! guest (tests/vm/guest-systemd-test.sh): installed by dpkg, neither
//! enabled nor started; `numaplace doctor` run with the unit's own
//! settings finds the task iterator, pinning, page moves, other users'
//! /proc and the kernel.numa_balancing write all working, each with its
//! capabilities; the started unit pins another user's process to node 1
//! and moves its pages there, holding exactly the unit's capabilities;
//! `systemctl stop` puts its affinity back.
//! Boots QEMU, so it is ignored by default; `.ci/run` runs it with
//! `--ignored`.

use crate::common;

use common::run_guest_script;
use serde_json::Value;

/// The bounding set the unit grants: CAP_DAC_READ_SEARCH (2),
/// CAP_SYS_PTRACE (19), CAP_SYS_ADMIN (21), CAP_SYS_NICE (23),
/// CAP_PERFMON (38), CAP_BPF (39).
const UNIT_CAPS: u64 = 1 << 2 | 1 << 19 | 1 << 21 | 1 << 23 | 1 << 38 | 1 << 39;

fn hex(v: &Value, key: &str) -> u64 {
    let s = v[key].as_str().unwrap_or_else(|| panic!("no {key}: {v}"));
    u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("{key} {s}: {e}"))
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn the_unit_grants_every_feature_it_needs_and_stop_restores() {
    let text = run_guest_script("guest-systemd-test.sh", &[]);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the guest's JSON does not parse: {e}\n{text}"));
    let journal = v["journal"].as_str().unwrap_or("");

    // a. Installed, neither enabled nor started.
    assert_eq!(v["dpkg_status"], 0, "{}", v["dpkg_output"]);
    assert_eq!(v["enabled_after_install"], "disabled", "{v}");
    assert_eq!(v["active_after_install"], "inactive", "{v}");

    // b. doctor under the unit's settings: every feature that needs a
    // capability has it, and what it tries works (the sysctl write passes
    // ProtectKernelTunables through ReadWritePaths; bpf and
    // perf_event_open pass the system call filter).
    let rows = v["doctor"].as_array().unwrap_or_else(|| panic!("{v}"));
    let row = |id: &str| {
        rows.iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no {id} row: {rows:?}"))
    };
    for id in [
        "topology",
        "task-iterator",
        "pinning",
        "moving-memory",
        "memory-per-node",
        "kernel-balancing-switch",
    ] {
        let r = row(id);
        assert_eq!(r["status"], "ok", "{id}: {r}");
        if id != "topology" {
            assert_eq!(r["caps"]["missing"], serde_json::json!([]), "{id}: {r}");
        }
    }
    assert!(
        row("task-iterator")["source"]
            .as_str()
            .unwrap()
            .starts_with("BPF task iterator"),
        "{}",
        row("task-iterator")
    );
    assert!(
        row("kernel-balancing-switch")["source"]
            .as_str()
            .unwrap()
            .contains("written back as it was"),
        "{}",
        row("kernel-balancing-switch")
    );
    // The static policy reads no counter: ready.
    assert_eq!(v["doctor_exit"], 0, "{rows:?}");

    // The daemon holds exactly the unit's capabilities.
    assert_eq!(v["daemon_exe"], "/usr/bin/numaplace", "{v}");
    assert_eq!(hex(&v, "daemon_capbnd"), UNIT_CAPS, "{v}");
    assert_eq!(hex(&v, "daemon_capeff"), UNIT_CAPS, "{v}");

    // c-d. nobody's touch_memory, started on node 0, placed on node 1 by
    // the unit: its CPUs and its pages.
    assert_eq!(v["tm_user"], "nobody");
    assert_eq!(v["tm_cpus_before"], "0-3");
    assert_eq!(v["tm_node1_pages_before"], 0, "touched on node 0: {v}");
    assert_eq!(v["node1_cpus"], "2-3");
    assert_eq!(v["start_status"], 0, "{journal}");
    assert_eq!(v["placed"], true, "{v}\n{journal}");
    assert_eq!(v["tm_cpus_placed"], "2-3");
    assert!(v["tm_node1_pages_placed"].as_u64().unwrap() >= 7000, "{v}");
    assert_eq!(v["active_while_placing"], "active", "{journal}");
    assert_eq!(v["restarts"], 0, "{journal}");

    // e. Stopped: its affinity as it was, the unit ended cleanly.
    assert_eq!(v["stop_status"], 0, "{journal}");
    assert_eq!(v["tm_cpus_after_stop"], "0-3", "{journal}");
    assert_eq!(v["result_after_stop"], "success", "{journal}");
}
