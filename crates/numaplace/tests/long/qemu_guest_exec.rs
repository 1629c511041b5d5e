//! `numaplace exec` inside the 2-node QEMU guest (tests/vm/guest-exec-test.sh):
//! a command started with `--nodes 1` runs on node 1's CPUs with its memory
//! preferred there (`prefer:1` on its mapping, its pages on node 1), as
//! `--membind` (`bind:1`), `--interleave` (half its pages on each node) and
//! several nodes (`prefer (many):0-1`) ask; started with numaplace's own
//! advice, on the one node advised, CPUs and pages alike; under `taskset`,
//! never on more CPUs than its caller; always under numaplace's own pid, its
//! exit status passed through. Boots QEMU, so it is ignored by default;
//! `.ci/run` runs it with `--ignored`.

use crate::common;

use std::collections::BTreeMap;

use common::run_guest_script;
use serde_json::Value;

/// Pages of touch_memory's 32 MiB mapping (4 KiB pages).
const PAGES: u64 = 32 << 8;

/// One case: its CPUs, memory nodes, numa_maps policy word, pages per node.
struct Case {
    cpus: String,
    mems: String,
    policy: String,
    pages: BTreeMap<u32, u64>,
    stderr: String,
}

fn case(v: &Value, name: &str) -> Case {
    let c = &v[name];
    assert!(c.is_object(), "case {name} did not run: {v}");
    let line = c["numa_maps"].as_str().unwrap().trim().to_string();
    let fields: Vec<&str> = line.split_whitespace().skip(1).collect();
    // The policy word may hold a space (`prefer (many):0-1`): every field
    // up to the first `key=value`.
    let policy: Vec<&str> = fields
        .iter()
        .take_while(|f| !f.contains('='))
        .copied()
        .collect();
    let pages = fields
        .iter()
        .filter_map(|f| {
            let (k, n) = f.split_once('=')?;
            Some((k.strip_prefix('N')?.parse().ok()?, n.parse().ok()?))
        })
        .collect();
    let anon: u64 = fields
        .iter()
        .find_map(|f| f.strip_prefix("anon=")?.parse().ok())
        .unwrap_or(0);
    assert!(anon >= PAGES, "{name}: not the 32 MiB mapping: {line}");
    Case {
        cpus: c["cpus"].as_str().unwrap().to_string(),
        mems: c["mems"].as_str().unwrap().to_string(),
        policy: policy.join(" "),
        pages,
        stderr: c["stderr"].as_str().unwrap().to_string(),
    }
}

/// Pages on `node` of the mapping.
fn on(c: &Case, node: u32) -> u64 {
    c.pages.get(&node).copied().unwrap_or(0)
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn exec_places_commands_in_the_two_node_guest() {
    let text = run_guest_script("guest-exec-test.sh", &[]);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the guest's JSON does not parse: {e}\n{text}"));
    let node_cpus = |n: &str| v["node_cpus"][n].as_str().unwrap().to_string();
    assert_eq!(
        (node_cpus("0"), node_cpus("1")),
        ("0-1".into(), "2-3".into())
    );

    // --nodes 1: node 1's CPUs, memory preferred there and every page there.
    let c = case(&v, "nodes1");
    assert_eq!((c.cpus.as_str(), c.policy.as_str()), ("2-3", "prefer:1"));
    assert_eq!(on(&c, 1), PAGES, "{:?}", c.pages);
    // The policy is the task's: its cpuset's nodes are untouched.
    assert_eq!(c.mems, "0-1");
    assert!(
        c.stderr
            .contains("node 1: CPUs 2-3, memory preferred on node 1 (--nodes 1)"),
        "{}",
        c.stderr
    );

    let c = case(&v, "membind1");
    assert_eq!((c.cpus.as_str(), c.policy.as_str()), ("2-3", "bind:1"));
    assert_eq!(on(&c, 1), PAGES, "{:?}", c.pages);

    // Interleaved: page by page (or huge page by huge page), half on each
    // node give or take two 2 MiB pages.
    let c = case(&v, "interleave");
    assert_eq!(
        (c.cpus.as_str(), c.policy.as_str()),
        ("0-3", "interleave:0-1")
    );
    assert_eq!(on(&c, 0) + on(&c, 1), PAGES, "{:?}", c.pages);
    assert!(on(&c, 0).abs_diff(on(&c, 1)) <= 1024, "{:?}", c.pages);

    // Two nodes preferred: MPOL_PREFERRED_MANY (the guest runs Debian's 6.1).
    let c = case(&v, "many");
    assert_eq!(
        (c.cpus.as_str(), c.policy.as_str()),
        ("0-3", "prefer (many):0-1")
    );
    assert_eq!(on(&c, 0) + on(&c, 1), PAGES, "{:?}", c.pages);

    // numaplace's advice: one node for 1 CPU and 32 MiB; the command's CPUs
    // are that node's, its memory preferred there and its pages there.
    let dry = &v["advised_dry_run"];
    assert_eq!(dry["placed"], true, "{dry}");
    let c = case(&v, "advised");
    let node = c
        .policy
        .strip_prefix("prefer:")
        .unwrap_or_else(|| panic!("advised: policy {}", c.policy));
    assert!(node == "0" || node == "1", "one node: {}", c.policy);
    assert_eq!(c.cpus, node_cpus(node), "advised node {node}");
    assert_eq!(on(&c, node.parse().unwrap()), PAGES, "{:?}", c.pages);
    assert!(
        c.stderr
            .contains("auto: numad's pre-placement of 1 CPU and 32 MiB"),
        "{}",
        c.stderr
    );

    // Started under `taskset -c 0,2`: node 1's CPUs within those, CPU 2.
    let c = case(&v, "confined");
    assert_eq!((c.cpus.as_str(), c.policy.as_str()), ("2", "prefer:1"));
    assert!(c.stderr.contains("node 1: CPU 2, memory"), "{}", c.stderr);

    assert_eq!(v["status_exit_7"], 7);
    assert_eq!(v["status_not_found"], 127);
    assert_eq!(v["status_bad_nodes"], 125);
    let bad = v["bad_nodes_stderr"].as_str().unwrap();
    assert!(bad.contains("node 5 is not on this machine"), "{bad}");
    assert!(bad.contains("give nodes among 0-1"), "{bad}");
}
