//! Build script: finds the git commit the binary is built from, for
//! `numaplace --version`.
//!
//! `NUMAPLACE_GIT_COMMIT` in the environment wins (a build from a source
//! tarball, where there is no repository, can name its commit that way);
//! otherwise `git` is asked about the repository around this crate, with
//! `-dirty` when tracked files differ from the commit. Without either, the
//! commit is "unknown": a build never fails for want of git.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=NUMAPLACE_GIT_COMMIT");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let commit = match std::env::var("NUMAPLACE_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => from_git(&dir).unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=NUMAPLACE_GIT_COMMIT={commit}");
}

fn from_git(dir: &Path) -> Option<String> {
    let head = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    // Rebuild when HEAD moves (a commit, a checkout) or the index changes
    // (what -dirty is judged against). In a worktree these live apart.
    // (Only files that exist: cargo takes a missing one as changed, every
    // build.)
    let watch = |path: String| {
        let path = dir.join(path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    };
    for p in ["HEAD", "index", "packed-refs"] {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", p]) {
            watch(path);
        }
    }
    if let Some(path) = git(dir, &["symbolic-ref", "-q", "HEAD"])
        .and_then(|r| git(dir, &["rev-parse", "--git-path", &r]))
    {
        watch(path);
    }
    // Judged again whenever the sources change (the workspace's crates and
    // manifests; a directory is scanned whole). --no-optional-locks: a
    // plain `git status` refreshes the index, which would make the next
    // build run this script, and rebuild the binary, for nothing.
    for p in ["../../crates", "../../Cargo.toml", "../../Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", dir.join(p).display());
    }
    let dirty = git(
        dir,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    )
    .is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}
