//! The command line: subcommands and the argument groups they share.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The version and the git commit the binary was built from (build.rs),
/// as `numaplace --version` prints them.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("NUMAPLACE_GIT_COMMIT"),
    ")"
);

/// The most seeds `compare` and `train` run (each seed is a whole simulation).
pub const MAX_SEEDS: u64 = 10_000;

/// Places threads, processes and VM vCPUs on the cores and memory nodes of
/// multi-socket Linux machines, so that work contending for caches, memory
/// controllers and the interconnect runs apart, and memory stays near the
/// threads that use it.
#[derive(Debug, Parser)]
#[command(name = "numaplace", version = VERSION, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG
    /// overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// How log lines on stderr are written: `text` (one line each, coloured
    /// only on a terminal) or `json` (one JSON object a line, with its
    /// time, level and fields: for journald's or Loki's parsers).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the machine as the policies see it: packages, NUMA nodes with
    /// their memory, last-level-cache domains, cores, CPUs and the node
    /// distance matrix.
    ///
    /// Reads this machine by default; --sysfs-root, --xml or --synthetic
    /// read another one.
    #[command(after_help = "Examples:\n  \
        numaplace topology\n  \
        numaplace topology --json\n  \
        numaplace topology --sysfs-root ./snapshot      (holds sys/ of another machine)\n  \
        numaplace topology --xml machine.xml            (from `lstopo --of xml`)\n  \
        numaplace topology --synthetic \"pack:2 l3:1 core:4 pu:2\"\n  \
        numaplace topology --cpus 0-3,8                 (what work confined to those CPUs sees)")]
    Topology(TopologyArgs),

    /// List applications and VMs with their threads: where each runs and may
    /// run, memory per node, CPU share, IPC and LLC misses per 1000
    /// instructions where the machine has hardware counters.
    #[command(after_help = "Examples:\n  \
        numaplace tasks                        (user processes; two rounds 500 ms apart)\n  \
        numaplace tasks --vms                  (QEMU/KVM guests and their vCPU threads)\n  \
        numaplace tasks --comm 'postgres*' --cgroup /system.slice\n  \
        numaplace tasks --pid 1234 --json")]
    Tasks(TasksArgs),

    /// Run inside a VM: every interval, tell the host's numaplace which
    /// vCPUs run user threads whose CPU affinity is narrower than the
    /// guest's CPUs (seed 000 §4.3's tag and clear), over a virtio-serial
    /// port; the host's BRM then takes exactly those vCPUs as candidates.
    #[command(after_help = "Examples:\n  \
        numaplace guest                              (port org.numaplace.hints.0, every 1s)\n  \
        numaplace guest --device /dev/vport1p1 --interval 500ms\n  \
        numaplace guest --device - --rounds 3        (print the messages)")]
    Guest(GuestArgs),

    /// Every signal the policies read and every interface numaplace acts
    /// through: where each comes from on this machine (events and their
    /// encodings, files, syscalls), whether it works, which policies read
    /// it, and the one thing to do where it does not.
    /// Each row that needs a capability says whether numaplace has it and,
    /// if not, the unit line that grants it.
    #[command(
        after_help = "Exit status: 0 when every signal and interface the configured \
        policy reads works here (the policy of --policy, else of --config or \
        /etc/numaplace/numaplace.toml, else auto); 3 when one does not (the last line names \
        them), for a readiness probe; 1 on an error, 2 on a bad argument or config.\n\n\
        Examples:\n  \
        numaplace doctor\n  \
        numaplace doctor --policy numad-like      (exit status 0 if numad-like has all it reads)\n  \
        numaplace doctor --config /etc/numaplace/numaplace.toml --json"
    )]
    Doctor(DoctorArgs),

    /// Record what numaplace sees, one snapshot per interval, as JSON lines
    /// (the machine's topology first), for replaying decisions later.
    #[command(
        after_help = "Example:\n  numaplace record --interval 1s --duration 60s -o run.jsonl"
    )]
    Record(RecordArgs),

    /// Read a recording back: summarise each snapshot (or print them as
    /// JSON lines), or, with --policy or --config, replay a policy's
    /// decisions on what was recorded: every round's plan and why, nothing
    /// applied.
    #[command(after_help = "Examples:\n  \
        numaplace replay run.jsonl\n  \
        numaplace replay run.jsonl --policy dino --comm 'mcf*'\n  \
        numaplace replay run.jsonl --config numaplace.toml --json > decisions.jsonl")]
    Replay(ReplayArgs),

    /// Run the daemon: every interval, a policy (auto unless --policy or
    /// the config names another) decides where the threads and memory in
    /// scope should be, and numaplace makes it so. SIGTERM or Ctrl-C
    /// restores every affinity it changed; after a crash, the next start
    /// restores them first.
    #[command(after_help = "Examples:\n  \
        numaplace run --vms --dry-run --journal /tmp/j.jsonl      (auto, the default)\n  \
        numaplace run --policy numad-like --vms --dry-run --journal /tmp/j.jsonl\n  \
        numaplace run --config /etc/numaplace/numaplace.toml\n  \
        numaplace run --policy numad-like --cgroup /machine.slice --metrics 127.0.0.1:9464")]
    Run(RunArgs),

    /// Print the configuration `run` would use, as TOML: the config file
    /// (/etc/numaplace/numaplace.toml when --config is left out and it is
    /// there), the flags given here on top, every default filled in. The
    /// file is checked as `run` checks it; nothing is started.
    #[command(after_help = "Examples:\n  \
        numaplace config --config /etc/numaplace/numaplace.toml\n  \
        numaplace config --policy dino --comm 'mcf*' --interval 2s")]
    Config(RunArgs),

    /// One round of a policy (auto unless --policy or the config names
    /// another) on this machine: the plan and the reason for each action;
    /// nothing is applied.
    ///
    /// With --numad-w, numad's pre-placement query instead: the NUMA nodes
    /// a new VM of so many vCPUs and MiB should start on, as one node list
    /// on stdout, what libvirt's placement='auto' reads from `numad -w`.
    #[command(after_help = "Examples:\n  \
        numaplace advise --all\n  \
        numaplace advise --policy numad-like --all\n  \
        numaplace advise --numad-w 4:8192          (prints e.g. 1 or 0-1)")]
    Advise(AdviseArgs),

    /// Start a command placed where numaplace advises, as `numactl
    /// --cpunodebind=N --preferred=N` does: its CPU affinity (the chosen
    /// nodes' CPUs, within the CPUs numaplace itself may use) and its memory
    /// policy (preferred on the chosen nodes, or --membind, --interleave)
    /// are set, then numaplace becomes the command (execvp: same pid,
    /// signals and exit status). The nodes are --nodes, or else the
    /// fewest, least loaded nodes holding --cpus idle CPUs and --memory free
    /// memory (numad's pre-placement, as `advise --numad-w`). A running
    /// numaplace daemon then treats the command as any other process in its
    /// scope. On a machine with one node the command runs as it is.
    ///
    /// Exit status: the command's own; 127 when it is not found, 126 when
    /// it cannot be executed; 125 when numaplace itself refused or failed
    /// (as env, nice and timeout), saying why on stderr.
    #[command(after_help = "Examples:\n  \
        numaplace exec --cpus 8 --memory 16G -- ./solver input.dat\n  \
        numaplace exec --nodes 1 -- stress-ng --vm 1           (node 1's CPUs, memory preferred there)\n  \
        numaplace exec --nodes 0-1 --interleave -- ./db        (memory interleaved over nodes 0 and 1)\n  \
        numaplace exec --cpus 4 --membind --quiet -- qemu-system-x86_64 ...\n  \
        numaplace exec --cpus 4 --memory 8G --dry-run --json -- true   (the choice, nothing run)")]
    Exec(ExecArgs),

    /// A live view of the machine: nodes (CPUs busy, memory, bandwidth
    /// where measured), groups (processes and VMs: threads, where they run,
    /// memory per node, class, signals) and the latest decisions with
    /// their reasons. With --connect it reads a running daemon's state from
    /// its metrics listener; without, it reads the machine itself and shows
    /// what the policy would decide, applying nothing. Keys: q quit, Tab
    /// switch pane, s / c m t p n sort, r reverse, space pause, arrows
    /// scroll.
    #[command(after_help = "Examples:\n  \
        numaplace top --connect unix:/run/numaplace/metrics.sock\n  \
        numaplace top --all\n  \
        numaplace top --connect 127.0.0.1:9464 --once   (with [metrics] state_over_tcp = true)")]
    Top(TopArgs),

    /// Run one policy on a simulated machine and workload (a scenario):
    /// when each application finished, migrations, energy.
    #[command(after_help = "Examples:\n  \
        numaplace simulate                                  (the built-in default scenario)\n  \
        numaplace simulate --scenario spec-barcelona --policy numad-like --seed 3\n  \
        numaplace simulate --scenario my.toml --report run.html --journal j.jsonl")]
    Simulate(SimulateArgs),

    /// Run every policy on a simulated scenario over the same seeds, with
    /// the oracle's best static placement: mean run time against Linux's
    /// default and the oracle, worst case, spread over seeds, migrations,
    /// energy; a table, JSON, and an HTML report with plots.
    #[command(after_help = "Examples:\n  \
        numaplace compare                                   (the built-in default scenario, 10 seeds)\n  \
        numaplace compare --scenario npb-westmere --policies default,numad-like --seeds 5\n  \
        numaplace compare --scenario my.toml --synthetic \"pack:4 numa:1 l3:1 core:8 pu:1\"\n  \
        numaplace compare --random 200 --seed 1 --seeds 5   (robustness over 200 generated mixes)\n  \
        numaplace compare --random 200 --shipped --worst-dir worst/")]
    Compare(CompareArgs),

    /// List the built-in simulator scenarios.
    Scenarios,

    /// Write a generated mix (a random scenario from a seed: machine,
    /// applications, memory placement, arrivals) as a scenario file, to
    /// keep a case `compare --random` found, or to edit it.
    #[command(after_help = "Examples:\n  \
        numaplace generate 17                    (prints mix 17's scenario)\n  \
        numaplace generate 17 -o slow-mix.toml\n  \
        numaplace compare --scenario mix:17      (runs it without a file)")]
    Generate(GenerateArgs),

    /// Run seed 000's NUMA micro-benchmark on this machine: pinned threads
    /// walk private random lists and add atomically to a shared area; run
    /// time per thread and their mean, and where the memory really is. Or
    /// run one of the paper's experiments (a pair of placements over a
    /// sweep) on this machine's topology.
    #[command(after_help = "Examples:\n  \
        numaplace bench --threads 2 --cpus 0,1 --working-set 64MiB --memory-node 0 --loops 20\n  \
        numaplace bench --threads 4 --nodes 0,1 --working-set 4MiB --shared 128KiB --seconds 2\n  \
        numaplace bench --experiment fig4a            (remote vs local memory over working sets)\n  \
        numaplace bench --experiment fig5c --quick --json")]
    Bench(BenchArgs),

    /// Measure this machine with short micro-benchmarks (memory latency
    /// from each node's CPUs to each node's memory, LLC hit latency, cache
    /// line transfers within and across sockets) and write a machine file
    /// the simulator runs on; what is not measured keeps its stated default.
    #[command(after_help = "Examples:\n  \
        numaplace calibrate --quick -o host.json      (a few seconds; small working sets)\n  \
        numaplace calibrate && numaplace simulate --machine numaplace-machine.json")]
    Calibrate(CalibrateArgs),

    /// Train seed 002's models for `adaptive-mapping` in the simulator: run
    /// the Fig. 4 benchmarks local and interleaved, fit the per-class
    /// performance models by least squares (R² reported), take the
    /// machine's power model, and write the coefficient file (JSON, 0600).
    #[command(after_help = "Examples:\n  \
        numaplace train --out models.json                (SPEC half of Fig. 4, 3 seeds)\n  \
        numaplace train --suite all --seeds 5 --out models.json")]
    Train(TrainArgs),

    /// Print numaplace's completion script for a shell on standard output.
    #[command(after_help = "Examples:\n  \
        numaplace completions bash > /etc/bash_completion.d/numaplace\n  \
        numaplace completions zsh > \"${fpath[1]}/_numaplace\"\n  \
        numaplace completions fish > ~/.config/fish/completions/numaplace.fish")]
    Completions(CompletionsArgs),

    /// Write numaplace's man pages (numaplace.1 and numaplace-COMMAND.1 for
    /// each command) into a directory; the Debian package is built with it.
    #[command(
        hide = true,
        after_help = "Example:\n  numaplace manpages target/man && man -l target/man/numaplace.1"
    )]
    Manpages(ManpagesArgs),
}

