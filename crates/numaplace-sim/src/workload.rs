//! What runs in the simulator, resolved from a scenario file: applications
//! (processes, VMs) with their threads, each thread a small set of numbers
//! the contention model turns into speed (`docs/simulator.md`).
//!
//! Everything here is validated: sizes are positive, rates finite, memory
//! placements name existing nodes. The scenario parser
//! ([`crate::scenario`]) builds these and reports what is wrong with a
//! file; code that builds a [`Workload`] by hand (tests, the oracle) uses
//! the same types.

pub use numaplace_machine::thread::{Pattern, ThreadModel};
use numaplace_model::CpuSet;
use serde::{Deserialize, Serialize};

/// Where an application's memory goes when it is first touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryPlacement {
    /// On the node of the CPU that first touches it (Linux's default).
    FirstTouch,
    /// On this node (dense id), as `numactl --membind` / `set_mempolicy`
    /// (\[Rao13\] allocates everything on node 0).
    Node(u32),
    /// Spread evenly over all nodes (`numactl --interleave=all`).
    Interleave,
    /// Spread evenly over these nodes, a bit per dense node id
    /// (`numactl --interleave=0,1`); the oracle's interleaved memory.
    InterleaveNodes(u64),
}

impl MemoryPlacement {
    /// The dense nodes an interleaved placement spreads over, of `nodes`.
    pub fn interleave_nodes(&self, nodes: usize) -> Option<Vec<usize>> {
        match *self {
            MemoryPlacement::Interleave => Some((0..nodes).collect()),
            MemoryPlacement::InterleaveNodes(mask) => {
                Some((0..nodes.min(64)).filter(|n| mask >> n & 1 == 1).collect())
            }
            MemoryPlacement::FirstTouch | MemoryPlacement::Node(_) => None,
        }
    }
}

/// A part of a run: `instructions` executed with `model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Instructions it lasts, per thread.
    pub instructions: f64,
    /// How a thread computes and touches memory meanwhile.
    pub model: ThreadModel,
}

/// What kind of application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppKind {
    /// An ordinary process: its threads are its own.
    Process,
    /// A virtual machine: its threads are vCPU threads (`CPU n/KVM`).
    Vm,
}

/// An application: one process (or VM) with identical threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSpec {
    /// Its name in tables and as the simulated process's `comm`.
    pub name: String,
    /// A process or a VM.
    pub kind: AppKind,
    /// Its threads, all alike.
    pub threads: u32,
    /// The phases every thread runs through, in order; a run ends when
    /// the last phase's instructions are done.
    pub phases: Vec<Phase>,
    /// Bytes of the application's shared area (0: none).
    pub shared_bytes: u64,
    /// How many of its threads (the first ones) use the shared area; the
    /// others never touch it. Every sharer writes, as in \[Rao13\] Fig. 3.
    pub sharers: u32,
    /// Where its memory goes: first touch, a node, interleaved.
    pub memory: MemoryPlacement,
    /// CPUs (dense ids) the application is confined to, as by its cgroup's
    /// cpuset or its own `taskset`; `None` for the whole machine. Neither
    /// the simulated Linux nor any policy places its threads elsewhere.
    pub cpus: Option<CpuSet>,
    /// Whether `cpus` is its cgroup's cpuset (libvirt's domain, a pod in
    /// the kubelet's shared pool, systemd's `AllowedCPUs=`): policies are
    /// told so (`Task::confined_cpus`) and place its threads within them.
    /// Otherwise the application chose them itself (`taskset`), and is
    /// left alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cpus_by_cgroup: bool,
    /// When it starts, simulated seconds.
    pub start_s: f64,
    /// How many times it runs back to back (\[Blagodurov11\] restarts each
    /// benchmark until all have run three times); at least 1.
    pub runs: u32,
    /// The parallel job this application is one rank of, when its
    /// scenario gives the job a structure (`rank_skew`, `barrier`);
    /// `None` for an application on its own, and for copies that are
    /// merely identical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Job>,
}

/// One rank of a parallel (MPI) job: an `[[app]]` table with `copies`,
/// each copy a rank, as \[Blagodurov11\] §3.2 runs a SPEC MPI2007 job as "16
/// processes" (`docs/simulator.md`, "MPI jobs").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The job's name (its `[[app]]` table's): the ranks that carry it
    /// meet at the same barriers.
    pub name: String,
    /// This rank, from 0, of `ranks`.
    pub rank: u32,
    /// Ranks in the job.
    pub ranks: u32,
    /// The spread of work over the ranks: rank `r` runs each phase's
    /// instructions times [`Job::work_factor`] (already applied to its
    /// phases; kept here to show).
    pub rank_skew: f64,
    /// Where the ranks wait for each other.
    pub barrier: Barrier,
}

impl Job {
    /// The share of a phase's instructions rank `rank` of `ranks` runs:
    /// spread evenly from `1 − skew` (rank 0) to `1 + skew` (the last
    /// rank), so the job's total work is unchanged; 1 for a job of one
    /// rank.
    pub fn work_factor(rank: u32, ranks: u32, skew: f64) -> f64 {
        if ranks < 2 {
            return 1.0;
        }
        1.0 + skew * (2.0 * f64::from(rank) / f64::from(ranks - 1) - 1.0)
    }
}

