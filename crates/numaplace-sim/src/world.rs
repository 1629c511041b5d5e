//! The simulated world the policies act on: applications starting,
//! running and restarting on a machine, a NUMA-agnostic Linux placing what
//! no one pinned, pages allocated on first touch, and the same
//! [`Telemetry`] / [`Actuator`] faces the live host has.
//!
//! The simulated Linux (CALIBRATION.md, "Linux default baseline"): a new
//! thread goes to an idle CPU of its allowed set, idle cores first, chosen
//! at random (seeded); every balance interval an overloaded CPU hands a
//! thread to an idle one, and an unpinned thread moves to another idle CPU
//! with a small probability (the balancer's NUMA-agnostic noise); memory
//! is placed as the scenario says, by default on the node of the CPU that
//! first touches it; automatic NUMA balancing, when on, drifts pages to
//! the node their thread runs on.

use std::collections::BTreeMap;
use std::convert::Infallible;

use numaplace_model::{
    Action, Counter, CounterDeltas, CpuSet, EnergyDelta, GroupKind, MachineReadings, NodeMeminfo,
    NodeMemory, Outcome, PageCounts, Snapshot, Task, TaskGroup, TaskId,
};
use numaplace_policy::engine::{Actuator, Telemetry};

use crate::machine::Machine;
use crate::model::{Background, Constants, Runner, Solver, Speed};
use crate::outcome::{AppRun, MemoryTrace, ThreadTrace, Trace};
use crate::rng::Rng;
use crate::workload::{AppKind, MemoryPlacement, Workload};

/// Bytes per page.
pub const PAGE: f64 = 4096.0;
/// Where the simulated processes' memory sits in their address space: the
/// shared area first, then one private region per thread.
pub const SHARED_BASE: u64 = 0x1000_0000;
pub const PRIVATE_BASE: u64 = 0x1_0000_0000;
pub const PRIVATE_STRIDE: u64 = 0x100_0000_0000;
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
    cpu_seconds: f64,
    finished_at: Option<f64>,
}

/// Statistics over the whole run.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub thread_migrations: u64,
    pub node_migrations: u64,
    pub pages_migrated: u64,
    pub energy_j: f64,
    /// Over all threads: instructions, LLC misses, uncore requests and
    /// the cycles they were outstanding (seed 000 §3.1's t').
    pub instructions: f64,
    pub llc_misses: f64,
    pub uncore_requests: f64,
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
    next_balance: f64,
    /// Launch-time bindings: per application, per thread, a dense CPU.
    binding: Option<Vec<Vec<usize>>>,
    totals: Totals,
    background: Background,
    trace: Option<Trace>,
    speeds: Vec<Speed>,
    all_cpus: CpuSet,
}

