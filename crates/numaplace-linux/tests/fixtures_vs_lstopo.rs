//! numaplace's discovery against hwloc's own `lstopo-no-graphics` on real
//! machines' sysfs snapshots: other projects' (tests/fixtures/sysfs, plus any
//! in shared/fixtures/sysfs beside the repository) and
//! this repository's captures (tests/fixtures: this host's kind and QEMU
//! guests with 2 and 4 nodes).
//!
//! For each: the same number of packages, NUMA nodes, L3 domains, cores and
//! CPUs; the same cpuset per node and per L3; the same distances. One
//! documented difference: where a cgroup leaves us none of an L3's CPUs,
//! lstopo keeps the L3 with an empty cpuset and numaplace drops it (no
//! thread of ours can share it); both keep such a package and its nodes.

#[path = "support/lstopo.rs"]
mod lstopo;

use std::path::Path;

use lstopo::*;
use numaplace_linux::{SysRoot, TopologySource, discover};
use numaplace_model::{CacheKind, CpuSet, Topology};

fn list(s: &CpuSet) -> Vec<u32> {
    s.iter().collect()
}

fn compare(tarball: &Path) {
    require_lstopo();
    let tmp = tempfile::tempdir().unwrap();
    let root = extract_fixture(tarball, tmp.path());
    let want = lstopo_view(&root);
    let got: Topology = discover(&TopologySource::Sysfs(SysRoot::new(&root).unwrap()))
        .unwrap_or_else(|e| panic!("{}: {e}", tarball.display()));
    let name = tarball.file_name().unwrap().to_string_lossy();

    assert_eq!(got.packages().len(), want.packages, "{name}: packages");
    assert_eq!(got.cores().len(), want.cores, "{name}: cores");
    assert_eq!(list(got.span()), want.pus, "{name}: CPUs");
    assert_eq!(got.cpus().len(), want.pus.len(), "{name}: CPU count");

    // NUMA nodes: kernel ids, cpusets (hwloc's cpuset is our locality),
    // memory; home CPUs partition the machine within each locality.
    let nodes: Vec<(u32, Vec<u32>, u64)> = got
        .nodes()
        .iter()
        .map(|n| (n.os_id, list(&n.locality), n.memory))
        .collect();
    let want_nodes: Vec<(u32, Vec<u32>, u64)> = want
        .numa_nodes
        .iter()
        .map(|n| (n.os_index, n.cpus.clone(), n.local_memory))
        .collect();
    assert_eq!(
        nodes, want_nodes,
        "{name}: NUMA nodes (kernel id, cpuset, memory)"
    );
    // Home CPUs: within the node's cpuset, except CPUs that are in no
    // node of lstopo's (their node is offline) and were adopted.
    let in_some_node: CpuSet = want
        .numa_nodes
        .iter()
        .flat_map(|n| n.cpus.iter().copied())
        .collect();
    for n in got.nodes() {
        let extra = n.span.difference(&n.locality);
        assert!(
            !extra.intersects(&in_some_node),
            "{name}: node {} claims CPUs {} of another node",
            n.os_id,
            extra
        );
    }

    // L3 domains with CPUs of ours.
    let mut l3: Vec<Vec<u32>> = got
        .caches()
        .iter()
        .filter(|c| c.level == 3 && c.kind != CacheKind::Instruction)
        .map(|c| list(&c.span))
        .collect();
    l3.sort();
    let mut want_l3: Vec<Vec<u32>> = want.l3.iter().filter(|s| !s.is_empty()).cloned().collect();
    want_l3.sort();
    assert_eq!(l3, want_l3, "{name}: L3 cpusets");
    // And the LLC domains policies use are the outermost caches lstopo shows.
    let mut llc: Vec<Vec<u32>> = got.llcs().iter().map(|l| list(&l.span)).collect();
    llc.sort();
    let mut want_llc: Vec<Vec<u32>> = want.llc.iter().filter(|s| !s.is_empty()).cloned().collect();
    want_llc.sort();
    if !want_llc.is_empty() {
        assert_eq!(llc, want_llc, "{name}: LLC domains");
    }

    // Distances, by kernel node id.
    match &want.distances {
        Some(d) => {
            assert!(got.distances_reported(), "{name}: distances missing");
            for a in got.nodes() {
                for b in got.nodes() {
                    assert_eq!(
                        Some(got.distance(a.id, b.id) as u64),
                        d.get(a.os_id, b.os_id),
                        "{name}: distance {} -> {}",
                        a.os_id,
                        b.os_id
                    );
                }
            }
        }
        None => assert!(
            got.nodes().len() == 1 || !got.distances_reported(),
            "{name}: numaplace reports distances lstopo does not"
        ),
    }

    // And what numaplace prints for programs reads back to the same machine.
    let json = serde_json::to_string(&got).unwrap();
    let back: Topology = serde_json::from_str(&json).unwrap();
    assert_eq!(back, got, "{name}: JSON round trip");
}

