//! `auto`: what an operator runs. It uses the seed policies' algorithms as
//! its moves and treats every move as an experiment ([`experiment`]): a
//! group is moved only when every group's progress has a baseline, one
//! group at a time, and the move is kept only if the groups, taken
//! together, went faster by more than the noise margin; otherwise it is
//! rolled back and that move is not tried on that group again for a while.
//! Every trial, verdict and rollback is in the journal with its numbers
//! (the reasons of the actions that start and undo it).
//!
//! With `place-at-start`, a group that has just started is placed at
//! first sight, before it touches its memory (`sight`), without an
//! experiment. Its moves, in the order it tries them:
//! - DI-Migrate's layout of the whole machine (`LAYOUT`, \[Blagodurov11\]
//!   §3.2), once the groups are past their start: one experiment over
//!   every group, judged as one (a layout's gain is the machine's, spread
//!   thin over its groups). Kept, DI-Migrate manages the machine from then
//!   on; rolled back, it waits out a doubling back-off.
//! - numad's placement (`numad-like`: a process that fits one node goes to
//!   the node with the most free CPU and memory, its memory after it),
//!   which needs no counters, per group, where its premise holds.
//! - The threads of a group brought together alone (`GATHER`) where its
//!   memory lies spread like them.
//! - When nothing else is to be tried: the kernel's automatic NUMA
//!   balancing the other way (`KERNEL`: turned on where it is off, off
//!   where it is on), where the engine may change it (scope all,
//!   `[engine] manage_kernel_balancing`), also under a kept layout: one
//!   experiment over every group, judged as one once the kernel has
//!   stopped moving memory, kept only if the groups together went faster
//!   by more than the margin; tried again, the other way, after a
//!   doubling wait (what the kernel gains or costs changes as processes
//!   come, go and settle).
//!
//! Where the machine counts no instructions (a VM without a virtual PMU),
//! nothing can be judged, so `auto` makes only numad's counter-free move,
//! as numad does, without experiments, and says so ([`Policy::without`]);
//! numad's ranking of the nodes then reads the signal such a machine still
//! has, each node's `numastat` (`numad/spill.rs`).
//!
//! Where each part lives: a round's steps in order (`round`: the groups
//! noted, the seed policies asked, the premises of single-group moves, the
//! layout step, the moves step); the layouts (`layout` for DI-Migrate's,
//! `model_layout` for the machine model's); moves of single groups and
//! each round of a trial under way (`moves`); their premises
//! (`premise`); undoing a trial (`rollback`); the kernel's balancing
//! (`kernel`); placement at first sight (`sight`); the judge
//! ([`experiment`]) and the machine model as a predictor ([`predict`]).

pub mod experiment;
mod kernel;
mod layout;
mod model_layout;
mod moves;
pub mod predict;
mod premise;
mod rollback;
mod round;
mod sight;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use numaplace_model::{Action, Counter, Plan, Snapshot, TaskId};

use crate::dino::{DiParams, Dino, DinoParams, DistributedIntensity};
use crate::numad::{NumadLike, NumadParams};
use crate::{Needs, Policy, Signal, View, within};
use experiment::{Backoff, History, JudgeParams, Trial};

/// `auto`'s parameters (`[policy]` with `name = "auto"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AutoParams {
    /// Rounds of progress that make a baseline, and that are measured
    /// after a move.
    pub measure_rounds: usize,
    /// A move is kept only if the groups went faster by more than this
    /// percentage.
    pub margin_percent: f64,
    /// Rounds a move waits on a group after its first rollback (doubled
    /// after each further one, up to 16 times this).
    pub backoff_rounds: u64,
    /// Rounds at most that a move may take to carry out (memory moving at
    /// the engine's rate limit) before it is judged anyway.
    pub max_settle_rounds: usize,
    /// Groups that have just started are gathered onto a node at first
    /// sight, before they touch their memory (`sight`). Off by default:
    /// it gains on the mean and loses badly on some mixes
    /// (docs/policies.md, "Eighth session").
    pub place_at_start: bool,
}

