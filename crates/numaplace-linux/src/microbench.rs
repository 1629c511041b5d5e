//! The micro-benchmark of \[Rao13\] §2.2 (Fig. 3), run for real: each thread
//! walks a private, randomly linked list of 64-byte entries (its working
//! set), one dependent load per hop, then adds 1 atomically to every 8-byte
//! word of an area all threads share, and repeats. The list defeats
//! prefetching, so its cost is set by the caches and by where its memory
//! lives; the shared adds make cache lines bounce between the threads'
//! caches (§2.2: "exercises the cache coherence mechanism").
//!
//! This module is the part that touches the operating system: threads are
//! pinned with `sched_setaffinity` before they touch anything, memory is
//! mapped, given its policy with `mbind` (on the mapping, so the policy
//! holds whichever thread faults a page in) and first-touched, time comes
//! from `clock_gettime(CLOCK_MONOTONIC)`, and where the pages really ended
//! up comes from `move_pages` status queries. \[Rao13\] sets the policy per
//! thread with `set_mempolicy`; binding each mapping gives the same
//! placement without changing the policy of the thread's other memory.
//!
//! Run time is each thread's own, from its first loop to its last; \[Rao13\]
//! reports the mean of the threads' times (§2.2).

use std::collections::BTreeMap;
use std::io;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use libc::{c_int, c_ulong, c_void};
use numaplace_model::CpuSet;
use serde::Serialize;
use thiserror::Error;

use crate::actuate::{HostActuator, thread_affinity};

/// Bytes per list entry: one cache line (\[Rao13\] §2.2: a pointer and
/// seven words of padding).
pub const ENTRY_BYTES: u64 = 64;
/// Bytes per word of the shared area.
pub const WORD_BYTES: u64 = 8;

/// `MPOL_BIND`, `MPOL_INTERLEAVE`, `MPOL_LOCAL` from `<linux/mempolicy.h>`.
const MPOL_BIND: c_int = 2;
const MPOL_INTERLEAVE: c_int = 3;
const MPOL_LOCAL: c_int = 4;

/// One list entry: the link to the next, and padding up to a cache line.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default)]
pub struct Entry {
    /// While linking, the index of the next entry; once built, its address.
    next: usize,
    pad: [u64; 7],
}

/// Where the benchmark's memory is allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryPolicy {
    /// On this node only (`MPOL_BIND`).
    Node(u32),
    /// On the node of the CPU that first touches each page (`MPOL_LOCAL`):
    /// each thread's list on its own node, the shared area on thread 0's.
    Local,
    /// Page by page over these nodes (`MPOL_INTERLEAVE`).
    Interleave(CpuSet),
}

/// How long each thread runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Length {
    /// This many loops (list walk, then shared sweep).
    Loops(u64),
    /// Loops until this many seconds have passed (checked after each loop).
    Seconds(f64),
}

/// One run of the benchmark.
#[derive(Debug, Clone)]
pub struct Config {
    /// One thread per entry, pinned to this CPU (kernel id).
    pub cpus: Vec<u32>,
    /// Bytes of each thread's private list (a multiple of [`ENTRY_BYTES`]; 0: none).
    pub working_set: u64,
    /// Bytes of the shared area (a multiple of [`WORD_BYTES`]; 0: none).
    pub shared: u64,
    /// Where the lists' and the shared area's memory goes.
    pub memory: MemoryPolicy,
    /// How long each thread runs.
    pub length: Length,
    /// Seed of the lists' random order (thread i uses `seed + i`).
    pub seed: u64,
}

/// A CPU a thread was seen on (`getcpu`), and that CPU's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Seen {
    /// The CPU (kernel id).
    pub cpu: u32,
    /// Its node (kernel id).
    pub node: u32,
}

/// What one thread did.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    /// The thread's index, from 0.
    pub thread: usize,
    /// The CPU it was pinned to.
    pub cpu: u32,
    /// Where it was seen at the start and the end of its timed loops.
    pub ran_on: Vec<Seen>,
    /// Seconds its timed loops took.
    pub seconds: f64,
    /// Its timed loops.
    pub loops: u64,
    /// List hops (loops × entries).
    pub hops: u64,
    /// Atomic adds to the shared area (loops × words).
    pub shared_adds: u64,
    /// List hops per second.
    pub hops_per_second: f64,
    /// Base pages of its list per node.
    pub private_pages: BTreeMap<u32, u64>,
    /// Pages of its list the kernel reported not present.
    pub private_pages_absent: u64,
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One report per thread.
    pub threads: Vec<ThreadReport>,
    /// The mean of the threads' run times (\[Rao13\]'s measure).
    pub mean_seconds: f64,
    /// All threads' hops per second, summed.
    pub hops_per_second: f64,
    /// Entries of each thread's list.
    pub entries_per_thread: u64,
    /// Words of the shared area.
    pub shared_words: u64,
    /// Base pages of the shared area per node.
    pub shared_pages: BTreeMap<u32, u64>,
    /// Base pages of the shared area not resident.
    pub shared_pages_absent: u64,
    /// The base page size, bytes.
    pub page_size: u64,
}

