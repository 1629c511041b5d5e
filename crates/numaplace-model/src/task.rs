//! Threads, and the applications and virtual machines they belong to, as
//! one collection round saw them.
//!
//! A thread is identified by its tid *and* its start time: the kernel
//! reuses tids, and an action decided for one thread must never land on
//! another that took its number ([`TaskId`]).
//!
//! Names (`comm`, command lines) come from the tasks themselves and are
//! untrusted: they are shown, matched against user patterns, never used to
//! decide what a task is allowed to be (a process can call itself anything).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;

/// A set of NUMA node ids, in the same kernel list / mask syntax as CPUs.
pub type NodeSet = CpuSet;

/// A thread's identity across rounds: tid plus start time (clock ticks
/// since boot, `/proc/<pid>/task/<tid>/stat` field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskId {
    /// The thread id.
    pub tid: i32,
    /// Clock ticks since boot when it started: tells a reused tid apart.
    pub start_time: u64,
}

/// One thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Its thread id.
    pub tid: i32,
    /// The process (thread group) it belongs to.
    pub tgid: i32,
    /// Clock ticks since boot when it started.
    pub start_time: u64,
    /// The kernel's `comm` (at most 15 bytes); bytes that are not UTF-8
    /// kept as [`name_from_bytes`] says. Untrusted.
    pub comm: String,
    /// The kernel's one-letter state (`R`, `S`, `D`, `T`, `Z`, `I`, ...).
    pub state: char,
    /// The CPU it last ran on (kernel id).
    pub last_cpu: Option<u32>,
    /// CPUs it may run on (`Cpus_allowed_list`).
    pub allowed_cpus: CpuSet,
    /// Nodes it may allocate from (`Mems_allowed_list`).
    pub allowed_mems: NodeSet,
    /// The CPUs its cgroup confines it to (cgroup v2's
    /// `cpuset.cpus.effective`, v1's `cpuset.effective_cpus`, of its
    /// process's cgroup), where a cpuset narrower than the machine does
    /// and could be read; `None`: nothing confines it but its own affinity
    /// (or it could not be read). The kernel keeps `allowed_cpus` inside
    /// them: a thread whose affinity is all of them chose no CPUs of its
    /// own, and is placed inside them ([`Task::room`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined_cpus: Option<CpuSet>,
    /// The manager that holds its placement, where one does: libvirt for
    /// the threads of a domain it runs. Its affinity is then the
    /// manager's doing, not a choice of its own: numaplace places it
    /// through the manager, or leaves it alone and says why
    /// ([`Manager::hands_off`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<Manager>,
    /// Cumulative user and system CPU time, clock ticks.
    pub utime: u64,
    /// See `utime`: the system part.
    pub stime: u64,
    /// The vCPU index, if this is a virtual machine's vCPU thread.
    pub vcpu: Option<u32>,
}

impl Task {
    /// Its identity across rounds.
    pub fn id(&self) -> TaskId {
        TaskId {
            tid: self.tid,
            start_time: self.start_time,
        }
    }

    /// The CPUs of `span` (those numaplace may place onto) this thread may
    /// be placed on: all of them, or those its cgroup confines it to.
    pub fn room(&self, span: &CpuSet) -> CpuSet {
        match &self.confined_cpus {
            Some(c) => span.intersection(c),
            None => span.clone(),
        }
    }

    /// Whether the thread chose no CPUs of its own: its affinity covers
    /// every CPU of `span` its confinement leaves it (and that is at least
    /// one). A thread narrowed inside its confinement (taskset, numactl,
    /// `pthread_setaffinity_np`, a runtime's own pinning) chose its CPUs.
    pub fn chose_nothing(&self, span: &CpuSet) -> bool {
        if let Some(m) = &self.manager {
            // Its affinity is its manager's: placeable through it, unless
            // numaplace leaves it to the manager.
            return m.hands_off.is_none() && !self.room(span).is_empty();
        }
        match &self.confined_cpus {
            // Every round, for every thread: no copy of the span.
            None => !span.is_empty() && span.is_subset(&self.allowed_cpus),
            Some(c) => {
                let room = span.intersection(c);
                !room.is_empty() && room.is_subset(&self.allowed_cpus)
            }
        }
    }
}

