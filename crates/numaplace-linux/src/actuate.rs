//! Actuators: numaplace's hands. [`HostActuator`] pins threads
//! (`sched_setaffinity`) and moves pages (`move_pages`, `migrate_pages`) on
//! the live host; [`RecordingActuator`] applies nothing and keeps the list
//! of what it was asked to do (dry runs, `advise`, tests). Both sit behind
//! [`Actuator`], so the engine never knows which world it acts on.
//!
//! # Identity: never act on a task that took a dead task's number
//!
//! Every action names a [`TaskId`] (tid + start time). Before a syscall that
//! takes a bare pid, the actuator proves the number still names that task,
//! and proves it again afterwards:
//!
//! * A process (tid == tgid): open a pidfd (`pidfd_open`), *then* compare the
//!   start time in `/proc/<pid>/task/<pid>/stat`. The task seen there existed
//!   before the pidfd was opened (the start time was recorded earlier), so the
//!   pidfd refers to it. After the syscall, a pidfd that is not readable
//!   (`poll`) means the process has not exited — so its pid was never freed
//!   and the syscall cannot have hit anyone else.
//! * A thread (tid != tgid): on kernels with `PIDFD_THREAD` (6.9+) exactly as
//!   above with a thread pidfd. Otherwise `/proc/<tgid>/task/<tid>/stat` must
//!   exist with the same start time before and after the syscall.
//!
//! Whatever fails a check is [`Outcome::Gone`]. The windows that remain:
//! without a pidfd (threads on kernels before 6.9, or kernels before 5.3),
//! a thread that exits and whose tid is reused by a new thread *within the
//! same clock tick as the old one's start* (start times are in ticks of
//! 1/`CLK_TCK` s) cannot be told apart. With a pidfd, if the task dies in the
//! microseconds between the check and the syscall *and* its number is reused
//! in that time (the pid allocator must wrap around), the syscall may hit
//! the newcomer; the after-check then reports `Gone`, so the journal says
//! so, but the act is done. No pid-taking syscall can close that last gap.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libc::{c_int, c_long, c_ulong};
pub use numaplace_model::world::{Actuator, AffinityError, RecordingActuator};
use numaplace_model::{Action, CpuSet, Outcome, PageCounts, TaskId};
use thiserror::Error;

use crate::procfs::{ProcError, ProcReader, parse_numa_maps_line};
use crate::sysroot::SysRoot;

/// Pages per `move_pages` call. Measured in the 2-node QEMU guest
/// (software emulation, so only the ratio means anything): a loop of
/// 4096-page `move_pages` calls moved 256 MiB in 0.36 s, where
/// `migratepages` took 2.2 s.
pub const BATCH_PAGES: usize = 4096;
pub mod libvirt;
mod memory;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub use memory::{MapsLine, parse_maps_line, window_range};

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for one thread; it is `O_EXCL`.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;
/// `MPOL_MF_MOVE`: move only pages mapped by this process alone. numaplace
/// never uses `MPOL_MF_MOVE_ALL`, which would move other processes' pages.
const MPOL_MF_MOVE: c_int = 1 << 1;
/// Affinity buffers grow up to this many bits when the kernel says EINVAL.
const MAX_AFFINITY_BITS: usize = 1 << 18;

/// Reading an affinity failed.
#[derive(Debug, Error)]
pub enum ActError {
    /// The task exited, or its tid now names another task.
    #[error("thread {tid} (started at tick {start}) is gone, or its tid now names another task", tid = .task.tid, start = .task.start_time)]
    Gone {
        /// The thread.
        task: TaskId,
    },
    /// The task is a kernel thread: numaplace never changes one.
    #[error("thread {tid} is a kernel thread; numaplace never changes kernel threads", tid = .task.tid)]
    KernelThread {
        /// The thread.
        task: TaskId,
    },
    /// The kernel refused the call.
    #[error("{call} on thread {tid}: {errno}", tid = .task.tid)]
    Os {
        /// The system call (`sched_setaffinity`).
        call: &'static str,
        /// The thread.
        task: TaskId,
        /// The error's name (`EPERM`).
        errno: String,
        /// The error.
        source: io::Error,
    },
}

/// Acts on the live host (`/proc`, `/sys` of the running machine).
#[derive(Debug, Clone)]
pub struct HostActuator {
    proc: ProcReader,
    root: SysRoot,
    /// Base page size (sysconf), bytes.
    page_size: u64,
    /// Number of possible CPU ids (`/sys/devices/system/cpu/possible`).
    possible_cpus: usize,
    batch: usize,
}

impl Default for HostActuator {
    fn default() -> Self {
        Self::new()
    }
}

