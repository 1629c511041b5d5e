use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::*;
use crate::perf::events::CORE_PMUS;

/// A thread that burns CPU on request and exits on request.
struct Worker {
    tid: i32,
    cmd: mpsc::Sender<Option<Duration>>,
    done: mpsc::Receiver<i32>,
    handle: thread::JoinHandle<()>,
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Worker {
    fn spawn() -> Self {
        let (cmd, cmds) = mpsc::channel::<Option<Duration>>();
        let (tell, done) = mpsc::channel();
        let handle = thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tell.send(unsafe { libc::gettid() }).unwrap();
            while let Ok(Some(cpu)) = cmds.recv() {
                // Burn this much CPU time (not wall time: a busy CI host
                // must not make the thread count less).
                let start = thread_cpu_ns();
                let mut x = 0u64;
                while thread_cpu_ns() - start < cpu.as_nanos() as u64 {
                    for i in 0..10_000u64 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
                    }
                }
                std::hint::black_box(x);
                tell.send(0).unwrap();
            }
        });
        let tid = done.recv().unwrap();
        Worker {
            tid,
            cmd,
            done,
            handle,
        }
    }

    fn burn(&self, cpu: Duration) {
        self.cmd.send(Some(cpu)).unwrap();
        self.done.recv_timeout(Duration::from_secs(30)).unwrap();
    }

    /// Ends the thread and waits until the kernel has reaped it.
    fn exit(self) -> i32 {
        self.cmd.send(None).unwrap();
        self.handle.join().unwrap();
        let dir = format!("/proc/self/task/{}", self.tid);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&dir).exists() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(2));
        }
        self.tid
    }
}

fn with_software() -> PerfConfig {
    PerfConfig {
        always_software: true,
        ..PerfConfig::default()
    }
}

#[test]
fn counts_a_busy_thread_and_drops_one_that_exits() {
    let mut m = PerfMonitor::new(&SysRoot::host(), &with_software());
    assert!(
        m.availability().is_counted(Counter::TaskClock),
        "{}",
        m.availability()
    );
    let busy = Worker::spawn();
    let leaving = Worker::spawn();
    let r = m.sync(&[busy.tid, leaving.tid]);
    assert_eq!(r.opened, 2, "{r:?} {:?}", m.uncounted());
    assert_eq!(m.open_fds(), 2 * m.availability().fds_per_thread);

    busy.burn(Duration::from_millis(100));
    let d = m.read_deltas();
    let task_clock = d[&busy.tid].get(Counter::TaskClock).unwrap();
    assert!(task_clock > 50_000_000, "task clock {task_clock} ns: {d:?}");
    assert!(d[&busy.tid].enabled_ns > 50_000_000, "{d:?}");

    // The next interval is a fresh delta, not the cumulative count.
    busy.burn(Duration::from_millis(20));
    let d = m.read_deltas();
    let second = d[&busy.tid].get(Counter::TaskClock).unwrap();
    assert!(
        (10_000_000..task_clock).contains(&second),
        "{second} after {task_clock}"
    );

    let gone = leaving.exit();
    let d = m.read_deltas();
    assert!(d.contains_key(&busy.tid), "{d:?}");
    assert!(!d.contains_key(&gone), "an exited thread is dropped: {d:?}");
    assert_eq!(m.tracked().collect::<Vec<_>>(), vec![busy.tid]);
    // A stale tid list does not reopen it, and does not fail.
    let r = m.sync(&[busy.tid, gone]);
    assert_eq!(r, SyncReport::default());
    assert_eq!(m.uncounted().get(&gone).map(String::as_str), Some("exited"));
    // Leaving the list closes the counters and forgets the thread.
    let busy_tid = busy.exit();
    let r = m.sync(&[]);
    assert_eq!(r.closed, 1);
    assert!(m.uncounted().is_empty() && m.open_fds() == 0);
    assert!(m.read_deltas().is_empty());
    let _ = busy_tid;
}

