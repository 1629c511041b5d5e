//! Every task's scheduling fields in one read: a BPF task iterator.
//!
//! A thread's `/proc/PID/task/TID/stat` costs the kernel several
//! microseconds to generate (it takes the task's locks and its memory
//! map's counters, formats 52 fields), even held open and read with one
//! `pread` (issue 19: 11.6 ms for 2,000 threads here, `benches/collect.rs`).
//! The kernel's task iterator (`bpf_iter_task`, Linux 5.8) runs a small
//! BPF program for every task in one `read()` of an iterator fd; ours
//! copies a fixed record of what the collector reads per task and nothing
//! else: from `stat` identity, name, state, last CPU, CPU time and faults;
//! the allowed CPUs (`sched_getaffinity`); and for its process the memory
//! nodes (`status`), the cgroup's id and the exec count, which say when
//! its `cgroup` and `cmdline` must be read again (`collect/iterated.rs`).
//!
//! Derived exactly as `/proc/PID/stat` derives them (fs/proc/array.c,
//! `do_task_stat`), so a task's identity (tid, start time) is the same
//! whichever way it was read, and the actuator's checks hold:
//! - start time: `nsec_to_clock_t(timens_add_boottime_ns(start_boottime))`;
//! - state: `task_state_index` (include/linux/sched.h) to `"RSDTtXZPI"`;
//! - user and system time: `task_cputime_adjusted` (kernel/sched/cputime.c,
//!   `cputime_adjust`: the tick-sampled split scaled to the precise
//!   `sum_exec_runtime`, never below what was last reported), in clock ticks;
//! - last CPU: `task_cpu()`;
//! - allowed CPUs: `cpus_mask` within the online CPUs (`sched_getaffinity`).
//!
//! Needs CAP_BPF and CAP_PERFMON (root), a kernel with BTF
//! (`/sys/kernel/btf/vmlinux`, CONFIG_DEBUG_INFO_BTF) and numaplace in
//! the initial pid namespace (the records carry global ids; `/proc` of
//! another namespace numbers tasks differently). Where any is missing,
//! [`TaskIterator::open`] says which and the collector reads `/proc`.

mod btf;
mod prog;

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use numaplace_model::CpuSet;
use numaplace_model::task::name_from_bytes;

pub use btf::{Btf, BtfError};
use prog::{Insn, Layout};

/// Why the task iterator is not used.
#[derive(Debug, thiserror::Error)]
pub enum TaskIterError {
    #[error("cannot read the kernel's BTF ({path}): {source}")]
    /// The kernel's BTF could not be read.
    Btf {
        /// The BTF file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    #[error("the kernel's BTF: {0}")]
    /// The BTF lacks what the iterator needs.
    Layout(#[from] BtfError),
    #[error("{what} failed: {source}{hint}")]
    /// A system call to load or attach the iterator failed.
    Syscall {
        /// The call, in words (`creating a task iterator (BPF_ITER_CREATE)`).
        what: &'static str,
        /// The error.
        source: std::io::Error,
        /// What to do, where known (after a `: `).
        hint: String,
    },
    #[error(
        "the iterator's thread ids are not those of this /proc: numaplace runs in a pid namespace other than the host's ({0})"
    )]
    /// numaplace runs in a pid namespace other than the host's.
    Namespace(String),
    #[error("reading the iterator: {0}")]
    /// Reading the iterator's output failed.
    Read(std::io::Error),
    #[error("the iterator gave {got} bytes, not whole records of {size}")]
    /// The output is not whole records.
    Torn {
        /// Bytes read.
        got: usize,
        /// Bytes of one record.
        size: usize,
    },
}

