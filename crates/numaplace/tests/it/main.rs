//! The `numaplace` binary's hermetic integration tests: the command line,
//! the daemon on this host with fake or permitted inputs, kubelet and
//! libvirt inputs. One test binary, run by the plain `cargo test`; its one
//! #[ignore]d test, the soak (root, a minute), runs by hand: `cargo test -p
//! numaplace --test it soak:: -- --ignored`.
//!
//! Each module was a test binary of its own (tests/NAME.rs); together they
//! link the workspace once.

#[path = "../support/common.rs"]
mod common;
#[path = "../../../numaplace-linux/tests/support/lstopo.rs"]
mod lstopo;
#[path = "../support/snapshot.rs"]
mod snapshot;

mod cli;
mod cli_bench;
mod cli_calibrate;
mod cli_daemon;
mod cli_doctor;
mod cli_exec;
mod cli_hostile;
mod cli_simulate;
mod cli_telemetry;
mod cli_top;
mod cli_train;
mod kubelet;
mod libvirt_numad;
mod soak;
