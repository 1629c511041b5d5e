//! The search's moves: which CPUs a thread may go to, a whole group onto
//! one node, a placement made one movable thread per CPU, where a group's
//! memory goes once its threads are placed, and when it arrives there.

use std::collections::BTreeMap;

use super::{Fit, Memory, Predictor};

impl Predictor {
    /// Per group, the seconds until the memory `moved` (bytes per group)
    /// has all arrived, and the seconds it waits before its own starts
    /// moving. The engine carries a round's moves in the plan's order
    /// within one page budget, which a placement's plan orders smallest
    /// first ([`serve_order`]): a group's memory waits for the moves before
    /// it. mix:50059 (21 groups on sapphirerapids-2s-snc4, 4 GiB of one
    /// process's memory among them): counted as if each group had the
    /// whole rate, the model's layout was predicted +10.7 % net of moving;
    /// at the rate limit its last moves had not started 13 rounds later,
    /// and it gained 3.8 % where DI-Migrate's layout gains 12.8 %.
    pub(super) fn arrivals(&self, moved: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let rate = self.migrate_bytes_per_s;
        if !self.migration_shared {
            return (
                moved.iter().map(|b| b / rate).collect(),
                vec![0.0; moved.len()],
            );
        }
        let (mut done, mut wait) = (vec![0.0; moved.len()], vec![0.0; moved.len()]);
        let mut before = 0.0;
        for g in serve_order(moved) {
            wait[g] = before / rate;
            before += moved[g];
            done[g] = before / rate;
        }
        (done, wait)
    }

    /// A group whose threads all run on one node gets its memory there; a
    /// group spread over several nodes keeps its memory where it is.
    pub(super) fn memory_follows(&self, fit: &Fit, cpus: &[usize], mem: &mut [Memory]) {
        let mut node: Vec<Option<Option<usize>>> = vec![None; fit.groups.len()];
        for (t, &c) in fit.threads.iter().zip(cpus) {
            let n = self.node_of_cpu[c];
            node[t.group] = match node[t.group] {
                None => Some(Some(n)),
                Some(Some(m)) if m == n => Some(Some(n)),
                _ => Some(None),
            };
        }
        for (g, n) in node.into_iter().enumerate() {
            mem[g] = match n.flatten() {
                Some(n) => Memory::To(n),
                None => Memory::Stay,
            };
        }
    }

