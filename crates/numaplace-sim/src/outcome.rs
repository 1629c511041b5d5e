//! What a simulated run produced, and what a comparison of policies over
//! seeds concluded: the numbers `numaplace simulate` and `compare` print,
//! write as JSON and plot.

use serde::{Deserialize, Serialize};

/// One run of one application (an application may run several times back
/// to back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppRun {
    /// The application (its name in the scenario).
    pub app: String,
    /// Which run of the application, from 0.
    pub run: u32,
    /// When the run started, simulated seconds.
    pub start_s: f64,
    /// When its last thread finished; `None` if the simulation stopped first.
    pub end_s: Option<f64>,
    /// Completion time of each of its threads, seconds from `start_s`.
    pub thread_s: Vec<Option<f64>>,
    /// Times one of its threads moved to another node, by the policy or
    /// the simulated Linux. Under DI-Migrate and DINO each such move takes
    /// the thread's memory along: \[Blagodurov11\] Table 1's "memory migrations".
    #[serde(default)]
    pub node_migrations: u64,
}

impl AppRun {
    /// Seconds from start to the last thread's end.
    pub fn runtime_s(&self) -> Option<f64> {
        self.end_s.map(|e| e - self.start_s)
    }

    /// Node migrations per thread and hour of the run (\[Blagodurov11\] Table 1
    /// counts per process, and its processes are single-threaded); `None`
    /// if it did not finish.
    pub fn node_migrations_per_thread_hour(&self) -> Option<f64> {
        let hours = self.runtime_s()? / 3600.0;
        let threads = self.thread_s.len().max(1) as f64;
        (hours > 0.0).then(|| self.node_migrations as f64 / threads / hours)
    }

    /// Mean of its threads' completion times (\[Rao13\] §2.2 measures a
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
    /// One trace per thread.
    pub threads: Vec<ThreadTrace>,
    /// Per application: MiB on each node (dense id) at each sample.
    pub memory: Vec<MemoryTrace>,
    /// Node count, for the memory plot.
    pub nodes: usize,
    /// CPU count, for the placement plot.
    pub cpus: usize,
}

/// One thread's progress and CPU over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadTrace {
    /// `app/thread-index`.
    pub label: String,
    /// Its application.
    pub app: String,
    /// Fraction of the current run done, 0-1, per sample (resets when the
    /// application restarts); `None` while it is not running.
    pub progress: Vec<Option<f32>>,
    /// The CPU (dense id) it ran on at each sample; `None` while not
    /// running.
    pub cpu: Vec<Option<u32>>,
}

/// One application's memory per node over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryTrace {
    /// The application.
    pub app: String,
    /// `mib[sample][node]`.
    pub mib: Vec<Vec<f64>>,
}

/// One simulated run: one scenario, one policy, one seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The scenario's name.
    pub scenario: String,
    /// The machine's name.
    pub machine: String,
    /// The policy's name (or the oracle's).
    pub policy: String,
    /// The seed.
    pub seed: u64,
    /// Simulated seconds until the last application finished (or the
    /// limit).
    pub makespan_s: f64,
    /// Whether every application finished all its runs.
    pub finished: bool,
    /// Every run of every application, in the order they ended.
    pub runs: Vec<AppRun>,
    /// Threads moved to another CPU, by the policy and by the simulated
    /// Linux scheduler.
    pub thread_migrations: u64,
    /// Threads moved to another node (the costly ones).
    pub node_migrations: u64,
    /// Pages moved between nodes, by the policy or the kernel.
    pub pages_migrated: u64,
    /// The kernel it ran on: automatic NUMA balancing on or off at the
    /// start.
    #[serde(default)]
    pub numa_balancing: bool,
    /// And at the end, after the policy turned it on or off
    /// `numa_balancing_changes` times.
    #[serde(default)]
    pub numa_balancing_end: bool,
    /// Times the policy switched the kernel's NUMA balancing.
    #[serde(default)]
    pub numa_balancing_changes: u64,
    /// Automatic NUMA balancing's hinting faults and the threads it moved
    /// toward their memory (0 when it was off).
    #[serde(default)]
    pub hinting_faults: u64,
    /// Threads the kernel's NUMA balancing moved to another node.
    #[serde(default)]
    pub numa_task_moves: u64,
    /// Over the whole run and all threads: the uncore penalty (cycles an
    /// uncore request is outstanding, divided by the memory-level
    /// parallelism; \[Rao13\] §3.1) and LLC misses per 1000 instructions.
    pub uncore_penalty_cycles: f64,
    /// LLC misses per 1000 instructions, over the whole run.
    pub llc_mpki: f64,
    /// Joules and mean watts, where the machine has a power model.
    pub energy_j: Option<f64>,
    /// See `energy_j`: the mean watts.
    pub mean_power_w: Option<f64>,
    /// Placement and progress over time, where asked for (the report).
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
    /// The policy's name.
    pub policy: String,
    /// The kernel the policy ran on: automatic NUMA balancing on
    /// (`autonuma`, or a scenario or `--numa-balancing on` that asks for
    /// it) or off (the papers' Linux).
    #[serde(default)]
    pub numa_balancing: bool,
    /// Runs in which the policy turned the kernel's balancing on or off
    /// (`auto`'s experiment), and of those how many ended with it on.
    #[serde(default)]
    pub numa_balancing_changed_runs: u32,
    /// Of those, runs that ended with it on.
    #[serde(default)]
    pub numa_balancing_on_at_end_runs: u32,
    /// Mean over seeds of the run's mean runtime, seconds.
    pub mean_runtime_s: f64,
    /// The worst seed's mean runtime.
    pub worst_runtime_s: f64,
    /// Relative standard deviation over seeds, percent.
    pub rsd_percent: f64,
    /// Change of the mean runtime against `default` and against the
    /// oracle's static placement, percent (negative is faster).
    pub vs_default_percent: Option<f64>,
    /// The same against the oracle's placement.
    pub vs_oracle_percent: Option<f64>,
    /// Threads moved between CPUs per simulated hour.
    pub thread_migrations_per_hour: f64,
    /// Pages moved between nodes per simulated hour.
    pub pages_migrated_per_hour: f64,
    /// Mean energy over the seeds, joules, where the machine has a power
    /// model.
    pub energy_j: Option<f64>,
    /// Mean power, watts, likewise.
    pub mean_power_w: Option<f64>,
    /// Seeds whose run did not finish in the scenario's time limit.
    pub unfinished: u32,
    /// Per application (copies of a job grouped as one), over its
    /// finished runs and the seeds.
    #[serde(default)]
    pub per_app: Vec<AppSummary>,
}