/// Who holds a thread's placement besides the thread itself
/// ([`Task::manager`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manager {
    /// Who, for people: `libvirt domain web`.
    pub who: String,
    /// Why numaplace leaves the thread to its manager (its owner pinned
    /// it there, numaplace cannot reach the manager); `None`: numaplace
    /// places it, through the manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hands_off: Option<String>,
    /// numaplace moves the thread's memory through the manager, which sets
    /// the memory nodes its cpuset allows (libvirt's `numatune --nodeset`
    /// on a `restrictive` domain): a move to a node outside today's
    /// `Mems_allowed` is the manager's to make, not one the kernel refuses.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sets_memory_nodes: bool,
}

/// Bytes of a process's memory on one node, by kind, from `numa_maps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMemory {
    /// Anonymous memory (heap, stacks, private anonymous mappings).
    pub anon: u64,
    /// File-backed pages mapped by the process (page cache it maps).
    pub file: u64,
    /// Huge pages (hugetlbfs and other mappings with pages of 2 MiB or more).
    pub huge: u64,
}

impl NodeMemory {
    /// Bytes of every kind together.
    pub fn total(&self) -> u64 {
        self.anon
            .saturating_add(self.file)
            .saturating_add(self.huge)
    }
}

/// Where one thread's memory accesses go, without a PMU: the kernel's
/// automatic NUMA balancing hinting faults per node (`numa_faults` lines of
/// `/proc/<pid>/task/<tid>/sched` on a live host with
/// `kernel.numa_balancing` on; the simulated kernel's fault statistics in
/// the simulator). The counts are decayed (halved at each of the task's
/// scan periods), so they say where the task's accesses go lately; only
/// their proportions mean something.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaFaults {
    /// The task's memory-side hinting faults (private and shared) by node
    /// (kernel id): faults on pages that were on that node.
    pub memory: BTreeMap<u32, u64>,
    /// The node the kernel prefers for the task, if it has chosen one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_node: Option<u32>,
}

impl NumaFaults {
    /// All the task's memory-side faults.
    pub fn total(&self) -> u64 {
        self.memory.values().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The node most of the task's memory accesses go to, and its share of
    /// them (0-1); `None` if it took no fault.
    pub fn main_node(&self) -> Option<(u32, f64)> {
        let total = self.total();
        let (&node, &n) = self
            .memory
            .iter()
            .max_by_key(|&(&node, &n)| (n, u32::MAX - node))?;
        (total > 0).then(|| (node, n as f64 / total as f64))
    }
}

/// What kind of application a thread group is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GroupKind {
    /// An ordinary process.
    Process,
    /// A QEMU/KVM virtual machine: its vCPU threads carry `Task::vcpu`.
    Vm {
        /// The guest's name: QMP's `query-name` or libvirt's domain name
        /// where one of them found the VM, else the command line's
        /// (`-name guest=NAME` or `-name NAME`), if given.
        name: Option<String>,
        /// `KVM` or `TCG` (emulation): from QMP (`query-kvm`) or libvirt
        /// (the domain type), else from the vCPU threads' names.
        accel: String,
        /// Why numaplace believes it is a VM beyond thread names, which any
        /// process can set: `kvm-vcpu fds` or `qemu executable`; for a VM
        /// found through its QMP socket or libvirt, the source first:
        /// `qmp PATH (qemu executable)`, `libvirt status PATH (kvm-vcpu fds)`.
        evidence: String,
    },
}

/// A process (an application, or a VM), with its threads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGroup {
    /// Its process id.
    pub pid: i32,
    /// Clock ticks since boot when it started.
    pub start_time: u64,
    /// The main thread's `comm`. Untrusted.
    pub comm: String,
    /// Command line; empty for kernel threads. Untrusted.
    pub cmdline: Vec<String>,
    /// cgroup v2 path (`/system.slice/foo.service`), if the process is in
    /// the unified hierarchy.
    pub cgroup: Option<String>,
    /// An application, or a VM (and how it was found to be one).
    pub kind: GroupKind,
    /// Its threads' tids, in increasing order.
    pub threads: Vec<i32>,
    /// Memory per node (kernel node id), if `numa_maps` could be read.
    pub memory: Option<BTreeMap<u32, NodeMemory>>,
}

