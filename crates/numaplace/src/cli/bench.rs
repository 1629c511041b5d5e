//! The arguments of the micro-benchmarks run on this machine: `bench` and
//! `calibrate`.

use std::path::PathBuf;

use clap::Args;

/// `numaplace bench`: Rao13 §2.2 (Fig. 3) on this machine.
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

    /// Run one of Rao13's experiments instead: fig4a (data locality),
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
