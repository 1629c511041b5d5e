//! Tests of `oracle`.

use super::*;
use proptest::prelude::*;

fn topo(s: &str) -> Topology {
    Topology::synthetic(s).unwrap()
}

fn problem<'a>(t: &'a Topology, classes: &[u32], symmetric: bool) -> OracleProblem<'a> {
    OracleProblem {
        packages_symmetric: symmetric,
        ..OracleProblem::new(t, classes.to_vec())
    }
}

#[test]
fn counts_by_hand() {
    let t = topo("pack:2 numa:1 l3:1 core:4 pu:1");
    // Splits 4+0, 3+1, 2+2; without package symmetry also 1+3, 0+4.
    assert_eq!(count_canonical(&problem(&t, &[0; 4], true), 100), 3);
    assert_eq!(count_canonical(&problem(&t, &[0; 4], false), 100), 5);
    // Limits stop the count.
    assert_eq!(count_canonical(&problem(&t, &[0; 4], false), 2), 2);
    assert_eq!(count_canonical(&problem(&t, &[0; 4], false), 0), 0);

    let t = topo("pack:2 core:2 pu:1");
    // Together or apart; without symmetry, which package too.
    assert_eq!(count_canonical(&problem(&t, &[0, 1], true), 100), 2);
    assert_eq!(count_canonical(&problem(&t, &[0, 1], false), 100), 4);
    assert_eq!(count_canonical(&problem(&t, &[], false), 100), 1);

    // Westmere-like: 8 distinct threads, a core each: which 4 share a
    // package, C(8,4)/2.
    let t = topo("pack:2 numa:1 l3:1 core:4 pu:2");
    assert_eq!(
        count_canonical(&problem(&t, &[0, 1, 2, 3, 4, 5, 6, 7], true), 1000),
        35
    );
    // 3 identical + 1 other on the same, symmetric: the other with 0..3 of
    // the identical ones, and 3+1 splits: {XXX|Y, XXY|X, XY|XX, Y|XXX}.
    assert_eq!(count_canonical(&problem(&t, &[0, 0, 0, 1], true), 1000), 4);
}

#[test]
fn smt_sharing_and_allowed_sets() {
    let t = topo("pack:1 core:2 pu:2");
    let mut p = problem(&t, &[0, 0], false);
    assert_eq!(count_canonical(&p, 100), 1, "a core each");
    p.one_per_core = false;
    assert_eq!(count_canonical(&p, 100), 2, "sharing a core, or not");

    // One thread held to package 0 breaks the package symmetry and
    // sets it apart from its twin.
    let t = topo("pack:2 core:2 pu:1");
    let mut p = problem(&t, &[0, 0], true);
    assert_eq!(count_canonical(&p, 100), 2);
    p.allowed[0] = Some(CpuSet::parse_list("0-1").unwrap());
    assert_eq!(count_canonical(&p, 100), 2, "the other beside it or across");
    p.allowed[1] = Some(CpuSet::parse_list("0").unwrap());
    assert_eq!(count_canonical(&p, 100), 1);
    let r = search(&p, &mut |_| 0.0, 100, 1).unwrap();
    assert_eq!(r.placement, vec![1, 0]);

    // Both held to one core's CPUs: no core each, so they share.
    let t = topo("pack:1 core:2 pu:2");
    let mut p = problem(&t, &[0, 1], false);
    p.allowed = vec![Some(CpuSet::parse_list("0-1").unwrap()); 2];
    let r = search(&p, &mut |_| 0.0, 100, 1).unwrap();
    let mut got = r.placement.clone();
    got.sort_unstable();
    assert_eq!(got, vec![0, 1]);
    assert!(r.method.contains("sharing cores"), "{}", r.method);
}

#[test]
fn errors() {
    let t = topo("pack:1 core:2 pu:1");
    let p = problem(&t, &[0, 1, 2], false);
    assert_eq!(
        search(&p, &mut |_| 0.0, 10, 0).unwrap_err(),
        OracleError::TooManyThreads {
            threads: 3,
            cpus: 2
        }
    );
    assert_eq!(count_canonical(&p, 10), 0);
    let mut p = problem(&t, &[0, 1], false);
    p.allowed = vec![Some(CpuSet::parse_list("1").unwrap()); 2];
    assert_eq!(
        search(&p, &mut |_| 0.0, 10, 0).unwrap_err(),
        OracleError::Infeasible
    );
    p.allowed.pop();
    assert!(matches!(
        search(&p, &mut |_| 0.0, 10, 0),
        Err(OracleError::AllowedLength { .. })
    ));
}

