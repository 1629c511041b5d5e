//! `PerfMonitor`: counters for a changing set of threads.
//!
//! What can be counted is decided once, in [`PerfMonitor::new`], by opening
//! the intended group on the daemon's own thread: the answer then depends
//! only on the PMU, `perf_event_paranoid` and the security setup, never on
//! whether the first target thread happened to exit or belong to another
//! user. A failed open is never retried per interval: a thread that cannot
//! be counted is remembered until it leaves the tid list, and threads that
//! found no free fd are retried only after some fds were freed.
//!
//! File descriptors: one per event per thread ([`Availability::fds_per_thread`]:
//! 4 hardware, +2 uncore, or 4 software). `new` raises the soft
//! `RLIMIT_NOFILE` to the hard limit once and keeps
//! [`PerfConfig::fd_reserve`] fds for the rest of the daemon; threads beyond
//! that budget are reported in [`PerfMonitor::uncounted`].

use std::collections::BTreeMap;
use std::io;

use numaplace_model::{Counter, CounterDeltas};

use super::availability::{
    Availability, CounterStatus, FdLimit, HostFacts, errno_name, open_failure_reason,
};
use super::counters::{EventSpec, OpenOptions, ThreadCounters, exclude_kernel_for, read_paranoid};
use super::events::{CORE_PMUS, EventResolver, UncoreEncodings, resolve_uncore};
use super::libpfm::{EventEncoder, host_encoder};
use super::libpfm_events::libpfm_event;
use super::registry::{OpenFailure, SyncReport, ThreadSet};
use super::scaling::{GroupReading, delta};
use crate::sysroot::SysRoot;

/// How the monitor counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfConfig {
    /// Encodings for the uncore pair where sysfs does not name them.
    pub uncore: UncoreEncodings,
    /// Count the software events even when hardware counters work (4 more
    /// fds per thread); by default they are only the fallback.
    pub always_software: bool,
    /// File descriptors left for the rest of the daemon.
    pub fd_reserve: usize,
    /// A cap on the fds the monitor holds (default: the fd limit less the
    /// reserve).
    pub max_fds: Option<usize>,
}

impl Default for PerfConfig {
    fn default() -> Self {
        PerfConfig {
            uncore: UncoreEncodings::default(),
            always_software: false,
            fd_reserve: 256,
            max_fds: None,
        }
    }
}

struct Tracked {
    counters: ThreadCounters,
    last: GroupReading,
    /// The thread's run time (the scheduler's clock, ns) when `last` was
    /// read, where the round said it ([`PerfMonitor::read_deltas_of`]).
    ran_ns: Option<u64>,
}

/// Per-thread counters for a changing set of threads.
pub struct PerfMonitor {
    specs: Vec<EventSpec>,
    opts: OpenOptions,
    availability: Availability,
    watched: ThreadSet<Tracked>,
}

impl std::fmt::Debug for PerfMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfMonitor")
            .field("specs", &self.specs)
            .field("threads", &self.watched.threads.keys().collect::<Vec<_>>())
            .field("refused", &self.watched.refused)
            .field("starved", &self.watched.starved)
            .finish()
    }
}

/// Reads what explains failed opens: paranoid level, PMUs, hypervisor flag.
pub fn host_facts(root: &SysRoot) -> HostFacts {
    HostFacts {
        paranoid: read_paranoid(root).ok().flatten(),
        pmus: EventResolver::new(root).pmus().unwrap_or_default(),
        hypervisor: root
            .read_optional("proc/cpuinfo")
            .ok()
            .flatten()
            .is_some_and(|s| cpuinfo_has_hypervisor(&s)),
    }
}

fn cpuinfo_has_hypervisor(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|w| w == "hypervisor"))
}

