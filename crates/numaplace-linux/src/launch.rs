//! What `numaplace exec` sets on itself before it becomes the command, as
//! `numactl` does: the calling thread's CPU affinity (`sched_setaffinity`)
//! and memory policy (`set_mempolicy`), both of which `execve` keeps, read
//! back for checks (`get_mempolicy`), and the exec itself (`execvp`: the
//! same process, pid, signals and exit status; no fork).
//!
//! Both settings are the calling thread's: they are made and the command
//! executed on the same thread (the main one, which `execve` keeps).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt as _;

use libc::{c_int, c_ulong};
use numaplace_model::CpuSet;
use thiserror::Error;

use crate::actuate::{errno_name, set_from_words, words_for, words_from_set};

/// `MPOL_PREFERRED_MANY` (`<linux/mempolicy.h>`, Linux 5.15): allocate on
/// any of the nodes, falling back to the others as `MPOL_PREFERRED` does.
/// Not in the `libc` crate.
pub const MPOL_PREFERRED_MANY: c_int = 5;

/// The node masks handed to the kernel: libnuma's default size, and more
/// node ids than Linux has (`CONFIG_NODES_SHIFT` is at most 10).
const MASK_BITS: usize = 1024;

/// A thread's memory policy, as `set_mempolicy(2)` takes it (no mode
/// flags). Node ids are the kernel's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryPolicy {
    /// `MPOL_DEFAULT`: the kernel's own, local allocation (the node of the
    /// CPU the thread runs on), falling back to the nearest others.
    Default,
    /// `MPOL_PREFERRED`: this node first, the others when it is full.
    Preferred(u32),
    /// `MPOL_PREFERRED_MANY` (Linux 5.15+): these nodes first (the nearest
    /// to the thread's CPU among them), the others when they are full.
    PreferredMany(CpuSet),
    /// `MPOL_BIND`: only these nodes; allocation fails (the OOM killer
    /// runs) when they are full.
    Bind(CpuSet),
    /// `MPOL_INTERLEAVE`: page by page over these nodes.
    Interleave(CpuSet),
}

impl MemoryPolicy {
    /// The mode as the kernel numbers it (`MPOL_*`).
    pub fn mode(&self) -> c_int {
        match self {
            MemoryPolicy::Default => libc::MPOL_DEFAULT,
            MemoryPolicy::Preferred(_) => libc::MPOL_PREFERRED,
            MemoryPolicy::PreferredMany(_) => MPOL_PREFERRED_MANY,
            MemoryPolicy::Bind(_) => libc::MPOL_BIND,
            MemoryPolicy::Interleave(_) => libc::MPOL_INTERLEAVE,
        }
    }

    /// The nodes it names (none for the default).
    pub fn nodes(&self) -> CpuSet {
        match self {
            MemoryPolicy::Default => CpuSet::new(),
            MemoryPolicy::Preferred(n) => CpuSet::from_iter([*n]),
            MemoryPolicy::PreferredMany(s)
            | MemoryPolicy::Bind(s)
            | MemoryPolicy::Interleave(s) => s.clone(),
        }
    }

    /// The policy's word in `/proc/<pid>/numa_maps` (the kernel's
    /// `mpol_to_str`): `default`, `prefer:1`, `prefer (many):0-1`,
    /// `bind:0-1`, `interleave:0-1`.
    pub fn numa_maps_word(&self) -> String {
        let mode = match self {
            MemoryPolicy::Default => return "default".into(),
            MemoryPolicy::Preferred(_) => "prefer",
            MemoryPolicy::PreferredMany(_) => "prefer (many)",
            MemoryPolicy::Bind(_) => "bind",
            MemoryPolicy::Interleave(_) => "interleave",
        };
        format!("{mode}:{}", self.nodes().to_list_string())
    }

