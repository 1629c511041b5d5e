//! `numaplace calibrate` on this machine as a user runs it: a quick run
//! writes a machine file the simulator loads and runs on, and the daemon's
//! `auto` predicts with, with the local latency measured; an existing file
//! is kept without --force.

use crate::common;

use common::{numaplace, text};
use numaplace_sim::Machine;
use numaplace_sim::machine::Source;

#[test]
fn a_quick_calibration_writes_a_machine_the_simulator_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    let file = path.to_str().unwrap();
    let o = numaplace(&["calibrate", "--quick", "-o", file]);
    let out = text(&o.stdout);
    assert!(
        o.status.success(),
        "{}\n{out}\n{}",
        o.status,
        text(&o.stderr)
    );
    assert!(out.contains("local_latency_ns"), "{out}");
    assert!(out.contains("cache sizes: from the topology"), "{out}");

    let m = Machine::load(&path).unwrap();
    let local = &m.params.local_latency_ns;
    assert!(
        matches!(&local.source, Source::Measured(s) if s.contains("pointer-chase")),
        "{local:?}"
    );
    assert!(local.value > 1.0 && local.value < 10_000.0, "{local:?}");
    let n = m.topology.nodes().len();
    assert_eq!(m.params.latency_ns.len(), n * n);
    if m.topology.packages().len() < 2 {
        assert!(
            out.contains("could not measure hitm_cross_socket_ns"),
            "{out}"
        );
        assert!(matches!(
            m.params.hitm_cross_socket_ns.source,
            Source::Assumed(_)
        ));
    }

    // The daemon reads it: auto predicts with it (`run --machine`, the
    // config's `[machine] file`), and says so at start.
    let state = dir.path().join("state.json");
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let run = |machine: &str| {
        numaplace(&[
            "-v",
            "run",
            "--dry-run",
            "--pid",
            &pid,
            "--interval",
            "100ms",
            "--rounds",
            "1",
            "--state",
            state.to_str().unwrap(),
            "--machine",
            machine,
        ])
    };
    let o = run(file);
    assert!(o.status.success(), "{}\n{}", o.status, text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!("auto predicts with the machine file {file}")),
        "{}",
        text(&o.stderr)
    );
    // Another machine's file (a preset of 2 sockets) is refused, with
    // what to do.
    let other = dir.path().join("westmere.json");
    std::fs::write(
        &other,
        Machine::preset("westmere-2s").unwrap().to_file_text(),
    )
    .unwrap();
    let o = run(other.to_str().unwrap());
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("it describes a machine of 16 CPUs in 2 nodes (westmere-2s)")
            && err.contains("run `numaplace calibrate -o"),
        "{err}"
    );
    // Not a machine file at all.
    let o = run(state.to_str().unwrap());
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("[machine] file"), "{err}");
    child.kill().unwrap();
    child.wait().unwrap();

    // pairs-core2duo: single-thread apps, first-touch memory, no node
    // bound: it fits a one-node machine.
    let o = numaplace(&[
        "simulate",
        "--machine",
        file,
        "--scenario",
        "pairs-core2duo",
    ]);
    assert!(o.status.success(), "{}\n{}", o.status, text(&o.stderr));
    assert!(
        text(&o.stdout).contains("mean runtime"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn an_existing_file_is_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    std::fs::write(&path, "keep me").unwrap();
    let file = path.to_str().unwrap();
    let o = numaplace(&["calibrate", "--quick", "-o", file]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("exists: give --force"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");

    let o = numaplace(&["calibrate", "--quick", "--force", "-o", file]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    Machine::load(&path).unwrap();
}
