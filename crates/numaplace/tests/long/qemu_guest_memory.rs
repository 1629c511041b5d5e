//! Memory placement seen from inside a 2-node QEMU guest: a process binds
//! 64 MiB to node 1 (`alloc_on_node 1 64`) and `numaplace tasks --pid` must
//! report it there. Boots QEMU (tests/vm/guest-memory-test.sh), so it is
//! ignored by default; `.ci/run` runs it with `--ignored`.

use crate::common;

use common::run_guest_script;

use numaplace_model::{GroupKind, Snapshot};

const MIB: u64 = 1 << 20;

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn memory_bound_to_node_1_is_reported_on_node_1() {
    let text = run_guest_script("guest-memory-test.sh", &[]);
    let snap: Snapshot = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("numaplace's JSON from the guest does not parse: {e}\n{text}"));

    let group = snap
        .groups
        .iter()
        .find(|g| g.cmdline.first().map(String::as_str) == Some("alloc_on_node"))
        .unwrap_or_else(|| panic!("no alloc_on_node process in the guest's snapshot:\n{text}"));
    assert_eq!(group.kind, GroupKind::Process, "{text}");
    assert_eq!(group.cmdline, ["alloc_on_node", "1", "64"], "{text}");
    let memory = group
        .memory
        .as_ref()
        .unwrap_or_else(|| panic!("no per-node memory for pid {}:\n{text}", group.pid));
    let anon = |node: u32| memory.get(&node).map_or(0, |m| m.anon);
    assert!(
        anon(1) >= 60 * MIB,
        "node 1 holds {} bytes of anonymous memory of pid {}, want >= 60 MiB: {memory:?}",
        anon(1),
        group.pid
    );
    assert!(
        anon(0) < 16 * MIB,
        "node 0 holds {} bytes of anonymous memory of pid {}, want < 16 MiB: {memory:?}",
        anon(0),
        group.pid
    );
}

/// The 4-node guest (4 sockets, asymmetric distances as on a 4-socket
/// Opteron): memory bound to node 3 is reported there, and numaplace's
/// discovery on this real 4-node kernel sees the machine QEMU was given.
#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn four_nodes_memory_on_node_3_and_live_topology() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topo_path = dir.path().join("guest-topology.json");
    let text = run_guest_script(
        "guest-memory-test.sh",
        &[
            ("NUMAPLACE_VM_NODES", "4".as_ref()),
            ("NUMAPLACE_VM_TARGET_NODE", "3".as_ref()),
            ("NUMAPLACE_VM_TOPOLOGY_OUT", topo_path.as_os_str()),
        ],
    );
    let snap: Snapshot = serde_json::from_str(&text).unwrap();
    let g = &snap.groups[0];
    assert_eq!(g.cmdline, ["alloc_on_node", "3", "64"]);
    let mem = g.memory.as_ref().expect("memory per node");
    assert!(mem.get(&3).is_some_and(|m| m.anon >= 60 * MIB), "{mem:?}");
    for n in 0..3 {
        assert!(
            mem.get(&n).map_or(0, |m| m.anon) < 16 * MIB,
            "node {n}: {mem:?}"
        );
    }

    let t: numaplace_model::Topology =
        serde_json::from_str(&std::fs::read_to_string(&topo_path).unwrap()).unwrap();
    assert_eq!(t.packages().len(), 4);
    assert_eq!(t.nodes().len(), 4);
    assert_eq!(t.cpus().len(), 8);
    assert!(t.distances_reported());
    // tests/vm/boot.sh: square 0-1-3-2-0, 16 to a neighbour, 22 across.
    let d: Vec<u32> = t.distances().to_vec();
    assert_eq!(
        d,
        vec![
            10, 16, 16, 22, 16, 10, 22, 16, 16, 22, 10, 16, 22, 16, 16, 10
        ]
    );
    for n in t.nodes() {
        assert_eq!(n.span.len(), 2, "node {}: {}", n.os_id, n.span);
        assert_eq!(n.package, Some(n.id));
    }
}