/// Cost that depends only on what shares an LLC and a core: per LLC
/// (by position in its package when packages are symmetric) a
/// pseudo-random integer of the multiset of classes there, per core the
/// same of its classes, plus a distance-like term when memory is bound to
/// package 0.
fn synthetic_cost(t: &Topology, classes: &[u32], symmetric: bool, seed: u64, pl: &[u32]) -> f64 {
    let h = |parts: &[u64]| {
        let mut x = seed ^ 0xcbf2_9ce4_8422_2325;
        for &v in parts {
            x = (x ^ v).wrapping_mul(0x0000_0100_0000_01b3);
            x ^= x >> 29;
        }
        (x % 1000) as f64
    };
    let mut total = 0.0;
    for l in t.llcs() {
        let key = if symmetric {
            t.packages()[l.package]
                .llcs
                .iter()
                .position(|&x| x == l.id)
                .unwrap()
        } else {
            l.id
        };
        let mut cs: Vec<u64> = (0..pl.len())
            .filter(|&i| t.cpus()[pl[i] as usize].llc == l.id)
            .map(|i| classes[i] as u64)
            .collect();
        cs.sort_unstable();
        cs.insert(0, key as u64);
        total += h(&cs);
    }
    for c in t.cores() {
        let mut cs: Vec<u64> = (0..pl.len())
            .filter(|&i| t.cpus()[pl[i] as usize].core == c.id)
            .map(|i| 100 + classes[i] as u64)
            .collect();
        if cs.len() > 1 {
            cs.sort_unstable();
            total += h(&cs);
        }
    }
    if !symmetric {
        for (i, &c) in pl.iter().enumerate() {
            total += (t.cpus()[c as usize].package as u64 * (1 + classes[i] as u64 % 3)) as f64;
        }
    }
    total
}

/// Every valid placement, with one per core in force as `search` does.
fn brute_force(p: &OracleProblem) -> Vec<Vec<u32>> {
    let t = p.topology;
    let ok = |i: usize, c: usize| p.allowed[i].as_ref().is_none_or(|s| s.contains(c as u32));
    fn rec(
        i: usize,
        n: usize,
        opc: bool,
        t: &Topology,
        ok: &dyn Fn(usize, usize) -> bool,
        cur: &mut Vec<u32>,
        out: &mut Vec<Vec<u32>>,
    ) {
        if i == n {
            out.push(cur.clone());
            return;
        }
        for c in 0..t.cpus().len() {
            let taken = cur.iter().any(|&x| {
                x as usize == c || (opc && t.cpus()[x as usize].core == t.cpus()[c].core)
            });
            if !taken && ok(i, c) {
                cur.push(c as u32);
                rec(i + 1, n, opc, t, ok, cur, out);
                cur.pop();
            }
        }
    }
    let n = p.classes.len();
    let mut out = Vec::new();
    let opc = p.one_per_core && n <= t.cores().len();
    rec(0, n, opc, t, &ok, &mut Vec::new(), &mut out);
    if out.is_empty() && opc {
        rec(0, n, false, t, &ok, &mut Vec::new(), &mut out);
    }
    out
}

type LeafKey = (Vec<bool>, Option<(u32, String)>);
type CoreKey = Vec<LeafKey>;

/// A complete invariant of a placement's orbit, computed the plain way.
fn orbit_key(p: &OracleProblem, pl: &[u32]) -> Vec<Vec<Vec<CoreKey>>> {
    let t = p.topology;
    let show = |a: &Option<CpuSet>| a.as_ref().map_or("all".to_string(), |s| s.to_string());
    let leaf = |cpu: usize| -> LeafKey {
        let member = (p.allowed.iter())
            .map(|a| a.as_ref().is_none_or(|s| s.contains(cpu as u32)))
            .collect();
        let who = (0..pl.len())
            .find(|&i| pl[i] as usize == cpu)
            .map(|i| (p.classes[i], show(&p.allowed[i])));
        (member, who)
    };
    let mut pkgs: Vec<Vec<Vec<CoreKey>>> = Vec::new();
    for pkg in t.packages() {
        let mut slots: Vec<((usize, usize), Vec<CoreKey>)> = Vec::new();
        let mut cores = pkg.cores.clone();
        cores.sort_unstable();
        for c in cores {
            let core = &t.cores()[c];
            let mut k: CoreKey = core.cpus.iter().map(|&x| leaf(x)).collect();
            k.sort();
            let key = (core.llc, core.node);
            match slots.iter_mut().find(|(s, _)| *s == key) {
                Some((_, v)) => v.push(k),
                None => slots.push((key, vec![k])),
            }
        }
        pkgs.push(
            slots
                .into_iter()
                .map(|(_, mut v)| {
                    v.sort();
                    v
                })
                .collect(),
        );
    }
    if p.packages_symmetric {
        pkgs.sort();
    }
    pkgs
}