impl Default for AutoParams {
    fn default() -> Self {
        let j = JudgeParams::default();
        AutoParams {
            measure_rounds: j.measure_rounds,
            margin_percent: j.margin * 100.0,
            backoff_rounds: j.backoff_rounds,
            max_settle_rounds: 10,
            place_at_start: false,
        }
    }
}

/// Checks the ranges; says which key is wrong and what it may be.
impl crate::Params for AutoParams {
    fn validate(&self) -> Result<(), String> {
        within("measure-rounds", self.measure_rounds, 1, 100)?;
        if !self.margin_percent.is_finite() {
            return Err(format!(
                "margin-percent = {}: must be a number from 0 to 50",
                self.margin_percent
            ));
        }
        within("margin-percent", self.margin_percent, 0.0, 50.0)?;
        within("backoff-rounds", self.backoff_rounds, 1, 100_000)?;
        within("max-settle-rounds", self.max_settle_rounds, 1, 1000)
    }
}

impl AutoParams {
    fn judge(&self) -> JudgeParams {
        JudgeParams {
            measure_rounds: self.measure_rounds,
            settle_rounds: 0,
            margin: self.margin_percent / 100.0,
            backoff_rounds: self.backoff_rounds,
            max_backoff_rounds: self.backoff_rounds.saturating_mul(16),
        }
    }
}

/// The kind of move numad's placement is, in back-offs and reasons.
const MEMORY_HOME: &str = "numad-like placement";
/// The cheap half of numad's placement, tried first where a group's
/// memory lies spread like its threads: the threads brought together onto
/// the node numad chose, the memory left where it is. Threads that share
/// written data gain at once (no cache line crosses a socket); threads
/// whose memory is their own lose (most of it is now remote), and undoing
/// that moves no page.
const GATHER: &str = "gathering of threads";

/// Distributed Intensity's layout of the whole machine, DI-Migrate (seed
/// 004 §3.2: threads ranked by last-level cache misses and dealt over the
/// memory domains so each domain gets as many intensive ones as the
/// others, each thread on one core, its memory following it): one
/// experiment over every group at once, judged as one (`LAYOUT`'s
/// verdict is [`experiment::Judgement::keeps_jointly`]).
const LAYOUT: &str = "distributed-intensity layout";

/// The kernel's automatic NUMA balancing turned the other way (the whole
/// machine's setting, `kernel.numa_balancing`): its gains (pages and
/// threads brought together where first touch left them apart) and its
/// costs (a hinting fault on every scanned page, more where nothing is
/// misplaced) are the machine's, so the trial is judged as one over every
/// group, as `LAYOUT`'s.
const KERNEL: &str = "kernel's automatic NUMA balancing";

/// Rounds at least after turning the kernel's balancing on before a
/// trial is measured: the first scan of each process is due at once (its
/// `numa_next_scan` is long past) and a page moves on its second fault
/// from the same node (the two-stage filter, `should_numa_migrate_memory`),
/// a scan period later, so pages start moving two or three periods of
/// `numa_balancing_scan_period_min_ms` (1 s) in; the 2-node guest
/// measurement (docs/simulator.md) moved 256 MiB within 5 s. The trial
/// then waits while the kernel goes on moving memory
/// ([`KERNEL_STILL`]), a scan window of 256 MiB per period at most, so a
/// process of many GiB takes many periods, up to
/// [`KERNEL_MAX_SETTLE_ROUNDS`]. Turned off, the faults stop at once: one
/// round.
const KERNEL_ON_SETTLE_ROUNDS: usize = 3;
const KERNEL_OFF_SETTLE_ROUNDS: usize = 1;
/// The kernel is taken to have placed memory once less than this share of
/// the groups' memory changed node over a round, two rounds in a row.
const KERNEL_STILL: f64 = 0.01;
/// The kernel is taken to have found memory to move (misplaced pages, the
/// premise of its gains that show only later) once this share of the
/// groups' memory changed node while a trial of it settled: a few scan
/// windows' worth of a large process, a page in a few hundred of a small
/// one, and no process that merely grew.
const KERNEL_FOUND_WORK: f64 = 0.002;
/// The longest a trial of the kernel's balancing waits for its pages to
/// settle before it is measured anyway.
const KERNEL_MAX_SETTLE_ROUNDS: usize = 60;

