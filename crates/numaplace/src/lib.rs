//! numaplace's library: what the commands of the `numaplace` binary
//! (main.rs, commands/) share, so that none borrows from another. The
//! daemon's wiring ([`daemon`]), the command line ([`cli`]), the config
//! file ([`config`]), what works on this machine ([`checks`]), what
//! numaplace prints for people ([`report`], [`output`]) and the machine a
//! command reads ([`machine`], [`machine_room`]). The policies, the
//! simulator and the operating system are the other crates'.

pub mod checks;
// clap's derive makes a doc comment --help text: these arguments have
// none on purpose (their help is an #[arg(help)] or their fields' own), and
// one added would change what --help prints.
#[allow(missing_docs)]
pub mod cli;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod error;
pub mod files;
pub mod machine;
pub mod machine_room;
pub mod output;
pub mod report;
pub mod synthetic_counters;
pub mod top_state;

#[cfg(test)]
mod deploy_tests;
