//! The host's constants from `sysconf(3)`, each read once for the
//! process's life: the clock ticks per second of procfs CPU times and the
//! page size. The one place numaplace calls `sysconf`.

use std::sync::OnceLock;

/// Clock ticks per second of procfs CPU times (`_SC_CLK_TCK`; 100 if
/// sysconf fails).
pub fn clock_ticks() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if hz > 0 { hz as u64 } else { 100 }
    })
}

/// The page size in bytes (`_SC_PAGESIZE`; 4096 if sysconf fails).
pub fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if ps > 0 { ps as u64 } else { 4096 }
    })
}
