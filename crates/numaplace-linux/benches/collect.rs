//! One collection round with 1,000 and 10,000 threads alive (spawned here,
//! parked), to show the cost per thread and that it grows linearly.
//!
//! `cargo bench -p numaplace-linux --bench collect`
//!
//! Four rounds are measured. With the threads in this process (which runs,
//! so it is never quiet): the procfs part (every thread's stat and
//! affinity, every process's status, cmdline, cgroup and numa_maps), and
//! the same with perf counters (software ones here: no PMU), where each
//! thread's counters are read once per round. With the threads parked in
//! another process (this binary run again): that process read in full as
//! above, and read as the daemon reads it while it stays quiet (threads and
//! memory carried over from the round before, memory only for the process
//! in scope).
//!
//! `collect round, running threads` (issue 19): another process's 2,000 and
//! 10,000 threads that *run* between rounds (each does a little work, then
//! sleeps, waking every `BUSY_PERIOD`), so the carry-over cannot skip
//! them, read as the daemon reads them (`numad-like` on a host without a
//! PMU: memory for the process in scope, machine readings, carry-over on,
//! no counters), each round after a pause of one period so that every
//! thread ran since the last. Beside it, the floors, in the same run so
//! they compare as ratios whatever else the machine is doing: bare loops
//! that only open, read and close each of those threads' `stat` (what the
//! kernel charges for one procfs file per thread), that only read each
//! `stat` held open (what the daemon's rounds pay per thread), and that
//! only read the process's `numa_maps` (its memory per node, read every
//! round for a process that runs).
//!
//! `cargo bench -p numaplace-linux --bench collect -- 'running threads'`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]
use std::hint::black_box;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_model::Scope;

/// Set (to a thread count) in the environment of the crowd process.
const CROWD_PROCESS: &str = "NP_BENCH_CROWD_PROCESS";
/// Set (to a period in ms) beside [`CROWD_PROCESS`]: its threads run.
const CROWD_BUSY_MS: &str = "NP_BENCH_CROWD_BUSY_MS";
/// How often each running thread wakes to work: 100 ms for 2,000 threads
/// (issue 19's process), 500 ms for 10,000 (20,000 wake-ups a second
/// either way, which two shared cores can serve beside the bench).
fn busy_period(threads: usize) -> Duration {
    if threads <= 2_000 {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(500)
    }
}

/// Parked threads that live until dropped.
struct Crowd {
    release: Arc<Barrier>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Crowd {
    fn spawn(n: usize) -> Crowd {
        let release = Arc::new(Barrier::new(n + 1));
        let handles = (0..n)
            .map(|i| {
                let r = Arc::clone(&release);
                std::thread::Builder::new()
                    .name(format!("np-crowd-{i}"))
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        r.wait();
                    })
                    .expect("spawn a parked thread (raise ulimit -u or threads-max?)")
            })
            .collect();
        Crowd { release, handles }
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        self.release.wait();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Another process of `n` parked threads: this binary, run again. It stays
/// until its stdin closes.
struct CrowdProcess {
    child: Child,
}

impl CrowdProcess {
    fn spawn(n: usize) -> CrowdProcess {
        CrowdProcess::spawn_with(n, None)
    }

    /// `n` threads that each wake every `period` to work a little.
    fn spawn_busy(n: usize, period: Duration) -> CrowdProcess {
        CrowdProcess::spawn_with(n, Some(period))
    }