/// Threads that fit: `(soft - reserve) / fds_per_thread`, at most `max_fds /
/// fds_per_thread`; 0 if nothing is counted.
pub fn thread_budget(
    soft: u64,
    reserve: usize,
    fds_per_thread: usize,
    max_fds: Option<usize>,
) -> usize {
    if fds_per_thread == 0 {
        return 0;
    }
    let usable = usize::try_from(soft)
        .unwrap_or(usize::MAX)
        .saturating_sub(reserve);
    usable.min(max_fds.unwrap_or(usize::MAX)) / fds_per_thread
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (where that is finite).
pub(super) fn raise_nofile_limit() -> FdLimit {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return FdLimit {
            soft: 1024,
            hard: 1024,
            raised_from: None,
        };
    }
    let mut limit = FdLimit {
        soft: r.rlim_cur,
        hard: r.rlim_max,
        raised_from: None,
    };
    if r.rlim_cur < r.rlim_max && r.rlim_max != libc::RLIM_INFINITY {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.raised_from = Some(r.rlim_cur);
            limit.soft = r.rlim_max;
            tracing::info!(
                from = r.rlim_cur,
                to = r.rlim_max,
                "raised RLIMIT_NOFILE for perf counters"
            );
        }
    }
    limit
}

/// One counter's events, in the order they are tried, and why others
/// could not even be encoded.
struct Alternatives {
    counter: Counter,
    specs: Vec<EventSpec>,
    unresolved: Vec<String>,
}

impl Alternatives {
    fn one(spec: EventSpec) -> Self {
        Alternatives {
            counter: spec.counter,
            specs: vec![spec],
            unresolved: Vec::new(),
        }
    }
}

/// Opens each counter's alternatives one by one on this thread, keeping
/// the first that joins the group (`chosen`); where none does, the reasons
/// are recorded in `statuses`.
fn probe_into(
    chosen: &mut Vec<EventSpec>,
    candidates: Vec<Alternatives>,
    opts: OpenOptions,
    host: &HostFacts,
    statuses: &mut BTreeMap<Counter, CounterStatus>,
) {
    for alt in candidates {
        let mut reasons: Vec<String> = Vec::new();
        let mut joined = false;
        for spec in alt.specs {
            let mut trial = chosen.clone();
            trial.push(spec.clone());
            match ThreadCounters::open(0, &trial, opts) {
                Ok(_) => {
                    chosen.push(spec);
                    joined = true;
                    break;
                }
                Err(e) => {
                    let r = open_failure_reason(&e.event, spec.is_hardware(), &e.source, host);
                    if !reasons.contains(&r) {
                        reasons.push(r);
                    }
                }
            }
        }
        if !joined {
            reasons.extend(alt.unresolved);
            let reason = reasons.join("; and ");
            statuses.insert(alt.counter, CounterStatus::Unavailable { reason });
        }
    }
}

/// A generic hardware counter's events: the kernel's generic event, then,
/// where the kernel shows a core PMU, libpfm4's model-specific one for
/// this CPU (without a core PMU nothing could open it).
fn generic_then_libpfm(
    c: Counter,
    encoder: &dyn EventEncoder,
    core_pmu: bool,
) -> Option<Alternatives> {
    let mut alt = Alternatives::one(EventSpec::generic(c)?);
    if !core_pmu {
        return Some(alt);
    }
    match libpfm_event(encoder, c) {
        Ok(ev) => alt.specs.push(EventSpec::raw(c, ev)),
        // Only said if the generic event fails too.
        Err(why) if why.starts_with("libpfm4") => alt.unresolved.push(why),
        Err(why) => alt.unresolved.push(format!("libpfm4: {why}")),
    }
    Some(alt)
}

impl PerfMonitor {
    /// Decides, once, what this host can count (see the module docs) and
    /// raises the fd limit. Never fails: what does not work is in
    /// [`availability`](Self::availability). `root` supplies the sysfs and
    /// procfs facts; the counters themselves are always the live kernel's.
    /// Model-specific events come from this process's libpfm4
    /// ([`host_encoder`]) where sysfs and the configuration give none.
    pub fn new(root: &SysRoot, config: &PerfConfig) -> Self {
        Self::with_encoder(root, config, host_encoder())
    }