/// `numaplace guest`.
#[derive(Debug, Args)]
pub struct GuestArgs {
    /// The name of the virtio-serial port (`/dev/virtio-ports/NAME`, or
    /// the port whose /sys/class/virtio-ports/*/name says it).
    #[arg(long, value_name = "NAME", default_value = numaplace_linux::guest_hints::protocol::DEFAULT_PORT_NAME)]
    pub port: String,

    /// Write to this device instead of the port found by name; `-` for
    /// standard output.
    #[arg(long, value_name = "PATH")]
    pub device: Option<PathBuf>,

    /// Time between messages (the host expires hints after three without one).
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,

    /// Stop after this many messages (default: until SIGTERM or Ctrl-C).
    #[arg(long, value_name = "N")]
    pub rounds: Option<u64>,

    /// Read /proc and /sys under this directory instead of /.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
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

/// `numaplace completions`: a shell's completion script.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `numaplace manpages`: write the man pages.
#[derive(Debug, Args)]
pub struct ManpagesArgs {
    /// The directory to write into (made if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
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

/// `numaplace calibrate`: measure this machine, write a machine file.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The machine file to write (JSON).
    #[arg(
        short,
        long,
        value_name = "FILE",
        default_value = "numaplace-machine.json"
    )]
    pub output: PathBuf,

    /// Small working sets and short runs: a few seconds, less accurate.
    #[arg(long)]
    pub quick: bool,

    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
}

