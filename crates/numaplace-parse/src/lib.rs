//! The pure parsers of what the kernel writes for numaplace: procfs files
//! (`procfs`), the NUMA allocation counters (`numastat`) and perf sample
//! records (`perf_record`). They take text or
//! bytes and never touch the filesystem or make a system call, and this
//! crate depends on nothing of the system (no hwloc, no perf, no libc), so
//! the fuzzers and property tests build and run anywhere.

// 7 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod guest_hints;
pub mod numastat;
// 24 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod perf_record;
pub mod procfs;
