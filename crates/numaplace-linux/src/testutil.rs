//! For tests that fault memory in: [`AnonMapping`], a private anonymous
//! mapping, mapped when made ([`crate::mmap`]) and unmapped when dropped,
//! which the collector's, the actuator's and the sampler's tests share.
//!
//! Compiled for this crate's own tests, and with the `testutil` feature,
//! which the crate's dev-dependency on itself turns on for its
//! integration tests.

use std::ptr::NonNull;

/// A private anonymous read-write mapping, not touched until a test says;
/// unmapped on drop.
pub struct AnonMapping {
    addr: NonNull<libc::c_void>,
    len: usize,
}

impl AnonMapping {
    /// `len` bytes, none touched yet. Panics if `mmap` fails.
    pub fn new(len: usize) -> AnonMapping {
        // Unmapped in Drop.
        let p = crate::mmap::map_anonymous(len).expect("mmap of a private anonymous mapping");
        AnonMapping {
            addr: NonNull::new(p).expect("mmap returned a mapping"),
            len,
        }
    }

    /// No huge pages (`MADV_NOHUGEPAGE`): one fault and one allocation per
    /// base page. Failure is harmless (a kernel without them).
    pub fn no_huge_pages(&self) -> &AnonMapping {
        // SAFETY: advice on the mapping we own.
        unsafe { libc::madvise(self.addr(), self.len, libc::MADV_NOHUGEPAGE) };
        self
    }

    /// Writes every byte, so every page is faulted in.
    pub fn fill(&self) -> &AnonMapping {
        // SAFETY: writes within the mapping, which is writable.
        unsafe { std::ptr::write_bytes(self.addr().cast::<u8>(), 1, self.len) };
        self
    }

    /// Writes one byte every `step` bytes from the start (a page's worth:
    /// every page faulted in).
    pub fn touch_every(&self, step: usize) -> &AnonMapping {
        for off in (0..self.len).step_by(step) {
            // SAFETY: off < len, within the writable mapping.
            unsafe { *self.addr().cast::<u8>().add(off) = 1 };
        }
        self
    }

    /// Makes `len` bytes at `offset` inaccessible (`PROT_NONE`): guard
    /// pages the kernel cannot merge a neighbouring mapping across.
    pub fn protect_none(&self, offset: usize, len: usize) -> &AnonMapping {
        assert!(offset + len <= self.len);
        // SAFETY: the range lies inside the mapping (checked above).
        unsafe { libc::mprotect(self.addr().add(offset), len, libc::PROT_NONE) };
        self
    }

    /// Its first byte.
    pub fn addr(&self) -> *mut libc::c_void {
        self.addr.as_ptr()
    }

    /// Its first byte's address.
    pub fn start(&self) -> u64 {
        self.addr() as u64
    }

    /// Its length, bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is zero bytes long.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AnonMapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what new() mapped; no references into it remain.
        unsafe { libc::munmap(self.addr(), self.len) };
    }
}
