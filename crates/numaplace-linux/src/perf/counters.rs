//! One thread's counters: a single perf_event group (a leader and its
//! members), read in one `read(2)` with `TOTAL_TIME_ENABLED |
//! TOTAL_TIME_RUNNING | GROUP | ID`, so all counts of a reading share one
//! enabled / running time and can be scaled together.
//!
//! File-descriptor cost: one fd per event in the group (the leader is a
//! real event, not a dummy): 4 for the generic hardware events, +2 with the
//! uncore pair, 4 for the software fallback group.

use std::io;

use numaplace_model::Counter;
use perf_event::events::{Hardware, Raw, Software};
use perf_event::{Builder, ReadFormat};

use super::raw_event::RawEvent;
use super::scaling::GroupReading;
use crate::sysroot::{ReadError, SysRoot};

/// Where a counter's event comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSource {
    /// The kernel's generic event for the counter (`PERF_COUNT_HW_*`,
    /// `PERF_COUNT_SW_*`).
    Generic,
    /// An event encoded from sysfs or from the user.
    Raw(RawEvent),
}

/// One event of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// The counter it counts.
    pub counter: Counter,
    /// Where its encoding came from.
    pub source: EventSource,
}

impl EventSpec {
    /// The generic event for `counter`; `None` for the uncore pair, which
    /// has no generic event.
    pub fn generic(counter: Counter) -> Option<Self> {
        (!Counter::UNCORE.contains(&counter)).then_some(EventSpec {
            counter,
            source: EventSource::Generic,
        })
    }

    /// Counter `counter` by raw encoding `event`.
    pub fn raw(counter: Counter, event: RawEvent) -> Self {
        EventSpec {
            counter,
            source: EventSource::Raw(event),
        }
    }

    /// Whether this needs a hardware PMU (everything but the software four).
    pub fn is_hardware(&self) -> bool {
        !Counter::SOFTWARE.contains(&self.counter)
    }

    /// perf's name for the event, for messages.
    pub fn describe(&self) -> String {
        match (&self.source, self.counter) {
            (EventSource::Raw(ev), _) => ev.what.clone(),
            (EventSource::Generic, Counter::LlcReferences) => "cache-references".into(),
            (EventSource::Generic, Counter::LlcMisses) => "cache-misses".into(),
            (EventSource::Generic, c) => c.name().replace('_', "-"),
        }
    }

    /// Where the event's encoding came from, in one line: the kernel's
    /// generic event, or [`RawEvent::source`] (the user's encoding, sysfs,
    /// libpfm4).
    pub fn source(&self) -> String {
        match &self.source {
            EventSource::Raw(ev) => ev.source(),
            EventSource::Generic => match generic_name(self.counter) {
                Some(name) => format!("the kernel's generic event {name}"),
                None => "no generic event".into(),
            },
        }
    }

    fn builder(&self) -> Builder<'static> {
        let mut b = match (&self.source, self.counter) {
            (EventSource::Raw(ev), _) => {
                let mut b =
                    Builder::new(Raw::new(ev.config).config1(ev.config1).config2(ev.config2));
                b.attrs_mut().type_ = ev.pmu_type;
                b
            }
            (EventSource::Generic, c) => generic_builder(c),
        };
        b.read_format(
            ReadFormat::TOTAL_TIME_ENABLED
                | ReadFormat::TOTAL_TIME_RUNNING
                | ReadFormat::GROUP
                | ReadFormat::ID,
        );
        b
    }
}

/// The `PERF_COUNT_*` constant of a counter's generic event.
fn generic_name(c: Counter) -> Option<&'static str> {
    Some(match c {
        Counter::Instructions => "PERF_COUNT_HW_INSTRUCTIONS",
        Counter::Cycles => "PERF_COUNT_HW_CPU_CYCLES",
        Counter::LlcReferences => "PERF_COUNT_HW_CACHE_REFERENCES",
        Counter::LlcMisses => "PERF_COUNT_HW_CACHE_MISSES",
        Counter::TaskClock => "PERF_COUNT_SW_TASK_CLOCK",
        Counter::ContextSwitches => "PERF_COUNT_SW_CONTEXT_SWITCHES",
        Counter::CpuMigrations => "PERF_COUNT_SW_CPU_MIGRATIONS",
        Counter::PageFaults => "PERF_COUNT_SW_PAGE_FAULTS",
        Counter::UncoreOccupancy | Counter::UncoreRequests => return None,
    })
}