/// The hysteresis of DI-Migrate's ranking in `LAYOUT`
/// ([`DiParams::rank_hysteresis_percent`]).
const LAYOUT_RANK_HYSTERESIS_PERCENT: f64 = 10.0;

/// DINO's layout of one group's threads (\[Blagodurov11\] §3.3: threads classed
/// by LLC misses, devils spread over the memory domains, each thread on
/// one core, its memory following), where the machine's layout has no
/// premise (a lone group): tried on a group that has run long, or sooner
/// where the machine model predicts it pays ([`Auto::predicts_it_pays`]),
/// judged by its own progress.
const DINO_LAYOUT: &str = "dino layout";

/// The layout the machine model predicts best (`auto/model_layout.rs`):
/// each running thread on a CPU of its own, a group gathered on one node
/// with its memory, judged together as `LAYOUT` is.
const MODEL_LAYOUT: &str = "predicted layout";

/// A layout's name for reasons: the model's or DI-Migrate's.
fn layout_name(model: bool) -> &'static str {
    if model { MODEL_LAYOUT } else { LAYOUT }
}

/// Why a trial rolled back on a loss measured while groups came is tried
/// again as soon as a new baseline is measured, once, rather than after
/// its back-off: a group that comes adds its load to the machine, and when
/// every group was moved (a layout, the kernel's balancing) none is left
/// to measure that load by, so the loss may be the newcomer's. mix:44069:
/// a program arriving at 8 s made a model layout measure -26.5 % and the
/// kernel's balancing -34.3 % in the rounds it came in; balancing, tried
/// again later, measured +37.1 %.
const ARRIVAL: &str = "groups came while it was measured and none was left unmoved to \
     measure their load by, so it is tried again once a new baseline is measured";

/// One group's move in an experiment.
struct Move {
    pid: i32,
    label: String,
    /// [`MEMORY_HOME`], `GATHER`, `LAYOUT` or [`DINO_LAYOUT`].
    kind: &'static str,
    /// It moved memory (to put back on rollback), whether or not to one
    /// node ([`Move::memory_to`]).
    moved_memory: bool,
    /// What puts the group's threads back: first onto the nodes they ran
    /// on (on a crowded machine, the very CPUs: [`home_within`]), then (a
    /// round later) to their affinities ([`undo_of`]).
    undo_home: Vec<Action>,
    undo: Vec<Action>,
    /// The memory move it made, carried on while the engine's rate limit
    /// spreads it over rounds: the process and the node.
    memory_to: Option<(TaskId, u32)>,
    /// The process's memory per node (kernel id) before the move, bytes:
    /// what a rollback restores.
    memory_before: BTreeMap<u32, u64>,
}

/// Moves under trial, made in one round and judged together, each by its
/// own group's progress.
struct Experiment {
    number: u64,
    moves: Vec<Move>,
    trial: Trial,
    /// Rounds since the moves were made.
    rounds: usize,
    /// A trial of the machine's layout (`LAYOUT`): every thread's
    /// affinity and node before it, by tid, to put back on rollback (the
    /// layout re-pins threads every round, so the first round's pins do
    /// not say what it changed).
    layout: Option<BTreeMap<i32, Before>>,
    /// A trial of the kernel's balancing (`KERNEL`).
    kernel: Option<KernelTrial>,
    /// The layout under trial is the model's ([`MODEL_LAYOUT`]), not
    /// DI-Migrate's.
    model: bool,
    /// For the model's layout: where each thread ran and its pages per
    /// node before it, by tid (what the model compares against when no
    /// group was measured throughout the trial).
    model_from: BTreeMap<i32, (usize, Vec<f64>)>,
}

