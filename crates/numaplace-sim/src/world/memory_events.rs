//! The memory events a live kernel counts in software, as the simulated
//! kernel counts them, for the snapshot's `numastat`, `vmstat_numa` and
//! `page_faults` (docs/simulator.md, "What the world shows"):
//!
//! - each node's `numastat` from the pages placed on first touch: every
//!   page goes where its policy means it to (the simulated allocator never
//!   runs a node out of memory), so each is a `numa_hit` (and an
//!   `interleave_hit` under interleaving), `local_node` when the touching
//!   thread runs on the node, `other_node` otherwise; `numa_miss` and
//!   `numa_foreign` stay zero;
//! - each process's minor page faults: one per page it first touched (no
//!   major faults: nothing is read from disk); as on a live host, a
//!   process has a count from the second snapshot it is in (its first
//!   touches, at its start, are in none);
//! - vmstat's hinting faults and migrations from the world's totals:
//!   automatic NUMA balancing's faults (the local ones: on pages already
//!   on the faulting thread's node) and the pages it moved, and every
//!   page moved for any reason (`pgmigrate_success`).
//!
//! Counts are kept since the last snapshot, in pages (fractions of a page
//! add up), and are whole numbers in the snapshot.

use std::collections::BTreeMap;

use numaplace_model::{NumaStat, PageFaults, Topology, VmNumaStat};

use super::Totals;

/// One node's allocations since the last snapshot, pages.
#[derive(Debug, Clone, Copy, Default)]
struct NodeCounts {
    hit: f64,
    interleave_hit: f64,
    local: f64,
    other: f64,
}

/// What the world counts between snapshots.
#[derive(Debug, Default)]
pub(super) struct MemoryEvents {
    /// By dense node id.
    nodes: Vec<NodeCounts>,
    /// Pages each process first touched, by pid.
    touched: BTreeMap<i32, f64>,
    /// The processes of the last snapshot, increasing.
    seen: Vec<i32>,
    /// The totals' hinting faults (all, local), balancing's migrations and
    /// all migrations at the last snapshot.
    at_snapshot: [u64; 4],
}

impl MemoryEvents {
    pub(super) fn new(nodes: usize) -> MemoryEvents {
        MemoryEvents {
            nodes: vec![NodeCounts::default(); nodes],
            ..MemoryEvents::default()
        }
    }

    /// Process `pid` first touched `pages` (per dense node, where they were
    /// placed) from a CPU of node `cpu_node`, under an interleaving policy
    /// or not.
    pub(super) fn touched(&mut self, pid: i32, pages: &[f64], cpu_node: usize, interleaved: bool) {
        for (n, (c, &p)) in self.nodes.iter_mut().zip(pages).enumerate() {
            if p <= 0.0 {
                continue;
            }
            c.hit += p;
            if interleaved {
                c.interleave_hit += p;
            }
            if n == cpu_node {
                c.local += p;
            } else {
                c.other += p;
            }
            *self.touched.entry(pid).or_default() += p;
        }
    }

    /// The counts since the last snapshot, by kernel node id, page faults
    /// by pid (of the processes in `running`), and vmstat's from `totals`;
    /// the counting starts again. `first`: the world's first snapshot,
    /// which has none, as a live collector's first round.
    pub(super) fn take(
        &mut self,
        topo: &Topology,
        totals: &Totals,
        running: &[i32],
        first: bool,
    ) -> (
        BTreeMap<u32, NumaStat>,
        Option<VmNumaStat>,
        BTreeMap<i32, PageFaults>,
    ) {
        let whole = |x: f64| x.max(0.0).round() as u64;
        let numastat = topo
            .nodes()
            .iter()
            .zip(&self.nodes)
            .map(|(n, c)| {
                let stat = NumaStat {
                    numa_hit: whole(c.hit),
                    interleave_hit: whole(c.interleave_hit),
                    local_node: whole(c.local),
                    other_node: whole(c.other),
                    ..NumaStat::default()
                };
                (n.os_id, stat)
            })
            .collect();
        let faults = running
            .iter()
            .filter(|pid| self.seen.binary_search(pid).is_ok())
            .map(|&pid| {
                let minor = whole(self.touched.get(&pid).copied().unwrap_or(0.0));
                (pid, PageFaults { minor, major: 0 })
            })
            .collect();
        let now = [
            totals.hinting_faults,
            totals.hinting_faults_local,
            totals.balancing_pages_migrated,
            totals.pages_migrated,
        ];
        let d = |i: usize| Some(now[i].saturating_sub(self.at_snapshot[i]));
        let vmstat = VmNumaStat {
            numa_hint_faults: d(0),
            numa_hint_faults_local: d(1),
            numa_pages_migrated: d(2),
            pgmigrate_success: d(3),
        };
        self.at_snapshot = now;
        self.nodes
            .iter_mut()
            .for_each(|c| *c = NodeCounts::default());
        self.touched.clear();
        self.seen = running.to_vec();
        self.seen.sort_unstable();
        if first {
            return (BTreeMap::new(), None, BTreeMap::new());
        }
        (numastat, Some(vmstat), faults)
    }
}

#[cfg(test)]
mod tests {
    use super::super::sampling::tests::{app, world};
    use crate::workload::MemoryPlacement;

    /// Two processes touch 64 MiB each on node 1, one from a CPU of node 0
    /// (its memory bound to node 1: remote), one from node 1 (first
    /// touch: local): the next snapshot's numastat counts them so, and
    /// each process's minor faults; the first snapshot has none, and a
    /// quiet round counts nothing.
    #[test]
    fn first_touches_show_as_numastat_and_page_faults() {
        const PAGES: u64 = 64 << 20 >> 12;
        let mut w = world(
            "westmere-2s",
            vec![
                app("far", 64 << 20, 10.0, MemoryPlacement::Node(1)),
                app("near", 64 << 20, 10.0, MemoryPlacement::FirstTouch),
            ],
            vec![vec![0], vec![8]],
        );
        let topo = w.machine().topology.clone();
        assert_eq!((topo.cpus()[0].node, topo.cpus()[8].node), (0, 1));
        w.start_due();
        let first = w.snapshot();
        assert!(first.machine.numastat.is_empty() && first.machine.vmstat_numa.is_none());
        assert!(first.page_faults.is_empty());
        for _ in 0..10 {
            w.advance();
        }
        let s = w.snapshot();
        let (n0, n1) = (s.machine.numastat[&0], s.machine.numastat[&1]);
        assert_eq!(
            n0,
            numaplace_model::NumaStat::default(),
            "nothing on node 0"
        );
        assert_eq!(n1.numa_hit, 2 * PAGES);
        assert_eq!((n1.local_node, n1.other_node), (PAGES, PAGES));
        assert_eq!(
            (n1.numa_miss, n1.numa_foreign, n1.interleave_hit),
            (0, 0, 0)
        );
        for g in &s.groups {
            assert_eq!(s.page_faults[&g.pid].minor, PAGES, "{}", g.comm);
        }
        assert_eq!(s.machine.vmstat_numa.unwrap().pgmigrate_success, Some(0));
        let rates = s.node_rates().unwrap();
        assert!(rates[&1].other_node > 0.0);
        for _ in 0..10 {
            w.advance();
        }
        let quiet = w.snapshot();
        assert!(quiet.machine.numastat.values().all(|n| n.numa_hit == 0));
        assert!(quiet.page_faults.values().all(|f| f.minor == 0));
    }
}
