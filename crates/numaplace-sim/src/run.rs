//! Running policies in the simulator: one run (`numaplace simulate`);
//! every policy over the same seeds (`numaplace compare`) is
//! [`crate::compare`].
//!
//! The loop is the daemon's: each policy interval the world gives a
//! snapshot, the [`Engine`] asks the policy and carries the plan out on the
//! world, with the same scope, hands-off and rate-limit rules as on a live
//! host.

use std::time::Duration;

use std::convert::Infallible;

use numaplace_model::world::{Actuator, AffinityError, Telemetry};
use numaplace_model::{Action, CpuSet, Outcome, Snapshot, TaskId};
use numaplace_policy::engine::{Engine, EngineConfig, JournalEntry, NoGuard, Observer};
use numaplace_policy::{PolicyKind, Scope};

use crate::bloom::SignatureConfig;
use crate::machine::Machine;
use crate::model::Constants;
use crate::outcome::{PolicySummary, RunResult};
use crate::workload::Workload;
use crate::world::World;
use crate::world::pages::PageSetConfig;

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The seed of the simulated Linux's random choices.
    pub seed: u64,
    /// Time between policy rounds; the policy's own default if `None`.
    pub interval: Option<Duration>,
    /// Keep a trace for plots.
    pub trace: bool,
    /// numaplace's migration rate limit, MiB/s.
    pub migrate_mib_per_sec: u64,
    /// The model's constants.
    pub constants: Constants,
    /// Keep \[Symbiosis-Bloom\]'s cache signatures, fed with this many sampled
    /// accesses per LLC and step.
    pub signatures: Option<(SignatureConfig, usize)>,
    /// Data addresses sampled per thread and policy round.
    pub samples_per_interval: usize,
    /// \[Bae12\]'s per-thread page sets in every snapshot; always on for
    /// `adaptive-mapping`, which reads them.
    pub page_sets: Option<PageSetConfig>,
    /// The kernel's automatic NUMA balancing on or off whatever the
    /// scenario says (`autonuma` always runs with it on).
    pub numa_balancing: Option<bool>,
    /// Who moves memory while the simulated kernel balances (the daemon's
    /// `[engine] memory_mover`; its default, `where-kernel-cannot`).
    pub memory_mover: numaplace_policy::engine::MemoryMover,
    /// Whether a policy may turn the simulated kernel's balancing on or
    /// off during the run (the daemon's `[engine] manage_kernel_balancing`;
    /// `auto` tries the other setting as an experiment).
    pub manage_kernel_balancing: bool,
    /// The world differs from the machine the policy is told (issue 31,
    /// item 3): each machine parameter of the world drawn within ± this
    /// many percent of it ([`Machine::perturbed`]), from the run's seed
    /// ([`world_seed`]). `None`: the scenario's `mismatch_percent`, if
    /// any; `Some(0.0)`: the world is the machine.
    pub mismatch: Option<f64>,
    /// A run without a policy (the oracle's candidates) stops as soon as
    /// its mean application run time can no longer be below this
    /// ([`World::mean_runtime_lower_bound`]); it then ends unfinished, so
    /// its mean is `None`. The oracle's search needs only know a
    /// candidate is no better than the best it has.
    pub stop_at_or_above: Option<f64>,
}

/// The seed of the world a run of seed `seed` draws under a mismatch: one
/// world per run seed, not the stream the simulated Linux draws from.
pub fn world_seed(seed: u64) -> u64 {
    let mut x = seed ^ 0x6d69_736d_6174_6368; // "mismatch"
    numaplace_model::rng::splitmix64(&mut x)
}

/// The mismatch a run has: `opts`' or else the scenario's; `None` or 0
/// for none.
pub fn mismatch(workload: &Workload, opts: &RunOptions) -> Option<f64> {
    opts.mismatch
        .or(workload.mismatch_percent)
        .filter(|&p| p > 0.0)
}

