//! A real machine's sysfs snapshot extracted for a test, with what the
//! snapshot lacks to be read as a live machine: a `proc/stat` and each
//! node's free memory. A test binary's main.rs includes it with
//! `#[path = "../support/snapshot.rs"] mod snapshot;` beside `common`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use crate::common::text;

/// A machine's sysfs snapshot extracted into a temporary directory, given
/// what the snapshot lacks: a `proc/stat` (every CPU idle: the file does
/// not change, so no CPU counts as busy) and each node's free memory.
pub(crate) struct Machine {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Machine {
    pub(crate) fn new(tarball: &Path, free_mib: &[u64]) -> Machine {
        assert!(tarball.is_file(), "{} is missing", tarball.display());
        let dir = tempfile::tempdir().unwrap();
        let o = std::process::Command::new("tar")
            .arg("-xf")
            .arg(tarball)
            .arg("-C")
            .arg(dir.path())
            .arg("--no-same-owner")
            .output()
            .unwrap();
        assert!(o.status.success(), "tar: {}", text(&o.stderr));
        let root = if dir.path().join("sys").is_dir() {
            dir.path().to_path_buf()
        } else {
            let mut inner = std::fs::read_dir(dir.path()).unwrap();
            inner.next().unwrap().unwrap().path()
        };
        let nodes = root.join("sys/devices/system/node");
        // Every cpuN directory (old snapshots have no cpu/online file).
        let cpus: Vec<u32> = std::fs::read_dir(root.join("sys/devices/system/cpu"))
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                name.strip_prefix("cpu")?.parse().ok()
            })
            .collect();
        assert!(!cpus.is_empty());
        std::fs::create_dir_all(root.join("proc")).unwrap();
        let stat: String = cpus
            .iter()
            .map(|c| format!("cpu{c} 100 0 50 5000 0 0 0 0 0 0\n"))
            .collect();
        std::fs::write(root.join("proc/stat"), stat).unwrap();
        for (n, mib) in free_mib.iter().enumerate() {
            let f = nodes.join(format!("node{n}/meminfo"));
            let old = std::fs::read_to_string(&f).unwrap();
            let total = old
                .lines()
                .find(|l| l.contains("MemTotal:"))
                .unwrap()
                .to_string();
            std::fs::write(
                &f,
                format!(
                    "{total}\nNode {n} MemFree: {} kB\nNode {n} Inactive(file): 0 kB\n",
                    mib * 1024
                ),
            )
            .unwrap();
        }
        Machine { _dir: dir, root }
    }

    /// The distance from node `a` to node `b`, as the snapshot says.
    pub(crate) fn distance(&self, a: usize, b: usize) -> u32 {
        let row = std::fs::read_to_string(
            self.root
                .join(format!("sys/devices/system/node/node{a}/distance")),
        )
        .unwrap();
        row.split_whitespace().nth(b).unwrap().parse().unwrap()
    }
}
