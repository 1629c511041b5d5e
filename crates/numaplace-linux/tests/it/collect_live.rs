//! The collector on the live host: threads with hostile names are found
//! with their real tids; our own process's memory and counters show up.

use std::sync::mpsc;
use std::sync::{Arc, Barrier};

use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_model::{Counter, GroupKind};

/// Names the classic `/proc/<pid>/stat` parsing bugs trip on (a thread
/// name holds at most 15 bytes).
const HOSTILE: [&str; 4] = ["np) x (y", "np\nnewline", "np sp ace R 1", "np:)(:)"];

#[test]
fn finds_threads_with_hostile_names() {
    let release = Arc::new(Barrier::new(HOSTILE.len() + 1));
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for name in HOSTILE {
        let (tx, release) = (tx.clone(), Arc::clone(&release));
        handles.push(
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    let tid = unsafe { libc::gettid() };
                    tx.send((name, tid)).unwrap();
                    release.wait();
                })
                .unwrap(),
        );
    }
    let mut want: Vec<(&str, i32)> = (0..HOSTILE.len()).map(|_| rx.recv().unwrap()).collect();
    want.sort();

    let mut c = Collector::new(
        SysRoot::host(),
        CollectOptions {
            memory: true,
            counters: false,
            machine: true,
            samples: false,
        },
    );
    let snap = c.collect().unwrap();
    release.wait();
    for h in handles {
        h.join().unwrap();
    }

    let pid = std::process::id() as i32;
    let me = snap.group(pid).expect("our own process is listed");
    assert_eq!(me.kind, GroupKind::Process);
    assert!(!me.cmdline.is_empty());
    for (name, tid) in &want {
        let t = snap
            .task(*tid)
            .unwrap_or_else(|| panic!("thread {tid} ({name:?}) not found"));
        assert_eq!(&t.comm, name, "tid {tid}");
        assert_eq!(t.tgid, pid);
        assert!(me.threads.contains(tid));
        assert!(!t.allowed_cpus.is_empty());
        assert!(!t.allowed_mems.is_empty());
        assert!(t.last_cpu.is_some());
        assert!(t.start_time > 0);
    }
    // Our memory is on some node, and the machine's nodes are read.
    let mem = me.memory.as_ref().expect("our numa_maps is readable");
    assert!(mem.values().map(|m| m.total()).sum::<u64>() > 0);
    assert!(!snap.machine.nodes.is_empty());
}

#[test]
fn counters_follow_threads_that_come_and_go() {
    let mut c = Collector::new(
        SysRoot::host(),
        CollectOptions {
            memory: false,
            counters: true,
            machine: false,
            samples: false,
        },
    );
    let pid = std::process::id() as i32;
    let _ = c.collect().unwrap();
    // A thread born after the first round, burning CPU across the second.
    let (tx, rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let worker = std::thread::Builder::new()
        .name("np-burner".into())
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            go_rx.recv().unwrap();
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < std::time::Duration::from_millis(150) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
        })
        .unwrap();
    let tid = rx.recv().unwrap();
    let s1 = c.collect().unwrap(); // opens its counters
    assert!(s1.task(tid).is_some());
    go_tx.send(()).unwrap();
    worker.join().unwrap();
    // It has exited: the next round has no task and no counters for it,
    // and the round before it (taken while it ran) counted its CPU time.
    let s2 = c.collect().unwrap();
    assert!(s2.task(tid).is_none());
    assert!(!s2.counters.contains_key(&tid));
    assert!(s2.group(pid).is_some());
    // The software task clock works everywhere: our main thread ran.
    let main = s2.counters.get(&pid).expect("main thread counted");
    assert!(main.get(Counter::TaskClock).is_some());
    assert!(
        c.missing_signals()
            .iter()
            .all(|m| !m.contains("task_clock"))
    );
}
