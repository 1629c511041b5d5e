//! Tests of `bloom`.

use super::*;

use crate::rng::Rng;

fn geom(sets: u32, ways: u32) -> CacheGeometry {
    CacheGeometry::new(sets, ways, 64).unwrap()
}

#[test]
fn bitvec_arithmetic() {
    let cf = BitVec::from_bit_str("1101_1010_1");
    let lf = BitVec::from_bit_str("0100_1000_1");
    let rbv = cf.and_not(&lf);
    assert_eq!(rbv, BitVec::from_bit_str("1001_0010_0"));
    assert_eq!(rbv.count_ones(), 3);
    assert_eq!(rbv.ones().collect::<Vec<_>>(), vec![0, 3, 6]);
    assert_eq!(rbv.xor(&cf), lf);
    assert_eq!(rbv.xor_count_ones(&cf), 3);
    // Across word boundaries, and nothing leaks past len.
    let a = BitVec::from_ones(130, [0, 63, 64, 129]);
    let b = BitVec::from_ones(130, [63, 128]);
    assert_eq!(a.and_not(&b).ones().collect::<Vec<_>>(), vec![0, 64, 129]);
    assert_eq!(a.xor(&b).count_ones(), 4);
    assert!(a.get(129) && !a.get(128));
}

#[test]
fn symbiosis_of_hand_made_vectors() {
    // In the spirit of Fig. 7(b): the RBV of App1 against the CFs of
    // two cores, one holding a disjoint footprint, one an overlapping.
    let rbv = BitVec::from_bit_str("1111_0000");
    let cf_disjoint = BitVec::from_bit_str("0000_1100");
    let cf_overlap = BitVec::from_bit_str("1110_0000");
    assert_eq!(CacheSignatures::occupancy_weight(&rbv), 4);
    assert_eq!(rbv.xor_count_ones(&cf_disjoint), 6);
    assert_eq!(rbv.xor_count_ones(&cf_overlap), 1);
}

