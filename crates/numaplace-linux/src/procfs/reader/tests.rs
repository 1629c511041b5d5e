//! Reader tests: fake `proc/` trees in a TempDir, and the live host.

use std::fs;
use std::sync::mpsc;

use numaplace_model::CpuSet;
use tempfile::TempDir;

use super::*;

/// A fake root with `sys/devices/system/cpu` (so `SysRoot::new` takes it)
/// and whatever `proc/` files a test writes.
struct FakeProc {
    dir: TempDir,
}

impl FakeProc {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        fs::create_dir_all(dir.path().join("proc")).unwrap();
        FakeProc { dir }
    }

    /// Writes `proc/<rel>`, creating directories.
    fn file(&self, rel: &str, content: impl AsRef<[u8]>) -> &Self {
        let path = self.dir.path().join("proc").join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
        self
    }

    /// A thread with consistent `stat`, `status` and `comm`, running on CPU
    /// `tid % 4`, allowed CPUs 0-3 and node 0.
    fn task(&self, pid: i32, tid: i32, comm: &str) -> &Self {
        let stat = format!(
            "{tid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 10 0 0 0 {u} 3 0 0 20 0 2 0 {start} \
             1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 {cpu} 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            u = tid * 10,
            start = 5000 + tid,
            cpu = tid % 4,
        );
        let status = format!(
            "Name:\t{name}\nTgid:\t{pid}\nPid:\t{tid}\nPPid:\t1\nVmRSS:\t    2048 kB\n\
             Cpus_allowed_list:\t0-3\nMems_allowed_list:\t0\n\
             voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t1\n",
            name = comm.replace('\n', "\\n"),
        );
        self.file(&format!("{pid}/task/{tid}/stat"), stat)
            .file(&format!("{pid}/task/{tid}/status"), status)
            .file(&format!("{pid}/task/{tid}/comm"), format!("{comm}\n"))
    }

    /// A process: its threads, cmdline, cgroup and numa_maps.
    fn process(&self, pid: i32, tids: &[i32], comm: &str) -> &Self {
        for &tid in tids {
            self.task(pid, tid, comm);
        }
        self.file(&format!("{pid}/cmdline"), format!("{comm}\0--flag\0"))
            .file(&format!("{pid}/cgroup"), "0::/system.slice/app.service\n")
            .file(
                &format!("{pid}/numa_maps"),
                "00400000 default file=/usr/bin/app mapped=4 N0=4 kernelpagesize_kB=4\n\
                 7f0000000000 bind:1 anon=8 dirty=8 N1=8 kernelpagesize_kB=4\n",
            )
    }

    fn reader(&self) -> ProcReader {
        ProcReader::new(SysRoot::new(self.dir.path()).unwrap())
    }

    fn remove(&self, rel: &str) {
        let path = self.dir.path().join("proc").join(rel);
        if path.is_dir() {
            fs::remove_dir_all(path).unwrap();
        } else {
            fs::remove_file(path).unwrap();
        }
    }
}

#[test]
fn lists_processes_and_threads() {
    let fake = FakeProc::new();
    fake.process(300, &[300, 301, 310], "app")
        .process(12, &[12], "db")
        .file("self/stat", "x")
        .file("sys/kernel/pid_max", "4194304\n")
        .file("0/stat", "x")
        .file("12a/stat", "x")
        .file("99999999999/stat", "x")
        .file("meminfo", "MemTotal: 1 kB\n");
    let r = fake.reader();
    assert_eq!(r.pids().unwrap(), [12, 300]);
    assert_eq!(r.tids(300).unwrap(), [300, 301, 310]);
    assert_eq!(r.tids(12).unwrap(), [12]);
}

#[test]
fn reads_every_file_of_a_task() {
    let fake = FakeProc::new();
    fake.process(300, &[300, 301], "np) x(y");
    let r = fake.reader();

    let s = r.stat(300, 301).unwrap();
    assert_eq!((s.pid, s.comm.as_str(), s.state), (301, "np) x(y", 'S'));
    assert_eq!((s.utime, s.stime, s.num_threads), (3010, 3, 2));
    assert_eq!((s.start_time, s.processor), (5301, Some(1)));

    let st = r.status(300, 301).unwrap();
    assert_eq!(
        (st.tgid, st.pid, st.ppid, st.vm_rss_kb),
        (300, 301, 1, Some(2048))
    );
    assert_eq!(st.cpus_allowed, CpuSet::first_n(4));
    assert_eq!(st.mems_allowed, CpuSet::first_n(1));

    assert_eq!(r.comm(300, 301).unwrap(), "np) x(y");
    assert_eq!(r.cmdline(300).unwrap(), ["np) x(y", "--flag"]);
    assert_eq!(
        r.cgroup(300).unwrap().v2_path.as_deref(),
        Some("/system.slice/app.service")
    );
    let m = r.numa_maps(300).unwrap();
    assert_eq!((m.mappings, m.skipped_lines), (2, 0));
    assert_eq!(m.node(0).file, 4 * 4096);
    assert_eq!(m.node(1).anon, 8 * 4096);
}

