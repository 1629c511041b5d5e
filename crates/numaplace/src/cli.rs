//! The command line: subcommands and the argument groups they share.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Places threads, processes and VM vCPUs on the cores and memory nodes of
/// multi-socket Linux machines, so that work contending for caches, memory
/// controllers and the interconnect runs apart, and memory stays near the
/// threads that use it.
#[derive(Debug, Parser)]
#[command(name = "numaplace", version, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG
    /// overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
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
