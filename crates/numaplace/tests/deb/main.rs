//! The Debian package: its file list, and its unit under Debian's systemd in
//! a QEMU guest. #[ignore]d (they need `./setup.sh deb` first); `./setup.sh
//! test` runs them after building the package: `cargo test --workspace
//! --test deb -- --ignored --test-threads=1`.
//!
//! Each module was a test binary of its own (tests/NAME.rs); together they
//! link the workspace once.

#[path = "../support/common.rs"]
mod common;

mod package;
mod qemu_guest_systemd;