const SHAPES: [&str; 5] = [
    "pack:2 core:2 pu:1",
    "pack:2 numa:1 l3:1 core:2 pu:2",
    "pack:1 l3:2 core:2 pu:1",
    "pack:2 numa:1 l3:1 core:3 pu:1",
    "pack:2 numa:2 core:1 pu:2",
];

fn arb_problem() -> impl Strategy<Value = (usize, Vec<u32>, Vec<Option<u8>>, bool, bool, u64)> {
    (0..SHAPES.len(), 0usize..=4).prop_flat_map(|(shape, n)| {
        (
            Just(shape),
            proptest::collection::vec(0u32..3, n),
            proptest::collection::vec(proptest::option::weighted(0.3, any::<u8>()), n),
            any::<bool>(),
            any::<bool>(),
            any::<u64>(),
        )
    })
}

fn build<'a>(
    t: &'a Topology,
    classes: &[u32],
    masks: &[Option<u8>],
    symmetric: bool,
    opc: bool,
) -> OracleProblem<'a> {
    let ncpu = t.cpus().len() as u32;
    OracleProblem {
        topology: t,
        classes: classes.to_vec(),
        allowed: (masks.iter())
            .map(|m| m.map(|m| (0..ncpu.min(8)).filter(|&c| m >> c & 1 == 1).collect()))
            .collect(),
        packages_symmetric: symmetric,
        one_per_core: opc,
    }
}

proptest! {
    /// One placement per orbit: as many as distinct orbit keys over all
    /// placements, never two with one key.
    #[test]
    fn one_placement_per_orbit((shape, classes, masks, symmetric, opc, _seed) in arb_problem()) {
        let t = topo(SHAPES[shape]);
        let p = build(&t, &classes, &masks, symmetric, opc);
        let all = brute_force(&p);
        let orbits: std::collections::BTreeSet<_> = all.iter().map(|pl| orbit_key(&p, pl)).collect();
        let mut seen = std::collections::BTreeSet::new();
        let valid: std::collections::BTreeSet<_> = all.iter().cloned().collect();
        let n = Prepared::new(&p).map_or(0, |prep| prep.enumerate(&mut |pl| {
            assert!(valid.contains(pl), "{pl:?} is not a valid placement");
            assert!(seen.insert(orbit_key(&p, pl)), "{pl:?}: its orbit twice");
            true
        }, usize::MAX));
        prop_assert_eq!(n, orbits.len());
    }

    /// The enumerated optimum is the brute-force optimum for costs that
    /// respect the symmetry.
    #[test]
    fn exhaustive_optimum_is_the_optimum((shape, classes, masks, symmetric, opc, seed) in arb_problem()) {
        let t = topo(SHAPES[shape]);
        let p = build(&t, &classes, &masks, symmetric, opc);
        let mut cost = |pl: &[u32]| synthetic_cost(&t, &classes, symmetric, seed, pl);
        let all = brute_force(&p);
        let best = all.iter().map(|pl| cost(pl)).fold(f64::INFINITY, f64::min);
        match search(&p, &mut cost, 1_000_000, seed) {
            Ok(r) => {
                prop_assert!(r.exhaustive);
                prop_assert_eq!(r.cost, best);
                prop_assert_eq!(cost(&r.placement), r.cost);
                prop_assert!(all.contains(&r.placement));
            }
            Err(e) => prop_assert!(all.is_empty(), "{e}"),
        }
    }

    /// Local search returns valid placements, within budget, and the
    /// same for the same seed.
    #[test]
    fn local_search_is_valid_and_deterministic((shape, classes, masks, symmetric, opc, seed) in arb_problem()) {
        let t = topo(SHAPES[shape]);
        let p = build(&t, &classes, &masks, symmetric, opc);
        let mut cost = |pl: &[u32]| synthetic_cost(&t, &classes, symmetric, seed, pl);
        let all = brute_force(&p);
        let canonical = count_canonical(&p, usize::MAX);
        if canonical < 3 {
            return Ok(()); // too few for a budget below the count
        }
        let budget = canonical - 1;
        let a = search(&p, &mut cost, budget, seed).unwrap();
        let b = search(&p, &mut cost, budget, seed).unwrap();
        prop_assert!(!a.exhaustive);
        prop_assert!(a.evaluated <= budget);
        prop_assert!(all.contains(&a.placement), "{:?}", a.placement);
        prop_assert_eq!(cost(&a.placement), a.cost);
        prop_assert_eq!(a, b);
    }
}

