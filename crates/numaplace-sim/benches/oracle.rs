//! The oracle on a westmere-like machine (2 packages × 4 cores × 2 SMT):
//! 8 distinct threads, a core each, packages symmetric, a cheap synthetic
//! cost (pairwise sharing penalties per LLC domain). Exhaustive (35
//! placements up to symmetry), and the local search the same problem gets
//! when the budget is smaller than that.
//!
//! `cargo bench -p numaplace-sim --bench oracle`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_model::Topology;
use numaplace_sim::oracle::{OracleProblem, search};

fn bench(c: &mut Criterion) {
    let t = Topology::synthetic("pack:2 numa:1 l3:1 core:4 pu:2").unwrap();
    let p = OracleProblem {
        packages_symmetric: true,
        ..OracleProblem::new(&t, (0..8).collect())
    };
    let llc: Vec<usize> = t.cpus().iter().map(|c| c.llc).collect();
    // Threads i and j sharing an LLC cost (i * 7 + j * 13) % 10.
    let mut cost = |pl: &[u32]| -> f64 {
        let mut s = 0u32;
        for i in 0..pl.len() {
            for j in i + 1..pl.len() {
                if llc[pl[i] as usize] == llc[pl[j] as usize] {
                    s += (i as u32 * 7 + j as u32 * 13) % 10;
                }
            }
        }
        s as f64
    };
    c.bench_function("oracle/westmere-8-distinct/exhaustive", |b| {
        b.iter(|| search(black_box(&p), &mut cost, 1000, 1).unwrap())
    });
    c.bench_function("oracle/westmere-8-distinct/local-search-30", |b| {
        b.iter(|| search(black_box(&p), &mut cost, 30, 1).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
