//! The host's end of the guests' ports: which UNIX sockets, opened how,
//! served by whom.
//!
//! QEMU serves a virtio-serial port's host end as a UNIX socket
//! (`-chardev socket,id=ID,path=PATH,server=on,wait=off` with
//! `-device virtserialport,chardev=ID,name=NAME`); libvirt puts a
//! `<channel type='unix'><source mode='bind'/>` without a path under
//! `/var/lib/libvirt/qemu/channel/target/domain-ID-NAME/NAME`. The daemon
//! connects as a client, never writes, and reads without blocking.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Component, Path, PathBuf};

use numaplace_model::scope::glob;

/// The most patterns in the configuration.
pub const MAX_PATTERNS: usize = 64;
/// The longest pattern, bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// The most sockets followed at once (one or two per VM).
pub const MAX_SOCKETS: usize = 256;
/// The most directory entries looked at to expand the patterns, per round.
pub const MAX_ENTRIES_SCANNED: usize = 16_384;

/// Checks the configured patterns: absolute paths, `*` and `?` within a
/// component, no `..`, bounded. The message names the pattern and what
/// to do.
pub fn validate_patterns(patterns: &[String]) -> Result<(), String> {
    if patterns.len() > MAX_PATTERNS {
        return Err(format!(
            "[guest_hints] sockets has {} patterns: at most {MAX_PATTERNS}",
            patterns.len()
        ));
    }
    for p in patterns {
        let why = if p.len() > MAX_PATTERN_BYTES {
            Some(format!("longer than {MAX_PATTERN_BYTES} bytes"))
        } else if !p.starts_with('/') {
            Some("not an absolute path".into())
        } else if p.contains('\0') || p.chars().any(char::is_control) {
            Some("has control characters".into())
        } else if p.contains(['[', ']', '{', '}']) {
            Some("only * and ? are wildcards here".into())
        } else if Path::new(p)
            .components()
            .any(|c| matches!(c, Component::ParentDir))
        {
            Some("has a .. component".into())
        } else if p.ends_with('/') {
            Some("names a directory, not a socket".into())
        } else {
            None
        };
        if let Some(why) = why {
            return Err(format!(
                "[guest_hints] sockets: {p:?} {why}; give the path of a port's UNIX socket, \
                 like \"/var/lib/libvirt/qemu/channel/target/domain-*/org.numaplace.hints.0\""
            ));
        }
    }
    Ok(())
}

/// The UNIX sockets the patterns match now (not symbolic links), sorted,
/// at most [`MAX_SOCKETS`]; the second value says whether more matched or
/// the scan stopped at [`MAX_ENTRIES_SCANNED`].
pub fn expand(patterns: &[String]) -> (Vec<PathBuf>, bool) {
    let mut out = Vec::new();
    let mut budget = MAX_ENTRIES_SCANNED;
    let mut cut = false;
    for p in patterns {
        let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
        walk(PathBuf::from("/"), &parts, &mut out, &mut budget, &mut cut);
    }
    out.sort();
    out.dedup();
    if out.len() > MAX_SOCKETS {
        out.truncate(MAX_SOCKETS);
        cut = true;
    }
    (out, cut)
}

fn walk(at: PathBuf, parts: &[&str], out: &mut Vec<PathBuf>, budget: &mut usize, cut: &mut bool) {
    let Some((first, rest)) = parts.split_first() else {
        let is_socket = std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_socket());
        if is_socket {
            out.push(at);
        }
        return;
    };
    if !first.contains(['*', '?']) {
        walk(at.join(first), rest, out, budget, cut);
        return;
    }
    let Ok(dir) = std::fs::read_dir(&at) else {
        return;
    };
    let mut names = Vec::new();
    for entry in dir.flatten() {
        if *budget == 0 {
            *cut = true;
            break;
        }
        *budget -= 1;
        let name = entry.file_name();
        if let Some(n) = name.to_str() {
            if glob(first, n) {
                names.push(n.to_string());
            }
        }
    }
    names.sort();
    for n in names {
        walk(at.join(n), rest, out, budget, cut);
    }
}

