//! The QEMU and long tests: guests booted under QEMU, a VM on this host,
//! libvirt inside a guest, the daemon under thread churn. Every test here is
//! #[ignore]d, so the plain `cargo test` skips them; `./setup.sh test` runs
//! them in a phase of their own, one at a time: `cargo test --workspace
//! --test long -- --ignored --test-threads=1`.
//!
//! Each module was a test binary of its own (tests/NAME.rs); together they
//! link the workspace once.

#[path = "../support/common.rs"]
mod common;

mod daemon_churn;
mod numad_divert;
mod qemu_guest_balancing;
mod qemu_guest_bench;
mod qemu_guest_daemon;
mod qemu_guest_dino;
mod qemu_guest_exec;
mod qemu_guest_hints;
mod qemu_guest_memory;
mod qemu_host_qmp;
mod qemu_host_vm;
mod qemu_libvirt_daemon;
mod qemu_libvirt_numad;
