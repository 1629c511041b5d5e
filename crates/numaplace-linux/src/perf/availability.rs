//! What this host can count, decided once, and why not where it cannot —
//! said in words a user can act on.

use std::collections::BTreeMap;
use std::fmt;
use std::io;

use numaplace_model::Counter;

/// Whether one counter is counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterStatus {
    /// In every monitored thread's group, as `event` (perf's spelling);
    /// `source` says where its encoding came from
    /// ([`EventSpec::source`](super::EventSpec::source)).
    Counted {
        /// The event, as perf spells it.
        event: String,
        /// Where its encoding came from.
        source: String,
    },
    /// Works here, but is not in the group (`why`).
    Spare {
        /// The reason, in words.
        why: String,
    },
    /// Cannot be counted here.
    Unavailable {
        /// Why not.
        reason: String,
    },
}

/// The file-descriptor budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FdLimit {
    /// `RLIMIT_NOFILE` soft limit, after raising.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
    /// The soft limit before numaplace raised it to the hard one.
    pub raised_from: Option<u64>,
}

/// What the host can count, decided once when the monitor starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Availability {
    /// Every [`Counter`], with its status.
    pub counters: BTreeMap<Counter, CounterStatus>,
    /// `perf_event_paranoid` as read (None: absent).
    pub paranoid: Option<i32>,
    /// Whether kernel mode is left out of the counts (paranoid 2 and up).
    pub exclude_kernel: bool,
    /// Software events count kernel-side all the same
    /// ([`OpenOptions::software_kernel`](super::counters::OpenOptions)).
    pub software_kernel: bool,
    /// One fd per counted event.
    pub fds_per_thread: usize,
    /// The open-file limit, and whether it holds the threads' fds.
    pub fd_limit: FdLimit,
    /// Threads that can be counted within the fd budget.
    pub max_threads: usize,
}

impl Availability {
    /// Whether counter `c` is counted here.
    pub fn is_counted(&self, c: Counter) -> bool {
        matches!(self.counters.get(&c), Some(CounterStatus::Counted { .. }))
    }

    /// The counters in every thread's group.
    pub fn counted(&self) -> Vec<Counter> {
        self.counters
            .keys()
            .copied()
            .filter(|&c| self.is_counted(c))
            .collect()
    }

    /// Why `c` is not counted, if it is not.
    pub fn reason(&self, c: Counter) -> Option<&str> {
        match self.counters.get(&c)? {
            CounterStatus::Counted { .. } => None,
            CounterStatus::Spare { why } => Some(why),
            CounterStatus::Unavailable { reason } => Some(reason),
        }
    }

    /// Whether the generic hardware counters are all counted.
    pub fn hardware(&self) -> bool {
        Counter::HARDWARE.iter().all(|&c| self.is_counted(c))
    }

    /// Whether the software events work (counted or spare).
    pub fn software(&self) -> bool {
        Counter::SOFTWARE.iter().all(|c| {
            !matches!(
                self.counters.get(c),
                Some(CounterStatus::Unavailable { .. }) | None
            )
        })
    }
}

impl fmt::Display for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (c, status) in &self.counters {
            match status {
                CounterStatus::Counted { event, source } => {
                    writeln!(f, "{:<17} counted ({event}; from {source})", c.name())?
                }
                CounterStatus::Spare { why } => {
                    writeln!(f, "{:<17} works, not counted: {why}", c.name())?
                }
                CounterStatus::Unavailable { reason } => {
                    writeln!(f, "{:<17} unavailable: {reason}", c.name())?
                }
            }
        }
        let paranoid = self.paranoid.map_or("absent".to_owned(), |p| p.to_string());
        writeln!(
            f,
            "perf_event_paranoid={paranoid}, {}",
            match (self.exclude_kernel, self.software_kernel) {
                (true, true) => "hardware events user space only, software events user and kernel",
                (true, false) =>
                    "user space only (software events too: context switches, \
                                  migrations and faults read 0)",
                (false, _) => "user and kernel",
            }
        )?;
        write!(
            f,
            "{} fds per thread; RLIMIT_NOFILE {} (hard {}{}) allows {} threads",
            self.fds_per_thread,
            self.fd_limit.soft,
            self.fd_limit.hard,
            self.fd_limit
                .raised_from
                .map_or(String::new(), |s| format!(", raised from {s}")),
            self.max_threads
        )
    }
}

/// What the host looks like, for explaining a failed open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// `perf_event_paranoid` as read (None: absent).
    pub paranoid: Option<i32>,
    /// PMUs under `sys/bus/event_source/devices`.
    pub pmus: Vec<String>,
    /// `/proc/cpuinfo` has the `hypervisor` flag.
    pub hypervisor: bool,
}

impl HostFacts {
    fn has_core_pmu(&self) -> bool {
        self.pmus
            .iter()
            .any(|p| super::events::CORE_PMUS.contains(&p.as_str()) || p.starts_with("armv"))
    }

    fn no_pmu_hint(&self) -> String {
        let mut s = String::new();
        if !self.pmus.is_empty() && !self.has_core_pmu() {
            s += &format!(
                "; the kernel lists only these PMUs: {}",
                self.pmus.join(", ")
            );
        }
        s += if self.hypervisor {
            " (this is a VM without a virtual PMU: give the guest one, e.g. QEMU/KVM \
             `-cpu host,pmu=on`, or run on bare metal)"
        } else {
            " (the kernel's perf driver does not drive this CPU's PMU)"
        };
        s
    }
}