#[test]
fn availability_on_this_host_is_decided_and_explained() {
    let m = PerfMonitor::new(&SysRoot::host(), &PerfConfig::default());
    let a = m.availability();
    eprintln!("{a}");
    assert_eq!(a.counters.len(), 10, "every counter has a status: {a}");
    let has_core_pmu = CORE_PMUS
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists());
    if has_core_pmu {
        for c in Counter::HARDWARE {
            assert!(a.is_counted(c) || !a.reason(c).unwrap().is_empty(), "{a}");
        }
    } else {
        // A VM without a virtual PMU, like the machine this was written on.
        assert!(!a.hardware(), "{a}");
        for c in Counter::HARDWARE.into_iter().chain(Counter::UNCORE) {
            let why = a.reason(c).unwrap();
            assert!(!a.is_counted(c), "{a}");
            assert!(why.contains("PMU"), "{c:?}: {why}");
        }
        let why = a.reason(Counter::Instructions).unwrap();
        assert!(
            why.starts_with("no hardware PMU: perf_event_open(instructions) says E"),
            "{why}"
        );
        assert!(a.software(), "{a}");
        for c in Counter::SOFTWARE {
            assert!(a.is_counted(c), "the software fallback group: {a}");
        }
        assert_eq!(a.fds_per_thread, 4);
    }
    assert!(a.max_threads > 0 && a.fd_limit.soft >= a.fd_limit.raised_from.unwrap_or(0));
}

#[test]
fn threads_beyond_the_fd_budget_are_reported_and_retried_when_fds_free() {
    let probe = PerfMonitor::new(&SysRoot::host(), &with_software());
    let per_thread = probe.availability().fds_per_thread;
    let config = PerfConfig {
        max_fds: Some(per_thread),
        ..with_software()
    };
    let mut m = PerfMonitor::new(&SysRoot::host(), &config);
    assert_eq!(m.availability().max_threads, 1);
    let (a, b) = (Worker::spawn(), Worker::spawn());
    let r = m.sync(&[a.tid, b.tid]);
    assert_eq!((r.opened, r.starved), (1, 1), "{r:?}");
    let starved = if m.tracked().next() == Some(a.tid) {
        b.tid
    } else {
        a.tid
    };
    let why = &m.uncounted()[&starved];
    assert!(why.contains("no file descriptor left"), "{why}");
    // Not retried while nothing was freed.
    let r = m.sync(&[a.tid, b.tid]);
    assert_eq!((r.opened, r.starved), (0, 1));
    // Dropping the counted one frees fds: the starved one gets them.
    let r = m.sync(&[starved]);
    assert_eq!((r.closed, r.opened, r.starved), (1, 1, 0), "{r:?}");
    assert!(m.uncounted().is_empty());
    a.exit();
    b.exit();
}

#[test]
fn threads_that_cannot_be_opened_are_not_retried() {
    let mut m = PerfMonitor::new(&SysRoot::host(), &PerfConfig::default());
    let absent = 0x7fff_fff0;
    let r = m.sync(&[absent, 0, -1]);
    assert_eq!((r.gone, r.refused, r.opened), (1, 2, 0), "{r:?}");
    assert_eq!(m.sync(&[absent, 0, -1]), SyncReport::default());
    assert!(m.uncounted()[&0].contains("not a thread id"));
    m.sync(&[]);
    assert!(m.uncounted().is_empty());
}

#[test]
fn budget_and_host_facts_are_pure() {
    assert_eq!(thread_budget(1024, 256, 4, None), 192);
    assert_eq!(thread_budget(1024, 256, 6, Some(60)), 10);
    assert_eq!(thread_budget(100, 256, 4, None), 0);
    assert_eq!(thread_budget(u64::MAX, 256, 0, None), 0);
    assert!(cpuinfo_has_hypervisor(
        "processor\t: 0\nflags\t\t: fpu vme hypervisor lahf_lm\n"
    ));
    assert!(!cpuinfo_has_hypervisor(
        "flags\t\t: fpu vme\nmodel name: hypervisor-ish\n"
    ));

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("sys/devices/system/cpu")).unwrap();
    std::fs::create_dir_all(p.join("sys/bus/event_source/devices/software")).unwrap();
    std::fs::create_dir_all(p.join("proc/sys/kernel")).unwrap();
    std::fs::write(p.join("proc/sys/kernel/perf_event_paranoid"), "3\n").unwrap();
    std::fs::write(p.join("proc/cpuinfo"), "flags\t: fpu hypervisor\n").unwrap();
    let facts = host_facts(&SysRoot::new(p).unwrap());
    assert_eq!(
        facts,
        HostFacts {
            paranoid: Some(3),
            pmus: vec!["software".into()],
            hypervisor: true
        }
    );
}

