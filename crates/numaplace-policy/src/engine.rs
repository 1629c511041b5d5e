//! The loop of docs/architecture.md: each round, a snapshot from telemetry goes
//! to the policy, whose plan goes, action by action, to an actuator; every
//! action and what became of it goes to the journal.
//!
//! The engine is where safety rules that no policy may bend live:
//! * only processes in scope are touched;
//! * a thread whose affinity numaplace did not set, and that is narrower
//!   than the machine or than the CPUs its cgroup's cpuset confines it to
//!   (it or its launcher chose its CPUs), is never pinned; one that
//!   changed its affinity after numaplace pinned it is left alone from
//!   then on; a pin never leaves the thread's confinement;
//! * before a pin is applied, the guard records the thread's original
//!   affinity (write-ahead), so a crash right after it can still be undone;
//! * memory moves are held to a rate limit;
//! * while the kernel's automatic NUMA balancing moves pages between
//!   nodes, memory moves go only where [`MemoryMover`] says numaplace
//!   moves memory; the others are journalled as left to the kernel, so the
//!   two never move the same pages back and forth;
//! * a machine-wide action (the kernel's automatic NUMA balancing on or
//!   off) is carried out only when the scope is the whole machine and
//!   `[engine] manage_kernel_balancing` allows it, after the guard has
//!   recorded the setting as it was (write-ahead), so a stop or a crash
//!   puts it back;
//! * an action the kernel refused (EPERM, EINVAL from a cpuset) is not
//!   asked again every round: after n refusals in a row it waits
//!   2^(n-1) rounds (at most [`MAX_BACKOFF_ROUNDS`]), so a task numaplace
//!   may not touch costs neither a syscall nor a journal line per round.
//!
//! Every journal entry carries what its action changes as the policy saw
//! it ([`Current`]). In a dry run ([`Engine::as_if_applied`]) what was
//! proposed and not applied is shown to the policy in the next rounds as
//! if it had been ([`AsIfApplied`]), so each change is proposed once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use numaplace_model::{Action, CpuSet, Outcome, Snapshot, TaskId, Topology};

use crate::as_if_applied::{AsIfApplied, Proposing};
use crate::{Policy, Scope, View};

mod config;
mod left_alone;
mod memory_checks;

pub use config::{EngineConfig, MAX_MIGRATE_MIB_PER_SEC, MemoryMover};
pub use left_alone::LeftAloneNote;
use memory_checks::{nodes_set_by_manager, outside_mems};

pub use numaplace_model::world::{
    Actuator, AffinityError, Current, JournalEntry, NoGuard, Pair, PinGuard, RecordingActuator,
    Telemetry,
};

/// What the caller of [`Engine::run`] sees of the loop: each journal entry
/// as it is made (with the round's snapshot), and the end of each round.
pub trait Observer {
    /// A journal entry, as it is made, with the snapshot of its round.
    fn entry(&mut self, snapshot: &Snapshot, entry: &JournalEntry);

    /// After each round; [`ControlFlow::Break`] ends the loop (a round
    /// limit, an output that failed).
    fn round_done(&mut self, _snapshot: &Snapshot, _report: &RoundReport) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    /// After [`Observer::round_done`]: what the next rounds run with
    /// instead (the daemon's configuration reloaded on SIGHUP); `None`
    /// keeps it.
    fn reconfigure(&mut self) -> Option<Reconfigure> {
        None
    }
}

/// A scope, a policy and engine limits to go on with
/// ([`Observer::reconfigure`]). What the engine keeps whatever changes:
/// every thread's affinity as first seen and what it set since, so what
/// it pinned is put back as before when it stops.
pub struct Reconfigure {
    /// The new scope.
    pub scope: Scope,
    /// A new policy, starting from nothing (`None`: the one running goes
    /// on with what it has learned).
    pub policy: Option<Box<dyn Policy>>,
    /// The new engine configuration.
    pub config: EngineConfig,
}

