//! numaplace's discovery against hwloc's own `lstopo-no-graphics` on real
//! machines' sysfs snapshots: every one in tests/fixtures/sysfs and its
//! hwloc-linux/ (ia64, s390, ppc, ARM, fake trees...), plus any in the
//! directory NUMAPLACE_EXTRA_SYSFS_FIXTURES names, and this repository's
//! captures (tests/fixtures: this host's kind and QEMU guests with 2 and 4
//! nodes). No snapshot is skipped: each either agrees or the test fails,
//! naming every snapshot that differs and how.
//!
//! What "agrees" means, level by level:
//! * CPUs (PUs): the same kernel ids.
//! * Packages: the same cpusets (a package a cgroup leaves CPU-less
//!   counts, empty), plus one: the CPUs hwloc puts in no package are one
//!   package in numaplace, since every CPU needs a package. So a machine
//!   where hwloc finds no package at all (no package information, as in
//!   some fake trees) is one package of all its CPUs, and where hwloc
//!   drops a package over contradicting files (40intel64-4n10c+pci-conflicts)
//!   its CPUs are one package again.
//! * Cores: the same cpusets; a PU that hwloc puts in no core (no
//!   `core_id` in the tree) is a core of its own in numaplace.
//! * NUMA nodes: kernel id, cpuset (hwloc's cpuset is our locality) and
//!   memory; home CPUs partition the machine within each locality.
//! * L3 domains, and LLC domains: each CPU's LLC domain is the outermost
//!   data/unified cache hwloc shows above it; CPUs under no cache at all
//!   (trees without cache information) share their package's domain. A
//!   cache hwloc puts inside a core (one per hardware thread) counts as one
//!   of the whole core: numaplace places threads by core.
//!   Where a cgroup leaves us none of a cache's CPUs, lstopo keeps it with
//!   an empty cpuset and numaplace drops it (no thread of ours can share
//!   it); both keep such a package and its nodes.
//! * Distances: the same matrix by kernel node id.

use crate::lstopo;

use std::path::Path;

use lstopo::*;
use numaplace_linux::{RepairKind, SysRoot, TopologySource, discover, discover_repaired};
use numaplace_model::{CacheKind, CpuSet, Topology};

fn list(s: &CpuSet) -> Vec<u32> {
    s.iter().collect()
}

fn sets(v: &[Vec<u32>]) -> String {
    let parts: Vec<String> = v.iter().map(|s| format!("[{}]", fmt_list(s))).collect();
    parts.join(" ")
}

/// Pushes a difference onto `diffs` when `got != want`.
fn same<T: PartialEq + std::fmt::Debug>(diffs: &mut Vec<String>, what: &str, got: T, want: T) {
    if got != want {
        diffs.push(format!("{what}: numaplace {got:?}, lstopo {want:?}"));
    }
}

fn same_sets(diffs: &mut Vec<String>, what: &str, mut got: Vec<Vec<u32>>, mut want: Vec<Vec<u32>>) {
    got.sort();
    want.sort();
    if got != want {
        diffs.push(format!(
            "{what}: numaplace {} ({}), lstopo {} ({})",
            sets(&got),
            got.len(),
            sets(&want),
            want.len()
        ));
    }
}

/// Every way numaplace's view of the snapshot differs from lstopo's; empty
/// when they agree. A refusal is a difference.
fn differences(tarball: &Path) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let root = extract_fixture(tarball, tmp.path());
    differences_at(&root, &tarball.file_name().unwrap().to_string_lossy())
}

/// The snapshots whose files contradict each other in a way that changes
/// packages, with the repair each needs; every other snapshot needs none
/// of these.
const PACKAGE_REPAIRS: [(&str, RepairKind); 2] = [
    ("16ia64-8n2s.tar.bz2", RepairKind::DuplicatePackageId),
    (
        "40intel64-4n10c+pci-conflicts.tar.bz2",
        RepairKind::CpusInNoPackage,
    ),
];

/// A cache hwloc puts inside a core (one per hardware thread) stands for
/// the whole core: numaplace places threads by core.
fn widened(cpus: &[u32], cores: &[Vec<u32>]) -> Vec<u32> {
    cores
        .iter()
        .find(|c| c.len() > cpus.len() && cpus.iter().all(|x| c.contains(x)))
        .cloned()
        .unwrap_or_else(|| cpus.to_vec())
}

