//! Groups placed at first sight ([`Auto::place_at_sight`]): a process or
//! VM that has just started, seen for the first time, is gathered onto
//! one node with an idle core for each of its threads before it has
//! touched its memory, so the memory is first touched where its threads
//! run (as `numad -w` places a VM that starts, and [Bae12]'s local
//! mapping is laid out as a VM starts). Nothing is measured yet, so
//! nothing is predicted: the model and the experiments take the group
//! from there once it is counted.

use std::collections::BTreeSet;

use numaplace_model::{Action, CpuSet, Plan, TaskId};

use super::{Auto, YOUNG_S};
use crate::View;
use crate::dino::aside::ANCHOR_SHARE;

/// Memory a group that starts may already have without it saying where
/// the group belongs, bytes: its program's image and first pages.
const MEMORY_OF_ITS_OWN: u64 = 16 << 20;

impl Auto {
    /// Gathers each group first seen this round, started at most
    /// [`YOUNG_S`] ago, onto the node with the most idle cores among those
    /// with one for each of its threads (the largest group first); a
    /// group no node holds so, or with a thread its cgroup confines, is
    /// left to Linux. Every group is looked at once. Not on a crowded
    /// machine (more runnable threads than CPUs).
    pub(super) fn place_at_sight(&mut self, view: &View<'_>, plan: &mut Plan) {
        let (t, s) = (view.topology, view.snapshot);
        self.sighted
            .retain(|id| s.group(id.tid).is_some_and(|g| g.id() == *id));
        let mut new = Vec::new();
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            if !self.sighted.insert(g.id()) {
                continue;
            }
            let young = s.age_s(g.start_time).is_some_and(|a| a <= YOUNG_S);
            let threads: Vec<_> = g.threads.iter().filter_map(|&tid| s.task(tid)).collect();
            let free = threads.iter().all(|x| t.span().is_subset(&x.allowed_cpus));
            if young && free && !threads.is_empty() {
                new.push((g.pid, threads));
            }
        }
        // A lone group has the machine to itself: Linux's balancing
        // spreads its threads over every node's caches and controllers,
        // which gathering would take from it (mix:41013, one VM of four
        // memory-bound threads on barcelona-4s, +9 % gathered); its layout
        // is left to the measured moves.
        let groups = (s.groups.iter())
            .filter(|g| view.managed.contains(&g.pid))
            .count();
        if new.is_empty() || groups < 2 || crate::dino::aside::crowded(s, t).is_some() {
            return;
        }
        let placing: BTreeSet<i32> = new.iter().map(|(pid, _)| *pid).collect();
        // Cores busy with a thread that runs or is held there.
        let mut busy = vec![false; t.cores().len()];
        for x in s.tasks.iter().filter(|x| !placing.contains(&x.tgid)) {
            let held = x.allowed_cpus.len() < t.span().len();
            if x.state != 'R' && !held {
                continue;
            }
            if let Some(c) = x.last_cpu.and_then(|c| t.cpu_by_os_id(c)) {
                busy[c.core] = true;
            }
        }
        new.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        for (pid, threads) in new {
            // Each node's idle cores, once per group (the group before took
            // some).
            let idle: Vec<Vec<usize>> = (t.nodes().iter())
                .map(|n| {
                    (n.cores.iter())
                        .filter(|&&c| !busy[c] && t.cores()[c].span.is_subset(t.span()))
                        .copied()
                        .collect()
                })
                .collect();
            let free_mem = |n: usize| {
                s.machine
                    .nodes
                    .get(&t.nodes()[n].os_id)
                    .map_or(0, |m| m.free)
            };
            // Where its memory already is, if it has some: there, or
            // nowhere (memory interleaved or spread stays so, and threads
            // gathered away from it would reach all of it remotely).
            let memory = s
                .group(pid)
                .and_then(|g| g.memory_total())
                .unwrap_or_default();
            let total: u64 = memory.values().sum();
            // Memory under a policy of its own (bound, interleaved) goes
            // where that says, wherever its threads run.
            if s.explicit_mempolicy.contains(&pid) {
                continue;
            }
            let home = if total >= MEMORY_OF_ITS_OWN {
                let (&os, &most) = memory.iter().max_by_key(|(_, b)| **b).expect("some memory");
                match t.node_by_os_id(os) {
                    Some(n) if most as f64 / total as f64 >= ANCHOR_SHARE => Some(n.id),
                    _ => continue,
                }
            } else {
                None
            };
            let Some(node) = t
                .cpu_nodes()
                .map(|n| n.id)
                .filter(|&n| home.is_none_or(|h| h == n) && idle[n].len() >= threads.len())
                .max_by_key(|&n| (idle[n].len(), free_mem(n), std::cmp::Reverse(n)))
            else {
                continue;
            };
            let cores = &idle[node];
            let os_node = t.nodes()[node].os_id;
            for (x, &core) in threads.iter().zip(cores) {
                busy[core] = true;
                let cpu = t.cores()[core].cpus[0];
                let os = t.cpus()[cpu].os_id;
                let cpus: CpuSet = [os].into_iter().collect();
                let task = TaskId {
                    tid: x.tid,
                    start_time: x.start_time,
                };
                self.model_pins.insert(x.tid, (task, cpus.clone()));
                plan.push(
                    Action::Pin {
                        task,
                        tgid: pid,
                        cpus,
                    },
                    format!(
                        "auto: a group that started, first seen, gathered onto node {os_node} \
                         before it touches its memory ({} threads on idle cores), on CPU {os}",
                        threads.len()
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use numaplace_model::{MachineReadings, NodeMeminfo, NodeMemory, Snapshot, Task, Topology};

    use super::super::{Auto, AutoParams};
    use crate::testutil::{decide, pins, process, task};

    fn on() -> AutoParams {
        AutoParams {
            place_at_start: true,
            ..AutoParams::default()
        }
    }

    /// Two nodes of four cores, two hardware threads each.
    fn topo() -> Topology {
        Topology::synthetic("pack:2 numa:1 l3:1 core:4 pu:2").unwrap()
    }

    /// Round `seq` at `up` ticks since boot (100 a second): `groups`, each
    /// a process `(pid, threads)` started at tick 1 and running on node
    /// 0's first CPUs, free to run anywhere.
    fn round(t: &Topology, seq: u64, up: u64, groups: &[(i32, usize)]) -> Snapshot {
        let mut tasks = Vec::new();
        let mut gs = Vec::new();
        let mut cpu = 0;
        for &(pid, n) in groups {
            let tids: Vec<i32> = (0..n as i32).map(|k| pid + k).collect();
            for &tid in &tids {
                tasks.push(Task {
                    last_cpu: Some(t.cpus()[cpu % 4].os_id),
                    ..task(tid, pid, t.span())
                });
                cpu += 1;
            }
            gs.push(process(pid, "app", tids));
        }
        let mut machine = MachineReadings {
            uptime_ticks: Some(up),
            ..MachineReadings::default()
        };
        for n in 0..2 {
            machine.nodes.insert(
                n,
                NodeMeminfo {
                    total: 16 << 30,
                    free: 8 << 30,
                },
            );
        }
        let mut s = Snapshot {
            seq,
            interval_ns: 1_000_000_000,
            tasks,
            groups: gs,
            machine,
            ..Snapshot::default()
        };
        s.sort_tasks();
        s
    }

    /// The nodes (dense) and cores each process's pinned threads went to.
    fn placed(
        t: &Topology,
        s: &Snapshot,
        plan: &numaplace_model::Plan,
    ) -> BTreeMap<i32, Vec<(usize, usize)>> {
        let mut out: BTreeMap<i32, Vec<(usize, usize)>> = BTreeMap::new();
        for (tid, cpus) in pins(plan) {
            assert_eq!(cpus.len(), 1, "one CPU each");
            let c = t.cpu_by_os_id(cpus.first().unwrap()).unwrap();
            let pid = s.task(tid).unwrap().tgid;
            out.entry(pid).or_default().push((c.node, c.core));
        }
        out
    }

    #[test]
    fn groups_that_just_started_are_gathered_each_onto_idle_cores_of_a_node_of_its_own() {
        let t = topo();
        let mut auto = Auto::new(on());
        let s = round(&t, 0, 51, &[(100, 3), (200, 2)]);
        let plan = decide(&mut auto, &t, &s);
        let at = placed(&t, &s, &plan);
        assert_eq!(at.len(), 2, "{plan:?}");
        let nodes: Vec<BTreeSet<usize>> = (at.values())
            .map(|v| v.iter().map(|&(n, _)| n).collect())
            .collect();
        assert!(
            nodes.iter().all(|n| n.len() == 1),
            "each on one node: {at:?}"
        );
        assert_ne!(nodes[0], nodes[1], "each onto a node of its own: {at:?}");
        let cores: BTreeSet<usize> = at.values().flatten().map(|&(_, c)| c).collect();
        assert_eq!(cores.len(), 5, "a core each: {at:?}");
        assert!(
            plan.decisions
                .iter()
                .all(|d| d.reason.contains("first seen"))
        );
        // Off (the default), nothing is placed at first sight.
        let mut off = Auto::new(AutoParams::default());
        assert!(pins(&decide(&mut off, &t, &s)).is_empty());
        // Each group is looked at once.
        let again = decide(&mut auto, &t, &round(&t, 1, 151, &[(100, 3), (200, 2)]));
        assert!(pins(&again).is_empty(), "{again:?}");
    }

    #[test]
    fn a_group_goes_where_its_memory_already_is() {
        let t = topo();
        let mut auto = Auto::new(on());
        let mut s = round(&t, 0, 51, &[(100, 2), (200, 2)]);
        s.groups[1].memory = Some(BTreeMap::from([(
            1,
            NodeMemory {
                anon: 64 << 20,
                file: 0,
                huge: 0,
            },
        )]));
        let at = placed(&t, &s, &decide(&mut auto, &t, &s));
        assert!(at[&200].iter().all(|&(n, _)| n == 1), "{at:?}");
    }

    /// What is not placed at first sight: a process that has run for a
    /// while (the daemon started after it), one whose memory has a policy
    /// of its own, one whose memory is spread, a lone process, any process
    /// on a crowded machine, and any where the world gives no uptime.
    #[test]
    fn old_bound_spread_lone_crowded_or_ageless_groups_are_left_alone() {
        let t = topo();
        let none = |s: &Snapshot| {
            let mut auto = Auto::new(on());
            pins(&decide(&mut auto, &t, s))
        };
        assert!(
            none(&round(&t, 0, 1_000, &[(100, 2), (200, 2)])).is_empty(),
            "old"
        );
        let mut s = round(&t, 0, 51, &[(100, 2), (200, 2)]);
        s.explicit_mempolicy.insert(100);
        s.explicit_mempolicy.insert(200);
        assert!(none(&s).is_empty(), "a policy of its own");
        let mut s = round(&t, 0, 51, &[(100, 2), (200, 2)]);
        let half = NodeMemory {
            anon: 64 << 20,
            file: 0,
            huge: 0,
        };
        for g in &mut s.groups {
            g.memory = Some(BTreeMap::from([(0, half), (1, half)]));
        }
        assert!(none(&s).is_empty(), "spread memory");
        assert!(none(&round(&t, 0, 51, &[(100, 4)])).is_empty(), "lone");
        let crowded = round(&t, 0, 51, &[(100, 2), (200, 2), (300, 13)]);
        assert!(none(&crowded).is_empty(), "crowded: 17 runnable on 16 CPUs");
        let mut s = round(&t, 0, 51, &[(100, 2), (200, 2)]);
        s.machine.uptime_ticks = None;
        assert!(none(&s).is_empty(), "no age");
    }
}