    /// Group `g`'s movable threads moved onto node `node`'s allowed CPUs:
    /// its free ones first (idle cores first, then their siblings), then
    /// those of other groups' movable threads, each of which takes a CPU
    /// one of `g`'s threads left (a swap); `None` where it does not fit or
    /// is there already. Without the swaps a group that shares written
    /// data could be gathered only onto a node that happened to have room:
    /// mix:52020, 13 threads of a process storing to 509 KiB they share
    /// (9.5 stores per 1000 instructions), left over three packages of 14
    /// CPUs by a model layout of 9 groups, ran 214 s; gathered by the
    /// kernel's balancing, 136 s.
    pub(super) fn group_onto(
        &self,
        fit: &Fit,
        cpus: &[usize],
        g: usize,
        node: usize,
        allowed: &[bool],
    ) -> Option<Vec<usize>> {
        let mine = |i: usize| fit.threads[i].group == g && fit.threads[i].movable;
        let members: Vec<usize> = (0..fit.threads.len()).filter(|&i| mine(i)).collect();
        if members.is_empty() || members.iter().all(|&i| self.node_of_cpu[cpus[i]] == node) {
            return None;
        }
        let mut busy_core = vec![0u32; self.core_of_cpu.iter().max().map_or(0, |m| m + 1)];
        let mut holder: Vec<Option<usize>> = vec![None; self.node_of_cpu.len()];
        for (i, &c) in cpus.iter().enumerate() {
            if mine(i) {
                continue;
            }
            holder[c] = Some(i);
            busy_core[self.core_of_cpu[c]] += 1;
        }
        let here = |c: usize| self.node_of_cpu[c] == node && allowed[c];
        let mut free: Vec<usize> = (0..self.node_of_cpu.len())
            .filter(|&c| here(c) && holder[c].is_none())
            .collect();
        // Other groups' movable threads on the node, to swap out.
        let mut others: Vec<usize> = (0..self.node_of_cpu.len())
            .filter(|&c| here(c) && holder[c].is_some_and(|i| fit.threads[i].movable))
            .collect();
        if free.len() + others.len() < members.len() {
            return None;
        }
        let mut out = cpus.to_vec();
        let mut left: Vec<usize> = Vec::new();
        // The least busy core's CPU first, of the free ones, then of
        // the others'.
        let take = |from: &mut Vec<usize>, busy: &[u32]| {
            let (k, _) =
                (from.iter().enumerate()).min_by_key(|&(_, &c)| (busy[self.core_of_cpu[c]], c))?;
            Some(from.swap_remove(k))
        };
        for &i in &members {
            let c = if free.is_empty() {
                let c = take(&mut others, &busy_core)?;
                left.push(holder[c].expect("held by another group's thread"));
                c
            } else {
                let c = take(&mut free, &busy_core)?;
                busy_core[self.core_of_cpu[c]] += 1;
                c
            };
            out[i] = c;
        }
        // Each thread swapped out takes a CPU a member left off the node.
        let mut vacated: Vec<usize> = (members.iter())
            .map(|&i| cpus[i])
            .filter(|&c| self.node_of_cpu[c] != node)
            .collect();
        for other in left {
            out[other] = vacated.pop()?;
        }
        Some(out)
    }

    /// The CPUs worth trying for thread `i`: in each other LLC (of its
    /// node or another), a free CPU (on an idle core first); on its own
    /// LLC, a free CPU on an idle core where it shares its core; and each
    /// CPU holding a movable thread of another group on another LLC (a
    /// swap).
    pub(super) fn targets(
        &self,
        fit: &Fit,
        cpus: &[usize],
        i: usize,
        allowed: &[bool],
    ) -> Vec<usize> {
        let here = self.llc_of_cpu[cpus[i]];
        let mut busy_core = vec![0u32; self.core_of_cpu.iter().max().map_or(0, |m| m + 1)];
        let mut taken = vec![false; self.node_of_cpu.len()];
        for &c in cpus {
            taken[c] = true;
            busy_core[self.core_of_cpu[c]] += 1;
        }
        let mut out = Vec::new();
        let shares_core = busy_core[self.core_of_cpu[cpus[i]]] > 1;
        let mut free_on: BTreeMap<usize, (u32, usize)> = BTreeMap::new();
        for c in 0..self.node_of_cpu.len() {
            let l = self.llc_of_cpu[c];
            if !allowed[c] || taken[c] {
                continue;
            }
            let load = busy_core[self.core_of_cpu[c]];
            if l == here && (!shares_core || load > 0) {
                continue;
            }
            let e = free_on.entry(l).or_insert((u32::MAX, c));
            if load < e.0 {
                *e = (load, c);
            }
        }
        out.extend(free_on.values().map(|&(_, c)| c));
        let g = fit.threads[i].group;
        for (j, t) in fit.threads.iter().enumerate() {
            if t.movable && t.group != g && self.llc_of_cpu[cpus[j]] != here {
                out.push(cpus[j]);
            }
        }
        out
    }