fn differences_at(root: &Path, name: &str) -> Vec<String> {
    let want = lstopo_view(root);
    let found = match discover_repaired(&TopologySource::Sysfs(SysRoot::new(root).unwrap())) {
        Ok(d) => d,
        Err(e) => return vec![format!("refused: {e}")],
    };
    let got = &found.topology;
    let mut diffs = Vec::new();

    // Package repairs: exactly those the table names, each once.
    let package_repairs: Vec<RepairKind> = found
        .repairs
        .iter()
        .map(|r| r.kind)
        .filter(|k| {
            matches!(
                k,
                RepairKind::DuplicatePackageId | RepairKind::CpusInNoPackage
            )
        })
        .collect();
    let expected: Vec<RepairKind> = PACKAGE_REPAIRS
        .iter()
        .filter(|(n, _)| *n == name)
        .map(|(_, k)| *k)
        .collect();
    same(&mut diffs, "package repairs", package_repairs, expected);

    cpu_and_core_diffs(&mut diffs, got, &want);

    node_diffs(&mut diffs, got, &want);

    cache_diffs(&mut diffs, got, &want);

    distance_diffs(&mut diffs, got, &want);

    // And what numaplace prints for programs reads back to the same machine.
    let json = serde_json::to_string(got).unwrap();
    let back: Topology = serde_json::from_str(&json).unwrap();
    if back != *got {
        diffs.push("JSON round trip changes the topology".into());
    }
    diffs
}

/// The CPUs, packages and cores.
fn cpu_and_core_diffs(diffs: &mut Vec<String>, got: &Topology, want: &LstopoView) {
    same(diffs, "CPUs", list(got.span()), want.pus.clone());
    same(diffs, "CPU count", got.cpus().len(), want.pus.len());

    let got_packages: Vec<Vec<u32>> = got.packages().iter().map(|p| list(&p.span)).collect();
    let mut want_packages = want.package_cpus.clone();
    let packageless: Vec<u32> = want
        .pus
        .iter()
        .copied()
        .filter(|pu| !want.package_cpus.iter().any(|p| p.contains(pu)))
        .collect();
    if !packageless.is_empty() {
        want_packages.push(packageless);
    }
    same_sets(diffs, "packages", got_packages, want_packages);

    let got_cores: Vec<Vec<u32>> = got.cores().iter().map(|c| list(&c.span)).collect();
    let mut want_cores: Vec<Vec<u32>> = want
        .core_cpus
        .iter()
        .filter(|c| !c.is_empty())
        .cloned()
        .collect();
    for &pu in &want.pus {
        if !want.core_cpus.iter().any(|c| c.contains(&pu)) {
            want_cores.push(vec![pu]);
        }
    }
    same_sets(diffs, "cores", got_cores, want_cores);
}

/// NUMA nodes and their home CPUs.
fn node_diffs(diffs: &mut Vec<String>, got: &Topology, want: &LstopoView) {
    // NUMA nodes: kernel ids, cpusets (hwloc's cpuset is our locality),
    // memory; home CPUs partition the machine within each locality.
    let nodes: Vec<(u32, String, u64)> = got
        .nodes()
        .iter()
        .map(|n| (n.os_id, n.locality.to_string(), n.memory))
        .collect();
    let want_nodes: Vec<(u32, String, u64)> = want
        .numa_nodes
        .iter()
        .map(|n| (n.os_index, fmt_list(&n.cpus), n.local_memory))
        .collect();
    same(
        diffs,
        "NUMA nodes (kernel id, cpuset, memory)",
        nodes,
        want_nodes,
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
        if extra.intersects(&in_some_node) {
            diffs.push(format!(
                "node {} claims CPUs {} of another node",
                n.os_id, extra
            ));
        }
    }
}

/// The L3 and LLC domains.
fn cache_diffs(diffs: &mut Vec<String>, got: &Topology, want: &LstopoView) {
    // L3 domains with CPUs of ours.
    let l3: Vec<Vec<u32>> = got
        .caches()
        .iter()
        .filter(|c| c.level == 3 && c.kind != CacheKind::Instruction)
        .map(|c| list(&c.span))
        .collect();
    let mut want_l3: Vec<Vec<u32>> = want
        .l3
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| widened(s, &want.core_cpus))
        .collect();
    want_l3.sort();
    want_l3.dedup();
    same_sets(diffs, "L3 cpusets", l3, want_l3);

    // The LLC domains policies use: each CPU's outermost cache, or its
    // package where no cache is known.
    let llc: Vec<Vec<u32>> = got.llcs().iter().map(|l| list(&l.span)).collect();
    let (want_llc, uncached) = want.outermost_caches();
    let mut want_llc: Vec<Vec<u32>> = want_llc
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| widened(s, &want.core_cpus))
        .collect();
    want_llc.sort();
    want_llc.dedup();
    for p in got.packages() {
        let mine: Vec<u32> = uncached
            .iter()
            .copied()
            .filter(|&c| p.span.contains(c))
            .collect();
        if !mine.is_empty() {
            want_llc.push(mine);
        }
    }
    same_sets(diffs, "LLC domains", llc, want_llc);
}

