//! Errors of the procfs readers ([`ProcError`]); the parsers' own
//! ([`ParseError`]) are numaplace-parse's.

use std::io;
use std::path::PathBuf;

pub use numaplace_parse::procfs::ParseError;
use thiserror::Error;

/// A procfs read failed. Every variant names the path.
#[derive(Debug, Error)]
pub enum ProcError {
    /// The task (or process) exited between being listed and being read
    /// (`ENOENT` / `ESRCH`). Callers walking tasks skip it silently.
    #[error("{path}: the task is gone (it exited)")]
    Gone {
        /// The file.
        path: PathBuf,
    },
    /// Not allowed to read it (`EACCES` / `EPERM`): another user's task,
    /// or a `numa_maps` that needs ptrace access. Run as that user or root.
    #[error("{path}: permission denied (the task belongs to another user; run as root)")]
    Denied {
        /// The file.
        path: PathBuf,
    },
    /// The task is there but the kernel does not provide this file, e.g.
    /// `numa_maps` on a kernel built without `CONFIG_NUMA`.
    #[error("{path}: this kernel does not provide the file (for numa_maps: CONFIG_NUMA is off)")]
    Unavailable {
        /// The file.
        path: PathBuf,
    },
    /// Any other I/O failure.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The file was read but its content was refused.
    #[error("{path}: cannot parse")]
    Parse {
        /// The file.
        path: PathBuf,
        #[source]
        /// Why it did not parse.
        error: ParseError,
    },
}

impl ProcError {
    /// Whether the task exited while being read: the error callers skip.
    pub fn is_gone(&self) -> bool {
        matches!(self, ProcError::Gone { .. })
    }

    /// Classifies an I/O error on `path`.
    pub(crate) fn from_io(path: PathBuf, source: io::Error) -> Self {
        // ESRCH is 3 on every Linux architecture; std has no ErrorKind for it.
        const ESRCH: i32 = 3;
        match source.kind() {
            io::ErrorKind::NotFound => ProcError::Gone { path },
            io::ErrorKind::PermissionDenied => ProcError::Denied { path },
            _ if source.raw_os_error() == Some(ESRCH) => ProcError::Gone { path },
            _ => ProcError::Io { path, source },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_classified() {
        let p = || PathBuf::from("/proc/1/stat");
        let e = |k| io::Error::from(k);
        assert!(ProcError::from_io(p(), e(io::ErrorKind::NotFound)).is_gone());
        assert!(ProcError::from_io(p(), io::Error::from_raw_os_error(3)).is_gone());
        assert!(matches!(
            ProcError::from_io(p(), io::Error::from_raw_os_error(1)),
            ProcError::Denied { .. }
        ));
        assert!(matches!(
            ProcError::from_io(p(), io::Error::from_raw_os_error(13)),
            ProcError::Denied { .. }
        ));
        let other = ProcError::from_io(p(), io::Error::from_raw_os_error(5));
        assert!(matches!(other, ProcError::Io { .. }));
        assert!(other.to_string().contains("/proc/1/stat"), "{other}");
    }
}
