//! The arguments of the simulator's commands: `simulate`, `compare`,
//! `generate` and `train`.

use std::path::PathBuf;

use clap::Args;

use super::MachineArgs;

/// The most seeds `compare` and `train` run (each seed is a whole simulation).
pub const MAX_SEEDS: u64 = 10_000;

/// The most mixes one `compare --random` runs.
pub const MAX_MIXES: u64 = 100_000;

/// What every simulator command shares.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// A built-in scenario's name (`numaplace scenarios` lists them) or a
    /// scenario file (TOML).
    #[arg(long, value_name = "NAME|FILE", default_value = numaplace_sim::scenario::DEFAULT)]
    pub scenario: String,

    /// Simulate this machine preset instead of the scenario's (westmere-2s,
    /// barcelona-4s, core2duo, cascadelake-2s, sapphirerapids-2s-snc4);
    /// `host`: this machine's topology with the default parameters; or a
    /// machine file (`.json`) written by `numaplace calibrate`.
    #[arg(long, value_name = "PRESET|FILE", conflicts_with_all = ["sysfs_root", "xml", "synthetic"])]
    pub machine: Option<String>,

    /// Or any machine numaplace can read, with the simulator's stated
    /// default parameters (docs/simulator.md).
    #[command(flatten)]
    pub topology: MachineArgs,

    /// Time between policy rounds (default: the policy's own).
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,

    /// Run the policies on a simulated kernel with automatic NUMA
    /// balancing on or off (default: as the scenario's [linux] table says,
    /// off unless it turns it on). The yardsticks are fixed: `default` is
    /// Linux with it off, `autonuma` with it on.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub numa_balancing: Option<bool>,

    /// While the simulated kernel balances, who moves memory, as the
    /// daemon's `[engine] memory_mover`: numaplace, kernel or
    /// where-kernel-cannot (the default).
    #[arg(long, value_name = "MOVER", value_parser = parse_mover)]
    pub memory_mover: Option<numaplace_policy::engine::MemoryMover>,

    /// Keep the simulated kernel's balancing as it started, as the
    /// daemon's `[engine] manage_kernel_balancing = false`: `auto` then
    /// does not try the other setting.
    #[arg(long)]
    pub keep_kernel_balancing: bool,

    /// Make the simulated world differ from the machine the policies are
    /// told: each machine parameter of the world (clock, latencies,
    /// bandwidths, queueing, HITM) drawn within ±P % of it, a world per
    /// seed; 0 <= P < 100. Overrides the scenario's `mismatch_percent`.
    #[arg(long, value_name = "P", value_parser = parse_mismatch)]
    pub mismatch: Option<f64>,

    /// Print JSON for programs instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Write an HTML report with plots to this file (compare: default
    /// numaplace-report.html in the current directory).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    pub sim: SimArgs,

    /// The policy to run.
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub policy: String,

    /// Seed of the simulated Linux's random choices.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,

    /// Write every decision, its reason and outcome to this file (JSON lines).
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,

    /// Simulations the oracle may run, every one counted (for `--policy
    /// static`, which holds the oracle's placement).
    #[arg(long, value_name = "N", default_value_t = 300)]
    pub oracle_budget: usize,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub sim: SimArgs,

    /// The policies to compare, comma-separated (default: all but static).
    #[arg(long, value_name = "LIST")]
    pub policies: Option<String>,

    /// Seeds per policy, 1 to 10000.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=MAX_SEEDS))]
    pub seeds: u64,

    /// The first seed.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub first_seed: u64,

    /// Leave out the oracle's static placement.
    #[arg(long)]
    pub no_oracle: bool,

    /// Write no HTML report.
    #[arg(long, conflicts_with = "report")]
    pub no_report: bool,

    /// Also print, per application and policy, the mean run time and the
    /// moves of a thread to another node per thread and hour (Blagodurov11
    /// Table 1's memory migrations per hour). `--json` always has them.
    #[arg(long, conflicts_with = "random")]
    pub per_app: bool,

    /// Simulations the oracle may run, every one counted (candidates,
    /// memory trials, time groups); where threads outnumber CPUs it
    /// searches CPU sets per application and a CPU per thread.
    #[arg(long, value_name = "N", default_value_t = 300)]
    pub oracle_budget: usize,

    /// Simulations run in parallel (default: one per CPU).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,

    /// Instead of one scenario, N generated mixes (mix:SEED for SEED from
    /// --seed on): per policy, the mean and worst change against default,
    /// the share of mixes more than 1 % and 5 % slower, and the worst
    /// mixes written as scenario files (--worst-dir).
    #[arg(long, value_name = "N", conflicts_with_all = ["scenario", "machine", "sysfs_root", "xml", "synthetic", "report"],
          value_parser = clap::value_parser!(u64).range(0..=MAX_MIXES))]
    pub random: Option<u64>,

    /// The first generated mix of --random.
    #[arg(long, value_name = "S", default_value_t = 0, requires = "random")]
    pub seed: u64,

    /// With --random: every shipped scenario too.
    #[arg(long, requires = "random")]
    pub shipped: bool,

    /// With --random: also search the oracle's static placement of each
    /// case (up to --oracle-budget simulations a case, so it takes many
    /// times as long) and say what share of its gain each policy takes
    /// where it bounds them all.
    #[arg(long, requires = "random", conflicts_with = "no_oracle")]
    pub oracle: bool,

    /// With --random: where the worst mixes of each policy are written
    /// (scenario files; --no-report writes none).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "numaplace-worst",
        requires = "random"
    )]
    pub worst_dir: PathBuf,

    /// With --random: run shard K of M only (the cases whose index, mixes
    /// first and then the shipped scenarios, is K - 1 modulo M) and print
    /// their outcomes as JSON; `numaplace merge` joins the M shard files
    /// into the report the whole sweep prints.
    #[arg(long, value_name = "K/M", requires = "random")]
    pub shard: Option<String>,
}

