//! The simulated world the policies act on: applications starting,
//! running and restarting on a machine, a NUMA-agnostic Linux placing what
//! no one pinned, pages allocated on first touch, and the same
//! same [`Actuator`] face the live host has; `crate::run::Simulation`
//! is its [`numaplace_model::world::Telemetry`], a round every policy
//! interval of simulated time.
//!
//! The simulated Linux (docs/simulator.md, "The simulated Linux"): a new
//! thread goes to an idle CPU of its allowed set, idle cores first, chosen
//! at random (seeded); every balance interval an overloaded CPU hands a
//! thread to an idle one, and an unpinned thread moves to another idle CPU
//! with a small probability (the balancer's NUMA-agnostic noise); memory
//! is placed as the scenario says, by default on the node of the CPU that
//! first touches it; automatic NUMA balancing, when on, moves pages toward
//! the threads that touch them and threads toward their memory
//! (`autonuma.rs`).

use std::collections::BTreeMap;

use numaplace_model::world::{Actuator, AffinityError};
use numaplace_model::{
    Action, Counter, CounterDeltas, CpuSet, EnergyDelta, GroupKind, MachineReadings, NodeMeminfo,
    NodeMemory, Outcome, PageCounts, Snapshot, Task, TaskGroup, TaskId,
};

use crate::machine::Machine;
use crate::model::{Background, Constants, Runner, Solver, Speed};
use crate::outcome::{AppRun, MemoryTrace, ThreadTrace, Trace};
use crate::rng::Rng;
use crate::workload::{AppKind, AppSpec, MemoryPlacement, ThreadModel, Workload};

/// Bytes per page.
pub const PAGE: f64 = 4096.0;
/// Where the simulated processes' memory sits in their address space: the
/// shared area first, then one private region per thread.
pub const SHARED_BASE: u64 = 0x1000_0000;
/// Where the threads' private regions start.
pub const PRIVATE_BASE: u64 = 0x1_0000_0000;
/// The distance between two threads' private regions.
pub const PRIVATE_STRIDE: u64 = 0x100_0000_0000;
/// The `comm` a simulated process of this application carries (the
/// kernel keeps 15 bytes).
pub fn comm(app: &str) -> String {
    app.chars().take(15).collect()
}

/// Clock ticks per second of the simulated `utime` / start times.
const TICKS: f64 = 100.0;
/// The Unix time the simulated clock starts at (fixed, for determinism).
const EPOCH_NS: u64 = 1_700_000_000_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AppStatus {
    Waiting,
    Running,
    Done,
}

#[derive(Debug)]
struct AppState {
    status: AppStatus,
    run: u32,
    pid: i32,
    start_ticks: u64,
    started_at: f64,
    threads: Vec<usize>,
    /// Pages of the shared area per node.
    shared_pages: Vec<f64>,
    allocated: bool,
    /// The application's cpuset (dense ids): its cgroup's.
    cpuset: CpuSet,
    /// Automatic NUMA balancing's scanner of this run's process.
    scan: autonuma::Scan,
}

#[derive(Debug, Clone, Default)]
struct Acc {
    instructions: f64,
    cycles: f64,
    llc_refs: f64,
    llc_misses: f64,
    uncore_requests: f64,
    uncore_occupancy: f64,
    run_ns: f64,
    migrations: u64,
}

#[derive(Debug)]
struct ThreadState {
    app: usize,
    index: u32,
    tid: i32,
    start_ticks: u64,
    alive: bool,
    done: bool,
    phase: usize,
    /// Instructions done in the current phase.
    phase_done: f64,
    /// Instructions done in this run.
    run_done: f64,
    cpu: Option<usize>,
    /// Affinity (dense CPU ids).
    allowed: CpuSet,
    /// Private pages per node.
    pages: Vec<f64>,
    allocated: bool,
    /// Time it still has to wait before running on (migration costs), ns.
    stall_ns: f64,
    prev_ips: f64,
    last_speed: Speed,
    acc: Acc,
    /// Moves to another node (memory domain) in this run; unlike `acc`,
    /// not reset by telemetry.
    node_migrations: u64,
    cpu_seconds: f64,
    finished_at: Option<f64>,
    /// Automatic NUMA balancing's fault statistics.
    numa: autonuma::TaskFaults,
    /// At its job's barrier (`Barrier::Phase`): it finished the
    /// instructions of phase `phase` and spins until every rank has.
    waiting: bool,
    /// When it reached the barrier, simulated seconds.
    arrived_at: f64,
}

impl ThreadState {
    /// What it runs now: its phase's model (of `spec`, its application),
    /// or `spin`, MPI's progress loop, while it waits at its job's
    /// barrier.
    fn model<'a>(&self, spec: &'a AppSpec, spin: &'a ThreadModel) -> &'a ThreadModel {
        if self.waiting {
            spin
        } else {
            &spec.phases[self.phase].model
        }
    }
}