/// What the iterator read of one task, as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    /// The thread id.
    pub tid: i32,
    /// Its process.
    pub tgid: i32,
    /// Clock ticks since boot, as `stat`'s field 22.
    pub start_time: u64,
    /// Its `comm`. Untrusted.
    pub comm: String,
    /// Its one-letter state.
    pub state: char,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// The kernel's `PF_*` flags.
    pub flags: u32,
    /// Clock ticks, as `stat`'s fields 14 and 15.
    pub utime: u64,
    /// See `utime`.
    pub stime: u64,
    /// Nanoseconds run, precise (the scheduler's clock).
    pub runtime_ns: u64,
    /// Minor and major page faults of this thread.
    pub min_flt: u64,
    /// See `min_flt`.
    pub maj_flt: u64,
    /// The CPUs it may run on, as `sched_getaffinity` reads them (its
    /// mask and the CPUs online); `None` where the record does not hold
    /// them (more than 1,024 CPUs, a kernel before 5.3).
    pub allowed_cpus: Option<CpuSet>,
    /// The nodes it may allocate from (`Mems_allowed_list`), where the
    /// record holds them (node ids below 64).
    pub allowed_mems: Option<CpuSet>,
    /// Its cgroup's id in the unified hierarchy (the directory's inode),
    /// where the kernel's types allow reading it: changes when it moves.
    pub cgroup_id: Option<u64>,
    /// How many times it called `execve` (0 where the kernel's types do
    /// not say): with the start time, which program it runs.
    pub exec_id: u64,
}

/// Words of the possible nodes' mask (`/sys/devices/system/node/possible`);
/// 1 on a kernel without NUMA.
fn node_words() -> u32 {
    match std::fs::read_to_string("/sys/devices/system/node/possible") {
        Ok(t) => CpuSet::parse_list(t.trim())
            .ok()
            .and_then(|s| s.last())
            .map_or(0, |last| (last + 1).div_ceil(64)),
        Err(_) => 1,
    }
}

/// Words of the possible CPUs' mask (`/sys/devices/system/cpu/possible`).
fn cpu_words() -> u32 {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|t| CpuSet::parse_list(t.trim()).ok())
        .and_then(|s| s.last())
        .map_or(0, |last| (last + 1).div_ceil(64))
}

/// The CPUs online now (`sched_getaffinity` gives a task's mask within the
/// active CPUs, which are the online ones outside a hotplug in progress).
fn online_cpus() -> Option<CpuSet> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    CpuSet::parse_list(text.trim()).ok()
}

/// The most records read in one pass (a host's `pid_max` can be 4 million;
/// a pass stops there and says so).
const MAX_RECORDS: usize = 1 << 20;

/// A loaded task iterator: its program and link stay for the daemon's
/// life; each [`TaskIterator::read`] makes a new iterator fd from the link.
#[derive(Debug)]
pub struct TaskIterator {
    link: OwnedFd,
    _prog: OwnedFd,
    layout: Layout,
    user_hz: u64,
    boottime_offset_ns: i64,
    buf: Vec<u8>,
    /// Each task's user and system time (ns) as last reported, by (tid,
    /// start time): the floor `cputime_adjust` keeps them above, as the
    /// kernel keeps `prev_cputime` for `/proc`'s readers (which a reader of
    /// the iterator does not update).
    reported: HashMap<(i32, u64), (u64, u64)>,
    truncated_said: bool,
}

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_ITER_CREATE: libc::c_long = 33;
const BPF_PROG_TYPE_TRACING: u32 = 26;
const BPF_TRACE_ITER: u32 = 28;
/// `sizeof(union bpf_attr)` of the uapi header numaplace was written
/// against; the kernel takes a shorter or longer one if the tail is zero.
const ATTR_SIZE: usize = 144;

fn put32(a: &mut [u8; ATTR_SIZE], at: usize, v: u32) {
    a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put64(a: &mut [u8; ATTR_SIZE], at: usize, v: u64) {
    a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// `bpf(cmd, attr)`, returning the new fd.
fn bpf(cmd: libc::c_long, attr: &mut [u8; ATTR_SIZE]) -> std::io::Result<OwnedFd> {
    // SAFETY: the attr buffer is ATTR_SIZE bytes, as passed; the pointers
    // inside it point at buffers the caller keeps alive across the call.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), ATTR_SIZE as u32) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn permission_hint(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "; loading BPF needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN (`numaplace doctor` \
             says which this process lacks)"
                .to_string()
        }
        Some(libc::ENOSYS) => "; this kernel has no bpf(2)".to_string(),
        _ => String::new(),
    }
}

