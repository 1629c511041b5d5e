//! \[Rao13\]'s micro-benchmark (`numaplace bench`) inside the 2-node QEMU
//! guest (tests/vm/guest-bench-test.sh): a thread pinned to a CPU of node 1
//! walking a list bound to node 0 really runs with remote memory, and the
//! fig4a experiment runs both its placements there. The emulated machine
//! (TCG) has no real remote latency, so run times are not compared. Boots
//! QEMU, so it is ignored by default; `.ci/run` runs it with `--ignored`.

use crate::common;

use common::run_guest_script;
use serde_json::Value;

/// Pages per node of a `{"0": n, ...}` object.
fn pages(v: &Value) -> Vec<(u32, u64)> {
    v.as_object()
        .unwrap_or_else(|| panic!("not a page count object: {v}"))
        .iter()
        .map(|(k, n)| (k.parse().unwrap(), n.as_u64().unwrap()))
        .collect()
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn remote_memory_in_the_two_node_guest() {
    let text = run_guest_script("guest-bench-test.sh", &[]);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the guest's JSON does not parse: {e}\n{text}"));
    let cpu = v["node1_cpu"].as_u64().expect("node1_cpu");

    // a. One thread on node 1, its 32 MiB list bound to node 0.
    let single = &v["single"];
    assert_eq!(single["memory"], "node 0", "{single}");
    let threads = single["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 1, "{single}");
    let t = &threads[0];
    assert_eq!(t["cpu"].as_u64(), Some(cpu), "{t}");
    assert_eq!(t["loops"], 2, "{t}");
    for seen in t["ran_on"].as_array().expect("ran_on") {
        assert_eq!(
            seen["cpu"].as_u64(),
            Some(cpu),
            "the thread left its CPU: {t}"
        );
        assert_eq!(seen["node"], 1, "the thread did not run on node 1: {t}");
    }
    let page = single["page_size"].as_u64().unwrap();
    assert_eq!(pages(&t["private_pages"]), [(0, (32 << 20) / page)], "{t}");
    assert_eq!(t["private_pages_absent"], 0, "{t}");
    assert!(t["seconds"].as_f64().unwrap() > 0.0, "{t}");
    assert_eq!(t["hops"].as_u64(), Some(2 * (32 << 20) / 64), "{t}");

    // b. fig4a --quick: both cases at every point, memory on node 0, Local
    // on node 0 and Remote on node 1.
    let fig = &v["fig4a"];
    assert_eq!(fig["experiment"], "fig4a");
    assert!(
        fig["notes"].as_array().unwrap().is_empty(),
        "the 2-node guest should host both cases: {}",
        fig["notes"]
    );
    let points = fig["points"].as_array().expect("points");
    assert_eq!(points.len(), 3, "{fig}");
    for p in points {
        let (local, remote) = (&p["first"], &p["second"]);
        assert!(remote.is_object(), "no Remote case at {}: {p}", p["x"]);
        assert!(p["ratio"].as_f64().is_some_and(|r| r > 0.0), "{p}");
        for (case, node) in [(local, 0), (remote, 1)] {
            assert!(case["mean_seconds"].as_f64().unwrap() > 0.0, "{case}");
            let all = pages(&case["pages"]);
            assert!(
                all.len() == 1 && all[0].0 == 0,
                "memory not on node 0: {all:?}"
            );
            for t in case["report"]["threads"].as_array().unwrap() {
                for seen in t["ran_on"].as_array().unwrap() {
                    assert_eq!(seen["node"], node, "{} ran elsewhere: {t}", p["x"]);
                }
            }
        }
    }
}