    fn spawn_with(n: usize, busy: Option<Duration>) -> CrowdProcess {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.env(CROWD_PROCESS, n.to_string());
        if let Some(p) = busy {
            cmd.env(CROWD_BUSY_MS, p.as_millis().to_string());
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n", "the crowd process did not start");
        CrowdProcess { child }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for CrowdProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The crowd process itself: parks its threads, says so, waits for EOF.
fn crowd_process(n: usize) {
    let crowd = Crowd::spawn(n);
    println!("ready");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(crowd);
}

/// The busy crowd process: `n` threads, each waking every `period` (at its
/// own phase) to do about 20 µs of work, until stdin closes.
fn busy_crowd_process(n: usize, period: Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let stop = Arc::clone(&stop);
            let phase = period.mul_f64(i as f64 / n as f64);
            std::thread::Builder::new()
                .name(format!("np-busy-{i}"))
                .stack_size(64 * 1024)
                .spawn(move || {
                    let mut next = Instant::now() + phase;
                    let mut x = i as u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..20_000 {
                            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                        next += period;
                        let now = Instant::now();
                        if next <= now {
                            next = now + period;
                        }
                        std::thread::sleep(next - now);
                    }
                })
                .expect("spawn a busy thread (raise ulimit -u or threads-max?)")
        })
        .collect();
    println!("ready");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
}

/// The floor of a round over `pid`'s threads: for each, open its `stat`,
/// read it into one reused buffer, close it; nothing parsed, nothing kept.
/// Returns the bytes read.
fn bare_stat_loop(pid: i32, buf: &mut [u8]) -> usize {
    let mut total = 0;
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let name = e.unwrap().file_name();
        let path = format!("/proc/{pid}/task/{}/stat", name.to_string_lossy());
        if let Ok(mut f) = std::fs::File::open(path) {
            total += f.read(buf).unwrap_or(0);
        }
    }
    total
}

/// The floor with every thread's `stat` held open (what the daemon's
/// rounds do, `collect/held.rs`): one `pread` each. Returns the bytes read.
fn bare_held_stat_loop(files: &[std::fs::File], buf: &mut [u8]) -> usize {
    use std::os::unix::fs::FileExt;
    files.iter().map(|f| f.read_at(buf, 0).unwrap_or(0)).sum()
}

/// Rounds as the daemon runs them over another process whose threads run.
/// The daemon's rounds over `busy` (memory for it alone, machine readings,
/// carry-over on, no counters), with or without the task iterator. Each
/// timed round comes after a pause of one period (not timed), so every
/// thread ran since the round before, as at the daemon's intervals.
fn daemon_rounds(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    label: &str,
    iterator: bool,
    busy: &CrowdProcess,
    n: usize,
    period: Duration,
) {
    let mut daemon = Collector::new(
        SysRoot::host(),
        CollectOptions {
            memory: true,
            counters: false,
            machine: true,
            samples: false,
        },
    );
    daemon.set_carry_over(Some(Duration::from_secs(10)));
    if !iterator {
        daemon.set_task_iterator(false);
    } else if let Some(why) = daemon.task_iterator_missing() {
        eprintln!("{label}: the task iterator is not used here ({why}): /proc");
    }
    daemon.set_memory_scope(Some(Scope {
        pids: vec![busy.pid()],
        ..Scope::default()
    }));
    daemon.collect().unwrap();
    let (mut rounds, mut carried, mut whole) = (0u64, 0u64, 0u64);
    g.bench_with_input(BenchmarkId::new(label, n), &n, |b, _| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                std::thread::sleep(period);
                let start = Instant::now();
                let s = daemon.collect().unwrap();
                timed += start.elapsed();
                rounds += 1;
                carried += u64::from(daemon.carried().contains(&busy.pid()));
                whole += u64::from(
                    s.group(busy.pid())
                        .is_some_and(|g| g.threads.len() == n + 1 && g.memory.is_some()),
                );
                black_box(s);
            }
            timed
        })
    });
    eprintln!(
        "{label}: {n} threads waking every {period:?} in another process: carried over in {carried} of {rounds} rounds, every thread and the memory read in {whole}"
    );
}

