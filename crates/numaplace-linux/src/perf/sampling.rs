//! Sampled data addresses per thread (\[Blagodurov11\] §4.2: IBS on AMD, PEBS on
//! Intel), for the policies that move the pages a thread touches.
//!
//! One sampling event per thread, each with its own ring buffer; every
//! round [`AddressSampler::read`] drains the buffers and returns, per
//! thread, the user-space data addresses it touched, with the node of each
//! page (a `move_pages(2)` status query, one call per process and round)
//! and whether the access was a store (where the event says).
//!
//! ## Which event ([`SampleSource`])
//!
//! - **Intel, PEBS load latency**: the core PMU's `mem-loads` event as the
//!   kernel describes it in `sys/bus/event_source/devices/<pmu>/events/mem-loads`
//!   (`event=0xcd,umask=0x1,ldlat=3`; the `ldlat` threshold goes to
//!   `config1` through the PMU's `format/ldlat`), sampled with the highest
//!   `precise_ip` the kernel accepts (3, 2, then 1: PEBS needs at least 1,
//!   or no address is recorded). Where sysfs also lists `mem-loads-aux`
//!   (Sapphire Rapids, hybrid P-cores), it is opened as the group leader
//!   the kernel requires before `mem-loads` (2 fds per thread). Loads only:
//!   every sample has `write: false`. On hybrid parts the first core PMU
//!   listing `mem-loads` (`cpu_core`) is used, so only P-core time is
//!   sampled.
//!   Where sysfs describes no `mem-loads` but shows a core PMU, libpfm4's
//!   load-latency event for the CPU is used ([`super::libpfm_events`]:
//!   `MEM_INST_RETIRED:LATENCY_ABOVE_THRESHOLD` on Westmere,
//!   `MEM_TRANS_RETIRED:LOAD_LATENCY` from Skylake-SP on, led by
//!   `LD_BLOCKS:STORE_FORWARD`, the kernel's `mem-loads-aux`, on Sapphire
//!   Rapids), with `ldlat` or 3 cycles as sysfs gives.
//! - **AMD, IBS op**: the `ibs_op` PMU (its `type` from sysfs, config 0:
//!   counting cycles). Per-thread IBS needs a kernel whose IBS PMU has a
//!   task context (Linux 6.2 on); older ones say `EINVAL`. IBS cannot
//!   exclude the kernel on most kernels (`PERF_PMU_CAP_NO_EXCLUDE`), so
//!   it is opened user-only where accepted, else without exclusions, and
//!   kernel addresses are dropped. `write` comes from `data_src.mem_op`
//!   (`PERF_MEM_OP_STORE`), which IBS fills from Linux 6.1 on.
//! - **Page faults** ([`SampleSource::PageFaults`], tests and diagnostics
//!   only): `PERF_COUNT_SW_PAGE_FAULTS` with `PERF_SAMPLE_ADDR`, the
//!   faulting address. It works everywhere (no PMU needed) but samples the
//!   first touch of a page, not the hot ones.
//!
//! Records carry `PERF_SAMPLE_TID | PERF_SAMPLE_ADDR`, plus
//! `PERF_SAMPLE_DATA_SRC` for PEBS and IBS. Records without an address (an
//! IBS op that was not a load or store) are counted and dropped.
//!
//! ## Cost
//!
//! By default each thread is sampled at 500 Hz of its running time
//! ([`SampleRate::Frequency`]; the kernel adapts the period): a few
//! microseconds of interrupt per sample, about 0.1–0.3 % of the core the
//! thread runs on, whatever the number of threads. Each thread costs one fd
//! (two with `mem-loads-aux`) and a ring buffer of
//! [`SamplerConfig::ring_pages`] pages plus one (36 KiB by default, locked
//! memory: for non-root users it counts against `perf_event_mlock_kb`).
//! Rounds keep at most [`SamplerConfig::max_per_thread`] samples per
//! thread, evenly spread over what was read.
//!
//! Like the counters ([`super::PerfMonitor`]), what works is decided once,
//! in [`AddressSampler::new`], by opening the event on the daemon's own
//! thread; a thread that cannot be sampled is not retried until it leaves
//! the tid list, and threads beyond the fd budget are retried once fds
//! were freed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::os::fd::AsRawFd;

use libc::{c_int, c_ulong};
use numaplace_model::AddressSample;
use perf_event::events::{Raw, Software};
use perf_event::{Builder, SampleFlag, SampleSkid, Sampler};

