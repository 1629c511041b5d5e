//! Sampled data addresses per thread (seed 004 §4.2: IBS on AMD, PEBS on
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
use super::events::{CORE_PMUS, EVENT_SOURCE_DIR, EventError, EventResolver, RawEvent};
use super::monitor::{SyncReport, host_facts, thread_budget};
use super::registry::{self, ThreadSet};
use crate::sysroot::SysRoot;

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
    pub source: SampleSource,
    /// perf's spelling: `cpu/mem-loads,ldlat=30/`, `ibs_op//`, `page-faults`.
    pub what: String,
    /// The encoded event (`None` for page faults, a generic event).
    pub event: Option<RawEvent>,
    /// `mem-loads-aux`, the group leader some Intel PMUs require.
    pub aux: Option<RawEvent>,
}

/// Whether the PMUs include a core PMU (Intel, AMD or ARM).
fn has_core_pmu(host: &HostFacts) -> bool {
    host.pmus
        .iter()
        .any(|p| CORE_PMUS.contains(&p.as_str()) || p.starts_with("armv"))
}

/// Why the CPU's PMU cannot be seen, with what to do about it.
fn pmu_not_exposed(host: &HostFacts, what: &str) -> String {
    let only = if host.pmus.is_empty() {
        String::new()
    } else {
        format!(" (the kernel lists only {})", host.pmus.join(", "))
    };
    let hint = if host.hypervisor {
        ": a VM without a virtual PMU; give the guest one (QEMU/KVM `-cpu host,pmu=on`, with \
         PEBS or IBS passed through) or run on bare metal"
    } else {
        ": the kernel's perf driver does not drive this CPU's PMU"
    };
    format!("no {what} here: this CPU's PMU is not exposed{only}{hint}")
}

fn via_vm(host: &HostFacts) -> &'static str {
    if host.hypervisor {
        ", or the hypervisor does not pass them through"
    } else {
        ""
    }
}

/// The `mem-loads` event of the first core PMU that describes it, with
/// `mem-loads-aux` where listed.
fn resolve_pebs(
    root: &SysRoot,
    ldlat: Option<u64>,
    host: &HostFacts,
) -> Result<SampleEvent, String> {
    let resolver = EventResolver::new(root);
    let overrides: Vec<(&str, u64)> = ldlat.map(|l| ("ldlat", l)).into_iter().collect();
    let mut looked = Vec::new();
    let mut problems = Vec::new();
    for name in CORE_PMUS {
        let Ok(pmu) = resolver.pmu(name) else {
            continue;
        };
        looked.push(format!("{EVENT_SOURCE_DIR}/{name}/events/mem-loads"));
        match resolver.named_event(&pmu, "mem-loads", &overrides) {
            Ok(Some(ev)) => {
                let aux = match resolver.named_event(&pmu, "mem-loads-aux", &[]) {
                    Ok(aux) => aux,
                    Err(e) => return Err(format!("no PEBS here: mem-loads-aux: {e}")),
                };
                return Ok(SampleEvent {
                    source: SampleSource::PebsLoads,
                    what: ev.what.clone(),
                    event: Some(ev),
                    aux,
                });
            }
            Ok(None) => {}
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "no PEBS here: the kernel's mem-loads description is unusable: {}",
            problems.join("; ")
        ));
    }
    if looked.is_empty() {
        return Err(pmu_not_exposed(host, "PEBS"));
    }
    Err(format!(
        "no PEBS here: {} does not exist (no PEBS load-latency sampling on this CPU{})",
        looked.join(" or "),
        via_vm(host)
    ))
}

