//! DI-Plain and DI-Migrate (\[Blagodurov11\] §3.1, §3.2): threads ranked by
//! LLC miss rate dealt over the memory domains, most and least intensive
//! alternating; with DI-Migrate, memory following them.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use numaplace_model::plan::DEFAULT_WINDOW_PAGES;
use numaplace_model::{Action, CpuSet, Plan, Snapshot};

use super::aside;
use super::candidates::{
    BLIND_WITHOUT_MPKI, Candidate, FOLLOW_WITHOUT_SAMPLES, TaskMap, TaskSet, candidates,
    linux_cpus, release_all,
};
use super::layout;
use super::machine::{Machine, process_memory};
use super::memory::{MAX_WINDOW_PAGES, MemoryFollower, Placed, Who};
use crate::{Needs, Policy, Signal, View};

/// The node holding a thread's memory, when that is not `node` (where DI
/// would put it) and its memory is anchored there ([`aside::home`]), with
/// what said so.
fn anchored_elsewhere(
    s: &Snapshot,
    c: &Candidate<'_>,
    memory: &HashMap<i32, Option<&BTreeMap<u32, numaplace_model::NodeMemory>>>,
    m: &Machine,
    node: u32,
) -> Option<(u32, aside::Evidence)> {
    let samples = s.samples.get(&c.id.tid).map_or(&[][..], |v| &v[..]);
    let process = memory.get(&c.tgid).copied().flatten();
    match aside::home(samples, s.numa_faults.get(&c.id.tid), process, &m.cpu_nodes)? {
        (aside::Home::Anchored(h), e) if h != node => Some((h, e)),
        _ => None,
    }
}