impl Experiment {
    /// Experiment `number`: `moves` just made, judged against `baseline`
    /// (pid -> progress before them); neither a layout, the kernel's
    /// balancing nor the model's.
    fn new(number: u64, moves: Vec<Move>, baseline: BTreeMap<i32, f64>) -> Experiment {
        Experiment {
            number,
            trial: Trial::new(moves.iter().map(|m| m.pid).collect(), baseline),
            moves,
            rounds: 0,
            layout: None,
            kernel: None,
            model: false,
            model_from: BTreeMap::new(),
        }
    }
}

/// What a trial of the kernel's balancing keeps while it settles.
struct KernelTrial {
    /// The setting before it, what a rollback puts back.
    before: bool,
    /// Each group's memory per node last round, and the rounds in a row
    /// in which it hardly moved ([`KERNEL_STILL`]).
    memory_seen: BTreeMap<i32, BTreeMap<u32, u64>>,
    still_rounds: usize,
    /// The share of the groups' memory that changed node while it
    /// settled, summed over its rounds: whether the kernel found memory to
    /// move ([`KERNEL_FOUND_WORK`]).
    moved_share: f64,
}

/// A thread's affinity and the node it ran on before a layout.
#[derive(Debug, Clone)]
struct Before {
    task: TaskId,
    tgid: i32,
    allowed: numaplace_model::CpuSet,
    /// Where a rollback's first step puts it, when narrower than
    /// `allowed`: its node's CPUs, or on a crowded machine its CPU
    /// ([`home_within`]).
    node: Option<numaplace_model::CpuSet>,
}

/// `auto`: predicts with the machine model which of the seed policies'
/// moves and layouts pays on the groups in scope, tries them one
/// experiment at a time against the machine as it was and keeps only
/// what measured faster (see the module's documentation).
pub struct Auto {
    params: AutoParams,
    judge: JudgeParams,
    /// numad's placement, asked every round (its CPU-time accounting
    /// needs every round) about every group in scope.
    numad: NumadLike,
    /// DI-Migrate, asked every round (its memory following needs every
    /// round's samples), acted on while its layout is under trial or kept.
    layout: DistributedIntensity,
    /// The layout was kept: DI-Migrate manages the machine from then on
    /// (groups that come are placed at once, their memory first touched
    /// where their threads run), numad's placement is not tried.
    layout_kept: bool,
    /// Layout rollbacks so far and the round until which it is not tried
    /// again.
    layout_held: (u32, u64),
    /// The groups in scope when the layout was last held, or when the
    /// model was last asked about a mix that came during a hold
    /// ([`Auto::layout_step`]).
    layout_held_for: BTreeSet<i32>,
    /// Trials of the kernel's balancing so far and the round until which
    /// it is not tried again (`KERNEL`; `u64::MAX` once the engine did
    /// not carry a change out: out of scope or not allowed here).
    kernel_held: (u32, u64),
    /// A layout's, and the kernel's balancing's, trial was rolled back on
    /// a loss measured while groups came, with none left unmoved to
    /// measure their load by, and tried again without a back-off: once
    /// each ([`ARRIVAL`]).
    retried_after_arrival: (bool, bool),
    /// DINO, asked every round (its classes' hysteresis needs every
    /// round), acted on for a lone group ([`DINO_LAYOUT`]).
    dino: Dino,
    /// Groups whose DINO layout was kept: DINO goes on managing them (its
    /// class changes, its memory following) without experiments; neither
    /// numad's placement nor the machine's layout is tried meanwhile.
    dino_kept: BTreeSet<i32>,
    /// Each thread's affinity when first seen, for threads that came while
    /// a layout was under trial (what a rollback gives back to them).
    first_affinity: BTreeMap<i32, (TaskId, i32, numaplace_model::CpuSet)>,
    history: History,
    backoff: Backoff,
    trial: Option<Experiment>,
    /// Memory moves of a rollback still to finish (the engine's rate
    /// limit may spread one over several rounds): process, node, the share
    /// of the process's memory that node held before, rounds left.
    undoing: Vec<(TaskId, u32, f64, usize)>,
    /// A rollback's second step, made next round: the threads' own
    /// affinities back (see [`undo_of`]), with the reason.
    releasing: Vec<(Action, String)>,
    experiments: u64,
    /// Verdicts of kept moves not yet said (a kept move has no action of
    /// its own to carry its reason): told in the next experiment's reasons.
    verdicts: Vec<String>,
    /// The round each group in scope was first seen.
    first_seen: BTreeMap<i32, u64>,
    /// The machine it was told ([`Policy::told`]), for its predictor.
    machine: Option<numaplace_machine::Machine>,
    /// The predictor, built for the topology of the first round.
    predictor: Option<predict::Predictor>,
    /// The model's layout was kept: its pins stay, threads that come are
    /// placed where the model predicts best, and it searches again every
    /// `backoff-rounds`.
    model_kept: bool,
    /// The round from which the model is asked again for a layout.
    model_next: u64,

