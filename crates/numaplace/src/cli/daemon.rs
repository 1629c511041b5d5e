//! The arguments of the daemon and of the commands that run its policy:
//! `run` and `config` ([`RunArgs`]), `advise`, `top` and `doctor`; the
//! policy and the processes in scope, which `replay` takes too.

use std::path::PathBuf;

use clap::Args;
use numaplace_policy::PolicyKind;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub choice: PolicyArgs,

    /// Time between rounds (default: the policy's own; numad-like 5s,
    /// others 1s); `advise` measures its one round over it, 5s at most.
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,

    /// Decide and journal, apply nothing (`run`; `advise` never applies
    /// and refuses it, as it refuses --journal, --state and --metrics).
    /// Each change is proposed once, journalled from what it changes
    /// (`current`) to what it proposes, outcome not_applied, and shown to
    /// the policy in the next rounds as if applied.
    #[arg(long)]
    pub dry_run: bool,

    #[command(flatten)]
    pub scope: ScopeArgs,

    /// Append every decision, its reason and outcome to this file (JSON lines).
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,

    /// The state file of original affinities (default
    /// /var/lib/numaplace/state.json).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,

    /// Serve metrics (Prometheus text) on 127.0.0.1:PORT, [::1]:PORT or
    /// unix:/PATH.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// This host's machine file, written by `numaplace calibrate` (the
    /// config's `[machine] file`): auto's predictor models this machine
    /// with its measured latencies, bandwidths and clock instead of
    /// generic ones.
    #[arg(long, value_name = "FILE")]
    pub machine: Option<PathBuf>,

    /// Stop after this many rounds (tests, benchmarks).
    #[arg(long, value_name = "N", hide = true)]
    pub rounds: Option<u64>,
}

/// `--policy`'s help: every policy the registry has, by name, so that
/// the list cannot fall behind it.
fn policy_help() -> String {
    format!(
        "The policy: {} (docs/policies.md); default leaves Linux's placement alone, autonuma \
         leaves it to the kernel's NUMA balancing. When neither this nor the config's [policy] \
         names one: auto (the other policies' placements as moves, each kept only if the \
         processes in scope got faster)",
        PolicyKind::NAMES.join(", ")
    )
}

/// The policy and what it may place, as `run`, `advise` and `replay`
/// take them.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    // The help lists the registry's policies (`policy_help`).
    #[arg(long, value_name = "NAME", help = policy_help())]
    pub policy: Option<String>,

    /// The config file (TOML; see examples/numaplace.toml): the policy and
    /// its parameters, the scope, the engine's limits; the flags here
    /// override it. `run` and `advise` read /etc/numaplace/numaplace.toml
    /// when it is left out and present.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Only these CPUs are numaplace's to place onto.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Make up the hardware counters numaplace cannot measure here, for
    /// testing counter-driven policies (dino, di-plain, di-migrate) on a
    /// machine without a PMU, such as a VM, or on a recording made there:
    /// a TOML file of `[[thread]]` rules, each `comm` (a `*`/`?` pattern
    /// on the thread's name), `llc_mpki` (LLC misses per 1000
    /// instructions), `ipc` (instructions per cycle) and optional `ghz`
    /// (default 2.0). Each round a thread whose name matches a rule (the
    /// first) gets cycles = its CPU time × ghz, instructions = cycles ×
    /// ipc, LLC misses = instructions × llc_mpki / 1000; other threads keep
    /// their measured counters. Thread names are untrusted (any program
    /// can take one): a test aid, not for production.
    #[arg(long, value_name = "FILE")]
    pub counters_from: Option<PathBuf>,
}

/// Which processes the daemon may touch (added to the config's [scope]).
#[derive(Debug, Args, Clone, Default, PartialEq, Eq)]
pub struct ScopeArgs {
    /// Every user process.
    #[arg(long)]
    pub all: bool,

    #[command(flatten)]
    pub select: SelectArgs,
}

/// Processes named by pid, name, cgroup or as VMs: the daemon's scope
/// ([`ScopeArgs`]) and the tasks `tasks` shows ([`super::TaskFilterArgs`]).
#[derive(Debug, Args, Clone, Default, PartialEq, Eq)]
pub struct SelectArgs {
    /// This process (repeat for several).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<i32>,

    /// Processes whose name, or a thread's, matches this pattern (`*` and
    /// `?` wildcards; repeat for several). Names are what the tasks call
    /// themselves: a filter, not an identity.
    #[arg(long, value_name = "PATTERN")]
    pub comm: Vec<String>,

    /// Processes in this cgroup v2 subtree, e.g. /system.slice (repeat for
    /// several).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Vec<String>,

    /// Virtual machines.
    #[arg(long)]
    pub vms: bool,
}

#[derive(Debug, Args)]
pub struct AdviseArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// numad's `-w NCPUS[:MB]`: print the NUMA nodes (a list such as 0-1,3)
    /// that hold NCPUS idle CPUs and MB MiB of free memory, the fewest and
    /// nearest, least loaded first; every node, with a warning on stderr,
    /// when the machine has not that much. Nothing else is printed on
    /// stdout (docs/deploy.md: libvirt).
    #[arg(long, value_name = "NCPUS[:MB]", allow_hyphen_values = true,
          conflicts_with_all = ["policy", "config", "cpus", "counters_from", "interval",
              "dry_run", "all", "pid", "comm", "cgroup", "vms", "journal", "state",
              "metrics", "rounds"])]
    pub numad_w: Option<String>,

    /// With --numad-w: read another machine, a directory holding its sys/
    /// and proc/ trees (an extracted snapshot).
    #[arg(long, value_name = "DIR", requires = "numad_w")]
    pub sysfs_root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Show a running daemon: the address its --metrics listens on
    /// (127.0.0.1:PORT, [::1]:PORT or unix:/PATH).
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["policy", "config", "cpus", "counters_from", "all", "pid", "comm", "cgroup", "vms"])]
    pub connect: Option<String>,

    #[command(flatten)]
    pub choice: PolicyArgs,

    /// Without --connect: what the policy may place (every process when
    /// none of these is given).
    #[command(flatten)]
    pub scope: ScopeArgs,

    /// Time between frames.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,

    /// Print one frame as text to stdout and exit (for scripts); without
    /// --connect, after two rounds (the first is the baseline of CPU time).
    #[arg(long)]
    pub once: bool,

    /// With --once: the frame's size, columns x rows.
    #[arg(long, value_name = "COLSxROWS", default_value = "120x40")]
    pub size: String,
}

/// `numaplace doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON for programs instead of the table: one object per row,
    /// with `caps` (what its feature needs, what is missing) and `needed`
    /// (whether the configured policy reads it)
    #[arg(long)]
    pub json: bool,

    /// Judge the exit status by this policy (auto, numad-like, dino, ...)
    /// instead of the config's
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,

    /// The config whose policy (and `[scope] all`, `[engine]
    /// manage_kernel_balancing`) decides what is needed; default
    /// /etc/numaplace/numaplace.toml when present, as `run` reads it
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// How long to sample the counters shown with rates (each node's
    /// numastat, /proc/vmstat's NUMA counters), 0 to 60s; 0 shows them
    /// since boot only
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,
}
