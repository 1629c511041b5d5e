//! Self-tests for the lstopo test-support module (`tests/support/lstopo.rs`).
//!
//! The fixture-based tests need Debian hwloc's `lstopo-no-graphics` (2.x)
//! and the sysfs snapshot tarballs in `tests/fixtures/sysfs/` (override with
//! `NUMAPLACE_SYSFS_FIXTURES`); they fail, saying what to install, when
//! either is missing.

use crate::lstopo;

use lstopo::*;

/// Extracts fixture `name` (file name of the tarball) and runs lstopo on it.
fn fixture_view(name: &str) -> Option<LstopoView> {
    let tarball = fixtures_dir().join(name);
    require_lstopo();
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = extract_fixture(&tarball, tmp.path());
    assert!(root.join("sys").is_dir());
    assert!(root.join("proc").is_dir());
    Some(lstopo_view(&root))
}

fn range(a: u32, b: u32) -> Vec<u32> {
    (a..b).collect()
}

#[test]
fn bitmap_hand_cases() {
    assert_eq!(parse_hwloc_bitmap("0x00000001"), vec![0]);
    assert_eq!(parse_hwloc_bitmap("0x000000ff,0xffffffff"), range(0, 40));
    assert_eq!(parse_hwloc_bitmap("0x0"), Vec::<u32>::new());
    assert_eq!(parse_hwloc_bitmap("0x00000000"), Vec::<u32>::new());
    assert_eq!(parse_hwloc_bitmap("0x00000055"), vec![0, 2, 4, 6]);
    assert_eq!(parse_hwloc_bitmap("0x3"), vec![0, 1]);
    assert_eq!(parse_hwloc_bitmap(" 0x80000000 "), vec![31]);
    assert_eq!(parse_hwloc_bitmap("0x00000001,0x0"), vec![32]);
    // hwloc writes all-zero words as empty chunks (seen in the
    // 48amd64-4pa2n6c-sparse nodeset: NUMA nodes 33 and 73 ...).
    assert_eq!(parse_hwloc_bitmap("0x00000002,,0x02000000"), vec![25, 65]);
    assert_eq!(
        parse_hwloc_bitmap("0x00005555,0x55555555,0x55555555,0x55555555").len(),
        56
    );
}

/// Decision: infinite bitmaps ("0xf...f" prefix) make `parse_hwloc_bitmap`
/// panic; `parse_hwloc_bitmap_ext` returns the finite part plus a flag.
#[test]
#[should_panic(expected = "infinite")]
fn bitmap_infinite_panics() {
    parse_hwloc_bitmap("0xf...f,0x00000003");
}

#[test]
fn bitmap_infinite_ext() {
    assert_eq!(
        parse_hwloc_bitmap_ext("0xf...f,0x00000003"),
        (vec![0, 1], true)
    );
    assert_eq!(parse_hwloc_bitmap_ext("0xf...f"), (vec![], true));
    assert_eq!(
        parse_hwloc_bitmap_ext("0xf...f,0x0000ff00,0x00000000"),
        ((40..48).collect(), true)
    );
    assert_eq!(
        parse_hwloc_bitmap_ext("0x0000ff00"),
        ((8..16).collect(), false)
    );
}

#[test]
#[should_panic(expected = "bad chunk")]
fn bitmap_garbage_panics() {
    parse_hwloc_bitmap("0xzz");
}