impl HostActuator {
    /// The live host. Host constants (page size, possible CPUs) are read
    /// here once and passed down as values.
    pub fn new() -> Self {
        let root = SysRoot::host();
        let possible_cpus = read_set(&root, "sys/devices/system/cpu/possible")
            .and_then(|s| s.last())
            .map(|last| last as usize + 1)
            .unwrap_or(1024);
        HostActuator {
            proc: ProcReader::new(root.clone()),
            root,
            page_size: crate::sysconf::page_size(),
            possible_cpus,
            batch: BATCH_PAGES,
        }
    }

    /// Pages per `move_pages` call (default [`BATCH_PAGES`]).
    pub fn with_batch_pages(mut self, pages: usize) -> Self {
        self.batch = pages.max(1);
        self
    }

    /// The base page size, bytes.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Carries out one action.
    pub fn apply(&self, action: &Action) -> Outcome {
        match action {
            Action::Pin { task, tgid, cpus } => self.pin(*task, *tgid, cpus),
            Action::MoveMemory {
                process,
                to_node,
                max_pages,
            } => self.move_memory(*process, *to_node, *max_pages),
            Action::MoveWindow {
                process,
                address,
                pages_before,
                pages_after,
                to_node,
            } => self.move_window(*process, *address, *pages_before, *pages_after, *to_node),
            Action::KernelBalancing { on } => self.kernel_balancing(*on),
        }
    }

    /// Turns the kernel's automatic NUMA balancing between nodes on or
    /// off (`kernel.numa_balancing` bit 0x1, the tiering bit kept).
    pub fn kernel_balancing(&self, on: bool) -> Outcome {
        match crate::balancing::set_between_nodes(&self.root, on) {
            Ok(_) => Outcome::Done,
            Err(e) => Outcome::Refused {
                errno: errno_name(e.raw_os_error()),
                why: format!(
                    "cannot set {}: {e}",
                    self.root.join(crate::balancing::SYSCTL).display()
                ),
            },
        }
    }

    /// Whether the kernel balances between nodes now; `None` where it
    /// has no such setting.
    pub fn kernel_balancing_now(&self) -> Option<bool> {
        crate::balancing::NumaBalancing::read(&self.root).between_nodes()
    }

    /// The whole `kernel.numa_balancing` value now.
    pub fn kernel_balancing_value(&self) -> io::Result<u32> {
        crate::balancing::read_value(&self.root)
    }

    /// Writes the whole `kernel.numa_balancing` value (a restore).
    pub fn set_kernel_balancing_value(&self, value: u32) -> io::Result<()> {
        crate::balancing::write_value(&self.root, value)
    }

    /// A thread's affinity (`sched_getaffinity`), after checking it is
    /// still the same task.
    pub fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, ActError> {
        if self.is_kernel_thread(task, tgid) {
            return Err(ActError::KernelThread { task });
        }
        let verified = self
            .verify_task(task, tgid)
            .ok_or(ActError::Gone { task })?;
        let set =
            thread_affinity(task.tid, self.possible_cpus).map_err(|e| match e.raw_os_error() {
                Some(libc::ESRCH) => ActError::Gone { task },
                _ => ActError::Os {
                    call: "sched_getaffinity",
                    task,
                    errno: errno_name(e.raw_os_error()),
                    source: e,
                },
            })?;
        if !self.still_verified(&verified) {
            return Err(ActError::Gone { task });
        }
        Ok(set)
    }

