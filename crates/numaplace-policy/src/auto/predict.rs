//! `auto`'s predictor (issue 31): the machine model the simulator runs
//! (`numaplace-machine`, M1-M8 of docs/simulator.md), run on what one round
//! measured, to say which placement pays before trying it.
//!
//! It reads only what the [`Snapshot`] carries, never a scenario's hidden
//! parameters:
//! - **Fit.** Each running thread with counted instructions becomes a
//!   [`ThreadModel`]: its uncore requests per instruction (uncore requests,
//!   else LLC references, else LLC misses), its LLC miss curve (a power law
//!   through its measured misses at the LLC share the model gives it where
//!   it runs now, exponent [`ALPHA`]), its working set (its process's
//!   resident memory over its threads), its memory-level parallelism (from
//!   the uncore penalty where counted, else [`MLP`]) and its core CPI (what
//!   of its measured CPI the model's memory stalls leave). Three passes of
//!   the model at the placement measured refit each against the latencies,
//!   queues and cache shares the others cause, so the model at the
//!   measured placement reproduces the measured speeds.
//! - **Where its memory is.** A thread's pages per node: its sampled
//!   addresses' nodes where it has enough samples; else, where its
//!   process's memory lies spread like its threads (first touch left each
//!   thread's memory beside it), on its own node; else its process's
//!   memory per node.
//! - **Predict.** A placement (a CPU per thread, memory per thread) is one
//!   step of the model: each group's instructions per second.
//! - **Search.** Hill climbing, as the oracle's local search (swaps and
//!   moves to free CPUs, memory following the threads of a group gathered
//!   on one node), from the placement measured and from the candidate
//!   layouts the caller gives (DI-Migrate's), for the placement with the
//!   best mean of ln(predicted / now) over the groups, net of the cost of
//!   moving their memory over the time they are expected to run on (their
//!   age so far).
//!
//! What it lacks is said ([`Fit::lacking`]): a thread's writes to data
//! other threads share are not counted anywhere (no HITM counter), so the
//! model predicts no coherence traffic, and gathering sharers is left to
//! `auto`'s experiments.

use std::collections::BTreeMap;

use numaplace_machine::Machine;
use numaplace_machine::model::{Background, Constants, LINE, Runner, Solver, Speed};
use numaplace_machine::{Pattern, ThreadModel};
use numaplace_model::{Counter, Snapshot, TaskId, Topology};

mod calibrate;
mod moves;
mod sharing;

pub(crate) use moves::serve_order;

use sharing::{SharedWrites, Writers, own_pages, spread_like_threads};

/// The LLC miss curve's exponent where one measured point cannot give it:
/// the square-root rule of thumb (miss rate ∝ cache size^−0.5; Hartstein,
/// Srinivasan, Puzak and Moore, "Cache miss behavior: is it √2?", CF 2006,
/// found exponents of 0.3-0.7 over their workloads).
pub const ALPHA: f64 = 0.5;

/// Memory-level parallelism where the uncore penalty is not counted: an
/// assumption between a pointer chase (1) and a streaming loop (4 or more).
pub const MLP: f64 = 2.0;

/// Samples with a node a thread needs for its own pages per node to be
/// read from them.
const MIN_SAMPLES: usize = 8;

/// A thread that ran less of the round than this is not placed (it
/// sleeps: where it runs hardly matters to anyone).
const MIN_DEMAND: f64 = 0.05;

/// What the model makes of one running thread.
#[derive(Debug, Clone)]
pub struct ThreadFit {
    /// The thread, by tid and start time.
    pub task: TaskId,
    /// Its process (the group it belongs to).
    pub pid: i32,
    /// Index into [`Fit::groups`].
    pub group: usize,
    /// Its parameters in the machine model, fitted to its counters.
    pub model: ThreadModel,
    /// Share of a CPU it ran over the round (≤ 1).
    pub demand: f64,
    /// Dense CPU it ran on last.
    pub cpu: usize,
    /// Its pages per dense node, summing to 1.
    pub pages: Vec<f64>,
    /// Its share of its process's resident memory, bytes.
    pub bytes: f64,
    /// Instructions per second measured.
    pub ips: f64,
    /// Whether the caller may move it.
    pub movable: bool,
    /// Bytes of its process's data that its threads write (pages its
    /// sampled stores share with another thread's), 0 for none seen.
    pub shared_bytes: u64,
    /// At most this share of its measured cycles goes to waiting on memory
    /// (its LLC misses; its hits in the LLC cost the same wherever it
    /// runs) and on lines other caches hold, as fitted at the measured
    /// placement ([`Fit::stall_bound`]); `None` where its LLC misses are
    /// not counted (no bound can be had then).
    pub stalled: Option<f64>,
}

