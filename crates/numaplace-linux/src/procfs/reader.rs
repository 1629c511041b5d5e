//! [`ProcReader`]: the procfs parsers bound to the files under a
//! [`SysRoot`].

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::error::{ParseError, ProcError};
use super::task_dir::TaskDir;
use crate::sysroot::SysRoot;
use numaplace_parse::procfs::{
    CgroupInfo, NumaMaps, SchedNuma, Statm, TaskStat, TaskStatus, parse_cgroup, parse_cmdline,
    parse_numa_maps, parse_sched_numa, parse_stat, parse_statm, parse_status,
    parse_vmstat_page_moves,
};

/// First read size for one-line files (`stat`, `status`, `comm`, ...):
/// one read returns the whole file, generated at once.
const SMALL: usize = 4096;
/// First read size for `numa_maps`, which grows with the mappings.
const LARGE: usize = 64 * 1024;

/// Reads tasks' procfs files under a root: `<root>/proc/...`.
#[derive(Debug, Clone)]
pub struct ProcReader {
    root: SysRoot,
}

impl ProcReader {
    /// A reader of `/proc` under `root`.
    pub fn new(root: SysRoot) -> Self {
        ProcReader { root }
    }

    /// The root it reads under.
    pub fn root(&self) -> &SysRoot {
        &self.root
    }

    /// The pids of all processes (the numeric directories of `proc/`),
    /// increasing.
    pub fn pids(&self) -> Result<Vec<i32>, ProcError> {
        let path = self.root.join("proc");
        // A missing proc/ is a wrong root, not a task that exited.
        numeric_dirs(&path).map_err(|source| ProcError::Io { path, source })
    }

    /// The tids of a process's threads, increasing.
    pub fn tids(&self, pid: i32) -> Result<Vec<i32>, ProcError> {
        let path = self.root.join(&format!("proc/{pid}/task"));
        numeric_dirs(&path).map_err(|source| ProcError::from_io(path, source))
    }

    /// A process's `task/` directory, open: its threads listed and their
    /// `stat` read relative to it ([`TaskDir`]), for a round over many.
    pub fn task_dir(&self, pid: i32) -> Result<TaskDir, ProcError> {
        TaskDir::open(self.root.join(&format!("proc/{pid}/task")))
    }

    /// A thread's `stat`.
    pub fn stat(&self, pid: i32, tid: i32) -> Result<TaskStat, ProcError> {
        let (path, bytes) = self.read(&task_file(pid, tid, "stat"), SMALL)?;
        parse_stat(&bytes).map_err(|error| ProcError::Parse { path, error })
    }

    /// A thread's `status`.
    pub fn status(&self, pid: i32, tid: i32) -> Result<TaskStatus, ProcError> {
        let (path, bytes) = self.read(&task_file(pid, tid, "status"), SMALL)?;
        let text = text(&path, &bytes, "status")?;
        parse_status(text).map_err(|error| ProcError::Parse { path, error })
    }

    /// A thread's name from its `comm` file, without the trailing newline,
    /// bytes that are not UTF-8 kept (`name_from_bytes`; at most 15 bytes in
    /// the kernel). Untrusted.
    pub fn comm(&self, pid: i32, tid: i32) -> Result<String, ProcError> {
        let (_, bytes) = self.read(&task_file(pid, tid, "comm"), SMALL)?;
        let name = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        Ok(numaplace_model::task::name_from_bytes(name))
    }

    /// A process's command line; empty for kernel threads.
    pub fn cmdline(&self, pid: i32) -> Result<Vec<String>, ProcError> {
        let (_, bytes) = self.read(&format!("proc/{pid}/cmdline"), SMALL)?;
        Ok(parse_cmdline(&bytes))
    }

    /// A process's memory size and resident set, in pages.
    pub fn statm(&self, pid: i32) -> Result<Statm, ProcError> {
        let (path, bytes) = self.read(&format!("proc/{pid}/statm"), SMALL)?;
        parse_statm(&String::from_utf8_lossy(&bytes))
            .map_err(|error| ProcError::Parse { path, error })
    }

    /// The host's count of pages migrated, collapsed or reclaimed
    /// (`vmstat`'s [`numaplace_parse::procfs::PAGE_MOVES`]); `Ok(None)` if
    /// the kernel shows none of those counters.
    pub fn vmstat_page_moves(&self) -> Result<Option<u64>, ProcError> {
        let (_, bytes) = self.read("proc/vmstat", LARGE)?;
        Ok(parse_vmstat_page_moves(&String::from_utf8_lossy(&bytes)))
    }