    /// Restricts a thread to `cpus` (`sched_setaffinity`).
    pub fn pin(&self, task: TaskId, tgid: i32, cpus: &CpuSet) -> Outcome {
        if cpus.is_empty() {
            return refused(
                "EINVAL",
                "the cpuset is empty: a thread needs at least one CPU",
            );
        }
        if self.is_kernel_thread(task, tgid) {
            return refused(
                "EPERM",
                "a kernel thread: numaplace never changes kernel threads",
            );
        }
        let Some(verified) = self.verify_task(task, tgid) else {
            return Outcome::Gone;
        };
        let bits = self
            .possible_cpus
            .max(cpus.last().unwrap_or(0) as usize + 1);
        let mask = words_from_set(cpus, words_for(bits));
        // SAFETY: the kernel reads `mask.len()` words from the buffer.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_setaffinity,
                task.tid,
                mask.len() * size_of::<c_ulong>(),
                mask.as_ptr(),
            )
        };
        let err = (r < 0).then(io::Error::last_os_error);
        if !self.still_verified(&verified) {
            return Outcome::Gone;
        }
        let Some(e) = err else {
            return Outcome::Done;
        };
        match e.raw_os_error() {
            Some(libc::ESRCH) => Outcome::Gone,
            Some(libc::EINVAL) => refused("EINVAL", self.explain_einval(tgid, cpus)),
            Some(libc::EPERM) => refused(
                "EPERM",
                "not allowed to change this thread's affinity: it belongs to another user \
                 and numaplace lacks CAP_SYS_NICE (run numaplace as root)",
            ),
            other => refused(&errno_name(other), format!("sched_setaffinity failed: {e}")),
        }
    }

    // --- identity -------------------------------------------------------

    /// Checks `task` is still the thread of `tgid` it was; `None`: gone.
    fn verify_task(&self, task: TaskId, tgid: i32) -> Option<VerifiedTask> {
        if task.tid <= 0 || tgid <= 0 {
            return None;
        }
        let flags = if task.tid == tgid { 0 } else { PIDFD_THREAD };
        let fd = match pidfd_open(task.tid, flags) {
            Ok(fd) => Some(fd),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return None,
            // EINVAL: a thread on a kernel before 6.9 (no PIDFD_THREAD);
            // ENOSYS: before 5.3. Start-time checks alone then.
            Err(_) => None,
        };
        self.same_start(task, tgid)
            .then_some(VerifiedTask { task, tgid, fd })
    }

    /// Whether the verified task is still alive and the same.
    fn still_verified(&self, verified: &VerifiedTask) -> bool {
        match &verified.fd {
            Some(fd) => !pidfd_exited(fd),
            None => self.same_start(verified.task, verified.tgid),
        }
    }

    /// Whether `task` is a kernel thread (`PF_KTHREAD` in its stat).
    fn is_kernel_thread(&self, task: TaskId, tgid: i32) -> bool {
        task.tid > 0
            && tgid > 0
            && matches!(self.proc.stat(tgid, task.tid), Ok(s) if s.is_kernel_thread())
    }

    fn same_start(&self, task: TaskId, tgid: i32) -> bool {
        matches!(self.proc.stat(tgid, task.tid), Ok(s) if s.start_time == task.start_time)
    }

    // --- helpers --------------------------------------------------------

    fn read_failed(&self, verified: &VerifiedTask, e: ProcError) -> Outcome {
        if e.is_gone() || !self.still_verified(verified) {
            return Outcome::Gone;
        }
        match e {
            ProcError::Denied { path } => refused(
                "EACCES",
                format!("cannot read {}: run numaplace as root", path.display()),
            ),
            e => refused("EIO", e.to_string()),
        }
    }

    /// `to_node` must be a node with memory.
    fn check_target(&self, node: u32) -> Result<(), Outcome> {
        let with_memory = read_set(&self.root, "sys/devices/system/node/has_memory")
            .or_else(|| read_set(&self.root, "sys/devices/system/node/online"));
        match with_memory {
            Some(nodes) if !nodes.contains(node) => Err(refused(
                "ENODEV",
                format!(
                    "node {node} has no memory on this machine (nodes with memory: {nodes}); \
                     pages can only move to one of those"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Why `sched_setaffinity` said EINVAL, in words.
    fn explain_einval(&self, tgid: i32, cpus: &CpuSet) -> String {
        if let Some(online) = read_set(&self.root, "sys/devices/system/cpu/online") {
            if !cpus.intersects(&online) {
                return format!(
                    "none of CPUs {cpus} is online on this machine (online: {online}), \
                     so the thread would have nowhere to run"
                );
            }
        }
        if let Some((cgroup, allowed)) = self.cgroup_cpus(tgid) {
            if !cpus.intersects(&allowed) {
                return format!(
                    "CPUs {cpus} are outside the CPUs its cgroup allows (cpuset {cgroup}: \
                     {allowed}); pin it within those CPUs, or widen the cgroup's cpuset"
                );
            }
        }
        format!(
            "the kernel refused CPUs {cpus}: they are outside the CPUs its cgroup allows, \
             or the thread does not allow affinity changes (a per-CPU kernel thread, a \
             SCHED_DEADLINE task)"
        )
    }

    /// The effective CPUs of the process's cpuset cgroup (v1 or v2).
    fn cgroup_cpus(&self, tgid: i32) -> Option<(String, CpuSet)> {
        let path = self.root.read(&format!("proc/{tgid}/cpuset")).ok()?;
        let path = path.trim();
        if path.split('/').any(|c| c == "..") {
            return None;
        }
        let path = path.trim_end_matches('/');
        [
            format!("sys/fs/cgroup/cpuset{path}/cpuset.effective_cpus"),
            format!("sys/fs/cgroup{path}/cpuset.cpus.effective"),
            format!("sys/fs/cgroup/unified{path}/cpuset.cpus.effective"),
        ]
        .iter()
        .find_map(|f| read_set(&self.root, f))
        .map(|set| (if path.is_empty() { "/" } else { path }.to_string(), set))
    }
}

/// A thread's affinity by tid (`sched_getaffinity`), with no identity
/// check: for telemetry, where a stale answer about a reused tid is
/// harmless. The buffer starts at `possible_cpus` bits and doubles on
/// `EINVAL`.
pub fn thread_affinity(tid: i32, possible_cpus: usize) -> io::Result<CpuSet> {
    thread_affinity_with(tid, possible_cpus, &mut Vec::new())
}

/// [`thread_affinity`] into a buffer the caller keeps from thread to
/// thread (a round reads every thread's): no allocation but the set.
pub fn thread_affinity_with(
    tid: i32,
    possible_cpus: usize,
    words: &mut Vec<c_ulong>,
) -> io::Result<CpuSet> {
    if words.len() < words_for(possible_cpus) {
        words.resize(words_for(possible_cpus), 0);
    }
    loop {
        // SAFETY: the kernel writes at most the given number of bytes into
        // `words`, which has that many.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getaffinity,
                tid,
                words.len() * size_of::<c_ulong>(),
                words.as_mut_ptr(),
            )
        };
        if r >= 0 {
            // The kernel wrote `r` bytes (its cpumask size): the rest is
            // not this thread's.
            let n = (r as usize).div_ceil(size_of::<c_ulong>()).min(words.len());
            return Ok(set_from_words(&words[..n]));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL)
            && words.len() * (c_ulong::BITS as usize) < MAX_AFFINITY_BITS
        {
            let n = words.len() * 2;
            words.resize(n, 0);
        } else {
            return Err(e);
        }
    }
}

impl Actuator for HostActuator {
    fn apply(&mut self, action: &Action) -> Outcome {
        HostActuator::apply(self, action)
    }

    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError> {
        HostActuator::affinity(self, task, tgid).map_err(|e| match e {
            ActError::Gone { .. } => AffinityError::Gone,
            ActError::KernelThread { .. } => AffinityError::KernelThread,
            e @ ActError::Os { .. } => AffinityError::Unreadable(e.to_string()),
        })
    }

    fn kernel_balancing_value(&self) -> Option<Result<u32, String>> {
        Some(HostActuator::kernel_balancing_value(self).map_err(|e| e.to_string()))
    }

    fn set_kernel_balancing_value(&mut self, value: u32) -> Result<(), String> {
        HostActuator::set_kernel_balancing_value(self, value).map_err(|e| e.to_string())
    }
}

/// Proof that a task was the expected one when an action began: its
/// identity, and a pidfd that says whether it is still alive.
struct VerifiedTask {
    task: TaskId,
    tgid: i32,
    fd: Option<OwnedFd>,
}

fn pidfd_open(pid: i32, flags: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(r as c_int) })
}