/// The machine a run's world has: `machine` itself, or under a mismatch
/// the one drawn for the run's seed.
pub fn world_machine(machine: &Machine, workload: &Workload, opts: &RunOptions) -> Machine {
    match mismatch(workload, opts) {
        Some(p) => machine.perturbed(p, world_seed(opts.seed)),
        None => machine.clone(),
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: 0,
            interval: None,
            trace: false,
            migrate_mib_per_sec: EngineConfig::default().migrate_mib_per_sec,
            constants: Constants::default(),
            signatures: None,
            samples_per_interval: 32,
            page_sets: None,
            numa_balancing: None,
            memory_mover: numaplace_policy::engine::MemoryMover::default(),
            manage_kernel_balancing: true,
            mismatch: None,
            stop_at_or_above: None,
        }
    }
}

/// Whether a run of `policy` (a name) has the kernel's automatic NUMA
/// balancing. The two yardsticks are fixed: `default` is the papers' Linux
/// (off), `autonuma` the distributions' (on); every other policy runs on
/// the kernel `opts` or else the scenario's `[linux]` table asks for.
pub fn numa_balancing(policy: &str, workload: &Workload, opts: &RunOptions) -> bool {
    match policy {
        // The oracle is a static placement: nothing moves it.
        "default" | "oracle" => false,
        "autonuma" => true,
        _ => opts.numa_balancing.unwrap_or(workload.linux.numa_balancing),
    }
}

/// What a run is driven by: a policy through the engine, or a fixed
/// binding at launch (the oracle's placement).
pub enum Driver<'a> {
    /// A policy of the registry, through the engine.
    Policy(&'a PolicyKind),
    /// Each thread bound at launch to its CPUs, never moved.
    Binding {
        /// The name the results carry (`oracle`).
        name: &'a str,
        /// Per application, per thread: the dense CPU ids it may run on.
        cpus: Vec<Vec<usize>>,
    },
    /// No policy and no binding: the simulated Linux places the threads,
    /// each within its application's `cpus` (the oracle's CPU-set
    /// placements).
    Confined {
        /// The name the results carry.
        name: &'a str,
    },
    /// A policy built by the caller (who may keep a handle on its
    /// reports), run through the engine like `Policy`.
    Built {
        /// The name the results carry.
        name: &'a str,
        /// The policy.
        policy: Box<dyn numaplace_policy::Policy>,
    },
}

