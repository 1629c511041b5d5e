//! The one `mmap` call of the crate: a fresh private anonymous read-write
//! mapping, for the memory benchmark ([`crate::microbench`]), the tests'
//! `testutil::AnonMapping` and the example programs that fault
//! memory in for the QEMU tests.

use std::io;

/// A fresh private anonymous read-write mapping of `len` bytes (`len` > 0),
/// no page touched yet; the caller unmaps it (`munmap`) or keeps it until
/// it exits.
pub fn map_anonymous(len: usize) -> io::Result<*mut libc::c_void> {
    // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(addr)
    }
}
