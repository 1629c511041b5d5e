//! The `numaplace` binary's hermetic daemon tests: `run` on this host with
//! fake or permitted inputs, doctor, exec, hostile input, kubelet and
//! libvirt inputs. Run by the plain `cargo test`; its one #[ignore]d test,
//! the soak (root, a minute), runs by hand: `cargo test -p numaplace --test
//! daemon soak:: -- --ignored`.
//!
//! Each module was a test binary of its own (tests/NAME.rs).

#[path = "../support/common.rs"]
mod common;
#[path = "../../../numaplace-linux/tests/support/lstopo.rs"]
mod lstopo;
#[path = "../support/snapshot.rs"]
mod snapshot;

mod cli_daemon;
mod cli_doctor;
mod cli_exec;
mod cli_hostile;
mod kubelet;
mod libvirt_numad;
mod soak;