impl CompareArgs {
    /// The policies `compare` runs: `--policies`, or every one but `static`
    /// (which holds the oracle's placement, which the oracle row shows
    /// already, bound at launch rather than at the first round).
    pub fn policy_names(&self) -> Vec<String> {
        match &self.policies {
            Some(list) => list.split(',').map(|s| s.trim().to_string()).collect(),
            None => numaplace_policy::PolicyKind::NAMES
                .iter()
                .filter(|n| **n != "static")
                .map(|n| n.to_string())
                .collect(),
        }
    }
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shard files, as `compare --random N --shard K/M` wrote them:
    /// every shard of one sweep, once, in any order.
    #[arg(value_name = "SHARD", required = true)]
    pub shards: Vec<PathBuf>,

    /// Print JSON for programs instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Where the worst mixes of each policy are written (scenario files).
    #[arg(long, value_name = "DIR", default_value = "numaplace-worst")]
    pub worst_dir: PathBuf,

    /// Write no files (the worst mixes).
    #[arg(long)]
    pub no_report: bool,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The mix's seed (the N of mix:N).
    #[arg(value_name = "SEED")]
    pub seed: u64,

    /// Write the scenario to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// `numaplace train`: fit `adaptive-mapping`'s models in the simulator.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// The coefficient file to write (JSON, mode 0600, replaced atomically).
    #[arg(short, long, value_name = "FILE")]
    pub out: PathBuf,
    /// Machine preset to train on.
    #[arg(long, default_value = "westmere-2s")]
    pub machine: String,
    /// Training benchmarks of Fig. 4: spec, parsec or all.
    #[arg(long, default_value = "spec")]
    pub suite: String,
    /// Seeds per benchmark and mapping, 1 to 10000.
    #[arg(long, default_value_t = 3,
          value_parser = clap::value_parser!(u64).range(1..=MAX_SEEDS))]
    pub seeds: u64,
}

fn parse_mover(s: &str) -> Result<numaplace_policy::engine::MemoryMover, String> {
    use numaplace_policy::engine::MemoryMover;
    [
        MemoryMover::Numaplace,
        MemoryMover::Kernel,
        MemoryMover::WhereKernelCannot,
    ]
    .into_iter()
    .find(|m| m.name() == s)
    .ok_or_else(|| format!("expected numaplace, kernel or where-kernel-cannot, got {s:?}"))
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        other => Err(format!("expected on or off, got {other:?}")),
    }
}

fn parse_mismatch(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number: give a percentage from 0 to below 100"))?;
    numaplace_sim::machine::check_mismatch(p)?;
    Ok(p)
}