/// Hand-written hwloc 2.x XML: a NUMA node attached below a Group inside a
/// package, a CPU-less NUMA node, L2 as the last-level cache (no L3), an
/// L1i cache that must be ignored, and distances split over several
/// elements, indexed by gp_index.
const SMALL_XML: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000003" gp_index="1">
    <info name="Backend" value="Linux"/>
    <object type="Package" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" gp_index="2">
      <object type="Group" cpuset="0x0000000f" complete_cpuset="0x0000000f" gp_index="3" kind="1001" subkind="0">
        <object type="NUMANode" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000001" gp_index="20" local_memory="1048576">
          <page_type size="4096" count="256"/>
        </object>
        <object type="NUMANode" os_index="4" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000010" gp_index="21" local_memory="2097152"/>
        <object type="L2Cache" cpuset="0x00000005" complete_cpuset="0x00000005" gp_index="4" cache_size="1048576" depth="2" cache_linesize="64" cache_associativity="16" cache_type="0">
          <object type="L1Cache" cpuset="0x00000005" complete_cpuset="0x00000005" gp_index="5" cache_size="32768" depth="1" cache_linesize="64" cache_associativity="8" cache_type="1">
            <object type="L1iCache" cpuset="0x00000005" complete_cpuset="0x00000005" gp_index="6" cache_size="32768" depth="1" cache_linesize="64" cache_associativity="8" cache_type="2">
              <object type="Core" os_index="0" cpuset="0x00000005" complete_cpuset="0x00000005" gp_index="7">
                <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" gp_index="8"/>
                <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" gp_index="9"/>
              </object>
            </object>
          </object>
        </object>
        <object type="L2Cache" cpuset="0x0000000a" complete_cpuset="0x0000000a" gp_index="10" cache_size="1048576" depth="2" cache_linesize="64" cache_associativity="16" cache_type="0">
          <object type="L1iCache" cpuset="0x0000000a" complete_cpuset="0x0000000a" gp_index="12" cache_size="65536" depth="1" cache_linesize="64" cache_associativity="8" cache_type="2">
            <object type="Core" os_index="1" cpuset="0x0000000a" complete_cpuset="0x0000000a" gp_index="13">
              <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" gp_index="15"/>
              <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" gp_index="14"/>
            </object>
          </object>
        </object>
      </object>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="9" name="NUMABandwidth" indexing="os">
    <indexes length="4">0 4 </indexes>
    <u64values length="16">999 1 1 999 </u64values>
  </distances2>
  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="gp">
    <indexes length="3">21 </indexes>
    <indexes length="3">20 </indexes>
    <u64values length="6">10 17 </u64values>
    <u64values length="6">17 10 </u64values>
  </distances2>
  <support name="discovery.pu"/>
</topology>
"#;

#[test]
fn parse_small_inline_xml() {
    let v = parse_lstopo_xml(SMALL_XML);
    assert_eq!(v.packages, 1);
    assert_eq!(v.cores, 2);
    assert_eq!(v.pus, vec![0, 1, 2, 3]);
    assert_eq!(
        v.numa_nodes,
        vec![
            NodeView {
                os_index: 0,
                cpus: vec![0, 1, 2, 3],
                local_memory: 1048576
            },
            NodeView {
                os_index: 4,
                cpus: vec![0, 1, 2, 3],
                local_memory: 2097152
            },
        ]
    );
    assert!(v.l3.is_empty());
    // L2 is the LLC; the L1i-only branch does not make L1 the "highest".
    assert_eq!(v.llc, vec![vec![0, 2], vec![1, 3]]);
    let d = v.distances.expect("latency distances");
    // gp indexing resolved to os indexes, matrix kept in file order.
    assert_eq!(d.nodes, vec![4, 0]);
    assert_eq!(d.values, vec![10, 17, 17, 10]);
    assert_eq!(d.get(0, 4), Some(17));
    assert_eq!(d.sorted_by_os_index().nodes, vec![0, 4]);
}

#[test]
fn parse_xml_without_numa_distances() {
    let xml = SMALL_XML.replace("distances2", "ignored_element");
    assert_eq!(parse_lstopo_xml(&xml).distances, None);
}

#[test]
fn synthetic_input() {
    require_lstopo();
    let v = lstopo_view_input("pack:2 l3:1 core:4 pu:2");
    assert_eq!(v.packages, 2);
    assert_eq!(v.cores, 8);
    assert_eq!(v.pus, range(0, 16));
    // hwloc inserts a single NUMA node (1 GiB) when none is described.
    assert_eq!(v.numa_nodes.len(), 1);
    assert_eq!(v.numa_nodes[0].cpus, range(0, 16));
    assert_eq!(v.l3, vec![range(0, 8), range(8, 16)]);
    assert_eq!(v.llc, v.l3);
    assert_eq!(v.distances, None);
}