/// The `ibs_op` PMU, config 0.
fn resolve_ibs(root: &SysRoot, host: &HostFacts) -> Result<SampleEvent, String> {
    match EventResolver::new(root).pmu("ibs_op") {
        Ok(pmu) => {
            let ev = pmu
                .event(&[], "ibs_op//".into())
                .map_err(|e| format!("no IBS here: {e}"))?;
            Ok(SampleEvent {
                source: SampleSource::IbsOp,
                what: ev.what.clone(),
                event: Some(ev),
                aux: None,
            })
        }
        Err(EventError::NoSuchPmu { .. }) if !has_core_pmu(host) => {
            Err(pmu_not_exposed(host, "IBS"))
        }
        Err(EventError::NoSuchPmu { .. }) => Err(format!(
            "no IBS here: there is no {EVENT_SOURCE_DIR}/ibs_op (not an AMD CPU with IBS{})",
            via_vm(host)
        )),
        Err(e) => Err(format!("no IBS here: {e}")),
    }
}

/// Resolves `source` from the sysfs under `root`, or says why it is not
/// there. Opens nothing.
pub fn resolve_event(
    root: &SysRoot,
    source: SampleSource,
    ldlat: Option<u64>,
    host: &HostFacts,
) -> Result<SampleEvent, String> {
    match source {
        SampleSource::PebsLoads => resolve_pebs(root, ldlat, host),
        SampleSource::IbsOp => resolve_ibs(root, host),
        SampleSource::PageFaults => Ok(SampleEvent {
            source,
            what: "page-faults".into(),
            event: None,
            aux: None,
        }),
    }
}

/// The event to sample with: the configured one, or PEBS where described,
/// else IBS; why neither where neither.
pub fn choose_event(
    root: &SysRoot,
    source: Option<SampleSource>,
    ldlat: Option<u64>,
    host: &HostFacts,
) -> Result<SampleEvent, String> {
    if let Some(s) = source {
        return resolve_event(root, s, ldlat, host);
    }
    let pebs = resolve_pebs(root, ldlat, host);
    if pebs.is_ok() {
        return pebs;
    }
    let ibs = resolve_ibs(root, host);
    if ibs.is_ok() {
        return ibs;
    }
    if !has_core_pmu(host) {
        return Err(pmu_not_exposed(host, "PEBS/IBS"));
    }
    let pmus: Vec<&str> = host
        .pmus
        .iter()
        .map(String::as_str)
        .filter(|p| CORE_PMUS.contains(p))
        .collect();
    match pebs {
        // A broken description is worth more than "absent".
        Err(e) if e.contains("unusable") => Err(e),
        _ => Err(format!(
            "no PEBS/IBS here: the {} PMU describes no mem-loads event and there is no ibs_op \
             PMU (this CPU has neither PEBS load latency nor IBS{})",
            pmus.join("/"),
            via_vm(host)
        )),
    }
}

/// How the event is opened, as found when probing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OpenAttrs {
    precise_ip: u8,
    /// User space only; false where the PMU cannot exclude (IBS).
    exclude_kernel: bool,
}

/// Which step of opening failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Open,
    Map,
}

#[derive(Debug)]
struct OpenFailure {
    stage: Stage,
    /// What was being opened (`mem-loads-aux` or the event).
    what: String,
    err: io::Error,
}

/// One thread's sampling event and ring buffer.
struct ThreadSampler {
    sampler: Sampler,
    /// `mem-loads-aux`, kept open as the group leader.
    _leader: Option<perf_event::Counter>,
}

fn skid(precise_ip: u8) -> SampleSkid {
    match precise_ip {
        0 => SampleSkid::Arbitrary,
        1 => SampleSkid::Constant,
        2 => SampleSkid::RequestZero,
        _ => SampleSkid::RequireZero,
    }
}

fn raw_builder(ev: &RawEvent) -> Builder<'static> {
    let mut b = Builder::new(Raw::new(ev.config).config1(ev.config1).config2(ev.config2));
    b.attrs_mut().type_ = ev.pmu_type;
    b
}

fn exclusions(b: &mut Builder<'_>, tid: i32, attrs: OpenAttrs) {
    if tid != 0 {
        b.observe_pid(tid);
    }
    b.exclude_kernel(attrs.exclude_kernel);
    b.exclude_hv(attrs.exclude_kernel);
}