/// What one round did, and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundReport {
    /// Processes in scope this round.
    pub managed: usize,
    /// Decisions the policy made.
    pub decided: usize,
    /// Of those, carried out.
    pub applied: usize,
    /// Proposed and not applied: a dry run's (or advice's) actions.
    #[serde(default)]
    pub not_applied: usize,
    /// Declined by the engine (scope, rate limit, a thread's own affinity).
    pub skipped: usize,
    /// Refused by the kernel.
    pub refused: usize,
    /// Whose thread or process was gone.
    pub gone: usize,
    /// Not tried this round: the kernel refused the same action lately
    /// (counted in `skipped` too, not journalled again).
    #[serde(default)]
    pub held_back: usize,
    /// Pages moved between nodes.
    pub pages_moved: u64,
    /// Nanoseconds in the policy and in the actuator.
    pub decide_ns: u64,
    /// See `decide_ns`.
    pub apply_ns: u64,
    /// What the policy made of each group it classes, by pid
    /// ([`crate::Policy::classes`]), where [`Engine::report_classes`] asked.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<i32, String>,
    /// Threads of processes in scope that no policy may place, by the
    /// kind of reason ([`crate::LeftAlone::kind`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub left_alone: BTreeMap<String, usize>,
    /// Those left alone for a reason not said before for them: the
    /// daemon logs each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub newly_left_alone: Vec<LeftAloneNote>,
    /// [`left_alone`](Self::left_alone) per process (`top` shows it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub left_alone_by_process: BTreeMap<i32, BTreeMap<String, usize>>,
}

impl RoundReport {
    /// Counts one action's outcome.
    fn count(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Done => self.applied += 1,
            Outcome::NotApplied => self.not_applied += 1,
            Outcome::Pages(p) => {
                self.applied += 1;
                self.pages_moved += p.moved;
            }
            Outcome::Skipped { .. } => self.skipped += 1,
            Outcome::Refused { .. } => self.refused += 1,
            Outcome::Gone => self.gone += 1,
        }
    }
}

/// Rounds at most between two tries of an action the kernel keeps
/// refusing.
pub const MAX_BACKOFF_ROUNDS: u64 = 64;

/// What a refused action is remembered by: its task and what it asked,
/// so that another target (a cpuset may allow other CPUs) is tried at
/// once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RetryKey {
    Pin(TaskId, CpuSet),
    Memory(TaskId, u32),
    Kernel(bool),
}

impl RetryKey {
    fn of(a: &Action) -> RetryKey {
        match a {
            Action::Pin { task, cpus, .. } => RetryKey::Pin(*task, cpus.clone()),
            Action::MoveMemory {
                process, to_node, ..
            }
            | Action::MoveWindow {
                process, to_node, ..
            } => RetryKey::Memory(*process, *to_node),
            Action::KernelBalancing { on } => RetryKey::Kernel(*on),
        }
    }

    /// The task it is about; `None` for a machine-wide action.
    fn task(&self) -> Option<&TaskId> {
        match self {
            RetryKey::Pin(t, _) | RetryKey::Memory(t, _) => Some(t),
            RetryKey::Kernel(_) => None,
        }
    }
}

/// Refusals in a row, and the first round it is tried again.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    refusals: u32,
    next_round: u64,
}

/// Totals since the engine started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineTotals {
    /// Rounds run.
    pub rounds: u64,
    /// Decisions made.
    pub decided: u64,
    /// Decisions carried out.
    pub applied: u64,
    /// Proposed and not applied (a dry run).
    #[serde(default)]
    pub not_applied: u64,
    /// Declined by the engine.
    pub skipped: u64,
    /// Refused by the kernel.
    pub refused: u64,
    /// Whose thread or process was gone.
    pub gone: u64,
    /// Pages moved between nodes.
    pub pages_moved: u64,
    /// Nanoseconds in the policy.
    pub decide_ns: u64,
    /// Nanoseconds in the actuator.
    pub apply_ns: u64,
}

impl EngineTotals {
    /// Counts one more round.
    pub fn add(&mut self, report: &RoundReport) {
        self.rounds += 1;
        self.decided += report.decided as u64;
        self.applied += report.applied as u64;
        self.not_applied += report.not_applied as u64;
        self.skipped += report.skipped as u64;
        self.refused += report.refused as u64;
        self.gone += report.gone as u64;
        self.pages_moved += report.pages_moved;
        self.decide_ns += report.decide_ns;
        self.apply_ns += report.apply_ns;
    }
}

