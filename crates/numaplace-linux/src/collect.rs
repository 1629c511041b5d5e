//! One collection round on a live host (or a fixture tree): every thread
//! from procfs, grouped into applications and VMs, memory per node from
//! `numa_maps`, counter deltas from perf_event, sampled data addresses
//! (PEBS / IBS, where asked for), machine readings.
//!
//! Races are normal here: a thread that exits between listing and reading
//! is skipped silently; a file we may not read (another user's process
//! when not root) leaves that part empty and is counted, not fatal.
//!
//! The daemon lowers its cost per round with two settings the other users
//! of a collector leave off: [`Collector::set_carry_over`] takes a quiet
//! process's threads and memory from the round before (`collect/carry.rs`
//! says when and what that can miss), and [`Collector::set_memory_scope`]
//! reads memory only for the processes a policy may act on.

mod carry;
mod faults;
mod held;
mod iterated;
mod kept_memory;
mod process;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use numaplace_model::Scope;
use numaplace_model::{
    Counter, EnergyDelta, GroupKind, MachineReadings, ResctrlSample, Snapshot, TaskGroup,
};
use thiserror::Error;

use self::carry::CarryOver;
use self::faults::FaultCounts;
use self::held::HeldStats;
use self::iterated::Iterated;
use self::kept_memory::KeptMemory;

use crate::balancing::NumaBalancing;
use crate::confinement::Confinements;
use crate::nodes::read_node_meminfo;
use crate::numastat::{NumaCounters, read_numastat};
use crate::perf::sampling::fd_limit_after_raise;
use crate::perf::{
    AddressSampler, CounterStatus, PerfConfig, PerfMonitor, SamplerConfig, UncoreEncodings,
};
use crate::powercap::{Rapl, energy_delta};
use crate::procfs::{ProcError, ProcReader, TaskBuffers};
use crate::resctrl::{Resctrl, mbm_delta};
use crate::sysconf::clock_ticks;
use crate::sysroot::SysRoot;
use crate::uptime::read_uptime_ticks;
use crate::vm::{VmDiscovery, VmSources};

/// Bits of the first `sched_getaffinity` buffer (the kernel's largest
/// `NR_CPUS`); it grows if the kernel asks for more.
const MAX_CPUS: usize = 8192;

/// What to collect besides the task list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectOptions {
    /// Memory per node of every process (reads each `numa_maps`).
    pub memory: bool,
    /// Hardware / software counters per thread (perf_event).
    pub counters: bool,
    /// Machine readings: node memory, RAPL energy, resctrl.
    pub machine: bool,
    /// Sampled data addresses per thread (PEBS load latency on Intel, IBS
    /// op on AMD) into [`Snapshot::samples`]: one more fd and a ring
    /// buffer per thread, so only for the policies that move hot pages.
    pub samples: bool,
}

impl Default for CollectOptions {
    fn default() -> Self {
        CollectOptions {
            memory: true,
            counters: true,
            machine: true,
            samples: false,
        }
    }
}

/// Why a round could not be read.
#[derive(Debug, Error)]
pub enum CollectError {
    #[error("cannot list processes")]
    /// `/proc` could not be listed.
    ListProcesses(#[source] ProcError),
}

/// Counts of what a round could not see, for the log and the notes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundGaps {
    /// Tasks that vanished while being read.
    pub gone: usize,
    /// Files we were not allowed to read.
    pub denied: usize,
    /// Files that did not parse.
    pub malformed: usize,
}