    /// From `get_mempolicy`'s mode (flags masked off) and node mask.
    fn from_kernel(mode: c_int, nodes: CpuSet) -> Option<MemoryPolicy> {
        const FLAGS: c_int =
            libc::MPOL_F_STATIC_NODES | libc::MPOL_F_RELATIVE_NODES | libc::MPOL_F_NUMA_BALANCING;
        Some(match mode & !FLAGS {
            libc::MPOL_DEFAULT | libc::MPOL_LOCAL => MemoryPolicy::Default,
            libc::MPOL_PREFERRED => match nodes.first() {
                Some(n) => MemoryPolicy::Preferred(n),
                // Preferred with no node is local allocation.
                None => MemoryPolicy::Default,
            },
            MPOL_PREFERRED_MANY => MemoryPolicy::PreferredMany(nodes),
            libc::MPOL_BIND => MemoryPolicy::Bind(nodes),
            libc::MPOL_INTERLEAVE => MemoryPolicy::Interleave(nodes),
            _ => return None,
        })
    }
}

impl std::fmt::Display for MemoryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryPolicy::Default => f.write_str("the kernel's default (local allocation)"),
            MemoryPolicy::Preferred(n) => write!(f, "preferred on node {n}"),
            MemoryPolicy::PreferredMany(s) => write!(f, "preferred on nodes {s}"),
            MemoryPolicy::Bind(s) => write!(f, "bound to node{} {s}", plural(s)),
            MemoryPolicy::Interleave(s) => write!(f, "interleaved over node{} {s}", plural(s)),
        }
    }
}

fn plural(s: &CpuSet) -> &'static str {
    if s.len() == 1 { "" } else { "s" }
}

/// The kernel refused a setting.
#[derive(Debug, Error)]
pub enum LaunchError {
    #[error("set_mempolicy ({policy}): {errno}: {source}")]
    /// The memory policy could not be set.
    MemoryPolicy {
        /// The policy asked for.
        policy: MemoryPolicy,
        /// The error's name (`EINVAL`).
        errno: String,
        /// The error.
        source: io::Error,
    },
    #[error("sched_setaffinity (CPUs {cpus}): {errno}: {source}")]
    /// The CPUs could not be set.
    Affinity {
        /// The CPUs asked for.
        cpus: CpuSet,
        /// The error's name (`EINVAL`).
        errno: String,
        /// The error.
        source: io::Error,
    },
}

impl LaunchError {
    /// The kernel's errno.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            LaunchError::MemoryPolicy { source, .. } | LaunchError::Affinity { source, .. } => {
                source.raw_os_error()
            }
        }
    }
}

/// Sets the calling thread's memory policy (`set_mempolicy`); threads it
/// creates and a program it executes inherit it.
pub fn set_memory_policy(policy: &MemoryPolicy) -> Result<(), LaunchError> {
    let nodes = policy.nodes();
    let mask = words_from_set(&nodes, words_for(MASK_BITS));
    let (ptr, maxnode) = if nodes.is_empty() {
        (std::ptr::null(), 0)
    } else {
        // The kernel reads maxnode - 1 bits.
        (mask.as_ptr(), MASK_BITS + 1)
    };
    // SAFETY: the kernel reads at most maxnode - 1 bits from `mask`, which
    // holds MASK_BITS; a null mask with maxnode 0 for the default.
    let r = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            policy.mode() as c_ulong,
            ptr,
            maxnode as c_ulong,
        )
    };
    if r != 0 {
        let source = io::Error::last_os_error();
        return Err(LaunchError::MemoryPolicy {
            policy: policy.clone(),
            errno: errno_name(source.raw_os_error()),
            source,
        });
    }
    Ok(())
}

/// The calling thread's memory policy (`get_mempolicy` with no address).
pub fn memory_policy() -> io::Result<MemoryPolicy> {
    let mut mode: c_int = 0;
    let mut mask = vec![0 as c_ulong; words_for(MASK_BITS)];
    // SAFETY: the kernel writes one int to `mode` and at most maxnode bits
    // (MASK_BITS, the buffer's size) to `mask`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut c_int,
            mask.as_mut_ptr(),
            MASK_BITS as c_ulong,
            std::ptr::null::<libc::c_void>(),
            0 as c_ulong,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    MemoryPolicy::from_kernel(mode, set_from_words(&mask)).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("get_mempolicy returned mode {mode}, which numaplace does not know"),
        )
    })
}

