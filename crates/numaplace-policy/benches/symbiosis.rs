//! One `symbiosis` decision (\[Symbiosis-Bloom\] §3.3.3, weighted interference graph)
//! for 64 single-thread tasks on a 32-core machine with two LLC domains:
//! the LLC split and the per-domain core groupings are beyond the exact
//! limit, so Kernighan-Lin does the cuts. §5.5 expects "tens of nodes" and
//! an allocator run every 100 ms.
//!
//! `cargo bench -p numaplace-policy --bench symbiosis`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::rng::splitmix64;
use numaplace_model::{CacheSignature, Snapshot, Task, Topology};
use numaplace_policy::symbiosis::{Algorithm, Symbiosis, SymbiosisParams};
use numaplace_policy::testutil::{all_processes, process, task};
use numaplace_policy::{Policy, View};

const TASKS: i32 = 64;

fn decision(c: &mut Criterion) {
    let topo = Topology::synthetic("pack:2 numa:1 l3:1 core:16 pu:1").unwrap();
    let cpus: Vec<u32> = topo.span().iter().collect();
    let mut s = Snapshot::default();
    let mut rng = 5;
    for k in 0..TASKS {
        let tid = 1000 + k;
        let cpu = cpus[k as usize % cpus.len()];
        s.tasks.push(Task {
            last_cpu: Some(cpu),
            ..task(tid, tid, topo.span())
        });
        s.groups.push(process(tid, "app", vec![tid]));
        let llc = topo.llcs()[topo.cpu_by_os_id(cpu).unwrap().llc]
            .span
            .clone();
        let symbiosis: BTreeMap<u32, u32> = llc
            .iter()
            .map(|o| (o, (splitmix64(&mut rng) % 8192) as u32))
            .collect();
        s.signatures.insert(
            tid,
            CacheSignature {
                cpu,
                occupancy_weight: (splitmix64(&mut rng) % 8192) as u32,
                symbiosis,
                entries: 8192,
            },
        );
    }
    let managed = all_processes(&s);
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