impl ThreadSampler {
    /// Opens `ev` on `tid` (0: this thread), maps its ring buffer of
    /// `ring_bytes` and enables it.
    fn open(
        tid: i32,
        ev: &SampleEvent,
        attrs: OpenAttrs,
        rate: SampleRate,
        ring_bytes: usize,
    ) -> Result<Self, OpenFailure> {
        let fail = |stage, what: &str, err| OpenFailure {
            stage,
            what: what.to_owned(),
            err,
        };
        let mut leader = match &ev.aux {
            Some(aux) => {
                let mut b = raw_builder(aux);
                exclusions(&mut b, tid, attrs);
                Some(b.build().map_err(|e| fail(Stage::Open, &aux.what, e))?)
            }
            None => None,
        };
        let mut b = match &ev.event {
            Some(raw) => raw_builder(raw),
            None => Builder::new(Software::PAGE_FAULTS),
        };
        exclusions(&mut b, tid, attrs);
        b.sample(ev.source.sample_flags());
        b.precise_ip(skid(attrs.precise_ip));
        match rate {
            SampleRate::Frequency(hz) => b.sample_frequency(hz.max(1)),
            SampleRate::Period(n) => b.sample_period(n.max(1)),
        };
        let counter = match &mut leader {
            Some(l) => b.build_with_group(l),
            None => b.build(),
        }
        .map_err(|e| fail(Stage::Open, &ev.what, e))?;
        let mut sampler = counter
            .sampled(ring_bytes)
            .map_err(|e| fail(Stage::Map, &ev.what, e))?;
        match &mut leader {
            Some(l) => l.enable_group(),
            None => sampler.enable(),
        }
        .map_err(|e| fail(Stage::Open, &ev.what, e))?;
        Ok(ThreadSampler {
            sampler,
            _leader: leader,
        })
    }

    fn fds(&self) -> usize {
        1 + usize::from(self._leader.is_some())
    }

    /// Whether the sampled thread has exited: a sampling event's fd polls
    /// `POLLHUP` once its task is gone (Linux 3.18 on), which also holds
    /// when the tid has been reused since.
    fn exited(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.sampler.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own; timeout 0 does not block.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        rc > 0 && pfd.revents & libc::POLLHUP != 0
    }

    /// Reads every record in the ring buffer into `out` (raw samples) and
    /// `stats`.
    fn drain(&mut self, flags: u64, out: &mut Vec<ParsedSample>, stats: &mut SampleRound) {
        while let Some(rec) = self.sampler.next_record() {
            match rec.ty() {
                PERF_RECORD_SAMPLE => {
                    let body = rec.to_contiguous();
                    match parse_sample(flags, &body) {
                        Some(s) => out.push(s),
                        None => stats.malformed += 1,
                    }
                }
                PERF_RECORD_LOST => {
                    let body = rec.to_contiguous();
                    stats.lost += read_u64(&body, 8).unwrap_or(0);
                }
                PERF_RECORD_THROTTLE => stats.throttled += 1,
                _ => {}
            }
        }
    }
}

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_THROTTLE: u32 = 5;
const PERF_RECORD_SAMPLE: u32 = 9;

/// `PERF_SAMPLE_*` bits, as the kernel's `perf_event_sample_format`.
mod bits {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const WEIGHT: u64 = 1 << 14;
    pub const DATA_SRC: u64 = 1 << 15;
    pub const IDENTIFIER: u64 = 1 << 16;
    pub const WEIGHT_STRUCT: u64 = 1 << 24;
    /// Variable-length fields before `DATA_SRC`, which [`super::parse_sample`]
    /// does not walk.
    pub const UNSUPPORTED: u64 = READ | CALLCHAIN | RAW | BRANCH_STACK | REGS_USER | STACK_USER;
}

/// `perf_mem_data_src.mem_op` (bits 0-4): `PERF_MEM_OP_STORE`.
const PERF_MEM_OP_STORE: u64 = 0x04;