/// The fitted threads of one round.
#[derive(Debug, Clone, Default)]
pub struct Fit {
    /// The running threads placed by the model.
    pub threads: Vec<ThreadFit>,
    /// Group pids, by index.
    pub groups: Vec<i32>,
    /// Inputs the fit had to assume, in a few words each.
    pub lacking: Vec<&'static str>,
    /// The model's prediction at the measured placement, per group.
    pub now: Vec<f64>,
    /// Each thread's speed as the model has it at the measured placement:
    /// where every later solve starts from.
    warm: Vec<f64>,
    /// The measured point each thread is fitted to: misses per
    /// instruction, CPI while running, the uncore penalty (cycles).
    targets: Vec<(f64, f64, Option<f64>)>,
}

/// Where the model's solves of a placement start (per thread, a speed),
/// and where they leave theirs: with the memory moved, and while it moves.
#[derive(Debug, Clone, Default)]
struct Warm {
    after: Vec<f64>,
    during: Vec<f64>,
}

impl Warm {
    /// From the speeds at the measured placement.
    fn measured(fit: &Fit) -> Warm {
        Warm {
            after: fit.warm.clone(),
            during: fit.warm.clone(),
        }
    }

    /// From `other`'s speeds, reusing this one's buffers.
    fn start_at(&mut self, other: &Warm) {
        self.after.clone_from(&other.after);
        self.during.clone_from(&other.during);
    }
}

/// Where a group's memory goes in a placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// Where it is.
    Stay,
    /// All of it to this dense node.
    To(usize),
    /// Each thread's pages to its thread's node (DI-Migrate's following
    /// by sampled addresses).
    Follow,
}

/// A placement the search found.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Per thread of the fit: its dense CPU.
    pub cpus: Vec<usize>,
    /// Per group: where its memory goes.
    pub memory: Vec<Memory>,
    /// Mean over the groups of ln(predicted / now), net of moving costs.
    pub score: f64,
    /// The same, without the moving costs: the predicted change of the
    /// groups' speed once moved.
    pub gain: f64,
    /// Placements evaluated.
    pub evaluations: usize,
}

/// The predictor: a model of the machine (the parameters it was told, or
/// the generic defaults for its topology) and its buffers.
pub struct Predictor {
    solver: Solver,
    llc_of_cpu: Vec<usize>,
    llc_bytes: Vec<f64>,
    node_of_cpu: Vec<usize>,
    core_of_cpu: Vec<usize>,
    ghz: f64,
    llc_hit_ns: f64,
    page_migration_s: f64,
    nodes: usize,
    speeds: Vec<Speed>,
    /// Sampled stores of the last rounds ([`Predictor::observe`]).
    writers: Writers,
    /// How fast memory a placement moves arrives, bytes a second
    /// ([`Predictor::set_migration_rate`]).
    migrate_bytes_per_s: f64,
    /// Whether that rate is shared by every group's move, served one group
    /// after another (the engine's), rather than each group's own (the
    /// kernel's, which scans each process on its own).
    migration_shared: bool,
}

