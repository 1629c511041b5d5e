//! The socket under a QMP connection: a connect that never waits, and
//! who serves it (`SO_PEERCRED`, `SO_PEERPIDFD`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::QmpError;

/// A non-blocking connect (a full backlog is an error, not a wait), then
/// a blocking stream whose reads and writes time out.
pub(super) fn connect(path: &Path) -> Result<UnixStream, QmpError> {
    let err = |source| QmpError::Connect {
        path: path.to_path_buf(),
        source,
    };
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a UNIX socket path is at most {} bytes without NUL",
                addr.sun_path.len() - 1
            ),
        )));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, &b) in addr.sun_path.iter_mut().zip(bytes) {
        *d = b as libc::c_char;
    }
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(err(io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor, owned from here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    // SAFETY: addr is a valid sockaddr_un of at least `len` bytes.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        // A UNIX stream connect never is in progress: EAGAIN is a full
        // backlog, the listener not accepting.
        if e.raw_os_error() == Some(libc::EAGAIN) {
            return Err(QmpError::Backlog {
                path: path.to_path_buf(),
            });
        }
        return Err(err(e));
    }
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false).map_err(err)?;
    Ok(stream)
}

/// The serving process: its pid (`SO_PEERCRED`) and, where the kernel
/// has `SO_PEERPIDFD`, a pidfd of it.
pub(super) fn peer(stream: &UnixStream, path: &Path) -> Result<(i32, Option<OwnedFd>), QmpError> {
    let fd = stream.as_raw_fd();
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for writing, len its size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(QmpError::Io {
            path: path.to_path_buf(),
            source: io::Error::last_os_error(),
        });
    }
    Ok((cred.pid, peer_pidfd(fd)))
}

/// `SO_PEERPIDFD` (include/uapi/asm-generic/socket.h; these architectures
/// use the generic numbers), absent before Linux 6.5.
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64"
))]
fn peer_pidfd(fd: libc::c_int) -> Option<OwnedFd> {
    const SO_PEERPIDFD: libc::c_int = 77;
    let mut pidfd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: pidfd and len are valid for writing, len its size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&raw mut pidfd).cast(),
            &mut len,
        )
    };
    // SAFETY: on success the kernel installed a new descriptor for us.
    (r == 0 && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) })
}

#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64"
)))]
fn peer_pidfd(_fd: libc::c_int) -> Option<OwnedFd> {
    None
}

/// Whether the process behind a pidfd is still alive (signal 0 through
/// the pidfd: `ESRCH` once it exited; `EPERM` means alive).
pub fn pidfd_alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: pidfd_send_signal with signal 0 sends nothing; the fd is ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}