/// One application's numbers under one policy, over seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSummary {
    /// The application's name; copies of a job (`leslie3d.0` ...
    /// `leslie3d.15`) are one row, named for the job.
    pub app: String,
    /// Finished runs counted (of all its processes and seeds).
    pub runs: u32,
    /// Mean run time of a run, seconds.
    pub mean_runtime_s: f64,
    /// Moves of a thread to another node per thread and hour of its run
    /// (\[Blagodurov11\] Table 1's memory migrations per hour, per process: under
    /// DI-Migrate and DINO the memory goes along with each such move).
    pub node_migrations_per_hour: f64,
}

/// The job a process belongs to: `leslie3d.7` is a copy of `leslie3d`.
pub fn job_of(app: &str) -> &str {
    match app.rsplit_once('.') {
        Some((job, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => job,
        _ => app,
    }
}

/// Per application, over every run of every seed.
pub fn per_app(runs: &[RunResult]) -> Vec<AppSummary> {
    let mut by: std::collections::BTreeMap<&str, (u32, f64, f64)> = Default::default();
    for a in runs.iter().flat_map(|r| &r.runs) {
        let (Some(t), Some(m)) = (a.runtime_s(), a.node_migrations_per_thread_hour()) else {
            continue;
        };
        let e = by.entry(job_of(&a.app)).or_default();
        e.0 += 1;
        e.1 += t;
        e.2 += m;
    }
    by.into_iter()
        .map(|(app, (n, t, m))| AppSummary {
            app: app.to_string(),
            runs: n,
            mean_runtime_s: t / n as f64,
            node_migrations_per_hour: m / n as f64,
        })
        .collect()
}

/// A comparison: every policy on one scenario over the same seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The scenario's name.
    pub scenario: String,
    /// What the scenario is, in its own words.
    pub description: String,
    /// The machine's name.
    pub machine: String,
    /// The seeds every policy ran on.
    pub seeds: Vec<u64>,
    /// One summary per policy, in the order asked.
    pub policies: Vec<PolicySummary>,
    /// How the oracle's placement was found (exhaustive, or the search
    /// used), if it ran.
    pub oracle: Option<String>,
    /// Where a policy's mean beat the oracle's by more than 1 %: the
    /// search fell short of the best static placement, and the gaps
    /// against it are no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_short: Option<String>,
    /// The world differed from the machine the policies were told: each
    /// machine parameter drawn within ± this many percent, per seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch_percent: Option<f64>,
    /// One run per policy (the first seed), with its trace, for the plots.
    pub examples: Vec<RunResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app_run(app: &str, runtime: f64, node_migrations: u64) -> AppRun {
        AppRun {
            app: app.into(),
            run: 0,
            start_s: 10.0,
            end_s: Some(10.0 + runtime),
            thread_s: vec![Some(runtime)],
            node_migrations,
        }
    }

    #[test]
    fn copies_of_a_job_are_one_application() {
        assert_eq!(job_of("leslie3d.15"), "leslie3d");
        assert_eq!(job_of("403.gcc"), "403.gcc");
        assert_eq!(job_of("mcf"), "mcf");
        assert_eq!(job_of("a."), "a.");
    }

    #[test]
    fn per_app_counts_node_migrations_per_thread_and_hour() {
        let mut r = RunResult {
            scenario: "s".into(),
            machine: "m".into(),
            policy: "p".into(),
            seed: 0,
            makespan_s: 3600.0,
            finished: true,
            runs: vec![
                app_run("lu.0", 1800.0, 2),
                app_run("lu.1", 1800.0, 0),
                app_run("mcf", 3600.0, 5),
            ],
            thread_migrations: 0,
            node_migrations: 7,
            pages_migrated: 0,
            numa_balancing: false,
            numa_balancing_end: false,
            numa_balancing_changes: 0,
            hinting_faults: 0,
            numa_task_moves: 0,
            uncore_penalty_cycles: 0.0,
            llc_mpki: 0.0,
            energy_j: None,
            mean_power_w: None,
            trace: None,
            warnings: Vec::new(),
        };
        // An unfinished run is left out.
        r.runs.push(AppRun {
            end_s: None,
            ..app_run("mcf", 1.0, 100)
        });
        let s = per_app(&[r]);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].app.as_str(), s[0].runs), ("lu", 2));
        assert!((s[0].node_migrations_per_hour - 2.0).abs() < 1e-9);
        assert!((s[0].mean_runtime_s - 1800.0).abs() < 1e-9);
        assert_eq!((s[1].app.as_str(), s[1].runs), ("mcf", 1));
        assert!((s[1].node_migrations_per_hour - 5.0).abs() < 1e-9);
    }
}