/// Reads a round's snapshot of the host: every process and thread,
/// their counters, memory per node, and the machine's readings.
pub struct Collector {
    root: SysRoot,
    proc: ProcReader,
    opts: CollectOptions,
    seq: u64,
    last: Option<Instant>,
    gaps: RoundGaps,
    perf: Option<PerfMonitor>,
    sampler: Option<AddressSampler>,
    /// Processes whose threads are sampled (None: every user process).
    sample_pids: Option<BTreeSet<i32>>,
    rapl: Option<Rapl>,
    /// Last `energy_uj` per zone.
    energy_prev: BTreeMap<String, u64>,
    resctrl: Option<Resctrl>,
    /// Last cumulative (total, local) bandwidth bytes per (group, domain).
    mbm_prev: BTreeMap<(String, u32), (Option<u64>, Option<u64>)>,
    missing: Vec<String>,
    /// Quiet processes carried over from the round before (None: every
    /// process is read in full every round).
    carry: Option<CarryOver>,
    /// The processes whose memory is read (None: every process's).
    memory_scope: Option<Scope>,
    /// The processes the last round carried over, increasing.
    carried: Vec<i32>,
    /// Whether threads' NUMA hinting faults are read from their `sched`
    /// ([`Collector::set_numa_faults`]).
    numa_faults: bool,
    /// Why the hinting faults could not be read, once found (said once).
    numa_faults_missing: Option<String>,
    /// Processes whose last `numa_maps` read showed memory under an
    /// explicit memory policy.
    explicit_policy: BTreeSet<i32>,
    /// Buffers a round reuses from thread to thread: file reads and
    /// directory listings, a process's tids, an affinity mask.
    bufs: TaskBuffers,
    tids: Vec<i32>,
    affinity_words: Vec<libc::c_ulong>,
    /// Threads' `stat` files held open between rounds (`collect/held.rs`):
    /// with the carry-over, on the live host, without counters or samples.
    held: Option<HeldStats>,
    /// The BPF task iterator (`collect/iterated.rs`): with the carry-over,
    /// on the live host, where the kernel and privileges allow.
    iterated: Option<Iterated>,
    /// Why the task iterator is not used, where it was tried.
    iterated_missing: Option<String>,
    /// [`Collector::set_task_iterator`]`(false)` was called.
    iterator_off: bool,
    /// Running processes' memory kept while nothing says it changed
    /// (`collect/kept_memory.rs`): with the carry-over, on the live host.
    kept: Option<KeptMemory>,
    /// This round's (main thread's start time, page faults summed over the
    /// threads read, threads read) per process read in full.
    round_faults: HashMap<i32, (u64, u64, usize)>,
    /// The host's pages migrated, collapsed or reclaimed, read this round.
    host_moves: Option<u64>,
    /// The running processes whose memory the last round kept, increasing.
    memory_kept: Vec<i32>,
    /// VMs found through QMP sockets and libvirt (`vm/discover.rs`).
    vms: Option<VmDiscovery>,
    /// Cgroups' cpusets, read once a round each (`confinement.rs`).
    confinements: Confinements,
    /// Each process's page faults, last round's reading (`collect/faults.rs`).
    faults: FaultCounts,
    /// The nodes' `numastat` and vmstat's NUMA counters, last read.
    numa_counters: NumaCounters,
}

impl Collector {
    /// Sets up the sources `opts` asks for and finds out, once, which
    /// signals this machine cannot give; [`Collector::missing_signals`]
    /// says which and why.
    pub fn new(root: SysRoot, opts: CollectOptions) -> Collector {
        Collector::with_sampler_config(root, opts, SamplerConfig::default())
    }

    /// [`Collector::new`], sampling addresses (if `opts.samples`) as
    /// `sampler_config` says: another event or rate (its fd cap is set
    /// here when counters are on too).
    pub fn with_sampler_config(
        root: SysRoot,
        opts: CollectOptions,
        sampler_config: SamplerConfig,
    ) -> Collector {
        Collector::with_config(root, opts, sampler_config, UncoreEncodings::default())
    }

    /// [`Collector::with_sampler_config`], with the operator's encodings of
    /// the uncore pair (config `[perf]`), tried before sysfs and libpfm4.
    pub fn with_config(
        root: SysRoot,
        opts: CollectOptions,
        mut sampler_config: SamplerConfig,
        uncore: UncoreEncodings,
    ) -> Collector {
        let mut missing = Vec::new();
        // Counters and sampling share the fd budget: sampling takes one fd
        // (two with mem-loads-aux) per thread to the counters' four to six,
        // so a quarter of it keeps both at about the same number of threads.
        let mut perf_config = PerfConfig {
            uncore,
            ..PerfConfig::default()
        };
        if opts.counters && opts.samples {
            let usable = usize::try_from(fd_limit_after_raise())
                .unwrap_or(usize::MAX)
                .saturating_sub(perf_config.fd_reserve);
            sampler_config.max_fds = Some(usable / 4);
            perf_config.max_fds = Some(usable - usable / 4);
        }
        let perf = opts.counters.then(|| {
            let m = PerfMonitor::new(&root, &perf_config);
            // One line per kind of counter when all of that kind are
            // missing (as on a machine without a PMU), else one per counter.
            let avail = m.availability();
            for kind in [
                &Counter::HARDWARE[..],
                &Counter::UNCORE[..],
                &Counter::SOFTWARE[..],
            ] {
                let reasons: Vec<(Counter, &str)> = kind
                    .iter()
                    .filter_map(|&c| match avail.counters.get(&c) {
                        Some(CounterStatus::Unavailable { reason }) => Some((c, reason.as_str())),
                        _ => None,
                    })
                    .collect();
                if reasons.len() == kind.len() && kind.len() > 1 {
                    let names: Vec<&str> = kind.iter().map(|c| c.name()).collect();
                    // Say what still works in their place.
                    let instead = if kind[0] == Counter::Instructions && avail.software() {
                        "; counting software events instead (task clock, context switches, \
                         CPU migrations, page faults): CPU share is shown, IPC and MPKI are not"
                    } else {
                        ""
                    };
                    missing.push(format!("{}: {}{instead}", names.join(", "), reasons[0].1));
                } else {
                    for (c, r) in reasons {
                        missing.push(format!("{}: {r}", c.name()));
                    }
                }
            }
            m
        });
        let sampler = opts.samples.then(|| {
            let s = AddressSampler::new(&root, &sampler_config);
            if let Some(reason) = s.availability().reason() {
                missing.push(format!("sampled data addresses: {reason}"));
            }
            s
        });
        let (rapl, resctrl) = if opts.machine {
            let rapl = Rapl::probe(&root);
            if let Some(r) = rapl.reason() {
                missing.push(format!("package energy: {r}"));
            }
            let resctrl = Resctrl::probe(&root);
            if let Some(r) = resctrl.reason() {
                missing.push(format!("LLC occupancy and memory bandwidth: {r}"));
            }
            if let Err(e) = read_numastat(&root) {
                missing.push(format!("allocations per node (numastat): {e}"));
            }
            (rapl.into_available(), resctrl.into_available())
        } else {
            (None, None)
        };
        Collector {
            proc: ProcReader::new(root.clone()),
            confinements: Confinements::new(root.clone()),
            root,
            opts,
            seq: 0,
            last: None,
            gaps: RoundGaps::default(),
            perf,
            sampler,
            sample_pids: None,
            rapl,
            energy_prev: BTreeMap::new(),
            resctrl,
            mbm_prev: BTreeMap::new(),
            missing,
            carry: None,
            memory_scope: None,
            carried: Vec::new(),
            numa_faults: false,
            numa_faults_missing: None,
            explicit_policy: BTreeSet::new(),
            bufs: TaskBuffers::default(),
            tids: Vec::new(),
            affinity_words: Vec::new(),
            held: None,
            iterated: None,
            iterated_missing: None,
            iterator_off: false,
            kept: None,
            round_faults: HashMap::new(),
            host_moves: None,
            memory_kept: Vec::new(),
            vms: None,
            faults: FaultCounts::default(),
            numa_counters: NumaCounters::new(),
        }
    }