/// A run failed: a system call refused.
#[derive(Debug, Error)]
#[error("{what}: {source}")]
pub struct BenchError {
    /// What failed.
    pub what: String,
    /// The error.
    pub source: io::Error,
}

fn failed(what: impl Into<String>) -> impl FnOnce(io::Error) -> BenchError {
    let what = what.into();
    move |source| BenchError { what, source }
}

/// Runs the benchmark: maps and places the shared area, starts one pinned
/// thread per CPU, each builds its list, all start their timed loops
/// together (a barrier), and the pages are counted after the loops.
pub fn run(cfg: &Config) -> Result<Report, BenchError> {
    let act = HostActuator::new();
    let words = (cfg.shared / WORD_BYTES) as usize;
    let shared = Mapping::new(words * WORD_BYTES as usize).map_err(failed("mmap (shared area)"))?;
    shared
        .bind(&cfg.memory)
        .map_err(failed("mbind (shared area)"))?;
    let area = shared.words(words);
    touch_shared(area, cfg)?;

    let start = Barrier::new(cfg.cpus.len());
    let abort = AtomicBool::new(false);
    let results: Vec<Result<ThreadReport, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (cfg.cpus.iter().enumerate())
            .map(|(i, &cpu)| {
                let (start, abort, act) = (&start, &abort, &act);
                s.spawn(move || thread_main(i, cpu, cfg, area, start, abort, act))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .collect()
    });
    let threads = first_cause(results)?;
    let (shared_pages, shared_pages_absent) = act
        .pages_per_node(0, shared.addr as u64, shared.len as u64)
        .map_err(failed("move_pages (query of the shared area)"))?;
    Ok(Report {
        mean_seconds: threads.iter().map(|t| t.seconds).sum::<f64>() / threads.len().max(1) as f64,
        hops_per_second: threads.iter().map(|t| t.hops_per_second).sum(),
        threads,
        entries_per_thread: cfg.working_set / ENTRY_BYTES,
        shared_words: words as u64,
        shared_pages,
        shared_pages_absent,
        page_size: act.page_size(),
    })
}

/// The threads' reports, or the error of a thread that failed by itself
/// (rather than one that stopped because another failed).
fn first_cause(
    results: Vec<Result<ThreadReport, BenchError>>,
) -> Result<Vec<ThreadReport>, BenchError> {
    let (ok, mut failed): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    failed.sort_by_key(|r| {
        r.as_ref()
            .err()
            .is_some_and(|e| e.source.kind() == io::ErrorKind::Interrupted)
    });
    match failed.into_iter().next() {
        Some(Err(e)) => Err(e),
        _ => Ok(ok.into_iter().flatten().collect()),
    }
}

/// First-touches the shared area from the main thread. Under the local
/// policy the main thread stands on thread 0's CPU meanwhile, so the area
/// lands on that thread's node; its affinity is restored after.
fn touch_shared(area: &[AtomicU64], cfg: &Config) -> Result<(), BenchError> {
    if area.is_empty() {
        return Ok(());
    }
    let local = cfg.memory == MemoryPolicy::Local;
    let before = match (local, cfg.cpus.first()) {
        (true, Some(&cpu)) => {
            let old = thread_affinity(0, 1024).map_err(failed("sched_getaffinity"))?;
            pin_self(cpu).map_err(failed(format!("sched_setaffinity to CPU {cpu}")))?;
            Some(old)
        }
        _ => None,
    };
    for w in area {
        w.store(0, Ordering::Relaxed);
    }
    if let Some(old) = before {
        set_affinity(&old).map_err(failed("restoring the main thread's affinity"))?;
    }
    Ok(())
}

