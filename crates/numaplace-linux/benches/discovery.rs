//! Topology discovery on the largest real snapshot (nri-server: 2 sockets,
//! sub-NUMA clustering, 6 nodes, 112 CPUs): hwloc's load plus numaplace's
//! conversion and validation, and the validation alone.
//!
//! `cargo bench -p numaplace-linux --bench discovery`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

#[path = "../tests/support/lstopo.rs"]
mod lstopo;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_linux::{SysRoot, TopologySource, discover};
use numaplace_model::{CpuSet, Topology};

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = lstopo::extract_fixture(
        &lstopo::fixtures_dir().join("nri-server.tar.xz"),
        tmp.path(),
    );
    let source = TopologySource::Sysfs(SysRoot::new(&root).unwrap());
    let topo = discover(&source).unwrap();
    assert_eq!(topo.cpus().len(), 112);

    c.bench_function("discover nri-server (hwloc + convert + validate)", |b| {
        b.iter(|| discover(black_box(&source)).unwrap())
    });
    let desc = topo.to_desc();
    c.bench_function("Topology::new nri-server (validate only)", |b| {
        b.iter(|| Topology::new(black_box(desc.clone())).unwrap())
    });
    let list = topo.nodes()[0].span.to_string();
    c.bench_function("CpuSet::parse_list 28-CPU strided list", |b| {
        b.iter(|| CpuSet::parse_list(black_box(&list)).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