    /// Where to find VMs whose vCPU threads carry no names (QEMU without
    /// `debug-threads=on`): QMP sockets and libvirt's status files, asked
    /// as `vm/discover.rs` says. QMP sockets are this host's, so they are
    /// asked only when the root is the live host. `None` (the default):
    /// VMs are found by their threads' names only.
    pub fn set_vm_sources(&mut self, sources: Option<VmSources>) {
        self.vms = sources.map(|mut s| {
            if !self.root.is_host() && !s.qmp.is_empty() {
                tracing::debug!("QMP sockets are not asked for a snapshot tree");
                s.qmp.clear();
            }
            VmDiscovery::new(s)
        });
    }

    /// Shares the libvirt domains VM discovery finds each round with an
    /// actuator that pins through libvirt
    /// ([`ThroughLibvirt`](crate::actuate::libvirt::ThroughLibvirt)); after
    /// [`set_vm_sources`](Self::set_vm_sources).
    pub fn share_libvirt_domains(&mut self, shared: crate::vm::discover::SharedDomains) {
        if let Some(v) = &mut self.vms {
            v.share_domains(shared);
        }
    }

    /// Reads the kubelet's CPU and memory manager checkpoints each round
    /// (those named): no thread is placed onto a CPU it handed a container
    /// for its sole use, and a pod holding such CPUs, or whose memory it
    /// bound to nodes, is left to it unless `place_guaranteed`
    /// (`kubelet.rs`, [`Confinements::set_kubelet`](crate::confinement::Confinements::set_kubelet)).
    pub fn set_kubelet(&mut self, files: crate::confinement::KubeletFiles) {
        self.confinements.set_kubelet(files);
    }

    /// Whether to read each thread's NUMA hinting faults per node from its
    /// `sched` into [`Snapshot::numa_faults`] (threads of processes whose
    /// memory is read, not carried over): worth it only while the kernel's
    /// automatic NUMA balancing runs, since only then does it take them.
    pub fn set_numa_faults(&mut self, on: bool) {
        self.numa_faults = on;
    }

    /// Why hinting faults could not be read on this kernel (no
    /// `CONFIG_NUMA_BALANCING` or `CONFIG_SCHED_DEBUG`), once the first try
    /// found out; `None` while they can be, or before.
    pub fn numa_faults_missing(&self) -> Option<&str> {
        self.numa_faults_missing.as_deref()
    }

    /// With `Some(max_age)`, a process none of whose threads ran since it
    /// was last read (on the live host: its CPU-time clock did not
    /// advance) keeps its threads' `stat` fields and its memory per node
    /// from that read, for up to `max_age`; its threads' allowed CPUs are
    /// still read every round. What that can miss, and for how long, is in
    /// `collect/carry.rs`. `None` (the default): every process is read in
    /// full every round. Fixture trees are always read in full.
    ///
    /// With the carry-over on, on the live host, a collector that counts
    /// and samples nothing also keeps its threads' `stat` files open from
    /// round to round (`collect/held.rs`: up to half the fd limit, which
    /// is raised to the hard limit for it), so a thread that ran costs one
    /// read of its `stat`, not an open, a read and a close.
    ///
    /// Before that, on the live host, it loads the BPF task iterator
    /// (`collect/iterated.rs`): every thread's `stat` fields then come from
    /// one pass per round, and no file is held. Where it cannot be loaded
    /// ([`Collector::task_iterator_missing`] says why: not root, no BTF,
    /// an older kernel), `/proc` as above.
    pub fn set_carry_over(&mut self, max_age: Option<Duration>) {
        self.carry = max_age.map(CarryOver::new);
        self.kept = max_age.filter(|_| self.root.is_host()).map(KeptMemory::new);
        self.set_task_iterator(!self.iterator_off);
    }

