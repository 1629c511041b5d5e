//! One million accesses through the Core 2 Duo's shared L2 (4 MiB, 16
//! ways, 4096 sets) with the \[Symbiosis-Bloom\] signature hardware attached, to show
//! the cache model keeps up with the address streams the simulator feeds
//! it; and one context switch (RBV, weight, symbiosis) on the full-size
//! filters.
//!
//! `cargo bench -p numaplace-sim --bench bloom`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use numaplace_sim::bloom::{CacheGeometry, HashKind, SharedCache, SignatureConfig};

const ACCESSES: usize = 1_000_000;

/// splitmix64.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Two threads: core 0 random over 8 MiB (twice the cache), core 1 random
/// over 1 MiB, so the stream mixes hits and misses with evictions.
fn stream() -> Vec<(usize, u64)> {
    let mut s = 42;
    (0..ACCESSES)
        .map(|_| {
            let r = next(&mut s);
            if r & 1 == 0 {
                (0, r % (8 << 20))
            } else {
                (1, (1 << 32) + (r >> 1) % (1 << 20))
            }
        })
        .collect()
}

fn accesses(c: &mut Criterion) {
    let stream = stream();
    let mut group = c.benchmark_group("l2_4MiB_16way_1M_accesses");
    group.throughput(Throughput::Elements(ACCESSES as u64));
    group.sample_size(20);
    let configs: [(&str, Option<SignatureConfig>); 4] = [
        ("no-signatures", None),
        ("xor", Some(SignatureConfig::default())),
        (
            "xor-sampled-25",
            Some(SignatureConfig {
                sample_fraction: 0.25,
                ..SignatureConfig::default()
            }),
        ),
        (
            "presence-bits",
            Some(SignatureConfig {
                hash: HashKind::PresenceBits,
                ..SignatureConfig::default()
            }),
        ),
    ];
    for (name, cfg) in configs {
        let mut cache = match cfg {
            Some(cfg) => SharedCache::with_signatures(CacheGeometry::CORE2DUO_L2, 2, cfg),
            None => SharedCache::new(CacheGeometry::CORE2DUO_L2, 2),
        }
        .expect("valid configuration");
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                for &(core, addr) in &stream {
                    black_box(cache.access(core, addr));
                }
            })
        });
    }
    group.finish();
}

fn context_switch(c: &mut Criterion) {
    let mut cache =
        SharedCache::with_signatures(CacheGeometry::CORE2DUO_L2, 2, SignatureConfig::default())
            .expect("valid configuration");
    for (core, addr) in stream() {
        cache.access(core, addr);
    }
    let sig = cache.signatures_mut().expect("signatures attached");
    c.bench_function("switch_out_record_65536_entries", |b| {
        b.iter(|| black_box(sig.switch_out_record(0)))
    });
}

criterion_group!(benches, accesses, context_switch);
criterion_main!(benches);
