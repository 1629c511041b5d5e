//! The restore journal: for every thread numaplace pinned, its affinity
//! before numaplace first touched it (`original`) and what numaplace set
//! (`applied`). On a clean stop, and on the next start after a `kill -9`,
//! [`restore_all`] puts the originals back — but only on threads that are
//! still the same task and whose affinity is still what numaplace set.
//! The same for `kernel.numa_balancing`, where a policy turned the kernel's
//! automatic NUMA balancing on or off: the value before numaplace's first
//! change is put back if the value is still the one numaplace wrote
//! (format version 2; a file without that entry is written as version 1,
//! which older numaplace reads). And the memory nodes of libvirt's domains
//! whose nodeset numaplace changed through libvirt (`virsh numatune
//! --nodeset --live`): libvirt's nodeset before the first change, put back
//! the same way if the domain still runs in the same QEMU and its nodeset
//! is still numaplace's (format version 3, written only when such an entry
//! exists; [`crate::actuate::libvirt`] records and restores them).
//!
//! The file is written atomically: a temporary file made in the same
//! directory with `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, written, fsynced,
//! renamed over the target, and the directory fsynced. A symlink or
//! anything but a regular file at the target path, a directory writable by
//! group or others, or a file or directory owned by another user is
//! refused with what to fix: the daemon runs as root, and a planted link
//! must never turn its writes onto another file, nor a planted journal make
//! it pin arbitrary tasks. A file that cannot be parsed is renamed to
//! `<path>.corrupt-<unix time>`, kept for a person to read, and reported
//! ([`StateFile::corrupt`]), so the next start is not blocked; a file of a
//! newer format version is refused instead (a newer numaplace wrote it, and
//! may still need it). One daemon per state file: [`StateFile::open`] takes
//! an exclusive `flock` on `<path>.lock` (never removed, so never raced)
//! and holds it for the daemon's life; a second daemon is refused with the
//! holder's pid.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use numaplace_model::{CpuSet, TaskId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

mod restore;
pub use restore::{Restore, RestoreReport, restore_all};

/// The newest format version read; written when the file holds a libvirt
/// domain's nodeset ([`LibvirtNodesetEntry`]); version 2 when it holds
/// `kernel.numa_balancing` ([`KernelBalancingEntry`]) and no nodeset, else
/// version 1.
const VERSION: u32 = 3;
/// A journal larger than this is not one numaplace wrote.
const MAX_BYTES: u64 = 64 << 20;

/// One pinned thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinEntry {
    /// The thread.
    pub task: TaskId,
    /// Its process.
    pub tgid: i32,
    /// Its affinity before numaplace first pinned it.
    pub original: CpuSet,
    /// What numaplace last set.
    pub applied: CpuSet,
}

/// `kernel.numa_balancing` as numaplace found it and as it last wrote it
/// (the whole bit mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelBalancingEntry {
    /// `kernel.numa_balancing`'s whole value before numaplace changed it.
    pub original: u32,
    /// The value numaplace last wrote.
    pub applied: u32,
}

/// A libvirt domain's memory nodes as libvirt had them and as numaplace
/// set them through libvirt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LibvirtNodesetEntry {
    /// The domain's UUID (what numaplace names it by to libvirt).
    pub domain: String,
    /// Its name, for messages.
    pub name: String,
    /// Its QEMU process (pid and start time): a domain restarted since has
    /// libvirt's nodeset from its XML again.
    pub qemu: TaskId,
    /// The nodeset before numaplace's first change.
    pub original: CpuSet,
    /// What numaplace last set.
    pub applied: CpuSet,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Contents {
    version: u32,
    entries: Vec<PinEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kernel_balancing: Option<KernelBalancingEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    libvirt_nodesets: Vec<LibvirtNodesetEntry>,
}

/// Why the state file cannot be used. Each says what to fix.
#[derive(Debug, Error)]
pub enum StateError {
    #[error(
        "{path}: the state file is a symbolic link; numaplace never writes through one. \
         Remove the link, or choose a state file path that is a regular file"
    )]
    /// The state file is a symbolic link.
    Symlink {
        /// The state file.
        path: PathBuf,
    },
    /// The state file is not a regular file.
    #[error("{path}: not a regular file; remove it or choose another state file path")]
    NotRegular {
        /// The state file.
        path: PathBuf,
    },
    #[error(
        "{path}: writable by group or others (mode {mode:04o}), so another user could \
         plant files there; make it private: chmod go-w {path}"
    )]
    /// The state file may be written by others.
    Writable {
        /// The state file.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    #[error(
        "{path}: owned by uid {owner}, not by numaplace's user (uid {euid}) or root; \
         chown it, or choose another state file path"
    )]
    /// The state file belongs to another user.
    Owner {
        /// The state file.
        path: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// numaplace's effective uid.
        euid: u32,
    },
    #[error(
        "{path}: the state file is in use by another numaplace daemon{holder}; \
         stop it first, or give this one another --state"
    )]
    /// Another daemon holds the state file.
    Locked {
        /// The state file.
        path: PathBuf,
        /// Who holds it, where known (` (pid N)`).
        holder: String,
    },
    #[error(
        "{path}: state file format version {found}, newer than this numaplace's {supported}; \
         run the numaplace that wrote it (or move the file away by hand)"
    )]
    /// A newer numaplace wrote the state file.
    NewerVersion {
        /// The state file.
        path: PathBuf,
        /// The version it says.
        found: u64,
        /// The newest this numaplace reads.
        supported: u32,
    },
    /// Reading or writing it failed.
    #[error("{path}: {what}")]
    Io {
        /// The state file.
        path: PathBuf,
        /// What was being done (`reading`, `renaming`).
        what: &'static str,
        /// The error.
        source: io::Error,
    },
}