/// The distances between nodes.
fn distance_diffs(diffs: &mut Vec<String>, got: &Topology, want: &LstopoView) {
    // Distances, by kernel node id.
    match &want.distances {
        Some(d) => {
            if !got.distances_reported() {
                diffs.push("distances: numaplace none, lstopo has them".into());
            } else {
                for a in got.nodes() {
                    for b in got.nodes() {
                        let (g, w) = (
                            Some(got.distance(a.id, b.id) as u64),
                            d.get(a.os_id, b.os_id),
                        );
                        if g != w {
                            diffs.push(format!(
                                "distance {} -> {}: numaplace {g:?}, lstopo {w:?}",
                                a.os_id, b.os_id
                            ));
                        }
                    }
                }
            }
        }
        None => {
            if got.nodes().len() > 1 && got.distances_reported() {
                diffs.push("distances: numaplace reports some, lstopo none".into());
            }
        }
    }
}

/// Compares each of `tarballs`, printing one line per snapshot, and fails
/// naming every snapshot that differs and how.
fn all_agree(tarballs: &[std::path::PathBuf]) {
    require_lstopo();
    // Each snapshot extracted and read by lstopo on a thread of its own,
    // as many at once as there are CPUs (one at a time, this was the
    // longest test binary but two on a 2-CPU CI machine).
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new(vec![Vec::new(); tarballs.len()]);
    std::thread::scope(|s| {
        for _ in 0..workers.min(tarballs.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(t) = tarballs.get(i) else { break };
                    let diffs = differences(t);
                    found.lock().unwrap()[i] = diffs;
                }
            });
        }
    });
    let found = found.into_inner().unwrap();
    let mut failed = Vec::new();
    for (t, diffs) in tarballs.iter().zip(found) {
        let name = t.file_name().unwrap().to_string_lossy();
        if diffs.is_empty() {
            println!("agrees: {name}");
        } else {
            println!("DIFFERS: {name}");
            for d in &diffs {
                failed.push(format!("{name}: {d}"));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "numaplace and lstopo differ on {} point(s):\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn every_real_machine_snapshot_matches_lstopo() {
    let all = all_fixture_tarballs();
    let names: Vec<String> = all
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // The repository ships 9 snapshots in tests/fixtures/sysfs and 25 in
    // its hwloc-linux/: a missing folder must not shrink the test.
    assert!(
        all.len() >= 34,
        "expected the 34 snapshots of tests/fixtures/sysfs and its hwloc-linux/, found {}: {names:?}",
        all.len()
    );
    for want in [
        "nri-server.tar.xz",
        "16ia64-8n2s.tar.bz2",
        "2arm-2c.tar.bz2",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    all_agree(&all);
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
    all_agree(&all);
}

/// A tree whose cache lists name one hardware thread where the core has
/// two (16em64t-4s2c2t with every `shared_cpu_map` cut down to its own
/// CPU): hwloc puts an L1, L2 and L3 per thread inside each core. numaplace
/// reads it, reports the repair, and otherwise agrees with lstopo.
#[test]
fn caches_split_across_a_cores_threads_are_repaired_and_agree() {
    require_lstopo();
    let tmp = tempfile::tempdir().unwrap();
    let root = extract_fixture(&fixtures_dir().join("16em64t-4s2c2t.tar.bz2"), tmp.path());
    let cpu_dir = root.join("sys/devices/system/cpu");
    let mut cut = 0;
    for entry in std::fs::read_dir(&cpu_dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(n) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(indexes) = std::fs::read_dir(path.join("cache")) else {
            continue;
        };
        let own = 1u64 << n;
        for index in indexes {
            let map = index.unwrap().path().join("shared_cpu_map");
            std::fs::write(
                &map,
                format!("{:08x},{:08x}\n", own >> 32, own & 0xffff_ffff),
            )
            .unwrap();
            let _ = std::fs::remove_file(map.with_file_name("shared_cpu_list"));
            cut += 1;
        }
    }
    assert!(cut >= 16, "only {cut} cache lists cut");
    let want = lstopo_view(&root);
    let per_thread = want
        .caches
        .iter()
        .filter(|(level, cpus)| *level == 1 && cpus.len() == 1)
        .count();
    assert_eq!(
        per_thread, 16,
        "lstopo does not see per-thread L1s:\n{want}"
    );

    let d = differences_at(&root, "16em64t-4s2c2t with per-thread caches");
    assert!(d.is_empty(), "{}", d.join("\n"));
    let found = discover_repaired(&TopologySource::Sysfs(SysRoot::new(&root).unwrap())).unwrap();
    let kinds: Vec<RepairKind> = found.repairs.iter().map(|r| r.kind).collect();
    // One repair each for L1, L2 and L3.
    assert_eq!(
        kinds,
        vec![RepairKind::CacheInsideCore; 3],
        "{:?}",
        found.repairs
    );
    assert!(found.topology.cores().iter().all(|c| c.span.len() == 2));
    assert_eq!(found.topology.llcs().len(), 8, "one LLC domain per core");
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
