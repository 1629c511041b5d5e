//! What numaplace asks the kernel about its own process: whether the
//! calls the engine makes are allowed here (each tried once, harmlessly,
//! on numaplace's own thread or page), whether it runs as root, the CPUs
//! it may run on, whether its terminal has input, and SIGPIPE's default
//! put back for a command that writes to a pipe.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use numaplace_model::CpuSet;

use crate::taskiter::{TaskIterError, TaskIterator};

/// Sets this thread's CPU affinity to what it is: whether
/// `sched_setaffinity(2)` is allowed here (a seccomp profile or a
/// container runtime may forbid it), changing nothing. The error is the
/// read's or the write's.
pub fn rewrite_own_affinity() -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit mask, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; the mask is the one just read, so nothing changes.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks `move_pages(2)` where one page of numaplace's own heap is, moving
/// nothing: whether the call is allowed and the kernel has it
/// (`CONFIG_NUMA`, `CONFIG_MIGRATION`). The page's status: its node, or a
/// negative errno for that page.
pub fn own_page_node() -> io::Result<i32> {
    let probe = Box::new(0u64);
    let mut pages = [(&*probe as *const u64).cast::<libc::c_void>().cast_mut()];
    let mut status = [-1i32];
    // SAFETY: one page pointer (a live heap address of ours), no target
    // nodes (a query), one status slot; pid 0 is this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            1usize,
            pages.as_mut_ptr(),
            std::ptr::null::<i32>(),
            status.as_mut_ptr(),
            0,
        )
    };
    if rc == 0 {
        Ok(status[0])
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens the BPF task iterator and drops it: whether the collector can
/// read every thread in one pass here (its error says why not).
pub fn task_iterator() -> Result<(), TaskIterError> {
    TaskIterator::open(crate::sysconf::clock_ticks()).map(drop)
}

/// Whether numaplace runs as root (its effective user id is 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The CPUs numaplace itself may run on (`Cpus_allowed_list` of
/// `/proc/self/status`: its cgroup's cpuset and its affinity); `None`
/// where that cannot be read.
pub fn own_allowed_cpus() -> Option<CpuSet> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    CpuSet::parse_list(list.trim()).ok()
}

/// Puts SIGPIPE's default disposition back, so that a command whose
/// output is cut short (`numaplace scenarios | head`) ends as any Unix
/// filter does, by SIGPIPE, instead of failing the write. Rust's runtime
/// leaves SIGPIPE ignored; a daemon that writes to sockets keeps it so.
/// To be called at start-up, before any other thread runs.
pub fn default_sigpipe() {
    // SAFETY: SIG_DFL is a valid disposition for SIGPIPE; signal() has no
    // other precondition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// What a terminal (or any file) has for its reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Nothing within the wait, or the wait was interrupted by a signal.
    Idle,
    /// Something to read.
    Ready,
    /// The other end hung up (a terminal's window closed, a pipe's writer
    /// gone) or the descriptor is not open: nothing to read, ever.
    Gone,
}

/// Waits up to `timeout` for input on `fd` with `poll(2)`.
pub fn wait_for_input(fd: BorrowedFd<'_>, timeout: Duration) -> Input {
    let mut fds = [libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd, its count 1.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
    if n < 0 {
        // Interrupted by a signal: the caller checks its flags.
        return Input::Idle;
    }
    let r = fds[0].revents;
    if r & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Input::Gone
    } else if r & libc::POLLIN != 0 {
        Input::Ready
    } else {
        Input::Idle
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::fd::{AsFd as _, FromRawFd as _};

    use super::*;

    #[test]
    fn this_threads_affinity_is_written_back_unchanged() {
        let before = crate::actuate::thread_affinity(0, 1024).unwrap();
        rewrite_own_affinity().unwrap();
        assert_eq!(crate::actuate::thread_affinity(0, 1024).unwrap(), before);
    }

    #[test]
    fn an_own_page_is_on_a_node() {
        // The kernel of this machine has NUMA and page migration (the test
        // bed's and CI's do); the page was just written, so it is present.
        let node = own_page_node().unwrap();
        assert!(node >= 0, "status {node}");
    }

    #[test]
    fn root_is_the_effective_user_id_of_proc_self_status() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap();
        let effective = uid.split_whitespace().nth(1).unwrap();
        assert_eq!(is_root(), effective == "0");
    }

    #[test]
    fn own_cpus_are_those_this_thread_may_run_on() {
        let own = own_allowed_cpus().unwrap();
        assert!(!own.is_empty());
        assert!(
            crate::actuate::thread_affinity(0, 1024)
                .unwrap()
                .is_subset(&own)
        );
    }

    #[test]
    fn a_pipe_is_idle_ready_then_gone() {
        let mut ends = [0; 2];
        // SAFETY: pipe(2) writes two descriptors into the array of two it
        // is given.
        assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just opened and nothing else owns
        // them.
        let (reader, mut writer) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(ends[0]),
                std::fs::File::from_raw_fd(ends[1]),
            )
        };
        let wait = Duration::from_millis(10);
        assert_eq!(wait_for_input(reader.as_fd(), wait), Input::Idle);
        writer.write_all(b"x").unwrap();
        assert_eq!(wait_for_input(reader.as_fd(), wait), Input::Ready);
        drop(writer);
        // Data is still there, but the writer hung up: the hang-up wins,
        // as for a terminal that closed.
        assert_eq!(wait_for_input(reader.as_fd(), wait), Input::Gone);
    }
}
