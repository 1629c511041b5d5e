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
//! first sight, before it touches its memory ([`sight`]), without an
//! experiment. Its moves, in the order it tries them:
//! - DI-Migrate's layout of the whole machine ([`LAYOUT`], \[Blagodurov11\]
//!   §3.2), once the groups are past their start: one experiment over
//!   every group, judged as one (a layout's gain is the machine's, spread
//!   thin over its groups). Kept, DI-Migrate manages the machine from then
//!   on; rolled back, it waits out a doubling back-off.
//! - numad's placement (`numad-like`: a process that fits one node goes to
//!   the node with the most free CPU and memory, its memory after it),
//!   which needs no counters, per group, where its premise holds.
//! - The threads of a group brought together alone ([`GATHER`]) where its
//!   memory lies spread like them.
//! - When nothing else is to be tried: the kernel's automatic NUMA
//!   balancing the other way ([`KERNEL`]: turned on where it is off, off
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

pub mod experiment;
mod kernel;
mod model_layout;
pub mod predict;
mod sight;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use numaplace_model::{Action, Counter, Decision, Plan, Snapshot, TaskId, Topology};

use crate::dino::{DiParams, Dino, DinoParams, DistributedIntensity};
use crate::numad::{NumadLike, NumadParams};
use crate::{Needs, Policy, Signal, View, within};
use experiment::{Backoff, History, JudgeParams, Trial, Verdict};

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
    /// sight, before they touch their memory ([`sight`]). Off by default:
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
/// experiment over every group at once, judged as one ([`LAYOUT`]'s
/// verdict is [`experiment::Judgement::keeps_jointly`]).
const LAYOUT: &str = "distributed-intensity layout";

/// The kernel's automatic NUMA balancing turned the other way (the whole
/// machine's setting, `kernel.numa_balancing`): its gains (pages and
/// threads brought together where first touch left them apart) and its
/// costs (a hinting fault on every scanned page, more where nothing is
/// misplaced) are the machine's, so the trial is judged as one over every
/// group, as [`LAYOUT`]'s.
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

/// The hysteresis of DI-Migrate's ranking in [`LAYOUT`]
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
/// with its memory, judged together as [`LAYOUT`] is.
const MODEL_LAYOUT: &str = "predicted layout";

/// What a group's move would be, if it has a premise.
#[derive(Debug, Clone, PartialEq)]
enum Premise {
    /// numad's whole placement: threads and memory. Why.
    Whole(String),
    /// Only the threads first ([`GATHER`]). Why.
    ThreadsFirst(String),
}