/// The errno's name, as the man page spells it.
pub fn errno_name(err: &io::Error) -> String {
    let name = match err.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::ENODEV) => "ENODEV",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EPERM) => "EPERM",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::ESRCH) => "ESRCH",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENFILE) => "ENFILE",
        Some(libc::E2BIG) => "E2BIG",
        _ => return err.to_string(),
    };
    name.to_owned()
}

/// Why `perf_event_open(event)` failing with `err` means the event cannot
/// be counted on this host, in words that say what to do.
pub fn open_failure_reason(
    event: &str,
    hardware: bool,
    err: &io::Error,
    host: &HostFacts,
) -> String {
    let says = format!("perf_event_open({event}) says {}", errno_name(err));
    match err.raw_os_error() {
        Some(libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP) if hardware => {
            format!("no hardware PMU: {says}{}", host.no_pmu_hint())
        }
        Some(libc::EOPNOTSUPP) => format!("{says}: this event cannot be counted per thread"),
        Some(libc::EACCES | libc::EPERM) => match host.paranoid {
            Some(p) if p >= 2 || (p >= 1 && hardware) => format!(
                "perf_event_paranoid={p} forbids it ({says}): run as root or with CAP_PERFMON, \
                 or lower it: sysctl kernel.perf_event_paranoid=1"
            ),
            Some(p) => format!(
                "{says} although perf_event_paranoid={p} allows it: a security module \
                 (SELinux, lockdown), seccomp or the container runtime refuses perf_event_open"
            ),
            None => format!("{says}: this kernel has no perf events (no perf_event_paranoid)"),
        },
        Some(libc::EINVAL) if event.contains('/') => {
            format!(
                "{says}: the kernel rejects this encoding (not an event of this CPU, or a field out of range)"
            )
        }
        Some(libc::EINVAL) => {
            format!("{says}: the kernel does not accept this event or an attribute of it")
        }
        Some(libc::EBUSY) => {
            format!("{says}: the PMU is in exclusive use (another profiler or the hypervisor)")
        }
        Some(libc::ENOSYS) => {
            "perf_event_open does not exist in this kernel (CONFIG_PERF_EVENTS off)".into()
        }
        _ => format!("perf_event_open({event}) failed: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm() -> HostFacts {
        HostFacts {
            paranoid: Some(2),
            pmus: vec!["breakpoint".into(), "msr".into(), "software".into()],
            hypervisor: true,
        }
    }

    #[test]
    fn reasons_say_what_happened_and_what_to_do() {
        let enoent = io::Error::from_raw_os_error(libc::ENOENT);
        let r = open_failure_reason("instructions", true, &enoent, &vm());
        assert!(
            r.starts_with("no hardware PMU: perf_event_open(instructions) says ENOENT"),
            "{r}"
        );
        assert!(
            r.contains("breakpoint, msr, software") && r.contains("VM without a virtual PMU"),
            "{r}"
        );
        let metal = HostFacts {
            pmus: vec!["cpu".into()],
            hypervisor: false,
            ..vm()
        };
        let r = open_failure_reason("instructions", true, &enoent, &metal);
        assert!(
            !r.contains("lists only") && r.contains("perf driver"),
            "{r}"
        );

        let eacces = io::Error::from_raw_os_error(libc::EACCES);
        let p3 = HostFacts {
            paranoid: Some(3),
            ..vm()
        };
        let r = open_failure_reason("task-clock", false, &eacces, &p3);
        assert!(
            r.starts_with("perf_event_paranoid=3 forbids it") && r.contains("run as root"),
            "{r}"
        );
        let p0 = HostFacts {
            paranoid: Some(0),
            ..vm()
        };
        let r = open_failure_reason(
            "task-clock",
            false,
            &io::Error::from_raw_os_error(libc::EPERM),
            &p0,
        );
        assert!(r.contains("security module"), "{r}");

        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        let r = open_failure_reason("cpu/event=0x60,umask=0x01/", true, &einval, &metal);
        assert!(r.contains("rejects this encoding"), "{r}");
        let r = open_failure_reason("x", false, &io::Error::from_raw_os_error(libc::EIO), &metal);
        assert!(r.contains("failed"), "{r}");
    }

    #[test]
    fn availability_reports_each_counter() {
        let mut a = Availability::default();
        for c in Counter::HARDWARE {
            a.counters.insert(
                c,
                CounterStatus::Unavailable {
                    reason: "no PMU".into(),
                },
            );
        }
        for c in Counter::SOFTWARE {
            a.counters.insert(
                c,
                CounterStatus::Counted {
                    event: c.name().into(),
                    source: "the kernel's generic event".into(),
                },
            );
        }
        assert!(!a.hardware() && a.software());
        assert_eq!(a.counted(), Counter::SOFTWARE.to_vec());
        assert_eq!(a.reason(Counter::Cycles), Some("no PMU"));
        assert_eq!(a.reason(Counter::TaskClock), None);
        let text = a.to_string();
        assert!(
            text.contains("cycles            unavailable: no PMU"),
            "{text}"
        );
        assert!(text.contains("task_clock        counted"), "{text}");
    }
}
