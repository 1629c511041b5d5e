//! What a simulated run produced, and what a comparison of policies over
//! seeds concluded: the numbers `numaplace simulate` and `compare` print,
//! write as JSON and plot.

use serde::{Deserialize, Serialize};

/// One run of one application (an application may run several times back
/// to back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppRun {
    pub app: String,
    /// Which run of the application, from 0.
    pub run: u32,
    pub start_s: f64,
    /// When its last thread finished; `None` if the simulation stopped first.
    pub end_s: Option<f64>,
    /// Completion time of each of its threads, seconds from `start_s`.
    pub thread_s: Vec<Option<f64>>,
}

impl AppRun {
    /// Seconds from start to the last thread's end.
    pub fn runtime_s(&self) -> Option<f64> {
        self.end_s.map(|e| e - self.start_s)
    }

    /// Mean of its threads' completion times (seed 000 §2.2 measures a
    /// multithreaded run this way).
    pub fn mean_thread_s(&self) -> Option<f64> {
        let v: Option<Vec<f64>> = self.thread_s.iter().copied().collect();
        let v = v?;
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// Placement and progress over time, for the report's plots.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Sample times, simulated seconds.
    pub times: Vec<f64>,
    pub threads: Vec<ThreadTrace>,
    /// Per application: MiB on each node (dense id) at each sample.
    pub memory: Vec<MemoryTrace>,
    /// Node count, for the memory plot.
    pub nodes: usize,
    /// CPU count, for the placement plot.
    pub cpus: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadTrace {
    /// `app/thread-index`.
    pub label: String,
    pub app: String,
    /// Fraction of the current run done, 0-1, per sample (resets when the
    /// application restarts); `None` while it is not running.
    pub progress: Vec<Option<f32>>,
    /// The CPU (dense id) it ran on at each sample; `None` while not
    /// running.
    pub cpu: Vec<Option<u32>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryTrace {
    pub app: String,
    /// `mib[sample][node]`.
    pub mib: Vec<Vec<f64>>,
}

/// One simulated run: one scenario, one policy, one seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub scenario: String,
    pub machine: String,
    pub policy: String,
    pub seed: u64,
    /// Simulated seconds until the last application finished (or the
    /// limit).
    pub makespan_s: f64,
    /// Whether every application finished all its runs.
    pub finished: bool,
    pub runs: Vec<AppRun>,
    /// Threads moved to another CPU, by the policy and by the simulated
    /// Linux scheduler.
    pub thread_migrations: u64,
    /// Threads moved to another node (the costly ones).
    pub node_migrations: u64,
    pub pages_migrated: u64,
    /// The kernel it ran on: automatic NUMA balancing on or off.
    #[serde(default)]
    pub numa_balancing: bool,
    /// Automatic NUMA balancing's hinting faults and the threads it moved
    /// toward their memory (0 when it was off).
    #[serde(default)]
    pub hinting_faults: u64,
    #[serde(default)]
    pub numa_task_moves: u64,
    /// Over the whole run and all threads: the uncore penalty (cycles an
    /// uncore request is outstanding, divided by the memory-level
    /// parallelism; seed 000 §3.1) and LLC misses per 1000 instructions.
    pub uncore_penalty_cycles: f64,
    pub llc_mpki: f64,
    /// Joules and mean watts, where the machine has a power model.
    pub energy_j: Option<f64>,
    pub mean_power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    /// What the run could not do as asked (a signal it could not model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl RunResult {
    /// The run's score: mean run time of its application runs, seconds
    /// (each application run counts once, whatever its thread count).
    /// `None` if some did not finish.
    pub fn mean_runtime_s(&self) -> Option<f64> {
        let v: Option<Vec<f64>> = self.runs.iter().map(AppRun::runtime_s).collect();
        let v = v?;
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// Mean run time per application name, over its runs.
    pub fn app_runtime_s(&self, app: &str) -> Option<f64> {
        let v: Option<Vec<f64>> = self
            .runs
            .iter()
            .filter(|r| r.app == app)
            .map(AppRun::runtime_s)
            .collect();
        let v = v?;
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// Migrations per simulated hour.
    pub fn per_hour(&self, count: u64) -> f64 {
        count as f64 * 3600.0 / self.makespan_s.max(1e-9)
    }
}

/// One policy's results over the seeds of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySummary {
    pub policy: String,
    /// The kernel the policy ran on: automatic NUMA balancing on
    /// (`autonuma`, or a scenario or `--numa-balancing on` that asks for
    /// it) or off (the seeds' Linux).
    #[serde(default)]
    pub numa_balancing: bool,
    /// Mean over seeds of the run's mean runtime, seconds.
    pub mean_runtime_s: f64,
    /// The worst seed's mean runtime.
    pub worst_runtime_s: f64,
    /// Relative standard deviation over seeds, percent.
    pub rsd_percent: f64,
    /// Change of the mean runtime against `default` and against the
    /// oracle's static placement, percent (negative is faster).
    pub vs_default_percent: Option<f64>,
    pub vs_oracle_percent: Option<f64>,
    pub thread_migrations_per_hour: f64,
    pub pages_migrated_per_hour: f64,
    pub energy_j: Option<f64>,
    pub mean_power_w: Option<f64>,
    /// Seeds whose run did not finish in the scenario's time limit.
    pub unfinished: u32,
}

/// A comparison: every policy on one scenario over the same seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub scenario: String,
    pub description: String,
    pub machine: String,
    pub seeds: Vec<u64>,
    pub policies: Vec<PolicySummary>,
    /// How the oracle's placement was found (exhaustive, or the search
    /// used), if it ran.
    pub oracle: Option<String>,
    /// Where a policy's mean beat the oracle's by more than 1 %: the
    /// search fell short of the best static placement, and the gaps
    /// against it are no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_short: Option<String>,
    /// One run per policy (the first seed), with its trace, for the plots.
    pub examples: Vec<RunResult>,
}