fn io_err(path: &Path, what: &'static str) -> impl FnOnce(io::Error) -> StateError + use<> {
    let path = path.to_path_buf();
    move |source| StateError::Io { path, what, source }
}

/// A state file that could not be parsed, moved aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptState {
    /// Where the unreadable file now is.
    pub moved_to: PathBuf,
    /// What was wrong with it.
    pub error: String,
}

/// The journal of pinned threads, on disk.
#[derive(Debug)]
pub struct StateFile {
    path: PathBuf,
    dir: PathBuf,
    entries: Vec<PinEntry>,
    kernel_balancing: Option<KernelBalancingEntry>,
    libvirt_nodesets: Vec<LibvirtNodesetEntry>,
    corrupt: Option<CorruptState>,
    /// `<path>.lock`, exclusively flocked while this value lives.
    _lock: File,
}

impl StateFile {
    /// Opens (or starts) the journal at `path`. A missing file is an empty
    /// journal; nothing is written until the first change.
    pub fn open(path: impl Into<PathBuf>) -> Result<StateFile, StateError> {
        let path: PathBuf = path.into();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if path.file_name().is_none() {
            return Err(StateError::NotRegular { path });
        }
        check_private(&dir)?;
        let lock = lock(&path)?;
        let mut state = StateFile {
            path,
            dir,
            entries: Vec::new(),
            kernel_balancing: None,
            libvirt_nodesets: Vec::new(),
            corrupt: None,
            _lock: lock,
        };
        let Some(bytes) = state.read()? else {
            return Ok(state);
        };
        match parse(&bytes) {
            Ok(c) => {
                state.entries = c.entries;
                state.kernel_balancing = c.kernel_balancing;
                state.libvirt_nodesets = c.libvirt_nodesets;
            }
            Err(Unusable::Newer(found)) => {
                return Err(StateError::NewerVersion {
                    path: state.path.clone(),
                    found,
                    supported: VERSION,
                });
            }
            Err(Unusable::Corrupt(error)) => state.corrupt = Some(state.move_aside(error)?),
        }
        Ok(state)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pinned threads, in the order first recorded.
    pub fn entries(&self) -> &[PinEntry] {
        &self.entries
    }

    /// Set when the file found at open could not be parsed: where it was
    /// moved and why. The journal then starts empty.
    pub fn corrupt(&self) -> Option<&CorruptState> {
        self.corrupt.as_ref()
    }

    /// Records that numaplace set `applied` on a thread whose affinity was
    /// `original`. A thread pinned again keeps its first original.
    pub fn record_pin(
        &mut self,
        task: TaskId,
        tgid: i32,
        original: CpuSet,
        applied: CpuSet,
    ) -> Result<(), StateError> {
        match self.entries.iter_mut().find(|e| e.task == task) {
            Some(e) => e.applied = applied,
            None => self.entries.push(PinEntry {
                task,
                tgid,
                original,
                applied,
            }),
        }
        self.save()
    }

    /// `kernel.numa_balancing` as found and as numaplace set it, if it
    /// changed it.
    pub fn kernel_balancing(&self) -> Option<KernelBalancingEntry> {
        self.kernel_balancing
    }

    /// Records that numaplace writes `applied` to `kernel.numa_balancing`,
    /// whose value is `now`: before the write (write-ahead). The first
    /// original stays.
    pub fn record_kernel_balancing(&mut self, now: u32, applied: u32) -> Result<(), StateError> {
        let original = self.kernel_balancing.map_or(now, |k| k.original);
        self.kernel_balancing = Some(KernelBalancingEntry { original, applied });
        self.save()
    }

    /// The libvirt domains whose nodeset numaplace changed.
    pub fn libvirt_nodesets(&self) -> &[LibvirtNodesetEntry] {
        &self.libvirt_nodesets
    }

    /// Records that numaplace sets `entry.applied` as the nodeset of
    /// domain `entry.domain`, whose nodeset is `entry.original`: before
    /// the change (write-ahead). A domain changed again keeps its first
    /// original (the same QEMU; a restarted domain's entry is replaced).
    /// Whether the entry is new.
    pub fn record_libvirt_nodeset(
        &mut self,
        entry: LibvirtNodesetEntry,
    ) -> Result<bool, StateError> {
        let found = (self.libvirt_nodesets.iter_mut())
            .find(|e| e.domain == entry.domain && e.qemu == entry.qemu);
        let new = match found {
            Some(e) => {
                e.applied = entry.applied;
                false
            }
            None => {
                self.libvirt_nodesets.retain(|e| e.domain != entry.domain);
                self.libvirt_nodesets.push(entry);
                true
            }
        };
        self.save()?;
        Ok(new)
    }

    /// Takes the nodeset entries out to restore them; [`Self::keep_libvirt_nodesets`]
    /// puts back those still to restore.
    pub fn take_libvirt_nodesets(&mut self) -> Vec<LibvirtNodesetEntry> {
        std::mem::take(&mut self.libvirt_nodesets)
    }

    /// The nodeset entries still to restore after a restore, written.
    pub fn keep_libvirt_nodesets(
        &mut self,
        kept: Vec<LibvirtNodesetEntry>,
    ) -> Result<(), StateError> {
        self.libvirt_nodesets = kept;
        self.save()
    }

    /// Drops a thread from the journal; whether it was there.
    pub fn forget(&mut self, task: TaskId) -> Result<bool, StateError> {
        let n = self.entries.len();
        self.entries.retain(|e| e.task != task);
        if self.entries.len() == n {
            return Ok(false);
        }
        self.save()?;
        Ok(true)
    }

    /// Writes the journal; an empty journal removes the file.
    fn save(&self) -> Result<(), StateError> {
        check_private(&self.dir)?;
        match fs::symlink_metadata(&self.path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(StateError::Symlink {
                    path: self.path.clone(),
                });
            }
            Ok(m) if !m.is_file() => {
                return Err(StateError::NotRegular {
                    path: self.path.clone(),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if self.is_empty() {
                    return Ok(());
                }
            }
            Err(e) => return Err(io_err(&self.path, "cannot inspect the state file")(e)),
        }
        if self.is_empty() {
            fs::remove_file(&self.path).map_err(io_err(&self.path, "cannot remove"))?;
            return self.sync_dir();
        }
        let contents = Contents {
            // The oldest version that holds it, for an older numaplace.
            version: if !self.libvirt_nodesets.is_empty() {
                VERSION
            } else if self.kernel_balancing.is_some() {
                2
            } else {
                1
            },
            entries: self.entries.clone(),
            kernel_balancing: self.kernel_balancing,
            libvirt_nodesets: self.libvirt_nodesets.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&contents).expect("serializable");
        bytes.push(b'\n');
        self.write_atomic(&bytes)
    }

    /// Nothing to restore.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
            && self.kernel_balancing.is_none()
            && self.libvirt_nodesets.is_empty()
    }

    fn write_atomic(&self, bytes: &[u8]) -> Result<(), StateError> {
        crate::atomic::write_atomic(&self.path, bytes, 0o600)
            .map_err(|e| io_err(&self.path, "cannot write the state file")(e.source))
    }

    fn sync_dir(&self) -> Result<(), StateError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.dir, "cannot fsync the state directory"))
    }

    /// The file's text, `None` if there is none. Never follows a symlink.
    fn read(&self) -> Result<Option<Vec<u8>>, StateError> {
        let path = &self.path;
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(path, "cannot inspect the state file")(e)),
            Ok(m) if m.file_type().is_symlink() => {
                return Err(StateError::Symlink { path: path.clone() });
            }
            Ok(m) if !m.is_file() => return Err(StateError::NotRegular { path: path.clone() }),
            Ok(_) => {}
        }
        let mut f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => StateError::Symlink { path: path.clone() },
                _ => io_err(path, "cannot open the state file")(e),
            })?;
        let meta = f.metadata().map_err(io_err(path, "cannot inspect"))?;
        if !meta.is_file() {
            return Err(StateError::NotRegular { path: path.clone() });
        }
        check_owner_mode(path, &meta)?;
        let mut bytes = Vec::new();
        // One byte more than allowed, so parse() can tell it is too large.
        Read::by_ref(&mut f)
            .take(MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io_err(path, "cannot read the state file"))?;
        Ok(Some(bytes))
    }

    /// Renames an unreadable file to `<path>.corrupt-<unix time>`.
    fn move_aside(&self, error: String) -> Result<CorruptState, StateError> {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let base = format!("{}.corrupt-{secs}", self.path.display());
        let mut moved_to = PathBuf::from(&base);
        let mut n = 1;
        while fs::symlink_metadata(&moved_to).is_ok() {
            moved_to = PathBuf::from(format!("{base}.{n}"));
            n += 1;
        }
        fs::rename(&self.path, &moved_to).map_err(io_err(
            &self.path,
            "cannot move the corrupt state file aside",
        ))?;
        self.sync_dir()?;
        tracing::warn!(
            path = %self.path.display(),
            moved_to = %moved_to.display(),
            %error,
            "the state file could not be read; moved it aside and started a new one \
             (original affinities it held cannot be restored automatically)"
        );
        Ok(CorruptState { moved_to, error })
    }
}