    /// What the predictor lacked, said once in a reason.
    lacking_said: bool,
    /// Model layouts rolled back since the last one kept: each doubles
    /// the gain the model must predict before it tries another.
    model_misses: u32,
    /// The pins a model layout made, by tid: a thread so pinned is still
    /// the model's to place.
    model_pins: BTreeMap<i32, (TaskId, numaplace_model::CpuSet)>,
    /// Kept moves whose memory had not all arrived when they were judged
    /// (the engine's rate limit): the rest follows while the threads stay
    /// on that node. Process, node, experiment number, rounds left.
    following: Vec<(TaskId, u32, u64, usize)>,
    /// [`Auto::cannot_pay`]'s fit of the round it was last asked in: per
    /// group, the bound on its gain, its threads fitted and its horizon.
    bounds: Option<(u64, model_layout::Bounds)>,
    /// Groups looked at for a placement at first sight
    /// ([`Auto::place_at_sight`]), each once.
    sighted: BTreeSet<TaskId>,
}

/// A group is placed at first sight ([`Auto::place_at_sight`]) only if it
/// started at most this long ago, seconds: before most of its memory is
/// touched (a process first seen later, e.g. one running before the
/// daemon started, has its memory where Linux put it).
const YOUNG_S: f64 = 2.5;

/// Rounds a group must have run, as a multiple of the measured rounds,
/// before it is moved: a group starting up (caches and memory filling)
/// runs slower than it will, and a baseline taken then makes any move
/// look good.
const SETTLED_AGE: u64 = 2;

/// Rounds a group must have run, as a multiple of the measured rounds,
/// before a move is tried on it that nothing measured says will pay (a
/// gathering of threads): such an experiment fails about as
/// often as not, and one that fails costs its group a round or two of
/// progress; a group that has run this long is likely to run about as long
/// again (a process's age is the best guess of its remaining run time
/// there is), so that cost stays a small part of its run.
const SPECULATIVE_AGE: u64 = 8;