/// The loop every world runs: takes a snapshot, asks the policy, checks
/// and carries out its decisions, journals them, and puts back what it
/// changed when it stops.
pub struct Engine {
    policy: Box<dyn Policy>,
    scope: Scope,
    config: EngineConfig,
    /// Affinity each thread had when first seen.
    first_seen: HashMap<TaskId, CpuSet>,
    /// What numaplace last set.
    applied: HashMap<TaskId, CpuSet>,
    /// Threads numaplace leaves alone for good (said once in the journal).
    hands_off: HashSet<TaskId>,
    /// Actions the kernel refused, not asked again before their round.
    backoff: HashMap<RetryKey, Backoff>,
    /// Threads left alone, by the kind of reason last said for them and
    /// the round it last held.
    said: HashMap<TaskId, (&'static str, u64)>,
    totals: EngineTotals,
    /// Each round's report carries the policy's classes of the groups
    /// ([`RoundReport::classes`]); off unless someone shows them.
    report_classes: bool,
    /// A dry run's proposals, shown in the next rounds as if applied
    /// ([`Engine::as_if_applied`]).
    as_if: Option<AsIfApplied>,
}

impl Engine {
    /// An engine running `policy` on `scope` with `config`.
    pub fn new(policy: Box<dyn Policy>, scope: Scope, config: EngineConfig) -> Engine {
        Engine {
            policy,
            scope,
            config,
            first_seen: HashMap::new(),
            applied: HashMap::new(),
            hands_off: HashSet::new(),
            backoff: HashMap::new(),
            said: HashMap::new(),
            totals: EngineTotals::default(),
            report_classes: false,
            as_if: None,
        }
    }

    /// A dry run from now on (`on`): each action the actuator answers
    /// [`Outcome::NotApplied`] is taken as made, and the next rounds'
    /// snapshots show it to the policy (and to the engine's own rules)
    /// as if applied ([`AsIfApplied`]): a thread's CPUs as proposed, a
    /// process's memory where it was to go, the kernel's balancing as it
    /// was to be set, until the world shows that thread, process or
    /// setting changed otherwise, or gone. So a policy that keeps to a
    /// placement proposes it once, not every round. Off (the default),
    /// what is not applied is proposed again while the policy wants it
    /// (`advise` decides on its second round, after a baseline).
    pub fn as_if_applied(&mut self, on: bool) {
        self.as_if = on.then(|| AsIfApplied::new(self.config.page_size));
    }

    /// Goes on with `r`'s scope, limits and policy ([`Reconfigure`]).
    pub fn reconfigure(&mut self, r: Reconfigure) {
        self.scope = r.scope;
        self.config = r.config;
        if let Some(p) = r.policy {
            self.policy = p;
        }
    }

    /// Each round's report carries the policy's classes of the groups
    /// from now on (`numaplace top` shows them).
    pub fn report_classes(&mut self, on: bool) {
        self.report_classes = on;
    }

    /// The running policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// The signals the policy reads.
    pub fn needs(&self) -> crate::Needs {
        self.policy.needs()
    }

    /// What the policy does without `signal` ([`crate::Policy::without`]).
    pub fn without(&self, signal: crate::Signal) -> Option<String> {
        self.policy.without(signal)
    }

    /// Its counts since it started.
    pub fn totals(&self) -> &EngineTotals {
        &self.totals
    }

    /// The processes of `s` in scope.
    pub fn managed(&self, s: &Snapshot) -> BTreeSet<i32> {
        s.groups
            .iter()
            .filter(|g| self.scope.matches(g, s))
            .map(|g| g.pid)
            .collect()
    }

    /// The loop of docs/architecture.md, in every world: until the world ends
    /// (or `observer` says stop), its next snapshot goes to the policy and
    /// the plan to the world's actuator, every action journalled; after
    /// each round the world hears which processes are in scope and which
    /// were acted on. Returns the rounds run; a telemetry error ends the
    /// loop with it.
    pub fn run<W: Telemetry + Actuator>(
        &mut self,
        topology: &Topology,
        world: &mut W,
        guard: &mut dyn PinGuard,
        observer: &mut dyn Observer,
    ) -> Result<u64, W::Error> {
        let mut rounds = 0;
        while let Some(snapshot) = world.next_snapshot()? {
            let mut acted_on = BTreeSet::new();
            let report = self.round(topology, &snapshot, world, guard, &mut |e| {
                acted_on.insert(e.pid);
                observer.entry(&snapshot, e);
            });
            rounds += 1;
            world.after_round(&self.managed(&snapshot), &acted_on);
            if observer.round_done(&snapshot, &report).is_break() {
                break;
            }
            if let Some(r) = observer.reconfigure() {
                self.reconfigure(r);
            }
        }
        Ok(rounds)
    }