    /// [`new`](Self::new), with `encoder` in libpfm4's place.
    pub fn with_encoder(root: &SysRoot, config: &PerfConfig, encoder: &dyn EventEncoder) -> Self {
        let host = host_facts(root);
        let mut opts = OpenOptions {
            exclude_kernel: exclude_kernel_for(host.paranoid),
            software_kernel: false,
        };
        // Software events kernel-side where the kernel allows it (it
        // refuses with EACCES where this process may not count the
        // kernel): asked of the task clock on this thread.
        opts.software_kernel = !opts.exclude_kernel
            || EventSpec::generic(Counter::TaskClock).is_some_and(|spec| {
                ThreadCounters::open(
                    0,
                    &[spec],
                    OpenOptions {
                        software_kernel: true,
                        ..opts
                    },
                )
                .is_ok()
            });
        let mut statuses = BTreeMap::new();

        let core_pmu = host.pmus.iter().any(|p| CORE_PMUS.contains(&p.as_str()));
        let mut candidates: Vec<Alternatives> = Counter::HARDWARE
            .iter()
            .filter_map(|&c| generic_then_libpfm(c, encoder, core_pmu))
            .collect();
        let uncore = resolve_uncore(root, &config.uncore, encoder);
        for c in Counter::UNCORE {
            match uncore.get(c) {
                Some(Ok(ev)) => candidates.push(Alternatives::one(EventSpec::raw(c, ev.clone()))),
                Some(Err(reason)) => {
                    statuses.insert(
                        c,
                        CounterStatus::Unavailable {
                            reason: reason.clone(),
                        },
                    );
                }
                None => {}
            }
        }
        let mut hardware = Vec::new();
        probe_into(&mut hardware, candidates, opts, &host, &mut statuses);

        let mut software = Vec::new();
        let sw: Vec<Alternatives> = Counter::SOFTWARE
            .iter()
            .filter_map(|&c| EventSpec::generic(c).map(Alternatives::one))
            .collect();
        probe_into(&mut software, sw, opts, &host, &mut statuses);

        let mut specs = hardware.clone();
        let mut spare = Vec::new();
        if hardware.is_empty() {
            specs = software;
        } else if config.always_software {
            specs.extend(software.iter().cloned());
            if let Err(e) = ThreadCounters::open(0, &specs, opts) {
                let why = format!(
                    "they do not fit in the hardware group: {}",
                    errno_name(&e.source)
                );
                spare.extend(software.iter().map(|s| (s.counter, why.clone())));
                specs = hardware;
            }
        } else {
            let why = "the hardware counters are counted instead (PerfConfig::always_software adds \
                       these, 4 more fds per thread)";
            spare.extend(software.iter().map(|s| (s.counter, why.to_owned())));
        }
        for spec in &specs {
            statuses.insert(
                spec.counter,
                CounterStatus::Counted {
                    event: spec.describe(),
                    source: spec.source(),
                },
            );
        }
        for (c, why) in spare {
            statuses.insert(c, CounterStatus::Spare { why });
        }

        let fd_limit = raise_nofile_limit();
        let max_threads = thread_budget(
            fd_limit.soft,
            config.fd_reserve,
            specs.len(),
            config.max_fds,
        );
        let availability = Availability {
            counters: statuses,
            paranoid: host.paranoid,
            exclude_kernel: opts.exclude_kernel,
            software_kernel: opts.software_kernel,
            fds_per_thread: specs.len(),
            fd_limit,
            max_threads,
        };
        for (c, status) in &availability.counters {
            if let CounterStatus::Unavailable { reason } = status {
                tracing::debug!(counter = c.name(), "not counted: {reason}");
            }
        }
        PerfMonitor {
            specs,
            opts,
            availability,
            watched: ThreadSet::default(),
        }
    }

    /// What is counted, and why not where not. Decided once.
    pub fn availability(&self) -> &Availability {
        &self.availability
    }