#[test]
fn comm_keeps_inner_newlines_and_drops_the_last() {
    let fake = FakeProc::new();
    fake.task(5, 5, "a\nb) c");
    let r = fake.reader();
    assert_eq!(r.comm(5, 5).unwrap(), "a\nb) c");
    assert_eq!(r.stat(5, 5).unwrap().comm, "a\nb) c");
    fake.file("5/task/5/comm", b"caf\xe9\n");
    assert_eq!(r.comm(5, 5).unwrap(), "caf\u{10ffe9}");
    fake.file("5/task/5/comm", "");
    assert_eq!(r.comm(5, 5).unwrap(), "");
}

#[test]
fn a_truncated_stat_is_a_parse_error_naming_the_file() {
    let fake = FakeProc::new();
    fake.task(7, 7, "w")
        .file("7/task/7/stat", "7 (w) S 1 7 7 0 -1 0 0 0");
    let e = fake.reader().stat(7, 7).unwrap_err();
    let ProcError::Parse { path, error } = &e else {
        panic!("{e:?}")
    };
    assert!(path.ends_with("proc/7/task/7/stat"), "{path:?}");
    assert!(matches!(error, ParseError::Truncated { .. }), "{error}");
    assert!(e.to_string().contains("proc/7/task/7/stat"), "{e}");
}

#[test]
fn a_status_that_is_not_text_is_a_parse_error() {
    let fake = FakeProc::new();
    fake.task(7, 7, "w")
        .file("7/task/7/status", b"Tgid:\t7\n\xff\xfe");
    let e = fake.reader().status(7, 7).unwrap_err();
    assert!(matches!(e, ProcError::Parse { .. }), "{e:?}");
}

#[test]
fn garbage_numa_maps_is_counted_not_fatal() {
    let fake = FakeProc::new();
    fake.process(8, &[8], "g").file(
        "8/numa_maps",
        b"\x00\x01garbage\n7f00 default anon=1 N0=1 kernelpagesize_kB=4\nN0=1\n\xff\xff\n",
    );
    let m = fake.reader().numa_maps(8).unwrap();
    assert_eq!((m.mappings, m.skipped_lines), (1, 3));
    assert_eq!(m.total().anon, 4096);
}

#[test]
fn a_numa_maps_larger_than_one_read_is_read_whole() {
    let fake = FakeProc::new();
    let line = "7f0000000000 default anon=1 dirty=1 N0=1 kernelpagesize_kB=4\n";
    let n = 3 * LARGE / line.len();
    fake.process(9, &[9], "big")
        .file("9/numa_maps", line.repeat(n));
    let m = fake.reader().numa_maps(9).unwrap();
    assert_eq!((m.mappings, m.skipped_lines), (n, 0));
    assert_eq!(m.node(0).anon, n as u64 * 4096);
}

#[test]
fn a_task_that_vanished_is_gone() {
    let fake = FakeProc::new();
    fake.process(40, &[40, 41], "short");
    let r = fake.reader();
    // Listed, then it exits.
    assert_eq!(r.tids(40).unwrap(), [40, 41]);
    fake.remove("40/task/41");
    for e in [
        r.stat(40, 41).unwrap_err(),
        r.status(40, 41).unwrap_err(),
        r.comm(40, 41).unwrap_err(),
    ] {
        assert!(e.is_gone(), "{e:?}");
        assert!(e.to_string().contains("proc/40/task/41/"), "{e}");
    }
    fake.remove("40");
    for e in [
        r.tids(40).unwrap_err(),
        r.stat(40, 40).unwrap_err(),
        r.cmdline(40).unwrap_err(),
        r.cgroup(40).unwrap_err(),
        r.numa_maps(40).unwrap_err(),
    ] {
        assert!(e.is_gone(), "{e:?}");
    }
}

#[test]
fn numa_maps_missing_from_a_live_process_is_unavailable() {
    let fake = FakeProc::new();
    fake.process(50, &[50], "nonuma");
    fake.remove("50/numa_maps");
    let e = fake.reader().numa_maps(50).unwrap_err();
    assert!(matches!(e, ProcError::Unavailable { .. }), "{e:?}");
    assert!(e.to_string().contains("CONFIG_NUMA"), "{e}");
}

#[test]
fn a_root_without_proc_is_an_io_error() {
    let fake = FakeProc::new();
    fs::remove_dir(fake.dir.path().join("proc")).unwrap();
    let e = fake.reader().pids().unwrap_err();
    assert!(matches!(e, ProcError::Io { .. }), "{e:?}");
    assert!(e.to_string().contains("proc"), "{e}");
}