    /// Whether the daemon's rounds may read threads through the BPF task
    /// iterator (on by default; takes effect with the carry-over on, on
    /// the live host). Off, they read `/proc` (holding `stat` files).
    pub fn set_task_iterator(&mut self, on: bool) {
        self.iterator_off = !on;
        self.iterated = None;
        self.iterated_missing = None;
        if !on {
            self.iterated_missing = Some("turned off".to_string());
        } else if self.carry.is_some() && self.root.is_host() {
            let max_age = self.carry.as_ref().map_or(Duration::ZERO, |c| c.max_age());
            match Iterated::open(clock_ticks(), max_age) {
                Ok(i) => self.iterated = Some(i),
                Err(e) => {
                    tracing::info!(
                        "threads are read from /proc: the BPF task iterator cannot be used: {e}"
                    );
                    self.iterated_missing = Some(e.to_string());
                }
            }
        }
        self.hold_stats();
    }

    /// Holds threads' `stat` files open where the task iterator is not
    /// used and nothing else needs the fds.
    fn hold_stats(&mut self) {
        let hold = self.carry.is_some()
            && self.root.is_host()
            && self.iterated.is_none()
            && !self.opts.counters
            && !self.opts.samples;
        self.held = hold.then(HeldStats::new);
    }

    /// Whether threads are read through the BPF task iterator: `None` if
    /// they are, or it was not tried (not a daemon, not the live host);
    /// else why not.
    pub fn task_iterator_missing(&self) -> Option<&str> {
        self.iterated_missing.as_deref()
    }

    /// Whether this collector reads threads through the task iterator.
    pub fn uses_task_iterator(&self) -> bool {
        self.iterated.is_some()
    }

    /// Reads a process in full at the next round, memory included: for a
    /// process numaplace just acted on (pinned its threads or moved its
    /// memory), whose carried reading would no longer be true.
    pub fn refresh(&mut self, pid: i32) {
        if let Some(k) = &mut self.kept {
            k.forget(pid);
        }
        if let Some(c) = &mut self.carry {
            c.forget(pid);
        }
    }

    /// Reads memory per node only for the processes `scope` takes in (as
    /// [`Scope::matches`] decides on the round's own snapshot); the others
    /// have `memory: None`, as kernel threads do. For a daemon whose
    /// policy reads memory only of the processes it manages. `None` (the
    /// default): every process's.
    pub fn set_memory_scope(&mut self, scope: Option<Scope>) {
        self.memory_scope = scope;
    }

    /// Signals this machine cannot give, each with why: said once, at start.
    pub fn missing_signals(&self) -> &[String] {
        &self.missing
    }

    /// The counters' availability report, if counters were asked for.
    pub fn perf(&self) -> Option<&PerfMonitor> {
        self.perf.as_ref()
    }

    /// The address sampler, if samples were asked for: its availability,
    /// the threads it samples, what its last round read.
    pub fn sampler(&self) -> Option<&AddressSampler> {
        self.sampler.as_ref()
    }

    /// RAPL energy counters, where the kernel has them.
    pub fn rapl(&self) -> Option<&Rapl> {
        self.rapl.as_ref()
    }

    /// resctrl, where it is mounted and monitors something.
    pub fn resctrl(&self) -> Option<&Resctrl> {
        self.resctrl.as_ref()
    }

    /// Samples only the threads of these processes (pids), e.g. the
    /// processes a policy manages; `None` (the default): every user
    /// process. Takes effect at the next round, which closes the events of
    /// threads outside the set.
    pub fn set_sample_processes(&mut self, pids: Option<BTreeSet<i32>>) {
        self.sample_pids = pids;
    }

    /// What the last round could not see.
    pub fn gaps(&self) -> &RoundGaps {
        &self.gaps
    }

    /// The processes (pids, increasing) whose threads the last round
    /// carried over from the round before ([`Collector::set_carry_over`]).
    pub fn carried(&self) -> &[i32] {
        &self.carried
    }

    /// The processes (pids, increasing) that ran since the round before
    /// but whose memory per node the last round kept from an earlier read,
    /// nothing having changed it (`collect/kept_memory.rs`).
    pub fn memory_kept(&self) -> &[i32] {
        &self.memory_kept
    }