impl Predictor {
    /// A predictor for `topology` with `told`'s parameters, when they are
    /// for a machine of the same shape; else the generic defaults.
    pub fn new(topology: &Topology, told: Option<&Machine>) -> Predictor {
        let machine = match told {
            Some(m)
                if m.topology.cpus().len() == topology.cpus().len()
                    && m.topology.nodes().len() == topology.nodes().len() =>
            {
                Machine {
                    name: m.name.clone(),
                    topology: topology.clone(),
                    params: m.params.clone(),
                }
            }
            _ => Machine::generic("host", topology.clone()),
        };
        let constants = Constants::default();
        let page_migration_s = constants.page_migration_us.value * 1e-6;
        let mut solver = Solver::new(&machine, constants);
        // Placements are compared by gains of a percent or more: speeds
        // to a part in 10,000 are enough, from a warm start.
        solver.tolerance = 1e-4;
        solver.split_once = true;
        // Most solves start one move or swap away from a solved placement:
        // two whole steps take the moved threads most of the way (15.3
        // iterations a solve on average -> 11.3 in the `predict` bench).
        solver.full_steps = 2;
        let t = &machine.topology;
        Predictor {
            solver,
            llc_of_cpu: t.cpus().iter().map(|c| c.llc).collect(),
            llc_bytes: (0..t.llcs().len())
                .map(|l| t.llc_size(l).unwrap_or(0) as f64)
                .collect(),
            node_of_cpu: t.cpus().iter().map(|c| c.node).collect(),
            core_of_cpu: t.cpus().iter().map(|c| c.core).collect(),
            ghz: machine.params.ghz.value,
            llc_hit_ns: machine.params.llc_hit_ns.value,
            page_migration_s,
            nodes: t.nodes().len(),
            speeds: Vec::new(),
            writers: Writers::default(),
            migrate_bytes_per_s: (crate::engine::EngineConfig::default().migrate_mib_per_sec << 20)
                as f64,
            migration_shared: true,
        }
    }

    /// Takes in a round's sampled stores: called every round, whether or
    /// not the model is asked (a shared region shows only over rounds).
    pub fn observe(&mut self, s: &Snapshot) {
        self.writers.update(s);
    }

    /// How fast memory moves, bytes a second: the engine's rate limit
    /// (its default, 256 MiB/s, unless told), one budget for every move of
    /// a round (`shared`), or what the kernel's balancing moves of each
    /// process where it moves the memory instead.
    pub fn set_migration_rate(&mut self, bytes_per_s: f64, shared: bool) {
        self.migrate_bytes_per_s = bytes_per_s.max(1.0);
        self.migration_shared = shared;
    }

    /// Seconds one thread of `threads` stalls while `bytes` of their
    /// process's memory are copied to another node (M7's cost of a page's
    /// migration, shared by the threads).
    pub fn copy_stall_s(&self, bytes: f64, threads: usize) -> f64 {
        bytes / 4096.0 * self.page_migration_s / threads.max(1) as f64
    }

    /// The dense node of dense CPU `cpu`.
    pub fn node_of(&self, cpu: usize) -> usize {
        self.node_of_cpu[cpu]
    }