/// Runs one scenario once. `journal` sees every action the policy took.
///
/// The policy is told `machine`; the world runs on
/// [`world_machine`]'s, which differs from it under a mismatch.
pub fn run(
    machine: &Machine,
    workload: &Workload,
    driver: Driver<'_>,
    opts: &RunOptions,
    journal: &mut dyn FnMut(&JournalEntry),
) -> RunResult {
    let named = match &driver {
        Driver::Policy(kind) => kind.name(),
        Driver::Binding { name, .. } | Driver::Built { name, .. } | Driver::Confined { name } => {
            name
        }
    };
    let mut kernel = workload.clone();
    kernel.linux.numa_balancing = numa_balancing(named, workload, opts);
    let balancing = kernel.linux.numa_balancing;
    let truth = world_machine(machine, workload, opts);
    let mut world = World::with_constants(truth, kernel, opts.seed, opts.constants.clone());
    if opts.trace {
        world.enable_trace();
    }
    world.set_samples_per_interval(opts.samples_per_interval);
    let driver = match driver {
        Driver::Policy(kind) => Driver::Built {
            name: kind.name(),
            policy: kind.build(),
        },
        d => d,
    };
    let wants_pages = match &driver {
        Driver::Built { policy, .. } => policy.needs().page_sets,
        Driver::Policy(_) | Driver::Binding { .. } | Driver::Confined { .. } => false,
    };
    if let Some(cfg) = opts.page_sets.or(wants_pages.then(PageSetConfig::default)) {
        world.enable_page_sets(cfg);
    }
    let mut warnings = Vec::new();
    if let Some((config, accesses)) = &opts.signatures {
        if let Err(e) = world.enable_signatures(config.clone(), *accesses) {
            warnings.push(format!("no cache signatures: {e}"));
        }
    }
    let built = |mut policy: Box<dyn numaplace_policy::Policy>| {
        policy.told(machine);
        let interval = opts.interval.unwrap_or_else(|| policy.default_interval());
        let engine = Engine::new(
            policy,
            Scope {
                all: true,
                ..Scope::default()
            },
            EngineConfig {
                migrate_mib_per_sec: opts.migrate_mib_per_sec,
                page_size: crate::world::PAGE as u64,
                // As on a live host: while the simulated kernel balances,
                // the memory mover decides whose memory numaplace moves.
                memory_mover: opts.memory_mover,
                kernel_balancing: balancing,
                manage_kernel_balancing: opts.manage_kernel_balancing,
            },
        );
        (engine, interval.as_secs_f64())
    };
    let (name, engine) = match driver {
        Driver::Built { name, policy } => (name.to_string(), Some(built(policy))),
        Driver::Policy(kind) => (kind.name().to_string(), Some(built(kind.build()))),
        Driver::Binding { name, cpus } => {
            world.bind(cpus);
            (name.to_string(), None)
        }
        Driver::Confined { name } => (name.to_string(), None),
    };
    let step = workload.step_ms / 1000.0;
    let mut sim = Simulation {
        world: &mut world,
        interval: f64::INFINITY,
        max_seconds: workload.max_seconds,
        next_round: 0.0,
        in_round: false,
        stop_at_or_above: opts.stop_at_or_above,
    };
    match engine {
        Some((mut engine, interval)) => {
            sim.interval = interval.max(step);
            let Ok(_rounds) = engine.run(
                &machine.topology,
                &mut sim,
                &mut NoGuard,
                &mut Journal(journal),
            );
        }
        None => sim.run_without_policy(),
    }
    let totals = world.totals().clone();
    let makespan = world.time();
    let finished = world.finished();
    let energy = machine.params.power.as_ref().map(|_| totals.energy_j);
    RunResult {
        scenario: workload.name.clone(),
        machine: machine.name.clone(),
        policy: name,
        seed: opts.seed,
        makespan_s: makespan,
        finished,
        runs: world.app_runs(),
        thread_migrations: totals.thread_migrations,
        node_migrations: totals.node_migrations,
        pages_migrated: totals.pages_migrated,
        numa_balancing: balancing,
        numa_balancing_end: world.balancing_on(),
        numa_balancing_changes: totals.numa_balancing_changes,
        hinting_faults: totals.hinting_faults,
        numa_task_moves: totals.numa_task_moves,
        uncore_penalty_cycles: totals.uncore_occupancy / totals.uncore_requests.max(1.0),
        llc_mpki: 1000.0 * totals.llc_misses / totals.instructions.max(1.0),
        energy_j: energy,
        mean_power_w: energy.map(|e| e / makespan.max(1e-9)),
        trace: world.take_trace(),
        warnings,
    }
}

/// The simulator as a world of the engine's loop: a round is due every
/// `interval` of simulated time; [`Telemetry::next_snapshot`] runs the
/// model up to it, and the world ends when every application has finished
/// or the scenario's time is up.
struct Simulation<'w> {
    world: &'w mut World,
    /// Simulated seconds between rounds (at least one step).
    interval: f64,
    max_seconds: f64,
    next_round: f64,
    /// A snapshot was handed out and the round on it ran since.
    in_round: bool,
    /// [`RunOptions::stop_at_or_above`], for runs without a policy.
    stop_at_or_above: Option<f64>,
}

impl Simulation<'_> {
    fn ended(&self) -> bool {
        self.world.finished() || self.world.time() >= self.max_seconds
    }

    /// The model alone, to the end (a binding fixed at launch, no policy).
    fn run_without_policy(&mut self) {
        self.world.start_due();
        while !self.ended() {
            if self
                .stop_at_or_above
                .is_some_and(|b| self.world.mean_runtime_lower_bound() >= b)
            {
                break;
            }
            self.world.advance();
            self.world.start_due();
        }
    }
}