    fn note(&mut self, e: &ProcError) {
        match e {
            ProcError::Gone { .. } => self.gaps.gone += 1,
            ProcError::Denied { .. } => self.gaps.denied += 1,
            ProcError::Parse { .. } => {
                self.gaps.malformed += 1;
                tracing::debug!("{e}");
            }
            // Under a snapshot root, a file that is a device, a FIFO or
            // too large is the tree's fault: said, not only counted.
            ProcError::Io { source, .. }
                if !self.root.is_host()
                    && matches!(
                        source.kind(),
                        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
                    ) =>
            {
                self.gaps.malformed += 1;
                tracing::warn!("{e}: left out");
            }
            ProcError::Io { .. } | ProcError::Unavailable { .. } => {
                self.gaps.malformed += 1;
                tracing::debug!("{e}");
            }
        }
    }

    /// Takes one round.
    pub fn collect(&mut self) -> Result<Snapshot, CollectError> {
        let now = Instant::now();
        let interval_ns = self
            .last
            .map_or(0, |l| now.duration_since(l).as_nanos() as u64);
        self.gaps = RoundGaps::default();
        self.carried.clear();
        self.round_faults.clear();
        self.memory_kept.clear();
        self.confinements.new_round();
        if let Some(c) = &mut self.carry {
            c.new_round();
        }
        if let Some(Err(e)) = self.iterated.as_mut().map(|i| i.refresh()) {
            tracing::warn!(
                "the BPF task iterator failed ({e}): threads are read from /proc from now on"
            );
            self.iterated = None;
            self.iterated_missing = Some(e.to_string());
            self.hold_stats();
        }
        let pids = self.proc.pids().map_err(CollectError::ListProcesses)?;
        let mut tasks = Vec::new();
        let mut groups = Vec::new();
        for pid in pids {
            if let Some((g, mut ts)) = self.read_process(pid, now) {
                groups.push(g);
                tasks.append(&mut ts);
            }
        }
        let seen: BTreeSet<i32> = groups.iter().map(|g| g.pid).collect();
        if let Some(c) = &mut self.carry {
            c.retain_seen(|pid| seen.contains(&pid));
        }
        if let Some(h) = &mut self.held {
            h.retain_seen(|pid| seen.contains(&pid));
        }
        if let Some(k) = &mut self.kept {
            k.retain_seen(|pid| seen.contains(&pid));
        }
        if let Some(i) = &mut self.iterated {
            i.retain_seen(|pid| seen.contains(&pid));
        }
        self.explicit_policy.retain(|pid| seen.contains(pid));
        let mut page_faults = self.faults.finish();
        page_faults.retain(|pid, _| seen.contains(pid));
        let mut snapshot = Snapshot {
            seq: self.seq,
            time_unix_ns: 0,
            interval_ns,
            tasks,
            groups,
            counters: BTreeMap::new(),
            machine: MachineReadings::default(),
            samples: BTreeMap::new(),
            signatures: BTreeMap::new(),
            page_sets: BTreeMap::new(),
            numa_faults: BTreeMap::new(),
            explicit_mempolicy: BTreeSet::new(),
            guest_hints: BTreeMap::new(),
            page_faults,
        };
        snapshot.sort_tasks();
        if let Some(v) = &mut self.vms {
            v.discover(&self.root, &mut snapshot);
        }
        if self.opts.memory {
            self.read_memory(&mut snapshot, now);
        }
        let (tasks, groups) = (&snapshot.tasks, &snapshot.groups);
        // Kernel threads run no user code to count or sample (and counting
        // is user space only where perf_event_paranoid >= 2): their fds are
        // better spent on user threads.
        let kernel: BTreeSet<i32> = groups
            .iter()
            .filter(|g| g.is_kernel())
            .map(|g| g.pid)
            .collect();
        let user_tasks = || tasks.iter().filter(|t| !kernel.contains(&t.tgid));
        let samples = match &mut self.sampler {
            Some(sampler) => {
                let tids: Vec<i32> = user_tasks()
                    .filter(|t| {
                        self.sample_pids
                            .as_ref()
                            .is_none_or(|p| p.contains(&t.tgid))
                    })
                    .map(|t| t.tid)
                    .collect();
                // Samples first (of the threads sampled since the last
                // round), then events for the threads that appeared.
                let alive: BTreeSet<i32> = tids.iter().copied().collect();
                let mut samples = sampler.read();
                samples.retain(|tid, _| alive.contains(tid));
                sampler.sync(&tids);
                samples
            }
            None => BTreeMap::new(),
        };
        let counters = match &mut self.perf {
            Some(perf) => {
                let tids: Vec<i32> = user_tasks().map(|t| t.tid).collect();
                // Deltas first (threads counted since the last round), then
                // open counters for the threads that appeared. The round's
                // threads are the live ones; where the task iterator read
                // their run time, one that has not run is not read.
                let seen: BTreeMap<i32, Option<u64>> = user_tasks()
                    .map(|t| {
                        let ran = (self.iterated.as_ref())
                            .and_then(|i| i.record(t.tgid, t.tid))
                            .filter(|r| r.start_time == t.start_time)
                            .map(|r| r.runtime_ns);
                        (t.tid, ran)
                    })
                    .collect();
                let deltas = perf.read_deltas_of(&seen);
                perf.sync(&tids);
                deltas
            }
            None => BTreeMap::new(),
        };
        snapshot.samples = samples;
        snapshot.counters = counters;
        snapshot.machine = self.read_machine();
        snapshot.time_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.seq += 1;
        self.last = Some(now);
        Ok(snapshot)
    }