    /// The threads counted now.
    pub fn tracked(&self) -> impl Iterator<Item = i32> + '_ {
        self.watched.threads.keys().copied()
    }

    /// File descriptors held.
    pub fn open_fds(&self) -> usize {
        self.watched
            .threads
            .values()
            .map(|t| t.counters.fds())
            .sum()
    }

    /// Listed threads that are not counted, and why.
    pub fn uncounted(&self) -> BTreeMap<i32, String> {
        let a = &self.availability;
        self.watched.unwatched(&format!(
            "no file descriptor left: {} threads at {} fds each fill the budget \
             (RLIMIT_NOFILE {}, hard {}); raise the hard limit (ulimit -Hn, LimitNOFILE=)",
            a.max_threads, a.fds_per_thread, a.fd_limit.soft, a.fd_limit.hard
        ))
    }

    /// Makes the counted set follow `tids`: opens counters for new threads,
    /// closes those of threads no longer listed.
    pub fn sync(&mut self, tids: &[i32]) -> SyncReport {
        let (specs, opts, a) = (&self.specs, self.opts, &self.availability);
        self.watched.sync(
            tids,
            a.max_threads,
            !specs.is_empty(),
            |tid| match ThreadCounters::open(tid, specs, opts) {
                Ok(counters) => {
                    let last = GroupReading::zero(counters.counters());
                    Ok(Tracked {
                        counters,
                        last,
                        ran_ns: None,
                    })
                }
                Err(e) => Err(match e.source.raw_os_error() {
                    Some(libc::ESRCH | libc::ENOENT) => OpenFailure::Gone,
                    Some(libc::EMFILE | libc::ENFILE) => OpenFailure::OutOfFds,
                    code => {
                        let why = if matches!(code, Some(libc::EACCES | libc::EPERM)) {
                            format!(
                                "not permitted to watch thread {tid} ({}): another user's \
                                 thread needs root or CAP_PERFMON",
                                errno_name(&e.source)
                            )
                        } else {
                            e.to_string()
                        };
                        tracing::debug!(tid, "not counted: {why}");
                        OpenFailure::Refused(why)
                    }
                }),
            },
            || {
                tracing::warn!(
                    max_threads = a.max_threads,
                    fds_per_thread = a.fds_per_thread,
                    "out of file descriptors for perf counters: some threads are not counted"
                )
            },
        )
    }

    /// Each counted thread's counts since the previous read (or since its
    /// counters were opened). Threads that exited are dropped, silently.
    pub fn read_deltas(&mut self) -> BTreeMap<i32, CounterDeltas> {
        self.read(|tid| super::counters::thread_alive(tid).then_some(None))
    }

    /// As [`PerfMonitor::read_deltas`], for a round that listed the live
    /// threads (`seen`: tid -> its run time in ns, the scheduler's clock,
    /// where the round read it): a thread not listed has exited (no
    /// `kill(tid, 0)` per thread), and one whose run time has not moved
    /// since its counters were last read is not read again. Its counters
    /// count only while it runs (per-thread events: their enabled and
    /// running times stand still too), so the read would return what the
    /// last one did, and the delta is the same zero; one that ran after
    /// the round listed it shows its counts at the next read, none lost.
    /// On a host most of whose threads sleep through a round, this is
    /// most of the reads.
    pub fn read_deltas_of(
        &mut self,
        seen: &BTreeMap<i32, Option<u64>>,
    ) -> BTreeMap<i32, CounterDeltas> {
        self.read(|tid| seen.get(&tid).copied())
    }

    /// The reads: `seen(tid)` is `None` for a thread that exited, else
    /// its run time where known.
    fn read(&mut self, seen: impl Fn(i32) -> Option<Option<u64>>) -> BTreeMap<i32, CounterDeltas> {
        let mut out = BTreeMap::new();
        let mut drop = Vec::new();
        for (&tid, t) in self.watched.threads.iter_mut() {
            let Some(ran_ns) = seen(tid) else {
                drop.push((tid, None));
                continue;
            };
            if ran_ns.is_some() && ran_ns == t.ran_ns {
                out.insert(tid, delta(&t.last, &t.last));
                continue;
            }
            match t.counters.read() {
                Ok(cur) => {
                    out.insert(tid, delta(&t.last, &cur));
                    t.last = cur;
                    t.ran_ns = ran_ns;
                }
                Err(e) => drop.push((tid, Some(e))),
            }
        }
        for (tid, err) in drop {
            let why = match err {
                None => "exited".to_owned(),
                Some(e) => read_failure(tid, &e),
            };
            self.watched.drop_thread(tid, why);
        }
        out
    }
}

fn read_failure(tid: i32, e: &io::Error) -> String {
    let why = format!("reading its counters failed ({e}); not retried");
    tracing::warn!(tid, "{why}");
    why
}

#[cfg(test)]
#[path = "monitor_tests.rs"]
mod tests;