/// Takes the exclusive lock of the state file at `path`, or says which
/// process holds it. The lock file holds the holder's pid, for that message.
fn lock(path: &Path) -> Result<File, StateError> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&lock_path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => StateError::Symlink {
                path: lock_path.clone(),
            },
            _ => io_err(&lock_path, "cannot open the state file's lock")(e),
        })?;
    let meta = f.metadata().map_err(io_err(&lock_path, "cannot inspect"))?;
    if !meta.is_file() {
        return Err(StateError::NotRegular { path: lock_path });
    }
    check_owner_mode(&lock_path, &meta)?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io_err(&lock_path, "cannot lock the state file")(e));
        }
        let mut text = String::new();
        let _ = Read::by_ref(&mut f).take(32).read_to_string(&mut text);
        let holder = match text.trim().parse::<u32>() {
            Ok(pid) => format!(" (pid {pid})"),
            Err(_) => String::new(),
        };
        return Err(StateError::Locked {
            path: path.to_path_buf(),
            holder,
        });
    }
    let write_pid = || -> io::Result<()> {
        f.set_len(0)?;
        (&f).write_all(format!("{}\n", std::process::id()).as_bytes())
    };
    write_pid().map_err(io_err(&lock_path, "cannot write the state file's lock"))?;
    Ok(f)
}

