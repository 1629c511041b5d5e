//! Carrying quiet processes over (`Collector::set_carry_over`) on the live
//! host: a process of parked threads is carried, and what it does between
//! rounds (a thread born with a hostile name, one renamed, one ended, an
//! affinity changed from outside) shows in the next round as a full read
//! would show it. The process is this test binary run again as a helper.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use numaplace_linux::testutil::AnonMapping;
use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_model::Scope;
use numaplace_model::{Snapshot, Task};

const HELPER: &str = "NP_CARRY_HELPER";
/// Bytes the helper's `alloc` maps and touches.
const MAPPED: usize = 32 << 20;

/// Not a test: the helper process, when run with `NP_CARRY_HELPER` set.
/// Parks 20 threads, then obeys one command per stdin line, answering
/// `np: ...` on stdout: `spawn` (a thread with a hostile name; answers its
/// tid), `rename` (the main thread renames the newest thread), `end` (the
/// newest thread exits), `spin` (a thread that runs from then on), `alloc`
/// (32 MiB mapped and touched), `free` (the last of those unmapped). Exits
/// when stdin closes.
#[test]
fn helper_process() {
    if std::env::var_os(HELPER).is_none() {
        return;
    }
    let park = |name: &str| {
        let (tx, rx) = mpsc::channel::<()>();
        let (tid_tx, tid_rx) = mpsc::channel();
        let h = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                let _ = rx.recv();
            })
            .unwrap();
        (tx, h, tid_rx.recv().unwrap())
    };
    let mut threads: Vec<_> = (0..20).map(|_| park("np-idle")).collect();
    let mut mapped: Vec<AnonMapping> = Vec::new();
    let mut out = std::io::stdout().lock();
    writeln!(out, "np: ready").unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lines() {
        let answer = match line.unwrap().as_str() {
            "spawn" => {
                threads.push(park("np) new (x"));
                threads.last().unwrap().2.to_string()
            }
            "rename" => {
                let tid = threads.last().unwrap().2;
                std::fs::write(format!("/proc/self/task/{tid}/comm"), "np renamed").unwrap();
                "done".into()
            }
            "end" => {
                let (tx, h, _) = threads.pop().unwrap();
                drop(tx);
                h.join().unwrap();
                "done".into()
            }
            "spin" => {
                // Never quiet from now on, and faulting nothing.
                std::thread::spawn(|| {
                    let mut x = 0u64;
                    loop {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                });
                "done".into()
            }
            "alloc" => {
                // A fresh mapping, touched page by page.
                let m = AnonMapping::new(MAPPED);
                m.touch_every(4096);
                mapped.push(m);
                "done".into()
            }
            "free" => {
                // A mapping "alloc" made, unmapped once.
                drop(mapped.pop().unwrap());
                "done".into()
            }
            other => panic!("unknown command {other:?}"),
        };
        writeln!(out, "np: {answer}").unwrap();
        out.flush().unwrap();
    }
}

