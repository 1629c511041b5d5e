//! The command line: the subcommands, here, and their arguments, in a
//! module per kind of command; the argument groups several share (the
//! policy, the processes in scope, the machine to read) are declared once.
// The doc comments here are the commands' --help text, where `[scope]` is a
// table of the config file and `[::1]` an address, not links to items.
#![allow(rustdoc::broken_intra_doc_links)]

mod bench;
mod daemon;
mod machine;
mod simulator;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use bench::{BenchArgs, CalibrateArgs};
pub use daemon::{AdviseArgs, DoctorArgs, PolicyArgs, RunArgs, ScopeArgs, SelectArgs, TopArgs};
pub use machine::{
    ExecArgs, GuestArgs, MachineArgs, RecordArgs, ReplayArgs, TaskFilterArgs, TasksArgs,
    TopologyArgs,
};
pub use simulator::{
    CompareArgs, GenerateArgs, MAX_MIXES, MAX_SEEDS, MergeArgs, SimArgs, SimulateArgs, TrainArgs,
};

/// The version and the git commit the binary was built from (build.rs),
/// as `numaplace --version` prints them.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("NUMAPLACE_GIT_COMMIT"),
    ")"
);

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
    /// guest's CPUs (Rao13 §4.3's tag and clear), over a virtio-serial
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
        numaplace compare --random 200 --shipped --worst-dir worst/\n  \
        numaplace compare --random 200 --seeds 5 --shard 2/4 > shard-2.json   (one shard of four)")]
    Compare(CompareArgs),

    /// Join the shards of one sweep (`compare --random N --shard K/M`, run
    /// anywhere: the machines of a cluster, a batch array) into the report
    /// `compare --random N` prints unsharded, the same to the byte.
    #[command(after_help = "Examples:\n  \
        numaplace merge shard-1.json shard-2.json shard-3.json shard-4.json\n  \
        numaplace merge --json shard-*.json > sweep.json")]
    Merge(MergeArgs),

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

    /// Run Rao13's NUMA micro-benchmark on this machine: pinned threads
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

    /// Train Bae12's models for `adaptive-mapping` in the simulator: run
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
