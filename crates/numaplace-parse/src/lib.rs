//! The pure parsers of what the kernel writes for numaplace: procfs files
//! (`procfs`), the NUMA allocation counters (`numastat`) and perf sample
//! records (`perf_record`). They take text or
//! bytes and never touch the filesystem or make a system call, and this
//! crate depends on nothing of the system (no hwloc, no perf, no libc), so
//! the fuzzers and property tests build and run anywhere.

pub mod guest_hints;
pub mod numastat;
pub mod perf_record;
pub mod procfs;
