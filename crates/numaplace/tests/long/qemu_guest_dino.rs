//! The dino policy on a real 4-node kernel (a QEMU guest without a PMU, so
//! the LLC misses it classifies threads by come from `--counters-from`):
//! two `numa_hog MIB 1` programs with their memory on node 0 and their
//! worker threads made devils by the rules file; `numaplace run --policy
//! dino --all` must pin the two workers to different nodes and make each
//! program's memory follow its worker, journal why (class, slot, core), and
//! put the affinities back when it is stopped. Boots QEMU
//! (tests/vm/guest-dino-test.sh), so it is ignored by default; `.ci/run`
//! runs it with `--ignored`.

use crate::common;

use common::run_guest_script;
use std::collections::BTreeMap;

use serde_json::Value;

/// One program as the guest saw it at one moment.
struct Proc {
    pid: i64,
    /// Pages per node.
    pages: BTreeMap<u32, u64>,
    /// The worker thread (`hog-0`): tid, allowed CPUs, their nodes, the node
    /// it last ran on.
    worker: (i64, String, String, String),
    /// Every thread's allowed CPUs, by tid.
    allowed: BTreeMap<i64, String>,
}

impl Proc {
    fn from(v: &Value, phase: &str, which: &str) -> Proc {
        let p = &v[phase][which];
        assert!(p.is_object(), "no {phase}.{which} in the guest's results");
        let pages = p["pages"]
            .as_object()
            .unwrap_or_else(|| panic!("{phase}.{which}.pages: {p}"))
            .iter()
            .map(|(n, c)| (n.parse().expect("node id"), c.as_u64().expect("page count")))
            .collect();
        let threads = p["threads"].as_array().expect("threads");
        let s = |t: &Value, k: &str| t[k].as_str().unwrap_or_default().to_string();
        let w = threads
            .iter()
            .find(|t| t["comm"] == "hog-0")
            .unwrap_or_else(|| panic!("{phase}.{which}: no hog-0 thread: {p}"));
        Proc {
            pid: p["pid"].as_i64().expect("pid"),
            pages,
            worker: (
                w["tid"].as_i64().expect("tid"),
                s(w, "allowed"),
                s(w, "allowed_nodes"),
                s(w, "last_node"),
            ),
            allowed: threads
                .iter()
                .map(|t| (t["tid"].as_i64().expect("tid"), s(t, "allowed")))
                .collect(),
        }
    }

    fn total(&self) -> u64 {
        self.pages.values().sum()
    }

    fn on(&self, node: u32) -> u64 {
        self.pages.get(&node).copied().unwrap_or(0)
    }