/// Why the bytes of a state file cannot be used.
enum Unusable {
    /// Written by a newer numaplace (a format version above ours).
    Newer(u64),
    Corrupt(String),
}

/// What a state file holds: the pinned threads, `kernel.numa_balancing`
/// and libvirt's nodesets where numaplace changed them.
fn parse(bytes: &[u8]) -> Result<Contents, Unusable> {
    let corrupt = Unusable::Corrupt;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(corrupt(format!(
            "larger than {MAX_BYTES} bytes: not a journal numaplace wrote"
        )));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| corrupt(format!("not UTF-8 text: {e}")))?;
    if text.trim().is_empty() {
        return Ok(Contents {
            version: 1,
            entries: Vec::new(),
            kernel_balancing: None,
            libvirt_nodesets: Vec::new(),
        });
    }
    // The version first, so a newer file is refused rather than moved aside.
    let version = (serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|v| v.get("version").and_then(|v| v.as_u64()));
    if let Some(found) = version.filter(|&found| found > VERSION as u64) {
        return Err(Unusable::Newer(found));
    }
    let c: Contents =
        serde_json::from_str(text).map_err(|e| corrupt(format!("not a state file: {e}")))?;
    if c.version == 0 || c.version > VERSION {
        return Err(corrupt(format!(
            "state file version {} (this numaplace reads versions 1 to {VERSION})",
            c.version
        )));
    }
    Ok(c)
}