#[test]
fn every_real_machine_snapshot_matches_lstopo() {
    let all = all_fixture_tarballs();
    assert!(
        all.len() >= 9,
        "expected the 9 snapshots of tests/fixtures/sysfs, found {}",
        all.len()
    );
    for t in all {
        compare(&t);
    }
}

#[test]
fn every_own_capture_matches_lstopo() {
    let all = tarballs_in(&own_fixtures_dir());
    let names: Vec<String> = all
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in ["host-1node", "qemu-2node", "qemu-4node"] {
        assert!(
            names.iter().any(|n| n.starts_with(want)),
            "tests/fixtures lacks the {want} capture (tests/vm/capture-fixtures.sh makes it); have {names:?}"
        );
    }
    for t in all {
        compare(&t);
    }
}

/// Traps the shared snapshots hold, checked on numaplace's side.
#[test]
fn traps_of_real_machines() {
    let load = |name: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let root = extract_fixture(&fixtures_dir().join(name), tmp.path());
        let t = discover(&TopologySource::Sysfs(SysRoot::new(&root).unwrap())).unwrap();
        (tmp, t)
    };

    // Sub-NUMA clustering with CPU-less memory nodes: nodes 4 and 5 have
    // memory only; CPUs belong to nodes 0-3; one L3 spans two nodes.
    let (_d, t) = load("nri-server.tar.xz");
    let cpuless: Vec<u32> = t
        .nodes()
        .iter()
        .filter(|n| n.span.is_empty())
        .map(|n| n.os_id)
        .collect();
    assert_eq!(cpuless, vec![4, 5]);
    assert_eq!(t.node_by_os_id(4).unwrap().package, Some(0));
    assert_eq!(t.llcs().len(), 2);
    assert_eq!(t.llcs()[0].nodes.len(), 2);
    assert_eq!(t.cpus().len(), 112);

    // CPU 0 and node 0 offline: sparse ids, no CPU 0 anywhere; package 0's
    // CPUs take their memory from node 1, the only node left.
    let (_d, t) = load("offline-cpu0-node0.tar.bz2");
    assert!(t.cpu_by_os_id(0).is_none());
    assert!(t.node_by_os_id(0).is_none());
    assert_eq!(t.nodes().len(), 1);
    assert_eq!(t.cpu_by_os_id(4).unwrap().node, 0);
    assert_eq!(t.nodes()[0].package, Some(1));
    assert_eq!(t.cpus().len(), 17);

    // Sparse node ids (0,1,2,33,34,45,72,73): dense ids stay 0..8.
    let (_d, t) = load("48amd64-4pa2n6c-sparse.tar.bz2");
    let ids: Vec<u32> = t.nodes().iter().map(|n| n.os_id).collect();
    assert_eq!(ids, vec![0, 1, 2, 33, 34, 45, 72, 73]);
    assert_eq!(t.nodes()[7].id, 7);

    // A cgroup cpuset leaves 6 CPUs; packages 1 and 2 keep only memory.
    let (_d, t) = load("32amd64-4s2n4c-cgroup2.tar.bz2");
    assert_eq!(list(t.span()), (0..6).collect::<Vec<_>>());
    assert_eq!(t.packages().len(), 3);
    assert!(t.packages()[1].span.is_empty());
    assert_eq!(t.packages()[1].nodes.len(), 2);
}