/// The fields of a `PERF_RECORD_SAMPLE` the sampler uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedSample {
    /// Process (tgid) and thread, if `PERF_SAMPLE_TID`.
    pub pid: u32,
    pub tid: u32,
    /// The data address (0: none recorded).
    pub addr: u64,
    /// `perf_mem_data_src`, if `PERF_SAMPLE_DATA_SRC`.
    pub data_src: Option<u64>,
}

impl ParsedSample {
    /// Whether the access was a store, as far as `data_src` says.
    pub fn write(&self) -> bool {
        self.data_src
            .is_some_and(|d| d & 0x1f & PERF_MEM_OP_STORE != 0)
    }
}

fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Parses the body (after `perf_event_header`) of a `PERF_RECORD_SAMPLE`
/// written with `sample_type` = `flags`, in the order perf_event_open(2)
/// gives: identifier, ip, pid/tid, time, addr, id, stream_id, cpu, period,
/// (read, callchain, raw, branch stack, user regs and stack: not
/// supported), weight, data_src. `None` if the body is too short or the
/// flags hold an unsupported variable-length field.
pub fn parse_sample(flags: u64, body: &[u8]) -> Option<ParsedSample> {
    use bits::*;
    if flags & UNSUPPORTED != 0 {
        return None;
    }
    let mut at = 0usize;
    let skip = |flag: u64, at: &mut usize| {
        if flags & flag != 0 {
            *at += 8;
        }
    };
    skip(IDENTIFIER, &mut at);
    skip(IP, &mut at);
    let (mut pid, mut tid) = (0, 0);
    if flags & TID != 0 {
        pid = read_u32(body, at)?;
        tid = read_u32(body, at + 4)?;
        at += 8;
    }
    skip(TIME, &mut at);
    let mut addr = 0;
    if flags & ADDR != 0 {
        addr = read_u64(body, at)?;
        at += 8;
    }
    skip(ID, &mut at);
    skip(STREAM_ID, &mut at);
    skip(CPU, &mut at);
    skip(PERIOD, &mut at);
    if flags & (WEIGHT | WEIGHT_STRUCT) != 0 {
        at += 8;
    }
    let data_src = if flags & DATA_SRC != 0 {
        Some(read_u64(body, at)?)
    } else {
        None
    };
    // Everything asked for must be there.
    if body.len() < at {
        return None;
    }
    Some(ParsedSample {
        pid,
        tid,
        addr,
        data_src,
    })
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
    pub source: Option<SampleSource>,
    pub precise_ip: u8,
    /// User space only (false: IBS, which samples the kernel too; its
    /// kernel addresses are dropped).
    pub exclude_kernel: bool,
    pub rate: SampleRate,
    pub paranoid: Option<i32>,
    pub fds_per_thread: usize,
    /// Ring-buffer bytes per thread, header page included.
    pub ring_bytes_per_thread: usize,
    pub fd_limit: FdLimit,
    /// Threads that fit the fd and memory budgets.
    pub max_threads: usize,
}