/// `numaplace bench`: seed 000 §2.2 (Fig. 3) on this machine.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Threads (default: one per CPU of --cpus, else 1).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// The CPU of each thread, kernel ids in list syntax (e.g. 0,2 or 4-7):
    /// one CPU per thread, thread i on the i-th lowest.
    #[arg(long, value_name = "LIST", conflicts_with = "nodes")]
    pub cpus: Option<String>,

    /// Put the threads on these nodes' CPUs, round-robin over the nodes
    /// (or filling one node after the other with --pack); separate cores
    /// before hardware threads of the same core.
    #[arg(long, value_name = "LIST")]
    pub nodes: Option<String>,

    /// With --nodes: fill each node's CPUs before using the next node.
    #[arg(long, requires = "nodes")]
    pub pack: bool,

    /// Each thread's private list (64-byte entries), e.g. 16MiB; 0 for none.
    #[arg(long, value_name = "SIZE", default_value = "16MiB")]
    pub working_set: String,

    /// The area all threads add to, in 8-byte words, e.g. 64 (one cache
    /// line) or 128KiB; 0 for none.
    #[arg(long, value_name = "SIZE", default_value = "0")]
    pub shared: String,

    /// Where the memory goes: a node (bound there), `local` (each thread's
    /// list on its own node, the shared area on thread 0's) or
    /// `interleave` (over every node with memory).
    #[arg(long, value_name = "N|local|interleave", default_value = "local")]
    pub memory_node: String,

    /// Loops per thread (list walk, then shared sweep); default 100 (seed
    /// 000 used 1000).
    #[arg(long, value_name = "N", conflicts_with = "seconds")]
    pub loops: Option<u64>,

    /// Or loop for this many seconds per thread.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub seconds: Option<f64>,

    /// Run one of seed 000's experiments instead: fig4a (data locality),
    /// fig4b (LLC contention), fig4c (sharing), fig5a, fig5b, fig5c
    /// (factors combined).
    #[arg(long, value_name = "NAME", conflicts_with_all = [
        "threads", "cpus", "nodes", "working_set", "shared", "memory_node", "loops", "seconds",
    ])]
    pub experiment: Option<String>,

    /// With --experiment: fewer points and 1/32 of the work per point (a
    /// few seconds in all).
    #[arg(long, requires = "experiment")]
    pub quick: bool,

    /// With --experiment: multiply the work per point by this factor
    /// (default 1, or 1/32 with --quick).
    #[arg(
        long,
        value_name = "F",
        requires = "experiment",
        allow_negative_numbers = true
    )]
    pub scale: Option<f64>,

    /// Seed of the lists' random order.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,

    /// Print JSON for programs instead of the table.
    #[arg(long)]
    pub json: bool,
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
    /// moves of a thread to another node per thread and hour (seed 004
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