    /// The round's machine readings: every one where asked for, else only
    /// the clock, the uptime and the kernel's balancing switch.
    fn read_machine(&mut self) -> MachineReadings {
        let numa_balancing = NumaBalancing::read(&self.root).between_nodes();
        let uptime_ticks = read_uptime_ticks(&self.root, clock_ticks());
        if !self.opts.machine {
            return MachineReadings {
                clock_ticks: clock_ticks(),
                numa_balancing,
                uptime_ticks,
                ..MachineReadings::default()
            };
        }
        let (numastat, vmstat_numa) = self.numa_counters.round(&self.root);
        MachineReadings {
            nodes: read_node_meminfo(&self.root),
            energy: self.read_energy(),
            resctrl: self.read_resctrl(),
            clock_ticks: clock_ticks(),
            numa_balancing,
            uptime_ticks,
            numastat,
            vmstat_numa,
        }
    }

    fn read_energy(&mut self) -> Vec<EnergyDelta> {
        let Some(rapl) = &self.rapl else {
            return Vec::new();
        };
        let readings = match rapl.read() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("package energy: {e}");
                return Vec::new();
            }
        };
        readings
            .into_iter()
            .map(|r| {
                let max = rapl
                    .zone(&r.zone)
                    .map_or(u64::MAX, |z| z.max_energy_range_uj);
                let prev = self.energy_prev.insert(r.zone.clone(), r.energy_uj);
                EnergyDelta {
                    microjoules: prev.map(|p| energy_delta(p, r.energy_uj, max)),
                    zone: r.zone,
                    name: r.name,
                }
            })
            .collect()
    }

    fn read_resctrl(&mut self) -> Vec<ResctrlSample> {
        let Some(resctrl) = &self.resctrl else {
            return Vec::new();
        };
        let readings = match resctrl.read() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("resctrl: {e}");
                return Vec::new();
            }
        };
        readings
            .into_iter()
            .map(|r| {
                let key = (r.group.clone(), r.domain);
                let cur = (r.mbm_total_bytes, r.mbm_local_bytes);
                let prev = self.mbm_prev.insert(key, cur);
                ResctrlSample {
                    group: r.group,
                    domain: r.domain,
                    llc_occupancy: r.llc_occupancy,
                    mbm_total_bytes: prev.and_then(|p| mbm_delta(p.0, cur.0)),
                    mbm_local_bytes: prev.and_then(|p| mbm_delta(p.1, cur.1)),
                }
            })
            .collect()
    }
}