fn generic_builder(c: Counter) -> Builder<'static> {
    match c {
        Counter::Instructions => Builder::new(Hardware::INSTRUCTIONS),
        Counter::Cycles => Builder::new(Hardware::CPU_CYCLES),
        Counter::LlcReferences => Builder::new(Hardware::CACHE_REFERENCES),
        Counter::LlcMisses => Builder::new(Hardware::CACHE_MISSES),
        Counter::TaskClock => Builder::new(Software::TASK_CLOCK),
        Counter::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
        Counter::CpuMigrations => Builder::new(Software::CPU_MIGRATIONS),
        Counter::PageFaults => Builder::new(Software::PAGE_FAULTS),
        // No generic event: never built (EventSpec::generic refuses them).
        Counter::UncoreOccupancy | Counter::UncoreRequests => Builder::new(Software::DUMMY),
    }
}

/// How groups are opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    /// Count user space only (`exclude_kernel`): the hardware events.
    pub exclude_kernel: bool,
    /// Software events count in the kernel too, whatever `exclude_kernel`
    /// says: a context switch, a migration or a page fault happens in the
    /// kernel, so counted in user space only each reads 0 for ever (a
    /// PMU-less host's only per-thread signals). Set where the kernel lets
    /// this process count kernel-side (root or CAP_PERFMON, or
    /// `perf_event_paranoid` below 2).
    pub software_kernel: bool,
}

/// Parses `/proc/sys/kernel/perf_event_paranoid`.
pub fn parse_paranoid(text: &str) -> Option<i32> {
    text.trim().parse().ok()
}

/// Reads `perf_event_paranoid` under the root; `None` if the file is absent
/// (a kernel without perf events).
pub fn read_paranoid(root: &SysRoot) -> Result<Option<i32>, ReadError> {
    Ok(root
        .read_optional("proc/sys/kernel/perf_event_paranoid")?
        .as_deref()
        .and_then(parse_paranoid))
}

/// At `perf_event_paranoid >= 2` an unprivileged user may count user space
/// only, so numaplace always excludes the kernel there (also as root: the
/// counts then mean the same on every host). Unknown: exclude.
pub fn exclude_kernel_for(paranoid: Option<i32>) -> bool {
    paranoid.is_none_or(|p| p >= 2)
}

/// Opening one event of a group failed.
#[derive(Debug, thiserror::Error)]
#[error("perf_event_open({event}) for thread {tid}: {source}")]
pub struct OpenError {
    /// The thread.
    pub tid: i32,
    /// The counter.
    pub counter: Counter,
    /// The event, as perf spells it.
    pub event: String,
    /// The error.
    pub source: io::Error,
}

/// The counters of one thread (`tid`; 0 means the calling thread).
#[derive(Debug)]
pub struct ThreadCounters {
    tid: i32,
    leader: perf_event::Counter,
    /// Every event including the leader, in group order.
    members: Vec<(Counter, Option<perf_event::Counter>)>,
}

impl ThreadCounters {
    /// Opens `specs` as one group on `tid` (the first is the leader) and
    /// enables it; all or nothing.
    pub fn open(tid: i32, specs: &[EventSpec], opts: OpenOptions) -> Result<Self, OpenError> {
        let err = |spec: &EventSpec, source| OpenError {
            tid,
            counter: spec.counter,
            event: spec.describe(),
            source,
        };
        let Some((first, rest)) = specs.split_first() else {
            let source = io::Error::new(io::ErrorKind::InvalidInput, "an empty group");
            return Err(OpenError {
                tid,
                counter: Counter::TaskClock,
                event: "nothing".into(),
                source,
            });
        };
        let build = |spec: &EventSpec| {
            let mut b = spec.builder();
            if tid != 0 {
                b.observe_pid(tid);
            }
            let kernel_side = opts.software_kernel && !spec.is_hardware();
            b.exclude_kernel(opts.exclude_kernel && !kernel_side);
            b
        };
        let mut leader = build(first).build().map_err(|e| err(first, e))?;
        let mut members = vec![(first.counter, None)];
        for spec in rest {
            let m = build(spec)
                .build_with_group(&mut leader)
                .map_err(|e| err(spec, e))?;
            members.push((spec.counter, Some(m)));
        }
        leader.enable_group().map_err(|e| err(first, e))?;
        Ok(ThreadCounters {
            tid,
            leader,
            members,
        })
    }

    /// The thread counted.
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// File descriptors held: one per event.
    pub fn fds(&self) -> usize {
        self.members.len()
    }