impl Auto {
    /// `auto` with its parameters (`[policy.auto]`).
    pub fn new(params: AutoParams) -> Auto {
        Auto {
            judge: params.judge(),
            params,
            numad: NumadLike::new(NumadParams {
                cooldown_secs: 0,
                prefer_quiet_node: true,
                // Every hardware thread counts as a CPU: numad's discount
                // of them guards a placement nobody checks, and auto's
                // placements are experiments, kept only where they pay
                // (with numad's 20 %, 100 mixes x 3 seeds: mean -5.30 %
                // against -5.62 %, the consolidations on SMT machines
                // with several nodes a package lost).
                htt_percent: 100,
                ..NumadParams::default()
            }),
            // Ranked with hysteresis: [Blagodurov11]'s DI re-ranks every round,
            // and two threads of about the same miss rate traded cores and
            // memory whenever their rates crossed (mix:1089: a lone 8-vcore
            // VM's threads at 8.0 and 8.3 misses per 1000 instructions
            // swapped nodes round after round, memory following, 27 %
            // slower than under Linux on one seed).
            layout: DistributedIntensity::migrate(DiParams {
                rank_hysteresis_percent: LAYOUT_RANK_HYSTERESIS_PERCENT,
                ..DiParams::default()
            }),
            layout_kept: false,
            layout_held: (0, 0),
            layout_held_for: BTreeSet::new(),
            kernel_held: (0, 0),
            retried_after_arrival: (false, false),
            dino: Dino::new(DinoParams::default()),
            dino_kept: BTreeSet::new(),
            first_affinity: BTreeMap::new(),
            history: History::default(),
            backoff: Backoff::default(),
            trial: None,
            undoing: Vec::new(),
            releasing: Vec::new(),
            experiments: 0,
            verdicts: Vec::new(),
            first_seen: BTreeMap::new(),
            sighted: BTreeSet::new(),
            following: Vec::new(),
            bounds: None,
            machine: None,
            predictor: None,
            model_kept: false,
            model_next: 0,

            lacking_said: false,
            model_misses: 0,
            model_pins: BTreeMap::new(),
        }
    }
}

/// Each group's progress over the round, for the groups in scope:
/// instructions retired per second per thread counted (a thread that
/// exits or starts changes how much a group retires, not how fast its
/// work goes: a group whose workers finish one by one would make any move
/// tried meanwhile look like a loss, mix:12023's kernel trial "-56.7 %").
/// `None` when no thread of theirs has its instructions counted (nothing
/// can be judged).
pub fn progress(view: &View<'_>) -> Option<BTreeMap<i32, f64>> {
    let s = view.snapshot;
    let secs = s.interval_ns as f64 / 1e9;
    if secs <= 0.0 {
        return None;
    }
    let mut out = BTreeMap::new();
    let mut counted = false;
    for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
        let (mut sum, mut threads) = (0u64, 0u32);
        for tid in &g.threads {
            if s.task(*tid).is_some_and(|x| matches!(x.state, 'Z' | 'X')) {
                continue;
            }
            if let Some(n) = s
                .counters
                .get(tid)
                .and_then(|c| c.get(Counter::Instructions))
            {
                counted = true;
                threads += 1;
                sum = sum.saturating_add(n);
            }
        }
        out.insert(g.pid, sum as f64 / secs / f64::from(threads.max(1)));
    }
    counted.then_some(out)
}