    /// One round: decide on `s`, carry the plan out through `actuator`,
    /// journal every action.
    pub fn round(
        &mut self,
        topology: &Topology,
        s: &Snapshot,
        actuator: &mut dyn Actuator,
        guard: &mut dyn PinGuard,
        journal: &mut dyn FnMut(&JournalEntry),
    ) -> RoundReport {
        // A dry run: the round sees its earlier proposals as if applied,
        // and takes this round's so (the overlay is out of `self` for the
        // round, lent to the actuator).
        let mut as_if = self.as_if.take();
        let taken_as_applied = as_if.is_some();
        let shown;
        let mut proposing;
        let (s, actuator): (&Snapshot, &mut dyn Actuator) = match as_if.as_mut() {
            Some(as_if) => {
                let mut copy = s.clone();
                as_if.show(&mut copy);
                shown = copy;
                proposing = Proposing {
                    inner: actuator,
                    as_if,
                };
                (&shown, &mut proposing)
            }
            None => (s, actuator),
        };
        let managed = self.managed(s);
        self.forget_the_gone(s);

        let start = Instant::now();
        let plan = self.policy.decide(&View {
            topology,
            snapshot: s,
            managed: &managed,
        });
        let decide_ns = start.elapsed().as_nanos() as u64;

        let mut report = RoundReport {
            managed: managed.len(),
            decided: plan.decisions.len(),
            decide_ns,
            ..RoundReport::default()
        };
        if self.report_classes {
            report.classes = self.policy.classes(s);
        }
        self.count_left_alone(topology, s, &managed, &mut report);
        let secs = (s.interval_ns as f64 / 1e9).max(0.001);
        let mut page_budget = (self.config.migrate_mib_per_sec.saturating_mul(1 << 20) as f64
            * secs
            / self.config.page_size.max(1) as f64) as u64;

        let start = Instant::now();
        // Threads pinned this round: a second pin of one in the same plan
        // is refused (the snapshot still shows the affinity before the
        // first, which would read as the thread having set its own).
        let mut pinned_now: HashSet<TaskId> = HashSet::new();
        // Whether the kernel balances pages between nodes: as the round's
        // snapshot read it (as read at start where the host cannot say),
        // then as this round's actions set it.
        let mut balancing = s
            .machine
            .numa_balancing
            .unwrap_or(self.config.kernel_balancing);
        for d in plan.decisions {
            let pid = d.action.pid();
            let key = RetryKey::of(&d.action);
            if self.backoff.get(&key).is_some_and(|b| s.seq < b.next_round) {
                // Refused lately, and said so then.
                report.skipped += 1;
                report.held_back += 1;
                continue;
            }
            let again = match &d.action {
                Action::Pin { task, .. } => !pinned_now.insert(*task),
                _ => false,
            };
            let mut outcome = if d.action.machine_wide() {
                self.machine_wide(s, &d.action, actuator, guard, &mut balancing)
            } else if !managed.contains(&pid) {
                Outcome::Skipped {
                    why: "outside the scope".into(),
                }
            } else if again {
                Outcome::Skipped {
                    why: "pinned already this round by an earlier action of the same plan".into(),
                }
            } else {
                self.carry_out(
                    topology,
                    s,
                    &d.action,
                    actuator,
                    guard,
                    &mut page_budget,
                    balancing,
                )
            };
            self.back_off(key, &mut outcome, s.seq);
            report.count(&outcome);
            if taken_as_applied && outcome == Outcome::NotApplied {
                if let Action::Pin { task, cpus, .. } = &d.action {
                    // Its affinity is numaplace's, as if set (the overlay
                    // shows it so), not one the thread chose.
                    self.applied.insert(*task, cpus.clone());
                }
            }
            journal(&JournalEntry {
                round: s.seq,
                time_unix_ns: s.time_unix_ns,
                policy: self.policy.name().into(),
                pid,
                label: s.group(pid).map(|g| g.label()).unwrap_or_default(),
                current: Current::of(s, &d.action),
                action: d.action,
                reason: d.reason,
                outcome,
            });
        }
        report.apply_ns = start.elapsed().as_nanos() as u64;
        self.totals.add(&report);
        self.as_if = as_if;
        report
    }

    /// Remembers the affinity each thread had when first seen, and forgets
    /// what it knew of threads that are gone.
    fn forget_the_gone(&mut self, s: &Snapshot) {
        let alive: HashSet<TaskId> = s.tasks.iter().map(|t| t.id()).collect();
        self.first_seen.retain(|id, _| alive.contains(id));
        self.applied.retain(|id, _| alive.contains(id));
        self.hands_off.retain(|id| alive.contains(id));
        self.backoff
            .retain(|k, _| k.task().is_none_or(|t| alive.contains(t)));
        for t in &s.tasks {
            self.first_seen
                .entry(t.id())
                .or_insert_with(|| t.allowed_cpus.clone());
        }
    }

