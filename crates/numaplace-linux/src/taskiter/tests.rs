use super::*;

#[test]
fn states_as_proc_shows_them() {
    assert_eq!(state_letter(0, 0), 'R');
    assert_eq!(state_letter(0x1, 0), 'S');
    assert_eq!(state_letter(0x2, 0), 'D');
    assert_eq!(state_letter(0x4, 0), 'T');
    assert_eq!(state_letter(0x8, 0), 't');
    assert_eq!(state_letter(0x80, 0x10), 'X');
    assert_eq!(state_letter(0x80, 0x20), 'Z');
    assert_eq!(state_letter(0x40, 0), 'P');
    // TASK_IDLE, also with TASK_FREEZABLE (0x2000) beside it.
    assert_eq!(state_letter(0x402, 0), 'I');
    assert_eq!(state_letter(0x2402, 0), 'I');
    // Frozen or waiting on an RT lock: reported as D.
    assert_eq!(state_letter(0x8000, 0), 'D');
    assert_eq!(state_letter(0x1000, 0), 'D');
    // TASK_WAKEKILL | TASK_UNINTERRUPTIBLE (TASK_KILLABLE) is D.
    assert_eq!(state_letter(0x102, 0), 'D');
    assert_eq!(state_letter(0x101, 0), 'S');
}

#[test]
fn cputime_scales_the_split_to_the_run_time_and_never_goes_back() {
    // No ticks sampled: all user, as the kernel's rule.
    assert_eq!(cputime_adjusted(0, 0, 100, (0, 0)), (100, 0));
    // A 3:1 split of 400 ns.
    assert_eq!(cputime_adjusted(30, 10, 400, (0, 0)), (300, 100));
    assert_eq!(cputime_adjusted(0, 10, 400, (0, 0)), (0, 400));
    // Already reported at least as much: the report stands.
    assert_eq!(cputime_adjusted(30, 10, 400, (350, 60)), (350, 60));
    // Never below the last report on either side.
    assert_eq!(cputime_adjusted(30, 10, 500, (100, 200)), (300, 200));
    assert_eq!(cputime_adjusted(10, 30, 500, (400, 0)), (400, 100));
}

/// The iterator where this kernel and this process allow it.
fn iterator() -> Option<TaskIterator> {
    let hz = crate::sysconf::clock_ticks();
    match TaskIterator::open(hz) {
        Ok(it) => Some(it),
        Err(e) => {
            eprintln!("skipped: the task iterator cannot be used here: {e}");
            None
        }
    }
}