struct Helper {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Helper {
    fn start() -> Helper {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                &test_name!("helper_process"),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HELPER, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut h = Helper {
            child,
            stdin,
            stdout,
        };
        assert_eq!(h.answer(), "ready");
        h
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The next answer after `np: ` (the test harness writes its own
    /// text, and its `test helper_process ... ` on the same line).
    fn answer(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "helper died");
            if let Some((_, a)) = line.trim_end().split_once("np: ") {
                return a.to_string();
            }
        }
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        self.answer()
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A collector as the daemon sets it up, its memory scope the helper.
fn daemon_collector(pid: i32) -> Collector {
    let mut c = Collector::new(
        SysRoot::host(),
        CollectOptions {
            memory: true,
            counters: false,
            machine: false,
            samples: false,
        },
    );
    c.set_carry_over(Some(Duration::from_secs(600)));
    c.set_memory_scope(Some(Scope {
        pids: vec![pid],
        ..Scope::default()
    }));
    c
}

/// Rounds until one carries `pid` over (it has settled); that round.
fn carried_round(c: &mut Collector, pid: i32) -> Snapshot {
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(20));
        let s = c.collect().unwrap();
        if c.carried().contains(&pid) {
            return s;
        }
    }
    panic!("process {pid} was never carried over: it never stood still");
}

fn threads_of(s: &Snapshot, pid: i32) -> Vec<Task> {
    s.tasks.iter().filter(|t| t.tgid == pid).cloned().collect()
}

/// What a collector without carry-over reads of `pid` now.
fn full_read(pid: i32) -> (Vec<Task>, Snapshot) {
    let mut c = daemon_collector(pid);
    c.set_carry_over(None);
    let s = c.collect().unwrap();
    assert!(c.carried().is_empty());
    (threads_of(&s, pid), s)
}

#[test]
fn a_quiet_process_is_carried_as_a_full_read_would_show_it() {
    let mut h = Helper::start();
    let pid = h.pid();
    let me = std::process::id() as i32;
    let mut c = daemon_collector(pid);
    let first = c.collect().unwrap();
    assert!(!c.carried().contains(&pid), "the first round reads in full");
    // Its 20 parked threads, the one running the helper, its main thread.
    let n = threads_of(&first, pid).len();
    assert_eq!(n, 22);

    let s = carried_round(&mut c, pid);
    // This process runs (it is collecting): never carried.
    assert!(!c.carried().contains(&me));
    let (full, full_snap) = full_read(pid);
    assert_eq!(threads_of(&s, pid), full);
    let g = s.group(pid).unwrap();
    assert_eq!(g, full_snap.group(pid).unwrap());
    // Memory only for the scope, carried with the rest.
    assert!(g.memory.as_ref().is_some_and(|m| !m.is_empty()));
    assert!(s.group(me).unwrap().memory.is_none());

    // A thread born between rounds, with a name that breaks naive parsers.
    let tid: i32 = h.ask("spawn").parse().unwrap();
    let s = c.collect().unwrap();
    assert!(!c.carried().contains(&pid));
    let t = s.task(tid).expect("the new thread is found");
    assert_eq!((t.comm.as_str(), t.tgid), ("np) new (x", pid));
    assert!(s.group(pid).unwrap().threads.contains(&tid));

    // Renamed by another of its threads.
    carried_round(&mut c, pid);
    assert_eq!(h.ask("rename"), "done");
    let s = c.collect().unwrap();
    assert_eq!(s.task(tid).unwrap().comm, "np renamed");

    // Its affinity changed from outside, which does not make it run: seen
    // while it is carried.
    let s = carried_round(&mut c, pid);
    let before = s.task(tid).unwrap().allowed_cpus.clone();
    if let Some(cpu) = before.iter().next().filter(|_| before.len() > 1) {
        // SAFETY: cpu_set_t is plain bits; all zeroes is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: CPU_SET on a zeroed set, sched_setaffinity with its size.
        let r = unsafe {
            libc::CPU_SET(cpu as usize, &mut set);
            libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &set)
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        let s = c.collect().unwrap();
        assert!(
            c.carried().contains(&pid),
            "a new affinity is no reason to read it in full"
        );
        assert_eq!(
            s.task(tid).unwrap().allowed_cpus.iter().collect::<Vec<_>>(),
            [cpu]
        );
        assert_eq!(threads_of(&s, pid), full_read(pid).0);
    } else {
        eprintln!("SKIPPED the affinity part: one CPU allowed here");
    }

    // It ends.
    carried_round(&mut c, pid);
    assert_eq!(h.ask("end"), "done");
    let s = c.collect().unwrap();
    assert!(s.task(tid).is_none());
    assert_eq!(threads_of(&s, pid).len(), n);

    // Forgetting it (numaplace acted on it) reads it in full once.
    carried_round(&mut c, pid);
    c.refresh(pid);
    c.collect().unwrap();
    assert!(!c.carried().contains(&pid));
}

#[test]
fn a_process_that_ends_leaves_no_error() {
    let h = Helper::start();
    let pid = h.pid();
    let mut c = daemon_collector(pid);
    c.collect().unwrap();
    carried_round(&mut c, pid);
    drop(h);
    let s = c.collect().unwrap();
    assert!(s.group(pid).is_none());
    assert!(s.tasks.iter().all(|t| t.tgid != pid));
}

/// A process that runs but whose memory nothing changed keeps its memory
/// per node from an earlier round; one that allocates (faults) or frees
/// (its resident set shrinks) is read again, and shows it.
#[test]
fn a_running_process_keeps_its_memory_until_something_changes_it() {
    let mut h = Helper::start();
    let pid = h.pid();
    assert_eq!(h.ask("spin"), "done");
    let mut c = daemon_collector(pid);
    let total = |s: &Snapshot| {
        let g = s.groups.iter().find(|g| g.pid == pid).unwrap();
        let m = g.memory.as_ref().expect("its memory is read");
        m.values().map(|n| n.anon + n.file + n.huge).sum::<u64>()
    };
    // Rounds until one keeps the memory: the host's own page moves
    // (compaction, reclaim) may force a read now and then.
    let kept_round = |c: &mut Collector| {
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(20));
            let s = c.collect().unwrap();
            assert!(
                !c.carried().contains(&pid),
                "a spinning process is never quiet"
            );
            if c.memory_kept().contains(&pid) {
                return s;
            }
        }
        panic!("the memory of process {pid} was read every round though nothing changed it");
    };
    let before = total(&kept_round(&mut c));
    assert_eq!(h.ask("alloc"), "done");
    let s = c.collect().unwrap();
    assert!(!c.memory_kept().contains(&pid), "its faults force a read");
    let grown = total(&s);
    // The helper's other memory moves by a page or two between rounds
    // (its stdin buffer, the harness): within 1 MiB.
    assert!(
        grown + (1 << 20) >= before + MAPPED as u64,
        "{before} -> {grown} bytes: {:?}",
        s.groups.iter().find(|g| g.pid == pid).unwrap().memory
    );
    assert_eq!(total(&kept_round(&mut c)), grown);
    assert_eq!(h.ask("free"), "done");
    let s = c.collect().unwrap();
    assert!(
        !c.memory_kept().contains(&pid),
        "its shrinking forces a read"
    );
    assert!(
        total(&s) + MAPPED as u64 <= grown + (1 << 20),
        "{grown} -> {}",
        total(&s)
    );
    // What the daemon acted on is read again.
    kept_round(&mut c);
    c.refresh(pid);
    c.collect().unwrap();
    assert!(!c.memory_kept().contains(&pid));
}