#[test]
fn an_unreadable_file_is_denied() {
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeProc::new();
    fake.process(60, &[60], "secret");
    let path = fake.dir.path().join("proc/60/numa_maps");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::read(&path).is_ok() {
        eprintln!("skipped: running as root, permissions are not enforced");
        return;
    }
    let e = fake.reader().numa_maps(60).unwrap_err();
    assert!(matches!(e, ProcError::Denied { .. }), "{e:?}");
}

/// This tid, from the `/proc/thread-self` link (`<pid>/task/<tid>`).
fn my_tid() -> i32 {
    let link = fs::read_link("/proc/thread-self").unwrap();
    link.file_name().unwrap().to_str().unwrap().parse().unwrap()
}

/// Runs a thread named `name` until `check(tid)` has run on the main thread.
fn with_named_thread(name: &str, check: impl FnOnce(i32)) {
    let (tid_tx, tid_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            tid_tx.send(my_tid()).unwrap();
            let _ = done_rx.recv();
        })
        .unwrap();
    let tid = tid_rx.recv().unwrap();
    check(tid);
    drop(done_tx);
    handle.join().unwrap();
}

#[test]
fn live_host_reads_its_own_process() {
    let r = ProcReader::new(SysRoot::host());
    let pid = std::process::id() as i32;
    assert!(r.pids().unwrap().contains(&pid));
    assert!(r.tids(pid).unwrap().contains(&pid));

    let s = r.stat(pid, pid).unwrap();
    assert_eq!(s.pid, pid);
    assert!(s.num_threads >= 1 && s.start_time > 0, "{s:?}");
    let st = r.status(pid, pid).unwrap();
    assert_eq!((st.tgid, st.pid), (pid, pid));
    assert!(!st.cpus_allowed.is_empty() && !st.mems_allowed.is_empty());
    assert!(st.vm_rss_kb.unwrap() > 0);
    assert!(!r.cmdline(pid).unwrap().is_empty());
    r.cgroup(pid).unwrap();
    match r.numa_maps(pid) {
        Ok(m) => {
            assert!(m.mappings > 0 && m.skipped_lines == 0, "{m:?}");
            assert!(m.total().anon > 0, "{m:?}");
        }
        Err(ProcError::Unavailable { .. }) => eprintln!("kernel without CONFIG_NUMA"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn live_host_thread_names_with_parentheses_and_newlines() {
    let r = ProcReader::new(SysRoot::host());
    let pid = std::process::id() as i32;
    for name in ["np) x(y", "a\nb) R 1 (c"] {
        with_named_thread(name, |tid| {
            assert_ne!(tid, pid);
            assert!(r.tids(pid).unwrap().contains(&tid));
            assert_eq!(r.comm(pid, tid).unwrap(), name);
            let s = r.stat(pid, tid).unwrap();
            assert_eq!((s.pid, s.comm.as_str()), (tid, name));
            assert_eq!(r.status(pid, tid).unwrap().tgid, pid);
        });
    }
    // Linux keeps 15 bytes of a thread's name.
    with_named_thread("numaplace-long-thread-name", |tid| {
        assert_eq!(r.comm(pid, tid).unwrap(), "numaplace-long-");
        assert_eq!(r.stat(pid, tid).unwrap().comm, "numaplace-long-");
    });
}

#[test]
fn hinting_faults_from_a_threads_sched() {
    let p = FakeProc::new();
    p.process(40, &[40, 41], "app");
    p.file(
        "40/task/41/sched",
        format!(
            "app (41, #threads: 2)\n{}\nse.exec_start : 1.0\n\
             numa_preferred_nid                           :                    1\n\
             current_node=1, numa_group_id=0\n\
             numa_faults node=0 task_private=3 task_shared=1 group_private=0 group_shared=0\n\
             numa_faults node=1 task_private=90 task_shared=6 group_private=0 group_shared=0\n",
            "-".repeat(67)
        ),
    );
    p.file(
        "40/task/40/sched",
        "app (40, #threads: 2)\n---------------------------------\nprio : 120\n",
    );
    let r = p.reader();
    let n = r.sched_numa(40, 41).unwrap().unwrap();
    assert_eq!(n.preferred_node, Some(1));
    assert_eq!((n.faults[&0].task(), n.faults[&1].task()), (4, 96));
    // A kernel without CONFIG_NUMA_BALANCING: no signal, not an error.
    assert_eq!(r.sched_numa(40, 40).unwrap(), None);
    // Without CONFIG_SCHED_DEBUG there is no file while the thread is there.
    p.task(40, 42, "app");
    assert!(matches!(
        r.sched_numa(40, 42),
        Err(ProcError::Unavailable { .. })
    ));
    // A thread that exited is gone.
    assert!(r.sched_numa(40, 43).unwrap_err().is_gone());
    // Malformed NUMA lines are refused with the path.
    p.file(
        "40/task/40/sched",
        "numa_faults node=zero task_private=1 task_shared=0\n",
    );
    let e = r.sched_numa(40, 40).unwrap_err();
    assert!(e.to_string().contains("40/task/40/sched"), "{e}");
}