/// 8em64t-2s2ca2c: 2 packages x 2 L2 (no L3) x 2 cores, no SMT, one NUMA
/// node; PUs are interleaved across packages (package 0 = 0,2,4,6).
#[test]
fn fixture_8em64t_2s2ca2c() {
    let Some(v) = fixture_view("8em64t-2s2ca2c.tar.bz2") else {
        return;
    };
    assert_eq!(v.packages, 2);
    assert_eq!(v.cores, 8);
    assert_eq!(v.pus, range(0, 8));
    assert_eq!(
        v.numa_nodes,
        vec![NodeView {
            os_index: 0,
            cpus: range(0, 8),
            local_memory: 17174560768
        }]
    );
    assert!(v.l3.is_empty());
    assert_eq!(v.llc, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
    assert_eq!(v.distances, None);
}

/// cgroup2 fixture: cpuset.cpus.effective=0-5, mems=0-5 of a 32-PU / 8-node
/// machine. Disallowed PUs vanish; nodes 2-5 stay with empty cpus (so do
/// their packages and L3s); nodes 6-7 and package 3 vanish.
#[test]
fn fixture_cgroup_restricted() {
    let Some(v) = fixture_view("32amd64-4s2n4c-cgroup2.tar.bz2") else {
        return;
    };
    assert_eq!(v.packages, 3);
    assert_eq!(v.cores, 6);
    assert_eq!(v.pus, range(0, 6));
    let nodes: Vec<(u32, Vec<u32>)> = v
        .numa_nodes
        .iter()
        .map(|n| (n.os_index, n.cpus.clone()))
        .collect();
    assert_eq!(
        nodes,
        vec![
            (0, range(0, 4)),
            (1, range(4, 6)),
            (2, vec![]),
            (3, vec![]),
            (4, vec![]),
            (5, vec![]),
        ]
    );
    let empty: Vec<u32> = vec![];
    assert_eq!(
        v.l3,
        vec![
            empty.clone(),
            empty.clone(),
            empty.clone(),
            empty,
            range(0, 4),
            range(4, 6)
        ]
    );
    let d = v.distances.expect("distances");
    assert_eq!(d.nodes, range(0, 6));
    assert_eq!(&d.values[..6], &[10, 16, 16, 22, 16, 22]);
}

/// offline-cpu0-node0: CPUs 0-3 and 21-23 offline, node 0 offline. Offline
/// PUs are absent; only NUMA node 1 exists; package 0 has no NUMA node.
#[test]
fn fixture_offline_cpus_and_node() {
    let Some(v) = fixture_view("offline-cpu0-node0.tar.bz2") else {
        return;
    };
    assert_eq!(v.packages, 2);
    assert_eq!(v.cores, 17);
    assert_eq!(v.pus, range(4, 21));
    assert_eq!(v.numa_nodes.len(), 1);
    assert_eq!(v.numa_nodes[0].os_index, 1);
    assert_eq!(v.numa_nodes[0].cpus, vec![5, 7, 9, 11, 13, 15, 17, 19]);
    assert_eq!(v.numa_nodes[0].local_memory, 68719476736);
    assert_eq!(
        v.l3,
        vec![
            vec![4, 6, 8, 10, 12, 14, 16, 18, 20],
            vec![5, 7, 9, 11, 13, 15, 17, 19]
        ]
    );
    assert_eq!(v.distances, None);
}

/// nri-server (top-level sys/, no proc/): CPU-less NUMA nodes 4 and 5 get
/// the cpuset of the Group they are attached to (nodes 0 and 2).
#[test]
fn fixture_nri_server_cpuless_nodes() {
    let Some(v) = fixture_view("nri-server.tar.xz") else {
        return;
    };
    assert_eq!(v.packages, 2);
    assert_eq!(v.cores, 56);
    assert_eq!(v.pus, range(0, 112));
    let os: Vec<u32> = v.numa_nodes.iter().map(|n| n.os_index).collect();
    assert_eq!(os, range(0, 6));
    assert_eq!(v.numa_nodes[4].cpus, v.numa_nodes[0].cpus);
    assert_eq!(v.numa_nodes[5].cpus, v.numa_nodes[2].cpus);
    assert_eq!(
        v.numa_nodes[0].cpus,
        (0..112).step_by(4).collect::<Vec<u32>>()
    );
    let d = v.distances.expect("distances");
    assert_eq!(d.nodes, range(0, 6));
    assert_eq!(d.get(4, 0), Some(17));
    assert_eq!(d.get(5, 2), Some(17));
    assert_eq!(d.get(4, 5), Some(28));
}

/// Prints the view of every fixture (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn dump_all_fixture_views() {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tar."))
        .collect();
    names.sort();
    for name in names {
        let v = fixture_view(&name).expect("fixture");
        println!("=== {name}\n{v}");
    }
}
