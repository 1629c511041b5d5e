//! One probe-and-vote round of `adaptive-mapping` (\[Bae12\] §5.3) for a
//! 16-vcore VM on a 2-socket, 32-CPU machine: the eight metrics from the
//! page sets (class-2-like: 1024 private pages and 256 shared written
//! pages per vcore in each window), classification, the performance,
//! power and energy models, the vote.
//!
//! `cargo bench -p numaplace-policy --bench adaptive`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::{Counter, PageSets, PageWindow, Snapshot, Task, TaskGroup, Topology};
use numaplace_policy::adaptive::{AdaptiveMapping, AdaptiveParams, Objective};
use numaplace_policy::testutil::{all_processes, counters, kvm, process, task};
use numaplace_policy::{Policy, View};

const VCORES: i32 = 16;

fn snapshot(topo: &Topology, seq: u64) -> Snapshot {
    let mut s = Snapshot {
        seq,
        time_unix_ns: seq * 2_000_000_000,
        interval_ns: 2_000_000_000,
        ..Snapshot::default()
    };
    let tids: Vec<i32> = (0..VCORES).map(|k| 100 + k).collect();
    for (k, &tid) in tids.iter().enumerate() {
        s.tasks.push(Task {
            comm: format!("CPU {k}/KVM"),
            vcpu: Some(k as u32),
            ..task(tid, 10, topo.span())
        });
        let base = 1_000_000 * (k as u64 + 1);
        let window = || {
            let mut accessed: Vec<u64> = (0..256).collect();
            accessed.extend(base..base + 1024);
            let mut written: Vec<u64> = (0..256).collect();
            written.extend((base..base + 1024).step_by(3));
            PageWindow { accessed, written }
        };
        s.page_sets.insert(
            tid,
            PageSets {
                per_mem: window(),
                per_store: window(),
            },
        );
        s.counters.insert(
            tid,
            counters([
                (Counter::Instructions, 1_000_000_000),
                (Counter::Cycles, 1_200_000_000),
                (Counter::TaskClock, 2_000_000_000),
            ]),
        );
    }
    s.groups.push(TaskGroup {
        cmdline: vec![],
        kind: kvm("guest", "bench"),
        ..process(10, "qemu-system-x86", tids)
    });
    s
}

fn bench(c: &mut Criterion) {
    let topo = Topology::synthetic("pack:2 numa:1 core:8 pu:2").unwrap();
    let mut params = AdaptiveParams::with_objective(Objective::Energy);
    // Never held back by the overhead ceiling: every call probes and votes.
    params.config.overhead_ceiling = 0.1;
    params.config.scan_ns_per_page = 0.0;
    params.config.remap_cost_ms = 0.0;
    let mut policy = AdaptiveMapping::new(params);
    let first = snapshot(&topo, 1);
    let managed = all_processes(&first);
    policy.decide(&View {
        topology: &topo,
        snapshot: &first,
        managed: &managed,
    });
    let snap = snapshot(&topo, 2);
    let reports = policy.reports();
    c.bench_function("adaptive_probe_and_vote_16_vcores", |b| {
        b.iter(|| {
            black_box(policy.decide(&View {
                topology: &topo,
                snapshot: black_box(&snap),
                managed: &managed,
            }))
        })
    });
    assert!(reports.lock().unwrap()[&10].probes > 0);
}

criterion_group!(benches, bench);
criterion_main!(benches);
