//! `auto`'s predictor at scale (issue 31, item 5): one prediction-and-search
//! decision, the machine model fitted to a round and searched for the
//! layout it predicts best, on a 256-CPU, 8-node synthetic machine
//! ("pack:4 numa:2 l3:1 core:16 pu:2", the generic machine's parameters):
//!
//! - `predict_fit_2000_threads_100_groups_256_cpus`: 2,000 threads in 100
//!   processes, each a tenth of a CPU busy (200 CPUs' worth on 256): the
//!   fit (three passes of the model over every thread) and the search,
//!   which steps aside where the threads to place outnumber the CPUs;
//! - `predict_search_250_threads_25_groups_256_cpus`: 250 busy threads in
//!   25 processes of 10, one per CPU: the fit and a search of 400
//!   placements (hill climbing from the placement measured).
//!
//! Each thread has instructions, cycles, LLC misses and references
//! counted; each process 600 MiB, 70 % on one node and 30 % on another.
//! Run: `cargo bench -p numaplace-policy --bench predict`. The aim of
//! issue 31 is at most 20 ms a decision.
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::{Counter, NodeMemory, Snapshot, Task, Topology};
use numaplace_policy::auto::predict::Predictor;
use numaplace_policy::testutil::{counters, process, task};

const MACHINE: &str = "pack:4 numa:2 l3:1 core:16 pu:2";
const MIB: u64 = 1 << 20;

/// A round of `groups` processes of `threads` threads, each busy
/// `busy` of a CPU, spread over the CPUs in turn.
fn round(t: &Topology, groups: usize, threads: usize, busy: f64) -> Snapshot {
    let mut s = Snapshot {
        seq: 10,
        interval_ns: 1_000_000_000,
        ..Snapshot::default()
    };
    let nodes = t.nodes().len() as u32;
    let cpus = t.cpus().len();
    for g in 0..groups {
        let pid = 10_000 + 100 * g as i32;
        let tids: Vec<i32> = (0..threads as i32).map(|k| pid + k).collect();
        for (k, &tid) in tids.iter().enumerate() {
            let cpu = t.cpus()[(g * threads + k) % cpus].os_id;
            s.tasks.push(Task {
                last_cpu: Some(cpu),
                ..task(tid, pid, t.span())
            });
            let instructions = ((1e9 + (tid % 7) as f64 * 1e7) * busy) as u64;
            s.counters.insert(
                tid,
                counters([
                    (Counter::Instructions, instructions),
                    (Counter::Cycles, 2 * instructions),
                    (Counter::LlcMisses, instructions / 200),
                    (Counter::LlcReferences, instructions / 50),
                    (Counter::TaskClock, (busy * 1e9) as u64),
                ]),
            );
        }
        let mut p = process(pid, "app", tids);
        let g = g as u32;
        p.memory = Some(BTreeMap::from([
            (g % nodes, anon(420 * MIB)),
            ((g + 3) % nodes, anon(180 * MIB)),
        ]));
        s.groups.push(p);
    }
    s.sort_tasks();
    s
}

fn anon(bytes: u64) -> NodeMemory {
    NodeMemory {
        anon: bytes,
        file: 0,
        huge: 0,
    }
}

/// One decision: fit, then search.
fn decide(p: &mut Predictor, t: &Topology, s: &Snapshot) -> Option<f64> {
    let all: BTreeSet<i32> = s.tasks.iter().map(|x| x.tid).collect();
    let fit = p.fit(t, s, &|x: &Task| all.contains(&x.tid))?;
    let allowed = vec![true; t.cpus().len()];
    let horizon = vec![60.0; fit.groups.len()];
    p.search(&fit, &[], &allowed, &horizon, 400)
        .map(|l| l.score)
}

fn bench(c: &mut Criterion) {
    let t = Topology::synthetic(MACHINE).expect("a synthetic machine");
    assert_eq!(t.cpus().len(), 256);
    let crowded = round(&t, 100, 20, 0.1);
    let one_each = round(&t, 25, 10, 1.0);
    let mut p = Predictor::new(&t, None);
    eprintln!(
        "2,000 threads: searched: {:?}; 250 threads: best score {:?}",
        decide(&mut p, &t, &crowded),
        decide(&mut p, &t, &one_each)
    );
    c.bench_function("predict_fit_2000_threads_100_groups_256_cpus", |b| {
        b.iter(|| decide(&mut p, &t, black_box(&crowded)))
    });
    c.bench_function("predict_search_250_threads_25_groups_256_cpus", |b| {
        b.iter(|| decide(&mut p, &t, black_box(&one_each)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