#[test]
fn hardware_operations_follow_section_3_1() {
    let cfg = SignatureConfig {
        hash: HashKind::Modulo,
        index_bits: Some(4),
        ..SignatureConfig::default()
    };
    let mut s = CacheSignatures::new(geom(4, 4), 2, cfg).unwrap();
    // Blocks 1 and 17 share entry 1; block 2 has entry 2.
    s.on_insert(0, 1, 0);
    s.on_insert(1, 17, 1);
    s.on_insert(0, 2, 0);
    assert_eq!(s.counter(1), 2);
    assert_eq!(s.core_filter(0).ones().collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(s.core_filter(1).ones().collect::<Vec<_>>(), vec![1]);
    // First eviction: counter 2 -> 1, CF bits stay (stale for core 0).
    s.on_evict(1, 0);
    assert_eq!(s.counter(1), 1);
    assert!(s.core_filter(0).get(1) && s.core_filter(1).get(1));
    // Second: counter reaches 0, the bit goes from every CF.
    s.on_evict(17, 1);
    assert!(!s.core_filter(0).get(1) && !s.core_filter(1).get(1));

    // Switch out of core 0: RBV = CF - LF, then LF = CF.
    let rbv = s.context_switch_out(0);
    assert_eq!(rbv.ones().collect::<Vec<_>>(), vec![2]);
    assert_eq!(s.last_filter(0), s.core_filter(0));
    // The next application touches entries 2 (already in LF) and 3.
    s.on_insert(0, 18, 2);
    s.on_insert(0, 3, 0);
    let rec = s.switch_out_record(0);
    assert_eq!(rec.occupancy_weight, 1); // only entry 3 is new
    // RBV {3} against CF0 {2,3} and CF1 {}.
    assert_eq!(rec.symbiosis, vec![1, 1]);
}

#[test]
fn counters_saturate_and_stick() {
    let cfg = SignatureConfig {
        hash: HashKind::Modulo,
        index_bits: Some(2),
        counter_bits: 1,
        ..SignatureConfig::default()
    };
    let mut s = CacheSignatures::new(geom(1, 4), 1, cfg).unwrap();
    s.on_insert(0, 0, 0);
    s.on_insert(0, 4, 1); // same entry 0, counter already at 1
    assert_eq!(s.saturation_events(), 1);
    s.on_evict(0, 0);
    s.on_evict(4, 1);
    assert_eq!(s.counter(0), 1);
    assert!(s.core_filter(0).get(0), "a stuck counter keeps its CF bit");
    assert_eq!(s.saturated_counters(), 1);
}

#[test]
fn hashes_stay_in_range_and_spread_sequential_lines() {
    let bits = 10;
    let n = 1usize << bits;
    for hash in [
        HashKind::Xor,
        HashKind::XorInverseReverse,
        HashKind::Modulo,
        HashKind::PresenceBits,
    ] {
        let mut rng = Rng::new(7);
        let base = rng.next_u64() >> 8;
        let mut seen = vec![false; n];
        for i in 0..n as u64 {
            let key = LineKey {
                block: base + i,
                slot: i,
            };
            let idx = hash.index(key, bits);
            assert!(idx < n, "{hash:?}");
            seen[idx] = true;
            // Random lines stay in range too.
            let r = LineKey {
                block: rng.next_u64(),
                slot: rng.next_u64(),
            };
            assert!(hash.index(r, bits) < n);
        }
        let distinct = seen.iter().filter(|&&b| b).count();
        assert!(distinct * 10 >= n * 9, "{hash:?}: {distinct} of {n}");
    }
    // XOR-inverse-reverse is XOR composed with a bijection.
    let k = LineKey {
        block: 0b1011_0000_0011,
        slot: 0,
    };
    assert_eq!(HashKind::Xor.index(k, 4), 0b1011 ^ 0b0011);
    // 1000 inverted is 0111, reversed 1110.
    assert_eq!(HashKind::XorInverseReverse.index(k, 4), 0b1110);
    assert_eq!(HashKind::Modulo.index(k, 4), 0b0011);
}

#[test]
fn presence_bits_give_each_tracked_line_its_own_entry() {
    let g = geom(16, 4);
    let cfg = SignatureConfig {
        hash: HashKind::PresenceBits,
        ..SignatureConfig::default()
    };
    let mut c = SharedCache::with_signatures(g, 1, cfg.clone()).unwrap();
    for b in 0..64 {
        c.access_block(0, b * 1000 + b % 16);
    }
    let s = c.signatures().unwrap();
    assert_eq!(s.core_filter(0).count_ones(), 64);
    assert!((0..64).all(|i| s.counter(i) == 1));
    let too_small = SignatureConfig {
        index_bits: Some(5),
        ..cfg
    };
    assert!(matches!(
        CacheSignatures::new(g, 1, too_small),
        Err(BloomError::PresenceBitsTooFew { .. })
    ));
}

#[test]
fn sampling_tracks_only_the_sampled_sets() {
    let g = geom(64, 4);
    let cfg = SignatureConfig {
        sample_fraction: 0.25,
        counter_bits: 8, // no saturation: counters sum to resident lines
        ..SignatureConfig::default()
    };
    let mut c = SharedCache::with_signatures(g, 2, cfg).unwrap();
    let s = c.signatures().unwrap();
    assert_eq!(s.sampled_sets(), 16);
    assert_eq!(s.entries(), 64); // 16 sets x 4 ways
    assert!((0..64).all(|set| s.is_sampled(set) == (set % 4 == 0)));
    assert_eq!(s.filter_index(1, 0), None);
    assert!(s.filter_index(4, 0).is_some());

    // Only sampled sets touched so far: blocks in set 1 change nothing.
    for i in 0..100 {
        c.access_block(0, 1 + 64 * i);
    }
    assert_eq!(c.signatures().unwrap().counter_total(), 0);
    assert_eq!(c.signatures().unwrap().core_filter(0).count_ones(), 0);

    let mut rng = Rng::new(3);
    for _ in 0..20_000 {
        let core = rng.below_u64(2) as usize;
        c.access_block(core, rng.below_u64(1 << 20));
    }
    // Every set is full by now; the counters hold exactly the lines of
    // the 16 sampled sets.
    assert_eq!(c.signatures().unwrap().counter_total(), 16 * 4);
}

#[test]
fn lru_hits_and_eviction_order() {
    let mut c = SharedCache::new(geom(2, 4), 1).unwrap();
    // Set 0 gets blocks 0, 2, 4, 6 (even blocks).
    for b in [0, 2, 4, 6] {
        assert_eq!(c.access_block(0, b), Access::Miss { evicted: None });
    }
    assert_eq!(c.access_block(0, 0), Access::Hit);
    assert_eq!(c.access(0, 4 * 64 + 5), Access::Hit); // byte address
    // LRU order now 2, 6, 0, 4.
    assert_eq!(c.access_block(0, 8), Access::Miss { evicted: Some(2) });
    assert_eq!(c.access_block(0, 10), Access::Miss { evicted: Some(6) });
    assert_eq!(c.access_block(0, 12), Access::Miss { evicted: Some(0) });
    // Set 1 untouched and empty.
    assert_eq!(c.access_block(0, 1), Access::Miss { evicted: None });
    assert_eq!((c.hits(), c.misses()), (2, 8));
    assert!(c.contains_block(4) && !c.contains_block(2));
}

/// Interleaves App1 on core 0 with `other` on core 1, then switches
/// App1 out and returns (its occupancy weight, its symbiosis with
/// core 1, cache misses).
fn pair(other: &[u64]) -> (u32, u32, u64) {
    let app1: Vec<u64> = (0..448).collect();
    let cfg = SignatureConfig::default(); // XOR hash, 512 entries
    let mut c = SharedCache::with_signatures(geom(64, 8), 2, cfg).unwrap();
    let mut rng = Rng::new(11);
    for _ in 0..200_000 {
        c.access_block(0, app1[rng.below_u64(app1.len() as u64) as usize]);
        c.access_block(1, other[rng.below_u64(other.len() as u64) as usize]);
    }
    let sig = c.signatures_mut().unwrap();
    let rbv = sig.context_switch_out(0);
    let weight = CacheSignatures::occupancy_weight(&rbv);
    (weight, sig.symbiosis(&rbv, 1), c.misses())
}

#[test]
fn disjoint_pair_has_higher_symbiosis_than_conflicting_pair() {
    // A 32 KiB cache of 512 lines: App1 (big, 448 lines) fills 7 of
    // the 8 ways of every set. App2 (64 lines) fits in the eighth way
    // and in filter entries App1 does not use. App3 (128 lines) maps
    // onto the same sets and, with the XOR hash, onto entries App1
    // already holds: the two thrash each other.
    let app2: Vec<u64> = (448..512).collect();
    let app3: Vec<u64> = (512..640).collect();
    let (w2, s2, m2) = pair(&app2);
    let (w3, s3, m3) = pair(&app3);
    assert!(w2 >= 440, "App1 with App2 keeps its footprint: {w2}");
    assert!(w3 > 0);
    assert!(m3 > 10 * m2, "conflict shows as misses: {m3} vs {m2}");
    assert!(s2 >= 500, "disjoint: {s2}");
    assert!(s2 > s3 + 100, "disjoint {s2} vs conflicting {s3}");
}

#[test]
fn xor_inverse_reverse_reports_what_xor_reports() {
    let run = |hash| {
        let cfg = SignatureConfig {
            hash,
            sample_fraction: 0.25,
            ..SignatureConfig::default()
        };
        let mut c = SharedCache::with_signatures(geom(256, 8), 2, cfg).unwrap();
        let mut rng = Rng::new(5);
        let mut records = Vec::new();
        for round in 0..20 {
            for _ in 0..5_000 {
                let core = rng.below_u64(2) as usize;
                let span = if core == 0 { 1 << 12 } else { 1 << 9 };
                c.access_block(core, rng.below_u64(span) + (core as u64) * (1 << 20));
            }
            let sig = c.signatures_mut().unwrap();
            records.push(sig.switch_out_record(round % 2));
        }
        records
    };
    let xor = run(HashKind::Xor);
    assert!(xor.iter().any(|r| r.occupancy_weight > 0));
    assert_eq!(xor, run(HashKind::XorInverseReverse));
}

#[test]
fn last_filters_cleared_only_when_asked() {
    for clear in [false, true] {
        let cfg = SignatureConfig {
            hash: HashKind::Modulo,
            index_bits: Some(4),
            clear_last_filters: clear,
            ..SignatureConfig::default()
        };
        let mut s = CacheSignatures::new(geom(4, 4), 1, cfg).unwrap();
        s.on_insert(0, 5, 0);
        s.context_switch_out(0); // LF = {5}
        s.on_evict(5, 0); // counter 0: CF loses 5
        s.on_insert(0, 21, 0); // the new application refills entry 5
        let weight = CacheSignatures::occupancy_weight(&s.context_switch_out(0));
        assert_eq!(weight, u32::from(clear));
    }
}

#[test]
fn config_errors_are_reported() {
    let g = geom(16, 4);
    let bad = |cfg: SignatureConfig| CacheSignatures::new(g, 2, cfg).unwrap_err();
    assert!(matches!(
        bad(SignatureConfig {
            sample_fraction: 0.0,
            ..SignatureConfig::default()
        }),
        BloomError::SampleFraction(_)
    ));
    assert!(matches!(
        bad(SignatureConfig {
            counter_bits: 9,
            ..SignatureConfig::default()
        }),
        BloomError::CounterBits(9)
    ));
    assert!(CacheGeometry::new(12, 4, 64).is_err());
    assert_eq!(
        CacheGeometry::from_size(4 << 20, 16, 64).unwrap(),
        CacheGeometry::CORE2DUO_L2
    );
    assert!(SharedCache::new(g, 0).is_err());
}