/// Statistics over the whole run.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Threads moved between CPUs.
    pub thread_migrations: u64,
    /// Of those, moves to another node.
    pub node_migrations: u64,
    /// Pages moved between nodes.
    pub pages_migrated: u64,
    /// Automatic NUMA balancing: hinting faults taken, threads it moved
    /// toward their memory (a swap counts once).
    pub hinting_faults: u64,
    /// ... of the hinting faults, those on a page of the faulting thread's
    /// node; the pages balancing moved (of `pages_migrated`).
    pub hinting_faults_local: u64,
    /// See `hinting_faults_local`.
    pub balancing_pages_migrated: u64,
    /// Threads the kernel's NUMA balancing moved to another node.
    pub numa_task_moves: u64,
    /// Times a policy turned the kernel's automatic NUMA balancing on or
    /// off.
    pub numa_balancing_changes: u64,
    /// Energy, joules, from the machine's power model.
    pub energy_j: f64,
    /// Over all threads: instructions, LLC misses, uncore requests and
    /// the cycles they were outstanding (\[Rao13\] §3.1's t').
    pub instructions: f64,
    /// See `instructions`.
    pub llc_misses: f64,
    /// See `instructions`.
    pub uncore_requests: f64,
    /// See `instructions`.
    pub uncore_occupancy: f64,
}

/// A simulated machine running a workload.
pub struct World {
    machine: Machine,
    workload: Workload,
    solver: Solver,
    rng: Rng,
    time: f64,
    step: f64,
    apps: Vec<AppState>,
    threads: Vec<ThreadState>,
    next_pid: i32,
    runs: Vec<AppRun>,
    seq: u64,
    last_snapshot: f64,
    /// `totals.energy_j` at the last snapshot (snapshots carry energy per
    /// interval, as RAPL deltas are).
    energy_at_snapshot_j: f64,
    next_balance: f64,
    /// Launch-time bindings: per application, per thread, a dense CPU.
    binding: Option<Vec<Vec<usize>>>,
    totals: Totals,
    background: Background,
    trace: Option<Trace>,
    speeds: Vec<Speed>,
    all_cpus: CpuSet,
    seed: u64,
    signatures: Option<sampling::SignatureModel>,
    sample_rng: Rng,
    samples_per_interval: usize,
    /// \[Bae12\]'s per-thread page sets, when asked for (`pages.rs`).
    page_sets: Option<pages::PageSetConfig>,
    page_rng: Rng,
    /// What a rank waiting at a barrier runs (`ThreadModel::spin`).
    spin: ThreadModel,
    /// Allocations, page faults and migrations since the last snapshot
    /// (`memory_events.rs`).
    events: memory_events::MemoryEvents,
    /// The jobs whose ranks meet at barriers: per job, its applications
    /// (the ranks), in order.
    barrier_jobs: Vec<Vec<usize>>,
}

impl World {
    /// The world of `workload` on `machine`, with `seed`'s random choices,
    /// at time 0.
    pub fn new(machine: Machine, workload: Workload, seed: u64) -> World {
        World::with_constants(machine, workload, seed, Constants::default())
    }

    /// A world whose model uses `constants` (to switch mechanisms off, or
    /// try other values).
    pub fn with_constants(
        machine: Machine,
        workload: Workload,
        seed: u64,
        constants: Constants,
    ) -> World {
        let spin = ThreadModel::spin(constants.spin_cpi.value);
        let solver = Solver::new(&machine, constants);
        let nodes = machine.topology.nodes().len();
        let all_cpus: CpuSet = (0..machine.topology.cpus().len() as u32).collect();
        let apps = workload
            .apps
            .iter()
            .map(|a| AppState {
                status: AppStatus::Waiting,
                run: 0,
                pid: 0,
                start_ticks: 0,
                started_at: 0.0,
                threads: Vec::new(),
                shared_pages: vec![0.0; nodes],
                allocated: false,
                cpuset: a.cpus.clone().unwrap_or_else(|| all_cpus.clone()),
                scan: autonuma::Scan::new(0.0, nodes, workload.linux.numa_balancing_scan_delay_ms),
            })
            .collect();
        let packages = machine.topology.packages().len();
        let barrier_jobs = barrier::jobs(&workload);
        World {
            step: workload.step_ms / 1000.0,
            background: Background {
                node_bytes_per_s: vec![0.0; nodes],
                link_bytes_per_s: vec![0.0; packages * packages],
            },
            solver,
            rng: Rng::new(seed),
            time: 0.0,
            apps,
            threads: Vec::new(),
            next_pid: 1000,
            runs: Vec::new(),
            seq: 0,
            last_snapshot: 0.0,
            energy_at_snapshot_j: 0.0,
            next_balance: 0.0,
            binding: None,
            totals: Totals::default(),
            trace: None,
            speeds: Vec::new(),
            all_cpus,
            seed,
            signatures: None,
            sample_rng: Rng::new(seed ^ 0xa5a5_a5a5),
            samples_per_interval: 32,
            page_sets: None,
            page_rng: Rng::new(seed ^ 0x9a9e_5e75),
            spin,
            events: memory_events::MemoryEvents::new(nodes),
            barrier_jobs,
            machine,
            workload,
        }
    }