    /// The counters open on it.
    pub fn counters(&self) -> impl Iterator<Item = Counter> + '_ {
        self.members.iter().map(|(c, _)| *c)
    }

    /// The group's raw cumulative counts and times, in one `read(2)`
    /// ([`GroupReading::scaled`] gives them scaled for multiplexing).
    pub fn read(&mut self) -> io::Result<GroupReading> {
        let data = self.leader.read_group()?;
        let ns = |d: Option<std::time::Duration>| {
            d.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        };
        let mut reading = GroupReading {
            enabled_ns: ns(data.time_enabled()),
            running_ns: ns(data.time_running()),
            ..GroupReading::default()
        };
        for (counter, member) in &self.members {
            let ctr = member.as_ref().unwrap_or(&self.leader);
            if let Some(entry) = data.get(ctr) {
                reading.values.insert(*counter, entry.value());
            }
        }
        Ok(reading)
    }

    /// Whether the thread still exists: `kill(tid, 0)` says `ESRCH` once
    /// it has exited and been reaped. (`poll(2)` on the perf fd cannot
    /// tell: without a ring buffer it reports `POLLHUP` from the start.)
    pub fn is_alive(&self) -> bool {
        thread_alive(self.tid)
    }
}

/// Whether a thread id names a live task (`kill(tid, 0)`; `EPERM` means it
/// exists). Signal 0 sends nothing.
pub fn thread_alive(tid: i32) -> bool {
    if tid == 0 {
        return true;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(tid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paranoid_decides_exclude_kernel() {
        assert_eq!(parse_paranoid("2\n"), Some(2));
        assert_eq!(parse_paranoid("-1"), Some(-1));
        assert_eq!(parse_paranoid("x"), None);
        assert!(exclude_kernel_for(Some(2)));
        assert!(exclude_kernel_for(Some(3)));
        assert!(exclude_kernel_for(None));
        assert!(!exclude_kernel_for(Some(1)));
        assert!(!exclude_kernel_for(Some(-1)));

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        let root = SysRoot::new(dir.path()).unwrap();
        assert_eq!(read_paranoid(&root).unwrap(), None);
        std::fs::create_dir_all(dir.path().join("proc/sys/kernel")).unwrap();
        std::fs::write(
            dir.path().join("proc/sys/kernel/perf_event_paranoid"),
            "1\n",
        )
        .unwrap();
        assert_eq!(read_paranoid(&root).unwrap(), Some(1));
    }

    #[test]
    fn describes_events_in_perfs_words() {
        let d = |c| EventSpec::generic(c).unwrap().describe();
        assert_eq!(d(Counter::Instructions), "instructions");
        assert_eq!(d(Counter::LlcMisses), "cache-misses");
        assert_eq!(d(Counter::TaskClock), "task-clock");
        assert_eq!(
            EventSpec::generic(Counter::LlcMisses).unwrap().source(),
            "the kernel's generic event PERF_COUNT_HW_CACHE_MISSES"
        );
        assert!(EventSpec::generic(Counter::UncoreRequests).is_none());
        assert!(
            !EventSpec::generic(Counter::PageFaults)
                .unwrap()
                .is_hardware()
        );
    }

    /// Counted in user space only, a thread that sleeps and wakes shows no
    /// context switch; counted kernel-side (as the daemon does where it
    /// may) it shows them. Skipped where this process may not count the
    /// kernel (not root, `perf_event_paranoid` 2 or more).
    #[test]
    fn software_events_counted_kernel_side_see_context_switches() {
        let specs: Vec<_> = [Counter::ContextSwitches]
            .iter()
            .filter_map(|&c| EventSpec::generic(c))
            .collect();
        let count = |software_kernel| {
            let mut g = ThreadCounters::open(
                0,
                &specs,
                OpenOptions {
                    exclude_kernel: true,
                    software_kernel,
                },
            )
            .ok()?;
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Some(g.read().unwrap().values[&Counter::ContextSwitches])
        };
        assert_eq!(count(false), Some(0), "user space sees no switch");
        match count(true) {
            // Each sleep blocks, so most are a switch; a loaded machine
            // may let a 1 ms sleep end without one (19 of 20 seen).
            Some(n) => assert!(n >= 10, "{n} context switches over 20 sleeps"),
            None => eprintln!("skipped: this process may not count the kernel"),
        }
    }

    #[test]
    fn software_group_on_this_thread_counts() {
        let specs: Vec<_> = Counter::SOFTWARE
            .iter()
            .filter_map(|&c| EventSpec::generic(c))
            .collect();
        let mut g = ThreadCounters::open(
            0,
            &specs,
            OpenOptions {
                exclude_kernel: true,
                software_kernel: false,
            },
        )
        .unwrap();
        assert_eq!(g.fds(), 4);
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let r = g.read().unwrap();
        assert_eq!(r.values.len(), 4, "{r:?}");
        assert!(r.values[&Counter::TaskClock] > 0, "{r:?}");
        assert!(r.enabled_ns > 0 && r.running_ns > 0, "{r:?}");
        assert!(g.is_alive() && thread_alive(std::process::id() as i32));
        assert!(!thread_alive(0x7fff_fff0));
        assert!(
            ThreadCounters::open(
                0,
                &[],
                OpenOptions {
                    exclude_kernel: true,
                    software_kernel: false,
                }
            )
            .is_err()
        );
    }
}