use super::availability::{FdLimit, HostFacts, errno_name, open_failure_reason};
use super::counters::thread_alive;
use super::events::{CORE_PMUS, EVENT_SOURCE_DIR, EventError, EventResolver};
use super::libpfm::{EventEncoder, host_encoder};
use super::monitor::{host_facts, thread_budget};
use super::raw_event::RawEvent;
use super::registry::{self, SyncReport, ThreadSet};
use crate::sysconf::page_size;
use crate::sysroot::SysRoot;

mod event;
mod node_query;
mod thread;

use event::*;
pub use event::{choose_event, resolve_event};
use node_query::*;
pub use node_query::{fd_limit_after_raise, query_nodes, raise_fd_limit};
use numaplace_parse::perf_record::*;
pub use numaplace_parse::perf_record::{ParsedSample, parse_sample};
use thread::*;

/// Which event gives the data addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SampleSource {
    /// Intel PEBS load latency (`mem-loads` of the core PMU, from sysfs).
    PebsLoads,
    /// AMD IBS op sampling (the `ibs_op` PMU).
    IbsOp,
    /// Software page faults with the faulting address: tests and
    /// diagnostics only (first touches, not hot pages).
    PageFaults,
}

impl SampleSource {
    /// Its name in words, for messages.
    pub fn name(self) -> &'static str {
        match self {
            SampleSource::PebsLoads => "PEBS load latency",
            SampleSource::IbsOp => "IBS op",
            SampleSource::PageFaults => "page faults",
        }
    }

    /// `PERF_SAMPLE_*` bits of its records.
    fn sample_flags(self) -> SampleFlag {
        match self {
            SampleSource::PebsLoads | SampleSource::IbsOp => {
                SampleFlag::TID | SampleFlag::ADDR | SampleFlag::DATA_SRC
            }
            SampleSource::PageFaults => SampleFlag::TID | SampleFlag::ADDR,
        }
    }
}

/// How often a thread is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleRate {
    /// Samples per second of the thread's running time (the kernel adapts
    /// the period).
    Frequency(u64),
    /// One sample every this many events.
    Period(u64),
}

impl fmt::Display for SampleRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleRate::Frequency(hz) => write!(f, "{hz} Hz per running thread"),
            SampleRate::Period(n) => write!(f, "one in {n} events"),
        }
    }
}

/// How the sampler samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplerConfig {
    /// The event; `None`: PEBS where a core PMU describes `mem-loads`, else
    /// IBS where there is an `ibs_op` PMU.
    pub source: Option<SampleSource>,
    /// How often samples are taken.
    pub rate: SampleRate,
    /// Load-latency threshold in cycles for PEBS, replacing sysfs' `ldlat`
    /// (perf mem uses 30; sysfs says 3, which samples nearly every load).
    pub ldlat: Option<u64>,
    /// Data pages of each thread's ring buffer (rounded up to a power of
    /// two; one more page holds the header).
    pub ring_pages: usize,
    /// Samples kept per thread and round (evenly spread over those read).
    pub max_per_thread: usize,
    /// Look up each sampled page's node (`move_pages` status query).
    pub node_lookup: bool,
    /// File descriptors left for the rest of the daemon.
    pub fd_reserve: usize,
    /// A cap on the fds the sampler holds.
    pub max_fds: Option<usize>,
    /// A cap on the ring-buffer memory of all threads, bytes.
    pub max_ring_bytes: usize,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            source: None,
            rate: SampleRate::Frequency(500),
            ldlat: None,
            ring_pages: 8,
            max_per_thread: 512,
            node_lookup: true,
            fd_reserve: 256,
            max_fds: None,
            max_ring_bytes: 128 << 20,
        }
    }
}

/// A sampling event resolved from sysfs, not yet opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleEvent {
    /// The kind of sampling.
    pub source: SampleSource,
    /// perf's spelling: `cpu/mem-loads,ldlat=30/`, `ibs_op//`, `page-faults`.
    pub what: String,
    /// The encoded event (`None` for page faults, a generic event).
    pub event: Option<RawEvent>,
    /// `mem-loads-aux`, the group leader some Intel PMUs require.
    pub aux: Option<RawEvent>,
}

