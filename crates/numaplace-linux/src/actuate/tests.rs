use std::fs;
use std::process::{Child, Command};

use super::testing::{Parked, allowed, pid, task_id};
use super::*;
use crate::testutil::AnonMapping;

fn set(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap()
}

fn errno_of(o: &Outcome) -> &str {
    match o {
        Outcome::Refused { errno, .. } => errno,
        other => panic!("expected Refused, got {other:?}"),
    }
}

fn why_of(o: &Outcome) -> &str {
    match o {
        Outcome::Refused { why, .. } => why,
        other => panic!("expected Refused, got {other:?}"),
    }
}

/// A child `sleep`, killed on drop.
struct Sleeper(Child);

impl Sleeper {
    fn spawn() -> Sleeper {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        // Let it exec, so its maps are sleep's.
        std::thread::sleep(std::time::Duration::from_millis(100));
        Sleeper(child)
    }
    fn id(&self) -> TaskId {
        let p = self.0.id() as i32;
        task_id(p, p)
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn pins_a_thread_to_cpu_0_and_reads_it_back() {
    let act = HostActuator::new();
    let t = Parked::spawn();
    assert_eq!(act.affinity(t.id, pid()).unwrap(), allowed());
    assert_eq!(act.pin(t.id, pid(), &set("0")), Outcome::Done);
    assert_eq!(act.affinity(t.id, pid()).unwrap(), set("0"));
    let procfs = ProcReader::new(SysRoot::host());
    let status = procfs.status(pid(), t.id.tid).unwrap();
    assert_eq!(status.cpus_allowed, set("0"));
    // Through the trait and an Action too.
    let mut dyn_act: Box<dyn Actuator> = Box::new(act);
    let all = allowed();
    let pin = Action::Pin {
        task: t.id,
        tgid: pid(),
        cpus: all.clone(),
    };
    assert_eq!(dyn_act.apply(&pin), Outcome::Done);
    assert_eq!(dyn_act.affinity(t.id, pid()).unwrap(), all);
}

#[test]
fn pin_to_cpus_that_are_not_online_is_refused_einval() {
    let act = HostActuator::new();
    let t = Parked::spawn();
    let o = act.pin(t.id, pid(), &set("4000"));
    assert_eq!(errno_of(&o), "EINVAL");
    assert!(why_of(&o).contains("none of CPUs 4000 is online"), "{o:?}");
    let o = act.pin(t.id, pid(), &CpuSet::new());
    assert_eq!(errno_of(&o), "EINVAL");
    assert_eq!(act.affinity(t.id, pid()).unwrap(), allowed());
}

/// A cpuset cgroup (v1 here, v2 if that is what the host has) that
/// allows CPU 0 only; a child in it is pinned to CPU 1.
#[test]
fn pin_outside_the_cgroups_cpuset_is_refused_einval() {
    if allowed().len() < 2 || !allowed().contains(1) {
        eprintln!("skipped: needs CPUs 0 and 1");
        return;
    }
    let name = format!("numaplace-test-{}", pid());
    let (dir, cpus, mems, procs) = if std::path::Path::new("/sys/fs/cgroup/cpuset/tasks").exists() {
        let d = format!("/sys/fs/cgroup/cpuset/{name}");
        (
            d.clone(),
            format!("{d}/cpuset.cpus"),
            Some(format!("{d}/cpuset.mems")),
            format!("{d}/cgroup.procs"),
        )
    } else {
        let d = format!("/sys/fs/cgroup/{name}");
        (
            d.clone(),
            format!("{d}/cpuset.cpus"),
            None,
            format!("{d}/cgroup.procs"),
        )
    };
    if fs::create_dir(&dir).is_err() {
        eprintln!("skipped: cannot create {dir} (needs root and a cpuset cgroup)");
        return;
    }
    let child = Sleeper::spawn();
    let setup = (|| -> io::Result<()> {
        fs::write(&cpus, "0")?;
        if let Some(m) = &mems {
            fs::write(m, "0")?;
        }
        fs::write(&procs, child.0.id().to_string())
    })();
    let outcome = setup.as_ref().ok().map(|_| {
        let act = HostActuator::new();
        (
            act.pin(child.id(), child.id().tid, &set("1")),
            act.affinity(child.id(), child.id().tid),
        )
    });
    drop(child);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let _ = fs::remove_dir(&dir);
    let Some((o, now)) = outcome else {
        eprintln!("skipped: cannot set up {dir}: {setup:?}");
        return;
    };
    assert_eq!(errno_of(&o), "EINVAL");
    assert!(
        why_of(&o).contains("outside the CPUs its cgroup allows"),
        "{o:?}"
    );
    assert!(why_of(&o).contains(&name), "{o:?}");
    assert_eq!(now.unwrap(), set("0"));
}

#[test]
fn acting_on_an_exited_thread_is_gone() {
    let act = HostActuator::new();
    let id = Parked::spawn().exit();
    assert_eq!(act.pin(id, pid(), &set("0")), Outcome::Gone);
    assert!(matches!(
        act.affinity(id, pid()),
        Err(ActError::Gone { .. })
    ));
    // An exited child process: the pidfd path.
    let mut c = Command::new("true").spawn().unwrap();
    let p = c.id() as i32;
    c.wait().unwrap();
    let gone = TaskId {
        tid: p,
        start_time: 1,
    };
    assert_eq!(act.pin(gone, p, &set("0")), Outcome::Gone);
    assert_eq!(act.move_memory(gone, 0, None), Outcome::Gone);
    assert_eq!(act.migrate_all(gone, &set("0"), &set("0")), Outcome::Gone);
}

#[test]
fn a_reused_tid_is_gone_and_the_real_thread_is_untouched() {
    let act = HostActuator::new();
    let t = Parked::spawn();
    let before = act.affinity(t.id, pid()).unwrap();
    let impostor = TaskId {
        tid: t.id.tid,
        start_time: t.id.start_time + 1,
    };
    assert_eq!(act.pin(impostor, pid(), &set("0")), Outcome::Gone);
    assert!(matches!(
        act.affinity(impostor, pid()),
        Err(ActError::Gone { .. })
    ));
    assert_eq!(act.affinity(t.id, pid()).unwrap(), before);
    // The tid under another process is not the thread either.
    let child = Sleeper::spawn();
    assert_eq!(act.pin(t.id, child.id().tid, &set("0")), Outcome::Gone);
    assert_eq!(act.affinity(t.id, pid()).unwrap(), before);
    // A process with a wrong start time (the pidfd path).
    let wrong = TaskId {
        tid: child.id().tid,
        start_time: child.id().start_time + 7,
    };
    let child_before = act.affinity(child.id(), child.id().tid).unwrap();
    assert_eq!(act.pin(wrong, wrong.tid, &set("0")), Outcome::Gone);
    assert_eq!(act.move_memory(wrong, 0, None), Outcome::Gone);
    assert_eq!(
        act.affinity(child.id(), child.id().tid).unwrap(),
        child_before
    );
}

#[test]
fn moving_a_single_node_process_to_node_0_moves_nothing() {
    let act = HostActuator::new();
    let child = Sleeper::spawn();
    let Outcome::Pages(c) = act.move_memory(child.id(), 0, None) else {
        panic!("expected pages");
    };
    assert_eq!(c.moved, 0, "{c:?}");
    assert!(c.already > 0, "{c:?}");
    // Without numa_maps' shortcut: every batch queried (small batches).
    let act = HostActuator::new().with_batch_pages(7);
    let me = task_id(pid(), pid());
    let Outcome::Pages(c) = act.move_memory(me, 0, Some(10)) else {
        panic!("expected pages");
    };
    assert_eq!(c.moved, 0, "{c:?}");
    assert!(c.already > 0, "{c:?}");
}

#[test]
fn moving_to_a_node_that_does_not_exist_is_refused() {
    let act = HostActuator::new();
    let me = task_id(pid(), pid());
    for o in [
        act.move_memory(me, 7, None),
        act.move_window(me, 0x1000, 4, 4, 7),
        act.migrate_all(me, &set("0"), &set("7")),
    ] {
        assert_eq!(errno_of(&o), "ENODEV");
        assert!(why_of(&o).contains("node 7 has no memory"), "{o:?}");
    }
}

/// A 16-page anonymous mapping between two PROT_NONE guard pages, so
/// the kernel cannot merge it with a neighbour.
struct Mapping {
    map: AnonMapping,
    ps: usize,
}

impl Mapping {
    fn new(pages: usize, ps: usize) -> Mapping {
        let len = (pages + 2) * ps;
        let map = AnonMapping::new(len);
        map.protect_none(0, ps).protect_none(len - ps, ps);
        // The usable pages, between the guards.
        for i in 1..=pages {
            // SAFETY: page i lies inside the mapping, between the guards.
            unsafe { *(map.addr().add(i * ps) as *mut u8) = 1 };
        }
        Mapping { map, ps }
    }
    /// Address of usable page `i` (0-based), plus an offset.
    fn page(&self, i: usize, off: usize) -> u64 {
        self.map.start() + ((i + 1) * self.ps + off) as u64
    }
}

#[test]
fn window_is_clipped_to_its_mapping() {
    let ps = 4096;
    let m = (0x10000, 0x10000 + 16 * ps);
    // Page 2 of 16, 10 before (clipped at 0), 3 after: pages 0..=5.
    assert_eq!(window_range(0x12010, 10, 3, ps, m), (0x10000, 0x16000));
    // Page 14, 1 before, 10 after (clipped at the end): pages 13..=15.
    assert_eq!(window_range(0x1e000, 1, 10, ps, m), (0x1d000, 0x20000));
    // The default K = 4096 either side of an address in the middle.
    let big = (0, u64::MAX);
    let (lo, hi) = window_range(1 << 40, 4096, 4096, ps, big);
    assert_eq!((hi - lo) / ps, 8193);
    // Outside the mapping: empty; saturating at the address space ends.
    assert_eq!(window_range(0x5000, 1, 1, ps, m), (0x5000, 0x5000));
    assert_eq!(window_range(0x1000, u64::MAX, 0, ps, big), (0, 0x2000));
    let top = u64::MAX - 10;
    assert_eq!(window_range(top, 0, u64::MAX, ps, big).1, u64::MAX);
}

#[test]
fn move_window_counts_the_clipped_window_on_a_live_mapping() {
    let act = HostActuator::new();
    let ps = act.page_size() as usize;
    let m = Mapping::new(16, ps);
    let me = task_id(pid(), pid());
    let counts = |addr, before, after| match act.move_window(me, addr, before, after, 0) {
        Outcome::Pages(c) => c,
        o => panic!("{o:?}"),
    };
    let c = counts(m.page(2, 17), 10, 3);
    assert_eq!((c.moved, c.already, c.busy, c.failed), (0, 6, 0, 0));
    let c = counts(m.page(14, 0), 1, 10);
    assert_eq!(c.already, 3);
    let c = counts(m.page(7, 0), 0, 0);
    assert_eq!(c.already, 1);
    // The guard page is PROT_NONE: not a movable mapping.
    let o = act.move_window(me, m.map.start(), 1, 1, 0);
    assert!(matches!(o, Outcome::Skipped { .. }), "{o:?}");
}

#[test]
fn migrate_all_to_the_same_node_reports_nothing_left_behind() {
    let act = HostActuator::new();
    let child = Sleeper::spawn();
    let o = act.migrate_all(child.id(), &set("0"), &set("0"));
    assert_eq!(o, Outcome::Pages(PageCounts::default()));
}

#[test]
fn maps_lines_parse_and_special_mappings_are_skipped() {
    let l = parse_maps_line(
        "7f1c2a000000-7f1c2a021000 rw-p 00000000 00:00 0                          [heap]",
    )
    .unwrap();
    assert_eq!(
        (l.start, l.end, l.perms, l.path),
        (0x7f1c2a000000, 0x7f1c2a021000, "rw-p", "[heap]")
    );
    assert!(l.movable());
    let l = parse_maps_line("1000-2000 r-xp 00001000 08:01 1234   /usr/lib/my lib.so").unwrap();
    assert_eq!(l.path, "/usr/lib/my lib.so");
    assert!(l.movable());
    let anon = parse_maps_line("1000-2000 rw-p 00000000 00:00 0").unwrap();
    assert_eq!(anon.path, "");
    assert!(anon.movable());
    for special in [
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]",
        "7ffd1000-7ffd3000 r--p 00000000 00:00 0  [vvar]",
        "7ffd3000-7ffd5000 r-xp 00000000 00:00 0  [vdso]",
        "7f000000-7f001000 rw-s 00000000 00:0e 12  anon_inode:[perf_event]",
        "7f000000-7f001000 rw-s 00000000 00:05 99  /dev/dri/card0",
        "7f000000-7f400000 ---p 00000000 00:00 0",
    ] {
        assert!(!parse_maps_line(special).unwrap().movable(), "{special}");
    }
    for ok in [
        "7f000000-7f001000 rw-s 00000000 00:01 5  /dev/zero (deleted)",
        "7f000000-7f001000 rw-s 00000000 00:1a 5  /dev/shm/x",
    ] {
        assert!(parse_maps_line(ok).unwrap().movable(), "{ok}");
    }
    for bad in [
        "",
        "zz-10 rw-p",
        "2000-1000 rw-p 0 0 0",
        "1000-2000 rw 0 0 0",
    ] {
        assert_eq!(parse_maps_line(bad), None, "{bad}");
    }
}

#[test]
fn recording_actuator_applies_nothing_and_keeps_the_actions() {
    let mut rec = RecordingActuator::new();
    let task = TaskId {
        tid: 42,
        start_time: 7,
    };
    let a = Action::Pin {
        task,
        tgid: 42,
        cpus: set("0-1"),
    };
    let b = Action::MoveMemory {
        process: task,
        to_node: 1,
        max_pages: Some(10),
    };
    assert_eq!(rec.apply(&a), Outcome::NotApplied);
    assert_eq!(rec.apply(&b), Outcome::NotApplied);
    assert_eq!(rec.actions, &[a.clone(), b]);
    assert!(matches!(rec.affinity(task, 42), Err(AffinityError::Gone)));
    rec.set_affinity(task, set("3"));
    assert_eq!(rec.affinity(task, 42).unwrap(), set("3"));
    assert_eq!(rec.take_actions().len(), 2);
    assert!(rec.actions.is_empty());
    let e = ActError::Gone { task };
    assert!(
        e.to_string()
            .contains("thread 42 (started at tick 7) is gone"),
        "{e}"
    );
}

#[test]
fn cpu_masks_round_trip_through_kernel_words() {
    let s = set("0,5,63-65,200");
    let w = words_from_set(&s, words_for(256));
    assert_eq!(set_from_words(&w), s);
    assert_eq!(words_for(0), 1);
    assert_eq!(words_for(65), 2);
}

/// Measurement, not a check: status queries over 64 MiB resident.
#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn measure_query_throughput() {
    let act = HostActuator::new();
    let ps = act.page_size() as usize;
    let pages = 64 << 20 >> ps.trailing_zeros();
    let m = Mapping::new(pages, ps);
    let me = task_id(pid(), pid());
    let t = std::time::Instant::now();
    let o = act.move_window(me, m.page(pages / 2, 0), pages as u64, pages as u64, 0);
    let dt = t.elapsed();
    eprintln!(
        "move_window over {pages} resident pages: {o:?} in {dt:?} ({:.0} pages/s)",
        pages as f64 / dt.as_secs_f64()
    );
    let thread = Parked::spawn();
    let all = allowed();
    let t = std::time::Instant::now();
    for _ in 0..1000 {
        assert_eq!(act.pin(thread.id, pid(), &all), Outcome::Done);
    }
    eprintln!(
        "pin with identity checks: {:?} per call",
        t.elapsed() / 1000
    );
    let t = std::time::Instant::now();
    let o = act.move_memory(me, 0, None);
    eprintln!(
        "move_memory of this process (numa_maps shortcut): {o:?} in {:?}",
        t.elapsed()
    );
}
