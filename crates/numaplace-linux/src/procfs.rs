//! procfs: what the kernel says about tasks — `stat`, `status`, `comm`,
//! `cmdline`, `cgroup` and `numa_maps` under `/proc/<pid>[/task/<tid>]`.
//!
//! Parsing is separate from I/O: the parsers (numaplace-parse, re-exported
//! here) take the bytes or text of one file and never touch the filesystem
//! (so they can be fed captures, fixtures or fuzz input); [`ProcReader`]
//! binds them to the files under a [`SysRoot`](crate::SysRoot). No parser
//! panics on any input.

mod error;
mod reader;
mod task_dir;

pub use error::{ParseError, ProcError};
pub use numaplace_parse::procfs::{
    CgroupInfo, MappingKind, NodePages, NumaMapping, NumaMaps, TaskStat, TaskStatus, parse_cgroup,
    parse_cmdline, parse_numa_maps, parse_numa_maps_line, parse_stat, parse_status,
};
pub use reader::ProcReader;
pub use task_dir::{TaskBuffers, TaskDir};
