//! DINO, DI-Plain and DI-Migrate (\[Blagodurov11\] §3): contention-aware placement
//! for NUMA machines.
//!
//! * `di-plain` (§3.1): every round, threads sorted by LLC miss rate are
//!   spread over the memory domains, alternating the most and the least
//!   intensive, so each domain gets a mix; memory stays where it is.
//! * `di-migrate` (§3.2): the same, with memory following the threads
//!   ([`memory`]).
//! * `dino` (§3.3): threads in broad classes (turtle, devil, super-devil)
//!   with hysteresis ([`classes`]), a placement layout of class slots on
//!   cores, threads matched to slots so that none moves without a change
//!   in its class or its core's slots, threads of one application kept in
//!   one domain where contention allows ([`layout`]), memory following the
//!   threads, and memory that ping-pongs between nodes left alone.
//!
//! Threads that chose their own CPUs (narrower than the machine, and not by
//! numaplace) are left alone, as the engine requires; threads without LLC
//! miss counts (no PMU) cannot be classified and are left where they are.

pub mod aside;
pub mod classes;
pub mod layout;
pub mod memory;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use numaplace_model::metrics::mpki;
use numaplace_model::plan::DEFAULT_WINDOW_PAGES;
use numaplace_model::{Action, CpuSet, Plan, Snapshot, TaskId, Topology};

use crate::{Needs, Policy, Signal, View};

/// What DINO and DI do where LLC misses cannot be counted.
const BLIND_WITHOUT_MPKI: &str = "classifies threads by their LLC misses per 1000 instructions \
     ([Blagodurov11] §3), which are not counted here: it leaves every thread where it is; \
     --counters-from FILE feeds made-up counters for testing";

/// What DINO and DI-Migrate do where data addresses cannot be sampled.
const FOLLOW_WITHOUT_SAMPLES: &str = "moves the pages around a migrated thread's sampled data \
     addresses ([Blagodurov11] §4), which are not sampled here: it moves a process's anonymous \
     pages on other nodes instead, hot or not, and only once all its threads run on one node";
/// Maps keyed by thread, hashed cheaply: a decision over 10,000 threads
/// looks each up in three of them (issue 19 found SipHash a tenth of the
/// decision). Nothing is iterated in hash order, so the hasher cannot
/// change a decision.
type TaskMap<V> = HashMap<TaskId, V, BuildHasherDefault<TaskIdHasher>>;
type TaskSet = HashSet<TaskId, BuildHasherDefault<TaskIdHasher>>;

/// A multiplicative (Fx-style) hasher for [`TaskId`]s: tids and start
/// times are not chosen by an adversary who could make them collide at
/// will (the kernel hands them out), and the map stays correct if they do.
#[derive(Default)]
struct TaskIdHasher(u64);

impl Hasher for TaskIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        const K: u64 = 0xf135_7aea_2e62_a9c5;
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(K);
    }

    fn write_i32(&mut self, v: i32) {
        self.write_u64(u64::from(v as u32));
    }
}

use classes::{Hysteresis, Thresholds};
use layout::{Class, Domains, OldPlace, Slotted};
use memory::{MemoryFollower, Placed, Who};

/// The machine as the layout sees it: memory domains (nodes with CPUs) and
/// their cores, numbered domain by domain.
struct Machine {
    domains: Domains,
    /// Per global core: its CPUs (kernel ids) and its node's kernel id.
    cores: Vec<(CpuSet, u32)>,
    /// Kernel ids of the nodes with cores.
    cpu_nodes: Vec<u32>,
    /// The CPUs numaplace may place onto: a thread released to Linux gets
    /// them back.
    span: CpuSet,
}

