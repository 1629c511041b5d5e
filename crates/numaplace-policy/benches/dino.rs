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

/// One whole `dino` decision, snapshot in, plan out: 10,000 threads of 200
/// processes on a 256-CPU, 8-node synthetic machine, after a first round
/// placed them (so this one keeps most threads where they are).
fn decision(c: &mut Criterion) {
    use std::collections::{BTreeMap, BTreeSet};

    use numaplace_model::{
        Action, Counter, CounterDeltas, GroupKind, Snapshot, Task, TaskGroup, Topology,
    };
    use numaplace_policy::dino::{Dino, DinoParams};
    use numaplace_policy::{Policy, View};

    let topo = Topology::synthetic("pack:8 numa:1 l3:1 core:16 pu:2").unwrap();
    let mut s = Snapshot {
        seq: 1,
        interval_ns: 1_000_000_000,
        ..Snapshot::default()
    };
    let mut rng = 11;
    let mut members: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for k in 0..THREADS as i32 {
        let tid = 10_000 + k;
        let tgid = 10_000 + (next(&mut rng) % PROCESSES) as i32 * 1000;
        members.entry(tgid).or_default().push(tid);
        s.tasks.push(Task {
            tid,
            tgid,
            start_time: 1,
            comm: "app".into(),
            state: 'R',
            last_cpu: None,
            allowed_cpus: topo.span().clone(),
            allowed_mems: Default::default(),
            utime: 0,
            stime: 0,
            vcpu: None,
        });
        let mut values = BTreeMap::new();
        values.insert(Counter::Instructions, 1_000_000_000);
        values.insert(Counter::LlcMisses, next(&mut rng) % 150_000_000);
        s.counters.insert(
            tid,
            CounterDeltas {
                values,
                enabled_ns: 1,
                running_ns: 1,
            },
        );
    }
    for (pid, threads) in members {
        s.groups.push(TaskGroup {
            pid,
            start_time: 1,
            comm: "app".into(),
            cmdline: vec!["app".into()],
            cgroup: None,
            kind: GroupKind::Process,
            threads,
            memory: None,
        });
    }
    let managed: BTreeSet<i32> = s.groups.iter().map(|g| g.pid).collect();
    let mut dino = Dino::new(DinoParams::default());
    let first = dino.decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    let mut pinned: BTreeMap<i32, numaplace_model::CpuSet> = BTreeMap::new();
    for d in first.decisions {
        if let Action::Pin { task, cpus, .. } = d.action {
            pinned.insert(task.tid, cpus);
        }
    }
    for t in &mut s.tasks {
        if let Some(c) = pinned.get(&t.tid) {
            t.allowed_cpus = c.clone();
        }
    }
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
