//! `SysRoot`: the root every OS reader starts from — the live `/`, or a
//! directory holding a snapshot of another machine's `sys/` (and `proc/`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why a directory cannot serve as a root.
#[derive(Debug, Error)]
pub enum SysRootError {
    #[error("{path}: cannot read the root directory")]
    /// The root could not be read.
    Unreadable {
        /// The root.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    #[error("{path}: not a directory; give the directory that holds sys/")]
    /// The root is not a directory.
    NotADirectory {
        /// The root.
        path: PathBuf,
    },
    #[error("{path}: not a Linux sysfs tree: {path}/sys/devices/system/cpu is missing{hint}")]
    /// The root does not look like a machine's.
    NotSysfs {
        /// The root.
        path: PathBuf,
        /// What to give instead.
        hint: &'static str,
    },
}

/// A file read under a root failed.
#[derive(Debug, Error)]
#[error("cannot read {path}")]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// The error.
    pub source: io::Error,
}

/// The root of the filesystem tree readers see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot {
    path: PathBuf,
}

impl SysRoot {
    /// The running machine's own `/`.
    pub fn host() -> Self {
        SysRoot {
            path: PathBuf::from("/"),
        }
    }

    /// Another machine's tree, e.g. an extracted snapshot: the directory
    /// that holds `sys/` (and, for task readers, `proc/`). Checked to be a
    /// Linux sysfs tree now, so later errors are about content, not paths.
    pub fn new(path: impl Into<PathBuf>) -> Result<Self, SysRootError> {
        let path = path.into();
        let meta = fs::metadata(&path).map_err(|source| SysRootError::Unreadable {
            path: path.clone(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(SysRootError::NotADirectory { path });
        }
        fs::read_dir(&path).map_err(|source| SysRootError::Unreadable {
            path: path.clone(),
            source,
        })?;
        if !path.join("sys/devices/system/cpu").is_dir() {
            let hint = if path.join("devices/system/cpu").is_dir() {
                " (this looks like a sys/ directory itself: give its parent)"
            } else {
                " (give the directory that holds sys/, e.g. an extracted snapshot)"
            };
            return Err(SysRootError::NotSysfs { path, hint });
        }
        Ok(SysRoot { path })
    }

    /// Whether this is the live machine's `/`.
    pub fn is_host(&self) -> bool {
        self.path == Path::new("/")
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `rel` (e.g. `sys/devices/system/node/online`) under the root.
    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel.trim_start_matches('/'))
    }

    /// Reads a whole file under the root.
    pub fn read(&self, rel: &str) -> Result<String, ReadError> {
        let path = self.join(rel);
        // Bounded, and never a device or FIFO: a snapshot's file that links
        // to /dev/zero or is a FIFO is an error, not a hang or gigabytes.
        numaplace_io::bounded::read_to_string(&path, numaplace_io::bounded::ROOT_FILE_MAX_BYTES)
            .map_err(|source| ReadError { path, source })
    }

    /// Reads a file that may legitimately be absent (older kernels, other
    /// architectures): `Ok(None)` if it does not exist.
    pub fn read_optional(&self, rel: &str) -> Result<Option<String>, ReadError> {
        match self.read(rel) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.source.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_sysfs_root() {
        let dir = tempfile::tempdir().unwrap();
        let e = SysRoot::new(dir.path().join("absent")).unwrap_err();
        assert!(e.to_string().contains("cannot read the root"), "{e}");

        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        let e = SysRoot::new(&file).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");

        let e = SysRoot::new(dir.path()).unwrap_err();
        assert!(e.to_string().contains("not a Linux sysfs tree"), "{e}");

        fs::create_dir_all(dir.path().join("devices/system/cpu")).unwrap();
        let e = SysRoot::new(dir.path()).unwrap_err();
        assert!(e.to_string().contains("give its parent"), "{e}");
    }

    #[test]
    fn reads_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        fs::write(dir.path().join("sys/devices/system/cpu/online"), "0-3\n").unwrap();
        let root = SysRoot::new(dir.path()).unwrap();
        assert!(!root.is_host());
        assert_eq!(
            root.read("/sys/devices/system/cpu/online").unwrap(),
            "0-3\n"
        );
        assert_eq!(root.read_optional("sys/nothing").unwrap(), None);
        let e = root.read("sys/nothing").unwrap_err();
        assert!(e.to_string().contains("sys/nothing"), "{e}");
        assert!(SysRoot::host().is_host());
    }
}