/// What one [`AddressSampler::read`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleRound {
    /// Threads whose buffers were read.
    pub threads: usize,
    /// Sample records read.
    pub records: u64,
    /// Samples returned (with a user-space address, within the cap).
    pub kept: u64,
    /// Samples without an address (IBS ops that were no load or store).
    pub no_address: u64,
    /// Samples of kernel addresses (IBS cannot exclude the kernel).
    pub kernel: u64,
    /// Samples beyond [`SamplerConfig::max_per_thread`].
    pub over_cap: u64,
    /// Samples the kernel lost because a ring buffer was full.
    pub lost: u64,
    /// Times the kernel throttled a thread's sampling (too many
    /// interrupts).
    pub throttled: u64,
    /// Records that did not parse.
    pub malformed: u64,
    /// Kept samples whose page's node is unknown (not present, or the
    /// query was refused).
    pub node_unknown: u64,
    /// Nanoseconds the read took (drain, parse, node queries).
    pub elapsed_ns: u64,
}

/// Whether this host can sample data addresses, decided once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingAvailability {
    /// The event sampled; `Err`: why nothing is.
    pub event: Result<String, String>,
    /// Where the event's encoding came from ([`RawEvent::source`]: sysfs
    /// or libpfm4); `None` for page faults (a generic event) and where
    /// nothing is sampled.
    pub event_source: Option<String>,
    /// The kind of sampling chosen, if any.
    pub source: Option<SampleSource>,
    /// `perf_event_attr.precise_ip` asked for.
    pub precise_ip: u8,
    /// User space only (false: IBS, which samples the kernel too; its
    /// kernel addresses are dropped).
    pub exclude_kernel: bool,
    /// How often samples are taken.
    pub rate: SampleRate,
    /// `perf_event_paranoid` as read.
    pub paranoid: Option<i32>,
    /// Fds opened per thread.
    pub fds_per_thread: usize,
    /// Ring-buffer bytes per thread, header page included.
    pub ring_bytes_per_thread: usize,
    /// The open-file limit, and whether it holds them.
    pub fd_limit: FdLimit,
    /// Threads that fit the fd and memory budgets.
    pub max_threads: usize,
}

impl SamplingAvailability {
    /// Whether samples can be taken here.
    pub fn is_available(&self) -> bool {
        self.event.is_ok()
    }

    /// Why nothing is sampled, if nothing is.
    pub fn reason(&self) -> Option<&str> {
        self.event.as_ref().err().map(String::as_str)
    }
}

impl fmt::Display for SamplingAvailability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.event {
            Err(reason) => write!(f, "sampled data addresses unavailable: {reason}"),
            Ok(what) => {
                let source = self.source.map_or("?", SampleSource::name);
                writeln!(
                    f,
                    "sampled data addresses: {what} ({source}), precise_ip={}, {}, {}",
                    self.precise_ip,
                    self.rate,
                    if self.exclude_kernel {
                        "user space only"
                    } else {
                        "user and kernel (kernel addresses dropped)"
                    }
                )?;
                if let Some(from) = &self.event_source {
                    writeln!(f, "encoded from {from}")?;
                }
                write!(
                    f,
                    "{} fds and {} KiB of ring buffer per thread; RLIMIT_NOFILE {} (hard {}) \
                     allows {} threads",
                    self.fds_per_thread,
                    self.ring_bytes_per_thread >> 10,
                    self.fd_limit.soft,
                    self.fd_limit.hard,
                    self.max_threads
                )
            }
        }
    }
}

/// Sampled data addresses for a changing set of threads.
pub struct AddressSampler {
    event: Option<SampleEvent>,
    attrs: OpenAttrs,
    config: SamplerConfig,
    ring_bytes: usize,
    availability: SamplingAvailability,
    watched: ThreadSet<ThreadSampler>,
    host: HostFacts,
    page_size: u64,
    last: SampleRound,
}

impl fmt::Debug for AddressSampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressSampler")
            .field("event", &self.availability.event)
            .field("threads", &self.watched.threads.keys().collect::<Vec<_>>())
            .field("refused", &self.watched.refused)
            .field("starved", &self.watched.starved)
            .finish()
    }
}

impl AddressSampler {
    /// Decides, once, whether and how this host samples data addresses
    /// (see the module docs). Never fails: what does not work is in
    /// [`availability`](Self::availability). `root` supplies the sysfs and
    /// procfs facts; the events themselves are always the live kernel's.
    /// PEBS comes from this process's libpfm4 ([`host_encoder`]) where
    /// sysfs describes no `mem-loads`.
    pub fn new(root: &SysRoot, config: &SamplerConfig) -> Self {
        Self::with_encoder(root, config, host_encoder())
    }