#[test]
fn local_search_finds_a_separable_optimum() {
    // 4 LLC domains of 4 cores; 4 classes of 3 threads, each class
    // cheapest on "its" domain.
    let t = topo("pack:2 numa:2 l3:1 core:4 pu:2");
    let classes: Vec<u32> = (0..12).map(|i| i / 3).collect();
    let p = problem(&t, &classes, false);
    let w = |class: u32, llc: usize| {
        if llc == class as usize {
            0.0
        } else {
            10.0 + (class as usize * 7 + llc * 3) as f64
        }
    };
    let mut cost = |pl: &[u32]| -> f64 {
        (pl.iter().enumerate())
            .map(|(i, &c)| w(classes[i], t.cpus()[c as usize].llc))
            .sum()
    };
    let budget = 2000;
    assert!(count_canonical(&p, budget + 1) > budget);
    for seed in 0..5 {
        let r = search(&p, &mut cost, budget, seed).unwrap();
        assert!(!r.exhaustive);
        assert!(r.evaluated <= budget);
        assert_eq!(r.cost, 0.0, "seed {seed}: {r:?}");
        assert!(r.method.starts_with("local search: "), "{}", r.method);
        assert!(r.method.contains("from 6 starts"), "{}", r.method);
        // A core each.
        let mut cores: Vec<usize> = r
            .placement
            .iter()
            .map(|&c| t.cpus()[c as usize].core)
            .collect();
        cores.sort_unstable();
        cores.dedup();
        assert_eq!(cores.len(), 12);
    }
}

#[test]
fn allowed_cpus_are_respected() {
    // Every thread wants CPU 0's package, two may not go there.
    let t = topo("pack:2 numa:1 l3:1 core:4 pu:2");
    let mut p = problem(&t, &[0, 1, 2, 3, 4, 5], false);
    let pkg1 = CpuSet::parse_list("8-15").unwrap();
    p.allowed[1] = Some(pkg1.clone());
    p.allowed[4] = Some(pkg1.clone());
    let mut cost = |pl: &[u32]| -> f64 {
        pl.iter()
            .map(|&c| t.cpus()[c as usize].package as f64)
            .sum()
    };
    // Which of the 4 free threads join 1 and 4 on package 1: 1 + 4 + 6.
    assert_eq!(count_canonical(&p, 100), 11);
    for budget in [1_000_000, 5] {
        let r = search(&p, &mut cost, budget, 7).unwrap();
        assert_eq!(r.exhaustive, budget > 5, "{}", r.method);
        assert!(pkg1.contains(r.placement[1]) && pkg1.contains(r.placement[4]));
        assert_eq!(r.cost, 2.0, "{r:?}");
    }
}

#[test]
fn exhaustive_method_and_evaluations() {
    let t = topo("pack:2 numa:1 l3:1 core:4 pu:2");
    let p = problem(&t, &[0, 1, 2, 3, 4, 5, 6, 7], true);
    let mut calls = 0;
    let r = search(
        &p,
        &mut |pl| {
            calls += 1;
            pl.iter().map(|&c| c as f64).sum()
        },
        35,
        0,
    )
    .unwrap();
    assert!(r.exhaustive);
    assert_eq!(r.evaluated, 35);
    assert_eq!(calls, 35);
    assert_eq!(r.method, "exhaustive: 35 placements up to symmetry");
    let r = search(&p, &mut |_| 1.0, 34, 0).unwrap();
    assert!(!r.exhaustive && r.evaluated <= 34, "{r:?}");
}

#[test]
fn the_enumeration_stops_within_its_work() {
    let t = topo("pack:2 numa:1 l3:1 core:4 pu:2");
    let p = problem(&t, &[0, 1, 2, 3, 4, 5, 6, 7], true);
    let prep = Prepared::new(&p).unwrap();
    assert_eq!(
        prep.enumerate_within(&mut |_| true, usize::MAX, usize::MAX),
        (35, true)
    );
    // Stopped by the limit: complete as far as asked.
    assert_eq!(
        prep.enumerate_within(&mut |_| true, 10, usize::MAX),
        (10, true)
    );
    let (found, complete) = prep.enumerate_within(&mut |_| true, usize::MAX, 40);
    assert!(!complete && found < 35, "{found}");
    // The search's counting pass is allowed 4 CPUs tried per placement of
    // the budget, per CPU and thread class: plenty for 35 placements
    // with a budget of 35 (exhaustive), so the limit costs nothing there.
    let r = search(&p, &mut |_| 0.0, 35, 0).unwrap();
    assert!(r.exhaustive, "{}", r.method);
}