/// Whether this process is in the initial pid namespace: `NSpid` in its
/// `status` has one id per namespace it is in, from the initial one.
fn in_initial_pid_namespace() -> Result<(), TaskIterError> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(TaskIterError::Read)?;
    match status.lines().find_map(|l| l.strip_prefix("NSpid:")) {
        Some(ids) if ids.split_whitespace().count() == 1 => Ok(()),
        Some(ids) => Err(TaskIterError::Namespace(format!("NSpid:{ids}"))),
        // Kernels before 4.1 have no NSpid: the task iterator needs 5.8.
        None => Ok(()),
    }
}

/// The boottime offset of this process's time namespace, in ns
/// (`/proc/self/timens_offsets`; zero where there is none).
fn boottime_offset_ns() -> i64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/timens_offsets") else {
        return 0;
    };
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "boottime").then(|| {
                let s: i64 = w.next()?.parse().ok()?;
                let ns: i64 = w.next()?.parse().ok()?;
                s.checked_mul(1_000_000_000)?.checked_add(ns)
            })?
        })
        .unwrap_or(0)
}

impl TaskIterator {
    /// Loads the program for this kernel (its `task_struct` layout from
    /// BTF) and attaches it as a task iterator. `user_hz` is the clock
    /// tick `/proc` counts in (`sysconf(_SC_CLK_TCK)`).
    pub fn open(user_hz: u64) -> Result<TaskIterator, TaskIterError> {
        in_initial_pid_namespace()?;
        let path = "/sys/kernel/btf/vmlinux";
        let blob = numaplace_io::bounded::read_bytes(
            std::path::Path::new(path),
            numaplace_io::bounded::BTF_MAX_BYTES,
        )
        .map_err(|source| TaskIterError::Btf {
            path: path.to_string(),
            source,
        })?;
        let btf = Btf::parse(&blob)?;
        let layout = Layout::from_btf(&btf, cpu_words(), node_words())?;
        layout.check()?;
        let attach_id = btf.func("bpf_iter_task")?;
        let prog = load(&layout.program(), attach_id)?;
        let mut attr = [0u8; ATTR_SIZE];
        put32(&mut attr, 0, prog.as_raw_fd() as u32);
        put32(&mut attr, 8, BPF_TRACE_ITER);
        let link = bpf(BPF_LINK_CREATE, &mut attr).map_err(|source| TaskIterError::Syscall {
            what: "attaching the task iterator (BPF_LINK_CREATE)",
            hint: permission_hint(&source),
            source,
        })?;
        let mut it = TaskIterator {
            link,
            _prog: prog,
            layout,
            user_hz: user_hz.max(1),
            boottime_offset_ns: boottime_offset_ns(),
            buf: Vec::new(),
            reported: HashMap::new(),
            truncated_said: false,
        };
        it.check_against_proc()?;
        Ok(it)
    }

    /// One pass must show this thread as `/proc` shows it: the same tid
    /// and start time. It does not where `/proc` numbers tasks in another
    /// pid namespace than the kernel's global ids the records carry (a
    /// container with its own pid namespace and `/proc`), or where the
    /// derivation of the start time does not hold on this kernel.
    fn check_against_proc(&mut self) -> Result<(), TaskIterError> {
        let path = "/proc/thread-self/stat";
        let bytes = std::fs::read(path).map_err(TaskIterError::Read)?;
        let me = numaplace_parse::procfs::parse_stat(&bytes)
            .map_err(|e| TaskIterError::Read(std::io::Error::other(format!("{path}: {e}"))))?;
        let mut records = Vec::new();
        self.read(&mut records)?;
        match records.iter().find(|r| r.tid == me.pid) {
            Some(r) if r.start_time == me.start_time => Ok(()),
            Some(r) => Err(TaskIterError::Namespace(format!(
                "task {} started at tick {} in the iterator and {} in {path}",
                me.pid, r.start_time, me.start_time
            ))),
            None => Err(TaskIterError::Namespace(format!(
                "{path} says this thread is {}, which the iterator does not list",
                me.pid
            ))),
        }
    }

