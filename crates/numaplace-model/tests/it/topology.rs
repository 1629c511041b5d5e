//! Topology construction: relations, traps of real machines, refusals.

use numaplace_model::*;

fn set(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

#[test]
fn synthetic_two_packages() {
    let t = Topology::synthetic("pack:2 l3:1 core:4 pu:2").unwrap();
    assert_eq!(t.packages().len(), 2);
    assert_eq!(t.nodes().len(), 1);
    assert_eq!(t.llcs().len(), 2);
    assert_eq!(t.cores().len(), 8);
    assert_eq!(t.cpus().len(), 16);
    assert_eq!(t.smt_width(), 2);
    assert_eq!(t.packages()[1].span, set("8-15"));
    assert_eq!(t.llcs()[1].span, set("8-15"));
    assert_eq!(t.llc_size(0), Some(16 << 20));
    assert_eq!(t.cores()[5].span, set("10-11"));
    assert_eq!(
        t.cores()[5].os_id,
        5,
        "core ids count across the machine, as hwloc's synthetic ones"
    );
    assert_eq!(t.cpus()[11].core, 5);
    assert_eq!(t.distance(0, 0), 10);
    assert!(!t.distances_reported());
    assert_eq!(t.total_memory(), 1 << 30);
}

#[test]
fn sub_numa_clustering_llc_spans_nodes() {
    // One L3 per package, two nodes under it (Intel SNC2).
    let t = Topology::synthetic("pack:2 l3:1(size=30MiB) numa:2(memory=8GiB) core:4 pu:1").unwrap();
    assert_eq!(t.nodes().len(), 4);
    assert_eq!(t.llcs().len(), 2);
    assert_eq!(t.llcs()[0].nodes, vec![0, 1]);
    assert_eq!(t.nodes()[1].span, set("4-7"));
    assert_eq!(t.nodes()[1].package, Some(0));
    assert_eq!(t.nodes()[3].llcs, vec![1]);
    assert_eq!(t.llc_size(1), Some(30 << 20));
    assert_eq!(t.total_memory(), 32 << 30);
}

#[test]
fn node_with_several_llcs() {
    // AMD Zen: several CCX L3s per node.
    let t = Topology::synthetic("pack:1 numa:2 l3:2 core:4 pu:2").unwrap();
    assert_eq!(t.llcs().len(), 4);
    assert_eq!(t.nodes()[0].llcs, vec![0, 1]);
    assert_eq!(t.llcs()[3].nodes, vec![1]);
}

fn two_socket_desc() -> TopologyDesc {
    TopologyDesc {
        source: "test".into(),
        packages: vec![
            PackageDesc {
                os_id: 0,
                cpus: set("0,2"),
            },
            PackageDesc {
                os_id: 1,
                cpus: set("1,3"),
            },
        ],
        cores: vec![
            CoreDesc {
                os_id: 0,
                cpus: set("0"),
            },
            CoreDesc {
                os_id: 1,
                cpus: set("2"),
            },
            CoreDesc {
                os_id: 0,
                cpus: set("1"),
            },
            CoreDesc {
                os_id: 1,
                cpus: set("3"),
            },
        ],
        nodes: vec![
            NodeDesc {
                os_id: 1,
                memory: 100,
                cpus: set("1,3"),
                locality: set("1,3"),
                package: None,
            },
            NodeDesc {
                os_id: 0,
                memory: 200,
                cpus: set("0,2"),
                locality: set("0,2"),
                package: None,
            },
            // CPU-less memory near package 0 (persistent memory, CXL).
            NodeDesc {
                os_id: 4,
                memory: 1000,
                cpus: CpuSet::new(),
                locality: set("0,2"),
                package: None,
            },
        ],
        caches: vec![],
        // In the order of `nodes` above: 1, 0, 4.
        distances: Some(vec![10, 21, 28, 21, 10, 17, 28, 17, 10]),
        cpu_kinds: vec![],
    }
}

#[test]
fn interleaved_ids_cpu_less_node_and_distances() {
    let t = Topology::new(two_socket_desc()).unwrap();
    // Dense order follows packages; kernel ids interleave between them.
    let os: Vec<u32> = t.cpus().iter().map(|c| c.os_id).collect();
    assert_eq!(os, vec![0, 2, 1, 3]);
    assert_eq!(t.cpu_by_os_id(1).unwrap().id, 2);
    assert_eq!(t.cpu_by_os_id(1).unwrap().package, 1);
    assert!(t.cpu_by_os_id(7).is_none());
    // Nodes sorted by kernel id; the matrix follows.
    let ids: Vec<u32> = t.nodes().iter().map(|n| n.os_id).collect();
    assert_eq!(ids, vec![0, 1, 4]);
    assert_eq!(t.distance(0, 1), 21);
    assert_eq!(t.distance(0, 2), 17);
    assert_eq!(t.distance(1, 2), 28);
    assert!(t.distances_reported());
    let cpuless = t.node_by_os_id(4).unwrap();
    assert!(cpuless.span.is_empty());
    assert_eq!(cpuless.package, Some(0));
    assert_eq!(t.packages()[0].nodes, vec![0, 2]);
    assert_eq!(t.cpu_nodes().count(), 2);
    // No cache reported: each package stands as an LLC domain.
    assert_eq!(t.llcs().len(), 2);
    assert_eq!(t.llcs()[1].cache, None);
    assert_eq!(t.llc_size(1), None);
}

#[test]
fn cgroup_leaves_a_package_only_its_memory() {
    // A cpuset cgroup allows CPUs of package 0 only, but memory everywhere:
    // package 1 stays, holding its node as CPU-less memory.
    let mut d = two_socket_desc();
    d.packages[1].cpus = CpuSet::new();
    d.cores.truncate(2);
    d.nodes[0] = NodeDesc {
        os_id: 1,
        memory: 100,
        cpus: CpuSet::new(),
        locality: CpuSet::new(),
        package: Some(1),
    };
    let t = Topology::new(d).unwrap();
    assert_eq!(t.packages().len(), 2);
    assert!(t.packages()[1].span.is_empty());
    assert_eq!(t.packages()[1].nodes, vec![1]);
    assert_eq!(t.node_by_os_id(1).unwrap().package, Some(1));
    assert_eq!(t.cpus().len(), 2);
    assert_eq!(t.llcs().len(), 1);
    let back: Topology = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(back, t);
}

#[test]
fn refusals_name_the_fault() {
    type Mutation = Box<dyn Fn(&mut TopologyDesc)>;
    let cases: Vec<(&str, Mutation)> = vec![
        ("shares CPUs", Box::new(|d| d.cores[1].cpus = set("0,2"))),
        (
            "belong to no node",
            Box::new(|d| d.nodes[0].cpus = set("1")),
        ),
        ("needs 9", Box::new(|d| d.distances = Some(vec![10; 4]))),
        (
            "spans packages",
            Box::new(|d| {
                d.cores[0].cpus = set("0-1");
                d.cores.remove(2);
            }),
        ),
        ("appears twice", Box::new(|d| d.nodes[2].os_id = 0)),
        ("no NUMA node", Box::new(|d| d.nodes.clear())),
        (
            "cores cover CPUs 0-3 but packages cover 1,3",
            Box::new(|d| d.packages[0].cpus = CpuSet::new()),
        ),
        (
            "package 7 has no CPU and no memory",
            Box::new(|d| {
                d.packages.push(PackageDesc {
                    os_id: 7,
                    cpus: CpuSet::new(),
                })
            }),
        ),
        (
            "names package 9",
            Box::new(|d| d.nodes[2].package = Some(9)),
        ),
        (
            "split by an L2",
            Box::new(|d| {
                d.cores[0].cpus = set("0,2");
                d.cores.remove(1);
                d.caches.push(CacheDesc {
                    level: 2,
                    kind: CacheKind::Unified,
                    size: 1,
                    line_size: 64,
                    ways: 8,
                    cpus: set("0"),
                });
            }),
        ),
    ];
    for (want, mutate) in cases {
        let mut d = two_socket_desc();
        mutate(&mut d);
        let e = Topology::new(d).unwrap_err().to_string();
        assert!(e.contains(want), "wanted {want:?} in {e:?}");
    }
}

#[test]
fn synthetic_refusals() {
    for (bad, want) in [
        ("pack:2 core:4", "last level must be pu"),
        ("pack:x pu:2", "positive number"),
        ("pack:0 pu:2", "positive number"),
        ("blob:2 pu:2", "unknown level type"),
        ("pack:2 l3:1(size=huge) pu:1", "not a size"),
        ("pack:2 l3:1(memory=1GB) pu:1", "only the attribute size"),
        ("core:2 numa:2 pu:2", "spans NUMA nodes"),
        ("", "last level must be pu"),
    ] {
        let e = Topology::synthetic(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad:?}: wanted {want:?} in {e:?}");
    }
}

#[test]
fn json_round_trip_revalidates() {
    let t = Topology::new(two_socket_desc()).unwrap();
    let j = serde_json::to_string(&t).unwrap();
    let back: Topology = serde_json::from_str(&j).unwrap();
    assert_eq!(back, t);
    // A tampered view is refused, not trusted.
    let bad = j.replacen(
        r#""os_id":0,"span":"0,2","cores""#,
        r#""os_id":0,"span":"0-3","cores""#,
        1,
    );
    assert_ne!(bad, j);
    assert!(serde_json::from_str::<Topology>(&bad).is_err());
}

#[test]
fn restrict_to_a_cpuset() {
    let t = Topology::synthetic("pack:2 numa:1 l3:1 core:4 pu:2").unwrap();
    let r = t.restrict(&set("0-2,100")).unwrap();
    assert_eq!(r.span(), &set("0-2"));
    assert_eq!(r.cores().len(), 2);
    assert_eq!(r.cores()[1].span, set("2"));
    assert_eq!(r.llcs().len(), 1);
    // Node 1's memory is still ours: package 1 stays, holding it CPU-less.
    assert_eq!(r.nodes().len(), 2);
    assert!(r.nodes()[1].span.is_empty());
    assert_eq!(r.packages().len(), 2);
    assert_eq!(r.packages()[1].nodes, vec![1]);
    assert!(r.source().ends_with("restricted to CPUs 0-2"));
    let e = t.restrict(&set("64-65")).unwrap_err().to_string();
    assert!(
        e.contains("none of CPUs 64-65 is on this machine (it has 0-15)"),
        "{e}"
    );
}
