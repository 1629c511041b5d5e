//! numaplace's library: what the commands of the `numaplace` binary
//! (main.rs, commands/) share, so that none borrows from another. The
//! daemon's wiring ([`daemon`]), the command line ([`cli`]), the config
//! file ([`config`]), what works on this machine ([`checks`]), what
//! numaplace prints for people ([`report`], [`output`]) and the machine a
//! command reads ([`machine`], [`machine_room`]). The policies, the
//! simulator and the operating system are the other crates'.

// 2 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod checks;
// 4 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod cli;
// 10 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod config;
pub mod daemon;
pub mod duration;
pub mod error;
pub mod files;
pub mod machine;
// 4 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod machine_room;
pub mod output;
pub mod report;
// 2 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod synthetic_counters;
// 9 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod top_state;

#[cfg(test)]
mod deploy_tests;
