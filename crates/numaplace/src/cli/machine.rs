//! The arguments of the commands that read a machine and its tasks:
//! `topology`, `tasks`, `record`, `replay` and `guest`, and of `exec`,
//! which starts a command on it.

use std::path::PathBuf;

use clap::Args;

use super::{PolicyArgs, ScopeArgs, SelectArgs};

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

/// Where to read tasks from and which to show.
#[derive(Debug, Args, Clone, Default)]
pub struct TaskFilterArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// Include kernel threads.
    #[arg(long)]
    pub kernel: bool,
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