/// One group's move in an experiment.
struct Move {
    pid: i32,
    label: String,
    /// [`MEMORY_HOME`], [`GATHER`], [`LAYOUT`] or [`DINO_LAYOUT`].
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
    /// A trial of the machine's layout ([`LAYOUT`]): every thread's
    /// affinity and node before it, by tid, to put back on rollback (the
    /// layout re-pins threads every round, so the first round's pins do
    /// not say what it changed).
    layout: Option<BTreeMap<i32, Before>>,
    /// A trial of the kernel's balancing ([`KERNEL`]).
    kernel: Option<KernelTrial>,
    /// The layout under trial is the model's ([`MODEL_LAYOUT`]), not
    /// DI-Migrate's.
    model: bool,
    /// For the model's layout: where each thread ran and its pages per
    /// node before it, by tid (what the model compares against when no
    /// group was measured throughout the trial).
    model_from: BTreeMap<i32, (usize, Vec<f64>)>,
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
    /// Trials of the kernel's balancing so far and the round until which
    /// it is not tried again ([`KERNEL`]; `u64::MAX` once the engine did
    /// not carry a change out: out of scope or not allowed here).
    kernel_held: (u32, u64),
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
            kernel_held: (0, 0),
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

/// The thread a pin is for.
fn pinned(a: &Action) -> Option<TaskId> {
    match a {
        Action::Pin { task, .. } => Some(*task),
        _ => None,
    }
}

/// Where a rollback's first step puts thread `x` ([`undo_of`]): the CPUs
/// of the node it last ran on within its affinity, when that is narrower
/// than its affinity; on a crowded machine (more runnable threads than
/// CPUs, [`crate::dino::aside::crowded`]) the very CPU it ran on. There
/// every CPU is shared and the kernel's balancing leaves a pairing as it
/// finds it, so a thread put back on its node alone may come to share a
/// CPU with one that ran alone before (mix:18003: two short programs that
/// had a CPU each shared one after a rolled-back gathering, 16.8 and
/// 18.6 s -> 25.4 and 27.7 s).
fn home_within(
    t: &Topology,
    x: &numaplace_model::Task,
    crowded: bool,
) -> Option<numaplace_model::CpuSet> {
    let cpu = x.last_cpu.and_then(|c| t.cpu_by_os_id(c))?;
    let home = if crowded {
        numaplace_model::CpuSet::from_iter([cpu.os_id])
    } else {
        t.nodes()[cpu.node].span.clone()
    };
    Some(home.intersection(&x.allowed_cpus)).filter(|n| !n.is_empty() && *n != x.allowed_cpus)
}

/// The pins that undo `decisions` on `s`, in two steps: first each
/// pinned thread back onto the node it runs on now, or on a crowded
/// machine the CPU (within the affinity it has now, [`home_within`]),
/// then, a round later, back to that affinity. Given its old
/// affinity alone, a thread would stay where the move put it until the
/// scheduler's balancing happened to move it, so the machine after a
/// rollback would not be the one before the move. Memory is put back by
/// [`Auto::roll_back`], from where it was before
/// ([`Move::memory_before`]).
fn undo_of(t: &Topology, s: &Snapshot, decisions: &[Decision]) -> (Vec<Action>, Vec<Action>) {
    let (mut home, mut undo) = (Vec::new(), Vec::new());
    let crowded = crate::dino::aside::crowded(s, t).is_some();
    for d in decisions {
        if let Action::Pin { task, tgid, .. } = &d.action
            && let Some(x) = s.task(task.tid).filter(|x| x.id() == *task)
        {
            if let Some(cpus) = home_within(t, x, crowded) {
                home.push(Action::Pin {
                    task: *task,
                    tgid: *tgid,
                    cpus,
                });
            }
            undo.push(Action::Pin {
                task: *task,
                tgid: *tgid,
                cpus: x.allowed_cpus.clone(),
            });
        }
    }
    (home, undo)
}

/// Bytes of a page, for moving a share of a process's memory (the
/// kernel's base page; huge pages move as many of them).
const PAGE: u64 = 4096;

/// The nodes (dense ids) of the CPUs a group's threads last ran on, one
/// entry per thread: those running or runnable when any is (a sleeping
/// thread's last CPU says where it was, not where the work is), else all.
fn thread_nodes(view: &View<'_>, g: &numaplace_model::TaskGroup) -> Vec<usize> {
    let (t, s) = (view.topology, view.snapshot);
    let tasks: Vec<&numaplace_model::Task> =
        g.threads.iter().filter_map(|&tid| s.task(tid)).collect();
    let busy = |x: &&numaplace_model::Task| matches!(x.state, 'R' | 'D');
    let any_busy = tasks.iter().any(busy);
    tasks
        .iter()
        .filter(|x| !any_busy || busy(x))
        .filter_map(|x| x.last_cpu)
        .filter_map(|c| t.cpu_by_os_id(c))
        .map(|c| c.node)
        .collect()
}

/// How far a group's threads reach for their memory: the mean over its
/// threads of the distance to each byte of the group's memory, in units
/// of the local distance, less one (the machine's SLIT distances: 0 when
/// every access is local, 1.1 when all cross a link of distance 21, 0.2
/// between the nodes of one package at distance 12); `None` when its
/// memory or its threads' CPUs are not known.
pub fn reach(view: &View<'_>, pid: i32) -> Option<f64> {
    let (t, s) = (view.topology, view.snapshot);
    let g = s.group(pid)?;
    let mem = g.memory_total()?;
    let total: u64 = mem.values().sum();
    if total == 0 {
        return None;
    }
    let n = t.nodes().len();
    let per_thread: Vec<f64> = thread_nodes(view, g)
        .into_iter()
        .map(|from| {
            mem.iter()
                .filter_map(|(&os, &b)| {
                    let to = t.node_by_os_id(os)?.id;
                    let d = f64::from(t.distances()[from * n + to]) / 10.0;
                    Some(b as f64 / total as f64 * (d - 1.0).max(0.0))
                })
                .sum()
        })
        .collect();
    (!per_thread.is_empty()).then(|| per_thread.iter().sum::<f64>() / per_thread.len() as f64)
}

/// How differently a group's memory and its threads are spread over the
/// nodes: half the sum over nodes of |share of its threads there - share
/// of its memory there| (0: alike, 1: apart); `None` when not known. The
/// process's memory per node does not say which thread uses which page:
/// spread like the threads, it is most likely each thread's own, first
/// touched where it runs.
fn spread_like_threads(view: &View<'_>, pid: i32) -> Option<f64> {
    let (t, s) = (view.topology, view.snapshot);
    let g = s.group(pid)?;
    let mem = g.memory_total()?;
    let total: u64 = mem.values().sum();
    let nodes: Vec<u32> = thread_nodes(view, g)
        .into_iter()
        .map(|n| t.nodes()[n].os_id)
        .collect();
    if total == 0 || nodes.is_empty() {
        return None;
    }
    let mut all: std::collections::BTreeSet<u32> = mem.keys().copied().collect();
    all.extend(nodes.iter().copied());
    let d: f64 = all
        .iter()
        .map(|n| {
            let threads = nodes.iter().filter(|&&x| x == *n).count() as f64 / nodes.len() as f64;
            let memory = *mem.get(n).unwrap_or(&0) as f64 / total as f64;
            (threads - memory).abs()
        })
        .sum();
    Some(d / 2.0)
}

/// Below this difference ([`spread_like_threads`]) a multithreaded
/// group's memory is taken as its threads' own, local to each.
const LIKE_THREADS: f64 = 0.25;

/// Reach below which bringing a group and its memory together has too
/// little to gain to pay for the move and the pin (a fifth of all
/// accesses crossing a socket link, or every access crossing to the
/// other node of its own package, is just at it).
const FAR_ENOUGH: f64 = 0.2;

/// Whether numad's placement of `pid` has a premise here: memory larger
/// than the machine's largest last-level cache (a working set that fits
/// the cache hardly goes to memory, wherever it lies) and threads that
/// reach far for it ([`reach`] at least [`FAR_ENOUGH`]). A group whose
/// threads run on several nodes with its memory spread as they are may
/// be using memory local to each thread already, or sharing it all: its
/// threads alone are brought together first ([`Premise::ThreadsFirst`]).
/// `Err` says why neither.
fn worth_bringing_together(view: &View<'_>, pid: i32) -> Result<Premise, String> {
    let t = view.topology;
    let g = view.snapshot.group(pid).ok_or("gone")?;
    let total: u64 = g.memory_total().map_or(0, |m| m.values().sum());
    let llc = t
        .llcs()
        .iter()
        .filter_map(|l| l.cache.map(|c| t.caches()[c].size))
        .max()
        .unwrap_or(0);
    if total <= llc {
        // Its memory hardly matters; threads that share written data
        // still pay for every line that crosses between caches.
        let on: BTreeSet<usize> = thread_nodes(view, g).into_iter().collect();
        if on.len() >= 2 {
            return Ok(Premise::ThreadsFirst(format!(
                "its {} MiB fit the {} MiB last-level cache, so where they lie hardly \
                 matters, but its threads run on {} nodes: if they share written data, every \
                 line they write crosses between caches; its threads alone are brought \
                 together, kept only if that is faster",
                total >> 20,
                llc >> 20,
                on.len()
            )));
        }
        return Err(format!(
            "its {} MiB fit the {} MiB last-level cache",
            total >> 20,
            llc >> 20
        ));
    }
    if let Some(d) = spread_like_threads(view, pid)
        && d < LIKE_THREADS
    {
        let on: BTreeSet<usize> = thread_nodes(view, g).into_iter().collect();
        if on.len() < 2 {
            return Err(format!(
                "its memory is where its threads run (they differ by {:.0} %)",
                100.0 * d
            ));
        }
        return Ok(Premise::ThreadsFirst(format!(
            "its memory lies over the {} nodes its threads run on as they are spread there \
             (they differ by {:.0} %): each thread's memory may be its own, local already, or \
             shared by all of them; its threads alone are brought together first, kept only \
             if that is faster by itself, and the memory may follow after",
            on.len(),
            100.0 * d
        )));
    }
    match reach(view, pid) {
        Some(r) if r >= FAR_ENOUGH => Ok(Premise::Whole(format!(
            "its threads reach {r:.2} local distances beyond their own node for its memory"
        ))),
        Some(r) => Err(format!(
            "its threads reach only {r:.2} local distances beyond their own node for its memory"
        )),
        None => Err("where its memory or threads are is not known".into()),
    }
}

/// The move that brings `process`'s memory on `node` back up to the share
/// `want` of it (a little short counts as back), if it is short of it.
fn restore(s: &Snapshot, process: TaskId, node: u32, want: f64) -> Option<Action> {
    let m = s.group(process.tid)?.memory_total()?;
    let total: u64 = m.values().sum();
    let now = *m.get(&node).unwrap_or(&0) as f64 / total.max(1) as f64;
    if total == 0 || now >= want - 0.05 {
        return None;
    }
    Some(Action::MoveMemory {
        process,
        to_node: node,
        max_pages: Some((((want - now) * total as f64) as u64).div_ceil(PAGE).max(1)),
    })
}

/// The share of `pid`'s memory on `node`, if its memory is known.
/// Bytes of `pid`'s resident memory not on `node`.
fn away_from(s: &Snapshot, pid: i32, node: u32) -> f64 {
    (s.group(pid).and_then(|g| g.memory_total())).map_or(0.0, |m| {
        m.iter()
            .filter(|(n, _)| **n != node)
            .map(|(_, b)| *b as f64)
            .sum()
    })
}

fn share_on(s: &Snapshot, pid: i32, node: u32) -> Option<f64> {
    let m = s.group(pid)?.memory_total()?;
    let total: u64 = m.values().sum();
    (total > 0).then(|| *m.get(&node).unwrap_or(&0) as f64 / total as f64)
}

fn percent(x: f64) -> String {
    format!("{:+.1} %", 100.0 * x)
}

impl Auto {
    /// A rollback's memory moves still to finish, asked again while a node
    /// holds less of the process's memory than it did before the move (at
    /// most a few rounds).
    fn finish_undoing(&mut self, s: &Snapshot, plan: &mut Plan) {
        self.undoing.retain_mut(|(process, node, want, left)| {
            let Some(action) = restore(s, *process, *node, *want) else {
                return false;
            };
            if *left == 0 {
                return false;
            }
            *left -= 1;
            plan.push(
                action,
                format!(
                    "auto: rollback: memory back to node {node} ({:.0} % of it was there), continued",
                    100.0 * *want
                ),
            );
            true
        });
    }