/// `numaplace exec`: start a command where numaplace advises.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Where the nodes come from when --nodes is not given: auto (the
    /// default) or numad-like, which for a command not yet started are the
    /// same: numad's pre-placement (`numad -w`), the placement `auto` makes
    /// of a group that starts before it has measured anything.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "auto",
        conflicts_with = "nodes"
    )]
    pub policy: String,

    /// Place the command on these NUMA nodes (kernel ids, list syntax: 1,
    /// 0-1, 0,2) instead of where numaplace advises.
    #[arg(long, value_name = "LIST")]
    pub nodes: Option<String>,

    /// CPUs (threads busy at once) the command will use, as numad's `-w
    /// NCPUS`: the advice holds that many idle CPUs.
    #[arg(long, value_name = "N", default_value = "1")]
    pub cpus: String,

    /// Memory the command will use (e.g. 512M, 2G, 1.5GiB): the advice
    /// holds that much free memory.
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,

    /// Memory only on the chosen nodes (MPOL_BIND; allocations fail, and
    /// the OOM killer runs, when they are full) instead of preferred there.
    #[arg(long, conflicts_with = "interleave")]
    pub membind: bool,

    /// Memory interleaved page by page over the chosen nodes
    /// (MPOL_INTERLEAVE) instead of preferred there.
    #[arg(long)]
    pub interleave: bool,

    /// Print the choice and run nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// With --dry-run: the choice as JSON on stdout.
    #[arg(long, requires = "dry_run")]
    pub json: bool,

    /// No line on stderr saying where the command was placed.
    #[arg(short, long)]
    pub quiet: bool,

    /// With --dry-run: read another machine, a directory holding its sys/
    /// and proc/ trees (an extracted snapshot), where every CPU and node
    /// counts as usable and the kernel as having MPOL_PREFERRED_MANY.
    #[arg(long, value_name = "DIR", requires = "dry_run")]
    pub sysfs_root: Option<PathBuf>,

    /// The command and its arguments (after `--` when an argument starts
    /// with `-`); PATH is searched as a shell does.
    #[arg(value_name = "COMMAND", required = true, num_args = 1..,
          trailing_var_arg = true,
          value_parser = clap::value_parser!(std::ffi::OsString))]
    pub command: Vec<std::ffi::OsString>,
}