    /// `want` made one movable thread per CPU: threads sharing a CPU (or
    /// on one not allowed) moved to a free allowed CPU of the same node
    /// (on an idle core first, as Linux's balancing spreads threads over
    /// the cores of the CPUs they may use), else of any node unless
    /// `pinned` (the threads are pinned to their nodes: a thread with no
    /// free CPU left on its node shares one there); fixed threads stay.
    pub fn one_per_cpu(
        &self,
        fit: &Fit,
        want: &[usize],
        allowed: &[bool],
        pinned: bool,
    ) -> Vec<usize> {
        let mut cpus = want.to_vec();
        let mut taken = vec![false; self.node_of_cpu.len()];
        let mut busy_core = vec![0u32; self.core_of_cpu.iter().max().map_or(0, |m| m + 1)];
        for (t, &c) in fit.threads.iter().zip(want) {
            if !t.movable {
                taken[c] = true;
            }
        }
        let mut clash = Vec::new();
        for (i, t) in fit.threads.iter().enumerate() {
            if !t.movable {
                continue;
            }
            let c = cpus[i];
            if allowed[c] && !taken[c] {
                taken[c] = true;
            } else {
                clash.push(i);
            }
        }
        for (c, &t) in taken.iter().enumerate() {
            if t {
                busy_core[self.core_of_cpu[c]] += 1;
            }
        }
        for i in clash {
            let n = self.node_of_cpu[cpus[i]];
            // Pinned to its node, within it only: a thread pinned to a
            // node's CPUs cannot leave them, and where they are all taken
            // it time-shares one (spilled to another node, 12 threads
            // pinned to a node of 6 CPUs looked like 6 there and 6
            // elsewhere).
            let pick = (0..taken.len())
                .filter(|&c| allowed[c] && !taken[c])
                .filter(|&c| !pinned || self.node_of_cpu[c] == n)
                .min_by_key(|&c| (self.node_of_cpu[c] != n, busy_core[self.core_of_cpu[c]], c));
            if let Some(c) = pick {
                taken[c] = true;
                busy_core[self.core_of_cpu[c]] += 1;
                cpus[i] = c;
            }
        }
        cpus
    }
}