    /// One action of a process in scope, through the safety rules: pins
    /// through [`Engine::pin`], memory moves only to nodes the cpuset
    /// allows and within this round's page budget (which they spend).
    #[allow(clippy::too_many_arguments)]
    fn carry_out(
        &mut self,
        topology: &Topology,
        s: &Snapshot,
        action: &Action,
        actuator: &mut dyn Actuator,
        guard: &mut dyn PinGuard,
        page_budget: &mut u64,
        kernel_balancing: bool,
    ) -> Outcome {
        let over_budget = || Outcome::Skipped {
            why: format!(
                "migration rate limit ({} MiB/s) reached this round",
                self.config.migrate_mib_per_sec
            ),
        };
        if let Action::Pin { task, tgid, cpus } = action {
            return self.pin(topology, s, *task, *tgid, cpus, actuator, guard);
        }
        if let Some(why) = outside_mems(s, action) {
            return Outcome::Skipped { why };
        }
        // Memory a manager binds (libvirt's cpuset.mems) the kernel's
        // balancing cannot move off its nodes: like memory under an
        // explicit policy, it is numaplace's to move.
        if let Some(why) = self.config.memory_mover.leaves_to_kernel(
            kernel_balancing,
            s.explicit_mempolicy.contains(&action.pid()) || nodes_set_by_manager(s, action),
        ) {
            return Outcome::Skipped { why };
        }
        let outcome = match action {
            Action::Pin { .. } => unreachable!("a pin returned above"),
            Action::MoveMemory {
                process,
                to_node,
                max_pages,
            } => {
                if *page_budget == 0 {
                    return over_budget();
                }
                let cap = max_pages.map_or(*page_budget, |m| m.min(*page_budget));
                actuator.apply(&Action::MoveMemory {
                    process: *process,
                    to_node: *to_node,
                    max_pages: Some(cap),
                })
            }
            Action::MoveWindow {
                pages_before,
                pages_after,
                ..
            } => {
                if *page_budget < pages_before + pages_after + 1 {
                    return over_budget();
                }
                actuator.apply(action)
            }
            Action::KernelBalancing { .. } => {
                return Outcome::Skipped {
                    why: "a machine-wide action is not a process's".into(),
                };
            }
        };
        if let Outcome::Pages(p) = &outcome {
            *page_budget = page_budget.saturating_sub(p.moved);
        }
        outcome
    }

    /// A machine-wide action: the kernel's automatic NUMA balancing on or
    /// off, only where the scope is the whole machine and the config lets
    /// numaplace manage it, the kernel has the setting, and the guard has
    /// recorded it as it was. `balancing` is the setting now, updated.
    fn machine_wide(
        &mut self,
        s: &Snapshot,
        action: &Action,
        actuator: &mut dyn Actuator,
        guard: &mut dyn PinGuard,
        balancing: &mut bool,
    ) -> Outcome {
        let Action::KernelBalancing { on } = *action else {
            return Outcome::Skipped {
                why: "not a machine-wide action".into(),
            };
        };
        if !self.scope.all {
            return Outcome::Skipped {
                why: "outside the scope: kernel.numa_balancing is the whole machine's, and \
                      numaplace changes it only when its scope is every process (scope all)"
                    .into(),
            };
        }
        if !self.config.manage_kernel_balancing {
            return Outcome::Skipped {
                why: "[engine] manage_kernel_balancing = false: kernel.numa_balancing is left \
                      as the operator set it"
                    .into(),
            };
        }
        let Some(now) = s.machine.numa_balancing else {
            return Outcome::Skipped {
                why: "this kernel has no automatic NUMA balancing (no kernel.numa_balancing), \
                      or it could not be read"
                    .into(),
            };
        };
        if now == on {
            return Outcome::Skipped {
                why: format!("already {}", if on { "on" } else { "off" }),
            };
        }
        if let Err(e) = guard.before_kernel_balancing(on) {
            return Outcome::Skipped {
                why: format!(
                    "could not record kernel.numa_balancing as it was, so it is not changed: {e}"
                ),
            };
        }
        let o = actuator.apply(action);
        // Carried out, or would be (a dry run): the rest of the plan is
        // judged on the kernel it leaves.
        if matches!(o, Outcome::Done | Outcome::NotApplied) {
            *balancing = on;
        }
        o
    }