/// Which anchored threads (`anchored[i]`: the node holding candidate
/// `i`'s memory, where that is not where DI deals it) take their node's
/// room, the cores `on_node` (threads dealt there) leaves: those that held
/// it last round first, then in rank order. In rank order alone, threads
/// of about equal intensity traded the room and the whole machine every
/// round as their ranks crossed (mix:56096: 10 threads bound to a node of
/// 4 cores, 1,000 moves to another node per thread and hour).
fn roomed(
    t: &numaplace_model::Topology,
    m: &Machine,
    cands: &[Candidate<'_>],
    anchored: &[Option<(u32, aside::Evidence)>],
    on_node: &mut BTreeMap<u32, usize>,
) -> std::collections::BTreeSet<usize> {
    let mut roomed = std::collections::BTreeSet::new();
    for held_first in [true, false] {
        for (i, c) in cands.iter().enumerate() {
            let Some((home, _)) = anchored[i] else {
                continue;
            };
            let beside = crate::confine(t, c.confined, &m.node_cpus(home));
            if held_first != (beside.as_ref() == Some(c.allowed)) || roomed.contains(&i) {
                continue;
            }
            let room = m.cores.iter().filter(|(_, n)| *n == home).count();
            let taken = on_node.entry(home).or_insert(0);
            if *taken < room {
                *taken += 1;
                roomed.insert(i);
            }
        }
    }
    roomed
}

/// Each thread whose memory anchors it (`homes[i]`, [`aside::home`]) to
/// another node than the one its rank deals it to trades cores with the
/// thread of the nearest rank dealt to that node whose memory is not
/// anchored there, so that it runs beside its memory in the place of one
/// about as intensive and the intensity per node stays as DI spreads it.
/// Left where its rank sent it, the other thread would share the node
/// with it (mix:56096: a devil bound to node 2 beside the devil DI dealt
/// there, while node 0, where DI had dealt the first, had none).
fn swap_to_anchors(
    homes: &[Option<u32>],
    m: &Machine,
    assigned: &mut BTreeMap<u64, usize>,
) -> BTreeMap<usize, usize> {
    let mut swapped = BTreeMap::new();
    let node = |i: usize, a: &BTreeMap<u64, usize>| a.get(&(i as u64)).map(|&k| m.cores[k].1);
    for (i, h) in homes.iter().enumerate() {
        let (Some(home), Some(&mine)) = (*h, assigned.get(&(i as u64))) else {
            continue;
        };
        if node(i, assigned) == Some(home) {
            continue;
        }
        let partner = (0..homes.len())
            .filter(|&j| homes[j] != Some(home) && node(j, assigned) == Some(home))
            .filter(|&j| homes[j].is_none() || homes[j] == Some(m.cores[mine].1))
            .min_by_key(|&j| j.abs_diff(i));
        if let Some(j) = partner {
            let theirs = assigned[&(j as u64)];
            assigned.insert(i as u64, theirs);
            assigned.insert(j as u64, mine);
            swapped.insert(i, j);
        }
    }
    swapped
}

/// Among the threads of one process in one intensity class (§3.3.2's
/// turtles, devils, super-devils), the cores the ranking gave them
/// (`assigned`, rank to core) go first to those already on them, then to
/// those already on their node, then in rank order.
///
/// \[Blagodurov11\]'s DI ranks afresh every round, and the threads of one
/// program doing the same work have about equal miss rates, so their
/// ranks cross from round to round with the noise and their phases, and
/// each crossing swapped their nodes and, under DI-Migrate, their memory
/// (mix:56096: three threads of an interleaved program traded nodes 1, 2
/// and 3 every round, moving 74 million pages an hour). Which of such
/// threads takes which of their cores changes nothing of how intensity is
/// spread over the domains.
fn keep_places(cands: &[Candidate<'_>], m: &Machine, assigned: &mut BTreeMap<u64, usize>) {
    let classes = super::classes::Thresholds::default();
    let mut sets: BTreeMap<(i32, super::layout::Class), Vec<usize>> = BTreeMap::new();
    for (i, c) in cands.iter().enumerate() {
        if assigned.contains_key(&(i as u64)) {
            sets.entry((c.tgid, classes.classify(c.mpki)))
                .or_default()
                .push(i);
        }
    }
    let node_of = |cpu: u32| {
        m.cores
            .iter()
            .find(|(s, _)| s.contains(cpu))
            .map(|(_, n)| *n)
    };
    for members in sets.values().filter(|v| v.len() > 1) {
        let mut free: Vec<usize> = members.iter().map(|i| assigned[&(*i as u64)]).collect();
        let mut given: BTreeMap<usize, usize> = BTreeMap::new();
        let on_core = |i: usize, k: usize| cands[i].allowed.is_subset(&m.cores[k].0);
        let on_node = |i: usize, k: usize| {
            let c = &cands[i];
            let here = c.allowed.first().filter(|_| c.allowed.len() < m.span.len());
            here.or(c.last_cpu).and_then(node_of) == Some(m.cores[k].1)
        };
        for fits in [
            &on_core as &dyn Fn(usize, usize) -> bool,
            &on_node,
            &|_, _| true,
        ] {
            for &i in members {
                if given.contains_key(&i) {
                    continue;
                }
                if let Some(pos) = free.iter().position(|&k| fits(i, k)) {
                    given.insert(i, free.remove(pos));
                }
            }
        }
        for (i, k) in given {
            assigned.insert(i as u64, k);
        }
    }
}

/// DI-Plain's and DI-Migrate's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct DiParams {
    /// Pages moved around each sampled address (DI-Migrate; §4).
    pub window_pages: u64,
    /// Two threads keep last round's order in the ranking unless their
    /// LLC miss rates differ by more than this percentage. 0 (the
    /// default) is \[Blagodurov11\]'s DI, which ranks afresh every round, so two
    /// threads of about the same intensity trade places, cores and memory
    /// whenever their rates cross; `auto` ranks with 10 %.
    pub rank_hysteresis_percent: f64,
}

impl Default for DiParams {
    fn default() -> Self {
        DiParams {
            window_pages: DEFAULT_WINDOW_PAGES,
            rank_hysteresis_percent: 0.0,
        }
    }
}

/// `di-plain` (§3.1) or, with memory following, `di-migrate` (§3.2).
pub struct DistributedIntensity {
    migrate: Option<MemoryFollower>,
    ours: TaskMap<CpuSet>,
    /// [`DiParams::rank_hysteresis_percent`] as a fraction.
    hysteresis: f64,
    /// Each thread's rank last round.
    ranks: TaskMap<usize>,
}

impl DistributedIntensity {
    /// DI-Plain: threads spread by miss rate, memory left where it is.
    pub fn plain() -> DistributedIntensity {
        DistributedIntensity {
            migrate: None,
            ours: TaskMap::default(),
            hysteresis: 0.0,
            ranks: TaskMap::default(),
        }
    }

    /// DI-Migrate: the same, memory following its threads, with `p`.
    pub fn migrate(p: DiParams) -> DistributedIntensity {
        DistributedIntensity {
            migrate: Some(MemoryFollower::new(p.window_pages, false)),
            ours: TaskMap::default(),
            hysteresis: p.rank_hysteresis_percent / 100.0,
            ranks: TaskMap::default(),
        }
    }
}

/// Puts back last round's order (`ranks`) between neighbours in `cands`
/// (sorted most intensive first) whose miss rates are within `hysteresis`
/// of each other, so that a crossing of two about equal rates moves no
/// thread: swaps of adjacent pairs only, each undoing one inversion of
/// last round's order, so it ends.
fn keep_order(cands: &mut [Candidate<'_>], ranks: &TaskMap<usize>, hysteresis: f64) {
    let rank = |c: &Candidate<'_>| ranks.get(&c.id).copied().unwrap_or(usize::MAX);
    let mut swapped = true;
    while swapped {
        swapped = false;
        for i in 1..cands.len() {
            let (a, b) = (&cands[i - 1], &cands[i]);
            if rank(b) < rank(a) && a.mpki <= b.mpki * (1.0 + hysteresis) {
                cands.swap(i - 1, i);
                swapped = true;
            }
        }
    }
}

impl Policy for DistributedIntensity {
    fn name(&self) -> &'static str {
        if self.migrate.is_some() {
            "di-migrate"
        } else {
            "di-plain"
        }
    }

    fn needs(&self) -> Needs {
        Needs {
            counters: true,
            // DI-Plain reads where memory is, to leave threads near it.
            memory: true,
            samples: self.migrate.is_some(),
            page_sets: false,
        }
    }

    fn without(&self, signal: Signal) -> Option<String> {
        match signal {
            Signal::LlcMissRate => Some(BLIND_WITHOUT_MPKI.into()),
            Signal::Samples if self.migrate.is_some() => Some(FOLLOW_WITHOUT_SAMPLES.into()),
            _ => None,
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let m = Machine::new(view.topology);
        let mut plan = Plan::default();
        let mut skipped = 0;
        let labels = view.labels();
        let mut cands = candidates(view, &labels, &self.ours, &mut skipped);
        let name = self.name();
        let alive: TaskSet = cands.iter().map(|c| c.id).collect();
        self.ours.retain(|k, _| alive.contains(k));
        if cands.is_empty() || m.cores.is_empty() {
            return plan;
        }
        if let Some(why) = aside::crowding(view.snapshot, view.topology) {
            release_all(name, &cands, &mut self.ours, &m.span, &why, &mut plan);
            return plan;
        }
        // Most intensive first; ties by tid, so a round is reproducible.
        cands.sort_by(|a, b| b.mpki.total_cmp(&a.mpki).then(a.id.tid.cmp(&b.id.tid)));
        if self.hysteresis > 0.0 {
            keep_order(&mut cands, &self.ranks, self.hysteresis);
            self.ranks = cands.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        }
        let order: Vec<u64> = (0..cands.len() as u64).collect();
        let mut assigned: BTreeMap<u64, usize> = layout::distributed_intensity(&order, &m.domains)
            .into_iter()
            .collect();
        let memory = process_memory(view.snapshot);
        let homes: Vec<Option<(u32, aside::Evidence)>> = cands
            .iter()
            .map(|c| anchored_elsewhere(view.snapshot, c, &memory, &m, u32::MAX))
            .collect();
        let home_nodes: Vec<Option<u32>> = homes.iter().map(|h| h.map(|h| h.0)).collect();
        let swapped = swap_to_anchors(&home_nodes, &m, &mut assigned);
        keep_places(&cands, &m, &mut assigned);
        let mut placed = Vec::new();
        // Threads on each node: those DI deals there, then those left
        // beside their memory there, up to the node's cores.
        // Each thread's home, read once above, where its core is not there.
        let anchored: Vec<Option<(u32, aside::Evidence)>> = (homes.iter().enumerate())
            .map(|(i, h)| {
                let &core = assigned.get(&(i as u64))?;
                h.filter(|(home, _)| *home != m.cores[core].1)
            })
            .collect();
        let mut on_node: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, a) in anchored.iter().enumerate() {
            if let (None, Some(&core)) = (a, assigned.get(&(i as u64))) {
                *on_node.entry(m.cores[core].1).or_insert(0) += 1;
            }
        }
        let roomed = roomed(view.topology, &m, &cands, &anchored, &mut on_node);
        for (i, c) in cands.iter().enumerate() {
            let Some(&core) = assigned.get(&(i as u64)) else {
                continue;
            };
            let (cpus, node) = &m.cores[core];
            let Some(cpus) = &crate::confine(view.topology, c.confined, cpus) else {
                continue;
            };
            let who = Who::Thread {
                class: None,
                tid: c.id.tid,
                label: c.label,
            };
            if let Some((home, evidence)) = anchored[i] {
                // DI-Plain's memory stays (§3.1): moving the thread away
                // from it is what §3.2 measured as harm. It is left to
                // Linux within its memory's node, while the node has a
                // core for it besides the threads dealt there: given the
                // whole machine, Linux moved it to another node, away from
                // its memory, as soon as DI pinned a thread onto the core
                // it ran on (measured: +18 % on a generated mix of one
                // 4-vCPU VM whose vCPUs first-touched their memory on both
                // nodes). Beyond the node's cores it goes back to Linux.
                let (cpus, how) = if roomed.contains(&i) {
                    let beside = m.node_cpus(home);
                    let how = format!("to node {home}'s CPUs {beside}, left to Linux within them");
                    (beside, how)
                } else {
                    let linux = linux_cpus(&m.span, c.confined);
                    let how = format!("back to Linux (CPUs {linux}), node {home} being full");
                    (linux, how)
                };
                let Some(cpus) = crate::confine(view.topology, c.confined, &cpus) else {
                    continue;
                };
                let ours = if cpus == linux_cpus(&m.span, c.confined) {
                    self.ours.remove(&c.id).is_some()
                } else {
                    self.ours.insert(c.id, cpus.clone());
                    true
                };
                if ours && *c.allowed != cpus {
                    plan.push(
                        Action::Pin {
                            task: c.id,
                            tgid: c.tgid,
                            cpus,
                        },
                        format!(
                            "{name}: {who} {how}: its memory is on node {home} (by {}) and does not follow it to core {core} (node {node}), where its rank would put it",
                            evidence.describe()
                        ),
                    );
                }
                continue;
            }
            placed.push(Placed {
                tid: c.id.tid,
                tgid: c.tgid,
                node: *node,
                who: who.clone(),
            });
            if *c.allowed != *cpus {
                plan.push(
                    Action::Pin {
                        task: c.id,
                        tgid: c.tgid,
                        cpus: cpus.clone(),
                    },
                    format!(
                        "{name}: {who} ranks {} of {} by LLC miss rate ({:.1} per 1000 instructions): core {core} (CPUs {cpus}, node {node}){}",
                        i + 1,
                        cands.len(),
                        c.mpki,
                        match (homes[i], swapped.get(&i)) {
                            (Some((h, e)), Some(&j)) if h == *node => format!(
                                ", beside its memory (by {}), in the place of thread {} (rank {}), which DI dealt here",
                                e.describe(),
                                cands[j].id.tid,
                                j + 1
                            ),
                            _ => String::new(),
                        }
                    ),
                );
            }
            self.ours.insert(c.id, cpus.clone());
        }
        if let Some(f) = self.migrate.as_mut() {
            f.plan(view.snapshot, &placed, &mut plan);
        }
        plan
    }
}

impl crate::Params for DiParams {
    fn validate(&self) -> Result<(), String> {
        crate::within("window-pages", self.window_pages, 1, MAX_WINDOW_PAGES)?;
        if !self.rank_hysteresis_percent.is_finite() {
            return Err(format!(
                "rank-hysteresis-percent = {}: must be a number from 0 to 100",
                self.rank_hysteresis_percent
            ));
        }
        crate::within(
            "rank-hysteresis-percent",
            self.rank_hysteresis_percent,
            0.0,
            100.0,
        )
    }
}
