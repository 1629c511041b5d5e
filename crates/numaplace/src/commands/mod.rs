//! The subcommands, a module each (`simulate.rs` also holds `compare`,
//! `scenarios` and `generate`; `sweep.rs` `compare --random` and `merge`;
//! `record.rs` `replay`; `manual.rs` `completions` and `manpages`; `run` is the library's
//! `numaplace::daemon::run`). Each works on the library alone
//! (`numaplace::`), none on another command.

pub(crate) mod advise;
pub(crate) mod bench;
pub(crate) mod calibrate;
pub(crate) mod doctor;
pub(crate) mod exec;
pub(crate) mod guest;
pub(crate) mod manual;
pub(crate) mod record;
pub(crate) mod show_config;
pub(crate) mod simulate;
pub(crate) mod sweep;
pub(crate) mod tasks;
pub(crate) mod top;
pub(crate) mod topology;
pub(crate) mod train;
