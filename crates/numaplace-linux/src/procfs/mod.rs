//! procfs: what the kernel says about tasks — `stat`, `status`, `comm`,
//! `cmdline`, `cgroup` and `numa_maps` under `/proc/<pid>[/task/<tid>]`.
//!
//! Parsing is separate from I/O: the parsers here take the bytes or text of
//! one file and never touch the filesystem (so they can be fed captures,
//! fixtures or fuzz input); [`ProcReader`] binds them to the files under a
//! [`SysRoot`](crate::SysRoot). No parser panics on any input.

mod cgroup;
mod cmdline;
mod error;
mod numa_maps;
mod reader;
mod stat;
mod status;

#[cfg(test)]
mod never_panics;

pub use cgroup::{CgroupInfo, parse_cgroup};
pub use cmdline::parse_cmdline;
pub use error::{ParseError, ProcError};
pub use numa_maps::{
    MappingKind, NodePages, NumaMapping, NumaMaps, parse_numa_maps, parse_numa_maps_line,
};
pub use reader::ProcReader;
pub use stat::{TaskStat, parse_stat};
pub use status::{TaskStatus, parse_status};