#[test]
fn libpfm4_events_are_tried_after_the_generic_ones_and_say_where_they_came_from() {
    // A root whose sysfs has a core PMU describing no model-specific event,
    // and libpfm4 answering as on a Skylake-SP. The events are opened on
    // the live kernel: counted (with libpfm4 as their source) or refused
    // (with libpfm4's event named in the reason), never "give the encoding".
    let dir = tempfile::tempdir().unwrap();
    let cpu = dir.path().join("sys/bus/event_source/devices/cpu");
    std::fs::create_dir_all(cpu.join("format")).unwrap();
    std::fs::create_dir_all(cpu.join("events")).unwrap();
    std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
    std::fs::write(cpu.join("type"), "4\n").unwrap();
    for (f, bits) in [
        ("event", "config:0-7"),
        ("umask", "config:8-15"),
        ("cmask", "config:24-31"),
    ] {
        std::fs::write(cpu.join("format").join(f), bits).unwrap();
    }
    let root = SysRoot::new(dir.path()).unwrap();
    // Values: Intel's SKX/events/skylakex_core.json (tests/libpfm_cpus.rs).
    let skx = crate::perf::libpfm::FakeEncoder {
        pmu: "skx",
        events: vec![
            ("skx::INSTRUCTION_RETIRED", 0xc0, 0),
            (
                "skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1",
                0x0100_0160,
                0,
            ),
            ("skx::OFFCORE_REQUESTS:DEMAND_DATA_RD", 0x01b0, 0),
        ],
    };
    let m = PerfMonitor::with_encoder(&root, &PerfConfig::default(), &skx);
    let a = m.availability();
    match &a.counters[&Counter::UncoreOccupancy] {
        CounterStatus::Counted { source, .. } => assert_eq!(
            source,
            "libpfm4 skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1 = config 0x1000160"
        ),
        CounterStatus::Unavailable { reason } => assert!(
            reason
                .contains("perf_event_open(skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1)"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    match &a.counters[&Counter::Instructions] {
        CounterStatus::Counted { source, .. } => assert!(
            source == "the kernel's generic event PERF_COUNT_HW_INSTRUCTIONS"
                || source == "libpfm4 skx::INSTRUCTION_RETIRED = config 0xc0",
            "{source}"
        ),
        // Both were tried, the generic event first.
        CounterStatus::Unavailable { reason } => {
            let generic = reason.find("perf_event_open(instructions)");
            let pfm = reason.find("perf_event_open(skx::INSTRUCTION_RETIRED)");
            assert!(generic.is_some() && generic < pfm, "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // An event libpfm4 cannot encode: its reason joins the generic one's.
    eprintln!("{a}");
    if let Some(why) = a.reason(Counter::Cycles) {
        assert!(
            why.contains("; and libpfm4 cannot encode skx::UNHALTED_CORE_CYCLES"),
            "{why}"
        );
    }
}

#[test]
fn a_thread_whose_run_time_stood_still_is_not_read_and_its_counts_come_at_the_next_read() {
    let mut m = PerfMonitor::new(&SysRoot::host(), &with_software());
    assert!(m.availability().is_counted(Counter::TaskClock));
    let w = Worker::spawn();
    assert_eq!(m.sync(&[w.tid]).opened, 1);
    let clock = |d: &BTreeMap<i32, CounterDeltas>| d[&w.tid].get(Counter::TaskClock).unwrap_or(0);

    w.burn(Duration::from_millis(60));
    let first = clock(&m.read_deltas_of(&BTreeMap::from([(w.tid, Some(1_000))])));
    assert!(first > 30_000_000, "{first}");
    // The round says it has not run since (a run time as at the last
    // read): not read, a zero delta, though it did run after the round
    // listed it.
    w.burn(Duration::from_millis(60));
    let d = m.read_deltas_of(&BTreeMap::from([(w.tid, Some(1_000))]));
    assert_eq!(clock(&d), 0, "{d:?}");
    assert_eq!(d[&w.tid].running_ns, 0, "{d:?}");
    // Its clock moved: read, and the counts of the skipped round are in it.
    let d = m.read_deltas_of(&BTreeMap::from([(w.tid, Some(2_000))]));
    assert!(clock(&d) > 30_000_000, "{d:?}");
    // No run time known: always read.
    w.burn(Duration::from_millis(60));
    let d = m.read_deltas_of(&BTreeMap::from([(w.tid, None)]));
    assert!(clock(&d) > 30_000_000, "{d:?}");
    // Not among the round's threads: it exited (no kill per thread).
    assert!(m.read_deltas_of(&BTreeMap::new()).is_empty());
    assert_eq!(
        m.uncounted().get(&w.tid).map(String::as_str),
        Some("exited")
    );
    w.exit();
}