/// Whether the task behind a pidfd has exited (readable), or cannot be
/// told (poll failed: treated as exited).
fn pidfd_exited(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd, zero timeout.
        let r = unsafe { libc::poll(&mut p, 1, 0) };
        if r >= 0 {
            return r > 0 && p.revents != 0;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return true;
        }
    }
}

fn refused(errno: &str, why: impl Into<String>) -> Outcome {
    Outcome::Refused {
        errno: errno.to_string(),
        why: why.into(),
    }
}

/// The symbolic name of an errno.
pub(crate) fn errno_name(errno: Option<i32>) -> String {
    let name = match errno {
        Some(libc::EPERM) => "EPERM",
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::ESRCH) => "ESRCH",
        Some(libc::EIO) => "EIO",
        Some(libc::E2BIG) => "E2BIG",
        Some(libc::EAGAIN) => "EAGAIN",
        Some(libc::ENOMEM) => "ENOMEM",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EFAULT) => "EFAULT",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::ENODEV) => "ENODEV",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(e) => return format!("errno {e}"),
        None => "unknown",
    };
    name.to_string()
}

fn read_set(root: &SysRoot, rel: &str) -> Option<CpuSet> {
    CpuSet::parse_list(&root.read_optional(rel).ok()??).ok()
}

pub(crate) fn words_for(bits: usize) -> usize {
    bits.div_ceil(c_ulong::BITS as usize).max(1)
}

pub(crate) fn words_from_set(set: &CpuSet, nwords: usize) -> Vec<c_ulong> {
    let mut words = vec![0 as c_ulong; nwords];
    let bits = c_ulong::BITS as usize;
    for id in set.iter() {
        let i = id as usize;
        if let Some(w) = words.get_mut(i / bits) {
            *w |= 1 << (i % bits);
        }
    }
    words
}

pub(crate) fn set_from_words(words: &[c_ulong]) -> CpuSet {
    let bits = c_ulong::BITS;
    let mut set = CpuSet::new();
    for (i, &w) in words.iter().enumerate() {
        let mut w = w;
        while w != 0 {
            set.insert(i as u32 * bits + w.trailing_zeros());
            w &= w - 1;
        }
    }
    set
}