/// Every thread of this process, as the iterator and as `/proc` show it:
/// the same identity, name and last CPU, CPU time within a tick of what
/// `/proc` showed around it.
#[test]
fn records_agree_with_proc_for_this_process() {
    let Some(mut it) = iterator() else { return };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("np-iter-{i}"))
                .spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                })
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let me = std::process::id() as i32;
    let proc = crate::procfs::ProcReader::new(crate::SysRoot::host());
    let before: Vec<_> = proc
        .tids(me)
        .unwrap()
        .into_iter()
        .map(|t| (t, proc.stat(me, t).unwrap()))
        .collect();
    let mut records = Vec::new();
    it.read(&mut records).unwrap();
    let after: Vec<_> = before
        .iter()
        .map(|(t, _)| proc.stat(me, *t).unwrap())
        .collect();
    // Threads of the test harness may exit meanwhile: those are skipped.
    let affinities: std::collections::HashMap<i32, _> = before
        .iter()
        .map(|(t, _)| (*t, crate::actuate::thread_affinity(*t, 8192)))
        .collect();
    assert!(
        affinities.values().filter(|a| a.is_ok()).count() >= 3,
        "the spinning threads' affinities were read"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(
        records.len() > before.len(),
        "the host's tasks, not only ours"
    );
    let b_status = proc.status(me, me).unwrap();
    for ((tid, b), a) in before.iter().zip(&after) {
        let r = records
            .iter()
            .find(|r| r.tid == *tid)
            .unwrap_or_else(|| panic!("thread {tid} not iterated"));
        assert_eq!(r.tgid, me);
        assert_eq!(
            r.start_time, b.start_time,
            "thread {tid}: start time as /proc's"
        );
        assert_eq!(r.comm, b.comm, "thread {tid}");
        let (lo, hi) = (b.utime + b.stime, a.utime + a.stime);
        assert!(
            (lo.saturating_sub(1)..=hi + 1).contains(&(r.utime + r.stime)),
            "thread {tid}: {} ticks, /proc said {lo} then {hi}",
            r.utime + r.stime
        );
        assert!(
            r.utime >= b.utime && r.utime <= a.utime + 1,
            "thread {tid} utime"
        );
        assert!(r.runtime_ns > 0 || r.utime + r.stime == 0);
        if r.comm.starts_with("np-iter-") {
            assert!(r.utime > 0, "a spinning thread has user time");
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        assert!(r.cpu < cpus.max(1024));
        assert_eq!(r.flags & 0x0020_0000, 0, "not a kernel thread");
        assert_eq!(
            r.allowed_mems.as_ref(),
            Some(&b_status.mems_allowed),
            "thread {tid}: Mems_allowed_list"
        );
        let cgroup_dir = proc
            .cgroup(me)
            .unwrap()
            .v2_path
            .map(|p| format!("/sys/fs/cgroup{p}"));
        if let (Some(id), Some(dir)) = (r.cgroup_id, cgroup_dir) {
            use std::os::unix::fs::MetadataExt;
            assert_eq!(
                id,
                std::fs::metadata(&dir).unwrap().ino(),
                "thread {tid}: cgroup {dir}"
            );
        }
        if let Some(Ok(affinity)) = affinities.get(tid) {
            assert_eq!(
                r.allowed_cpus.as_ref(),
                Some(affinity),
                "thread {tid}: as sched_getaffinity"
            );
        }
    }
    let kthreadd = records.iter().find(|r| r.tid == 2).expect("kthreadd");
    assert_ne!(
        kthreadd.flags & 0x0020_0000,
        0,
        "kthreadd is a kernel thread"
    );
}

/// A second pass sees a thread started between the two, and not one that
/// ended.
#[test]
fn each_read_is_a_new_pass() {
    let Some(mut it) = iterator() else { return };
    let mut first = Vec::new();
    it.read(&mut first).unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        rx.recv().unwrap();
        tid
    });
    let mut second = Vec::new();
    std::thread::sleep(std::time::Duration::from_millis(20));
    it.read(&mut second).unwrap();
    tx.send(()).unwrap();
    let tid = t.join().unwrap();
    assert!(
        !first
            .iter()
            .any(|r| r.tid == tid && r.tgid == std::process::id() as i32)
    );
    assert!(second.iter().any(|r| r.tid == tid));
    let mut third = Vec::new();
    it.read(&mut third).unwrap();
    assert!(!third.iter().any(|r| r.tid == tid));
}

/// The sampled split shifting from one pass to the next would take system
/// time back without the last report as the floor; with it (what the
/// iterator keeps per task, as the kernel keeps `prev_cputime` for /proc),
/// neither goes back.
#[test]
fn the_last_report_keeps_cpu_times_from_going_back() {
    let first = cputime_adjusted(10, 10, 200, (0, 0));
    assert_eq!(first, (100, 100));
    // Sampled user time grew faster: without a report, system time drops.
    assert_eq!(cputime_adjusted(30, 10, 220, (0, 0)), (165, 55));
    assert_eq!(cputime_adjusted(30, 10, 220, first), (120, 100));
}

/// A thread's user and system time never go back from pass to pass, live.
#[test]
fn cpu_times_never_go_back() {
    let Some(mut it) = iterator() else { return };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    // A thread that switches between user work and system calls.
    let worker = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        let mut x = 0u64;
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            for _ in 0..50_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let _ = std::fs::metadata("/proc/self/stat");
        }
    });
    let tid = rx.recv().unwrap();
    let mut last: Option<(u64, u64)> = None;
    let mut records = Vec::new();
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(15));
        it.read(&mut records).unwrap();
        let r = records.iter().find(|r| r.tid == tid).expect("the worker");
        if let Some((u, s)) = last {
            assert!(
                r.utime >= u && r.stime >= s,
                "({u}, {s}) -> ({}, {})",
                r.utime,
                r.stime
            );
        }
        last = Some((r.utime, r.stime));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    worker.join().unwrap();
    assert!(last.is_some_and(|(u, s)| u + s > 0), "the worker ran");
}
