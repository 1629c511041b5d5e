//! The subcommands, a module each (`simulate.rs` also holds `compare`,
//! `scenarios` and `generate`; `record.rs` `replay`; `manual.rs`
//! `completions` and `manpages`; `run` is the library's
//! `numaplace::daemon::run`). Each works on the library alone
//! (`numaplace::`), none on another command.

pub mod advise;
pub mod bench;
pub mod calibrate;
pub mod doctor;
pub mod exec;
pub mod guest;
pub mod manual;
pub mod record;
pub mod show_config;
pub mod simulate;
pub mod tasks;
pub mod top;
pub mod topology;
pub mod train;
