//! The one way numaplace writes a file: all of it or none of it, never
//! through a symlink, with exactly the mode asked for, and durable once
//! this returns. The state file, the decision models, machine files,
//! reports and man pages all go through [`write_atomic`].
//!
//! How: a new temporary file beside the target (created exclusively, with
//! `O_NOFOLLOW`, so nothing already there is followed or reused), its mode
//! set with `fchmod` whatever the umask, the bytes written and synced, the
//! file renamed over the target, then the directory synced so that the
//! rename itself survives a crash. A reader sees the old file or the whole
//! new one. The temporary file is removed if any step fails.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

/// Writing a file failed: which file, at which step, and why.
#[derive(Debug, Error)]
#[error("{path}: cannot {step}: {source}")]
pub struct WriteError {
    /// The file written.
    pub path: PathBuf,
    /// The step that failed (`create`, `rename`).
    pub step: &'static str,
    /// The error.
    #[source]
    pub source: io::Error,
}

/// Writes `bytes` to `path` atomically and durably with permission bits
/// `mode` (see the module's documentation).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), WriteError> {
    let fail = |step: &'static str| {
        move |source: io::Error| WriteError {
            path: path.to_path_buf(),
            step,
            source,
        }
    };
    let name = path
        .file_name()
        .ok_or_else(|| fail("write it")(io::Error::other("not a file name")))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Unique among this process's writers, and the pid among processes.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| -> Result<(), WriteError> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(fail("create a temporary file beside it"))?;
        f.set_permissions(Permissions::from_mode(mode))
            .map_err(fail("set the temporary file's mode"))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .map_err(fail("write the temporary file"))?;
        std::fs::rename(&tmp, path).map_err(fail("rename the temporary file over it"))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(fail("sync its directory"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o777
    }

    #[test]
    fn replaces_the_file_whole_with_the_mode_asked_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        std::fs::write(&p, "old").unwrap();
        for (text, m) in [("new", 0o600), ("newer", 0o644)] {
            write_atomic(&p, text.as_bytes(), m).unwrap();
            assert_eq!(
                (std::fs::read_to_string(&p).unwrap().as_str(), mode(&p)),
                (text, m)
            );
        }
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    /// A symlink planted at the path is replaced, its target untouched;
    /// a missing directory is an error naming the file.
    #[test]
    fn symlinks_are_not_followed_and_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (victim, link) = (dir.path().join("victim"), dir.path().join("link"));
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        write_atomic(&link, b"ours", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::fs::symlink_metadata(&link).unwrap().is_symlink());
        let e = write_atomic(Path::new("/nonexistent-numaplace/x.json"), b"x", 0o600).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent-numaplace/x.json: cannot create"),
            "{e}"
        );
    }
}