/// One benchmark thread: pin, build the list, wait for the others, loop,
/// count where the list's pages are.
fn thread_main(
    i: usize,
    cpu: u32,
    cfg: &Config,
    shared: &[AtomicU64],
    start: &Barrier,
    abort: &AtomicBool,
    act: &HostActuator,
) -> Result<ThreadReport, BenchError> {
    let list = setup(i, cpu, cfg);
    if list.is_err() {
        abort.store(true, Ordering::SeqCst);
    }
    start.wait();
    let list = list?;
    if abort.load(Ordering::SeqCst) {
        return Err(BenchError {
            what: format!("thread {i}: another thread failed to start"),
            source: io::Error::from(io::ErrorKind::Interrupted),
        });
    }
    let first = where_am_i();
    let (seconds, loops) = timed_loops(list.as_ref(), shared, cfg.length);
    let mut ran_on = vec![first, where_am_i()];
    ran_on.sort();
    ran_on.dedup();
    let (private_pages, private_pages_absent) = match &list {
        Some(l) => act
            .pages_per_node(0, l.map.addr as u64, l.map.len as u64)
            .map_err(failed(format!(
                "thread {i}: move_pages (query of its list)"
            )))?,
        None => (BTreeMap::new(), 0),
    };
    let hops = loops * list.as_ref().map_or(0, |l| l.entries as u64);
    Ok(ThreadReport {
        thread: i,
        cpu,
        ran_on,
        seconds,
        loops,
        hops,
        shared_adds: loops * shared.len() as u64,
        hops_per_second: if seconds > 0.0 {
            hops as f64 / seconds
        } else {
            0.0
        },
        private_pages,
        private_pages_absent,
    })
}

/// Pins the calling thread to `cpu`, then maps, binds and builds its list
/// (first touch happens there, on that CPU).
fn setup(i: usize, cpu: u32, cfg: &Config) -> Result<Option<List>, BenchError> {
    pin_self(cpu).map_err(failed(format!(
        "thread {i}: sched_setaffinity to CPU {cpu}"
    )))?;
    let entries = (cfg.working_set / ENTRY_BYTES) as usize;
    if entries == 0 {
        return Ok(None);
    }
    let seed = cfg.seed.wrapping_add(i as u64);
    List::build(entries, &cfg.memory, seed)
        .map(Some)
        .map_err(|(what, e)| BenchError {
            what: format!("thread {i}: {what}"),
            source: e,
        })
}

/// Loops until the length is reached: seconds taken and loops done.
fn timed_loops(list: Option<&List>, shared: &[AtomicU64], length: Length) -> (f64, u64) {
    let t0 = now();
    let mut loops = 0;
    let mut at = list.map_or(std::ptr::null(), List::head);
    loop {
        let done = match length {
            Length::Loops(n) => loops >= n,
            Length::Seconds(s) => now() - t0 >= s,
        };
        if done {
            break;
        }
        if let Some(l) = list {
            // SAFETY: `at` is an entry of `l`, whose entries form one cycle.
            at = unsafe { walk(at, l.entries as u64) };
        }
        sweep(shared);
        loops += 1;
    }
    std::hint::black_box(at);
    (now() - t0, loops)
}

/// Follows `hops` links from `at`, reading a word of each entry on the way
/// (\[Rao13\] Fig. 3's inner loop), and returns where it stopped.
///
/// # Safety
/// `at` must point to an [`Entry`] whose links, followed `hops` times,
/// stay on live entries (a list made by [`link_cycle`] and
/// [`links_to_addresses`]).
unsafe fn walk(mut at: *const Entry, hops: u64) -> *const Entry {
    let mut sum = 0u64;
    let mut j = 0;
    for _ in 0..hops {
        // SAFETY: the caller's promise.
        let e = unsafe { &*at };
        sum = sum.wrapping_add(e.pad[j]);
        j = if j == 6 { 0 } else { j + 1 };
        at = e.next as *const Entry;
    }
    std::hint::black_box(sum);
    at
}

/// One atomic add to every word of the shared area, in order (Fig. 3:
/// `__sync_add_and_fetch` on each word).
pub fn sweep(shared: &[AtomicU64]) {
    for w in shared {
        w.fetch_add(1, Ordering::SeqCst);
    }
}

/// Links `entries` into one random cycle through all of them (Sattolo's
/// algorithm: a uniformly random cyclic permutation), storing in each
/// entry the index of the next.
pub fn link_cycle(entries: &mut [Entry], seed: u64) {
    for (i, e) in entries.iter_mut().enumerate() {
        e.next = i;
    }
    let mut rng = SplitMix(seed);
    for i in (1..entries.len()).rev() {
        let j = rng.below(i as u64) as usize;
        let (a, b) = (entries[i].next, entries[j].next);
        entries[i].next = b;
        entries[j].next = a;
    }
}

