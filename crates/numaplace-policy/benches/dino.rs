//! DINO's placement (\[Blagodurov11\] §3.3.3) at scale: 10,000 threads on 256
//! cores in 8 domains of 32, random classes and processes (about 50
//! threads per process, so the multithreaded pass has work to do). The
//! timed round starts from the previous round's solution, with one thread
//! in ten having changed class, as it would in a running daemon.
//!
//! `cargo bench -p numaplace-policy --bench dino`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::rng::splitmix64;
use numaplace_policy::dino::layout::{Class, Domains, OldPlace, Slotted, solve};

const THREADS: usize = 10_000;
const PROCESSES: u64 = 200;

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
            process: (splitmix64(&mut s) % PROCESSES) as i64,
            class: class(splitmix64(&mut s)),
            old: None,
            home: None,
        })
        .collect();
    let first = solve(&threads, domains);
    for (thread, core) in first.assignment() {
        let t = &mut threads[thread as usize];
        t.old = Some(OldPlace {
            core,
            class: t.class,
        });
        if splitmix64(&mut s) % 10 == 0 {
            t.class = class(splitmix64(&mut s));
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

/// One whole `dino` decision, snapshot in, plan out: 10,000 threads of 200
/// processes on a 256-CPU, 8-node synthetic machine, after a first round
/// placed them (so this one keeps most threads where they are).
fn decision(c: &mut Criterion) {
    use std::collections::BTreeMap;

    use numaplace_model::{Counter, CpuSet, Snapshot, Topology};
    use numaplace_policy::dino::{Dino, DinoParams};
    use numaplace_policy::testutil::{
        all_processes, counters, pins, process, task, threads_by_process,
    };
    use numaplace_policy::{Policy, View};

    let topo = Topology::synthetic("pack:8 numa:1 l3:1 core:16 pu:2").unwrap();
    let mut s = Snapshot {
        seq: 1,
        interval_ns: 1_000_000_000,
        ..Snapshot::default()
    };
    let mut rng = 11;
    for k in 0..THREADS as i32 {
        let tid = 10_000 + k;
        let tgid = 10_000 + (splitmix64(&mut rng) % PROCESSES) as i32 * 1000;
        s.tasks.push(task(tid, tgid, topo.span()));
        s.counters.insert(
            tid,
            counters([
                (Counter::Instructions, 1_000_000_000),
                (Counter::LlcMisses, splitmix64(&mut rng) % 150_000_000),
            ]),
        );
    }
    for (pid, threads) in threads_by_process(&s.tasks) {
        s.groups.push(process(pid, "app", threads));
    }
    let managed = all_processes(&s);
    let first_snapshot = s.clone();
    let mut dino = Dino::new(DinoParams::default());
    let first = dino.decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    let pinned: BTreeMap<i32, CpuSet> = pins(&first).into_iter().collect();
    for t in &mut s.tasks {
        if let Some(c) = pinned.get(&t.tid) {
            t.allowed_cpus = c.clone();
        }
    }
    // What the timed decisions decide, as a digest of their plans (every
    // action and reason, in order): a second policy, fed the same rounds,
    // so that a change that is only to be faster can show it decides the
    // same (compare the line printed before and after it).
    let mut twin = Dino::new(DinoParams::default());
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    let mut actions = 0;
    for round in 0..4 {
        let plan = twin.decide(&View {
            topology: &topo,
            snapshot: if round == 0 { &first_snapshot } else { &s },
            managed: &managed,
        });
        actions += plan.decisions.len();
        std::hash::Hash::hash(&format!("{plan:?}"), &mut digest);
    }
    eprintln!(
        "dino plans over 4 rounds: {actions} actions, digest {:016x}",
        std::hash::Hasher::finish(&digest)
    );
    c.bench_function("dino_decide_10000_threads_256_cpus_8_nodes", |b| {
        b.iter(|| {
            dino.decide(black_box(&View {
                topology: &topo,
                snapshot: &s,
                managed: &managed,
            }))
        })
    });
}

criterion_group!(benches, bench, decision);
criterion_main!(benches);