    /// [`new`](Self::new), with `encoder` in libpfm4's place.
    pub fn with_encoder(
        root: &SysRoot,
        config: &SamplerConfig,
        encoder: &dyn EventEncoder,
    ) -> Self {
        let host = host_facts(root);
        let ps = page_size() as usize;
        let data_pages = config.ring_pages.max(1).next_power_of_two();
        let ring_bytes = data_pages * ps;
        let chosen = choose_event(root, config.source, config.ldlat, &host, encoder)
            .and_then(|ev| probe(&ev, config.rate, ring_bytes, &host).map(|attrs| (ev, attrs)));
        let fd_limit = raise_fd_limit();
        let (event, attrs, availability) = match chosen {
            Ok((ev, attrs)) => {
                let fds_per_thread = 1 + usize::from(ev.aux.is_some());
                let per_thread_bytes = ring_bytes + ps;
                let max_threads = thread_budget(
                    fd_limit.soft,
                    config.fd_reserve,
                    fds_per_thread,
                    config.max_fds,
                )
                .min(config.max_ring_bytes / per_thread_bytes);
                let a = SamplingAvailability {
                    event: Ok(ev.what.clone()),
                    event_source: ev.event.as_ref().map(RawEvent::source),
                    source: Some(ev.source),
                    precise_ip: attrs.precise_ip,
                    exclude_kernel: attrs.exclude_kernel,
                    rate: config.rate,
                    paranoid: host.paranoid,
                    fds_per_thread,
                    ring_bytes_per_thread: per_thread_bytes,
                    fd_limit,
                    max_threads,
                };
                (Some(ev), attrs, a)
            }
            Err(reason) => {
                tracing::debug!("no sampled data addresses: {reason}");
                let a = SamplingAvailability {
                    event: Err(reason),
                    event_source: None,
                    source: None,
                    precise_ip: 0,
                    exclude_kernel: true,
                    rate: config.rate,
                    paranoid: host.paranoid,
                    fds_per_thread: 0,
                    ring_bytes_per_thread: 0,
                    fd_limit,
                    max_threads: 0,
                };
                (None, candidates(SampleSource::PageFaults)[0], a)
            }
        };
        AddressSampler {
            event,
            attrs,
            config: config.clone(),
            ring_bytes,
            availability,
            watched: ThreadSet::default(),
            host,
            page_size: page_size(),
            last: SampleRound::default(),
        }
    }

    /// Whether and how data addresses are sampled. Decided once.
    pub fn availability(&self) -> &SamplingAvailability {
        &self.availability
    }