    /// One round of the experiment under way: the moves' memory carried
    /// on while it settles, then the verdict on each move.
    fn go_on(&mut self, view: &View<'_>, progress: &BTreeMap<i32, f64>, plan: &mut Plan) {
        let s = view.snapshot;
        let Some(mut e) = self.trial.take() else {
            return;
        };
        e.rounds += 1;
        e.moves.retain(|m| s.group(m.pid).is_some()); // exited: nothing to undo
        if let Some(k) = e.kernel.take() {
            self.go_on_kernel(s, e, k, progress, plan);
            return;
        }
        if e.moves.is_empty() {
            if e.layout.is_some() {
                // Every group it moved is gone: nothing judged, nothing to
                // undo but the pins of groups that came meanwhile.
                self.roll_back_layout(
                    view,
                    e,
                    "every group it moved ended before it was judged",
                    plan,
                );
            }
            return;
        }
        // Still carrying a move out (memory at the rate limit): that is
        // settling, not yet the moved state. Its own move, to the node it
        // chose, whatever numad would choose now.
        let mut moving = false;
        if e.rounds <= self.params.max_settle_rounds {
            for m in &e.moves {
                let Some((process, node)) = m.memory_to else {
                    continue;
                };
                let there = share_on(s, process.tid, node).unwrap_or(1.0);
                if there < 0.9 {
                    moving = true;
                    plan.push(
                        Action::MoveMemory {
                            process,
                            to_node: node,
                            max_pages: None,
                        },
                        format!(
                            "auto: experiment {} ({} of {}), still moving its memory to node \
                             {node} ({:.0} % there)",
                            e.number,
                            m.kind,
                            m.label,
                            100.0 * there
                        ),
                    );
                }
            }
        }
        if moving {
            self.trial = Some(e);
            return;
        }
        match e.trial.observe(&self.judge, progress) {
            Verdict::Wait => self.trial = Some(e),
            Verdict::Judged(j) if e.layout.is_some() => {
                let margin = self.judge.margin;
                let numbers = format!(
                    "the groups in scope together went {}, the {} moved {}{}, over {} rounds",
                    percent(j.all),
                    j.own.len(),
                    percent(j.moved()),
                    j.control
                        .map(|c| format!(", those left alone {}", percent(c)))
                        .unwrap_or_default(),
                    self.judge.measure_rounds
                );
                if j.keeps_jointly(margin) && e.model {
                    self.keep_model_layout(s, &e, numbers);
                    self.history = e.trial.measured_history();
                } else if let Some(g) = self.judged_by_model_as_groups_came(view, &e, &j) {
                    // (A model layout that keeps went above: this one
                    // would be undone.)
                    let numbers = format!(
                        "{numbers}, but groups came while it was measured and none was left \
                         unmoved to measure their load by, so the machine model, fitted to the \
                         rounds since, judged it: the placement before it would run the groups \
                         {} slower now (kept above {})",
                        percent(g.exp_m1()),
                        percent(self.model_threshold().exp_m1())
                    );
                    self.keep_model_layout(s, &e, numbers);
                    self.history = e.trial.measured_history();
                } else if j.keeps_jointly(margin) {
                    self.layout_kept = true;
                    self.verdicts.push(format!(
                        "experiment {} ({LAYOUT}) kept: {numbers}; DI-Migrate manages the \
                         machine from now on",
                        e.number
                    ));
                    self.history = e.trial.measured_history();
                } else {
                    if e.model {
                        self.model_misses = (self.model_misses + 1).min(3);
                    }
                    let wait = self.hold_layout(s.seq);
                    let why = format!(
                        "{numbers} (a layout is kept when the groups together gain more than \
                         {}); not tried again for {wait} rounds",
                        percent(margin)
                    );
                    self.roll_back_layout(view, e, &why, plan);
                    self.history.clear();
                }
            }
            Verdict::Judged(j) => {
                let number = e.number;
                let all_kept = e.moves.iter().all(|m| j.keeps(m.pid, self.judge.margin));
                for m in e.moves {
                    let own = j.own.get(&m.pid).copied().unwrap_or(0.0);
                    if j.keeps(m.pid, self.judge.margin) {
                        // The move stays, and the group is not moved again
                        // for a while; the next baseline starts from the
                        // moved state. Said in the next experiment's
                        // reasons.
                        self.backoff
                            .hold(m.pid, m.kind, s.seq + self.judge.backoff_rounds);
                        if m.kind == DINO_LAYOUT {
                            self.dino_kept.insert(m.pid);
                        }
                        if let Some((process, node)) = m.memory_to {
                            self.following.push((
                                process,
                                node,
                                number,
                                self.params.max_settle_rounds,
                            ));
                        }
                        self.verdicts.push(format!(
                            "experiment {number} ({} of {}) kept: it went {}, the groups in \
                             scope together {}, over {} rounds",
                            m.kind,
                            m.label,
                            percent(own),
                            percent(j.all),
                            self.judge.measure_rounds
                        ));
                    } else {
                        let wait = self.backoff.rolled_back(&self.judge, m.pid, m.kind, s.seq);
                        let why = format!(
                            "it went {}, the groups in scope together {}, over {} rounds (a move \
                             is kept when its group gains more than {} and the groups together \
                             do not lose); not tried on it again for {wait} rounds",
                            percent(own),
                            percent(j.all),
                            self.judge.measure_rounds,
                            percent(self.judge.margin)
                        );
                        self.roll_back(s, number, m, &why, plan);
                    }
                }
                if all_kept {
                    // Nothing undone: the rounds just measured are the
                    // next experiment's baseline.
                    self.history = e.trial.measured_history();
                } else {
                    self.history.clear();
                }
            }
            Verdict::Unjudged => {
                // Nothing learnt about the moves themselves: held back for
                // the first back-off only, not counted as failures.
                let wait = self.judge.backoff_rounds;
                let why = format!(
                    "a group came or went while it was measured and no group left unmoved was \
                     measured throughout to judge the moves against; undone as unproven, tried \
                     again after {wait} rounds"
                );
                if e.model
                    && let Some(g) = self.counterfactual(view, &e.model_from)
                    && g > self.model_threshold()
                {
                    // No group was measured throughout, but the model,
                    // fitted to the moved state, predicts the placement
                    // before it slower: kept.
                    let margin = self.model_threshold();
                    self.keep_model_layout(
                        s,
                        &e,
                        format!(
                            "a group came or went while it was measured and none was measured \
                             throughout, so the machine model, fitted to the rounds since, \
                             judged it: the placement before it would run the groups {} \
                             slower (kept above {})",
                            percent(g.exp_m1()),
                            percent(margin.exp_m1())
                        ),
                    );
                    self.history = e.trial.measured_history();
                    return;
                }
                if e.layout.is_some() {
                    self.layout_held.1 = s.seq + wait;
                    self.roll_back_layout(view, e, &why, plan);
                    self.history.clear();
                    return;
                }
                for m in e.moves {
                    self.backoff.hold(m.pid, m.kind, s.seq + wait);
                    self.roll_back(s, e.number, m, &why, plan);
                }
                self.history.clear();
            }
        }
    }

