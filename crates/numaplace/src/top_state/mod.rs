//! What `numaplace top` shows, as one bounded value: the nodes, the groups
//! (processes and VMs) and the last decisions with their reasons. The
//! daemon builds it each round from the round's snapshot and journal
//! entries and serves it as JSON (`GET /state` on its metrics listener);
//! `top` without a daemon builds the same from its own collection rounds.
//!
//! Everything a process chose (names, VM names) is escaped with
//! [`numaplace_model::task::printable`] and cut to [`MAX_LABEL`] characters when it enters here,
//! and the lists are capped ([`MAX_GROUPS`], [`MAX_DECISIONS`]), so the
//! JSON stays small whatever runs on the machine.

use std::collections::{BTreeMap, HashMap, VecDeque};

use numaplace_model::world::JournalEntry;
use numaplace_model::{Counter, GroupKind, Scope, Snapshot, TaskId, Topology};
use numaplace_policy::engine::RoundReport;

use crate::report::engine::{describe_action, describe_outcome};
pub use numaplace_view::{
    BandwidthRow, DecisionRow, FORMAT, GroupRow, MAX_DECISIONS, MAX_GROUPS, MAX_LABEL, MAX_REASON,
    NodeAllocations, NodeRow, TopState, bounded,
};

/// Which signals the policy reads (the engine's `needs`), to say per group
/// which of them the round had.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reads {
    /// Per-thread hardware or software counters.
    pub counters: bool,
    /// Each process's memory per node (`numa_maps`).
    pub memory: bool,
    /// Sampled data addresses.
    pub samples: bool,
}

impl Reads {
    /// What the engine's policy reads.
    pub fn of(engine: &numaplace_policy::engine::Engine) -> Reads {
        let n = engine.needs();
        Reads {
            counters: n.counters,
            memory: n.memory,
            samples: n.samples,
        }
    }
}

/// Builds a [`TopState`] each round, keeping what spans rounds: each
/// thread's CPU time at the last round (for busy CPUs) and the last
/// decisions.
#[derive(Debug, Default)]
pub struct StateBuilder {
    cpu_ticks: HashMap<TaskId, u64>,
    /// A round was seen before this one: CPU times have a start.
    started: bool,
    decisions: VecDeque<DecisionRow>,
}

impl StateBuilder {
    /// Keeps a journal entry among the last decisions.
    pub fn entry(&mut self, e: &JournalEntry) {
        if self.decisions.len() == MAX_DECISIONS {
            self.decisions.pop_front();
        }
        self.decisions.push_back(DecisionRow {
            round: e.round,
            time_unix_ns: e.time_unix_ns,
            pid: e.pid,
            label: bounded(&e.label, MAX_LABEL),
            action: bounded(&describe_action(&e.action, e.current.as_ref()), MAX_REASON),
            reason: bounded(&e.reason, MAX_REASON),
            outcome: bounded(&describe_outcome(&e.outcome), MAX_REASON),
        });
    }