impl World {
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
            })
            .collect();
        let packages = machine.topology.packages().len();
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
            next_balance: 0.0,
            binding: None,
            totals: Totals::default(),
            trace: None,
            speeds: Vec::new(),
            all_cpus,
            machine,
            workload,
        }
    }

    /// Bind every thread at launch (like `taskset`): `cpus[app][thread]`
    /// is a dense CPU id. The oracle's placements run this way.
    pub fn bind(&mut self, cpus: Vec<Vec<usize>>) {
        self.binding = Some(cpus);
    }

    /// Keep a trace for the plots.
    pub fn enable_trace(&mut self) {
        self.trace = Some(Trace {
            nodes: self.machine.topology.nodes().len(),
            cpus: self.machine.topology.cpus().len(),
            ..Trace::default()
        });
    }

    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    pub fn time(&self) -> f64 {
        self.time
    }

    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Whether every application ran all its runs.
    pub fn finished(&self) -> bool {
        self.apps.iter().all(|a| a.status == AppStatus::Done)
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
                });
            }
        }
        v
    }

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
                cpu_seconds: 0.0,
                finished_at: None,
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
        for t in ids {
            self.place(t);
        }
    }

    /// Threads on each CPU now.
    fn cpu_load(&self) -> Vec<u32> {
        let mut load = vec![0u32; self.machine.topology.cpus().len()];
        for t in &self.threads {
            if t.alive
                && !t.done
                && let Some(c) = t.cpu
            {
                load[c] += 1;
            }
        }
        load
    }

    /// The simulated Linux puts a thread on the least loaded CPU of its
    /// allowed set, preferring CPUs whose whole core is idle, at random
    /// among equals.
    fn place(&mut self, t: usize) {
        let load = self.cpu_load();
        let topo = &self.machine.topology;
        let core_load = |c: usize| -> u32 {
            topo.cores()[topo.cpus()[c].core]
                .cpus
                .iter()
                .map(|&x| load[x])
                .sum()
        };
        let allowed: Vec<usize> = self.threads[t].allowed.iter().map(|c| c as usize).collect();
        let Some(best) = allowed.iter().map(|&c| (load[c], core_load(c))).min() else {
            return;
        };
        let candidates: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|&c| (load[c], core_load(c)) == best)
            .collect();
        let cpu = self.rng.pick(&candidates);
        self.move_thread(t, cpu);
    }

    /// Moves a thread to a CPU, charging what the move costs (M7): a new
    /// LLC refills the thread's share of it, a new core its L2.
    fn move_thread(&mut self, t: usize, cpu: usize) {
        let topo = &self.machine.topology;
        let th = &mut self.threads[t];
        if let Some(old) = th.cpu {
            if old == cpu {
                return;
            }
            let (o, n) = (&topo.cpus()[old], &topo.cpus()[cpu]);
            let mlp = self.workload.apps[th.app].phases
                [th.phase.min(self.workload.apps[th.app].phases.len() - 1)]
            .model
            .mlp
            .max(1.0);
            if o.llc != n.llc {
                let lines = th.last_speed.llc_share / crate::model::LINE;
                th.stall_ns += lines
                    * th.last_speed
                        .memory_ns
                        .max(self.machine.params.local_latency_ns.value)
                    / mlp;
            } else if o.core != n.core {
                let l2 = topo.core_cache(n.core, 2).map_or(0.0, |c| c.size as f64);
                th.stall_ns += l2 / crate::model::LINE * self.machine.params.llc_hit_ns.value / mlp;
            }
            self.totals.thread_migrations += 1;
            th.acc.migrations += 1;
            if o.node != n.node {
                self.totals.node_migrations += 1;
            }
        }
        th.cpu = Some(cpu);
    }

    /// The simulated Linux's periodic balancing.
    fn balance(&mut self) {
        let p = self.workload.linux.migrate_probability;
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if !th.alive || th.done {
                continue;
            }
            let Some(cpu) = th.cpu else { continue };
            let load = self.cpu_load();
            let topo = &self.machine.topology;
            let busy_siblings = |c: usize| -> u32 {
                topo.cores()[topo.cpus()[c].core]
                    .cpus
                    .iter()
                    .filter(|&&x| x != c)
                    .map(|&x| load[x])
                    .sum()
            };
            let idle: Vec<usize> = th
                .allowed
                .iter()
                .map(|c| c as usize)
                .filter(|&c| load[c] == 0)
                .collect();
            let idle_cores: Vec<usize> = idle
                .iter()
                .copied()
                .filter(|&c| busy_siblings(c) == 0)
                .collect();
            let overloaded = load[cpu] > 1;
            let smt_shared = busy_siblings(cpu) > 0 && !idle_cores.is_empty();
            let unpinned = th.allowed == self.all_cpus;
            if overloaded && !idle.is_empty() {
                let pool = if idle_cores.is_empty() {
                    &idle
                } else {
                    &idle_cores
                };
                let c = self.rng.pick(pool);
                self.move_thread(t, c);
            } else if smt_shared {
                let c = self.rng.pick(&idle_cores);
                self.move_thread(t, c);
            } else if unpinned && !idle.is_empty() && self.rng.unit() < p {
                let pool = if idle_cores.is_empty() {
                    &idle
                } else {
                    &idle_cores
                };
                let c = self.rng.pick(pool);
                self.move_thread(t, c);
            }
        }
    }

    fn first_touch(&mut self) {
        let nodes = self.machine.topology.nodes().len();
        for ai in 0..self.apps.len() {
            if self.apps[ai].status != AppStatus::Running {
                continue;
            }
            let spec = &self.workload.apps[ai];
            let node_of = |cpu: Option<usize>| cpu.map_or(0, |c| self.solver.cpu_node(c));
            let place = |pages: f64, home: usize| -> Vec<f64> {
                let mut v = vec![0.0; nodes];
                match spec.memory {
                    MemoryPlacement::FirstTouch => v[home] = pages,
                    MemoryPlacement::Node(n) => v[n as usize] = pages,
                    MemoryPlacement::Interleave => {
                        v.iter_mut().for_each(|x| *x = pages / nodes as f64)
                    }
                }
                v
            };
            if !self.apps[ai].allocated {
                let main = self.apps[ai].threads.first().copied();
                let home = node_of(main.and_then(|t| self.threads[t].cpu));
                let pages = (spec.shared_bytes as f64 / PAGE).ceil();
                self.apps[ai].shared_pages = place(pages, home);
                self.apps[ai].allocated = true;
            }
            for k in 0..self.apps[ai].threads.len() {
                let t = self.apps[ai].threads[k];
                if self.threads[t].allocated || self.threads[t].cpu.is_none() {
                    continue;
                }
                let ws = spec
                    .phases
                    .iter()
                    .map(|p| p.model.working_set)
                    .max()
                    .unwrap_or(0);
                let home = node_of(self.threads[t].cpu);
                self.threads[t].pages = place((ws as f64 / PAGE).ceil(), home);
                self.threads[t].allocated = true;
            }
        }
    }

    /// Runs the world for one step of the workload's length.
    pub fn advance(&mut self) {
        let dt = self.step;
        if self.time + 1e-12 >= self.next_balance {
            self.balance();
            self.next_balance = self.time + self.workload.linux.balance_interval_ms / 1000.0;
        }
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if th.alive && !th.done && th.cpu.is_none_or(|c| !th.allowed.contains(c as u32)) {
                self.place(t);
            }
        }
        self.first_touch();
        let load = self.cpu_load();
        // Page fractions per running thread.
        let active: Vec<usize> = (0..self.threads.len())
            .filter(|&t| {
                self.threads[t].alive && !self.threads[t].done && self.threads[t].cpu.is_some()
            })
            .collect();
        let fractions: Vec<Vec<f64>> = active
            .iter()
            .map(|&t| {
                let p = &self.threads[t].pages;
                let s: f64 = p.iter().sum();
                if s > 0.0 {
                    p.iter().map(|x| x / s).collect()
                } else {
                    let mut v = vec![0.0; p.len()];
                    v[self.solver.cpu_node(self.threads[t].cpu.unwrap_or(0))] = 1.0;
                    v
                }
            })
            .collect();
        let runners: Vec<Runner<'_>> = active
            .iter()
            .zip(&fractions)
            .map(|(&t, f)| {
                let th = &self.threads[t];
                let spec = &self.workload.apps[th.app];
                let cpu = th.cpu.unwrap_or(0);
                Runner {
                    cpu,
                    share: 1.0 / load[cpu].max(1) as f64,
                    model: &spec.phases[th.phase].model,
                    pages: f,
                    group: th.app,
                    shared_bytes: spec.shared_bytes,
                    prev_ips: th.prev_ips,
                }
            })
            .collect();
        let mut speeds = std::mem::take(&mut self.speeds);
        self.solver.solve(&runners, &self.background, &mut speeds);
        drop(runners);
        self.background
            .node_bytes_per_s
            .iter_mut()
            .for_each(|x| *x = 0.0);
        self.background
            .link_bytes_per_s
            .iter_mut()
            .for_each(|x| *x = 0.0);
        let ghz = self.solver.ghz();
        for (&t, s) in active.iter().zip(&speeds) {
            let th = &mut self.threads[t];
            let spec = &self.workload.apps[th.app];
            let share = 1.0 / load[th.cpu.unwrap_or(0)].max(1) as f64;
            th.prev_ips = s.ips;
            th.last_speed = *s;
            th.cpu_seconds += dt * share;
            // Migration stalls first.
            let stall = (th.stall_ns * 1e-9).min(dt * share);
            th.stall_ns -= stall * 1e9;
            let run = dt - stall / share.max(1e-9);
            let mut instr = s.ips * run.max(0.0);
            let mut used = 0.0;
            while instr > 0.0 && !th.done {
                let phase = &spec.phases[th.phase];
                let left = phase.instructions - th.phase_done;
                if instr >= left {
                    used += left / s.ips.max(1e-9);
                    th.phase_done = 0.0;
                    th.run_done += left;
                    instr -= left;
                    th.phase += 1;
                    if th.phase == spec.phases.len() {
                        th.done = true;
                        th.finished_at = Some(self.time + stall / share.max(1e-9) + used);
                        th.phase = spec.phases.len() - 1;
                    }
                } else {
                    th.phase_done += instr;
                    th.run_done += instr;
                    used += instr / s.ips.max(1e-9);
                    instr = 0.0;
                }
            }
            let done_instr = s.ips * used;
            let a = &mut th.acc;
            a.instructions += done_instr;
            a.cycles += (used + stall) * share * ghz * 1e9;
            a.llc_refs += done_instr * s.uncore_per_instr;
            a.llc_misses += done_instr * s.llc_miss_per_instr;
            let reqs = done_instr * (s.uncore_per_instr + s.transfers_per_instr);
            a.uncore_requests += reqs;
            a.uncore_occupancy += reqs * s.uncore_penalty_cycles;
            a.run_ns += (used + stall) * share * 1e9;
            let t = &mut self.totals;
            t.instructions += done_instr;
            t.llc_misses += done_instr * s.llc_miss_per_instr;
            t.uncore_requests += reqs;
            t.uncore_occupancy += reqs * s.uncore_penalty_cycles;
        }
        self.speeds = speeds;
        // Energy (seed 002 Fig. 7): cores with a busy thread, cores with two.
        if let Some(pm) = &self.machine.params.power {
            let topo = &self.machine.topology;
            let (mut p, mut l) = (0usize, 0usize);
            for core in topo.cores() {
                let busy = core.cpus.iter().filter(|&&c| load[c] > 0).count();
                if busy > 0 {
                    p += 1;
                }
                if busy > 1 {
                    l += 1;
                }
            }
            self.totals.energy_j += pm.watts(p, l) * dt;
        }
        if self.workload.linux.numa_balancing {
            self.numa_balancing(dt);
        }
        self.time += dt;
        self.finish_runs();
        self.sample_trace();
    }

    /// Automatic NUMA balancing: a thread's private pages drift to the node
    /// it runs on at the kernel's scan rate.
    fn numa_balancing(&mut self, dt: f64) {
        let budget = self.workload.linux.numa_balancing_mib_per_s * dt * 1048576.0 / PAGE;
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if !th.alive || th.done {
                continue;
            }
            let Some(cpu) = th.cpu else { continue };
            let node = self.solver.cpu_node(cpu);
            let moved = self.move_pages_of(t, node, budget);
            self.totals.pages_migrated += moved as u64;
        }
    }

    /// Moves up to `max` of a thread's private pages to `node`; returns how
    /// many moved. Charges the copy to the nodes and the thread.
    fn move_pages_of(&mut self, t: usize, node: usize, max: f64) -> f64 {
        let nodes = self.threads[t].pages.len();
        let off: f64 = (0..nodes)
            .filter(|&n| n != node)
            .map(|n| self.threads[t].pages[n])
            .sum();
        let take = off.min(max).floor();
        if take <= 0.0 {
            return 0.0;
        }
        for n in 0..nodes {
            if n == node {
                continue;
            }
            let part = take * self.threads[t].pages[n] / off;
            self.threads[t].pages[n] -= part;
            self.charge_copy(n, node, part);
        }
        self.threads[t].pages[node] += take;
        self.threads[t].stall_ns += take * self.solver.constants.page_migration_us.value * 1e3;
        take
    }

    fn charge_copy(&mut self, from: usize, to: usize, pages: f64) {
        let bytes = pages * PAGE / self.step;
        self.background.node_bytes_per_s[from] += bytes;
        self.background.node_bytes_per_s[to] += bytes;
        let topo = &self.machine.topology;
        let (a, b) = (
            topo.nodes()[from].package.unwrap_or(0),
            topo.nodes()[to].package.unwrap_or(0),
        );
        if a != b {
            let np = topo.packages().len();
            self.background.link_bytes_per_s[a * np + b] += bytes;
        }
    }

    fn finish_runs(&mut self) {
        for ai in 0..self.apps.len() {
            let a = &self.apps[ai];
            if a.status != AppStatus::Running || !a.threads.iter().all(|&t| self.threads[t].done) {
                continue;
            }
            let end = a
                .threads
                .iter()
                .filter_map(|&t| self.threads[t].finished_at)
                .fold(a.started_at, f64::max);
            self.runs.push(AppRun {
                app: self.workload.apps[ai].name.clone(),
                run: a.run,
                start_s: a.started_at,
                end_s: Some(end),
                thread_s: a
                    .threads
                    .iter()
                    .map(|&t| self.threads[t].finished_at.map(|f| f - a.started_at))
                    .collect(),
            });
            for &t in &self.apps[ai].threads {
                self.threads[t].alive = false;
                self.threads[t].cpu = None;
            }
            let runs = self.workload.apps[ai].runs;
            let a = &mut self.apps[ai];
            a.run += 1;
            if a.run >= runs {
                a.status = AppStatus::Done;
            } else {
                self.launch(ai);
                self.apps[ai].run = self.apps[ai].run.max(1);
            }
        }
    }

    fn sample_trace(&mut self) {
        let Some(trace) = self.trace.as_mut() else {
            return;
        };
        let every = (self.workload.max_seconds / 2000.0).max(self.step);
        if let Some(&last) = trace.times.last()
            && self.time - last < every - 1e-9
        {
            return;
        }
        let n = trace.times.len();
        trace.times.push(self.time);
        let labels: Vec<(String, String)> = self
            .workload
            .apps
            .iter()
            .flat_map(|a| (0..a.threads).map(move |k| (a.name.clone(), format!("{}/{k}", a.name))))
            .collect();
        if trace.threads.is_empty() {
            trace.threads = labels
                .iter()
                .map(|(app, label)| ThreadTrace {
                    label: label.clone(),
                    app: app.clone(),
                    progress: Vec::new(),
                    cpu: Vec::new(),
                })
                .collect();
            trace.memory = self
                .workload
                .apps
                .iter()
                .map(|a| MemoryTrace {
                    app: a.name.clone(),
                    mib: Vec::new(),
                })
                .collect();
        }
        let mut slot = 0;
        for (ai, a) in self.apps.iter().enumerate() {
            let spec = &self.workload.apps[ai];
            let total = spec.instructions();
            let nodes = self.machine.topology.nodes().len();
            let mut mib = vec![0.0; nodes];
            for k in 0..spec.threads as usize {
                let tt = &mut trace.threads[slot + k];
                let th = (a.status == AppStatus::Running).then(|| &self.threads[a.threads[k]]);
                match th {
                    Some(th) if !th.done => {
                        tt.progress.push(Some((th.run_done / total) as f32));
                        tt.cpu.push(th.cpu.map(|c| c as u32));
                        for (m, p) in mib.iter_mut().zip(&th.pages) {
                            *m += p * PAGE / 1048576.0;
                        }
                    }
                    Some(th) => {
                        tt.progress.push(Some(1.0));
                        tt.cpu.push(None);
                        for (m, p) in mib.iter_mut().zip(&th.pages) {
                            *m += p * PAGE / 1048576.0;
                        }
                    }
                    None => {
                        tt.progress.push(None);
                        tt.cpu.push(None);
                    }
                }
                debug_assert_eq!(tt.progress.len(), n + 1);
            }
            if a.status == AppStatus::Running {
                for (m, p) in mib.iter_mut().zip(&a.shared_pages) {
                    *m += p * PAGE / 1048576.0;
                }
            }
            trace.memory[ai].mib.push(mib);
            slot += spec.threads as usize;
        }
    }

    fn kernel_cpus(&self, dense: &CpuSet) -> CpuSet {
        let cpus = self.machine.topology.cpus();
        dense.iter().map(|c| cpus[c as usize].os_id).collect()
    }

    /// The snapshot the live collector would have taken now.
    pub fn snapshot(&mut self) -> Snapshot {
        let accs: Vec<Acc> = self
            .threads
            .iter_mut()
            .map(|t| std::mem::take(&mut t.acc))
            .collect();
        let topo = &self.machine.topology;
        let interval = self.time - self.last_snapshot;
        let mut tasks = Vec::new();
        let mut groups = Vec::new();
        let mut counters = BTreeMap::new();
        let mut used = vec![0.0; topo.nodes().len()];
        for (ai, a) in self.apps.iter().enumerate() {
            if a.status != AppStatus::Running {
                continue;
            }
            let spec = &self.workload.apps[ai];
            let mut mem = a.shared_pages.clone();
            let mut tids = Vec::new();
            for &t in &a.threads {
                let th = &self.threads[t];
                for (m, p) in mem.iter_mut().zip(&th.pages) {
                    *m += p;
                }
                if th.done {
                    continue;
                }
                tids.push(th.tid);
                tasks.push(Task {
                    tid: th.tid,
                    tgid: a.pid,
                    start_time: th.start_ticks,
                    comm: match spec.kind {
                        AppKind::Process => spec.name.chars().take(15).collect(),
                        AppKind::Vm => format!("CPU {}/KVM", th.index),
                    },
                    state: 'R',
                    last_cpu: th.cpu.map(|c| topo.cpus()[c].os_id),
                    allowed_cpus: self.kernel_cpus(&th.allowed),
                    allowed_mems: topo.nodes().iter().map(|n| n.os_id).collect(),
                    utime: (th.cpu_seconds * TICKS) as u64,
                    stime: 0,
                    vcpu: (spec.kind == AppKind::Vm).then_some(th.index),
                });
                counters.insert(th.tid, deltas(&accs[t], interval));
            }
            for (u, m) in used.iter_mut().zip(&mem) {
                *u += m * PAGE;
            }
            groups.push(TaskGroup {
                pid: a.pid,
                start_time: a.start_ticks,
                comm: spec.name.chars().take(15).collect(),
                cmdline: vec![spec.name.clone()],
                cgroup: Some(format!("/numaplace-sim/{}", spec.name)),
                kind: match spec.kind {
                    AppKind::Process => GroupKind::Process,
                    AppKind::Vm => GroupKind::Vm {
                        name: Some(spec.name.clone()),
                        accel: "KVM".into(),
                        evidence: "simulated".into(),
                    },
                },
                threads: tids,
                memory: Some(
                    mem.iter()
                        .enumerate()
                        .map(|(n, p)| {
                            (
                                topo.nodes()[n].os_id,
                                NodeMemory {
                                    anon: (p * PAGE) as u64,
                                    file: 0,
                                    huge: 0,
                                },
                            )
                        })
                        .collect(),
                ),
            });
        }
        let nodes = topo
            .nodes()
            .iter()
            .zip(&used)
            .map(|(n, u)| {
                (
                    n.os_id,
                    NodeMeminfo {
                        total: n.memory,
                        free: n.memory.saturating_sub(*u as u64),
                    },
                )
            })
            .collect();
        let energy = if self.machine.params.power.is_some() {
            vec![EnergyDelta {
                zone: "sim".into(),
                name: "machine".into(),
                microjoules: Some((self.totals.energy_j * 1e6) as u64),
            }]
        } else {
            Vec::new()
        };
        let s = Snapshot {
            seq: self.seq,
            time_unix_ns: EPOCH_NS + (self.time * 1e9) as u64,
            interval_ns: (interval * 1e9) as u64,
            tasks,
            groups,
            counters,
            machine: MachineReadings {
                nodes,
                energy,
                resctrl: Vec::new(),
                clock_ticks: TICKS as u64,
            },
        };
        self.seq += 1;
        self.last_snapshot = self.time;
        s
    }

    fn find_thread(&self, id: TaskId) -> Option<usize> {
        self.threads
            .iter()
            .position(|t| t.alive && !t.done && t.tid == id.tid && t.start_ticks == id.start_time)
    }

    fn find_app(&self, id: TaskId) -> Option<usize> {
        self.apps.iter().position(|a| {
            a.status == AppStatus::Running && a.pid == id.tid && a.start_ticks == id.start_time
        })
    }

    fn dense_node(&self, os: u32) -> Option<usize> {
        self.machine.topology.node_by_os_id(os).map(|n| n.id)
    }

    fn move_memory(&mut self, ai: usize, node: usize, max_pages: Option<u64>) -> PageCounts {
        let mut budget = max_pages.map_or(f64::INFINITY, |m| m as f64);
        let mut counts = PageCounts::default();
        let ids = self.apps[ai].threads.clone();
        for t in ids {
            counts.already += self.threads[t].pages[node] as u64;
            let moved = self.move_pages_of(t, node, budget);
            counts.moved += moved as u64;
            budget -= moved;
        }
        // The shared area.
        let nodes = self.apps[ai].shared_pages.len();
        counts.already += self.apps[ai].shared_pages[node] as u64;
        for n in 0..nodes {
            if n == node || budget <= 0.0 {
                continue;
            }
            let take = self.apps[ai].shared_pages[n].min(budget).floor();
            self.apps[ai].shared_pages[n] -= take;
            self.apps[ai].shared_pages[node] += take;
            self.charge_copy(n, node, take);
            counts.moved += take as u64;
            budget -= take;
        }
        self.totals.pages_migrated += counts.moved;
        counts
    }

    fn move_window(
        &mut self,
        ai: usize,
        address: u64,
        before: u64,
        after: u64,
        node: usize,
    ) -> Outcome {
        let spec = &self.workload.apps[ai];
        let page = address / PAGE as u64;
        let window = |start: u64, len_pages: u64| -> f64 {
            let lo = page.saturating_sub(before).max(start / PAGE as u64);
            let hi = (page + after).min(start / PAGE as u64 + len_pages.max(1) - 1);
            (hi + 1).saturating_sub(lo) as f64
        };
        if address >= SHARED_BASE && address < SHARED_BASE + spec.shared_bytes.max(1) {
            let total: f64 = self.apps[ai].shared_pages.iter().sum();
            let w = window(SHARED_BASE, (spec.shared_bytes as f64 / PAGE).ceil() as u64);
            let mut counts = PageCounts::default();
            if total > 0.0 {
                let frac = w / total;
                for n in 0..self.apps[ai].shared_pages.len() {
                    let part = self.apps[ai].shared_pages[n] * frac;
                    if n == node {
                        counts.already += part as u64;
                    } else {
                        self.apps[ai].shared_pages[n] -= part;
                        self.apps[ai].shared_pages[node] += part;
                        self.charge_copy(n, node, part);
                        counts.moved += part.round() as u64;
                    }
                }
            }
            self.totals.pages_migrated += counts.moved;
            return Outcome::Pages(counts);
        }
        if address >= PRIVATE_BASE {
            let k = ((address - PRIVATE_BASE) / PRIVATE_STRIDE) as usize;
            let base = PRIVATE_BASE + k as u64 * PRIVATE_STRIDE;
            if let Some(&t) = self.apps[ai].threads.get(k) {
                let total: f64 = self.threads[t].pages.iter().sum();
                if address < base + (total * PAGE) as u64 && total > 0.0 {
                    let w = window(base, total as u64);
                    let already = self.threads[t].pages[node] * w / total;
                    let want = w - already;
                    let moved = self.move_pages_of(t, node, want);
                    self.totals.pages_migrated += moved as u64;
                    return Outcome::Pages(PageCounts {
                        moved: moved as u64,
                        already: already as u64,
                        ..PageCounts::default()
                    });
                }
            }
        }
        Outcome::Pages(PageCounts {
            failed: before + after + 1,
            ..PageCounts::default()
        })
    }
}