    /// Undoes move `m` of experiment `number`, saying `why` in each
    /// undoing action's reason: the threads back on the nodes (on a
    /// crowded machine the CPUs) they ran on and, next round, to their affinities as they were; the memory back
    /// to the nodes it was on, in the shares it had there. A gathering
    /// rolled back holds numad's whole placement back as long: it showed
    /// the threads do not gain from running together.
    fn roll_back(&mut self, s: &Snapshot, number: u64, m: Move, why: &str, plan: &mut Plan) {
        let reason = format!(
            "auto: experiment {number} ({} of {}) rolled back: {why}",
            m.kind, m.label
        );
        if m.kind == GATHER
            && let Some(until) = self.backoff.until(m.pid, GATHER)
        {
            self.backoff.hold(m.pid, MEMORY_HOME, until);
        }
        let memory = if m.moved_memory {
            self.memory_back(s, &m)
        } else {
            Vec::new()
        };
        let mut undo = Vec::new();
        for a in m.undo {
            let home = m
                .undo_home
                .iter()
                .find(|h| pinned(h).is_some() && pinned(h) == pinned(&a));
            match home {
                Some(h) => {
                    undo.push(h.clone());
                    self.releasing
                        .push((a, format!("{reason} (second step: its own affinity back)")));
                }
                None => undo.push(a),
            }
        }
        undo.extend(memory);
        for a in undo {
            plan.push(a, reason.clone());
        }
    }