impl TaskGroup {
    /// Its identity across rounds (its main thread's).
    pub fn id(&self) -> TaskId {
        TaskId {
            tid: self.pid,
            start_time: self.start_time,
        }
    }

    /// Whether this is a kernel thread (no command line, no memory map).
    pub fn is_kernel(&self) -> bool {
        self.cmdline.is_empty()
    }

    /// A short label for people: the VM's name, or the program's.
    pub fn label(&self) -> String {
        match &self.kind {
            GroupKind::Vm { name: Some(n), .. } => format!("vm:{n}"),
            GroupKind::Vm { name: None, .. } => format!("vm:{}", self.pid),
            GroupKind::Process => self.comm.clone(),
        }
    }

    /// Total memory per node, all kinds.
    pub fn memory_total(&self) -> Option<BTreeMap<u32, u64>> {
        self.memory
            .as_ref()
            .map(|m| m.iter().map(|(&n, b)| (n, b.total())).collect())
    }
}

/// The first of the 128 private-use code points (U+10FF80..=U+10FFFF) that
/// stand for the bytes 0x80..=0xFF of a name that are not UTF-8.
const RAW_BYTE: u32 = 0x10FF00;

/// A name the kernel keeps as bytes (`comm`, a command-line argument) as
/// text, without losing any: valid UTF-8 as it is, each byte that is not
/// (always 0x80..=0xFF) as the private-use character U+10FF00 + byte,
/// which [`printable`] shows as `\xNN` and JSON carries as it is.
/// `String::from_utf8_lossy` would turn every such byte into the same
/// U+FFFD, so two names differing only there would look the same.
pub fn name_from_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for &b in chunk.invalid() {
            out.push(char::from_u32(RAW_BYTE + u32::from(b)).unwrap_or('\u{fffd}'));
        }
    }
    out
}

