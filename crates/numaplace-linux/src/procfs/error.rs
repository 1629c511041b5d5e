//! Errors of the procfs parsers ([`ParseError`]) and readers ([`ProcError`]).

use std::io;
use std::path::PathBuf;

use numaplace_model::CpuSetParseError;
use thiserror::Error;

/// Why the text of one procfs file was refused. `file` names the kind of
/// file (`stat`, `status`); the reader adds the path.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The text does not have the file's shape at all.
    #[error("{file}: {what}")]
    Malformed { file: &'static str, what: String },
    /// Fewer fields than the kernel has always written: a cut-off read or
    /// not the file it claims to be.
    #[error(
        "{file}: truncated: {found} fields after the command name, need at least {needed} \
         (up to {field})"
    )]
    Truncated {
        file: &'static str,
        found: usize,
        needed: usize,
        field: &'static str,
    },
    /// The text does not end with the newline the kernel always writes:
    /// the read was cut short, possibly inside a number.
    #[error("{file}: no newline at the end: the read was cut short")]
    Unterminated { file: &'static str },
    /// A field every kernel writes is missing.
    #[error("{file}: no {field} line")]
    MissingField {
        file: &'static str,
        field: &'static str,
    },
    /// A field is there but its value is not what the kernel writes.
    #[error("{file}: {field}: {value:?} is not {expected}")]
    InvalidField {
        file: &'static str,
        field: &'static str,
        /// The offending value, cut to a readable length.
        value: String,
        expected: &'static str,
    },
    /// A CPU or node list field failed to parse.
    #[error("{file}: {field}: {source}")]
    List {
        file: &'static str,
        field: &'static str,
        source: CpuSetParseError,
    },
}

impl ParseError {
    pub(crate) fn invalid(
        file: &'static str,
        field: &'static str,
        value: &str,
        expected: &'static str,
    ) -> Self {
        ParseError::InvalidField {
            file,
            field,
            value: shorten(value),
            expected,
        }
    }
}

/// At most 64 characters of `s`, so that an error about garbage input stays
/// one readable line.
pub(crate) fn shorten(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_string(),
    }
}

/// A procfs read failed. Every variant names the path.
#[derive(Debug, Error)]
pub enum ProcError {
    /// The task (or process) exited between being listed and being read
    /// (`ENOENT` / `ESRCH`). Callers walking tasks skip it silently.
    #[error("{path}: the task is gone (it exited)")]
    Gone { path: PathBuf },
    /// Not allowed to read it (`EACCES` / `EPERM`): another user's task,
    /// or a `numa_maps` that needs ptrace access. Run as that user or root.
    #[error("{path}: permission denied (the task belongs to another user; run as root)")]
    Denied { path: PathBuf },
    /// The task is there but the kernel does not provide this file, e.g.
    /// `numa_maps` on a kernel built without `CONFIG_NUMA`.
    #[error("{path}: this kernel does not provide the file (for numa_maps: CONFIG_NUMA is off)")]
    Unavailable { path: PathBuf },
    /// Any other I/O failure.
    #[error("{path}: cannot read")]
    Io { path: PathBuf, source: io::Error },
    /// The file was read but its content was refused.
    #[error("{path}: cannot parse")]
    Parse {
        path: PathBuf,
        #[source]
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
    fn shorten_cuts_long_values_on_char_boundaries() {
        assert_eq!(shorten("abc"), "abc");
        let long = "é".repeat(100);
        let s = shorten(&long);
        assert!(s.ends_with("..."));
        assert_eq!(s.chars().count(), 67);
    }

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