/// The directory must be ours or root's and not writable by group or
/// others.
fn check_private(path: &Path) -> Result<(), StateError> {
    let meta = fs::metadata(path).map_err(io_err(
        path,
        "cannot use the state directory (create it first: mkdir -m 700 DIR)",
    ))?;
    if !meta.is_dir() {
        return Err(StateError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    check_owner_mode(path, &meta)
}

fn check_owner_mode(path: &Path, meta: &fs::Metadata) -> Result<(), StateError> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid && meta.uid() != 0 {
        return Err(StateError::Owner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            euid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(StateError::Writable {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuate::testing::{Parked, allowed, pid};
    use crate::actuate::{Actuator, AffinityError};
    use crate::actuate::{HostActuator, RecordingActuator};
    use numaplace_model::{Action, Outcome};
    use std::os::unix::fs::PermissionsExt;

    fn set(list: &str) -> CpuSet {
        CpuSet::parse_list(list).unwrap()
    }

    fn id(tid: i32, start_time: u64) -> TaskId {
        TaskId { tid, start_time }
    }

    fn private_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn records_and_loads_and_keeps_the_first_original() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut s = StateFile::open(&path).unwrap();
        assert!(s.entries().is_empty());
        assert!(!path.exists(), "nothing written before the first change");
        s.record_pin(id(10, 5), 10, set("0-7"), set("0")).unwrap();
        s.record_pin(id(11, 6), 10, set("0-7"), set("1")).unwrap();
        // Pinned again: the first original stays.
        s.record_pin(id(10, 5), 10, set("0"), set("2-3")).unwrap();
        let written = s.entries().to_vec();
        drop(s); // as a daemon that stops: the next one takes the lock
        let loaded = StateFile::open(&path).unwrap();
        assert!(loaded.corrupt().is_none());
        assert_eq!(loaded.entries(), written);
        assert_eq!(
            loaded.entries()[0],
            PinEntry {
                task: id(10, 5),
                tgid: 10,
                original: set("0-7"),
                applied: set("2-3"),
            }
        );
        let mut s = loaded;
        assert!(s.forget(id(10, 5)).unwrap());
        assert!(!s.forget(id(10, 5)).unwrap());
        assert_eq!(
            parse(&fs::read(&path).unwrap()).ok().unwrap().entries.len(),
            1
        );
        assert!(s.forget(id(11, 6)).unwrap());
        assert!(!path.exists(), "an empty journal is no file");
    }

    #[test]
    fn writes_are_atomic_private_and_leave_no_temporary_files() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut s = StateFile::open(&path).unwrap();
        for i in 0..20 {
            s.record_pin(id(100 + i, 1), 100, set("0-3"), set("0"))
                .unwrap();
        }
        assert_eq!(names(d.path()), ["state.json", "state.json.lock"]);
        let meta = fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.mode() & 0o7777, 0o600);
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"version\": 1"), "{text}");
    }

    #[test]
    fn a_symlink_at_the_path_is_refused_and_its_target_untouched() {
        let d = private_dir();
        let victim = d.path().join("victim");
        fs::write(&victim, "precious\n").unwrap();
        let path = d.path().join("state.json");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let e = StateFile::open(&path).unwrap_err();
        assert!(matches!(e, StateError::Symlink { .. }), "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // Planted after open: the write is refused too.
        fs::remove_file(&path).unwrap();
        let mut s = StateFile::open(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let e = s.record_pin(id(1, 1), 1, set("0"), set("0")).unwrap_err();
        assert!(matches!(e, StateError::Symlink { .. }), "{e}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(
            fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(names(d.path()), ["state.json", "state.json.lock", "victim"]);
    }

    #[test]
    fn unsafe_places_are_refused_with_what_to_fix() {
        let d = private_dir();
        let path = d.path().join("state.json");
        fs::create_dir(&path).unwrap();
        let e = StateFile::open(&path).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");

        let open = d.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let e = StateFile::open(open.join("state.json")).unwrap_err();
        assert!(matches!(e, StateError::Writable { .. }), "{e}");
        assert!(e.to_string().contains("chmod go-w"), "{e}");

        let loose = d.path().join("loose.json");
        fs::write(&loose, "").unwrap();
        fs::set_permissions(&loose, fs::Permissions::from_mode(0o666)).unwrap();
        let e = StateFile::open(&loose).unwrap_err();
        assert!(e.to_string().contains("mode 0666"), "{e}");

        let e = StateFile::open(d.path().join("absent/state.json")).unwrap_err();
        assert!(e.to_string().contains("mkdir -m 700"), "{e}");
    }

    #[test]
    fn a_corrupt_file_is_moved_aside_and_reported() {
        let d = private_dir();
        let path = d.path().join("state.json");
        for garbage in [
            &b"{\"version\": 1, \"entries\": [ {\"task\": "[..],
            b"{\"version\": 0, \"entries\": []}",
            b"\xff\xfe not text",
        ] {
            fs::write(&path, garbage).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
            let s = StateFile::open(&path).unwrap();
            assert!(s.entries().is_empty());
            let c = s.corrupt().expect("reported").clone();
            drop(s);
            assert!(!path.exists());
            assert_eq!(fs::read(&c.moved_to).unwrap(), garbage, "kept for a person");
            assert!(
                c.moved_to.to_string_lossy().contains("state.json.corrupt-"),
                "{c:?}"
            );
            // The next start is not blocked.
            let s = StateFile::open(&path).unwrap();
            assert!(s.corrupt().is_none());
        }
        assert_eq!(
            names(d.path()).len(),
            4,
            "three distinct corrupt copies and the lock"
        );
        // An empty file (a crash before any write numaplace does) is empty.
        fs::write(&path, "").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let s = StateFile::open(&path).unwrap();
        assert!(s.corrupt().is_none() && s.entries().is_empty());
    }

    #[test]
    fn restores_the_original_affinity_of_live_threads() {
        let all = allowed();
        if all.len() < 2 {
            eprintln!("skipped: needs two CPUs");
            return;
        }
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut act = HostActuator::new();
        let t = Parked::spawn();
        let original = act.affinity(t.id, pid()).unwrap();
        let to = set(&all.first().unwrap().to_string());
        let mut s = StateFile::open(&path).unwrap();
        assert_eq!(act.pin(t.id, pid(), &to), Outcome::Done);
        s.record_pin(t.id, pid(), original.clone(), to.clone())
            .unwrap();
        // As after a kill -9 (which ends the lock): a new daemon opens it.
        drop(s);
        let mut s = StateFile::open(&path).unwrap();
        let report = restore_all(&mut s, &mut act);
        assert_eq!(report.entries.len(), 1);
        assert_eq!(report.entries[0].1, Restore::Restored);
        assert!(report.save_error.is_none());
        assert_eq!(act.affinity(t.id, pid()).unwrap(), original);
        assert!(s.entries().is_empty());
        assert!(!path.exists());
    }

    #[test]
    fn a_thread_that_pinned_itself_is_left_alone_and_gone_ones_dropped() {
        let all = allowed();
        if all.len() < 2 {
            eprintln!("skipped: needs two CPUs");
            return;
        }
        let (a, b) = (all.first().unwrap(), all.last().unwrap());
        let d = private_dir();
        let mut s = StateFile::open(d.path().join("state.json")).unwrap();
        let mut act = HostActuator::new();
        let t = Parked::spawn();
        assert_eq!(act.pin(t.id, pid(), &set(&a.to_string())), Outcome::Done);
        s.record_pin(t.id, pid(), all.clone(), set(&a.to_string()))
            .unwrap();
        t.pin_self(b);
        let gone = Parked::spawn();
        s.record_pin(gone.id, pid(), all.clone(), set(&a.to_string()))
            .unwrap();
        let gone_id = gone.exit();
        let report = restore_all(&mut s, &mut act);
        let r: Vec<_> = report.entries.iter().map(|(e, r)| (e.task, r)).collect();
        assert!(
            matches!(r[0], (task, Restore::LeftAlone { why }) if task == t.id
                && why.contains("the task set its own affinity")),
            "{r:?}"
        );
        assert_eq!(r[1], (gone_id, &Restore::Gone));
        assert_eq!(act.affinity(t.id, pid()).unwrap(), set(&b.to_string()));
        assert!(s.entries().is_empty());
    }

    #[test]
    fn entries_that_cannot_be_restored_now_are_kept() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut s = StateFile::open(&path).unwrap();
        s.record_pin(id(1, 1), 1, set("0-3"), set("0")).unwrap();
        s.record_pin(id(2, 2), 1, set("0-3"), set("1")).unwrap();
        s.record_pin(id(3, 3), 1, set("0-3"), set("1")).unwrap();
        let mut rec = RecordingActuator::new();
        rec.set_affinity(id(1, 1), set("0")); // unchanged: restore (dry run)
        rec.set_affinity(id(2, 2), set("2")); // changed by the task
        // id(3, 3): gone
        let report = restore_all(&mut s, &mut rec);
        let r: Vec<_> = report.entries.iter().map(|(_, r)| r.clone()).collect();
        assert!(matches!(&r[0], Restore::Kept { why } if why.contains("dry run")));
        assert!(matches!(&r[1], Restore::LeftAlone { .. }));
        assert_eq!(r[2], Restore::Gone);
        assert_eq!(report.count(|r| matches!(r, Restore::Kept { .. })), 1);
        assert_eq!(
            rec.actions,
            &[Action::Pin {
                task: id(1, 1),
                tgid: 1,
                cpus: set("0-3"),
            }]
        );
        drop(s);
        let again = StateFile::open(&path).unwrap();
        assert_eq!(again.entries().len(), 1);
        assert_eq!(again.entries()[0].task, id(1, 1));
    }

    #[test]
    fn a_second_daemon_on_the_same_state_file_is_refused_naming_the_holder() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut first = StateFile::open(&path).unwrap();
        first
            .record_pin(id(10, 5), 10, set("0-7"), set("0"))
            .unwrap();
        // flock locks belong to the open file description: a second open in
        // this process conflicts as a second daemon would.
        let e = StateFile::open(&path).unwrap_err();
        assert!(matches!(e, StateError::Locked { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("(pid {})", std::process::id()))
                && text.contains("another --state"),
            "{text}"
        );
        // The first daemon's journal is untouched.
        assert_eq!(
            fs::read_to_string(&path)
                .unwrap()
                .matches("\"tid\"")
                .count(),
            1
        );
        drop(first);
        let again = StateFile::open(&path).unwrap();
        assert_eq!(again.entries().len(), 1);
    }

    #[test]
    fn a_state_file_of_a_newer_version_is_refused_and_left_in_place() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let newer = b"{\"version\": 99, \"entries\": [], \"more\": 1}";
        fs::write(&path, newer).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let e = StateFile::open(&path).unwrap_err();
        assert!(
            matches!(e, StateError::NewerVersion { found: 99, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("version 99, newer"), "{e}");
        assert_eq!(fs::read(&path).unwrap(), newer);
    }

    /// A planted entry naming kthreadd (tid 2) with its true start time and
    /// affinity: restore must leave the kernel thread alone.
    #[test]
    fn restore_never_touches_a_kernel_thread() {
        let Ok(stat) = fs::read("/proc/2/stat") else {
            eprintln!("skipped: no /proc/2");
            return;
        };
        let stat = crate::procfs::parse_stat(&stat).unwrap();
        if !stat.is_kernel_thread() {
            eprintln!("skipped: pid 2 is not a kernel thread here (a container?)");
            return;
        }
        let mut act = HostActuator::new();
        let task = id(2, stat.start_time);
        let before = crate::actuate::thread_affinity(2, 8192).unwrap();
        let d = private_dir();
        let mut s = StateFile::open(d.path().join("state.json")).unwrap();
        let first = set(&before.first().unwrap().to_string());
        // An entry as numaplace writes them (what it set within the
        // original), so that only the kernel-thread rule stops it.
        s.record_pin(task, 2, before.clone(), first.clone())
            .unwrap();
        let report = restore_all(&mut s, &mut act);
        assert!(
            matches!(&report.entries[0].1, Restore::LeftAlone { why } if why.contains("kernel thread")),
            "{report}"
        );
        assert_eq!(crate::actuate::thread_affinity(2, 8192).unwrap(), before);
        assert!(s.entries().is_empty());
        // Nor does a pin.
        let pin = Action::Pin {
            task,
            tgid: 2,
            cpus: first,
        };
        assert!(matches!(act.apply(&pin), Outcome::Refused { .. }));
        assert_eq!(crate::actuate::thread_affinity(2, 8192).unwrap(), before);
    }

    /// A world whose `kernel.numa_balancing` is a value in memory.
    struct Sysctl {
        value: Option<u32>,
        writes: Vec<u32>,
    }

    impl Actuator for Sysctl {
        fn apply(&mut self, _: &Action) -> Outcome {
            Outcome::Gone
        }

        fn affinity(&self, _: TaskId, _: i32) -> Result<CpuSet, AffinityError> {
            Err(AffinityError::Gone)
        }

        fn kernel_balancing_value(&self) -> Option<Result<u32, String>> {
            self.value.map(Ok)
        }

        fn set_kernel_balancing_value(&mut self, value: u32) -> Result<(), String> {
            self.writes.push(value);
            self.value = Some(value);
            Ok(())
        }
    }

    #[test]
    fn the_kernels_balancing_is_recorded_first_and_put_back_only_if_still_ours() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut s = StateFile::open(&path).unwrap();
        // Found 3 (balancing and tiering), turned off (2), then on (3)
        // and off again: the first original stays.
        s.record_kernel_balancing(3, 2).unwrap();
        s.record_kernel_balancing(2, 3).unwrap();
        s.record_kernel_balancing(3, 2).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"version\": 2"), "{text}");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        drop(s);
        let mut s = StateFile::open(&path).unwrap();
        assert_eq!(
            s.kernel_balancing(),
            Some(KernelBalancingEntry {
                original: 3,
                applied: 2
            })
        );
        // Still what numaplace wrote: put back, the file removed.
        let mut world = Sysctl {
            value: Some(2),
            writes: Vec::new(),
        };
        let report = restore_all(&mut s, &mut world);
        assert_eq!(world.writes, vec![3]);
        assert!(
            report
                .to_string()
                .contains("kernel.numa_balancing back to 3"),
            "{report}"
        );
        assert!(!path.exists());
        drop(s);

        // Changed by someone since: left as it is.
        let mut s = StateFile::open(&path).unwrap();
        s.record_kernel_balancing(1, 0).unwrap();
        let mut world = Sysctl {
            value: Some(1),
            writes: Vec::new(),
        };
        let report = restore_all(&mut s, &mut world);
        assert!(world.writes.is_empty());
        assert!(
            report.to_string().contains("someone changed it"),
            "{report}"
        );
        assert!(!path.exists());
        drop(s);

        // A dry run cannot restore it: kept for a later restore.
        let mut s = StateFile::open(&path).unwrap();
        s.record_kernel_balancing(1, 0).unwrap();
        let report = restore_all(&mut s, &mut RecordingActuator::default());
        assert!(
            report.to_string().contains("kept to restore later"),
            "{report}"
        );
        assert!(s.kernel_balancing().is_some());
        assert!(path.exists());
    }

    /// Entries numaplace would not have written are never acted on, and the
    /// restore line says why for each: a value the kernel does not take, an
    /// entry that would narrow a thread. A pin written ahead that never
    /// took effect is said as that, not as a thread that set its own.
    #[test]
    fn entries_numaplace_did_not_write_are_said_and_never_acted_on() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut s = StateFile::open(&path).unwrap();
        s.record_kernel_balancing(7, 0).unwrap();
        let mut world = Sysctl {
            value: Some(0),
            writes: Vec::new(),
        };
        let report = restore_all(&mut s, &mut world);
        assert!(
            world.writes.is_empty(),
            "7 written back: {:?}",
            world.writes
        );
        assert!(
            report
                .to_string()
                .contains("not values kernel.numa_balancing takes (0 to 3)"),
            "{report}"
        );
        drop(s);

        let all = allowed();
        if all.len() < 2 {
            eprintln!("skipped the affinity cases: needs two CPUs");
            return;
        }
        let a = set(&all.first().unwrap().to_string());
        let mut s = StateFile::open(&path).unwrap();
        let mut act = HostActuator::new();
        // Would narrow a thread from all its CPUs to one.
        let narrowed = Parked::spawn();
        s.record_pin(narrowed.id, pid(), a.clone(), all.clone())
            .unwrap();
        // Written ahead, never applied: the thread has its original.
        let never = Parked::spawn();
        s.record_pin(never.id, pid(), all.clone(), a.clone())
            .unwrap();
        let report = restore_all(&mut s, &mut act);
        assert_eq!(act.affinity(narrowed.id, pid()).unwrap(), all);
        assert_eq!(act.affinity(never.id, pid()).unwrap(), all);
        let line = report.to_string();
        assert!(
            line.starts_with("0 restored, 2 left alone, 0 gone"),
            "{line}"
        );
        assert!(!line.contains("set their own"), "{line}");
        assert!(
            line.contains(&format!(
                "thread {} left alone: its entry would narrow it",
                narrowed.id.tid
            )),
            "{line}"
        );
        assert!(
            line.contains(&format!(
                "thread {} left alone: its affinity is its original",
                never.id.tid
            )) && line.contains("the pin never took effect"),
            "{line}"
        );
        assert!(s.entries().is_empty());
    }

    #[test]
    fn a_file_without_the_kernels_balancing_is_still_version_1() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut s = StateFile::open(&path).unwrap();
        s.record_pin(id(10, 5), 10, set("0-7"), set("0")).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"version\": 1"), "{text}");
        assert!(!text.contains("kernel_balancing"), "{text}");
        // Version 4 is a newer numaplace's: refused, not moved aside.
        drop(s);
        fs::write(&path, r#"{"version": 4, "entries": []}"#).unwrap();
        assert!(matches!(
            StateFile::open(&path),
            Err(StateError::NewerVersion { found: 4, .. })
        ));
    }

    fn nodeset(domain: &str, start: u64, original: &str, applied: &str) -> LibvirtNodesetEntry {
        LibvirtNodesetEntry {
            domain: domain.into(),
            name: format!("dom-{domain}"),
            qemu: id(500, start),
            original: set(original),
            applied: set(applied),
        }
    }

    /// A libvirt nodeset makes the file version 3, keeps its first
    /// original across changes of the same QEMU, is replaced for a
    /// restarted one, and is read back; dropping the last entry removes
    /// the file.
    #[test]
    fn libvirt_nodesets_are_recorded_as_version_3_and_read_back() {
        let d = private_dir();
        let path = d.path().join("state.json");
        let mut s = StateFile::open(&path).unwrap();
        assert!(
            s.record_libvirt_nodeset(nodeset("u1", 7, "0", "1"))
                .unwrap()
        );
        assert!(
            !s.record_libvirt_nodeset(nodeset("u1", 7, "1", "0-1"))
                .unwrap()
        );
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"version\": 3"), "{text}");
        // Read back as a new start reads it (not reopened here: a child
        // another test forks meanwhile may hold the lock's descriptor
        // until it execs).
        let read = parse(text.as_bytes()).ok().unwrap();
        assert_eq!(read.libvirt_nodesets, [nodeset("u1", 7, "0", "0-1")]);
        assert_eq!(s.libvirt_nodesets(), [nodeset("u1", 7, "0", "0-1")]);
        assert!(!s.is_empty());
        // The same domain in a new QEMU: a new entry, the old one gone.
        assert!(
            s.record_libvirt_nodeset(nodeset("u1", 9, "1", "0"))
                .unwrap()
        );
        assert_eq!(s.libvirt_nodesets(), [nodeset("u1", 9, "1", "0")]);
        let taken = s.take_libvirt_nodesets();
        assert_eq!(taken.len(), 1);
        s.keep_libvirt_nodesets(taken).unwrap();
        assert!(path.exists());
        s.keep_libvirt_nodesets(Vec::new()).unwrap();
        assert!(!path.exists());
    }
}
