//! Finding VMs whose vCPU threads carry no names: each collection round,
//! the QMP sockets the configuration names ([`qmp`](super::qmp)) and
//! libvirt's status files ([`libvirt`]) say which process
//! is a VM, its name, and which of its threads runs which vCPU; the round's
//! snapshot is amended (`GroupKind::Vm`, `Task::vcpu`). The thread-name
//! path ([`classify`](super::classify)) stays; where both speak, these
//! win (QEMU's own vCPU index and name beat a thread's name and the
//! command line).
//!
//! ## Trust
//!
//! numaplace runs as root, and any local user can create a UNIX socket
//! that speaks QMP, or a process that looks like anything. An answer is
//! believed only:
//!
//! - for the process that serves the socket: the kernel says which
//!   (`SO_PEERCRED` on the connected socket: the process that called
//!   `listen`), never the answer itself; and only if that process is
//!   still the one: a pidfd of it (`SO_PEERPIDFD`, Linux 6.5) must show it
//!   alive after the exchange, so its pid cannot have gone to another
//!   process; without pidfds, the pid's start time must be the round's,
//!   and the process must have started before the socket was made (a pid
//!   reused by a later process fails that);
//! - if that process looks like a VM whatever it calls itself: its
//!   executable (the kernel's `/proc/PID/exe`) is `qemu-system-*` or
//!   `qemu-kvm`, or it holds KVM vCPU fds ([`vm_evidence`]); anything
//!   else is not asked at all (checked before a word is said);
//! - for the thread ids that are threads of that process this round;
//!   others are dropped, and said.
//!
//! A libvirt status file is believed as far as its place (root's, written
//! by no one else: see `libvirt.rs`) and then by the same checks on what
//! it says: its pid must be a live process that looks like a VM, started
//! before the file was last written (else the file is stale and the pid
//! another's), and its vCPU thread ids that process's threads.
//!
//! ## Cost
//!
//! A socket is asked when its process is new (pid and start time) or its
//! set of threads changed (a vCPU plugged or unplugged), not every round;
//! a status file is read again only when it changed. A socket that failed
//! is asked again after a back-off ([`RETRY_FIRST`], doubling up to
//! [`RETRY_MAX`]), and its failure is said once. One round starts no new
//! exchange once it has spent [`ROUND_BUDGET`] on sockets (an exchange
//! takes at most `qmp::DEADLINE`); those left wait for the next.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use numaplace_model::task::qemu_guest_name;
use numaplace_model::{GroupKind, Snapshot};

use super::libvirt::{self, DomainStatus, StatusFile};
use super::vm_evidence;
use crate::sysroot::SysRoot;

/// Sockets asked in one round at most, all patterns together.
pub const MAX_SOCKETS: usize = 256;
/// QMP patterns in a configuration.
pub const MAX_PATTERNS: usize = 64;
/// Directory entries looked at per pattern.
const MAX_SCAN: usize = 65_536;
/// Time one round spends on QMP sockets at most.
pub const ROUND_BUDGET: Duration = Duration::from_secs(1);
/// A failed socket is asked again after this, then twice as long each time.
pub const RETRY_FIRST: Duration = Duration::from_secs(10);
/// The longest wait before asking a failed socket again.
pub const RETRY_MAX: Duration = Duration::from_secs(300);
/// Slack between a process's start time (seconds since boot, from clock
/// ticks, plus the boot time, a whole second) and a file's time.
const CLOCK_SLACK_SECS: i64 = 2;

/// Where VMs are looked for (the configuration's `[vms]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmSources {
    /// QMP sockets: absolute paths whose last component may hold `*` and
    /// `?` ([`check_qmp_pattern`]).
    pub qmp: Vec<String>,
    /// Whether libvirt's status files are read.
    pub libvirt: bool,
    /// Whether the threads of a domain its owner pinned in libvirt's XML
    /// (`<vcpupin>`, `<emulatorpin>`, `<vcpu cpuset>`) are placed too
    /// (`[vms] libvirt_pinned = "place"`); by default they are left to
    /// their owner.
    pub place_owner_pinned: bool,
    /// Why numaplace cannot act through libvirt, where it cannot (no
    /// `virsh`, libvirtd not answering): its domains are then left alone
    /// and this is why.
    pub libvirt_unreachable: Option<String>,
}