    /// One pass over every task of the host, into `out` (cleared first).
    pub fn read(&mut self, out: &mut Vec<TaskRecord>) -> Result<(), TaskIterError> {
        out.clear();
        let mut attr = [0u8; ATTR_SIZE];
        put32(&mut attr, 0, self.link.as_raw_fd() as u32);
        let fd = bpf(BPF_ITER_CREATE, &mut attr).map_err(|source| TaskIterError::Syscall {
            what: "creating a task iterator (BPF_ITER_CREATE)",
            hint: permission_hint(&source),
            source,
        })?;
        let mut file = File::from(fd);
        let size = self.layout.record_size as usize;
        let limit = MAX_RECORDS * size;
        self.buf.clear();
        let mut chunk = [0u8; 64 * 1024];
        loop {
            let n = match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(TaskIterError::Read(e)),
            };
            self.buf.extend_from_slice(&chunk[..n]);
            if self.buf.len() >= limit {
                if !self.truncated_said {
                    tracing::warn!(
                        "more than {MAX_RECORDS} tasks on this host: a round reads the first \
                         {MAX_RECORDS} through the task iterator, the rest from /proc"
                    );
                    self.truncated_said = true;
                }
                self.buf.truncate(limit);
                break;
            }
        }
        if self.buf.len() % size != 0 {
            return Err(TaskIterError::Torn {
                got: self.buf.len(),
                size,
            });
        }
        out.reserve(self.buf.len() / size);
        let online = online_cpus();
        let mut reported = HashMap::with_capacity(self.reported.len());
        for rec in self.buf.chunks_exact(size) {
            out.push(self.decode(rec, online.as_ref(), &mut reported));
        }
        self.reported = reported;
        Ok(())
    }

    fn decode(
        &self,
        rec: &[u8],
        online: Option<&CpuSet>,
        reported: &mut HashMap<(i32, u64), (u64, u64)>,
    ) -> TaskRecord {
        let l = &self.layout;
        let u32_of = |name| {
            let at = l.slot(name).unwrap() as usize;
            u32::from_ne_bytes(rec[at..at + 4].try_into().unwrap())
        };
        let u64_of = |name| {
            let at = l.slot(name).unwrap() as usize;
            u64::from_ne_bytes(rec[at..at + 8].try_into().unwrap())
        };
        let comm_at = l.slot("comm").unwrap() as usize;
        let comm = &rec[comm_at..comm_at + 16];
        let comm_len = comm.iter().position(|&b| b == 0).unwrap_or(16);
        let tick_ns = 1_000_000_000 / self.user_hz;
        let boot = u64_of("start_boottime").saturating_add_signed(self.boottime_offset_ns);
        let key = (u32_of("tid") as i32, u64_of("start_boottime"));
        // The later of the kernel's last report (to /proc) and ours.
        let kernel = (u64_of("prev_utime"), u64_of("prev_stime"));
        let prev = match self.reported.get(&key) {
            Some(&ours) if ours.0 + ours.1 > kernel.0 + kernel.1 => ours,
            _ => kernel,
        };
        let (utime, stime) = cputime_adjusted(
            u64_of("utime"),
            u64_of("stime"),
            u64_of("sum_exec_runtime"),
            prev,
        );
        reported.insert(key, (utime, stime));
        TaskRecord {
            tid: u32_of("tid") as i32,
            tgid: u32_of("tgid") as i32,
            start_time: boot / tick_ns,
            comm: name_from_bytes(&comm[..comm_len]),
            state: state_letter(u32_of("state"), u32_of("exit_state")),
            cpu: u32_of("cpu"),
            flags: u32_of("flags"),
            utime: utime / tick_ns,
            stime: stime / tick_ns,
            runtime_ns: u64_of("sum_exec_runtime"),
            min_flt: u64_of("min_flt"),
            maj_flt: u64_of("maj_flt"),
            allowed_cpus: match (l.cpus, online) {
                (Some(c), Some(online)) => {
                    let mut set = CpuSet::new();
                    for w in 0..c.words {
                        let at = (c.slot + 8 * w) as usize;
                        let mut bits = u64::from_ne_bytes(rec[at..at + 8].try_into().unwrap());
                        while bits != 0 {
                            set.insert(64 * w + bits.trailing_zeros());
                            bits &= bits - 1;
                        }
                    }
                    Some(set.intersection(online))
                }
                _ => None,
            },
            allowed_mems: l.mems.map(|(_, slot)| {
                let at = slot as usize;
                let mut bits = u64::from_ne_bytes(rec[at..at + 8].try_into().unwrap());
                let mut set = CpuSet::new();
                while bits != 0 {
                    set.insert(bits.trailing_zeros());
                    bits &= bits - 1;
                }
                set
            }),
            exec_id: u64_of("exec_id"),
            cgroup_id: l.cgroup.map(|(_, _, slot)| {
                let at = slot as usize;
                u64::from_ne_bytes(rec[at..at + 8].try_into().unwrap())
            }),
        }
    }
}

