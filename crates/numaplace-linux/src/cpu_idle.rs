//! How idle each CPU is now: `/proc/stat`'s per-CPU times read twice, a
//! short sample apart (numad reads them the same way, update_cpu_data).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use numaplace_parse::procfs::{CpuTimes, ParseError, parse_cpu_times};
use thiserror::Error;

use crate::sysroot::SysRoot;

/// The most of `/proc/stat` read: 4096 CPUs' lines and the interrupt
/// counts of a large machine fit many times over.
const MAX_STAT_BYTES: u64 = 16 << 20;

/// Why the CPUs' idle times could not be read.
#[derive(Debug, Error)]
pub enum CpuIdleError {
    #[error("cannot read {path}")]
    /// `stat` could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    /// `stat` did not parse.
    Parse {
        /// The file.
        path: PathBuf,
        /// The error.
        source: ParseError,
    },
}

/// Each CPU's idle share over the sample (0 busy .. 1 idle), by kernel
/// CPU number; `None` for a CPU whose counters did not move (a snapshot
/// of another machine, whose `proc/stat` never changes, or a CPU that
/// went offline in between).
pub fn sample_idle(
    root: &SysRoot,
    sample: Duration,
) -> Result<BTreeMap<u32, Option<f64>>, CpuIdleError> {
    let before = read(root)?;
    std::thread::sleep(sample);
    let after = read(root)?;
    Ok(after
        .iter()
        .map(|(cpu, now)| {
            let share = before.get(cpu).and_then(|b| now.idle_share_since(b));
            (*cpu, share)
        })
        .collect())
}

fn read(root: &SysRoot) -> Result<BTreeMap<u32, CpuTimes>, CpuIdleError> {
    let path = root.join("proc/stat");
    let text = numaplace_io::bounded::read_to_string(&path, MAX_STAT_BYTES).map_err(|source| {
        CpuIdleError::Read {
            path: path.clone(),
            source,
        }
    })?;
    parse_cpu_times(&text).map_err(|source| CpuIdleError::Parse { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_host_has_an_idle_share_for_its_cpus() {
        let idle = sample_idle(&SysRoot::host(), Duration::from_millis(50)).unwrap();
        assert!(!idle.is_empty());
        for share in idle.values().flatten() {
            assert!((0.0..=1.0).contains(share), "{idle:?}");
        }
    }

    #[test]
    fn a_snapshot_that_never_changes_has_no_share() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/stat"), "cpu0 1 0 1 8 0 0 0 0 0 0\n").unwrap();
        let root = SysRoot::new(dir.path()).unwrap();
        let idle = sample_idle(&root, Duration::ZERO).unwrap();
        assert_eq!(idle, BTreeMap::from([(0, None)]));
    }

    #[test]
    fn a_missing_or_garbled_stat_names_its_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        let root = SysRoot::new(dir.path()).unwrap();
        let e = sample_idle(&root, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("proc/stat"), "{e}");
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/stat"), "cpu0 x\n").unwrap();
        let e = sample_idle(&root, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("proc/stat"), "{e}");
    }
}
