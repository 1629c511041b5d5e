//! Which node each sampled page is on (a `move_pages(2)` status query,
//! one call per process and round), and the fd limit the samplers live in.

use super::*;

/// The soft `RLIMIT_NOFILE` once raised to the hard limit (where finite):
/// what [`raise_fd_limit`] and [`crate::perf::PerfMonitor::new`] leave.
pub fn fd_limit_after_raise() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    if r.rlim_max == libc::RLIM_INFINITY {
        r.rlim_cur
    } else {
        r.rlim_max.max(r.rlim_cur)
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (where finite), as
/// the counters' monitor does.
pub fn raise_fd_limit() -> FdLimit {
    crate::perf::monitor::raise_nofile_limit()
}

/// Where `pages` of process `pid` are: `move_pages(2)` with nodes = NULL,
/// a status query that moves nothing. `None` per page not present (or
/// otherwise refused).
pub fn query_nodes(pid: i32, pages: &[u64]) -> io::Result<Vec<Option<u32>>> {
    let addrs: Vec<usize> = pages.iter().map(|&p| p as usize).collect();
    let mut status: Vec<c_int> = vec![-libc::ENOENT; addrs.len()];
    if addrs.is_empty() {
        return Ok(Vec::new());
    }
    // SAFETY: `addrs` and `status` hold `addrs.len()` entries; nodes is
    // NULL (a query); the kernel reads `addrs` and writes `status`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid,
            addrs.len() as c_ulong,
            addrs.as_ptr(),
            std::ptr::null::<c_int>(),
            status.as_mut_ptr(),
            0 as c_int,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(status.into_iter().map(|s| u32::try_from(s).ok()).collect())
}

/// Keeps `max` of `v`, evenly spread (all if there are no more).
pub(super) fn spread<T: Copy>(v: &[T], max: usize) -> Vec<T> {
    if v.len() <= max {
        return v.to_vec();
    }
    (0..max).map(|i| v[i * v.len() / max]).collect()
}