/// Loads the program, with the verifier's log in the error if it refuses.
fn load(insns: &[Insn], attach_btf_id: u32) -> Result<OwnedFd, TaskIterError> {
    let license = c"GPL";
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = [0u8; ATTR_SIZE];
    put32(&mut attr, 0, BPF_PROG_TYPE_TRACING);
    put32(&mut attr, 4, insns.len() as u32);
    put64(&mut attr, 8, insns.as_ptr() as u64);
    put64(&mut attr, 16, license.as_ptr() as u64);
    put32(&mut attr, 24, 1); // log_level
    put32(&mut attr, 28, log.len() as u32);
    put64(&mut attr, 32, log.as_mut_ptr() as u64);
    attr[48..48 + 14].copy_from_slice(b"numaplace_task");
    put32(&mut attr, 68, BPF_TRACE_ITER);
    put32(&mut attr, 108, attach_btf_id);
    bpf(BPF_PROG_LOAD, &mut attr).map_err(|source| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        let last = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let mut hint = permission_hint(&source);
        if !last.is_empty() {
            hint.push_str(&format!("; the verifier said: {last}"));
            tracing::debug!("the verifier's log:\n{text}");
        }
        TaskIterError::Syscall {
            what: "loading the task iterator's program (BPF_PROG_LOAD)",
            source,
            hint,
        }
    })
}

/// `task_state_index` and `task_index_to_char` (include/linux/sched.h, as
/// of Linux 6.13: `TASK_IDLE` is 0x402, `TASK_RTLOCK_WAIT` 0x1000,
/// `TASK_FROZEN` 0x8000; the report bits below 0x80 are unchanged since 4.14).
pub fn state_letter(state: u32, exit_state: u32) -> char {
    const TASK_REPORT: u32 = 0x7f;
    const TASK_REPORT_IDLE: u32 = TASK_REPORT + 1;
    const TASK_UNINTERRUPTIBLE: u32 = 0x2;
    const TASK_IDLE: u32 = 0x402;
    const TASK_RTLOCK_WAIT: u32 = 0x1000;
    const TASK_FROZEN: u32 = 0x8000;
    let mut s = (state | exit_state) & TASK_REPORT;
    if state & TASK_IDLE == TASK_IDLE {
        s = TASK_REPORT_IDLE;
    }
    if state & TASK_RTLOCK_WAIT != 0 || state & TASK_FROZEN != 0 {
        s = TASK_UNINTERRUPTIBLE;
    }
    // fls(): the index of the highest bit set, from 1; 0 for none.
    let index = (u32::BITS - s.leading_zeros()) as usize;
    b"RSDTtXZPI"[index.min(8)] as char
}

/// `cputime_adjust` (kernel/sched/cputime.c): user and system time in ns,
/// the sampled split (`utime`, `stime`) scaled to the precise run time
/// `rtime`, never below the pair last reported (`prev`).
pub fn cputime_adjusted(utime: u64, stime: u64, rtime: u64, prev: (u64, u64)) -> (u64, u64) {
    let (prev_u, prev_s) = prev;
    if prev_u.saturating_add(prev_s) >= rtime {
        return prev;
    }
    let mut s = if stime == 0 {
        0
    } else if utime == 0 {
        rtime
    } else {
        ((stime as u128 * rtime as u128) / (stime as u128 + utime as u128)) as u64
    };
    if s < prev_s {
        s = prev_s;
    }
    let mut u = rtime - s;
    if u < prev_u {
        u = prev_u;
        s = rtime - u;
    }
    (u, s)
}

#[cfg(test)]
mod tests;