    /// After a refusal, the action waits 2^(n-1) rounds (n refusals in a
    /// row, at most [`MAX_BACKOFF_ROUNDS`]), said in its outcome; once
    /// carried out it is forgiven.
    fn back_off(&mut self, key: RetryKey, outcome: &mut Outcome, round: u64) {
        match outcome {
            Outcome::Refused { why, .. } => {
                let b = self.backoff.entry(key).or_insert(Backoff {
                    refusals: 0,
                    next_round: 0,
                });
                b.refusals += 1;
                let wait = (1u64 << (b.refusals - 1).min(16)).min(MAX_BACKOFF_ROUNDS);
                b.next_round = round + 1 + wait;
                why.push_str(&format!(
                    "; refused {} time{} in a row: asked again in {wait} round{}",
                    b.refusals,
                    if b.refusals == 1 { "" } else { "s" },
                    if wait == 1 { "" } else { "s" }
                ));
            }
            Outcome::Done | Outcome::Pages(_) => {
                self.backoff.remove(&key);
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn pin(
        &mut self,
        topology: &Topology,
        s: &Snapshot,
        task: TaskId,
        tgid: i32,
        cpus: &CpuSet,
        actuator: &mut dyn Actuator,
        guard: &mut dyn PinGuard,
    ) -> Outcome {
        let Some(t) = s.tasks.iter().find(|t| t.id() == task) else {
            return Outcome::Gone;
        };
        if self.hands_off.contains(&task) {
            return Outcome::Skipped {
                why: "left alone: it chose its own CPUs".into(),
            };
        }
        match self.applied.get(&task) {
            Some(ours) if *ours != t.allowed_cpus => {
                self.hands_off.insert(task);
                return Outcome::Skipped {
                    why: format!(
                        "left alone from now on: its affinity is {} but numaplace set {ours}, so it set its own",
                        t.allowed_cpus
                    ),
                };
            }
            Some(_) => {}
            None => {
                if let Some(o) = self.held_by_manager(t) {
                    return o;
                }
                let first = self.first_seen.get(&task).unwrap_or(&t.allowed_cpus);
                let room = t.room(topology.span());
                if t.manager.is_none() && (room.is_empty() || !room.is_subset(first)) {
                    self.hands_off.insert(task);
                    let within = match &t.confined_cpus {
                        Some(c) => format!("its cgroup's CPUs {c}"),
                        None => format!("the machine's {}", topology.span()),
                    };
                    return Outcome::Skipped {
                        why: format!(
                            "left alone: it runs on CPUs {first} of {within} by its own or its \
                             launcher's choice"
                        ),
                    };
                }
            }
        }
        // Confinement is not a choice, and not to be crossed: a pin stays
        // within the CPUs the thread's cgroup leaves it (the kernel would
        // narrow it there, or refuse it with EINVAL).
        if let Some(c) = &t.confined_cpus {
            if !cpus.is_subset(c) {
                return Outcome::Skipped {
                    why: format!(
                        "CPUs {cpus} are not all within the CPUs its cgroup confines it to ({c}): \
                         not pinned"
                    ),
                };
            }
        }
        if t.allowed_cpus == *cpus {
            return Outcome::Skipped {
                why: "already there".into(),
            };
        }
        let mut original = self
            .first_seen
            .get(&task)
            .cloned()
            .unwrap_or_else(|| t.allowed_cpus.clone());
        // A confined thread that chose nothing gets the whole machine
        // back, which the kernel narrows to its cgroup's CPUs as they are
        // then: given its confinement of today it would keep it after the
        // cgroup's cpuset changed (the kernel remembers the affinity asked).
        // A managed thread gets its manager's placement back, through it.
        if t.manager.is_none() && t.confined_cpus.as_ref() == Some(&original) {
            original = original.union(topology.span());
        }
        if let Err(e) = guard.before_pin(task, tgid, &original, cpus) {
            return Outcome::Skipped {
                why: format!("could not record its original affinity, so it is not pinned: {e}"),
            };
        }
        let o = actuator.apply(&Action::Pin {
            task,
            tgid,
            cpus: cpus.clone(),
        });
        if matches!(o, Outcome::Done) {
            self.applied.insert(task, cpus.clone());
        }
        o
    }
}