/// Makes an untrusted name safe to print on a terminal: control
/// characters and backslashes are escaped (`\n`, `\x1b`, `\\`), so a thread
/// cannot move the cursor or forge table rows; a byte that was not UTF-8
/// (see [`name_from_bytes`]) shows as `\xNN`, like a control byte.
pub fn printable(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if ('\u{10ff80}'..='\u{10ffff}').contains(&c) => {
                let _ = write!(out, "\\x{:02x}", c as u32 - RAW_BYTE);
            }
            // Bidirectional controls (Trojan Source, CVE-2021-42574) and
            // zero-width format characters reorder or hide what a terminal
            // shows; the replacement character stands for invalid UTF-8.
            c if is_bidi_or_invisible(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Characters that change how the text around them is shown: the bidi
/// embeddings, overrides and isolates, the marks, and zero-width format
/// characters; and U+FFFD, which stands for bytes that were not UTF-8.
pub fn is_bidi_or_invisible(c: char) -> bool {
    matches!(c,
        '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{fffd}')
}

/// A QEMU vCPU thread name: `CPU <n>/KVM` or `CPU <n>/TCG` (QEMU names them
/// so since 2.9, `qemu_thread_create(..., "CPU %d/%s", ...)`). Returns the
/// vCPU index and the accelerator.
pub fn parse_vcpu_comm(comm: &str) -> Option<(u32, &str)> {
    let rest = comm.strip_prefix("CPU ")?;
    let (n, accel) = rest.split_once('/')?;
    let n: u32 = n.parse().ok()?;
    if accel.is_empty() || !accel.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some((n, accel))
}

/// The guest name from a QEMU command line: `-name guest=NAME,...`,
/// `-name NAME` (also `--name` and `-name=...`). QEMU's option syntax
/// doubles commas to escape them.
pub fn qemu_guest_name(cmdline: &[String]) -> Option<String> {
    let mut it = cmdline.iter();
    while let Some(arg) = it.next() {
        let value = match arg.as_str() {
            "-name" | "--name" => it.next()?.clone(),
            a => match a
                .strip_prefix("-name=")
                .or_else(|| a.strip_prefix("--name="))
            {
                Some(v) => v.to_string(),
                None => continue,
            },
        };
        // Split on single commas (",," is a literal comma).
        let mut parts = Vec::new();
        let mut cur = String::new();
        let mut chars = value.chars().peekable();
        while let Some(c) = chars.next() {
            if c == ',' {
                if chars.peek() == Some(&',') {
                    chars.next();
                    cur.push(',');
                } else {
                    parts.push(std::mem::take(&mut cur));
                }
            } else {
                cur.push(c);
            }
        }
        parts.push(cur);
        for (i, p) in parts.iter().enumerate() {
            if let Some(g) = p.strip_prefix("guest=") {
                return Some(g.to_string());
            }
            if i == 0 && !p.contains('=') && !p.is_empty() {
                return Some(p.clone());
            }
        }
        return None;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_escaped() {
        assert_eq!(printable("a) b\n(c"), "a) b\\n(c");
        assert_eq!(printable("\x1b[2J"), "\\x1b[2J");
        assert_eq!(printable("back\\slash\t"), "back\\\\slash\\t");
        assert_eq!(printable("CPU 0/KVM"), "CPU 0/KVM");
        // A right-to-left override would make "evil\u{202e}gpj.exe" show
        // as "evilexe.jpg"; zero-width and lossy bytes are shown too.
        assert_eq!(printable("evil\u{202e}gpj"), "evil\\u{202e}gpj");
        assert_eq!(printable("a\u{2066}b\u{200b}c"), "a\\u{2066}b\\u{200b}c");
        assert_eq!(printable(&String::from_utf8_lossy(b"x\xff")), "x\\u{fffd}");
        // Bytes that are not UTF-8 are shown as the bytes they were.
        assert_eq!(printable(&name_from_bytes(b"x\xff\xc3(")), "x\\xff\\xc3(");
        assert_eq!(name_from_bytes("naïve\u{202e}".as_bytes()), "naïve\u{202e}");
        assert_ne!(name_from_bytes(b"a\xfe"), name_from_bytes(b"a\xff"));
        assert_eq!(printable("naïve 名前"), "naïve 名前");
    }

    #[test]
    fn the_node_memory_accesses_go_to() {
        let f = NumaFaults {
            memory: [(0, 30), (1, 90), (2, 0)].into(),
            preferred_node: Some(1),
        };
        assert_eq!(f.total(), 120);
        assert_eq!(f.main_node(), Some((1, 0.75)));
        // A tie goes to the lower node; no faults, no node.
        let tie = NumaFaults {
            memory: [(0, 5), (1, 5)].into(),
            preferred_node: None,
        };
        assert_eq!(tie.main_node(), Some((0, 0.5)));
        assert_eq!(NumaFaults::default().main_node(), None);
        let none = NumaFaults {
            memory: [(0, 0)].into(),
            preferred_node: None,
        };
        assert_eq!(none.main_node(), None);
    }

    #[test]
    fn vcpu_thread_names() {
        assert_eq!(parse_vcpu_comm("CPU 0/KVM"), Some((0, "KVM")));
        assert_eq!(parse_vcpu_comm("CPU 12/TCG"), Some((12, "TCG")));
        assert_eq!(parse_vcpu_comm("CPU x/KVM"), None);
        assert_eq!(parse_vcpu_comm("CPU 1/"), None);
        assert_eq!(parse_vcpu_comm("CPU 1/K M"), None);
        assert_eq!(parse_vcpu_comm("qemu-system-x86"), None);
    }

    #[test]
    fn guest_names_from_command_lines() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            qemu_guest_name(&v(&["qemu", "-name", "guest=web1,debug-threads=on"])),
            Some("web1".into())
        );
        assert_eq!(
            qemu_guest_name(&v(&["qemu", "-name", "db"])),
            Some("db".into())
        );
        assert_eq!(
            qemu_guest_name(&v(&["qemu", "-name", "a,,b,process=x"])),
            Some("a,b".into())
        );
        assert_eq!(
            qemu_guest_name(&v(&["qemu", "--name=guest=x"])),
            Some("x".into())
        );
        assert_eq!(qemu_guest_name(&v(&["qemu", "-m", "1G"])), None);
        assert_eq!(qemu_guest_name(&v(&["qemu", "-name"])), None);
    }
}