impl Telemetry for Simulation<'_> {
    type Error = Infallible;

    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, Infallible> {
        loop {
            if std::mem::take(&mut self.in_round) {
                if self.ended() {
                    return Ok(None);
                }
                self.world.advance();
            }
            self.world.start_due();
            if self.world.time() + 1e-9 >= self.next_round {
                self.next_round += self.interval;
                self.in_round = true;
                return Ok(Some(self.world.snapshot()));
            }
            if self.ended() {
                return Ok(None);
            }
            self.world.advance();
        }
    }
}

impl Actuator for Simulation<'_> {
    fn apply(&mut self, action: &Action) -> Outcome {
        self.world.apply(action)
    }

    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError> {
        self.world.affinity(task, tgid)
    }
}

/// The journal of a simulated run: every entry to the caller's function.
struct Journal<'j>(&'j mut dyn FnMut(&JournalEntry));

impl Observer for Journal<'_> {
    fn entry(&mut self, _: &Snapshot, e: &JournalEntry) {
        (self.0)(e);
    }
}

/// Mean, and relative standard deviation in percent.
pub fn mean_rsd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, 100.0 * var.sqrt() / mean)
}

/// A run's score: its mean application run time, or its makespan where no
/// application finished, seconds.
pub fn score(r: &RunResult) -> f64 {
    r.mean_runtime_s().unwrap_or(r.makespan_s)
}

/// Summarises one policy's runs over seeds.
pub fn summarise(policy: &str, runs: &[RunResult]) -> PolicySummary {
    let scores: Vec<f64> = runs.iter().map(score).collect();
    let (mean, rsd) = mean_rsd(&scores);
    let hours: Vec<f64> = runs
        .iter()
        .map(|r| r.per_hour(r.thread_migrations))
        .collect();
    let pages: Vec<f64> = runs.iter().map(|r| r.per_hour(r.pages_migrated)).collect();
    let energy: Option<Vec<f64>> = runs.iter().map(|r| r.energy_j).collect();
    let power: Option<Vec<f64>> = runs.iter().map(|r| r.mean_power_w).collect();
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    PolicySummary {
        policy: policy.to_string(),
        numa_balancing: runs.iter().any(|r| r.numa_balancing),
        numa_balancing_changed_runs: runs.iter().filter(|r| r.numa_balancing_changes > 0).count()
            as u32,
        numa_balancing_on_at_end_runs: runs
            .iter()
            .filter(|r| r.numa_balancing_changes > 0 && r.numa_balancing_end)
            .count() as u32,
        mean_runtime_s: mean,
        worst_runtime_s: scores.iter().copied().fold(f64::MIN, f64::max),
        rsd_percent: rsd,
        vs_default_percent: None,
        vs_oracle_percent: None,
        thread_migrations_per_hour: avg(&hours),
        pages_migrated_per_hour: avg(&pages),
        energy_j: energy.map(|e| avg(&e)),
        mean_power_w: power.map(|p| avg(&p)),
        unfinished: runs.iter().filter(|r| !r.finished).count() as u32,
        per_app: crate::outcome::per_app(runs),
    }
}

