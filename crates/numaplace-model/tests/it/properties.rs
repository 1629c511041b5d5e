//! Property tests: cpuset text round trips and topology invariants.

use numaplace_model::{CpuSet, Topology};
use proptest::prelude::*;

fn cpusets() -> impl Strategy<Value = CpuSet> {
    prop::collection::btree_set(0u32..600, 0..80).prop_map(|s| s.into_iter().collect())
}

proptest! {
    #[test]
    fn list_round_trip(s in cpusets()) {
        let text = s.to_string();
        prop_assert_eq!(CpuSet::parse_list(&text).unwrap(), s.clone());
        prop_assert_eq!(CpuSet::parse_list(&text).unwrap().to_string(), text);
    }

    #[test]
    fn mask_round_trip(s in cpusets(), pad in 0usize..25) {
        let text = s.to_mask_string_words(pad);
        prop_assert_eq!(CpuSet::parse_mask(&text).unwrap(), s.clone());
        prop_assert_eq!(CpuSet::parse_mask(&text).unwrap().to_mask_string_words(pad), text);
    }

    #[test]
    fn algebra_agrees_with_btreeset(a in cpusets(), b in cpusets()) {
        let (sa, sb): (std::collections::BTreeSet<u32>, std::collections::BTreeSet<u32>) =
            (a.iter().collect(), b.iter().collect());
        prop_assert_eq!(a.union(&b).iter().collect::<Vec<_>>(), sa.union(&sb).copied().collect::<Vec<_>>());
        prop_assert_eq!(a.intersection(&b).iter().collect::<Vec<_>>(), sa.intersection(&sb).copied().collect::<Vec<_>>());
        prop_assert_eq!(a.difference(&b).iter().collect::<Vec<_>>(), sa.difference(&sb).copied().collect::<Vec<_>>());
        prop_assert_eq!(a.is_subset(&b), sa.is_subset(&sb));
        prop_assert_eq!(a.len(), sa.len());
        prop_assert_eq!(a.last(), sa.last().copied());
    }

    /// Any machine the synthetic syntax can describe obeys the invariants.
    #[test]
    fn topology_invariants(
        pack in 1u32..4, numa in prop::option::of(1u32..4), l3 in 1u32..3,
        numa_below_l3 in any::<bool>(), core in 1u32..5, pu in 1u32..3,
    ) {
        let numa_s = numa.map(|n| format!("numa:{n}")).unwrap_or_default();
        let text = if numa_below_l3 {
            format!("pack:{pack} l3:{l3} {numa_s} core:{core} pu:{pu}")
        } else {
            format!("pack:{pack} {numa_s} l3:{l3} core:{core} pu:{pu}")
        };
        let t = Topology::synthetic(&text).unwrap();
        check_invariants(&t);
    }
}

fn check_invariants(t: &Topology) {
    let all = t.span();
    assert_eq!(all.len(), t.cpus().len());
    // Every CPU in exactly one core, LLC, node span and package.
    for cpu in t.cpus() {
        assert_eq!(
            t.cores()
                .iter()
                .filter(|c| c.span.contains(cpu.os_id))
                .count(),
            1
        );
        assert_eq!(
            t.llcs()
                .iter()
                .filter(|l| l.span.contains(cpu.os_id))
                .count(),
            1
        );
        assert_eq!(
            t.nodes()
                .iter()
                .filter(|n| n.span.contains(cpu.os_id))
                .count(),
            1
        );
        assert_eq!(
            t.packages()
                .iter()
                .filter(|p| p.span.contains(cpu.os_id))
                .count(),
            1
        );
        assert!(t.cores()[cpu.core].span.contains(cpu.os_id));
        assert!(t.llcs()[cpu.llc].span.contains(cpu.os_id));
        assert!(t.nodes()[cpu.node].span.contains(cpu.os_id));
        assert_eq!(t.cpu_by_os_id(cpu.os_id).unwrap().id, cpu.id);
    }
    // Spans nest: core in LLC, node and package; LLC in package.
    for c in t.cores() {
        assert!(c.span.is_subset(&t.llcs()[c.llc].span));
        assert!(c.span.is_subset(&t.nodes()[c.node].span));
        assert!(c.span.is_subset(&t.packages()[c.package].span));
        assert_eq!(c.cpus.len(), c.span.len());
    }
    for l in t.llcs() {
        assert!(l.span.is_subset(&t.packages()[l.package].span));
        let cores: CpuSet = l
            .cores
            .iter()
            .flat_map(|&c| t.cores()[c].span.iter())
            .collect();
        assert_eq!(cores, l.span);
    }
    for n in t.nodes() {
        if let Some(p) = n.package {
            assert!(n.span.is_subset(&t.packages()[p].span));
        }
        assert!(n.span.is_subset(&n.locality));
    }
    // Dense ids are indexes.
    for (i, c) in t.cpus().iter().enumerate() {
        assert_eq!(c.id, i);
    }
    let nn = t.nodes().len();
    assert_eq!(t.distances().len(), nn * nn);
}