/// Why a socket could not be followed.
#[derive(Debug)]
pub enum ConnectError {
    /// Nobody listens (a VM that is gone left its socket file).
    Refused,
    /// The listener's queue is full: QEMU serves one client at a time and
    /// another holds it (a second numaplace, `tasks --guest-hints` while the
    /// daemon runs).
    Busy,
    /// Any other failure to connect.
    Other(io::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Refused => f.write_str("nobody listens on it (its VM is gone?)"),
            ConnectError::Busy => f.write_str(
                "another client holds it (QEMU serves one at a time: is another numaplace \
                 reading it?)",
            ),
            ConnectError::Other(e) => write!(f, "cannot connect: {e}"),
        }
    }
}

/// Connects to a UNIX stream socket without ever blocking: a listener
/// whose queue is full is [`ConnectError::Busy`], not a wait. The stream
/// is non-blocking.
pub fn connect_nonblocking(path: &Path) -> Result<UnixStream, ConnectError> {
    // SAFETY: plain sockaddr_un, zeroed, filled within its bounds below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(ConnectError::Other(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the path is longer than a UNIX socket address holds ({} bytes)",
                addr.sun_path.len() - 1
            ),
        )));
    }
    for (d, &s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    // SAFETY: socket(2) with constant arguments; the fd is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(ConnectError::Other(io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh socket nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: addr is a valid sockaddr_un of at least `len` bytes.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
            len,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ECONNREFUSED) | Some(libc::ENOENT) => ConnectError::Refused,
            Some(libc::EAGAIN) => ConnectError::Busy,
            _ => ConnectError::Other(e),
        });
    }
    Ok(UnixStream::from(fd))
}

/// The pid of the process at the other end (`SO_PEERCRED`): for a
/// listening socket, the process that called `listen()`.
pub fn peer_pid(stream: &UnixStream) -> io::Result<i32> {
    // SAFETY: a zeroed ucred is valid; getsockopt writes at most `len`.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: valid fd, pointer and length for SO_PEERCRED.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if cred.pid <= 0 {
        return Err(io::Error::other("the peer's pid is unknown"));
    }
    Ok(cred.pid)
}

/// The most bytes of `/proc/net/unix` read (a line is about 100 bytes:
/// some 300,000 sockets).
pub const MAX_NET_UNIX_BYTES: u64 = 32 << 20;
/// `__SO_ACCEPTCON` in `/proc/net/unix`'s Flags: a listening socket.
const SO_ACCEPTCON: u32 = 0x0001_0000;

/// The inode of the socket listening at `path`, from the text of
/// `/proc/net/unix` (`Num RefCount Protocol Flags Type St Inode Path`).
pub fn listening_inode_in(text: &str, path: &Path) -> Option<u64> {
    let want = path.as_os_str().as_bytes();
    text.lines().skip(1).find_map(|line| {
        let mut f = line.split_whitespace();
        let flags = u32::from_str_radix(f.nth(3)?, 16).ok()?;
        let inode: u64 = f.nth(2)?.parse().ok()?;
        let p = f.next()?;
        (flags & SO_ACCEPTCON != 0 && p.as_bytes() == want && f.next().is_none()).then_some(inode)
    })
}

/// The inode of the socket listening at `path` (`<root>/proc/net/unix`).
pub fn listening_inode(root: &crate::SysRoot, path: &Path) -> Option<u64> {
    let text =
        numaplace_io::bounded::read_to_string(&root.join("proc/net/unix"), MAX_NET_UNIX_BYTES)
            .ok()?;
    listening_inode_in(&text, path)
}

/// Whether process `pid` holds socket `inode` among its open files.
pub fn holds_socket(root: &crate::SysRoot, pid: i32, inode: u64) -> bool {
    let want = format!("socket:[{inode}]");
    let Ok(dir) = std::fs::read_dir(root.join(&format!("proc/{pid}/fd"))) else {
        return false;
    };
    dir.flatten().any(|e| {
        std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str().as_bytes() == want.as_bytes())
    })
}