/// The domains of the last round, written by VM discovery
/// ([`crate::Collector::share_libvirt_domains`]) and read by the libvirt
/// actuator ([`crate::actuate::libvirt::ThroughLibvirt`]).
pub type SharedDomains = std::sync::Arc<std::sync::Mutex<Vec<LibvirtDomain>>>;

/// A running libvirt domain, as numaplace acts on it: through `virsh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibvirtDomain {
    /// The domain's name.
    pub name: String,
    /// Its UUID.
    pub uuid: String,
    /// QEMU's pid and start time.
    pub pid: i32,
    /// See `pid`.
    pub start_time: u64,
    /// `(vCPU index, tid)` of its vCPU threads.
    pub vcpus: Vec<(u32, i32)>,
    /// Its memory is bound by libvirt (`<numatune><memory mode='strict'>`
    /// or `'restrictive'`: a memory policy or the domain's cgroups'
    /// `cpuset.mems`): pages cannot be moved off its nodes page by page;
    /// the mode, where it is one of those.
    pub memory_bound: Option<String>,
}

/// A VM one source described, checked against the round's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    pid: i32,
    start_time: u64,
    name: Option<String>,
    /// `KVM` or `TCG`, where the source says.
    accel: Option<String>,
    /// `(vCPU index, tid)`.
    vcpus: Vec<(u32, i32)>,
    /// `qmp PATH` or `libvirt status PATH`.
    source: String,
    /// Why the process is a VM ([`vm_evidence`]).
    why_vm: &'static str,
    /// For a libvirt domain: who holds its threads' placement and which
    /// threads numaplace leaves to it.
    managed: Option<Managed>,
}

/// A libvirt domain's threads, as [`Task::manager`] says of them.
///
/// [`Task::manager`]: numaplace_model::Task::manager
#[derive(Debug, Clone, PartialEq, Eq)]
struct Managed {
    /// `libvirt domain NAME`.
    who: String,
    /// Why every thread is left to libvirt, where all are.
    all: Option<String>,
    /// Why a vCPU thread is, by vCPU index.
    vcpus: Vec<(u32, String)>,
    /// Why the other threads (emulator, I/O) are.
    emulator: Option<String>,
    /// What the actuator needs, where numaplace acts through libvirt.
    domain: Option<LibvirtDomain>,
    /// numaplace moves the domain's memory through libvirt (`numatune
    /// --nodeset --live`): mode `restrictive`, nodes not its owner's.
    memory_through_libvirt: bool,
}

impl Found {
    /// `GroupKind::Vm::evidence`: the source, and why the process is a VM.
    fn evidence(&self) -> String {
        format!("{} ({})", self.source, self.why_vm)
    }
}

/// A socket's last outcome.
#[derive(Debug)]
enum Asked {
    /// Its answer, and the process's threads when it was given.
    Found { found: Found, threads: Vec<i32> },
    /// Failed; not asked again before `retry_at`. `last`: the answer
    /// before, kept for its process while that runs (a socket busy when
    /// asked again after a vCPU was plugged does not unmake the VM).
    Failed {
        retry_at: Instant,
        backoff: Duration,
        last: Option<Found>,
    },
}

/// A status file's content at one version.
#[derive(Debug)]
struct StatusRead {
    version: StatusFile,
    status: Result<DomainStatus, String>,
}

/// Finds VMs in each round's snapshot (see the module's doc).
#[derive(Debug)]
pub struct VmDiscovery {
    sources: VmSources,
    /// Per socket path: its identity (device, inode) and outcome.
    sockets: HashMap<PathBuf, ((u64, u64), Asked)>,
    /// Per status file path.
    status: HashMap<PathBuf, StatusRead>,
    /// Why each process is a VM, per (pid, start time).
    evidence: HashMap<(i32, u64), Option<&'static str>>,
    /// (source, kind of trouble) already said.
    said: HashSet<(PathBuf, String)>,
    /// Boot time, seconds since the epoch (`btime` of `/proc/stat`).
    boot_time: Option<Option<i64>>,
    budget: Duration,
    /// The libvirt domains numaplace acts on through `virsh`, this round.
    domains: Vec<LibvirtDomain>,
    /// Where they are shared with the actuator, if they are.
    shared: Option<SharedDomains>,
}