    /// A process's cgroups.
    pub fn cgroup(&self, pid: i32) -> Result<CgroupInfo, ProcError> {
        let (_, bytes) = self.read(&format!("proc/{pid}/cgroup"), SMALL)?;
        Ok(parse_cgroup(&String::from_utf8_lossy(&bytes)))
    }

    /// A process's memory per node. Empty for kernel threads. A process
    /// whose directory is there but has no `numa_maps` is
    /// [`ProcError::Unavailable`] (a kernel without `CONFIG_NUMA`), not
    /// [`ProcError::Gone`].
    pub fn numa_maps(&self, pid: i32) -> Result<NumaMaps, ProcError> {
        match self.read(&format!("proc/{pid}/numa_maps"), LARGE) {
            Ok((_, bytes)) => Ok(parse_numa_maps(&String::from_utf8_lossy(&bytes))),
            Err(ProcError::Gone { path }) if self.root.join(&format!("proc/{pid}")).is_dir() => {
                Err(ProcError::Unavailable { path })
            }
            Err(e) => Err(e),
        }
    }

    /// The NUMA balancing lines of a thread's `sched` (hinting faults per
    /// node, the preferred node); `Ok(None)` when the kernel writes none
    /// (built without `CONFIG_NUMA_BALANCING`). A kernel without
    /// `CONFIG_SCHED_DEBUG` has no `sched` at all:
    /// [`ProcError::Unavailable`] while the thread is there.
    pub fn sched_numa(&self, pid: i32, tid: i32) -> Result<Option<SchedNuma>, ProcError> {
        let rel = task_file(pid, tid, "sched");
        match self.read(&rel, SMALL) {
            // The first line holds the thread's comm, which may be any
            // bytes: lossy, never refused for it (the parser skips it).
            Ok((path, bytes)) => parse_sched_numa(&String::from_utf8_lossy(&bytes))
                .map_err(|error| ProcError::Parse { path, error }),
            Err(ProcError::Gone { path })
                if self.root.join(&format!("proc/{pid}/task/{tid}")).is_dir() =>
            {
                Err(ProcError::Unavailable { path })
            }
            Err(e) => Err(e),
        }
    }

    /// Reads a whole file under the root. procfs generates a file on each
    /// read, so one `read` into a buffer large enough gets a consistent
    /// copy; only a file that fills the buffer is read on.
    fn read(&self, rel: &str, first: usize) -> Result<(PathBuf, Vec<u8>), ProcError> {
        let path = self.root.join(rel);
        match read_whole(&path, first) {
            Ok(bytes) => Ok((path, bytes)),
            Err(source) => Err(ProcError::from_io(path, source)),
        }
    }
}

fn task_file(pid: i32, tid: i32, name: &str) -> String {
    format!("proc/{pid}/task/{tid}/{name}")
}

fn text<'a>(path: &Path, bytes: &'a [u8], file: &'static str) -> Result<&'a str, ProcError> {
    std::str::from_utf8(bytes).map_err(|e| ProcError::Parse {
        path: path.to_path_buf(),
        error: ParseError::Malformed {
            file,
            what: format!("not UTF-8 text ({e})"),
        },
    })
}

fn read_whole(path: &Path, first: usize) -> io::Result<Vec<u8>> {
    // Never a device or FIFO (a snapshot's file linked to /dev/zero), and
    // bounded.
    let mut file = numaplace_io::bounded::open_regular(path)?
        .take(numaplace_io::bounded::ROOT_FILE_MAX_BYTES + 1);
    let mut buf = vec![0; first];
    let n = loop {
        match file.read(&mut buf) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    buf.truncate(n);
    if n == first {
        file.read_to_end(&mut buf)?;
    }
    if buf.len() as u64 > numaplace_io::bounded::ROOT_FILE_MAX_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "larger than {} bytes, the most numaplace reads of such a file",
                numaplace_io::bounded::ROOT_FILE_MAX_BYTES
            ),
        ));
    }
    Ok(buf)
}

/// The names of `dir`'s entries that are positive decimal numbers, sorted.
fn numeric_dirs(dir: &Path) -> io::Result<Vec<i32>> {
    let mut ids = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        match name.parse::<i32>() {
            Ok(id) if id > 0 => ids.push(id),
            _ => {}
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

#[cfg(test)]
mod tests;