/// The most mixes one `compare --random` runs.
pub const MAX_MIXES: u64 = 100_000;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The mix's seed (the N of mix:N).
    #[arg(value_name = "SEED")]
    pub seed: u64,

    /// Write the scenario to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Which processes the daemon may touch (added to the config's [scope]).
#[derive(Debug, Args, Clone, Default, PartialEq, Eq)]
pub struct ScopeArgs {
    /// Every user process.
    #[arg(long)]
    pub all: bool,

    /// This process (repeat for several).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<i32>,

    /// Processes whose name or a thread's matches (`*`, `?`; repeat).
    #[arg(long, value_name = "PATTERN")]
    pub comm: Vec<String>,

    /// Processes in this cgroup v2 subtree (repeat).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Vec<String>,

    /// Virtual machines.
    #[arg(long)]
    pub vms: bool,
}

/// The policy and what it may place, as `run`, `advise` and `replay`
/// take them.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// The policy: auto, numad-like, static, di-plain, di-migrate, dino,
    /// brm, symbiosis, adaptive-mapping, or default (leave Linux's placement
    /// alone) (docs/policies.md). When neither this nor the config's
    /// [policy] names one: auto (numad's placement, each move kept only if
    /// the processes in scope got faster).
    #[arg(long, value_name = "NAME")]
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

/// Where to read tasks from and which to show.
#[derive(Debug, Args, Clone, Default)]
pub struct TaskFilterArgs {
    /// Only these processes (repeat for several).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<i32>,