    /// Bind every thread at launch (like `taskset`): `cpus[app][thread]`
    /// is a dense CPU id. The oracle's placements run this way.
    pub fn bind(&mut self, cpus: Vec<Vec<usize>>) {
        self.binding = Some(cpus);
    }

    /// Data addresses sampled per thread and snapshot (0: none).
    pub fn set_samples_per_interval(&mut self, n: usize) {
        self.samples_per_interval = n;
    }

    /// Keep a trace for the plots.
    pub fn enable_trace(&mut self) {
        self.trace = Some(Trace {
            nodes: self.machine.topology.nodes().len(),
            cpus: self.machine.topology.cpus().len(),
            ..Trace::default()
        });
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The simulated time now, seconds.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// The counts so far.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Whether every application ran all its runs.
    pub fn finished(&self) -> bool {
        self.apps.iter().all(|a| a.status == AppStatus::Done)
    }

    /// Node migrations of these threads so far.
    fn node_migrations_of(&self, threads: &[usize]) -> u64 {
        threads
            .iter()
            .map(|&t| self.threads[t].node_migrations)
            .sum()
    }

    /// The application runs so far (finished or not).
    pub fn app_runs(&self) -> Vec<AppRun> {
        let mut v = self.runs.clone();
        for (ai, a) in self.apps.iter().enumerate() {
            if a.status == AppStatus::Running {
                v.push(AppRun {
                    app: self.workload.apps[ai].name.clone(),
                    run: a.run,
                    start_s: a.started_at,
                    end_s: None,
                    thread_s: a
                        .threads
                        .iter()
                        .map(|&t| self.threads[t].finished_at.map(|f| f - a.started_at))
                        .collect(),
                    node_migrations: self.node_migrations_of(&a.threads),
                });
            }
        }
        v
    }

    /// A lower bound on the mean application run time the run will end
    /// with (`RunResult::mean_runtime_s`, which needs every run to
    /// finish): finished runs count their time, running ones the time so
    /// far, runs still to come nothing.
    pub fn mean_runtime_lower_bound(&self) -> f64 {
        let total: f64 = self.workload.apps.iter().map(|a| f64::from(a.runs)).sum();
        let done: f64 = self.runs.iter().filter_map(AppRun::runtime_s).sum();
        let running: f64 = (self.apps.iter())
            .filter(|a| a.status == AppStatus::Running)
            .map(|a| self.time - a.started_at)
            .sum();
        (done + running) / total.max(1.0)
    }

    /// The trace recorded so far, taken out (`None` where none was asked for).
    pub fn take_trace(&mut self) -> Option<Trace> {
        self.trace.take()
    }

    /// Starts the applications whose time has come; the simulated Linux
    /// places their threads. Call before a policy round and before
    /// [`World::advance`].
    pub fn start_due(&mut self) {
        for ai in 0..self.apps.len() {
            if self.apps[ai].status == AppStatus::Waiting
                && self.time + 1e-12 >= self.workload.apps[ai].start_s
            {
                self.launch(ai);
            }
        }
    }

    fn launch(&mut self, ai: usize) {
        let spec = &self.workload.apps[ai];
        let nthreads = spec.threads as usize;
        let nodes = self.machine.topology.nodes().len();
        let pid = self.next_pid;
        self.next_pid += nthreads as i32 + 1;
        let start_ticks = (self.time * TICKS) as u64;
        let cpuset = self.apps[ai].cpuset.clone();
        let mut ids = Vec::with_capacity(nthreads);
        for k in 0..nthreads {
            let allowed = match &self.binding {
                Some(b) => {
                    let mut s = CpuSet::new();
                    s.insert(b[ai][k] as u32);
                    s
                }
                None => cpuset.clone(),
            };
            self.threads.push(ThreadState {
                app: ai,
                index: k as u32,
                tid: pid + k as i32,
                start_ticks,
                alive: true,
                done: false,
                phase: 0,
                phase_done: 0.0,
                run_done: 0.0,
                cpu: None,
                allowed,
                pages: vec![0.0; nodes],
                allocated: false,
                stall_ns: 0.0,
                prev_ips: 0.0,
                last_speed: Speed::default(),
                acc: Acc::default(),
                node_migrations: 0,
                cpu_seconds: 0.0,
                finished_at: None,
                numa: autonuma::TaskFaults::new(nodes),
                waiting: false,
                arrived_at: 0.0,
            });
            ids.push(self.threads.len() - 1);
        }
        let a = &mut self.apps[ai];
        a.status = AppStatus::Running;
        a.pid = pid;
        a.start_ticks = start_ticks;
        a.started_at = self.time;
        a.threads = ids.clone();
        a.shared_pages = vec![0.0; nodes];
        a.allocated = false;
        a.scan = autonuma::Scan::new(
            self.time,
            nodes,
            self.workload.linux.numa_balancing_scan_delay_ms,
        );
        for t in ids {
            self.place(t);
        }
    }
}

mod actuate;
mod autonuma;
mod barrier;
mod linux;
mod memory_events;
pub mod pages;
mod sampling;
mod step;
mod telemetry;