fn percent(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

impl Auto {
    /// Each group in scope that has run at least `age` rounds, with the
    /// mean of its last measured rounds; `None` while one of them has too
    /// few rounds measured.
    fn baseline(&self, view: &View<'_>, age: u64) -> Option<BTreeMap<i32, f64>> {
        let s = view.snapshot;
        let n = self.judge.measure_rounds;
        view.managed
            .iter()
            .filter(|pid| s.group(**pid).is_some())
            .filter(|pid| self.first_seen.get(pid).is_some_and(|&f| s.seq >= f + age))
            .map(|&pid| self.history.mean(pid, n).map(|m| (pid, m)))
            .collect()
    }
}

impl Policy for Auto {
    fn name(&self) -> &'static str {
        "auto"
    }

    /// Counters (to judge, and DI's ranking), memory (numad's move) and
    /// sampled addresses (DI-Migrate's memory following).
    fn needs(&self) -> Needs {
        Needs {
            counters: true,
            memory: true,
            samples: true,
            page_sets: false,
        }
    }

    /// Kept for the predictor's machine model.
    fn told(&mut self, machine: &numaplace_machine::Machine) {
        self.machine = Some(machine.clone());
        self.predictor = None;
    }

    fn without(&self, signal: Signal) -> Option<String> {
        match signal {
            Signal::LlcMissRate | Signal::Cpi => Some(
                "judges every move by the instructions the groups retire, which are not \
                 counted here: it makes only numad's counter-free placement (a process that \
                 fits one node goes there, its memory after it), without experiments or \
                 rollbacks"
                    .into(),
            ),
            Signal::Samples => Some(
                "tries Distributed Intensity's layout without its memory following (no \
                 sampled addresses here): threads are dealt over the memory domains by \
                 intensity, their pages left where they are"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Where each group in scope stands in `auto`'s experiments (a move
    /// under trial, a layout kept, watched), with DINO's classes of its
    /// threads where they are counted.
    fn classes(&self, snapshot: &Snapshot) -> BTreeMap<i32, String> {
        let dino = self.dino.classes(snapshot);
        let mut out = BTreeMap::new();
        for &pid in self.first_seen.keys() {
            let trial = self.trial.as_ref().and_then(|e| {
                e.moves
                    .iter()
                    .find(|m| m.pid == pid)
                    .map(|m| format!("trial {}: {}", e.number, m.kind))
                    .or_else(|| {
                        e.kernel
                            .is_some()
                            .then(|| format!("trial {}: {KERNEL}", e.number))
                    })
            });
            let state = if let Some(t) = trial {
                t
            } else if self.dino_kept.contains(&pid) {
                format!("{DINO_LAYOUT} kept")
            } else if self.layout_kept {
                format!("{LAYOUT} kept")
            } else {
                "watched".to_string()
            };
            let text = match dino.get(&pid) {
                Some(c) => format!("{state}; {c}"),
                None => state,
            };
            out.insert(pid, text);
        }
        out
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        // Every move auto makes places threads or memory on a node (numad's,
        // DI's and DINO's memory domains): with one node of CPUs, none has
        // a premise, and a trial would only cost what it disturbs (mix:89,
        // one package: DI's layout tried and rolled back, +1.3 %).
        if view.topology.cpu_nodes().nth(1).is_none() {
            return Plan::default();
        }
        self.note_groups(view);
        let mut plan = Plan::default();
        let asked = self.ask(view, &mut plan);
        self.finish_undoing(view.snapshot, &mut plan);
        for (a, why) in self.releasing.drain(..) {
            plan.push(a, why);
        }
        let following = self.follow(view, &mut plan);
        if self.params.place_at_start && !self.layout_kept {
            self.place_at_sight(view, &mut plan);
        }
        if self.model_kept || self.layout_kept {
            self.kept_round(view, &following, &mut plan);
            return plan;
        }
        let kinds = self.premises(view, asked.proposals, &following);
        let Some(progress) = progress(view) else {
            return Auto::without_counters(kinds, plan);
        };
        if self.trial.is_some() {
            self.go_on(view, &progress, &mut plan);
            self.layout_goes_on(asked.layout, asked.layout_trial, &mut plan);
            return plan;
        }
        self.history.push(&progress, self.judge.measure_rounds);
        let busy: BTreeSet<i32> = self.undoing.iter().map(|(p, ..)| p.tid).collect();
        let quiet = busy.is_empty() && following.is_empty();
        if quiet && self.layout_step(view, asked.layout, &mut plan) {
            return plan;
        }
        self.moves_step(view, kinds, asked.dino, &busy, &following, &mut plan);
        if self.trial.is_none() && quiet {
            self.maybe_try_kernel(view, &mut plan);
        }
        plan
    }
}

#[cfg(test)]
mod tests;