    /// Fits the running threads of the groups in `groups` (and, as load
    /// they cannot move, every other counted running thread).
    pub fn fit(
        &mut self,
        topology: &Topology,
        s: &Snapshot,
        movable: &dyn Fn(&numaplace_model::Task) -> bool,
    ) -> Option<Fit> {
        let secs = s.interval_ns as f64 / 1e9;
        if secs <= 0.0 {
            return None;
        }
        let mut fit = Fit::default();
        let mut lacking = Lacking::default();
        for g in &s.groups {
            let counted: Vec<_> = g
                .threads
                .iter()
                .filter_map(|&tid| Some((s.task(tid)?, s.counters.get(&tid)?)))
                .filter(|(_, c)| c.get(Counter::Instructions).is_some_and(|i| i > 0))
                .collect();
            if counted.is_empty() {
                continue;
            }
            let (group_pages, total) = shares_per_node(topology, g, self.nodes);
            lacking.memory |= total == 0;
            let threads = g.threads.len().max(1) as f64;
            let spread_like = spread_like_threads(topology, s, g, &group_pages);
            let shared = SharedWrites::of(s, &self.writers, g.pid, &g.threads);
            lacking.samples |= s.samples.is_empty();
            let gi = fit.groups.len();
            let mut any = false;
            for (x, c) in counted {
                let instr = c.get(Counter::Instructions).unwrap_or(0) as f64;
                // A thread that ran nine tenths of the round or more is
                // taken as busy: the model then splits its LLC once for
                // all its threads (`Solver::split_once`).
                let demand = c
                    .get(Counter::TaskClock)
                    .map(|t| t as f64 / 1e9 / secs)
                    .map_or(1.0, |d| if d >= 0.9 { 1.0 } else { d });
                if demand < MIN_DEMAND {
                    continue;
                }
                let Some(cpu) = x.last_cpu.and_then(|c| topology.cpu_by_os_id(c)) else {
                    continue;
                };
                let cpi = match c.get(Counter::Cycles) {
                    Some(cy) if cy > 0 => cy as f64 / instr,
                    _ => {
                        lacking.cycles = true;
                        // Cycles from the CPU time at the model's clock.
                        demand * secs * self.ghz * 1e9 / instr
                    }
                };
                let mu = c.get(Counter::LlcMisses).unwrap_or(0) as f64 / instr;
                let uncore = c
                    .get(Counter::UncoreRequests)
                    .or(c.get(Counter::LlcReferences))
                    .map(|r| r as f64 / instr);
                lacking.uncore |= uncore.is_none();
                let a = uncore.unwrap_or(mu).max(mu);
                let penalty = match (
                    c.get(Counter::UncoreOccupancy),
                    c.get(Counter::UncoreRequests),
                ) {
                    (Some(o), Some(r)) if r > 0 => Some(o as f64 / r as f64),
                    _ => {
                        lacking.penalty = true;
                        None
                    }
                };
                let bytes = total as f64 / threads;
                let pages = own_pages(topology, s, x.tid, cpu.node, spread_like, &group_pages);
                // Its shared writes per instruction, from the share of its
                // samples that are stores to pages another thread of its
                // process stores to: samples come from misses and from
                // shared lines in proportion to their rates (a cache-line
                // transfer is a miss of the writer), so that share `f`
                // gives transfers = f / (1 − f) × misses per instruction;
                // the model's writes are the transfers over the share of a
                // CPU the other sharers are running (M4).
                let f = shared.fraction(x.tid).min(0.99);
                let present = shared.others_running(s, x.tid, secs).clamp(0.05, 1.0);
                let writes = if f > 0.0 {
                    1000.0 * f / (1.0 - f) * mu.max(1e-6) / present
                } else {
                    0.0
                };
                let model = ThreadModel {
                    cpi_core: cpi,
                    uncore_pki: 1000.0 * a,
                    working_set: (bytes as u64).max(1 << 20),
                    pattern: Pattern::PowerLaw {
                        llc_mpki: 1000.0 * mu,
                        alpha: ALPHA,
                    },
                    mlp: MLP,
                    shared_writes_pki: writes,
                };
                fit.threads.push(ThreadFit {
                    task: x.id(),
                    pid: g.pid,
                    group: gi,
                    model,
                    demand,
                    cpu: cpu.id,
                    pages,
                    bytes,
                    ips: instr / secs,
                    movable: movable(x),
                    shared_bytes: if writes > 0.0 { shared.bytes } else { 0 },
                    stalled: c.get(Counter::LlcMisses).map(|_| 1.0),
                });
                fit.targets.push((mu, cpi, penalty));
                any = true;
            }
            if any {
                fit.groups.push(g.pid);
            }
        }
        if fit.threads.is_empty() {
            return None;
        }
        fit.lacking = lacking.said();
        self.calibrate(&mut fit);
        let cpus: Vec<usize> = fit.threads.iter().map(|t| t.cpu).collect();
        let speeds = self.solve(&fit, &cpus, None, &[]);
        fit.warm = speeds.iter().map(|s| s.ips).collect();
        let mut now = vec![0.0; fit.groups.len()];
        for (t, s) in fit.threads.iter().zip(&speeds) {
            now[t.group] += s.ips;
        }
        fit.now = now;
        Some(fit)
    }

