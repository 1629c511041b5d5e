//! One collection round with 1,000 and 10,000 threads alive (spawned here,
//! parked), to show the cost per thread and that it grows linearly.
//!
//! `cargo bench -p numaplace-linux --bench collect`
//!
//! Two rounds are measured: the procfs part (every thread's stat and
//! status, every process's cmdline, cgroup and numa_maps), and the same
//! with perf counters (software ones here: no PMU), where each thread's
//! counters are read once per round.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use numaplace_linux::{CollectOptions, Collector, SysRoot};

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
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