    /// The frame of a finished round. `class_of` says what the policy
    /// classed a group as, where it classes groups.
    pub fn round(
        &mut self,
        w: &Watch,
        snap: &Snapshot,
        class_of: &dyn Fn(i32) -> Option<String>,
    ) -> TopState {
        let (topology, scope, reads) = (w.topology, &w.scope, w.reads);
        let secs = snap.interval_ns as f64 / 1e9;
        let ticks = snap.machine.clock_ticks.max(1) as f64;
        // Each thread's CPU time over the interval, in CPUs' worth.
        let mut now = HashMap::with_capacity(snap.tasks.len());
        let mut busy_of = HashMap::with_capacity(snap.tasks.len());
        for t in &snap.tasks {
            let total = t.utime.saturating_add(t.stime);
            now.insert(t.id(), total);
            if secs > 0.0 {
                if let Some(&before) = self.cpu_ticks.get(&t.id()) {
                    busy_of.insert(t.tid, total.saturating_sub(before) as f64 / ticks / secs);
                }
            }
        }
        self.cpu_ticks = now;
        // Busy CPUs need the threads' CPU times of an earlier round, which
        // the first round the builder sees does not have (the daemon's
        // first snapshot has an interval from its own baseline reading).
        let had_start = std::mem::replace(&mut self.started, true);
        let measured = secs > 0.0 && had_start;
        let node_of_cpu = |cpu: u32| node_of_cpu(topology, cpu);

        let nodes = node_rows(topology, snap, &busy_of, measured);

        let mut bandwidth: BTreeMap<u32, u64> = BTreeMap::new();
        for r in &snap.machine.resctrl {
            if let Some(b) = r.mbm_total_bytes {
                *bandwidth.entry(r.domain).or_default() += b;
            }
        }
        // The collector's bandwidth is already over the interval.
        let bandwidth = if secs > 0.0 {
            bandwidth
                .into_iter()
                .map(|(domain, b)| BandwidthRow {
                    domain,
                    bytes_per_s: b as f64 / secs,
                })
                .collect()
        } else {
            Vec::new()
        };

        let mut groups: Vec<GroupRow> = snap
            .groups
            .iter()
            .filter(|g| !g.is_kernel())
            .map(|g| {
                let mut running = BTreeMap::new();
                let mut cpus = Vec::new();
                let mut busy = 0.0;
                let mut samples = 0usize;
                let mut faults = 0u64;
                let mut counted = (false, false);
                for &tid in &g.threads {
                    let Some(t) = snap.task(tid) else { continue };
                    if let Some(cpu) = t.last_cpu {
                        cpus.push(cpu);
                        if let Some(n) = node_of_cpu(cpu) {
                            *running.entry(n).or_insert(0) += 1;
                        }
                    }
                    busy += busy_of.get(&tid).copied().unwrap_or(0.0);
                    samples += snap.samples.get(&tid).map_or(0, Vec::len);
                    faults += snap.numa_faults.get(&tid).map_or(0, |f| f.total());
                    if let Some(c) = snap.counters.get(&tid) {
                        counted.0 |= c.values.keys().any(|k| !Counter::SOFTWARE.contains(k));
                        counted.1 |= !c.values.is_empty();
                    }
                }
                let mut signals = Vec::new();
                // Hardware counters (instructions, cycles, LLC, uncore), or
                // only the kernel's software ones (CPU time, switches).
                if reads.counters && counted.0 {
                    signals.push("hw counters".to_string());
                } else if reads.counters && counted.1 {
                    signals.push("sw counters".to_string());
                }
                if reads.samples && samples > 0 {
                    signals.push(format!("samples {samples}"));
                }
                if faults > 0 {
                    signals.push(format!("hinting faults {faults}"));
                }
                if reads.memory && g.memory.is_some() {
                    signals.push("numa_maps".to_string());
                }
                GroupRow {
                    pid: g.pid,
                    label: bounded(&g.label(), MAX_LABEL),
                    kind: match g.kind {
                        GroupKind::Process => "process".into(),
                        GroupKind::Vm { .. } => "vm".into(),
                    },
                    in_scope: scope.matches(g, snap),
                    threads: g.threads.len(),
                    running,
                    cpus: cpus
                        .into_iter()
                        .collect::<numaplace_model::CpuSet>()
                        .to_list_string(),
                    busy_cpus: measured.then_some(busy),
                    memory: g.memory_total(),
                    class: class_of(g.pid).map(|c| bounded(&c, MAX_LABEL)),
                    signals,
                    left_alone: Vec::new(),
                }
            })
            .collect();
        // In scope first, then the busiest; the rest left out.
        groups.sort_by(|a, b| {
            b.in_scope
                .cmp(&a.in_scope)
                .then(
                    b.busy_cpus
                        .unwrap_or(0.0)
                        .total_cmp(&a.busy_cpus.unwrap_or(0.0)),
                )
                .then(a.pid.cmp(&b.pid))
        });
        let groups_left_out = groups.len().saturating_sub(MAX_GROUPS);
        groups.truncate(MAX_GROUPS);

        TopState {
            format: FORMAT,
            policy: w.policy.clone(),
            applies: w.applies,
            round: snap.seq,
            time_unix_ns: snap.time_unix_ns,
            interval_ns: snap.interval_ns,
            nodes,
            bandwidth,
            groups,
            groups_left_out,
            decisions: self.decisions.iter().cloned().collect(),
        }
    }
}