impl Machine {
    fn new(t: &Topology) -> Machine {
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

/// The CPUs Linux has a thread run on when a policy gives it back: those
/// of `span` (the CPUs numaplace may place onto) its cgroup leaves it.
fn linux_cpus(span: &CpuSet, confined: Option<&CpuSet>) -> CpuSet {
    confined.map_or_else(|| span.clone(), |k| span.intersection(k))
}

/// Gives every thread this policy pinned back to Linux (all the CPUs
/// numaplace may place onto), saying why; forgets them.
fn release_all(
    name: &str,
    cands: &[Candidate<'_>],
    ours: &mut TaskMap<CpuSet>,
    span: &CpuSet,
    why: &str,
    plan: &mut Plan,
) {
    for c in cands {
        let back = linux_cpus(span, c.confined);
        if ours.remove(&c.id).is_some() && *c.allowed != back {
            plan.push(
                Action::Pin {
                    task: c.id,
                    tgid: c.tgid,
                    cpus: back.clone(),
                },
                format!(
                    "{name}: thread {} of {} back to Linux (CPUs {back}): {why}",
                    c.id.tid, c.label
                ),
            );
        }
    }
    ours.clear();
}

/// Each process's memory per node, by pid.
fn process_memory(
    s: &Snapshot,
) -> HashMap<i32, Option<&BTreeMap<u32, numaplace_model::NodeMemory>>> {
    s.groups
        .iter()
        .map(|g| (g.pid, g.memory.as_ref()))
        .collect()
}

impl Machine {
    /// The CPUs of a node (kernel id) that numaplace may place onto.
    fn node_cpus(&self, node: u32) -> CpuSet {
        let mut out = CpuSet::new();
        for (cpus, _) in self.cores.iter().filter(|(_, n)| *n == node) {
            out = out.union(cpus);
        }
        out
    }

    /// The core a thread runs on now, if that is on the node holding its
    /// memory (or its memory is spread); else the first core of that node.
    fn where_now(&self, last_cpu: Option<u32>, home: Option<aside::Home>) -> Option<usize> {
        let now = last_cpu.and_then(|cpu| self.cores.iter().position(|(s, _)| s.contains(cpu)));
        match home {
            Some(aside::Home::Anchored(h)) => now
                .filter(|&c| self.cores[c].1 == h)
                .or_else(|| self.cores.iter().position(|(_, n)| *n == h)),
            _ => now,
        }
    }
}

/// A thread this round: who it is and how intensive.
struct Candidate<'a> {
    id: TaskId,
    tgid: i32,
    mpki: f64,
    label: &'a str,
    /// Its affinity now.
    allowed: &'a CpuSet,
    /// The CPUs its cgroup confines it to, if any: its pins stay within
    /// them ([`crate::confine`]).
    confined: Option<&'a CpuSet>,
    /// The CPU it last ran on.
    last_cpu: Option<u32>,
}

/// The threads a DI policy may place: in scope, running, not placed by
/// anyone but numaplace, and with LLC miss counts.
fn candidates<'a>(
    view: &View<'a>,
    labels: &'a HashMap<i32, String>,
    ours: &TaskMap<CpuSet>,
    skipped: &mut usize,
) -> Vec<Candidate<'a>> {
    let s = view.snapshot;
    let mut out = Vec::new();
    for t in &s.tasks {
        if !view.placeable(t, ours) {
            continue;
        }
        let Some(c) = s.counters.get(&t.tid) else {
            *skipped += 1;
            continue;
        };
        let Some(m) = mpki(c) else {
            *skipped += 1;
            continue;
        };
        out.push(Candidate {
            id: t.id(),
            tgid: t.tgid,
            mpki: m,
            label: labels.get(&t.tgid).map_or("", |l| l.as_str()),
            allowed: &t.allowed_cpus,
            confined: t.confined_cpus.as_ref(),
            last_cpu: t.last_cpu,
        });
    }
    out
}

/// DINO's parameters (`[policy]` with `name = "dino"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    default,
    deny_unknown_fields,
    rename_all = "kebab-case",
    try_from = "RawDinoParams"
)]
pub struct DinoParams {
    /// Class boundaries in LLC misses per 1000 instructions (§3.3.2: 2 and
    /// 100 on the paper's machine).
    #[serde(flatten)]
    pub thresholds: Thresholds,
    /// A thread changes class only after `hysteresis-needed` of its last
    /// `hysteresis-window` intervals were in the new class (§3.3.3: 7 of 10).
    pub hysteresis_window: usize,
    pub hysteresis_needed: usize,
    /// Pages moved around each sampled address (§4: K = 4096).
    pub window_pages: u64,
}

impl Default for DinoParams {
    fn default() -> Self {
        DinoParams {
            thresholds: Thresholds::default(),
            hysteresis_window: 10,
            hysteresis_needed: 7,
            window_pages: DEFAULT_WINDOW_PAGES,
        }
    }
}

/// The longest hysteresis window, intervals (its history is kept per thread).
pub const MAX_HYSTERESIS_WINDOW: usize = 10_000;
/// The most pages moved around one sampled address (4 GiB of 4 KiB pages).
pub const MAX_WINDOW_PAGES: u64 = 1 << 20;

/// Every parameter's range; the message names the key, the value and the
/// range. The serde conversion calls it, so config, replay and simulator
/// all check them.
impl crate::Params for DinoParams {
    fn validate(&self) -> Result<(), String> {
        let check = || {
            self.thresholds.validate()?;
            crate::within(
                "hysteresis-window",
                self.hysteresis_window,
                1,
                MAX_HYSTERESIS_WINDOW,
            )?;
            crate::within(
                "hysteresis-needed",
                self.hysteresis_needed,
                1,
                self.hysteresis_window,
            )
            .map_err(|e| format!("{e} (at most hysteresis-window)"))?;
            crate::within("window-pages", self.window_pages, 1, MAX_WINDOW_PAGES)
        };
        check().map_err(|e| format!("dino: {e}"))
    }
}