    /// Notes a rollback of the layout at `round`; returns the rounds it
    /// waits before it is tried again (doubling, as [`Backoff`]'s).
    fn hold_layout(&mut self, round: u64) -> u64 {
        self.layout_held.0 += 1;
        let wait = self.judge.backoff_after(self.layout_held.0);
        self.layout_held.1 = round + wait;
        wait
    }

    /// Undoes a layout's trial: every thread it re-pinned back onto the
    /// node (on a crowded machine the CPU) it ran on before and, next round, to its affinity as it was
    /// (threads that came during the trial: to the affinity they came
    /// with); every moved group's memory back in its shares per node.
    fn roll_back_layout(&mut self, view: &View<'_>, e: Experiment, why: &str, plan: &mut Plan) {
        let s = view.snapshot;
        let reason = format!(
            "auto: experiment {} ({}) rolled back: {why}",
            e.number,
            model_layout::layout_name(e.model)
        );
        let before = e.layout.unwrap_or_default();
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            for x in g.threads.iter().filter_map(|&tid| s.task(tid)) {
                let (home, to) = match before.get(&x.tid).filter(|b| b.task == x.id()) {
                    Some(b) => (b.node.clone(), (b.task, b.tgid, b.allowed.clone())),
                    None => match self.first_affinity.get(&x.tid).filter(|f| f.0 == x.id()) {
                        Some(f) => (None, f.clone()),
                        None => continue,
                    },
                };
                if x.allowed_cpus == to.2 {
                    continue; // the layout left it as it was
                }
                let release = Action::Pin {
                    task: to.0,
                    tgid: to.1,
                    cpus: to.2,
                };
                match home {
                    Some(cpus) => {
                        plan.push(
                            Action::Pin {
                                task: to.0,
                                tgid: to.1,
                                cpus,
                            },
                            reason.clone(),
                        );
                        self.releasing.push((
                            release,
                            format!("{reason} (second step: its own affinity back)"),
                        ));
                    }
                    None => plan.push(release, reason.clone()),
                }
            }
        }
        for m in e.moves {
            for a in self.memory_back(s, &m) {
                plan.push(a, reason.clone());
            }
        }
    }

    /// The moves that put move `m`'s group's memory back on the nodes it
    /// was on, in the shares it had there ([`Move::memory_before`]); each
    /// is asked again for up to four rounds while the rate limit spreads
    /// it ([`Auto::finish_undoing`]).
    fn memory_back(&mut self, s: &Snapshot, m: &Move) -> Vec<Action> {
        let Some(process) = s.group(m.pid).map(|g| g.id()) else {
            return Vec::new();
        };
        let total: u64 = m.memory_before.values().sum();
        let mut back = Vec::new();
        for (&node, &bytes) in &m.memory_before {
            let want = bytes as f64 / total.max(1) as f64;
            if let Some(a) = restore(s, process, node, want) {
                self.undoing.push((process, node, want, 4));
                back.push(a);
            }
        }
        back
    }