/// The node (kernel id) of a CPU (kernel id) of the machine.
fn node_of_cpu(topology: &Topology, cpu: u32) -> Option<u32> {
    (topology.cpu_by_os_id(cpu)).map(|c| topology.nodes()[c.node].os_id)
}

/// The nodes' rows: CPUs busy over the interval where `measured` (from
/// each thread's busy CPUs, `busy_of`, by the node it last ran on), memory,
/// and page allocations per second from each node's numastat.
fn node_rows(
    topology: &Topology,
    snap: &Snapshot,
    busy_of: &HashMap<i32, f64>,
    measured: bool,
) -> Vec<NodeRow> {
    let mut node_busy: BTreeMap<u32, f64> = BTreeMap::new();
    for t in &snap.tasks {
        let Some(b) = busy_of.get(&t.tid) else {
            continue;
        };
        if let Some(n) = t.last_cpu.and_then(|cpu| node_of_cpu(topology, cpu)) {
            *node_busy.entry(n).or_default() += b;
        }
    }
    let allocations = snap.node_rates().unwrap_or_default();
    topology
        .nodes()
        .iter()
        .map(|n| {
            let mem = snap.machine.nodes.get(&n.os_id);
            NodeRow {
                id: n.os_id,
                cpus: n.span.to_list_string(),
                cpu_count: n.span.len(),
                busy_cpus: measured.then(|| node_busy.get(&n.os_id).copied().unwrap_or(0.0)),
                mem_total: mem.map(|m| m.total),
                mem_free: mem.map(|m| m.free),
                allocations: allocations.get(&n.os_id).map(|r| NodeAllocations {
                    local_per_s: r.local_node,
                    remote_per_s: r.other_node,
                    turned_away_per_s: r.numa_foreign,
                }),
            }
        })
        .collect()
}

/// What the frames are of: the machine, the scope, what the policy reads.
pub struct Watch<'a> {
    /// The machine.
    pub topology: &'a Topology,
    /// The processes the policy may act on.
    pub scope: Scope,
    /// The signals the policy reads.
    pub reads: Reads,
    /// The policy's name.
    pub policy: String,
    /// Whether actions are carried out (not a dry run, not `top`'s own).
    pub applies: bool,
}

/// What a loop (the daemon's, or `top`'s own) keeps to build each round's
/// frame.
pub struct Feed<'a> {
    /// What carries over from round to round (CPU times, decisions).
    pub builder: StateBuilder,
    /// What the frames are of.
    pub watch: Watch<'a>,
}

impl Feed<'_> {
    /// The frame of a finished round, with the policy's classes of the
    /// groups (the round's report's, where the engine was asked for them).
    pub fn frame(&mut self, snap: &Snapshot, report: &RoundReport) -> TopState {
        let mut frame = self
            .builder
            .round(&self.watch, snap, &|pid| report.classes.get(&pid).cloned());
        for g in &mut frame.groups {
            if let Some(kinds) = report.left_alone_by_process.get(&g.pid) {
                g.left_alone = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
            }
        }
        frame
    }

    /// The frame as JSON (what `GET /state` serves).
    pub fn json(&mut self, snap: &Snapshot, report: &RoundReport) -> String {
        crate::output::json::line(&self.frame(snap, report)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
