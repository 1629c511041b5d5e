//! The machine as DINO's and DI's layouts see it: memory domains (nodes
//! with CPUs) and their cores, and each process's memory per node.

use std::collections::{BTreeMap, HashMap};

use numaplace_model::{CpuSet, Snapshot, Topology};

use super::aside;
use super::layout::Domains;

/// The machine as the layout sees it: memory domains (nodes with CPUs) and
/// their cores, numbered domain by domain.
pub(super) struct Machine {
    pub(super) domains: Domains,
    /// Per global core: its CPUs (kernel ids) and its node's kernel id.
    pub(super) cores: Vec<(CpuSet, u32)>,
    /// Kernel ids of the nodes with cores.
    pub(super) cpu_nodes: Vec<u32>,
    /// The CPUs numaplace may place onto: a thread released to Linux gets
    /// them back.
    pub(super) span: CpuSet,
}

impl Machine {
    pub(super) fn new(t: &Topology) -> Machine {
        let mut per_domain = Vec::new();
        let mut cores = Vec::new();
        let mut cpu_nodes = Vec::new();
        for n in t.nodes().iter().filter(|n| !n.span.is_empty()) {
            let mine: Vec<_> = t
                .cores()
                .iter()
                .filter(|c| c.node == n.id)
                .map(|c| (c.span.intersection(t.span()), n.os_id))
                .filter(|(s, _)| !s.is_empty())
                .collect();
            if mine.is_empty() {
                continue;
            }
            per_domain.push(mine.len());
            cores.extend(mine);
            cpu_nodes.push(n.os_id);
        }
        Machine {
            domains: Domains {
                cores_per_domain: per_domain,
            },
            cores,
            cpu_nodes,
            span: t.span().clone(),
        }
    }
}

impl Machine {
    /// The CPUs of a node (kernel id) that numaplace may place onto.
    pub(super) fn node_cpus(&self, node: u32) -> CpuSet {
        let mut out = CpuSet::new();
        for (cpus, _) in self.cores.iter().filter(|(_, n)| *n == node) {
            out = out.union(cpus);
        }
        out
    }

    /// The core a thread runs on now, if that is on the node holding its
    /// memory (or its memory is spread); else the first core of that node.
    pub(super) fn where_now(
        &self,
        last_cpu: Option<u32>,
        home: Option<aside::Home>,
    ) -> Option<usize> {
        let now = last_cpu.and_then(|cpu| self.cores.iter().position(|(s, _)| s.contains(cpu)));
        match home {
            Some(aside::Home::Anchored(h)) => now
                .filter(|&c| self.cores[c].1 == h)
                .or_else(|| self.cores.iter().position(|(_, n)| *n == h)),
            _ => now,
        }
    }
}

/// Each process's memory per node, by pid.
pub(super) fn process_memory(
    s: &Snapshot,
) -> HashMap<i32, Option<&BTreeMap<u32, numaplace_model::NodeMemory>>> {
    s.groups
        .iter()
        .map(|g| (g.pid, g.memory.as_ref()))
        .collect()
}