    /// The threads sampled now.
    pub fn tracked(&self) -> impl Iterator<Item = i32> + '_ {
        self.watched.threads.keys().copied()
    }

    /// File descriptors held.
    pub fn open_fds(&self) -> usize {
        self.watched.threads.values().map(ThreadSampler::fds).sum()
    }

    /// What the last [`read`](Self::read) saw.
    pub fn last_round(&self) -> &SampleRound {
        &self.last
    }

    /// Listed threads that are not sampled, and why.
    pub fn unsampled(&self) -> BTreeMap<i32, String> {
        let a = &self.availability;
        self.watched.unwatched(&format!(
            "no room left for its sampling event: {} threads at {} fds and {} KiB each \
             fill the budget (RLIMIT_NOFILE {}, hard {}; {} MiB of ring buffers)",
            a.max_threads,
            a.fds_per_thread,
            a.ring_bytes_per_thread >> 10,
            a.fd_limit.soft,
            a.fd_limit.hard,
            self.config.max_ring_bytes >> 20
        ))
    }

    /// Makes the sampled set follow `tids`: opens events for new threads,
    /// closes those of threads no longer listed (their unread samples are
    /// dropped).
    pub fn sync(&mut self, tids: &[i32]) -> SyncReport {
        let ev = self.event.clone();
        let (attrs, rate, ring) = (self.attrs, self.config.rate, self.ring_bytes);
        let (host, max) = (&self.host, self.availability.max_threads);
        self.watched.sync(
            tids,
            max,
            ev.is_some(),
            |tid| {
                let Some(ev) = ev.as_ref() else {
                    return Err(registry::OpenFailure::Refused("no sampling event".into()));
                };
                ThreadSampler::open(tid, ev, attrs, rate, ring).map_err(|f| {
                    match f.err.raw_os_error() {
                        Some(libc::ESRCH | libc::ENOENT) if f.stage == Stage::Open => {
                            registry::OpenFailure::Gone
                        }
                        Some(libc::EMFILE | libc::ENFILE) => registry::OpenFailure::OutOfFds,
                        code => {
                            let why = if f.stage == Stage::Open
                                && matches!(code, Some(libc::EACCES | libc::EPERM))
                            {
                                format!(
                                    "not permitted to sample thread {tid} ({}): another user's \
                                     thread needs root or CAP_PERFMON",
                                    errno_name(&f.err)
                                )
                            } else {
                                failure_reason(ev, &f, host)
                            };
                            tracing::debug!(tid, "not sampled: {why}");
                            registry::OpenFailure::Refused(why)
                        }
                    }
                })
            },
            || {
                tracing::warn!(
                    max_threads = max,
                    "out of file descriptors or ring-buffer budget for address sampling: some \
                     threads are not sampled"
                )
            },
        )
    }

    /// Each sampled thread's data addresses since the previous read (or
    /// since its event was opened), with nodes where asked for. Threads
    /// that exited are dropped and forgotten until they leave the tid list.
    pub fn read(&mut self) -> BTreeMap<i32, Vec<AddressSample>> {
        let start = std::time::Instant::now();
        let mut stats = SampleRound::default();
        let flags = self
            .event
            .as_ref()
            .map_or(0, |e| e.source.sample_flags().bits());
        let mut raw = Vec::new();
        let mut gone = Vec::new();
        // (tid) -> (pid, samples)
        let mut per_thread: BTreeMap<i32, (i32, Vec<(u64, bool)>)> = BTreeMap::new();
        for (&tid, t) in self.watched.threads.iter_mut() {
            raw.clear();
            t.drain(flags, &mut raw, &mut stats);
            stats.threads += 1;
            stats.records += raw.len() as u64;
            for s in &raw {
                if s.addr == 0 {
                    stats.no_address += 1;
                    continue;
                }
                if s.addr >> 63 != 0 {
                    stats.kernel += 1;
                    continue;
                }
                // The record's tid is the sampled thread (no inheritance);
                // fall back to ours where the kernel wrote none.
                let owner = if s.tid != 0 { s.tid as i32 } else { tid };
                let pid = if s.pid != 0 { s.pid as i32 } else { owner };
                per_thread
                    .entry(owner)
                    .or_insert_with(|| (pid, Vec::new()))
                    .1
                    .push((s.addr, s.write()));
            }
            if t.exited() || !thread_alive(tid) {
                gone.push(tid);
            }
        }
        for tid in gone {
            self.watched.drop_thread(tid, "exited".into());
        }
        let cap = self.config.max_per_thread;
        let mut out: BTreeMap<i32, Vec<AddressSample>> = BTreeMap::new();
        let mut by_pid: BTreeMap<i32, BTreeSet<u64>> = BTreeMap::new();
        for (&tid, (pid, samples)) in &per_thread {
            let kept = spread(samples, cap);
            stats.over_cap += (samples.len() - kept.len()) as u64;
            stats.kept += kept.len() as u64;
            if self.config.node_lookup {
                let pages = by_pid.entry(*pid).or_default();
                pages.extend(kept.iter().map(|&(a, _)| a & !(self.page_size - 1)));
            }
            out.insert(
                tid,
                kept.into_iter()
                    .map(|(address, write)| AddressSample {
                        address,
                        node: None,
                        write,
                    })
                    .collect(),
            );
        }
        if self.config.node_lookup {
            let mut nodes: BTreeMap<(i32, u64), u32> = BTreeMap::new();
            for (pid, pages) in by_pid {
                let pages: Vec<u64> = pages.into_iter().collect();
                match query_nodes(pid, &pages) {
                    Ok(found) => {
                        for (page, node) in pages.iter().zip(found) {
                            if let Some(n) = node {
                                nodes.insert((pid, *page), n);
                            }
                        }
                    }
                    Err(e) => tracing::debug!(pid, "move_pages query failed: {e}"),
                }
            }
            for (tid, samples) in out.iter_mut() {
                let pid = per_thread[tid].0;
                for s in samples.iter_mut() {
                    s.node = nodes
                        .get(&(pid, s.address & !(self.page_size - 1)))
                        .copied();
                }
            }
        }
        stats.node_unknown = out.values().flatten().filter(|s| s.node.is_none()).count() as u64;
        if stats.lost > 0 || stats.throttled > 0 {
            tracing::debug!(
                lost = stats.lost,
                throttled = stats.throttled,
                "address sampling: ring buffers overflowed or the kernel throttled"
            );
        }
        stats.elapsed_ns = start.elapsed().as_nanos() as u64;
        self.last = stats;
        out
    }
}

#[cfg(test)]
#[path = "sampling_tests.rs"]
mod tests;