    /// Solves the model for the fit's threads on `cpus`, with `pages` per
    /// thread (or the fit's own), each thread started from its speed in
    /// `warm` (empty: from its core's speed alone).
    fn solve(
        &mut self,
        fit: &Fit,
        cpus: &[usize],
        pages: Option<&[Vec<f64>]>,
        warm: &[f64],
    ) -> Vec<Speed> {
        // Threads on one CPU share it in proportion to what they ask.
        let mut asked: BTreeMap<usize, f64> = BTreeMap::new();
        for (t, &c) in fit.threads.iter().zip(cpus) {
            *asked.entry(c).or_default() += t.demand;
        }
        let runners: Vec<Runner<'_>> = fit
            .threads
            .iter()
            .zip(cpus)
            .enumerate()
            .map(|(i, (t, &cpu))| {
                let total = asked[&cpu];
                Runner {
                    cpu,
                    share: if total > 1.0 {
                        t.demand / total
                    } else {
                        t.demand
                    },
                    model: &t.model,
                    pages: match pages {
                        Some(p) => &p[i],
                        None => &t.pages,
                    },
                    group: t.group,
                    shared_bytes: t.shared_bytes,
                    shares: t.shared_bytes > 0,
                    prev_ips: warm.get(i).copied().unwrap_or(0.0),
                }
            })
            .collect();
        let mut out = std::mem::take(&mut self.speeds);
        self.solver
            .solve(&runners, &Background::default(), &mut out);
        let speeds = out.clone();
        self.speeds = out;
        speeds
    }

    /// Each group's predicted instructions per second with its threads on
    /// `cpus` and their pages per node `pages`.
    pub fn predict(&mut self, fit: &Fit, cpus: &[usize], pages: &[Vec<f64>]) -> Vec<f64> {
        self.predict_from(fit, cpus, pages, &fit.warm, &mut Vec::new())
    }

    /// [`Predictor::predict`], the model started from `warm` (per thread,
    /// its speed: the closer to the answer, the fewer iterations), each
    /// thread's speed left in `ips`.
    fn predict_from(
        &mut self,
        fit: &Fit,
        cpus: &[usize],
        pages: &[Vec<f64>],
        warm: &[f64],
        ips: &mut Vec<f64>,
    ) -> Vec<f64> {
        let speeds = self.solve(fit, cpus, Some(pages), warm);
        let mut per = vec![0.0; fit.groups.len()];
        ips.clear();
        for (t, s) in fit.threads.iter().zip(&speeds) {
            per[t.group] += s.ips;
            ips.push(s.ips);
        }
        per
    }

    /// The score of a placement: the mean over the groups of
    /// ln(predicted / now), and the same net of the memory it moves
    /// (seconds of page copies per thread over the group's horizon).
    pub fn score(
        &mut self,
        fit: &Fit,
        cpus: &[usize],
        memory: &[Memory],
        horizon_s: &[f64],
        pages: &mut Vec<Vec<f64>>,
    ) -> (f64, f64) {
        let mut warm = Warm::measured(fit);
        self.score_from(fit, cpus, memory, horizon_s, pages, &mut warm)
    }