/// The same fields, unchecked: what a config file says.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
struct RawDinoParams {
    #[serde(flatten)]
    thresholds: Thresholds,
    hysteresis_window: usize,
    hysteresis_needed: usize,
    window_pages: u64,
}

impl Default for RawDinoParams {
    fn default() -> Self {
        let d = DinoParams::default();
        RawDinoParams {
            thresholds: d.thresholds,
            hysteresis_window: d.hysteresis_window,
            hysteresis_needed: d.hysteresis_needed,
            window_pages: d.window_pages,
        }
    }
}

impl TryFrom<RawDinoParams> for DinoParams {
    type Error = String;

    fn try_from(r: RawDinoParams) -> Result<Self, String> {
        let p = DinoParams {
            thresholds: r.thresholds,
            hysteresis_window: r.hysteresis_window,
            hysteresis_needed: r.hysteresis_needed,
            window_pages: r.window_pages,
        };
        crate::Params::validate(&p)?;
        Ok(p)
    }
}

/// The `dino` policy. See the module documentation.
pub struct Dino {
    params: DinoParams,
    classes: TaskMap<Hysteresis>,
    /// Where each thread was placed last round, and as what.
    old: TaskMap<(usize, Class)>,
    /// What numaplace set, to know its own pins from a thread's own.
    ours: TaskMap<CpuSet>,
    follower: MemoryFollower,
}

impl Dino {
    pub fn new(params: DinoParams) -> Dino {
        let follower = MemoryFollower::new(params.window_pages, true);
        Dino {
            params,
            classes: TaskMap::default(),
            old: TaskMap::default(),
            ours: TaskMap::default(),
            follower,
        }
    }
}