    /// Only applications whose name, or a thread's, matches this pattern
    /// (`*` and `?` wildcards; repeat for several). Names are what the
    /// tasks call themselves: a filter, not an identity.
    #[arg(long, value_name = "PATTERN")]
    pub comm: Vec<String>,

    /// Only processes in this cgroup v2 subtree, e.g. /system.slice (repeat
    /// for several).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Vec<String>,

    /// Only virtual machines.
    #[arg(long)]
    pub vms: bool,

    /// Include kernel threads.
    #[arg(long)]
    pub kernel: bool,
}

#[derive(Debug, Args)]
pub struct TasksArgs {
    #[command(flatten)]
    pub filter: TaskFilterArgs,

    /// Time between the two rounds whose difference gives CPU share and
    /// counters; 0 takes one round and shows no rates.
    #[arg(long, value_name = "DURATION", default_value = "500ms")]
    pub interval: String,

    /// Read /proc and /sys under this directory instead of / (a snapshot
    /// of another machine); no counters are read then.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Print the snapshot as JSON for programs instead of the table.
    #[arg(long)]
    pub json: bool,

    /// The config file whose [vms] says where to find VMs whose vCPU
    /// threads carry no names (QMP sockets, libvirt); the daemon's,
    /// /etc/numaplace/numaplace.toml, when left out and present.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Read the guests' hints (`numaplace guest` in a VM) from the UNIX
    /// sockets this pattern matches (`*`, `?`; repeatable) during
    /// --interval, which should be longer than the guests' own interval.
    #[arg(long, value_name = "PATTERN")]
    pub guest_hints: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Time between snapshots.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub interval: String,

    /// How long to record; without it, until interrupted (Ctrl-C).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// The file to write (created mode 0600: it holds every process's
    /// command line).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,

    /// Leave out memory per node (saves reading every numa_maps).
    #[arg(long)]
    pub no_memory: bool,

    /// Read /proc and /sys under this directory instead of /.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Also record sampled data addresses (PEBS / IBS) of every user
    /// thread, which dino, di-migrate, symbiosis and adaptive-mapping read:
    /// an fd and a ring buffer per thread while recording.
    #[arg(long)]
    pub samples: bool,

    /// Record the guests' hints (`numaplace guest` in a VM) read from the
    /// UNIX sockets this pattern matches (`*`, `?`; repeatable), as the
    /// daemon's `[guest_hints] sockets` does.
    #[arg(long, value_name = "PATTERN")]
    pub guest_hints: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A recording made by `numaplace record`.
    pub file: PathBuf,

    /// Print the snapshots (with --policy: the decisions, in the journal's
    /// format) as JSON lines instead of a summary.
    #[arg(long)]
    pub json: bool,

    /// With --policy or --config: replay that policy's decisions on the
    /// recording, on the recorded machine (--cpus: part of it); a config
    /// without [policy] replays auto, as `run` would run it.
    #[command(flatten)]
    pub choice: PolicyArgs,

    /// The processes the policy manages (pids as recorded); without any,
    /// every recorded process.
    #[command(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Debug, Args)]
pub struct TopologyArgs {
    #[command(flatten)]
    pub machine: MachineArgs,

    /// Show the machine as work confined to these CPUs sees it (kernel list
    /// syntax, e.g. 0-3,8): their cores and caches, and every node's memory.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Print JSON for programs instead of the tree.
    #[arg(long)]
    pub json: bool,
}

/// Which machine to read; the running one if none is given.
#[derive(Debug, Args, Clone, Default)]
#[group(multiple = false)]
pub struct MachineArgs {
    /// Read another machine from a directory holding its sys/ tree (and
    /// proc/), such as an extracted snapshot.
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,

    /// Read a machine from an hwloc XML file, as `lstopo --of xml` writes.
    #[arg(long, value_name = "FILE")]
    pub xml: Option<PathBuf>,

    /// Make up a machine from hwloc's synthetic syntax, levels from the top
    /// with the number of children each, e.g. "pack:2 numa:2 l3:1 core:4 pu:2".
    #[arg(long, value_name = "LEVELS")]
    pub synthetic: Option<String>,
}