/// With the task iterator, a process's command line and cgroup are kept
/// from round to round, and read again as soon as it runs another program
/// (exec) or is moved to another cgroup (checked in a cgroup2 hierarchy
/// mounted for the test).
#[test]
fn kept_command_lines_and_cgroups_follow_exec_and_moves() {
    let mut c = daemon_collector(0);
    if let Some(why) = c.task_iterator_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let mnt = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "cgroup2", "none"])
        .arg(mnt.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a cgroup2 hierarchy here");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.path().to_path_buf());
    // A shell that waits for a line, then becomes `sleep`.
    let mut child = Command::new("sh")
        .args(["-c", "read x; exec sleep 30"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let group = |s: &Snapshot| s.groups.iter().find(|g| g.pid == pid).cloned().unwrap();
    // Rounds until the child has run its own program (a round between
    // the fork and the exec sees no command line of its own yet).
    let sh = ["sh", "-c", "read x; exec sleep 30"];
    let mut first = None;
    for _ in 0..100 {
        let g = group(&c.collect().unwrap());
        if g.cmdline == sh {
            first = Some(g);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(first.is_some(), "the shell's command line shows");
    let dir = mnt.path().join(format!("np-test-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).unwrap();
    let moved = group(&c.collect().unwrap());
    let want = format!("/np-test-{}", std::process::id());
    assert!(
        moved.cgroup.as_deref().is_some_and(|p| p.ends_with(&want)),
        "moved to {want}: {:?}",
        moved.cgroup
    );
    writeln!(child.stdin.take().unwrap(), "go").unwrap();
    let mut became = None;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(20));
        let g = group(&c.collect().unwrap());
        if g.cmdline.first().is_some_and(|a| a == "sleep") {
            became = Some(g);
            break;
        }
    }
    let became = became.expect("the exec shows in the command line");
    assert_eq!(became.cmdline, ["sleep", "30"]);
    let _ = child.kill();
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(50));
    let _ = std::fs::remove_dir(&dir);
}