/// Turns the indices [`link_cycle`] stored into the entries' addresses.
pub fn links_to_addresses(entries: &mut [Entry]) {
    let base = entries.as_ptr() as usize;
    for e in entries.iter_mut() {
        e.next = base + e.next * size_of::<Entry>();
    }
}

/// A thread's list, in its own mapping.
struct List {
    map: Mapping,
    entries: usize,
}

impl List {
    fn build(
        entries: usize,
        policy: &MemoryPolicy,
        seed: u64,
    ) -> Result<List, (String, io::Error)> {
        let map = Mapping::new(entries * size_of::<Entry>())
            .map_err(|e| ("mmap (its list)".into(), e))?;
        map.bind(policy)
            .map_err(|e| ("mbind (its list)".into(), e))?;
        // SAFETY: the mapping is fresh, private to this list, zero-filled
        // (a valid Entry), page-aligned and `entries` entries long.
        let slice = unsafe { std::slice::from_raw_parts_mut(map.addr.cast::<Entry>(), entries) };
        link_cycle(slice, seed);
        links_to_addresses(slice);
        Ok(List { map, entries })
    }

    fn head(&self) -> *const Entry {
        self.map.addr.cast::<Entry>()
    }
}

/// A private anonymous mapping, unmapped when dropped.
struct Mapping {
    addr: *mut c_void,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Ok(Mapping {
                addr: std::ptr::NonNull::<u64>::dangling().as_ptr().cast(),
                len: 0,
            });
        }
        let addr = crate::mmap::map_anonymous(len)?;
        Ok(Mapping { addr, len })
    }

    /// Sets the mapping's memory policy (`mbind`), before any page exists.
    fn bind(&self, policy: &MemoryPolicy) -> io::Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let (mode, nodes) = match policy {
            MemoryPolicy::Node(n) => (MPOL_BIND, CpuSet::from_iter([*n])),
            MemoryPolicy::Interleave(set) => (MPOL_INTERLEAVE, set.clone()),
            MemoryPolicy::Local => (MPOL_LOCAL, CpuSet::new()),
        };
        let mask = words_of(&nodes);
        let maxnode = if nodes.is_empty() {
            0
        } else {
            // The kernel reads maxnode - 1 bits.
            mask.len() * c_ulong::BITS as usize + 1
        };
        let mask_ptr = if nodes.is_empty() {
            std::ptr::null()
        } else {
            mask.as_ptr()
        };
        // SAFETY: addr/len is this mapping; the mask holds maxnode - 1 bits.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                self.addr,
                self.len as c_ulong,
                mode as c_ulong,
                mask_ptr,
                maxnode as c_ulong,
                0 as c_ulong,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The mapping as `n` atomic words.
    fn words(&self, n: usize) -> &[AtomicU64] {
        assert!(n * size_of::<AtomicU64>() <= self.len);
        // SAFETY: the mapping is zero-filled (a valid AtomicU64), aligned
        // to a page, at least n words long, and outlives the borrow.
        unsafe { std::slice::from_raw_parts(self.addr.cast::<AtomicU64>(), n) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: addr/len is a mapping this value made and owns.
            unsafe { libc::munmap(self.addr, self.len) };
        }
    }
}

/// A set as the kernel's bitmask words.
fn words_of(set: &CpuSet) -> Vec<c_ulong> {
    let bits = c_ulong::BITS as usize;
    let n = set.last().map_or(1, |l| l as usize / bits + 1);
    let mut words = vec![0 as c_ulong; n];
    for i in set.iter() {
        words[i as usize / bits] |= 1 << (i as usize % bits);
    }
    words
}

fn pin_self(cpu: u32) -> io::Result<()> {
    set_affinity(&CpuSet::from_iter([cpu]))
}

/// Sets the calling thread's affinity (`sched_setaffinity`, pid 0).
fn set_affinity(cpus: &CpuSet) -> io::Result<()> {
    crate::launch::set_own_affinity(cpus)
}

/// The CPU and node the calling thread is on (`getcpu`).
fn where_am_i() -> Seen {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: the kernel writes one unsigned int to each pointer; the
    // third argument (a cache) is unused and may be NULL.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut u32,
            &mut node as *mut u32,
            std::ptr::null_mut::<c_void>(),
        )
    };
    if r != 0 {
        return Seen {
            cpu: u32::MAX,
            node: u32::MAX,
        };
    }
    Seen { cpu, node }
}

/// Seconds on the monotonic clock.
fn now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the kernel writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// A small, seedable generator (SplitMix64) for the lists' order.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by rejection.
    fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next();
            if x < zone {
                return x % n;
            }
        }
    }
}

#[cfg(test)]
mod tests;