fn running(c: &mut Criterion) {
    let mut g = c.benchmark_group("collect round, running threads");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for n in [2_000usize, 10_000] {
        let period = busy_period(n);
        let busy = CrowdProcess::spawn_busy(n, period);
        g.throughput(Throughput::Elements(n as u64));
        for (label, iterator) in [
            ("daemon (numad-like, no PMU)", true),
            ("daemon, /proc (task iterator off)", false),
        ] {
            daemon_rounds(&mut g, label, iterator, &busy, n, period);
        }
        let mut pass = Vec::new();
        match numaplace_linux::taskiter::TaskIterator::open(100) {
            Ok(mut it) => {
                g.bench_with_input(
                    BenchmarkId::new("floor: one task-iterator pass (every task)", n),
                    &n,
                    |b, _| {
                        b.iter(|| {
                            it.read(&mut pass).unwrap();
                            black_box(pass.len())
                        })
                    },
                );
            }
            Err(e) => eprintln!("no task-iterator row: {e}"),
        }
        let mut buf = vec![0u8; 4096];
        g.bench_with_input(
            BenchmarkId::new("floor: open, read, close each stat", n),
            &n,
            |b, _| b.iter(|| black_box(bare_stat_loop(busy.pid(), &mut buf))),
        );
        let held: Vec<std::fs::File> = std::fs::read_dir(format!("/proc/{}/task", busy.pid()))
            .unwrap()
            .filter_map(|e| {
                let path = e.unwrap().path().join("stat");
                std::fs::File::open(path).ok()
            })
            .collect();
        g.bench_with_input(
            BenchmarkId::new("floor: read each stat held open", n),
            &n,
            |b, _| b.iter(|| black_box(bare_held_stat_loop(&held, &mut buf))),
        );
        drop(held);
        let numa_maps = format!("/proc/{}/numa_maps", busy.pid());
        g.bench_with_input(
            BenchmarkId::new("floor: read its numa_maps", n),
            &n,
            |b, _| b.iter(|| black_box(std::fs::read(&numa_maps).unwrap().len())),
        );
        drop(busy);
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("collect round");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    for n in [1_000usize, 10_000] {
        let crowd = Crowd::spawn(n);
        let threads = {
            let mut probe = Collector::new(
                SysRoot::host(),
                CollectOptions {
                    memory: false,
                    counters: false,
                    machine: false,
                    samples: false,
                },
            );
            probe.collect().unwrap().tasks.len()
        };
        g.throughput(Throughput::Elements(threads as u64));

        let mut procfs = Collector::new(
            SysRoot::host(),
            CollectOptions {
                memory: true,
                counters: false,
                machine: true,
                samples: false,
            },
        );
        g.bench_with_input(BenchmarkId::new("procfs+memory", n), &n, |b, _| {
            b.iter(|| black_box(procfs.collect().unwrap()))
        });

        let mut full = Collector::new(SysRoot::host(), CollectOptions::default());
        full.collect().unwrap(); // opens every thread's counters
        g.bench_with_input(BenchmarkId::new("full (with counters)", n), &n, |b, _| {
            b.iter(|| black_box(full.collect().unwrap()))
        });
        if let Some(p) = full.perf() {
            eprintln!(
                "{n} parked threads, {threads} threads on the host; counters on {} threads (fd budget: {})",
                p.tracked().count(),
                p.availability().max_threads
            );
        }
        drop(full);
        drop(crowd);

        let other = CrowdProcess::spawn(n);
        let options = CollectOptions {
            memory: true,
            counters: false,
            machine: true,
            samples: false,
        };
        let mut in_full = Collector::new(SysRoot::host(), options);
        g.bench_with_input(
            BenchmarkId::new("other process, read in full", n),
            &n,
            |b, _| b.iter(|| black_box(in_full.collect().unwrap())),
        );
        // As the daemon reads it, scope that process; carried as long as
        // it stays quiet (no full read for age within the measurement).
        let mut daemon = Collector::new(SysRoot::host(), options);
        daemon.set_carry_over(Some(Duration::from_secs(3600)));
        daemon.set_memory_scope(Some(Scope {
            pids: vec![other.pid()],
            ..Scope::default()
        }));
        let carried = |d: &Collector| d.carried().contains(&other.pid());
        for _ in 0..100 {
            daemon.collect().unwrap();
            if carried(&daemon) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let (mut rounds, mut full_reads) = (0u64, 0u64);
        g.bench_with_input(
            BenchmarkId::new("other process, quiet, carried over", n),
            &n,
            |b, _| {
                b.iter(|| {
                    let s = daemon.collect().unwrap();
                    rounds += 1;
                    full_reads += u64::from(!carried(&daemon));
                    black_box(s)
                })
            },
        );
        eprintln!(
            "{n} parked threads in another process: read in full in {full_reads} of {rounds} carry-over rounds"
        );
        drop(other);
    }
    g.finish();
}

criterion_group!(benches, bench, running);

fn main() {
    if let Some(n) = std::env::var_os(CROWD_PROCESS) {
        let n = n.to_str().and_then(|n| n.parse().ok()).unwrap();
        match std::env::var(CROWD_BUSY_MS) {
            Ok(ms) => busy_crowd_process(n, Duration::from_millis(ms.parse().unwrap())),
            Err(_) => crowd_process(n),
        }
        return;
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