impl VmDiscovery {
    /// A discovery over `sources`, having found nothing yet.
    pub fn new(sources: VmSources) -> VmDiscovery {
        VmDiscovery {
            sources,
            sockets: HashMap::new(),
            status: HashMap::new(),
            evidence: HashMap::new(),
            said: HashSet::new(),
            boot_time: None,
            budget: ROUND_BUDGET,
            domains: Vec::new(),
            shared: None,
        }
    }

    /// Shares each round's [`libvirt_domains`](Self::libvirt_domains)
    /// with the actuator that pins through libvirt.
    pub fn share_domains(&mut self, shared: SharedDomains) {
        self.shared = Some(shared);
    }

    /// The libvirt domains found last round that numaplace acts on
    /// through `virsh` (a pin of one of their threads, a move of their
    /// memory).
    pub fn libvirt_domains(&self) -> &[LibvirtDomain] {
        &self.domains
    }

    /// Where it looks.
    pub fn sources(&self) -> &VmSources {
        &self.sources
    }

    /// Amends the round's snapshot (tasks sorted by tid) with the VMs the
    /// sources describe.
    pub fn discover(&mut self, root: &SysRoot, snapshot: &mut Snapshot) {
        let live: HashSet<(i32, u64)> = snapshot
            .groups
            .iter()
            .map(|g| (g.pid, g.start_time))
            .collect();
        self.evidence.retain(|k, _| live.contains(k));
        let mut found = self.vms_behind_sockets(root, snapshot);
        if self.sources.libvirt {
            for f in self.read_libvirt_domains(root, snapshot) {
                if found.iter().all(|q| q.pid != f.pid) {
                    found.push(f);
                }
            }
        }
        for f in &found {
            apply(snapshot, f);
        }
        self.domains = (found.iter())
            .filter_map(|f| f.managed.as_ref()?.domain.clone())
            .collect();
        if let Some(s) = &self.shared {
            *s.lock().unwrap_or_else(|e| e.into_inner()) = self.domains.clone();
        }
        // Troubles of sources gone (a VM stopped, its socket removed) need
        // no memory: a new one by that name is said afresh.
        let (sockets, status) = (&self.sockets, &self.status);
        let libvirt_dir = root.join(libvirt::STATE_DIR);
        let first = self.sources.qmp.first().map(PathBuf::from);
        self.said.retain(|(p, _)| {
            sockets.contains_key(p)
                || status.contains_key(p)
                || *p == libvirt_dir
                || first.as_ref() == Some(p)
        });
    }

    /// The `(index, tid)` pairs whose tid is one of `threads` (sorted);
    /// the others are said once.
    fn own_threads(
        &mut self,
        source: &Path,
        pid: i32,
        vcpus: &[(u32, i32)],
        threads: &[i32],
    ) -> Vec<(u32, i32)> {
        let (own, foreign): (Vec<_>, Vec<_>) = vcpus
            .iter()
            .partition(|(_, t)| threads.binary_search(t).is_ok());
        if !foreign.is_empty() {
            let list: Vec<String> = foreign.iter().take(8).map(|(_, t)| t.to_string()).collect();
            self.say(
                source,
                "foreign threads",
                format_args!(
                    "reports vCPU thread ids that are not threads of process {pid}: {}{}; \
                     those are ignored",
                    list.join(", "),
                    if foreign.len() > 8 { ", ..." } else { "" }
                ),
            );
        }
        own
    }

