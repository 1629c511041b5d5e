//! One `brm` round (seed 000 §4, Algorithm 1), snapshot in, plan out: 64
//! vCPU threads of 8 VMs on a synthetic 8-node machine of 64 CPUs, after
//! 50 warm-up rounds so every thread has a state and a per-node table.
//!
//! `cargo bench -p numaplace-policy --bench brm`

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::{Counter, CounterDeltas, GroupKind, Snapshot, Task, TaskGroup, Topology};
use numaplace_policy::brm::{Brm, BrmParams};
use numaplace_policy::{Policy, View};

const THREADS: u32 = 64;
const VMS: u32 = 8;

/// splitmix64.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn snapshot(topo: &Topology) -> Snapshot {
    let mut s = Snapshot {
        seq: 1,
        interval_ns: 100_000_000,
        ..Snapshot::default()
    };
    let mut rng = 3;
    let mut members: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for k in 0..THREADS {
        let tid = 10_000 + k as i32;
        let tgid = 1_000 + (k % VMS) as i32;
        members.entry(tgid).or_default().push(tid);
        s.tasks.push(Task {
            tid,
            tgid,
            start_time: 1,
            comm: format!("CPU {}/KVM", k / VMS),
            state: 'R',
            last_cpu: Some(k),
            allowed_cpus: topo.span().clone(),
            allowed_mems: Default::default(),
            utime: 0,
            stime: 0,
            vcpu: Some(k / VMS),
        });
        let requests = 1_000_000 + next(&mut rng) % 10_000_000;
        let penalty = 50 + next(&mut rng) % 400;
        let mut values = BTreeMap::new();
        values.insert(Counter::UncoreRequests, requests);
        values.insert(Counter::UncoreOccupancy, requests * penalty);
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
            comm: "qemu-system-x86".into(),
            cmdline: vec!["qemu-system-x86_64".into()],
            cgroup: None,
            kind: GroupKind::Vm {
                name: Some(format!("vm{pid}")),
                accel: "KVM".into(),
                evidence: "kvm-vcpu fds".into(),
            },
            threads,
            memory: None,
        });
    }
    s
}

fn round(c: &mut Criterion) {
    let topo = Topology::synthetic("pack:8 numa:1 l3:1 core:8 pu:1").unwrap();
    let s = snapshot(&topo);
    let managed: BTreeSet<i32> = s.groups.iter().map(|g| g.pid).collect();
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