    /// Starts a trial of DI-Migrate's layout of the whole machine, once
    /// every group in scope has a baseline: its plan this round, for every
    /// group, judged as one.
    fn try_layout(&mut self, view: &View<'_>, decisions: Vec<Decision>, plan: &mut Plan) {
        let (t, s) = (view.topology, view.snapshot);
        let n = self.judge.measure_rounds;
        // Judged by the groups past their start (a group starting up runs
        // slower than it will, so its baseline would make any layout look
        // good: one kept so on mix:1030 went on costing 4 %); the younger
        // ones are laid out too, and judged by no one.
        let Some(baseline) = self.baseline(view, SETTLED_AGE * n as u64) else {
            return;
        };
        if baseline.is_empty()
            || !decisions
                .iter()
                .any(|d| matches!(d.action, Action::Pin { .. }))
        {
            return;
        }
        let number = self.experiments + 1;
        self.experiments = number;
        let earlier: String = self.verdicts.drain(..).map(|v| v + "; ").collect();
        let crowded = crate::dino::aside::crowded(s, t).is_some();
        let mut before = BTreeMap::new();
        let mut moves = Vec::new();
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            for x in g.threads.iter().filter_map(|&tid| s.task(tid)) {
                before.insert(
                    x.tid,
                    Before {
                        task: x.id(),
                        tgid: g.pid,
                        allowed: x.allowed_cpus.clone(),
                        node: home_within(t, x, crowded),
                    },
                );
            }
            moves.push(Move {
                pid: g.pid,
                label: String::new(),
                kind: LAYOUT,
                moved_memory: true,
                undo_home: Vec::new(),
                undo: Vec::new(),
                memory_to: None,
                memory_before: g.memory_total().unwrap_or_default(),
            });
        }
        let groups = baseline.len();
        for d in decisions {
            plan.push(
                d.action,
                format!(
                    "auto: {earlier}experiment {number}: trying {LAYOUT} of the {groups} groups in \
                     scope, judged together over {n} rounds, kept above {}: {}",
                    percent(self.judge.margin),
                    d.reason
                ),
            );
        }
        self.trial = Some(Experiment {
            number,
            trial: Trial::new(moves.iter().map(|m| m.pid).collect(), baseline),
            moves,
            rounds: 0,
            layout: Some(before),
            kernel: None,
            model: false,
            model_from: BTreeMap::new(),
        });
    }

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

    /// Once every group in scope has a baseline, starts an experiment of
    /// every move numad proposes that is not held back: tried together
    /// (numad would make them all at once), judged one by one.
    fn try_moves(
        &mut self,
        view: &View<'_>,
        proposals: BTreeMap<i32, (&'static str, Vec<Decision>)>,
        plan: &mut Plan,
    ) {
        let s = view.snapshot;
        let n = self.judge.measure_rounds;
        let Some(baseline) = self.baseline(view, 0) else {
            return; // some group's baseline is not measured yet
        };
        let labels = view.labels();
        let mut moves = Vec::new();
        let number = self.experiments + 1;
        let earlier: String = self.verdicts.drain(..).map(|v| v + "; ").collect();
        for (pid, (kind, decisions)) in proposals {
            if !self.backoff.allows(pid, kind, s.seq) || decisions.is_empty() {
                continue;
            }
            let label = labels.get(&pid).cloned().unwrap_or_default();
            let before = baseline.get(&pid).copied().unwrap_or(0.0);
            for d in &decisions {
                plan.push(
                    d.action.clone(),
                    format!(
                        "auto: {earlier}experiment {number}: trying {kind} of {label} \
                         (now {before:.3e} instructions/s a thread, {} groups in scope judged over {n} \
                         rounds, kept above {}): {}",
                        baseline.len(),
                        percent(self.judge.margin),
                        d.reason
                    ),
                );
            }
            let (undo_home, undo) = undo_of(view.topology, s, &decisions);
            moves.push(Move {
                pid,
                kind,
                moved_memory: decisions.iter().any(|d| d.action.moves_memory()),
                undo_home,
                undo,
                memory_before: s
                    .group(pid)
                    .and_then(|g| g.memory_total())
                    .unwrap_or_default(),
                memory_to: decisions.iter().find_map(|d| match d.action {
                    Action::MoveMemory {
                        process, to_node, ..
                    } => Some((process, to_node)),
                    _ => None,
                }),
                label,
            });
        }
        if moves.is_empty() {
            if !earlier.is_empty() {
                // Kept verdicts wait for the next experiment's reasons.
                self.verdicts
                    .push(earlier.trim_end_matches("; ").to_string());
            }
            return;
        }
        self.experiments = number;
        self.trial = Some(Experiment {
            number,
            trial: Trial::new(moves.iter().map(|m| m.pid).collect(), baseline),
            moves,
            rounds: 0,
            layout: None,
            kernel: None,
            model: false,
            model_from: BTreeMap::new(),
        });
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
        let s = view.snapshot;
        self.backoff.retain(|pid| s.group(pid).is_some());
        self.first_seen.retain(|pid, _| s.group(*pid).is_some());
        for &pid in view.managed {
            self.first_seen.entry(pid).or_insert(s.seq);
        }
        self.first_affinity
            .retain(|tid, (id, ..)| s.task(*tid).is_some_and(|x| x.id() == *id));
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            for x in g.threads.iter().filter_map(|&tid| s.task(tid)) {
                self.first_affinity
                    .entry(x.tid)
                    .or_insert_with(|| (x.id(), g.pid, x.allowed_cpus.clone()));
            }
        }
        self.predictor(view).observe(s);
        let settled_after = SETTLED_AGE * self.judge.measure_rounds as u64;
        let long_lived = SPECULATIVE_AGE * self.judge.measure_rounds as u64;
        let ages: BTreeMap<i32, u64> = (self.first_seen.iter())
            .map(|(&pid, &f)| (pid, s.seq.saturating_sub(f)))
            .collect();
        let age = |pid: &i32| ages.get(pid).copied().unwrap_or(0);
        let mut plan = Plan::default();
        // DI-Migrate is asked every round; its plan is acted on while its
        // layout is under trial or kept.
        let layout = self.layout.decide(view).decisions;
        let layout_trial = self
            .trial
            .as_ref()
            .is_some_and(|e| e.layout.is_some() && !e.model);
        if self.layout_kept {
            for d in &layout {
                plan.push(
                    d.action.clone(),
                    format!("auto ({LAYOUT} kept): {}", d.reason),
                );
            }
        }
        self.dino_kept.retain(|&pid| s.group(pid).is_some());
        let mut dino: BTreeMap<i32, Vec<Decision>> = BTreeMap::new();
        for d in self.dino.decide(view).decisions {
            let pid = d.action.pid();
            if self.dino_kept.contains(&pid) {
                // Its layout was kept: DINO goes on managing the group,
                // its pages following its threads.
                plan.push(
                    d.action,
                    format!("auto ({DINO_LAYOUT} kept for this group): {}", d.reason),
                );
            } else {
                dino.entry(pid).or_default().push(d);
            }
        }
        // numad is asked every round, about every group in scope.
        let mut proposals: BTreeMap<i32, Vec<Decision>> = BTreeMap::new();
        for d in self.numad.decide(view).decisions {
            proposals.entry(d.action.pid()).or_default().push(d);
        }
        self.finish_undoing(s, &mut plan);
        for (a, why) in self.releasing.drain(..) {
            plan.push(a, why);
        }
        let following = self.follow(view, &mut plan);
        if self.params.place_at_start && !self.layout_kept {
            self.place_at_sight(view, &mut plan);
        }
        if self.model_kept && !self.layout_kept {
            // The model's layout holds; threads that come are placed by
            // the model, and it is asked again now and then.
            if let Some(progress) = progress(view) {
                if self.trial.is_some() {
                    self.go_on(view, &progress, &mut plan);
                } else {
                    self.history.push(&progress, self.judge.measure_rounds);
                    let quiet = self.undoing.is_empty() && following.is_empty();
                    self.model_kept_round(view, quiet, &mut plan);
                    if quiet && self.trial.is_none() {
                        self.maybe_try_kernel(view, &mut plan);
                    }
                }
            }
            return plan;
        }
        if self.layout_kept {
            // DI-Migrate manages the threads and their memory; the
            // kernel's balancing is still tried the other way, on the
            // layout it keeps.
            if let Some(progress) = progress(view) {
                if self.trial.is_some() {
                    self.go_on(view, &progress, &mut plan);
                } else {
                    self.history.push(&progress, self.judge.measure_rounds);
                    if self.undoing.is_empty() && following.is_empty() {
                        self.maybe_try_kernel(view, &mut plan);
                    }
                }
            }
            return plan;
        }
        // A move is tried only where its premise holds (the one under
        // trial goes on whatever it shows now).
        let under_trial: Vec<i32> = self
            .trial
            .as_ref()
            .filter(|e| e.layout.is_none())
            .map(|e| e.moves.iter().map(|m| m.pid).collect())
            .unwrap_or_default();
        let mut kinds: BTreeMap<i32, (&'static str, Vec<Decision>)> = BTreeMap::new();
        for (pid, mut ds) in proposals {
            if under_trial.contains(&pid) {
                kinds.insert(pid, (MEMORY_HOME, ds));
                continue;
            }
            if following.contains(&pid)
                || self.dino_kept.contains(&pid)
                || self
                    .first_seen
                    .get(&pid)
                    .is_none_or(|&f| s.seq < f + settled_after)
            {
                continue; // its memory still following, or starting up
            }
            let (kind, why) = match worth_bringing_together(view, pid) {
                Ok(Premise::Whole(why)) => (MEMORY_HOME, why),
                Ok(Premise::ThreadsFirst(_)) if age(&pid) < long_lived => continue,
                Ok(Premise::ThreadsFirst(why)) => {
                    ds.retain(|d| matches!(d.action, Action::Pin { .. }));
                    (GATHER, why)
                }
                Err(_) => continue,
            };
            for d in &mut ds {
                d.reason = match kind {
                    GATHER => format!(
                        "the threads only, not yet the memory, of {}; {why}",
                        d.reason
                    ),
                    _ => format!("{} ({why})", d.reason),
                };
            }
            kinds.insert(pid, (kind, ds));
        }
        let Some(progress) = progress(view) else {
            // Nothing counted, nothing judged: numad's moves as they are,
            // where their whole premise holds (a gathering is only worth
            // it if measured).
            for d in kinds
                .into_values()
                .filter(|(k, _)| *k == MEMORY_HOME)
                .flat_map(|(_, ds)| ds)
            {
                plan.push(
                    d.action,
                    format!(
                        "auto ({MEMORY_HOME}, no experiment: instructions are not counted here): {}",
                        d.reason
                    ),
                );
            }
            return plan;
        };
        if self.trial.is_some() {
            self.go_on(view, &progress, &mut plan);
            let how = if self.layout_kept {
                "kept"
            } else {
                "under trial"
            };
            if layout_trial && (self.layout_kept || self.trial.is_some()) {
                // Still under trial, or kept now: the layout goes on (not
                // in the round it is rolled back in, whose pins undo it).
                for d in layout {
                    plan.push(d.action, format!("auto ({LAYOUT} {how}): {}", d.reason));
                }
            }
            return plan;
        }
        self.history.push(&progress, self.judge.measure_rounds);
        let busy: BTreeSet<i32> = self.undoing.iter().map(|(p, ..)| p.tid).collect();
        // The layout first, once there is a baseline of the groups past
        // their start: it is where most is to
        // gain (DI-Migrate's mean over generated mixes is the best of the
        // seeds'), and the sooner it is in place the more of each group's
        // memory is first touched where its threads run.
        // Once some group is past its start ([`Auto::try_layout`] judges
        // by those), and with at least two groups: one group's threads alone
        // are already spread by Linux's balancing, and a layout tried on a
        // lone VM left its memory moved for numad's premise to hold late
        // in its run (mix:1028, +9 % on one seed).
        if s.seq >= self.layout_held.1
            && self.first_seen.len() >= 2
            && self.dino_kept.is_empty()
            && busy.is_empty()
            && following.is_empty()
        {
            // The machine model says which layout pays, if any:
            // DI-Migrate's, or the best its own search finds.
            let ready = self
                .baseline(view, settled_after)
                .is_some_and(|b| !b.is_empty());
            match ready.then(|| self.choose_layout(view, &layout)) {
                Some(model_layout::Choice::Model(b)) => {
                    let (fit, found) = *b;
                    self.try_model_layout(view, &fit, &found, &mut plan);
                }
                Some(model_layout::Choice::Di) => self.try_layout(view, layout, &mut plan),
                Some(model_layout::Choice::Nothing) => {
                    // Asked again after the first back-off.
                    self.layout_held.1 = s.seq + self.judge.backoff_rounds;
                }
                None => {}
            }
            if self.trial.is_some() {
                return plan;
            }
        }
        let ready = |pid: &i32, kind: &'static str| {
            !busy.contains(pid)
                && !following.contains(pid)
                && self.backoff.allows(*pid, kind, s.seq)
        };
        let mut kinds: BTreeMap<i32, (&'static str, Vec<Decision>)> = kinds
            .into_iter()
            .filter(|(pid, (kind, _))| ready(pid, kind))
            .collect();
        let mut lone: Vec<(i32, Vec<Decision>)> = Vec::new();
        if kinds.is_empty() && self.first_seen.len() == 1 {
            // A lone group, numad's placement with nothing to try: DINO's
            // layout of its threads, once it has run long, or once past
            // its start where the model predicts it pays (a short run is
            // over before it has run long).
            lone = dino
                .into_iter()
                .filter(|(pid, ds)| {
                    ready(pid, DINO_LAYOUT)
                        && ds.iter().any(|d| matches!(d.action, Action::Pin { .. }))
                        && age(pid) >= settled_after
                })
                .collect();
        }
        if !kinds.is_empty() || !lone.is_empty() {
            // Each of these moves is made for memory or a cache: not
            // tried where it cannot pay for what it copies.
            let mut copies: BTreeMap<i32, f64> = BTreeMap::new();
            for (pid, (kind, ds)) in &kinds {
                let to = ds.iter().find_map(|d| match d.action {
                    Action::MoveMemory { to_node, .. } if *kind == MEMORY_HOME => Some(to_node),
                    _ => None,
                });
                copies.insert(*pid, to.map_or(0.0, |n| away_from(s, *pid, n)));
            }
            for (pid, _) in &lone {
                copies.insert(*pid, 0.0);
            }
            let idle = self.cannot_pay(view, &copies);
            kinds.retain(|pid, _| !idle.contains_key(pid));
            lone.retain(|(pid, _)| !idle.contains_key(pid));
            // numad's whole placement only: a gathering of threads alone is
            // made for data they share, whose cache-line transfers the model
            // sees only as far as stores are sampled (mix:45037, 4 threads
            // sharing 206 KiB: gathered +36.6 %, where the model saw the
            // cores they would share).
            let plans = (kinds.iter())
                .filter(|(_, (kind, _))| *kind == MEMORY_HOME)
                .map(|(&pid, (_, ds))| (pid, ds.clone()))
                .collect();
            let losing = self.predicted_to_lose(view, &plans);
            kinds.retain(|pid, _| !losing.contains(pid));
        }
        for (pid, ds) in lone {
            if age(&pid) >= long_lived || self.predicts_it_pays(view, &ds) {
                kinds.insert(pid, (DINO_LAYOUT, ds));
            }
        }
        self.try_moves(view, kinds, &mut plan);
        if self.trial.is_none() && busy.is_empty() && following.is_empty() {
            self.maybe_try_kernel(view, &mut plan);
        }
        plan
    }
}

