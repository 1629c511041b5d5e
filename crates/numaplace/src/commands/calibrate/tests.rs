//! Tests of `calibrate`.

use super::*;

fn topo(desc: &str) -> Topology {
    Topology::synthetic(desc).unwrap()
}

fn value(ns: f64) -> Value {
    Value {
        ns,
        how: "how".into(),
        short: "short".into(),
    }
}

#[test]
fn measurements_replace_the_defaults_and_say_how() {
    let t = topo("pack:2 numa:1 l3:1(size=16MiB) core:2 pu:1");
    let generic = Machine::generic("g", t.clone());
    let m = Measurements {
        latency: vec![
            Cell {
                cpu_node: 0,
                memory_node: 0,
                ns: 100.0,
            },
            Cell {
                cpu_node: 0,
                memory_node: 1,
                ns: 150.0,
            },
            Cell {
                cpu_node: 1,
                memory_node: 1,
                ns: 110.0,
            },
        ],
        latency_how: "chase".into(),
        llc_hit: Some(value(20.0)),
        hitm_same: Some(value(40.0)),
        hitm_cross: None,
        missing: vec![("hitm_cross_socket_ns", "no".into())],
        notes: vec![],
    };
    let mc = build_machine("h", t, &m);
    let p = &mc.params;
    assert_eq!(mc.name, "h");
    assert!((p.local_latency_ns.value - 105.0).abs() < 1e-9);
    assert!(
        matches!(&p.local_latency_ns.source, Source::Measured(s) if s.starts_with("numaplace calibrate: chase"))
    );
    assert_eq!(p.latency_ns[0], 100.0);
    assert_eq!(p.latency_ns[1], 150.0);
    assert_eq!(p.latency_ns[3], 110.0);
    // Not measured: the generic entry scaled to the measured local.
    let want = generic.params.latency_ns[2] * 105.0 / 90.0;
    assert!((p.latency_ns[2] - want).abs() < 1e-9);
    assert!(matches!(&p.latency_source, Source::Measured(s) if s.contains("3 of 4 entries")));
    assert_eq!(p.llc_hit_ns.value, 20.0);
    assert_eq!(p.hitm_same_socket_ns.value, 40.0);
    assert_eq!(p.hitm_cross_socket_ns, generic.params.hitm_cross_socket_ns);
    assert_eq!(p.ghz, generic.params.ghz);
    let table = render(&mc, &m);
    assert!(
        table.contains("could not measure hitm_cross_socket_ns: no"),
        "{table}"
    );
    assert!(
        table.contains("local_latency_ns           105.0  measured"),
        "{table}"
    );
    assert!(table.contains("150.0 "), "{table}");
    assert!(table.contains("ghz"), "{table}");
    assert!(table.contains("calibrate does not measure it"), "{table}");
}

#[test]
fn nothing_measured_leaves_the_generic_machine() {
    let t = topo("pack:1 numa:1 core:2 pu:1");
    let mc = build_machine("h", t.clone(), &Measurements::default());
    assert_eq!(mc.params, Machine::generic("h", t).params);
}

#[test]
fn an_existing_file_is_kept_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    check_output(&path, false).unwrap();
    std::fs::write(&path, "x").unwrap();
    let e = check_output(&path, false).unwrap_err().0;
    assert!(e.contains("exists: give --force"), "{e}");
    check_output(&path, true).unwrap();
    assert!(
        check_output(dir.path(), true)
            .unwrap_err()
            .0
            .contains("directory")
    );
}

#[test]
fn working_sets_are_far_beyond_the_llc_within_limits() {
    // 8 x a 27.5 MiB LLC is under 256 MiB; 4 pairs.
    let (ws, note) = dram_working_set(28160 << 10, 4, 0, false);
    assert_eq!(ws, 256 * MIB);
    assert!(note.is_none());
    assert_eq!(dram_working_set(105 * MIB, 1, 0, false).0, 840 * MIB);
    // Many pairs: less per pair, but not under 2 x the LLC.
    let (ws, note) = dram_working_set(105 * MIB, 64, 0, false);
    assert_eq!(ws, 256 * MIB);
    assert!(note.unwrap().contains("not far beyond the LLC"));
    // Capped by the node's memory.
    let (ws, note) = dram_working_set(480 * MIB, 1, 8 * GIB, false);
    assert_eq!(ws, 2 * GIB);
    assert!(
        note.unwrap()
            .contains("a quarter of the smallest memory node")
    );
    let (ws, note) = dram_working_set(480 * MIB, 1, 4 * GIB, false);
    assert_eq!(ws, GIB);
    assert!(note.unwrap().contains("not far beyond"));
    assert_eq!(dram_working_set(8 * MIB, 1, 0, true).0, QUICK_DRAM_SET);
    assert_eq!(llc_working_set(16 * MIB, false), 8 * MIB);
    assert_eq!(llc_working_set(480 * MIB, true), QUICK_LLC_SET);
    assert_eq!(llc_working_set(100, false), 0);
}

#[test]
fn hitm_pairs_need_two_cores_or_two_sockets() {
    let one = topo("pack:1 numa:1 core:2 pu:2");
    assert_eq!(same_socket_pair(&one), Ok((0, 2)));
    assert!(cross_socket_pair(&one, &one).unwrap_err().contains("has 1"));
    let smt = topo("pack:1 numa:1 core:1 pu:2");
    assert!(same_socket_pair(&smt).unwrap_err().contains("two cores"));
    let two = topo("pack:2 numa:1 core:2 pu:1");
    assert_eq!(cross_socket_pair(&two, &two), Ok((0, 2)));
    let narrow = two.restrict(&"0-1".parse().unwrap()).unwrap();
    assert!(
        cross_socket_pair(&two, &narrow)
            .unwrap_err()
            .contains("may use")
    );
}