    /// [`Predictor::score`], each solve started from `warm`'s speeds and
    /// leaving its own there.
    fn score_from(
        &mut self,
        fit: &Fit,
        cpus: &[usize],
        memory: &[Memory],
        horizon_s: &[f64],
        pages: &mut Vec<Vec<f64>>,
        warm: &mut Warm,
    ) -> (f64, f64) {
        pages.clear();
        let mut moved = vec![0.0; fit.groups.len()];
        let mut threads = vec![0usize; fit.groups.len()];
        for (t, &c) in fit.threads.iter().zip(cpus) {
            threads[t.group] += 1;
            let to = match memory[t.group] {
                Memory::Stay => None,
                Memory::To(n) => Some(n),
                Memory::Follow => Some(self.node_of_cpu[c]),
            };
            match to {
                Some(n) => {
                    let mut p = vec![0.0; self.nodes];
                    p[n] = 1.0;
                    moved[t.group] += t.bytes * (1.0 - t.pages[n]);
                    pages.push(p);
                }
                None => pages.push(t.pages.clone()),
            }
        }
        let start = std::mem::take(&mut warm.after);
        let per = self.predict_from(fit, cpus, pages, &start, &mut warm.after);
        // While memory moves (at the rate limit), the threads already run
        // where the placement puts them, their memory coming to them page
        // by page: from that state with all of it still where it was to
        // the placement's, linearly over the seconds the move takes.
        let moving = moved.iter().any(|&b| b > 0.0);
        let during = if moving {
            let old: Vec<Vec<f64>> = fit.threads.iter().map(|t| t.pages.clone()).collect();
            let start = std::mem::take(&mut warm.during);
            self.predict_from(fit, cpus, &old, &start, &mut warm.during)
        } else {
            Vec::new()
        };
        let (done, wait) = self.arrivals(&moved);
        let (mut gain, mut net) = (0.0, 0.0);
        for g in 0..fit.groups.len() {
            let now = fit.now[g].max(1.0);
            let r = (per[g].max(1.0) / now).ln();
            let h = horizon_s[g].max(1.0);
            let copy_s = moved[g] / 4096.0 * self.page_migration_s / threads[g].max(1) as f64;
            // Until its memory's turn the group runs placed with all of it
            // where it was; then it arrives linearly until done.
            let end = done[g].min(h);
            let waiting = wait[g].min(end);
            let arriving = end - waiting;
            let transition = if moving {
                (during[g].max(1.0) / now).ln()
            } else {
                0.0
            };
            gain += r;
            net += r * (h - end) / h
                + transition * waiting / h
                + (transition + r) / 2.0 * arriving / h
                - copy_s / h;
        }
        let n = fit.groups.len().max(1) as f64;
        (net / n, gain / n)
    }

