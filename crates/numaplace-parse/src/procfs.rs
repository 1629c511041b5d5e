//! The procfs files numaplace reads, parsed from their text or bytes:
//! `stat`, `status`, `statm`, `cmdline`, `cgroup`, `numa_maps` and `sched`
//! under `/proc/<pid>[/task/<tid>]`, `/proc/vmstat`, and the per-CPU times
//! of `/proc/stat`. Nothing here touches the filesystem (the
//! readers in numaplace-linux bind these to paths), and no parser panics on
//! any input.

mod cgroup;
mod cmdline;
mod cpu_times;
mod error;
mod numa_maps;
mod sched;
mod stat;
mod statm;
mod status;

#[cfg(test)]
mod never_panics;

pub use cgroup::{CgroupInfo, parse_cgroup};
pub use cmdline::parse_cmdline;
pub use cpu_times::{CpuTimes, parse_cpu_times};
pub use error::{ParseError, shorten};
pub use numa_maps::{
    MappingKind, NodePages, NumaMapping, NumaMaps, parse_numa_maps, parse_numa_maps_line,
};
pub use sched::{NodeFaults, SchedNuma, parse_sched_numa};
pub use stat::{TaskStat, parse_stat};
pub use statm::{PAGE_MOVES, Statm, parse_statm, parse_vmstat_page_moves};
pub use status::{TaskStatus, parse_status};