impl Auto {
    /// The rest of the memory of kept moves that had not all arrived when
    /// they were judged, moved while the threads stay on its node (at most
    /// `max_settle_rounds` rounds more); returns the processes whose
    /// memory is still following, not to be moved otherwise meanwhile.
    fn follow(&mut self, view: &View<'_>, plan: &mut Plan) -> BTreeSet<i32> {
        let (t, s) = (view.topology, view.snapshot);
        let mut still = BTreeSet::new();
        self.following.retain_mut(|(process, node, number, left)| {
            let Some(g) = s.group(process.tid) else {
                return false;
            };
            let stays = t.node_by_os_id(*node).is_some_and(|n| {
                g.threads
                    .iter()
                    .filter_map(|&tid| s.task(tid))
                    .all(|x| x.allowed_cpus.is_subset(&n.span))
            });
            let there = share_on(s, process.tid, *node).unwrap_or(1.0);
            if !stays || there >= 0.9 || *left == 0 {
                return false;
            }
            *left -= 1;
            still.insert(process.tid);
            plan.push(
                Action::MoveMemory {
                    process: *process,
                    to_node: *node,
                    max_pages: None,
                },
                format!(
                    "auto: experiment {number} kept; the rest of its memory follows its threads \
                     to node {node} ({:.0} % there)",
                    100.0 * there
                ),
            );
            true
        });
        still
    }
}

#[cfg(test)]
mod tests;
