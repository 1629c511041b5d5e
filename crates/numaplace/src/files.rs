//! The files numaplace writes where the user says: replaced atomically, or
//! opened for appending, never through a symlink, never onto a device, FIFO
//! or directory.

use crate::error::InputError;

/// Writes `text` to `path` with numaplace's one atomic write
/// ([`numaplace_linux::atomic::write_atomic`]: a temporary file beside it,
/// synced, renamed over it, the directory synced; never through a symlink;
/// exactly `mode`).
pub fn write_atomically(path: &std::path::Path, text: &str, mode: u32) -> anyhow::Result<()> {
    Ok(numaplace_linux::atomic::write_atomic(
        path,
        text.as_bytes(),
        mode,
    )?)
}

/// Opens an output file the user named (a journal): never through a
/// symlink, never a device, FIFO or directory; appended to or truncated.
pub fn open_output(
    path: &std::path::Path,
    what: &str,
    append: bool,
    mode: u32,
) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let refuse = |why: String| InputError(format!("{what} {}: {why}", path.display()));
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.is_file() {
            return Err(refuse(if m.file_type().is_symlink() {
                "a symbolic link; numaplace never writes through one".into()
            } else {
                "not a regular file (a device, FIFO or directory)".into()
            })
            .into());
        }
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .append(append)
        .truncate(!append)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| refuse(format!("cannot open it for writing: {e}")))?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err(refuse("not a regular file".into()).into());
    }
    Ok(f)
}

/// Refuses an output file whose directory does not exist, before any long
/// work runs.
pub fn check_output(path: &std::path::Path, what: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(InputError(format!(
            "{what} {}: the directory {} does not exist",
            path.display(),
            dir.display()
        ))
        .into());
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.is_file() {
            let why = if m.file_type().is_symlink() {
                "a symbolic link; numaplace never writes through one"
            } else {
                "not a regular file (a directory, device or FIFO is there)"
            };
            return Err(InputError(format!("{what} {}: {why}", path.display())).into());
        }
    }
    Ok(())
}
