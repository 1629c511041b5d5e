//! [`TaskDir`]: one process's `task/` directory held open while its threads
//! are read, so that each thread costs one `openat` relative to it (no walk
//! of `/proc/<pid>/task/` per file), one `read` into a buffer reused from
//! thread to thread and process to process, and no allocation but the
//! parsed name. Issue 19 measured the per-thread path of a round: the
//! kernel's open of a procfs file is about half of it.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};

use numaplace_parse::procfs::{TaskStat, parse_stat};

use super::error::ProcError;

/// Bytes of the listing buffer (`getdents64`): about 900 threads a call.
const DENTS: usize = 32 * 1024;
/// First read size of a `stat` (one read returns it whole).
const STAT: usize = 4096;

/// Buffers kept from one process to the next by whoever reads many.
#[derive(Debug, Default)]
pub struct TaskBuffers {
    read: Vec<u8>,
    dents: Vec<u8>,
}

/// A process's `task/` directory, open.
#[derive(Debug)]
pub struct TaskDir {
    dir: File,
    path: PathBuf,
}

impl TaskDir {
    /// Opens `path` (a `.../proc/<pid>/task`).
    pub(super) fn open(path: PathBuf) -> Result<TaskDir, ProcError> {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|e| ProcError::from_io(path.clone(), io::Error::other(e)))?;
        // SAFETY: a NUL-terminated path; the fd returned is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(ProcError::from_io(path, io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let dir = unsafe { File::from_raw_fd(fd) };
        Ok(TaskDir { dir, path })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tids of the process's threads, increasing, into `out` (cleared
    /// first).
    pub fn tids(&self, bufs: &mut TaskBuffers, out: &mut Vec<i32>) -> Result<(), ProcError> {
        out.clear();
        let fd = self.dir.as_raw_fd();
        // SAFETY: lseek on our own fd.
        if unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } < 0 {
            return Err(self.error(io::Error::last_os_error()));
        }
        bufs.dents.resize(DENTS, 0);
        loop {
            // SAFETY: the kernel writes at most `DENTS` bytes into `dents`.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    fd,
                    bufs.dents.as_mut_ptr(),
                    bufs.dents.len(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(self.error(e));
            }
            if n == 0 {
                break;
            }
            let mut at = 0;
            let end = n as usize;
            // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type,
            // then the NUL-terminated name.
            while at + 19 <= end {
                let d = &bufs.dents[at..end];
                let reclen = usize::from(u16::from_ne_bytes([d[16], d[17]]));
                if reclen < 20 || reclen > d.len() {
                    break;
                }
                let name = &d[19..reclen];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                if let Some(id) = positive_decimal(name) {
                    out.push(id);
                }
                at += reclen;
            }
        }
        out.sort_unstable();
        Ok(())
    }

    /// A thread's `stat`, read into `bufs` (no allocation but its name).
    pub fn stat(&self, tid: i32, bufs: &mut TaskBuffers) -> Result<TaskStat, ProcError> {
        let file = self.open_stat(tid)?;
        self.read_stat(&file, tid, bufs)
    }

    /// A thread's `stat`, open: [`TaskDir::read_stat`] reads it again and
    /// again, each read generated afresh by the kernel. The open file is
    /// bound to the thread it was opened for, not to its tid: once that
    /// thread has exited, reads fail ([`ProcError::Gone`]), even if a new
    /// thread took its tid.
    pub fn open_stat(&self, tid: i32) -> Result<File, ProcError> {
        let mut rel = [0u8; 32];
        stat_path(tid, &mut rel);
        // SAFETY: `rel` is NUL-terminated; the fd is owned below.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                rel.as_ptr().cast(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(self.file_error(tid, io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Reads `file` (tid's `stat`, [`TaskDir::open_stat`]) from its start
    /// into `bufs` and parses it.
    pub fn read_stat(
        &self,
        file: &File,
        tid: i32,
        bufs: &mut TaskBuffers,
    ) -> Result<TaskStat, ProcError> {
        if bufs.read.len() < STAT {
            bufs.read.resize(STAT, 0);
        }
        let mut filled = 0;
        loop {
            // SAFETY: reads at most the free part of `read` into it.
            let n = unsafe {
                libc::pread(
                    file.as_raw_fd(),
                    bufs.read[filled..].as_mut_ptr().cast(),
                    bufs.read.len() - filled,
                    filled as libc::off_t,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(self.file_error(tid, e));
            }
            if n == 0 {
                break;
            }
            filled += n as usize;
            if filled < bufs.read.len() {
                // procfs generates the file at once: a short read is all.
                break;
            }
            let more = bufs.read.len() * 2;
            bufs.read.resize(more, 0);
        }
        parse_stat(&bufs.read[..filled]).map_err(|error| ProcError::Parse {
            path: self.path.join(format!("{tid}/stat")),
            error,
        })
    }

    fn error(&self, source: io::Error) -> ProcError {
        ProcError::from_io(self.path.clone(), source)
    }

    fn file_error(&self, tid: i32, source: io::Error) -> ProcError {
        ProcError::from_io(self.path.join(format!("{tid}/stat")), source)
    }
}

/// `<tid>/stat` and a NUL into `out`; returns the length without the NUL.
fn stat_path(tid: i32, out: &mut [u8; 32]) -> usize {
    let mut digits = [0u8; 10];
    let mut n = tid.unsigned_abs();
    let mut d = 0;
    loop {
        digits[d] = b'0' + (n % 10) as u8;
        d += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut at = 0;
    if tid < 0 {
        out[0] = b'-';
        at = 1;
    }
    for i in (0..d).rev() {
        out[at] = digits[i];
        at += 1;
    }
    out[at..at + 5].copy_from_slice(b"/stat");
    at += 5;
    out[at] = 0;
    at
}

/// A directory name that is a positive decimal number (a pid or tid).
fn positive_decimal(name: &[u8]) -> Option<i32> {
    if name.is_empty() || name.len() > 10 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    for &b in name {
        v = v * 10 + i64::from(b - b'0');
    }
    i32::try_from(v).ok().filter(|&v| v > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_paths_and_names() {
        let mut b = [0u8; 32];
        for tid in [1, 9, 10, 4_194_304, i32::MAX] {
            let n = stat_path(tid, &mut b);
            assert_eq!(&b[..n], format!("{tid}/stat").as_bytes());
            assert_eq!(b[n], 0);
        }
        assert_eq!(positive_decimal(b"123"), Some(123));
        for bad in [
            &b""[..],
            b"0",
            b"12a",
            b".",
            b"..",
            b"99999999999",
            b"2147483648",
        ] {
            assert_eq!(positive_decimal(bad), None, "{bad:?}");
        }
    }
}