/// Whether the kernel takes `MPOL_PREFERRED_MANY` on `nodes` (Linux
/// 5.15+): tried on the calling thread, whose policy is put back after.
pub fn preferred_many_supported(nodes: &CpuSet) -> bool {
    let Ok(before) = memory_policy() else {
        return false;
    };
    let ok = set_memory_policy(&MemoryPolicy::PreferredMany(nodes.clone())).is_ok();
    if ok {
        if let Err(e) = set_memory_policy(&before) {
            tracing::warn!("putting back this thread's memory policy: {e}");
        }
    }
    ok
}

/// Restricts the calling thread to `cpus` (`sched_setaffinity(0)`);
/// threads it creates and a program it executes inherit it.
pub fn set_cpu_affinity(cpus: &CpuSet) -> Result<(), LaunchError> {
    set_own_affinity(cpus).map_err(|source| LaunchError::Affinity {
        cpus: cpus.clone(),
        errno: errno_name(source.raw_os_error()),
        source,
    })
}

/// [`set_cpu_affinity`] with the kernel's error as it is.
pub(crate) fn set_own_affinity(cpus: &CpuSet) -> io::Result<()> {
    let bits = cpus.last().map_or(1, |c| c as usize + 1);
    let mask = words_from_set(cpus, words_for(bits));
    // SAFETY: the kernel reads `mask.len()` words from the buffer.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            0,
            mask.len() * size_of::<c_ulong>(),
            mask.as_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Why a command could not be executed, with the exit status a shell
/// gives for it.
#[derive(Debug, Error)]
#[error("{program}: {why}")]
pub struct ExecError {
    /// The program.
    pub program: String,
    /// Why it could not run.
    pub why: String,
    /// 127 when the command was not found, 126 when it was found but could
    /// not be executed (POSIX's `sh`, "Command Search and Execution").
    pub status: u8,
    /// The error.
    pub source: io::Error,
}

/// Replaces this process with `program` (searched on `PATH` when it has no
/// `/`, as `execvp` does; a file without an executable format runs under
/// `/bin/sh`) and `args`: returns only when that failed.
pub fn exec(program: &OsStr, args: &[OsString]) -> ExecError {
    let source = std::process::Command::new(program).args(args).exec();
    exec_error(program, source)
}

/// The error and shell exit status of a failed exec.
pub fn exec_error(program: &OsStr, source: io::Error) -> ExecError {
    let program = program.to_string_lossy().into_owned();
    let (status, why) = match source.raw_os_error() {
        Some(libc::ENOENT) if !program.contains('/') => (
            127,
            "command not found on PATH: check its name, or give its path".to_string(),
        ),
        Some(libc::ENOENT | libc::ENOTDIR) => (
            127,
            "no such file: check the path (or, for a script, its #! interpreter)".to_string(),
        ),
        Some(libc::EACCES) => (
            126,
            "permission denied: it is not executable by this user (chmod +x), or is a directory, \
             or lies on a noexec mount"
                .to_string(),
        ),
        _ => (126, format!("cannot execute it: {source}")),
    };
    ExecError {
        program,
        why,
        status,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread of its own: the policy and affinity it sets
    /// die with that thread, not with the test harness's.
    fn on_own_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    fn nodes_with_memory() -> CpuSet {
        let text = std::fs::read_to_string("/sys/devices/system/node/has_memory")
            .or_else(|_| std::fs::read_to_string("/sys/devices/system/node/online"))
            .unwrap();
        CpuSet::parse_list(&text).unwrap()
    }

    #[test]
    fn a_memory_policy_set_is_the_one_read_back() {
        let node = nodes_with_memory().first().unwrap();
        let got = on_own_thread(move || {
            let mut got = Vec::new();
            for p in [
                MemoryPolicy::Preferred(node),
                MemoryPolicy::Bind(CpuSet::from_iter([node])),
                MemoryPolicy::Interleave(CpuSet::from_iter([node])),
                MemoryPolicy::Default,
            ] {
                set_memory_policy(&p).unwrap();
                got.push((p, memory_policy().unwrap()));
            }
            got
        });
        for (set, read) in got {
            assert_eq!(set, read);
        }
    }

    #[test]
    fn preferred_many_is_probed_and_the_policy_put_back() {
        let nodes = nodes_with_memory();
        let (supported, after) = on_own_thread(move || {
            let node = nodes.first().unwrap();
            set_memory_policy(&MemoryPolicy::Preferred(node)).unwrap();
            (preferred_many_supported(&nodes), memory_policy().unwrap())
        });
        let node = nodes_with_memory().first().unwrap();
        assert_eq!(after, MemoryPolicy::Preferred(node));
        // Linux 5.15 added it; this repository's hosts and guests run later
        // kernels (Debian 12's 6.1).
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut v = release.trim().split(['.', '-']).map(|x| x.parse::<u32>());
        let (major, minor) = (v.next().unwrap().unwrap(), v.next().unwrap().unwrap());
        assert_eq!(supported, (major, minor) >= (5, 15), "kernel {release}");
    }

    #[test]
    fn a_node_that_does_not_exist_is_refused_with_its_errno() {
        let e = on_own_thread(|| {
            set_memory_policy(&MemoryPolicy::Bind(CpuSet::from_iter([1000]))).unwrap_err()
        });
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        assert!(e.to_string().contains("EINVAL"), "{e}");
        assert!(e.to_string().contains("bound to node 1000"), "{e}");
    }

    #[test]
    fn the_affinity_set_is_the_one_read_back() {
        let (before, during, refused) = on_own_thread(|| {
            let before = crate::actuate::thread_affinity(0, 64).unwrap();
            let one = CpuSet::from_iter([before.first().unwrap()]);
            set_cpu_affinity(&one).unwrap();
            let during = crate::actuate::thread_affinity(0, 64).unwrap();
            let refused = set_cpu_affinity(&CpuSet::new()).unwrap_err();
            (before, during, refused)
        });
        assert_eq!(during, CpuSet::from_iter([before.first().unwrap()]));
        assert_eq!(refused.raw_os_error(), Some(libc::EINVAL), "{refused}");
    }

    #[test]
    fn words_name_the_policies_as_numa_maps_does() {
        let two = CpuSet::from_iter([0, 1]);
        assert_eq!(MemoryPolicy::Default.numa_maps_word(), "default");
        assert_eq!(MemoryPolicy::Preferred(1).numa_maps_word(), "prefer:1");
        assert_eq!(
            MemoryPolicy::PreferredMany(two.clone()).numa_maps_word(),
            "prefer (many):0-1"
        );
        assert_eq!(MemoryPolicy::Bind(two.clone()).numa_maps_word(), "bind:0-1");
        assert_eq!(
            MemoryPolicy::Interleave(two).numa_maps_word(),
            "interleave:0-1"
        );
    }

    #[test]
    fn a_failed_exec_gets_the_shells_status() {
        let enoent = || io::Error::from_raw_os_error(libc::ENOENT);
        let e = exec_error(OsStr::new("no-such-numaplace-cmd"), enoent());
        assert_eq!(e.status, 127);
        assert!(e.to_string().contains("not found on PATH"), "{e}");
        assert_eq!(exec_error(OsStr::new("./x"), enoent()).status, 127);
        let e = exec_error(
            OsStr::new("/etc/passwd"),
            io::Error::from_raw_os_error(libc::EACCES),
        );
        assert_eq!(e.status, 126);
        assert!(e.to_string().contains("chmod +x"), "{e}");
        let e = exec_error(OsStr::new("/x"), io::Error::from_raw_os_error(libc::E2BIG));
        assert_eq!(e.status, 126);
    }
}
