//! Helpers the `numaplace` binary's integration tests share; each test file
//! includes this with `#[path = "support/common.rs"] mod common;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the numaplace binary with `args`, without the caller's RUST_LOG.
pub fn numaplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run numaplace")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The repository's top directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// Fails the test (never skips it) when a program it needs is missing.
pub fn require_program(name: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{name} not found on PATH: this test needs it (Debian: apt-get install {package})"
    );
}
