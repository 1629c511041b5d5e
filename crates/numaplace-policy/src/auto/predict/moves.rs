//! The search's moves: which CPUs a thread may go to, a whole group onto
//! one node, a placement made one movable thread per CPU, and where a
//! group's memory goes once its threads are placed.

use std::collections::BTreeMap;

use super::{Fit, Memory, Predictor};

impl Predictor {
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

    /// Group `g`'s movable threads moved onto node `node`'s free allowed
    /// CPUs (idle cores first, then their siblings), or `None` where it
    /// does not fit or is there already.
    pub(super) fn group_onto(
        &self,
        fit: &Fit,
        cpus: &[usize],
        g: usize,
        node: usize,
        allowed: &[bool],
    ) -> Option<Vec<usize>> {
        let members: Vec<usize> = (0..fit.threads.len())
            .filter(|&i| fit.threads[i].group == g && fit.threads[i].movable)
            .collect();
        if members.is_empty() || members.iter().all(|&i| self.node_of_cpu[cpus[i]] == node) {
            return None;
        }
        let mut busy_core = vec![0u32; self.core_of_cpu.iter().max().map_or(0, |m| m + 1)];
        let mut taken = vec![false; self.node_of_cpu.len()];
        for (i, &c) in cpus.iter().enumerate() {
            if fit.threads[i].group == g && fit.threads[i].movable {
                continue;
            }
            taken[c] = true;
            busy_core[self.core_of_cpu[c]] += 1;
        }
        let mut free: Vec<usize> = (0..self.node_of_cpu.len())
            .filter(|&c| self.node_of_cpu[c] == node && allowed[c] && !taken[c])
            .collect();
        if free.len() < members.len() {
            return None;
        }
        let mut out = cpus.to_vec();
        for &i in &members {
            let (k, &c) = free
                .iter()
                .enumerate()
                .min_by_key(|&(_, &c)| (busy_core[self.core_of_cpu[c]], c))?;
            free.swap_remove(k);
            busy_core[self.core_of_cpu[c]] += 1;
            out[i] = c;
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
    /// on one not allowed) moved to a free allowed CPU of the same node,
    /// else of any node; fixed threads stay.
    pub fn one_per_cpu(&self, fit: &Fit, want: &[usize], allowed: &[bool]) -> Vec<usize> {
        let mut cpus = want.to_vec();
        let mut taken = vec![false; self.node_of_cpu.len()];
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
        for i in clash {
            let n = self.node_of_cpu[cpus[i]];
            let pick = (0..taken.len())
                .filter(|&c| allowed[c] && !taken[c])
                .min_by_key(|&c| (self.node_of_cpu[c] != n, c));
            if let Some(c) = pick {
                taken[c] = true;
                cpus[i] = c;
            }
        }
        cpus
    }
}
