//! The `numaplace` binary's hermetic command-line tests: topology, simulate
//! and compare, telemetry, top, bench, calibrate, train. Run by the plain
//! `cargo test`.
//!
//! Each module was a test binary of its own (tests/NAME.rs).

#[path = "../support/common.rs"]
mod common;
#[path = "../../../numaplace-linux/tests/support/lstopo.rs"]
mod lstopo;

mod cli;
mod cli_bench;
mod cli_calibrate;
mod cli_shard;
mod cli_simulate;
mod cli_telemetry;
mod cli_top;
mod cli_train;
