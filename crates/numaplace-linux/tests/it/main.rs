//! numaplace-linux's integration tests: topology discovery against hwloc's
//! lstopo on the shipped sysfs snapshots, synthetic machines, libpfm's
//! encodings, collection on this host. One test binary.
//!
//! Each module was a test binary of its own (tests/NAME.rs); together they
//! link the workspace once.

/// A test's full name in this binary, as `--exact` wants it, for a test
/// that runs itself in a child process: `module::name`, its module's path
/// without the binary's own name.
macro_rules! test_name {
    ($name:literal) => {
        format!(
            "{}::{}",
            module_path!().split_once("::").map_or("", |(_, m)| m),
            $name
        )
    };
}

#[path = "../support/lstopo.rs"]
mod lstopo;

mod collect_carry;
mod collect_live;
mod fixtures_vs_lstopo;
mod libpfm_cpus;
mod lstopo_support_selftest;
mod memory_events_live;
mod synthetic_agrees;