fn deltas(a: &Acc, interval: f64) -> CounterDeltas {
    let mut values = BTreeMap::new();
    values.insert(Counter::Instructions, a.instructions as u64);
    values.insert(Counter::Cycles, a.cycles as u64);
    values.insert(Counter::LlcReferences, a.llc_refs as u64);
    values.insert(Counter::LlcMisses, a.llc_misses as u64);
    values.insert(Counter::UncoreRequests, a.uncore_requests as u64);
    values.insert(Counter::UncoreOccupancy, a.uncore_occupancy as u64);
    values.insert(Counter::TaskClock, a.run_ns as u64);
    values.insert(Counter::CpuMigrations, a.migrations);
    let ns = (interval * 1e9) as u64;
    CounterDeltas {
        values,
        enabled_ns: ns,
        running_ns: ns,
    }
}

impl Telemetry for World {
    type Error = Infallible;
    fn next_snapshot(&mut self) -> Result<Snapshot, Infallible> {
        Ok(self.snapshot())
    }
}

impl Actuator for World {
    fn apply(&mut self, action: &Action) -> Outcome {
        match action {
            Action::Pin { task, cpus, .. } => {
                let Some(t) = self.find_thread(*task) else {
                    return Outcome::Gone;
                };
                let topo = &self.machine.topology;
                let dense: CpuSet = cpus
                    .iter()
                    .filter_map(|c| topo.cpu_by_os_id(c).map(|c| c.id as u32))
                    .collect();
                let allowed = dense.intersection(&self.apps[self.threads[t].app].cpuset);
                if allowed.is_empty() {
                    return Outcome::Refused {
                        errno: "EINVAL".into(),
                        why: format!("none of CPUs {cpus} is in the task's cpuset"),
                    };
                }
                self.threads[t].allowed = allowed;
                let th = &self.threads[t];
                if th.cpu.is_none_or(|c| !th.allowed.contains(c as u32)) {
                    self.place(t);
                }
                Outcome::Done
            }
            Action::MoveMemory {
                process,
                to_node,
                max_pages,
            } => {
                let Some(ai) = self.find_app(*process) else {
                    return Outcome::Gone;
                };
                let Some(node) = self.dense_node(*to_node) else {
                    return Outcome::Refused {
                        errno: "ENODEV".into(),
                        why: format!("node {to_node} does not exist"),
                    };
                };
                Outcome::Pages(self.move_memory(ai, node, *max_pages))
            }
            Action::MoveWindow {
                process,
                address,
                pages_before,
                pages_after,
                to_node,
            } => {
                let Some(ai) = self.find_app(*process) else {
                    return Outcome::Gone;
                };
                let Some(node) = self.dense_node(*to_node) else {
                    return Outcome::Refused {
                        errno: "ENODEV".into(),
                        why: format!("node {to_node} does not exist"),
                    };
                };
                self.move_window(ai, *address, *pages_before, *pages_after, node)
            }
        }
    }
}
