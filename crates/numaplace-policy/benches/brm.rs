//! One `brm` round (\[Rao13\] §4, Algorithm 1), snapshot in, plan out: 64
//! vCPU threads of 8 VMs on a synthetic 8-node machine of 64 CPUs, after
//! 50 warm-up rounds so every thread has a state and a per-node table.
//!
//! `cargo bench -p numaplace-policy --bench brm`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::rng::splitmix64;
use numaplace_model::{Counter, Snapshot, Task, TaskGroup, Topology};
use numaplace_policy::brm::{Brm, BrmParams};
use numaplace_policy::testutil::{all_processes, counters, kvm, process, task, threads_by_process};
use numaplace_policy::{Policy, View};

const THREADS: u32 = 64;
const VMS: u32 = 8;

fn snapshot(topo: &Topology) -> Snapshot {
    let mut s = Snapshot {
        seq: 1,
        interval_ns: 100_000_000,
        ..Snapshot::default()
    };
    let mut rng = 3;
    for k in 0..THREADS {
        let tid = 10_000 + k as i32;
        let tgid = 1_000 + (k % VMS) as i32;
        s.tasks.push(Task {
            comm: format!("CPU {}/KVM", k / VMS),
            last_cpu: Some(k),
            vcpu: Some(k / VMS),
            ..task(tid, tgid, topo.span())
        });
        let requests = 1_000_000 + splitmix64(&mut rng) % 10_000_000;
        let penalty = 50 + splitmix64(&mut rng) % 400;
        s.counters.insert(
            tid,
            counters([
                (Counter::UncoreRequests, requests),
                (Counter::UncoreOccupancy, requests * penalty),
            ]),
        );
    }
    for (pid, threads) in threads_by_process(&s.tasks) {
        s.groups.push(TaskGroup {
            cmdline: vec!["qemu-system-x86_64".into()],
            kind: kvm(&format!("vm{pid}"), "kvm-vcpu fds"),
            ..process(pid, "qemu-system-x86", threads)
        });
    }
    s
}

fn round(c: &mut Criterion) {
    let topo = Topology::synthetic("pack:8 numa:1 l3:1 core:8 pu:1").unwrap();
    let s = snapshot(&topo);
    let managed = all_processes(&s);
    let view = View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    };
    let mut brm = Brm::new(BrmParams::default());
    for _ in 0..50 {
        brm.decide(&view);
    }
    c.bench_function("brm_round_64_vcpus_8_nodes", |b| {
        b.iter(|| brm.decide(black_box(&view)))
    });
}

criterion_group!(benches, round);
criterion_main!(benches);