impl SamplingAvailability {
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

/// Why opening the sampling event failed, in words to act on.
fn failure_reason(ev: &SampleEvent, f: &OpenFailure, host: &HostFacts) -> String {
    let says = format!("perf_event_open({}) says {}", f.what, errno_name(&f.err));
    let code = f.err.raw_os_error();
    if f.stage == Stage::Map {
        return match code {
            Some(libc::EPERM) => format!(
                "mapping the sample buffer of {} says EPERM: the locked memory perf buffers may \
                 use (kernel.perf_event_mlock_kb, RLIMIT_MEMLOCK) is used up: run as root \
                 (CAP_IPC_LOCK) or raise kernel.perf_event_mlock_kb",
                ev.what
            ),
            _ => format!("mapping the sample buffer of {} failed: {}", ev.what, f.err),
        };
    }
    match (ev.source, code) {
        (SampleSource::IbsOp, Some(libc::EINVAL)) => format!(
            "no per-thread IBS here: {says}: this kernel's IBS samples per CPU only (per-thread \
             IBS needs Linux 6.2 or later)"
        ),
        (SampleSource::PebsLoads, Some(libc::EOPNOTSUPP | libc::ENOENT | libc::EINVAL))
            if has_core_pmu(host) =>
        {
            format!(
                "no PEBS here: {says} with precise_ip 1 to 3: this PMU cannot sample loads \
                 precisely{}",
                if host.hypervisor {
                    " (a VM without PEBS virtualisation)"
                } else {
                    ""
                }
            )
        }
        (SampleSource::PebsLoads, Some(libc::ENODATA)) => format!(
            "no PEBS here: {says}: this CPU needs the mem-loads-aux event as group leader, and \
             sysfs does not describe it"
        ),
        (source, _) => {
            let hardware = source != SampleSource::PageFaults;
            let r = open_failure_reason(&f.what, hardware, &f.err, host);
            match r.strip_prefix("no hardware PMU: ") {
                Some(rest) => format!("no PEBS/IBS here: this CPU's PMU is not exposed: {rest}"),
                None => r,
            }
        }
    }
}

/// The ways to open `source`, best first.
fn candidates(source: SampleSource) -> &'static [OpenAttrs] {
    const PEBS: [OpenAttrs; 3] = [
        OpenAttrs {
            precise_ip: 3,
            exclude_kernel: true,
        },
        OpenAttrs {
            precise_ip: 2,
            exclude_kernel: true,
        },
        OpenAttrs {
            precise_ip: 1,
            exclude_kernel: true,
        },
    ];
    const IBS: [OpenAttrs; 2] = [
        OpenAttrs {
            precise_ip: 0,
            exclude_kernel: true,
        },
        OpenAttrs {
            precise_ip: 0,
            exclude_kernel: false,
        },
    ];
    const SOFTWARE: [OpenAttrs; 1] = [OpenAttrs {
        precise_ip: 0,
        exclude_kernel: true,
    }];
    match source {
        SampleSource::PebsLoads => &PEBS,
        SampleSource::IbsOp => &IBS,
        SampleSource::PageFaults => &SOFTWARE,
    }
}

/// Opens `ev` on this thread the ways it may be opened; the first that
/// works, or why none does.
fn probe(
    ev: &SampleEvent,
    rate: SampleRate,
    ring_bytes: usize,
    host: &HostFacts,
) -> Result<OpenAttrs, String> {
    let mut last = None;
    for &attrs in candidates(ev.source) {
        match ThreadSampler::open(0, ev, attrs, rate, ring_bytes) {
            Ok(_) => return Ok(attrs),
            Err(f) => {
                // Only a refused attribute is worth another try.
                let retry = f.stage == Stage::Open
                    && matches!(f.err.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP));
                last = Some(f);
                if !retry {
                    break;
                }
            }
        }
    }
    let f = last.expect("every source has a way to open it");
    Err(failure_reason(ev, &f, host))
}

/// The soft `RLIMIT_NOFILE` once raised to the hard limit (where finite):
/// what [`raise_fd_limit`] and [`super::PerfMonitor::new`] leave.
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
    super::monitor::raise_nofile_limit()
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if ps > 0 { ps as u64 } else { 4096 }
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
fn spread<T: Copy>(v: &[T], max: usize) -> Vec<T> {
    if v.len() <= max {
        return v.to_vec();
    }
    (0..max).map(|i| v[i * v.len() / max]).collect()
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
    pub fn new(root: &SysRoot, config: &SamplerConfig) -> Self {
        let host = host_facts(root);
        let ps = page_size() as usize;
        let data_pages = config.ring_pages.max(1).next_power_of_two();
        let ring_bytes = data_pages * ps;
        let chosen = choose_event(root, config.source, config.ldlat, &host)
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