/// Runs `jobs` on up to `workers` threads, results in job order.
pub fn parallel<T: Send, R: Send>(
    jobs: Vec<T>,
    workers: usize,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let n = jobs.len();
    let queue = std::sync::Mutex::new(jobs.into_iter().enumerate().collect::<Vec<_>>());
    let results = std::sync::Mutex::new((0..n).map(|_| None).collect::<Vec<Option<R>>>());
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, n.max(1)) {
            s.spawn(|| {
                loop {
                    let job = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some((i, job)) = job else { break };
                    let r = f(job);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While the simulated kernel balances, a policy's memory moves go as
    /// the memory mover says, as on a live host: with the default
    /// (`where-kernel-cannot`) the first-touch memory of the default
    /// scenario is left to the kernel and journalled so; with `numaplace`
    /// it is moved; with the kernel's balancing off the mover changes
    /// nothing.
    #[test]
    fn the_memory_mover_decides_under_a_balancing_kernel() {
        use numaplace_policy::engine::MemoryMover;
        let w = crate::scenario::builtin("default").unwrap().unwrap();
        let m = Machine::preset(&w.machine).unwrap();
        let kind = PolicyKind::from_name("numad-like").unwrap();
        let moves = |balancing: bool, mover: MemoryMover| {
            let (mut left, mut done) = (0, 0);
            let opts = RunOptions {
                numa_balancing: Some(balancing),
                memory_mover: mover,
                ..RunOptions::default()
            };
            let r = run(&m, &w, Driver::Policy(&kind), &opts, &mut |e| {
                if matches!(
                    e.action,
                    Action::MoveMemory { .. } | Action::MoveWindow { .. }
                ) {
                    match &e.outcome {
                        Outcome::Skipped { why } if why.contains("left to the kernel") => left += 1,
                        Outcome::Pages(_) => done += 1,
                        _ => {}
                    }
                }
            });
            assert_eq!(r.numa_balancing, balancing);
            (left, done)
        };
        let (left, done) = moves(true, MemoryMover::WhereKernelCannot);
        assert!(left > 0 && done == 0, "left {left}, done {done}");
        let (left, done) = moves(true, MemoryMover::Numaplace);
        assert!(left == 0 && done > 0, "left {left}, done {done}");
        let (left, done) = moves(false, MemoryMover::WhereKernelCannot);
        assert!(left == 0 && done > 0, "left {left}, done {done}");
    }

    /// Records the machine it is told; decides nothing.
    struct Listener(std::sync::Arc<std::sync::Mutex<Option<Machine>>>);

    impl numaplace_policy::Policy for Listener {
        fn name(&self) -> &'static str {
            "listener"
        }
        fn told(&mut self, machine: &Machine) {
            *self.0.lock().unwrap() = Some(machine.clone());
        }
        fn decide(&mut self, _: &numaplace_policy::View<'_>) -> numaplace_model::Plan {
            numaplace_model::Plan::default()
        }
    }

    /// Under a mismatch the world runs on a machine drawn per seed, the
    /// policy is told the nominal one; 0 % and no mismatch are the same
    /// run; the scenario's key is used unless the options say otherwise.
    #[test]
    fn a_mismatched_world_differs_from_what_the_policy_is_told() {
        let w = crate::scenario::builtin("default").unwrap().unwrap();
        let m = Machine::preset(&w.machine).unwrap();
        let told = std::sync::Arc::new(std::sync::Mutex::new(None));
        let mean = |w: &Workload, mismatch: Option<f64>, seed: u64| {
            let opts = RunOptions {
                seed,
                mismatch,
                ..RunOptions::default()
            };
            let policy = Box::new(Listener(told.clone()));
            let r = run(
                &m,
                w,
                Driver::Built {
                    name: "listener",
                    policy,
                },
                &opts,
                &mut |_| {},
            );
            assert_eq!(r.machine, m.name);
            r.mean_runtime_s().unwrap()
        };
        let nominal = mean(&w, None, 0);
        assert_eq!(told.lock().unwrap().as_ref().unwrap().params, m.params);
        let drawn = mean(&w, Some(25.0), 0);
        assert_eq!(
            told.lock().unwrap().as_ref().unwrap().params,
            m.params,
            "told the nominal machine"
        );
        assert!((drawn / nominal - 1.0).abs() > 1e-3, "{drawn} vs {nominal}");
        assert_eq!(mean(&w, Some(25.0), 0), drawn, "the same world for a seed");
        assert_ne!(
            mean(&w, Some(25.0), 1),
            mean(&w, None, 1),
            "a world per seed"
        );
        assert_eq!(mean(&w, Some(0.0), 0), nominal);
        let keyed = Workload {
            mismatch_percent: Some(25.0),
            ..w.clone()
        };
        assert_eq!(mean(&keyed, None, 0), drawn, "the scenario's key");
        assert_eq!(
            mean(&keyed, Some(0.0), 0),
            nominal,
            "the options override it"
        );
        let world = world_machine(
            &m,
            &w,
            &RunOptions {
                mismatch: Some(25.0),
                ..RunOptions::default()
            },
        );
        assert_eq!(world.params, m.perturbed(25.0, world_seed(0)).params);
    }
}