/// The order the engine is asked to move groups' memory in: the least
/// first (each group's bytes in `moved`; ties by index), so that the
/// groups waiting behind the others under one rate limit wait least in
/// all. Groups that move nothing are left out.
pub(crate) fn serve_order(moved: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..moved.len()).filter(|&g| moved[g] > 0.0).collect();
    order.sort_by(|&a, &b| moved[a].total_cmp(&moved[b]).then(a.cmp(&b)));
    order
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use numaplace_model::{Counter, NodeMemory, Snapshot, Task, Topology};

    use super::Predictor;
    use crate::testutil::{counters, process, task};

    /// Round 10, one second long, nothing in it yet.
    fn round_10() -> Snapshot {
        Snapshot {
            seq: 10,
            interval_ns: 1_000_000_000,
            ..Snapshot::default()
        }
    }

    /// Thread `tid` of process `pid` on dense CPU `cpu`, busy the whole
    /// round: 1e9 instructions at `cpi` cycles each, `misses` LLC misses.
    fn busy(
        s: &mut Snapshot,
        t: &Topology,
        (tid, pid): (i32, i32),
        cpu: usize,
        (cpi, misses): (u64, u64),
    ) {
        s.tasks.push(Task {
            last_cpu: Some(t.cpus()[cpu].os_id),
            ..task(tid, pid, t.span())
        });
        s.counters.insert(
            tid,
            counters([
                (Counter::Instructions, 1_000_000_000),
                (Counter::Cycles, cpi * 1_000_000_000),
                (Counter::LlcMisses, misses),
                (Counter::TaskClock, 1_000_000_000),
            ]),
        );
    }

    /// Three busy threads a plan put on one CPU of node 0 (DI-Migrate pins
    /// to a node's CPUs, and the model's reading of its plan took the
    /// first): made one per CPU, the two moved go to the node's idle core
    /// first, as Linux would put them, not onto the sibling of the busy
    /// one, and the third, with the node full, to a sibling of node 0
    /// before any CPU of node 1.
    #[test]
    fn threads_sharing_a_cpu_go_to_idle_cores_of_their_node_first() {
        let t = Topology::synthetic("pack:1 numa:2 l3:1 core:2 pu:2").unwrap();
        let mut s = round_10();
        let tids = vec![100, 101, 102];
        for &tid in &tids {
            busy(&mut s, &t, (tid, 100), 0, (2, 1_000_000));
        }
        let mut p = process(100, "app", tids);
        let node0 = t.nodes()[0].os_id;
        p.memory = Some(BTreeMap::from([(
            node0,
            NodeMemory {
                anon: 1 << 28,
                file: 0,
                huge: 0,
            },
        )]));
        s.groups.push(p);
        s.sort_tasks();
        let mut predictor = Predictor::new(&t, None);
        let fit = predictor.fit(&t, &s, &|_| true).expect("a fit");
        assert_eq!(fit.threads.len(), 3);
        let allowed = vec![true; t.cpus().len()];
        let cpus = predictor.one_per_cpu(&fit, &[0, 0, 0], &allowed, false);
        let core = |c: usize| predictor.core_of_cpu[c];
        let node = |c: usize| predictor.node_of_cpu[c];
        assert_eq!(cpus[0], 0);
        assert!(cpus.iter().all(|&c| node(c) == 0), "{cpus:?}");
        let mut distinct = cpus.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "one CPU each: {cpus:?}");
        assert_ne!(core(cpus[1]), core(0), "the idle core first: {cpus:?}");
    }

    /// A group split over two nodes is gathered onto one though the node
    /// has room for only one of its threads: another group's thread there
    /// is swapped out onto the CPU the moved thread left. Where that
    /// thread may not be moved, the group does not fit.
    #[test]
    fn a_group_is_gathered_onto_a_node_by_swapping_out_another_groups_thread() {
        let t = Topology::synthetic("pack:2 numa:1 l3:1 core:2 pu:1").unwrap();
        let mut s = round_10();
        // Process 100's threads on CPUs 0 and 2, 200's on 1, 300's on 3.
        for (pid, tids) in [(100, vec![101, 102]), (200, vec![201]), (300, vec![301])] {
            for &tid in &tids {
                let cpu = match tid {
                    101 => 0,
                    102 => 2,
                    201 => 1,
                    _ => 3,
                };
                busy(&mut s, &t, (tid, pid), cpu, (1, 0));
            }
            s.groups.push(process(pid, "app", tids));
        }
        s.sort_tasks();
        let mut predictor = Predictor::new(&t, None);
        let allowed = vec![true; t.cpus().len()];
        let fit = predictor.fit(&t, &s, &|_| true).expect("a fit");
        let at = |fit: &super::Fit, cpus: &[usize], tid: i32| {
            let i = fit.threads.iter().position(|x| x.task.tid == tid).unwrap();
            cpus[i]
        };
        let now: Vec<usize> = fit.threads.iter().map(|x| x.cpu).collect();
        let g = fit.groups.iter().position(|&p| p == 100).unwrap();
        let moved = predictor
            .group_onto(&fit, &now, g, 0, &allowed)
            .expect("gathered onto node 0");
        let mut mine = [at(&fit, &moved, 101), at(&fit, &moved, 102)];
        mine.sort();
        assert_eq!(mine, [0, 1], "{moved:?}");
        assert_eq!(at(&fit, &moved, 201), 2, "swapped onto the CPU 102 left");
        assert_eq!(at(&fit, &moved, 301), 3, "left where it was");
        // Process 200's thread not movable: node 0 has no room.
        let fit = predictor
            .fit(&t, &s, &|x: &Task| x.tgid != 200)
            .expect("a fit");
        let now: Vec<usize> = fit.threads.iter().map(|x| x.cpu).collect();
        let g = fit.groups.iter().position(|&p| p == 100).unwrap();
        assert_eq!(predictor.group_onto(&fit, &now, g, 0, &allowed), None);
    }
}
