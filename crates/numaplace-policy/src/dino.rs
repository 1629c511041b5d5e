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
mod candidates;
pub mod classes;
mod distributed_intensity;
pub mod layout;
mod machine;
pub mod memory;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use numaplace_model::plan::DEFAULT_WINDOW_PAGES;
use numaplace_model::{Action, CpuSet, Plan, Snapshot};

use crate::{Needs, Policy, Signal, View};

use candidates::{
    BLIND_WITHOUT_MPKI, Candidate, FOLLOW_WITHOUT_SAMPLES, TaskMap, TaskSet, candidates,
};
use classes::{Hysteresis, Thresholds};
pub use distributed_intensity::{DiParams, DistributedIntensity};
use layout::{Class, OldPlace, Slotted};
use machine::{Machine, process_memory};
pub use memory::MAX_WINDOW_PAGES;
use memory::{MemoryFollower, Placed, Who};

/// DINO's parameters (`[policy]` with `name = "dino"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    default,
    deny_unknown_fields,
    rename_all = "kebab-case",
    remote = "Self"
)]
pub struct DinoParams {
    /// Class boundaries in LLC misses per 1000 instructions (§3.3.2: 2 and
    /// 100 on the paper's machine).
    #[serde(flatten)]
    pub thresholds: Thresholds,
    /// A thread changes class only after `hysteresis-needed` of its last
    /// `hysteresis-window` intervals were in the new class (§3.3.3: 7 of 10).
    pub hysteresis_window: usize,
    /// See `hysteresis_window`.
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

checked_params!(DinoParams);

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
    /// The policy with `params`, knowing nothing yet.
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
        let slots = self.slot(view, &m, &cands);
        let solution = layout::solve(&slots.slotted, &m.domains);
        let (core_of, filled_core) = solution.places(cands.len());
        let mut placed = Vec::new();
        for (i, c) in cands.iter().enumerate() {
            let Some((core, slot)) = core_of[i] else {
                continue;
            };
            let at = Assigned {
                core,
                slot,
                filled: filled_core[i],
                slotted: &slots.slotted[i],
                first: slots.first[i],
                evidence: slots.evidence[i],
            };
            if let Some(p) = self.place(view, &m, c, &at, &mut plan) {
                placed.push(p);
            }
        }
        self.follower.plan(view.snapshot, &placed, &mut plan);
        plan
    }
}

/// What the layout reads of every candidate, in candidate order.
struct Slots {
    /// Its class (after the hysteresis), old place and memory's domain.
    slotted: Vec<Slotted>,
    /// Not placed by DINO before.
    first: Vec<bool>,
    /// Where its memory is, and what says so.
    evidence: Vec<Option<(aside::Home, aside::Evidence)>>,
}

/// Where the layout put one candidate, with what its reason reads.
struct Assigned<'a> {
    core: usize,
    /// Its slot on `core`.
    slot: usize,
    /// Its core once every slot was filled, before the pass that groups
    /// an application's threads in one domain.
    filled: Option<usize>,
    slotted: &'a Slotted,
    first: bool,
    evidence: Option<(aside::Home, aside::Evidence)>,
}

impl Dino {
    /// Each candidate's class this round (§3.3.2 with §3.3.3's
    /// hysteresis), its old place and the node holding its memory: what the
    /// layout places by.
    fn slot(&mut self, view: &View<'_>, m: &Machine, cands: &[Candidate<'_>]) -> Slots {
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
        Slots {
            slotted,
            first,
            evidence,
        }
    }

    /// Pins candidate `c` to the core the layout gave it (within its
    /// cgroup's CPUs) where that moves it, and remembers it there. Returns
    /// where its memory is to follow it; `None` where its cgroup leaves it
    /// no CPU there.
    fn place<'a>(
        &mut self,
        view: &View<'_>,
        m: &Machine,
        c: &Candidate<'a>,
        at: &Assigned<'_>,
        plan: &mut Plan,
    ) -> Option<Placed<'a>> {
        let (core, slot) = (at.core, at.slot);
        let class = at.slotted.class;
        let (cpus, node) = &m.cores[core];
        // Within its cgroup's CPUs: the core, or its room on the
        // core's node; none there: it stays where it is.
        let cpus = &crate::confine(view.topology, c.confined, cpus)?;
        let who = Who::Thread {
            class: Some(class.name()),
            tid: c.id.tid,
            label: c.label,
        };
        let placed = Placed {
            tid: c.id.tid,
            tgid: c.tgid,
            node: *node,
            who: who.clone(),
        };
        let moved = at.first || at.slotted.old.as_ref().is_none_or(|o| o.core != core);
        if moved {
            let (why, memory) = move_reason(m, at);
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
        Some(placed)
    }
}

/// Why a thread moves (its first placement, its class changed, its
/// application kept together, its core's slots changed), and where its
/// memory is.
fn move_reason(m: &Machine, at: &Assigned<'_>) -> (String, String) {
    let (core, class, first) = (at.core, at.slotted.class, at.first);
    let why = match &at.slotted.old {
        None => "first placement".to_string(),
        Some(o) if first && o.core == core => "first placement, where it runs now".to_string(),
        Some(o) if first && m.domains.domain_of(o.core) == m.domains.domain_of(core) => {
            "first placement, on the node where it runs now".to_string()
        }
        Some(_) if first => "first placement".to_string(),
        Some(o) if o.class != class => {
            format!("its class changed from {}", o.class.name())
        }
        Some(_) if at.filled != Some(core) => {
            "to keep its application's threads in one domain".to_string()
        }
        Some(o) => format!(
            "core {} no longer has a {} slot in the new layout",
            o.core,
            class.name()
        ),
    };
    let memory = match at.evidence {
        Some((aside::Home::Anchored(h), e)) => {
            format!("; its memory is on node {h} by {}", e.describe())
        }
        _ => String::new(),
    };
    (why, memory)
}

#[cfg(test)]
mod tests;
