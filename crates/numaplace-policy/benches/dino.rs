//! DINO's placement (seed 004 §3.3.3) at scale: 10,000 threads on 256
//! cores in 8 domains of 32, random classes and processes (about 50
//! threads per process, so the multithreaded pass has work to do). The
//! timed round starts from the previous round's solution, with one thread
//! in ten having changed class, as it would in a running daemon.
//!
//! `cargo bench -p numaplace-policy --bench dino`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_policy::dino::layout::{Class, Domains, OldPlace, Slotted, solve};

const THREADS: usize = 10_000;
const PROCESSES: u64 = 200;

/// splitmix64.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn class(r: u64) -> Class {
    Class::ALL[(r % 3) as usize]
}

/// Two rounds: the first from nowhere, the second from the first's final
/// placement. Returns the second round's input.
fn workload(domains: &Domains) -> Vec<Slotted> {
    let mut s = 7;
    let mut threads: Vec<Slotted> = (0..THREADS as u64)
        .map(|thread| Slotted {
            thread,
            process: (next(&mut s) % PROCESSES) as i64,
            class: class(next(&mut s)),
            old: None,
        })
        .collect();
    let first = solve(&threads, domains);
    for (thread, core) in first.assignment() {
        let t = &mut threads[thread as usize];
        t.old = Some(OldPlace {
            core,
            class: t.class,
        });
        if next(&mut s) % 10 == 0 {
            t.class = class(next(&mut s));
        }
    }
    threads
}

fn bench(c: &mut Criterion) {
    let domains = Domains {
        cores_per_domain: vec![32; 8],
    };
    let threads = workload(&domains);
    c.bench_function("solve_10000_threads_256_cores_8_domains", |b| {
        b.iter(|| solve(black_box(&threads), black_box(&domains)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
