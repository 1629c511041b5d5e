//! Pieces the test programs share (included with
//! `#[path = "support/mod.rs"] mod support;`; not an example itself).
#![allow(dead_code)]

/// Parses a MIB argument: a whole, positive number of MiB whose bytes fit
/// a `usize`.
pub fn parse_mib(mib: &str) -> Result<usize, String> {
    let mib: usize = mib
        .parse()
        .map_err(|_| format!("MIB '{mib}' is not a whole number of MiB"))?;
    if mib == 0 {
        return Err("MIB must be at least 1".into());
    }
    if mib.checked_mul(1 << 20).is_none() {
        return Err(format!("MIB {mib} is too large"));
    }
    Ok(mib)
}

/// A fresh private anonymous read-write mapping of `len` bytes.
pub fn map_anonymous(len: usize) -> std::io::Result<*mut libc::c_void> {
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
        Err(std::io::Error::last_os_error())
    } else {
        Ok(addr)
    }
}