/// Where the ranks of a job wait for each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Barrier {
    /// Never: each rank runs at its own pace, as independent copies do.
    None,
    /// At the end of every phase (and of the run): a rank that finished
    /// a phase spins in MPI's progress loop until every rank of the job
    /// has finished it, so the job advances at its slowest rank's pace.
    Phase,
}

impl AppSpec {
    /// Instructions of one run of one thread.
    pub fn instructions(&self) -> f64 {
        self.phases.iter().map(|p| p.instructions).sum()
    }
}

/// How the simulated Linux places work that numaplace does not pin
/// (docs/simulator.md, "The simulated Linux").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinuxModel {
    /// How often, simulated ms, the load balancer looks at a thread.
    pub balance_interval_ms: f64,
    /// Chance that a look moves an unpinned thread to another idle CPU of
    /// the machine (NUMA-agnostic balancing noise).
    pub migrate_probability: f64,
    /// Automatic NUMA balancing (`kernel.numa_balancing=1`), both halves:
    /// pages move toward the node that faults on them, tasks toward their
    /// memory (`world/autonuma.rs`; `docs/simulator.md`, "Automatic NUMA
    /// balancing").
    pub numa_balancing: bool,
    /// The kernel's tunables, with its defaults
    /// (`Documentation/admin-guide/sysctl/kernel.rst`, `kernel/sched/fair.c`
    /// `sysctl_numa_balancing_*`): the first scan of a new process after
    /// `scan_delay_ms`; then `scan_size_mb` of its address space per scan,
    /// the whole of it at most once per `scan_period_min_ms` and at least
    /// once per `scan_period_max_ms`.
    pub numa_balancing_scan_delay_ms: f64,
    /// The kernel's `numa_balancing_scan_period_min_ms`.
    pub numa_balancing_scan_period_min_ms: f64,
    /// The kernel's `numa_balancing_scan_period_max_ms`.
    pub numa_balancing_scan_period_max_ms: f64,
    /// The kernel's `numa_balancing_scan_size_mb`: MiB of a process scanned
    /// each period.
    pub numa_balancing_scan_size_mb: f64,
}

impl Default for LinuxModel {
    fn default() -> Self {
        LinuxModel {
            balance_interval_ms: 100.0,
            migrate_probability: 0.002,
            numa_balancing: false,
            numa_balancing_scan_delay_ms: 1000.0,
            numa_balancing_scan_period_min_ms: 1000.0,
            numa_balancing_scan_period_max_ms: 60000.0,
            numa_balancing_scan_size_mb: 256.0,
        }
    }
}

/// A whole simulated experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// The scenario's name.
    pub name: String,
    /// What it is, in words.
    pub description: String,
    /// Machine preset name (`westmere-2s`, ...).
    pub machine: String,
    /// Its applications.
    pub apps: Vec<AppSpec>,
    /// Time step of the model, simulated ms.
    pub step_ms: f64,
    /// A run stops here even if work is left (it is then reported as
    /// unfinished), simulated seconds.
    pub max_seconds: f64,
    /// The world differs from the machine the policies are told: each
    /// machine parameter drawn within ± this many percent of it per run
    /// seed (the scenario's `mismatch_percent`; `--mismatch` overrides it).
    pub mismatch_percent: Option<f64>,
    /// The simulated kernel's settings.
    pub linux: LinuxModel,
}

impl Workload {
    /// Threads over all applications (one run each).
    pub fn threads(&self) -> usize {
        self.apps.iter().map(|a| a.threads as usize).sum()
    }
}

impl Workload {
    /// Checks the workload fits `machine` (another machine than the one
    /// its scenario named): memory nodes and cpusets exist there, and no
    /// application has more threads than its cpuset has CPUs. The message
    /// names the application and what to change.
    pub fn check_machine(&self, machine: &crate::Machine) -> Result<(), String> {
        let t = &machine.topology;
        let cpus = t.cpus().len() as u32;
        let nodes = t.nodes().len() as u32;
        for a in &self.apps {
            if let MemoryPlacement::Node(n) = a.memory {
                if n >= nodes {
                    return Err(format!(
                        "application {:?} binds its memory to node {n}, but {} has nodes 0-{}",
                        a.name,
                        machine.name,
                        nodes - 1
                    ));
                }
            }
            if let Some(set) = &a.cpus {
                if let Some(bad) = set.iter().find(|&c| c >= cpus) {
                    return Err(format!(
                        "application {:?} is confined to CPU {bad}, but {} has CPUs 0-{}",
                        a.name,
                        machine.name,
                        cpus - 1
                    ));
                }
                if a.threads as usize > set.len() {
                    return Err(format!(
                        "application {:?} has {} threads but its cpuset {set} holds {} CPUs",
                        a.name,
                        a.threads,
                        set.len()
                    ));
                }
            }
        }
        Ok(())
    }
}