/// Whether a group is a VM.
pub fn is_vm(g: &TaskGroup) -> bool {
    matches!(g.kind, GroupKind::Vm { .. })
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::perf::{SampleRate, SampleSource};
    use crate::testutil::AnonMapping;

    fn only_samples() -> CollectOptions {
        CollectOptions {
            memory: false,
            counters: false,
            machine: false,
            samples: true,
        }
    }

    /// Tasks come in tid order (what `Snapshot::task` searches fast), a
    /// thread of this process among them.
    #[test]
    fn tasks_come_in_tid_order() {
        let worker = std::thread::spawn(|| std::thread::park_timeout(Duration::from_secs(5)));
        let mut c = Collector::new(SysRoot::host(), CollectOptions::default());
        let s = c.collect().unwrap();
        assert!(s.tasks.windows(2).all(|w| w[0].tid < w[1].tid));
        let me = std::process::id() as i32;
        assert_eq!(s.task(me).map(|t| t.tgid), Some(me));
        let threads = &s.group(me).unwrap().threads;
        assert!(threads.len() >= 2, "{threads:?}");
        assert!(
            threads
                .iter()
                .all(|&t| s.task(t).is_some_and(|t| t.tgid == me))
        );
        worker.thread().unpark();
        worker.join().unwrap();
    }

    /// This process, read with `numa_maps` and `sched`: a mapping bound to
    /// node 0 (`mbind(MPOL_BIND)`, the explicit policy the kernel's
    /// balancing never moves) puts it among the processes under an
    /// explicit policy; hinting faults are read only when asked, and then
    /// either every node's count is there or the collector says why not.
    #[test]
    fn hinting_faults_and_explicit_policies_of_this_process() {
        let me = std::process::id() as i32;
        let mut c = Collector::new(
            SysRoot::host(),
            CollectOptions {
                memory: true,
                counters: false,
                machine: true,
                samples: false,
            },
        );
        c.set_memory_scope(Some(Scope {
            pids: vec![me],
            ..Scope::default()
        }));
        let s = c.collect().unwrap();
        assert!(s.numa_faults.is_empty(), "not asked for");

        const LEN: usize = 1 << 20;
        let map = AnonMapping::new(LEN);
        let addr = map.addr();
        let node0: libc::c_ulong = 1;
        // SAFETY: addr/LEN is the mapping; the mask holds 1 bit (maxnode 2).
        let r = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                addr,
                LEN as libc::c_ulong,
                2 as libc::c_ulong, // MPOL_BIND
                &node0 as *const libc::c_ulong,
                2 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        assert_eq!(r, 0, "mbind: {}", std::io::Error::last_os_error());
        map.fill();

        c.set_numa_faults(true);
        // Other tests of this binary map and unmap memory in their threads
        // meanwhile, and a numa_maps read that races with a change of the
        // mapping list can miss a line (the kernel's seq_file restarts
        // from the last address it showed): a few reads, as the daemon's
        // next rounds would.
        let mut s = c.collect().unwrap();
        for _ in 0..10 {
            if s.explicit_mempolicy.contains(&me) {
                break;
            }
            s = c.collect().unwrap();
        }
        drop(map);
        assert!(
            s.explicit_mempolicy.contains(&me),
            "{:?}",
            s.explicit_mempolicy
        );
        let nodes: BTreeSet<u32> = s.machine.nodes.keys().copied().collect();
        match c.numa_faults_missing() {
            None => {
                let f = &s.numa_faults[&me];
                let seen: BTreeSet<u32> = f.memory.keys().copied().collect();
                assert!(!nodes.is_empty());
                assert_eq!(seen, nodes, "a count for every node");
            }
            Some(why) => {
                eprintln!("{why}");
                assert!(why.contains("CONFIG_"), "{why}");
                assert!(s.numa_faults.is_empty());
            }
        }
    }

    /// `n` threads of this process that wait until the sender is dropped;
    /// their tids.
    fn waiting_threads(
        n: usize,
    ) -> (
        BTreeSet<i32>,
        mpsc::Sender<()>,
        Vec<std::thread::JoinHandle<()>>,
    ) {
        let (tell, told) = mpsc::channel();
        let (stop, stopped) = mpsc::channel::<()>();
        let stopped = std::sync::Arc::new(std::sync::Mutex::new(stopped));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let tell = tell.clone();
                let stopped = std::sync::Arc::clone(&stopped);
                std::thread::spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    tell.send(unsafe { libc::gettid() }).unwrap();
                    let _ = stopped.lock().unwrap().recv();
                })
            })
            .collect();
        let tids: BTreeSet<i32> = (0..n).map(|_| told.recv().unwrap()).collect();
        (tids, stop, handles)
    }

    /// Threads only: no memory, counters, machine readings or samples.
    fn threads_only() -> CollectOptions {
        CollectOptions {
            memory: false,
            counters: false,
            machine: false,
            samples: false,
        }
    }

    /// The daemon's rounds (`c`) over threads of this process that come
    /// and go: eight threads and a round (`after_first` sees the collector
    /// and their tids); they exit, eight others start, and a round beside a
    /// plain collector's (`after_second` sees the collector, both rounds,
    /// the new tids and the old). Checks what every way of reading threads
    /// must give: the threads, with the fields a plain collector reads, and
    /// none that exited.
    fn threads_come_and_go(
        c: &mut Collector,
        after_first: impl Fn(&Collector, &BTreeSet<i32>),
        after_second: impl Fn(&Collector, &Snapshot, &Snapshot, &BTreeSet<i32>, &BTreeSet<i32>),
    ) {
        let me = std::process::id() as i32;
        let (first, stop, handles) = waiting_threads(8);
        let s = c.collect().unwrap();
        after_first(c, &first);
        for t in &first {
            assert_eq!(s.task(*t).map(|t| t.tgid), Some(me));
        }
        drop(stop);
        for h in handles {
            h.join().unwrap();
        }
        let (second, stop, handles) = waiting_threads(8);
        let s = c.collect().unwrap();
        let p = Collector::new(SysRoot::host(), threads_only())
            .collect()
            .unwrap();
        for t in &second {
            let (a, b) = (s.task(*t).unwrap(), p.task(*t).unwrap());
            assert_eq!(
                (a.start_time, &a.comm, a.tgid),
                (b.start_time, &b.comm, b.tgid)
            );
        }
        for t in first.difference(&second) {
            assert!(s.task(*t).is_none(), "thread {t} exited");
        }
        after_second(c, &s, &p, &second, &first);
        drop(stop);
        for h in handles {
            h.join().unwrap();
        }
    }

    /// The daemon's rounds through the BPF task iterator, where this host
    /// allows it: threads that exit leave the snapshot, new ones come in,
    /// every field is what a collector reading `/proc` reads, and no
    /// `stat` file is held.
    #[test]
    fn the_task_iterator_follows_threads_that_come_and_go() {
        let mut c = Collector::new(SysRoot::host(), threads_only());
        c.set_carry_over(Some(Duration::from_secs(10)));
        if let Some(why) = c.task_iterator_missing() {
            eprintln!("skipped: {why}");
            return;
        }
        assert!(c.uses_task_iterator() && c.held.is_none());
        threads_come_and_go(
            &mut c,
            |_, _| {},
            |_, s, p, second, _| {
                for t in second {
                    let (a, b) = (s.task(*t).unwrap(), p.task(*t).unwrap());
                    assert_eq!(a.allowed_cpus, b.allowed_cpus, "thread {t}");
                    assert!(a.utime + a.stime <= b.utime + b.stime);
                }
                let me = std::process::id() as i32;
                let group = |s: &Snapshot| s.groups.iter().find(|g| g.pid == me).unwrap().clone();
                let (a, b) = (group(s), group(p));
                assert_eq!(
                    (a.start_time, &a.comm, &a.cmdline),
                    (b.start_time, &b.comm, &b.cmdline)
                );
            },
        );
    }

    /// Threads of a running process (this one) read through held `stat`
    /// files: threads that exit leave the snapshot and their files are
    /// closed, new threads are read, and every thread's fields are what a
    /// collector without held files reads.
    #[test]
    fn held_stat_files_follow_threads_that_come_and_go() {
        let mut c = Collector::new(SysRoot::host(), threads_only());
        c.set_carry_over(Some(Duration::from_secs(10)));
        c.set_task_iterator(false);
        assert!(c.held.is_some(), "held on the host without counters");
        let held = |c: &Collector| -> BTreeSet<i32> {
            let me = std::process::id() as i32;
            c.held.as_ref().unwrap().tids(me).into_iter().collect()
        };
        threads_come_and_go(
            &mut c,
            |c, first| {
                let held = held(c);
                assert!(first.is_subset(&held), "{first:?} not in {held:?}");
            },
            |c, _, _, second, first| {
                let held = held(c);
                assert!(second.is_subset(&held), "{second:?} not in {held:?}");
                for t in first.difference(second) {
                    assert!(!held.contains(t), "its file closed");
                }
            },
        );
    }

    #[test]
    fn missing_sampling_says_why() {
        let c = Collector::new(SysRoot::host(), only_samples());
        let a = c.sampler().unwrap().availability();
        eprintln!("{a}");
        let line = c
            .missing_signals()
            .iter()
            .find(|m| m.starts_with("sampled data addresses: "));
        match a.reason() {
            Some(why) => {
                let line = line.expect("said once, at start");
                assert_eq!(line, &format!("sampled data addresses: {why}"));
            }
            None => assert!(line.is_none(), "{line:?}"),
        }
        let off = Collector::new(SysRoot::host(), CollectOptions::default());
        assert!(off.sampler().is_none() && !CollectOptions::default().samples);
    }

    #[test]
    fn snapshots_carry_the_sampled_addresses_of_each_thread() {
        let mut c = Collector::with_sampler_config(
            SysRoot::host(),
            only_samples(),
            SamplerConfig {
                source: Some(SampleSource::PageFaults),
                rate: SampleRate::Period(1),
                ..SamplerConfig::default()
            },
        );
        if let Some(why) = c.sampler().unwrap().availability().reason() {
            eprintln!("SKIPPED: software page-fault sampling refused here: {why}");
            return;
        }
        let (go, wait) = mpsc::channel::<Option<usize>>();
        let (tell, told) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tell.send((unsafe { libc::gettid() }, 0)).unwrap();
            while let Ok(Some(pages)) = wait.recv() {
                // A fresh mapping of its own, every page faulted in here.
                let len = pages * 4096;
                let map = AnonMapping::new(len);
                map.no_huge_pages().fill();
                tell.send((0, map.start() as usize)).unwrap();
                // Keep it mapped until told to go on.
                let more = wait.recv();
                drop(map);
                if more.is_err() {
                    return;
                }
            }
        });
        let tid = told.recv().unwrap().0;
        let first = c.collect().unwrap();
        assert!(c.sampler().unwrap().tracked().any(|t| t == tid));
        assert!(first.samples.is_empty() || !first.samples.contains_key(&tid));
        // 256 pages the worker maps and touches.
        go.send(Some(256)).unwrap();
        let start = told.recv().unwrap().1 as u64;
        let snap = c.collect().unwrap();
        let len = 256 * 4096;
        let inside = snap.samples[&tid]
            .iter()
            .filter(|s| (start..start + len).contains(&s.address))
            .count();
        assert!(inside >= 250, "{inside} of 256 pages sampled");
        assert!(snap.samples.keys().all(|t| snap.task(*t).is_some()));
        // Sampling only another process closes the worker's event.
        c.set_sample_processes(Some([1].into()));
        go.send(None).unwrap();
        let _ = c.collect().unwrap();
        assert!(!c.sampler().unwrap().tracked().any(|t| t == tid));
        drop(go);
        worker.join().unwrap();
    }
}
