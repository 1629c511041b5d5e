//! numad's pre-placement advice (`advise --numad-w`, which libvirt waits
//! for while a domain starts) on a 64-node synthetic machine ("pack:8
//! numa:8 l3:1 core:4 pu:2", 512 CPUs) with uneven load and free memory,
//! for a VM that fits one node and one that needs four. The command's own
//! cost besides this is reading the machine (hwloc) and its 200 ms sample
//! of `/proc/stat`.
//!
//! `cargo bench -p numaplace-policy --bench preplacement`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::Topology;
use numaplace_policy::preplacement::{Request, advise, rooms};

fn bench(c: &mut Criterion) {
    let t = Topology::synthetic("pack:8 numa:8 l3:1 core:4 pu:2").unwrap();
    // Idle shares and free memory that differ from node to node.
    let idle: BTreeMap<u32, Option<f64>> = t
        .cpus()
        .iter()
        .map(|cpu| (cpu.os_id, Some(((cpu.os_id * 37) % 100) as f64 / 100.0)))
        .collect();
    let free: BTreeMap<u32, u64> = t
        .nodes()
        .iter()
        .map(|n| (n.os_id, (1 + (n.os_id as u64 * 13) % 16) << 30))
        .collect();
    let r = rooms(&t, &idle, &free);
    let small = Request {
        cpus: 2.0,
        memory: 4 << 30,
    };
    let large = Request {
        cpus: 12.0,
        memory: 40 << 30,
    };
    c.bench_function("preplacement_64_nodes_one_node_vm", |b| {
        b.iter(|| advise(black_box(&t), black_box(&r), black_box(&small)))
    });
    c.bench_function("preplacement_64_nodes_four_node_vm", |b| {
        b.iter(|| advise(black_box(&t), black_box(&r), black_box(&large)))
    });
    c.bench_function("preplacement_rooms_64_nodes", |b| {
        b.iter(|| rooms(black_box(&t), black_box(&idle), black_box(&free)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