    /// [`vm_evidence`], once per process.
    fn vm_evidence(&mut self, root: &SysRoot, pid: i32, start_time: u64) -> Option<&'static str> {
        *self
            .evidence
            .entry((pid, start_time))
            .or_insert_with(|| vm_evidence(root, pid))
    }

    /// When a process started, seconds since the epoch.
    fn start_secs(&mut self, root: &SysRoot, start_time: u64) -> Option<i64> {
        let boot = self.boot_time(root)?;
        let hz = crate::sysconf::clock_ticks();
        Some(boot + i64::try_from(start_time / hz).ok()?)
    }

    /// The CPUs online now (a pin to all of them pins nothing).
    fn online_cpus(&mut self, root: &SysRoot) -> Option<numaplace_model::CpuSet> {
        let text = root.read("sys/devices/system/cpu/online").ok()?;
        numaplace_model::CpuSet::parse_list(text.trim()).ok()
    }

    fn boot_time(&mut self, root: &SysRoot) -> Option<i64> {
        *self.boot_time.get_or_insert_with(|| {
            root.read("proc/stat").ok().and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("btime "))
                    .and_then(|v| v.trim().parse().ok())
            })
        })
    }

    /// Says a source's trouble once (until it works again).
    fn say(&mut self, source: &Path, kind: &str, what: std::fmt::Arguments<'_>) {
        if self.said.insert((source.to_path_buf(), kind.to_string())) {
            let what = what.to_string();
            let p = source.display().to_string();
            // QMP errors already begin with the path.
            if what.starts_with(&p) {
                tracing::warn!("VM discovery: {what}");
            } else {
                tracing::warn!("VM discovery: {p}: {what}");
            }
        }
    }
}

/// Whether a cached answer still describes the round: the same process
/// with the same threads.
fn still_holds(found: &Found, threads: &[i32], snapshot: &Snapshot) -> bool {
    snapshot
        .group(found.pid)
        .is_some_and(|g| g.start_time == found.start_time && g.threads == threads)
}

/// A past answer for its process if that still runs: its vCPUs that are
/// still its threads.
fn still_running(found: &Found, snapshot: &Snapshot) -> Option<Found> {
    let g = snapshot
        .group(found.pid)
        .filter(|g| g.start_time == found.start_time)?;
    let mut f = found.clone();
    f.vcpus.retain(|(_, t)| g.threads.binary_search(t).is_ok());
    Some(f)
}

/// Makes the process a VM in the snapshot, its vCPU threads numbered.
fn apply(snapshot: &mut Snapshot, f: &Found) {
    let Some(g) = snapshot
        .groups
        .iter_mut()
        .find(|g| g.pid == f.pid && g.start_time == f.start_time)
    else {
        return;
    };
    let (old_name, old_accel) = match &g.kind {
        GroupKind::Vm { name, accel, .. } => (name.clone(), Some(accel.clone())),
        GroupKind::Process => (qemu_guest_name(&g.cmdline), None),
    };
    // Neither the source nor thread names say: a QEMU holding KVM vCPU
    // fds runs under KVM, one without under emulation.
    let accel = f.accel.clone().or(old_accel).unwrap_or_else(|| {
        if f.why_vm == "kvm-vcpu fds" {
            "KVM"
        } else {
            "TCG"
        }
        .to_string()
    });
    g.kind = GroupKind::Vm {
        name: f.name.clone().or(old_name),
        accel,
        evidence: f.evidence(),
    };
    for &(index, tid) in &f.vcpus {
        if let Ok(i) = snapshot.tasks.binary_search_by_key(&tid, |t| t.tid) {
            if snapshot.tasks[i].tgid == f.pid {
                snapshot.tasks[i].vcpu = Some(index);
            }
        }
    }
    let Some(m) = &f.managed else { return };
    for &tid in &g.threads {
        let Ok(i) = snapshot.tasks.binary_search_by_key(&tid, |t| t.tid) else {
            continue;
        };
        let t = &mut snapshot.tasks[i];
        let why = m.all.as_ref().or(match t.vcpu {
            Some(v) => m.vcpus.iter().find(|(i, _)| *i == v).map(|(_, w)| w),
            None => m.emulator.as_ref(),
        });
        t.manager = Some(numaplace_model::Manager {
            who: m.who.clone(),
            hands_off: why.cloned(),
            sets_memory_nodes: m.memory_through_libvirt,
        });
    }
}

mod libvirt_domains;
mod sockets;
#[cfg(test)]
mod tests;

pub use sockets::check_qmp_pattern;
