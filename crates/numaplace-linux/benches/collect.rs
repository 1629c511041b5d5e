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
use std::hint::black_box;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_model::Scope;

/// Set (to a thread count) in the environment of the crowd process.
const CROWD_PROCESS: &str = "NP_BENCH_CROWD_PROCESS";

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
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(CROWD_PROCESS, n.to_string())
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

criterion_group!(benches, bench);

fn main() {
    if let Some(n) = std::env::var_os(CROWD_PROCESS) {
        crowd_process(n.to_str().and_then(|n| n.parse().ok()).unwrap());
        return;
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