    /// The one node the worker is allowed on.
    fn node(&self) -> u32 {
        self.worker.2.parse().unwrap_or_else(|_| {
            panic!(
                "worker {} of {} is allowed CPUs {} (nodes {}), not one node's",
                self.worker.0, self.pid, self.worker.1, self.worker.2
            )
        })
    }
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn dino_spreads_devils_and_memory_follows_in_a_4_node_guest() {
    let text = run_guest_script("guest-dino-test.sh", &[]);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the guest's JSON does not parse: {e}\n{text}"));
    let mut shown = v.clone();
    if let Some(o) = shown.as_object_mut() {
        o.remove("daemon_stderr");
    }
    eprintln!(
        "guest results:\n{}",
        serde_json::to_string_pretty(&shown).unwrap_or_default()
    );
    assert!(
        v.get("error").is_none(),
        "the guest reported an error: {text}"
    );
    assert_eq!(
        v["node_cpus"],
        serde_json::json!({"0": "0-1", "1": "2-3", "2": "4-5", "3": "6-7"}),
        "the 4-node layout of boot.sh"
    );
    let all = v["all_cpus"].as_str().expect("the guest's CPUs");
    assert_eq!(all, "0-7");

    // a. Both start with their pages on node 0 and every thread allowed
    // every CPU (numaplace leaves a narrower thread alone).
    let before = [Proc::from(&v, "before", "a"), Proc::from(&v, "before", "b")];
    for p in &before {
        assert!(
            p.on(0) * 10 >= p.total() * 9,
            "numa_hog {} should start with >= 90% of its pages on node 0: {:?}",
            p.pid,
            p.pages
        );
        for (tid, cpus) in &p.allowed {
            assert_eq!(cpus, all, "thread {tid} of {} starts narrowed", p.pid);
        }
        eprintln!(
            "before: numa_hog {}: worker {} last ran on node {}, pages per node {:?}",
            p.pid, p.worker.0, p.worker.3, p.pages
        );
    }

    // b. While the daemon runs: the workers on one node each, different
    // nodes, and each program's memory on its worker's node.
    let placed = &v["placed"];
    assert_eq!(
        placed["ok"], true,
        "the guest never saw both workers placed apart with their memory: {placed}"
    );
    let after = [Proc::from(&v, "placed", "a"), Proc::from(&v, "placed", "b")];
    let nodes = [after[0].node(), after[1].node()];
    assert_ne!(
        nodes[0], nodes[1],
        "both workers are on node {}: dino should spread devils over the domains",
        nodes[0]
    );
    for (p, node) in after.iter().zip(nodes) {
        assert!(
            p.on(node) * 10 >= p.total() * 9,
            "numa_hog {}: its worker is on node {node} but only {} of its {} pages are: {:?}",
            p.pid,
            p.on(node),
            p.total(),
            p.pages
        );
        eprintln!(
            "placed after {:.2} s: numa_hog {}: worker {} on CPUs {} (node {node}), pages per node {:?}",
            placed["waited_centis"].as_f64().unwrap_or(0.0) / 100.0,
            p.pid,
            p.worker.0,
            p.worker.1,
            p.pages
        );
    }
    // Both started on node 0: one of them had to move, threads and pages.
    assert!(
        nodes.iter().any(|&n| n != 0),
        "neither worker left node 0: {nodes:?}"
    );

    // c. The daemon stopped (SIGTERM once the guest saw the placement) and
    // put the affinities back; the pages stay where they went.
    let exit = &v["after_exit"];
    assert_eq!(exit["daemon_status"], 0, "{exit}");
    let ended = [
        Proc::from(&v, "after_exit", "a"),
        Proc::from(&v, "after_exit", "b"),
    ];
    for ((p, b), node) in ended.iter().zip(&before).zip(nodes) {
        assert_eq!(
            p.allowed, b.allowed,
            "numa_hog {}: the affinities were not restored when the daemon stopped",
            p.pid
        );
        assert!(
            p.on(node) * 10 >= p.total() * 9,
            "numa_hog {}: pages moved away from node {node} after the daemon stopped: {:?}",
            p.pid,
            p.pages
        );
    }

    // d. The start-up log says the counters are made up, and from where.
    let err = v["daemon_stderr"].as_str().expect("the daemon's stderr");
    assert!(
        err.contains("SYNTHETIC counters from /tmp/rules.toml") && err.contains("\"hog-*\""),
        "the daemon did not say its counters are synthetic:\n{err}"
    );

    // e. The journal: each worker pinned once, as a devil, to a slot of a
    // core of its node, and the memory of the one that moved followed it.
    let journal = v["journal"].as_array().expect("the journal");
    for e in journal {
        assert_eq!(e["policy"], "dino", "{e}");
    }
    for (p, node) in after.iter().zip(nodes) {
        let pins: Vec<&Value> = journal
            .iter()
            .filter(|e| e["action"] == "pin" && e["task"]["tid"] == p.worker.0)
            .collect();
        assert_eq!(
            pins.len(),
            1,
            "worker {} should be pinned once and then left where it is: {pins:?}",
            p.worker.0
        );
        let e = pins[0];
        assert_eq!(e["outcome"], "done", "{e}");
        assert_eq!(e["cpus"].as_str(), Some(p.worker.1.as_str()), "{e}");
        let reason = e["reason"].as_str().unwrap_or_default();
        let want = format!(
            "dino: devil thread {} of numa_hog (40.0 LLC misses",
            p.worker.0
        );
        assert!(
            reason.starts_with(&want)
                && reason.contains(" to slot ")
                && reason.contains(" of core ")
                && reason.contains(&format!("node {node})")),
            "pin reason without class, slot, core and node: {reason}"
        );
        eprintln!("journal: {reason}");
        let other_pins = journal
            .iter()
            .filter(|e| e["action"] == "pin" && e["pid"] == p.pid && e["task"]["tid"] != p.worker.0)
            .count();
        assert_eq!(
            other_pins, 0,
            "numa_hog {}'s idle main thread has no CPU time, so no counters: it must not be placed",
            p.pid
        );
    }
    for (p, b, node) in after
        .iter()
        .zip(&before)
        .zip(nodes)
        .map(|((p, b), n)| (p, b, n))
    {
        if b.on(node) * 2 >= b.total() {
            continue;
        }
        let moves: Vec<&Value> = journal
            .iter()
            .filter(|e| e["action"] == "move_memory" && e["pid"] == p.pid)
            .collect();
        let moved: u64 = moves
            .iter()
            .filter(|e| e["to_node"] == node)
            .map(|e| e["moved"].as_u64().unwrap_or(0))
            .sum();
        assert!(
            moved * 10 >= b.on(0) * 9,
            "numa_hog {}: the journal shows {moved} of its {} node-0 pages moved to node {node}: {moves:?}",
            p.pid,
            b.on(0)
        );
        for e in &moves {
            let reason = e["reason"].as_str().unwrap_or_default();
            assert!(
                reason.starts_with(&format!(
                    "memory follows devil thread {} of numa_hog to node {node}",
                    p.worker.0
                )) && reason.contains("no sampled data addresses"),
                "memory move without its reason: {e}"
            );
        }
        eprintln!(
            "journal: {moved} pages of numa_hog {} moved to node {node}",
            p.pid
        );
    }
    let futile = journal
        .iter()
        .filter(|e| e["action"] == "move_memory" && e["moved"] == 0)
        .count();
    eprintln!(
        "journal: {} entries, {futile} memory moves that moved nothing",
        journal.len()
    );
}