impl Policy for Dino {
    fn name(&self) -> &'static str {
        "dino"
    }

    fn needs(&self) -> Needs {
        Needs {
            counters: true,
            memory: true,
            samples: true,
            page_sets: false,
        }
    }

    fn without(&self, signal: Signal) -> Option<String> {
        match signal {
            Signal::LlcMissRate => Some(BLIND_WITHOUT_MPKI.into()),
            Signal::Samples => Some(FOLLOW_WITHOUT_SAMPLES.into()),
            _ => None,
        }
    }

    /// The classes of each group's threads (§3.3.2, after §3.3.3's
    /// hysteresis): `devil`, or `super-devil 1, turtle 3` for a mix.
    fn classes(&self, snapshot: &Snapshot) -> BTreeMap<i32, String> {
        let mut out = BTreeMap::new();
        for g in &snapshot.groups {
            let mut counts: BTreeMap<Class, usize> = BTreeMap::new();
            for t in g.threads.iter().filter_map(|&tid| snapshot.task(tid)) {
                if let Some(h) = self.classes.get(&t.id()) {
                    *counts.entry(h.current()).or_default() += 1;
                }
            }
            let text = match counts.len() {
                0 => continue,
                1 => counts.keys().map(|c| c.name().to_string()).collect(),
                _ => counts
                    .iter()
                    .rev()
                    .map(|(c, n)| format!("{} {n}", c.name()))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            out.insert(g.pid, text);
        }
        out
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let m = Machine::new(view.topology);
        let mut plan = Plan::default();
        let mut skipped = 0;
        let labels = view.labels();
        let cands = candidates(view, &labels, &self.ours, &mut skipped);
        let alive: TaskSet = cands.iter().map(|c| c.id).collect();
        self.classes.retain(|k, _| alive.contains(k));
        self.old.retain(|k, _| alive.contains(k));
        self.ours.retain(|k, _| alive.contains(k));
        if cands.is_empty() || m.cores.is_empty() {
            return plan;
        }
        let p = &self.params;
        let memory = process_memory(view.snapshot);
        let mut first = Vec::with_capacity(cands.len());
        let mut slotted = Vec::with_capacity(cands.len());
        let mut evidence = Vec::with_capacity(cands.len());
        for (i, c) in cands.iter().enumerate() {
            let seen = p.thresholds.classify(c.mpki);
            let class = self
                .classes
                .entry(c.id)
                .or_insert_with(|| Hysteresis::new(seen, p.hysteresis_window, p.hysteresis_needed))
                .observe(seen);
            // Its old place counts only if it is still there.
            let placed_before = self.old.get(&c.id).and_then(|&(core, class)| {
                (m.cores.get(core)?.0 == *c.allowed).then_some(OldPlace { core, class })
            });
            let samples = view
                .snapshot
                .samples
                .get(&c.id.tid)
                .map_or(&[][..], |v| &v[..]);
            let found = aside::home(
                samples,
                view.snapshot.numa_faults.get(&c.id.tid),
                memory.get(&c.tgid).copied().flatten(),
                &m.cpu_nodes,
            );
            evidence.push(found);
            let home = found.map(|(h, _)| h);
            // Not placed yet: where it runs now, near its memory, is its
            // old place, so the matching keeps it there when a slot of
            // its class is free (§3.3.3's "minimize the number of
            // migrations", for the first round as for every other).
            let old = placed_before.or_else(|| {
                m.where_now(c.last_cpu, home)
                    .map(|core| OldPlace { core, class })
            });
            first.push(placed_before.is_none());
            slotted.push(Slotted {
                thread: i as u64,
                process: i64::from(c.tgid),
                class,
                old,
                home: match home {
                    Some(aside::Home::Anchored(n)) => m.cpu_nodes.iter().position(|&x| x == n),
                    _ => None,
                },
            });
        }
        let solution = layout::solve(&slotted, &m.domains);
        let (core_of, filled_core) = solution.places(cands.len());
        let mut placed = Vec::new();
        for (i, c) in cands.iter().enumerate() {
            let Some((core, slot)) = core_of[i] else {
                continue;
            };
            let class = slotted[i].class;
            let (cpus, node) = &m.cores[core];
            // Within its cgroup's CPUs: the core, or its room on the
            // core's node; none there: it stays where it is.
            let Some(cpus) = &crate::confine(view.topology, c.confined, cpus) else {
                continue;
            };
            let who = Who::Thread {
                class: Some(class.name()),
                tid: c.id.tid,
                label: c.label,
            };
            placed.push(Placed {
                tid: c.id.tid,
                tgid: c.tgid,
                node: *node,
                who: who.clone(),
            });
            let moved = first[i] || slotted[i].old.as_ref().is_none_or(|o| o.core != core);
            if moved {
                let why = match &slotted[i].old {
                    None => "first placement".to_string(),
                    Some(o) if first[i] && o.core == core => {
                        "first placement, where it runs now".to_string()
                    }
                    Some(o)
                        if first[i] && m.domains.domain_of(o.core) == m.domains.domain_of(core) =>
                    {
                        "first placement, on the node where it runs now".to_string()
                    }
                    Some(_) if first[i] => "first placement".to_string(),
                    Some(o) if o.class != class => {
                        format!("its class changed from {}", o.class.name())
                    }
                    Some(_) if filled_core[i] != Some(core) => {
                        "to keep its application's threads in one domain".to_string()
                    }
                    Some(o) => format!(
                        "core {} no longer has a {} slot in the new layout",
                        o.core,
                        class.name()
                    ),
                };
                let memory = match evidence[i] {
                    Some((aside::Home::Anchored(h), e)) => {
                        format!("; its memory is on node {h} by {}", e.describe())
                    }
                    _ => String::new(),
                };
                plan.push(
                    Action::Pin {
                        task: c.id,
                        tgid: c.tgid,
                        cpus: cpus.clone(),
                    },
                    format!(
                        "dino: {who} ({:.1} LLC misses per 1000 instructions) to slot {slot} of core {core} (CPUs {cpus}, node {node}): {why}{memory}",
                        c.mpki
                    ),
                );
            }
            self.old.insert(c.id, (core, class));
            // Most threads stay: their entry is already this (no copy).
            if self.ours.get(&c.id) != Some(cpus) {
                self.ours.insert(c.id, cpus.clone());
            }
        }
        self.follower.plan(view.snapshot, &placed, &mut plan);
        plan
    }
}

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
    pub fn plain() -> DistributedIntensity {
        DistributedIntensity {
            migrate: None,
            ours: TaskMap::default(),
            hysteresis: 0.0,
            ranks: TaskMap::default(),
        }
    }

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
        let assigned: BTreeMap<u64, usize> = layout::distributed_intensity(&order, &m.domains)
            .into_iter()
            .collect();
        let memory = process_memory(view.snapshot);
        let mut placed = Vec::new();
        // Threads on each node: those DI deals there, then those left
        // beside their memory there, up to the node's cores.
        let anchored: Vec<Option<(u32, aside::Evidence)>> = cands
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let &core = assigned.get(&(i as u64))?;
                anchored_elsewhere(view.snapshot, c, &memory, &m, m.cores[core].1)
            })
            .collect();
        let mut on_node: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, a) in anchored.iter().enumerate() {
            if let (None, Some(&core)) = (a, assigned.get(&(i as u64))) {
                *on_node.entry(m.cores[core].1).or_insert(0) += 1;
            }
        }
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
                let room = m.cores.iter().filter(|(_, n)| *n == home).count();
                let taken = on_node.entry(home).or_insert(0);
                *taken += 1;
                let (cpus, how) = if *taken <= room {
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
                        "{name}: {who} ranks {} of {} by LLC miss rate ({:.1} per 1000 instructions): core {core} (CPUs {cpus}, node {node})",
                        i + 1,
                        cands.len(),
                        c.mpki
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

#[cfg(test)]
mod tests;
