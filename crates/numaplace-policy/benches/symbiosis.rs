//! One `symbiosis` decision (seed 003 §3.3.3, weighted interference graph)
//! for 64 single-thread tasks on a 32-core machine with two LLC domains:
//! the LLC split and the per-domain core groupings are beyond the exact
//! limit, so Kernighan-Lin does the cuts. §5.5 expects "tens of nodes" and
//! an allocator run every 100 ms.
//!
//! `cargo bench -p numaplace-policy --bench symbiosis`

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::{CacheSignature, GroupKind, Snapshot, Task, TaskGroup, Topology};
use numaplace_policy::symbiosis::{Algorithm, Symbiosis, SymbiosisParams};
use numaplace_policy::{Policy, View};

const TASKS: i32 = 64;

/// splitmix64.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn decision(c: &mut Criterion) {
    let topo = Topology::synthetic("pack:2 numa:1 l3:1 core:16 pu:1").unwrap();
    let cpus: Vec<u32> = topo.span().iter().collect();
    let mut s = Snapshot::default();
    let mut rng = 5;
    for k in 0..TASKS {
        let tid = 1000 + k;
        let cpu = cpus[k as usize % cpus.len()];
        s.tasks.push(Task {
            tid,
            tgid: tid,
            start_time: 1,
            comm: "app".into(),
            state: 'R',
            last_cpu: Some(cpu),
            allowed_cpus: topo.span().clone(),
            allowed_mems: Default::default(),
            utime: 0,
            stime: 0,
            vcpu: None,
        });
        s.groups.push(TaskGroup {
            pid: tid,
            start_time: 1,
            comm: "app".into(),
            cmdline: vec!["app".into()],
            cgroup: None,
            kind: GroupKind::Process,
            threads: vec![tid],
            memory: None,
        });
        let llc = topo.llcs()[topo.cpu_by_os_id(cpu).unwrap().llc]
            .span
            .clone();
        let symbiosis: BTreeMap<u32, u32> = llc
            .iter()
            .map(|o| (o, (next(&mut rng) % 8192) as u32))
            .collect();
        s.signatures.insert(
            tid,
            CacheSignature {
                cpu,
                occupancy_weight: (next(&mut rng) % 8192) as u32,
                symbiosis,
                entries: 8192,
            },
        );
    }
    let managed: BTreeSet<i32> = s.groups.iter().map(|g| g.pid).collect();
    for alg in Algorithm::ALL {
        let mut p = Symbiosis::new(SymbiosisParams {
            algorithm: alg,
            ..SymbiosisParams::default()
        });
        c.bench_function(
            &format!("symbiosis_decide_64_tasks_32_cores_2_llcs_{}", alg.name()),
            |b| {
                b.iter(|| {
                    p.decide(black_box(&View {
                        topology: &topo,
                        snapshot: &s,
                        managed: &managed,
                    }))
                })
            },
        );
    }
}

criterion_group!(benches, decision);
criterion_main!(benches);
