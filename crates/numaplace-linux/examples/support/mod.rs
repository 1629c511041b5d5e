//! Pieces the test programs share (included with
//! `#[path = "support/mod.rs"] mod support;`; not an example itself).
#![allow(dead_code)]

/// Parses a MIB argument: a whole, positive number of MiB whose bytes fit
/// a `usize`.
pub(crate) fn parse_mib(mib: &str) -> Result<usize, String> {
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

pub(crate) use numaplace_linux::mmap::map_anonymous;

/// Writes one byte in every page of `len` bytes at `addr`, so the kernel
/// allocates them all (under the memory policy in force).
pub(crate) fn touch_pages(addr: *mut libc::c_void, len: usize) {
    let page = numaplace_linux::sysconf::page_size() as usize;
    let base = addr.cast::<u8>();
    for off in (0..len).step_by(page) {
        // SAFETY: the caller's mapping is `len` writable bytes; off < len.
        unsafe { base.add(off).write_volatile(1) };
    }
}

/// Prints `ready <pid>` on stdout and sleeps until a signal ends the
/// process; returns (status 1) only when stdout cannot be written.
pub(crate) fn announce_ready_and_wait() -> std::process::ExitCode {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if writeln!(out, "ready {}", std::process::id())
        .and_then(|()| out.flush())
        .is_err()
    {
        return std::process::ExitCode::from(1);
    }
    drop(out);
    loop {
        // SAFETY: pause has no preconditions; it returns only after a
        // signal handler ran, and the test programs install none.
        unsafe { libc::pause() };
    }
}

/// [`map_anonymous`] of `mib` MiB, the address and length; a failure is
/// said on stderr in `program`'s name and is exit status 1.
pub(crate) fn map_mib(
    program: &str,
    mib: usize,
) -> Result<(*mut libc::c_void, usize), std::process::ExitCode> {
    let len = mib << 20;
    map_anonymous(len).map(|a| (a, len)).map_err(|err| {
        eprintln!("{program}: error: mmap of {mib} MiB failed: {err}");
        std::process::ExitCode::from(1)
    })
}