    /// The best placement the search finds within `budget` evaluations,
    /// from the measured placement and from `starts` (per thread of the
    /// fit, a dense CPU). `horizon_s`:
    /// per group, the seconds it is expected to run on. `None` where the
    /// threads to place outnumber the CPUs (time-shared: not searched).
    pub fn search(
        &mut self,
        fit: &Fit,
        starts: &[Vec<usize>],
        allowed: &[bool],
        horizon_s: &[f64],
        budget: usize,
    ) -> Option<Layout> {
        let cpus_n = self.node_of_cpu.len();
        let fixed: Vec<usize> = (fit.threads.iter())
            .filter(|t| !t.movable)
            .map(|t| t.cpu)
            .collect();
        let movable: Vec<usize> = (0..fit.threads.len())
            .filter(|&i| fit.threads[i].movable)
            .collect();
        let free_cpus = (0..cpus_n)
            .filter(|&c| allowed[c] && !fixed.contains(&c))
            .count();
        if movable.is_empty() || movable.len() > free_cpus {
            return None;
        }
        let mut pages = Vec::new();
        let mut evaluations = 0usize;
        let mut best: Option<Layout> = None;
        let mut all_starts: Vec<Vec<usize>> = Vec::new();
        let now: Vec<usize> = fit.threads.iter().map(|t| t.cpu).collect();
        all_starts.push(self.one_per_cpu(fit, &now, allowed, false));
        for c in starts {
            all_starts.push(self.one_per_cpu(fit, c, allowed, false));
        }
        let share = (budget / all_starts.len()).max(1);
        for mut cpus in all_starts {
            let mut mem = vec![Memory::Stay; fit.groups.len()];
            self.memory_follows(fit, &cpus, &mut mem);
            // Every candidate differs from the accepted placement by a
            // move or a swap: its solve starts from the accepted one's
            // speeds, a few iterations from the answer.
            let mut warm = Warm::measured(fit);
            let mut trial = Warm::default();
            let mut score = self.score_from(fit, &cpus, &mem, horizon_s, &mut pages, &mut warm);
            evaluations += 1;
            let mut used = 1;
            // Hill climbing by first improvement: moves of a thread to a
            // free CPU of another node (its core idle first), swaps of two
            // threads of different nodes, a group's memory to the node
            // holding all its threads.
            'climb: loop {
                let mut improved = false;
                // A whole group onto one node (its threads on the node's
                // free CPUs, idle cores first): threads that share data
                // gain only once all of them are together, which no
                // single thread's move shows.
                for g in 0..fit.groups.len() {
                    for node in 0..self.nodes {
                        if used >= share {
                            break 'climb;
                        }
                        let Some(moved) = self.group_onto(fit, &cpus, g, node, allowed) else {
                            continue;
                        };
                        let mut m = mem.clone();
                        self.memory_follows(fit, &moved, &mut m);
                        trial.start_at(&warm);
                        let s = self.score_from(fit, &moved, &m, horizon_s, &mut pages, &mut trial);
                        used += 1;
                        evaluations += 1;
                        if s.0 > score.0 + 1e-4 {
                            score = s;
                            cpus = moved;
                            mem = m;
                            std::mem::swap(&mut warm, &mut trial);
                            improved = true;
                        }
                    }
                }
                for &i in &movable {
                    for target in self.targets(fit, &cpus, i, allowed) {
                        if used >= share {
                            break 'climb;
                        }
                        let old = cpus[i];
                        let swap = cpus.iter().position(|&c| c == target);
                        if let Some(j) = swap {
                            cpus[j] = old;
                        }
                        cpus[i] = target;
                        let mem_before = mem.clone();
                        self.memory_follows(fit, &cpus, &mut mem);
                        trial.start_at(&warm);
                        let s =
                            self.score_from(fit, &cpus, &mem, horizon_s, &mut pages, &mut trial);
                        used += 1;
                        evaluations += 1;
                        if s.0 > score.0 + 1e-4 {
                            score = s;
                            std::mem::swap(&mut warm, &mut trial);
                            improved = true;
                        } else {
                            cpus[i] = old;
                            if let Some(j) = swap {
                                cpus[j] = target;
                            }
                            mem = mem_before;
                        }
                    }
                }
                if !improved {
                    break;
                }
            }
            if best.as_ref().is_none_or(|b| score.0 > b.score) {
                best = Some(Layout {
                    cpus: cpus.clone(),
                    memory: mem.clone(),
                    score: score.0,
                    gain: score.1,
                    evaluations: 0,
                });
            }
        }
        best.map(|mut b| {
            b.evaluations = evaluations;
            b
        })
    }
}

/// The inputs a fit lacked for some thread or group, said in
/// [`Fit::lacking`].
#[derive(Debug, Default)]
struct Lacking {
    cycles: bool,
    uncore: bool,
    penalty: bool,
    memory: bool,
    samples: bool,
}

impl Lacking {
    /// What was lacked and what was assumed instead, in words.
    fn said(&self) -> Vec<&'static str> {
        [
            (
                self.cycles,
                "cycles (CPI taken from CPU time at the model's clock)",
            ),
            (
                self.uncore,
                "uncore requests and LLC references (taken as the LLC misses)",
            ),
            (
                self.penalty,
                "the uncore penalty (memory-level parallelism assumed 2)",
            ),
            (
                self.memory,
                "memory per node of some processes (working set assumed 1 MiB)",
            ),
            (
                self.samples,
                "sampled data addresses (writes to shared data not seen: no coherence predicted)",
            ),
        ]
        .into_iter()
        .filter_map(|(lacked, what)| lacked.then_some(what))
        .collect()
    }
}

/// Group `g`'s memory as shares per node (dense ids, `nodes` of them),
/// and its bytes in all (0 when not known).
fn shares_per_node(
    topology: &Topology,
    g: &numaplace_model::TaskGroup,
    nodes: usize,
) -> (Vec<f64>, u64) {
    let memory = g.memory_total();
    let total: u64 = memory.iter().flat_map(|m| m.values()).sum();
    let mut shares = vec![0.0; nodes];
    if let Some(m) = &memory {
        for (&os, &b) in m {
            if let Some(n) = topology.node_by_os_id(os) {
                shares[n.id] += b as f64 / total.max(1) as f64;
            }
        }
    }
    (shares, total)
}
