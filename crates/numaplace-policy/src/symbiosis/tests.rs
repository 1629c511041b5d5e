use std::collections::{BTreeMap, BTreeSet};

use numaplace_model::{
    Action, AddressSample, CacheSignature, CpuSet, GroupKind, Snapshot, Task, TaskGroup, Topology,
};

use super::live::{Filter, footprint};
use super::partition::{Graph, bisect, partition, proportional_counts};
use super::place::{Member, Options, co_run_cost, interference, place, repair};
use super::*;
use crate::Params;

fn bits(ones: &[usize]) -> Filter {
    let mut f = Filter::new(6);
    for &i in ones {
        f.set(i);
    }
    f
}

/// Fig. 7(b) in spirit: App1's RBV against the CFs of the cores running
/// App2 (disjoint footprint) and App3 (nearly the same lines). XOR counts
/// the entries where exactly one has a one, so App1/App2 has the higher
/// symbiosis and App1 co-exists better with App2.
#[test]
fn symbiosis_of_hand_made_vectors_follows_fig_7b() {
    let app1 = bits(&[0, 1, 2, 3]);
    let app2 = bits(&[8, 9]);
    let app3 = bits(&[0, 1, 2, 3, 4]);
    assert_eq!(app1.count_ones(), 4, "occupancy weight");
    assert_eq!(app1.xor_count_ones(&app2), 6);
    assert_eq!(app1.xor_count_ones(&app3), 1);
    // A core filter is the union of what ran there.
    let mut cf = app2.clone();
    cf.union_with(&app3);
    assert_eq!(cf.count_ones(), 7);
    assert_eq!(app1.xor_count_ones(&cf), 3);
}

#[test]
fn footprints_of_different_processes_do_not_share_lines() {
    let addrs: Vec<u64> = (0..32).map(|i| 0x1000 + 64 * i).collect();
    let a = footprint(&addrs, 10, 13);
    let same = footprint(&addrs, 10, 13);
    let other = footprint(&addrs, 11, 13);
    assert_eq!(a.count_ones(), 32);
    assert_eq!(a.xor_count_ones(&same), 0);
    assert!(
        a.xor_count_ones(&other) > 48,
        "{}",
        a.xor_count_ones(&other)
    );
    // Two samples in one line are one entry.
    assert_eq!(footprint(&[0x1000, 0x1008], 10, 13).count_ones(), 1);
}

fn random_graph(n: usize, seed: u64) -> Graph {
    let mut s = seed;
    let mut g = Graph::new(n);
    for a in 0..n {
        for b in a + 1..n {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            g.set(a, b, ((s >> 33) % 100) as f64);
        }
    }
    g
}

#[test]
fn exact_bisection_is_the_minimum_and_kernighan_lin_is_close() {
    for seed in 0..5 {
        let g = random_graph(12, seed);
        let nodes: Vec<usize> = (0..12).collect();
        let (a, b) = bisect(&g, &nodes, 6, 16);
        let exact = g.cut(&a, &b);
        // No swap of one pair improves the exact cut.
        for &x in &a {
            for &y in &b {
                let a2: Vec<usize> = a.iter().map(|&v| if v == x { y } else { v }).collect();
                let b2: Vec<usize> = b.iter().map(|&v| if v == y { x } else { v }).collect();
                assert!(g.cut(&a2, &b2) >= exact - 1e-9);
            }
        }
        let (ka, kb) = bisect(&g, &nodes, 6, 2);
        assert_eq!((ka.len(), kb.len()), (6, 6));
        let kl = g.cut(&ka, &kb);
        assert!(
            kl >= exact - 1e-9 && kl <= exact * 1.15,
            "seed {seed}: KL {kl} exact {exact}"
        );
    }
}

#[test]
fn hierarchical_partition_keeps_the_sizes() {
    let g = random_graph(10, 3);
    let nodes: Vec<usize> = (0..10).collect();
    let counts = proportional_counts(10, &[1, 1, 1, 1]);
    assert_eq!(counts, vec![3, 3, 2, 2]);
    let parts = partition(&g, &nodes, &counts, 16);
    assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), counts);
    let all: BTreeSet<usize> = parts.iter().flatten().copied().collect();
    assert_eq!(all.len(), 10);
    assert_eq!(proportional_counts(8, &[4, 4]), vec![4, 4]);
    assert_eq!(proportional_counts(5, &[6, 2]), vec![4, 1]);
}

fn member(tid: i32, tgid: i32, weight: f64, cpu: u32) -> Member {
    Member {
        tid,
        tgid,
        weight,
        entries: 1024.0,
        cpu,
        symbiosis: BTreeMap::new(),
        now: None,
    }
}

/// Mending a placement moves as few tasks as it can: a newcomer takes a
/// free core (beside the footprint it conflicts with least) and nobody
/// else moves; a core left idle while another time-shares takes one task
/// from it; with nothing placed there is nothing to mend.
#[test]
fn mending_places_newcomers_and_evens_out_without_moving_the_rest() {
    let placed = |tid, tgid, w, now| Member {
        now: Some(now),
        ..member(tid, tgid, w, 0)
    };
    // Two domains of two cores; three tasks placed, a heavy newcomer.
    let m = vec![
        placed(1, 1, 900.0, (0, 0)),
        placed(2, 2, 20.0, (1, 0)),
        placed(3, 3, 30.0, (1, 1)),
        member(4, 4, 800.0, 0),
    ];
    let g = interference(Algorithm::WeightedInterferenceGraph, &m);
    let p = repair(&m, &g, &[2, 2]).expect("three tasks have places");
    assert_eq!(
        &p[..3],
        &[(0, 0), (1, 0), (1, 1)],
        "nobody placed moves: {p:?}"
    );
    assert_eq!(p[3], (0, 1), "the only free core: {p:?}");
    // A newcomer that last ran in domain 1 (no core of it) goes there when
    // both domains have a free core.
    let m = vec![
        placed(1, 1, 900.0, (0, 0)),
        placed(2, 2, 20.0, (1, 0)),
        Member {
            now: Some((1, usize::MAX)),
            ..member(3, 3, 500.0, 4)
        },
    ];
    let g = interference(Algorithm::WeightedInterferenceGraph, &m);
    let p = repair(&m, &g, &[2, 2]).expect("two tasks have places");
    assert_eq!(p, vec![(0, 0), (1, 0), (1, 1)]);
    // Tasks that ended left core (0, 1) idle while (0, 0) holds three.
    let m = vec![
        placed(1, 1, 900.0, (0, 0)),
        placed(2, 2, 20.0, (0, 0)),
        placed(3, 3, 30.0, (0, 0)),
    ];
    let g = interference(Algorithm::WeightedInterferenceGraph, &m);
    let p = repair(&m, &g, &[2]).expect("all have places");
    let on_idle = p.iter().filter(|&&x| x == (0, 1)).count();
    assert_eq!(on_idle, 1, "one task moves to the idle core: {p:?}");
    assert_eq!(p.iter().filter(|&&x| x == (0, 0)).count(), 2, "{p:?}");
    // Nothing placed: nothing to mend.
    let fresh = vec![member(1, 1, 10.0, 0), member(2, 2, 10.0, 1)];
    let g = interference(Algorithm::WeightedInterferenceGraph, &fresh);
    assert_eq!(repair(&fresh, &g, &[2]), None);
}

/// Fig. 8's setting: 4 processes on 2 cores sharing a cache. Each
/// algorithm puts the two heavy footprints on one core.
#[test]
fn every_algorithm_pairs_the_two_heavy_footprints_on_one_core() {
    let m = vec![
        member(1, 1, 900.0, 0),
        member(2, 2, 40.0, 0),
        member(3, 3, 800.0, 1),
        member(4, 4, 60.0, 1),
    ];
    for alg in Algorithm::ALL {
        let o = Options {
            algorithm: alg,
            two_phase: true,
            exact_limit: 16,
        };
        let p = place(&m, &[2], o);
        assert_eq!(p[0].1, p[2].1, "{alg:?}: {p:?}");
        assert_ne!(p[0].1, p[1].1, "{alg:?}: {p:?}");
        let g = interference(alg, &m);
        let other = [(0, 0), (0, 0), (0, 1), (0, 1)];
        assert!(co_run_cost(&g, &p) < co_run_cost(&g, &other), "{alg:?}");
    }
}

/// §3.3.3's point: two tiny footprints look like a strong conflict to the
/// plain graph (low symbiosis) but not to the weighted one.
#[test]
fn the_weighted_graph_discounts_small_footprints() {
    let small = [member(1, 1, 2.0, 0), member(2, 2, 3.0, 1)];
    let big = [member(3, 3, 600.0, 0), member(4, 4, 700.0, 1)];
    let e = |alg, m: &[Member]| interference(alg, m).get(0, 1);
    assert!(e(Algorithm::InterferenceGraph, &small) > e(Algorithm::InterferenceGraph, &big));
    assert!(
        e(Algorithm::WeightedInterferenceGraph, &small)
            < e(Algorithm::WeightedInterferenceGraph, &big)
    );
}

/// §3.3.4: threads of one process are grouped by weight sorting first and
/// kept so; on two LLC domains the hogs go to different domains.
#[test]
fn two_phase_and_llc_domains() {
    // Process 10: four threads; process 20: two light single threads.
    let m = vec![
        member(11, 10, 500.0, 0),
        member(12, 10, 490.0, 0),
        member(13, 10, 20.0, 1),
        member(14, 10, 10.0, 1),
    ];
    let p = place(
        &m,
        &[2],
        Options {
            algorithm: Algorithm::WeightedInterferenceGraph,
            two_phase: true,
            exact_limit: 16,
        },
    );
    assert_eq!(p[0].1, p[1].1, "{p:?}");
    assert_eq!(p[2].1, p[3].1, "{p:?}");
    let hogs = vec![
        member(1, 1, 900.0, 0),
        member(2, 2, 850.0, 0),
        member(3, 3, 10.0, 4),
        member(4, 4, 12.0, 4),
    ];
    for alg in Algorithm::ALL {
        let p = place(
            &hogs,
            &[2, 2],
            Options {
                algorithm: alg,
                two_phase: true,
                exact_limit: 16,
            },
        );
        assert_ne!(p[0].0, p[1].0, "{alg:?}: {p:?}");
    }
}

#[test]
fn bad_parameters_are_refused_with_the_key() {
    let bad: Result<SymbiosisParams, _> = serde_json::from_str(r#"{"algorithm": "min-cut"}"#);
    let e = bad.unwrap_err().to_string();
    assert!(
        e.contains("unknown variant `min-cut`") && e.contains("weight-sorting"),
        "{e}"
    );
    let e = serde_json::from_str::<SymbiosisParams>(r#"{"exact-limit": 40}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("exact-limit 40") && e.contains("2 to 20"), "{e}");
    let ok: SymbiosisParams = serde_json::from_str(r#"{"algorithm": "weight-sorting"}"#).unwrap();
    assert_eq!(ok.algorithm, Algorithm::WeightSorting);
    assert!(SymbiosisParams::default().validate().is_ok());
}

fn task(tid: i32, cpu: u32, span: &CpuSet) -> Task {
    Task {
        tid,
        tgid: tid,
        start_time: 1,
        comm: format!("app{tid}"),
        state: 'R',
        last_cpu: Some(cpu),
        allowed_cpus: span.clone(),
        allowed_mems: Default::default(),
        confined_cpus: None,
        manager: None,
        utime: 0,
        stime: 0,
        vcpu: None,
    }
}

fn snapshot(topo: &Topology, weights: &[(i32, u32, u32)]) -> Snapshot {
    let mut s = Snapshot::default();
    for &(tid, cpu, w) in weights {
        s.tasks.push(task(tid, cpu, topo.span()));
        s.groups.push(TaskGroup {
            pid: tid,
            start_time: 1,
            comm: format!("app{tid}"),
            cmdline: vec![],
            cgroup: None,
            kind: GroupKind::Process,
            threads: vec![tid],
            memory: None,
        });
        s.signatures.insert(
            tid,
            CacheSignature {
                cpu,
                occupancy_weight: w,
                symbiosis: BTreeMap::new(),
                entries: 1024,
            },
        );
    }
    s
}

/// A whole decision: pins with reasons that give the numbers and the
/// partner; a second round with the plan applied changes nothing.
#[test]
fn decide_pins_with_reasons_and_then_holds() {
    let topo = Topology::synthetic("pack:1 numa:1 l3:1 core:2 pu:1").unwrap();
    let mut s = snapshot(&topo, &[(1, 0, 900), (2, 0, 30), (3, 1, 800), (4, 1, 50)]);
    let managed: BTreeSet<i32> = [1, 2, 3, 4].into();
    let mut p = Symbiosis::new(SymbiosisParams::default());
    let plan = p.decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    assert_eq!(plan.decisions.len(), 4, "{plan:?}");
    let mut cpu = BTreeMap::new();
    for d in &plan.decisions {
        let Action::Pin { task, cpus, .. } = &d.action else {
            panic!("{d:?}")
        };
        cpu.insert(task.tid, cpus.clone());
        assert!(d.reason.contains("occupancy weight"), "{}", d.reason);
        assert!(
            d.reason.contains("time-shares the core with thread"),
            "{}",
            d.reason
        );
    }
    assert_eq!(cpu[&1], cpu[&3]);
    let r1 = &plan
        .decisions
        .iter()
        .find(|d| d.action.pid() == 1)
        .unwrap()
        .reason;
    assert!(r1.contains("thread 3 of app3 (weight 800"), "{r1}");
    for t in &mut s.tasks {
        t.allowed_cpus = cpu[&t.tid].clone();
    }
    let again = p.decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    assert!(again.is_empty(), "{again:?}");
}

/// Without hardware signatures the policy builds them from samples.
#[test]
fn live_hosts_get_signatures_from_sampled_addresses() {
    let topo = Topology::synthetic("pack:1 numa:1 l3:1 core:2 pu:1").unwrap();
    let mut s = snapshot(&topo, &[(1, 0, 0), (2, 0, 0), (3, 1, 0), (4, 1, 0)]);
    s.signatures.clear();
    let lines = [4000u64, 50, 3000, 80];
    for (k, tid) in [1, 2, 3, 4].into_iter().enumerate() {
        let v = (0..lines[k])
            .map(|i| AddressSample {
                address: 0x10_0000 + 64 * i,
                node: None,
                write: false,
            })
            .collect();
        s.samples.insert(tid, v);
    }
    let mut p = Symbiosis::new(SymbiosisParams::default());
    assert!(p.needs().samples);
    let managed: BTreeSet<i32> = [1, 2, 3, 4].into();
    let plan = p.decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    let pin = |tid: i32| {
        plan.decisions
            .iter()
            .find_map(|d| match &d.action {
                Action::Pin { task, cpus, .. } if task.tid == tid => Some(cpus.clone()),
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(pin(1), pin(3), "{plan:?}");
    assert_ne!(pin(1), pin(2), "{plan:?}");
    assert!(plan.decisions[0].reason.contains("sampled addresses"));
}

/// With SMT, the places are hardware threads: four tasks on a machine of
/// two 2-way cores get a hardware thread each, and eight pair up two by
/// two on CPUs. Two tasks have a core each whatever is done, and one
/// cache: nothing to pair, so they are left to Linux. Six would pair up
/// on two CPUs and be alone on the other two: they are left to Linux
/// among the cache's four CPUs, which it shares evenly (here all of them:
/// nothing to do).
#[test]
fn places_are_hardware_threads_first_of_every_core_first() {
    let topo = Topology::synthetic("pack:1 numa:1 l3:1 core:2 pu:2").unwrap();
    let cores: Vec<CpuSet> = topo.cores().iter().map(|c| c.span.clone()).collect();
    let managed: BTreeSet<i32> = (1..=6).collect();
    let two = snapshot(&topo, &[(1, 0, 100), (2, 0, 200)]);
    let plan = Symbiosis::new(SymbiosisParams::default()).decide(&View {
        topology: &topo,
        snapshot: &two,
        managed: &managed,
    });
    assert!(
        plan.is_empty(),
        "fewer tasks than cores, one cache: {plan:?}"
    );
    let six: Vec<(i32, u32, u32)> = (1..=6).map(|t| (t, 0, 100 * t as u32)).collect();
    let s = snapshot(&topo, &six);
    let plan = Symbiosis::new(SymbiosisParams::default()).decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    assert!(plan.is_empty(), "{plan:?}");
    let managed: BTreeSet<i32> = (1..=8).collect();
    for n in [4usize, 8] {
        let weights: Vec<(i32, u32, u32)> =
            (1..=n as i32).map(|t| (t, 0, 100 * t as u32)).collect();
        let s = snapshot(&topo, &weights);
        let mut p = Symbiosis::new(SymbiosisParams::default());
        let plan = p.decide(&View {
            topology: &topo,
            snapshot: &s,
            managed: &managed,
        });
        let mut per_cpu: BTreeMap<u32, usize> = BTreeMap::new();
        for d in &plan.decisions {
            let Action::Pin { cpus, .. } = &d.action else {
                panic!("{d:?}")
            };
            assert_eq!(cpus.len(), 1, "one hardware thread per pin: {cpus:?}");
            *per_cpu.entry(cpus.first().unwrap()).or_default() += 1;
        }
        assert_eq!(per_cpu.values().sum::<usize>(), n, "{plan:?}");
        let used_cores = cores
            .iter()
            .filter(|c| per_cpu.keys().any(|&cpu| c.contains(cpu)))
            .count();
        assert_eq!(used_cores, 2, "{n} tasks: every core used: {per_cpu:?}");
        let most = per_cpu.values().copied().max().unwrap();
        assert_eq!(most, n.div_ceil(4), "{n} tasks over 4 CPUs: {per_cpu:?}");
    }
}

/// On a machine of two nodes, a task whose memory is on one node is
/// placed there, never away from it: the pairing is made within the node.
#[test]
fn tasks_are_paired_within_their_node_never_moved_to_another() {
    let topo = Topology::synthetic("pack:2 numa:1 l3:2 core:2 pu:1").unwrap();
    // Four tasks whose memory is on node 0 (two caches of two cores),
    // seen on both nodes: placed on node 0's caches, none elsewhere.
    let weights: Vec<(i32, u32, u32)> = (1..=4)
        .map(|t| (t, (t % 4) as u32, 100 * t as u32))
        .collect();
    let mut s = snapshot(&topo, &weights);
    for g in &mut s.groups {
        g.memory = Some(BTreeMap::from([(
            0,
            numaplace_model::NodeMemory {
                anon: 1 << 30,
                file: 0,
                huge: 0,
            },
        )]));
    }
    let managed: BTreeSet<i32> = (1..=4).collect();
    let plan = Symbiosis::new(SymbiosisParams::default()).decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    let node0 = topo.nodes()[0].span.clone();
    assert!(!plan.is_empty());
    for d in &plan.decisions {
        let Action::Pin { cpus, .. } = &d.action else {
            panic!("{d:?}")
        };
        assert!(cpus.is_subset(&node0), "moved off its node: {d:?}");
    }
}

/// Threads of one process first-touch their own data where they run: a
/// thread whose sampled addresses are on node 1 is placed on node 1 even
/// though its process's memory is mostly on node 0 (before, all eight
/// threads of such a VM went to node 0's one cache and memory controller:
/// +18 % on a generated mix).
#[test]
fn a_thread_goes_to_the_node_of_its_own_memory_not_its_process() {
    let topo = Topology::synthetic("pack:2 numa:1 l3:1 core:4 pu:1").unwrap();
    // One process (tgid 1) of four threads, running on node 0.
    let mut s = snapshot(&topo, &[(1, 0, 100), (2, 1, 100), (3, 2, 100), (4, 3, 100)]);
    s.groups.truncate(1);
    s.groups[0].threads = vec![1, 2, 3, 4];
    s.groups[0].memory = Some(BTreeMap::from([
        (
            0,
            numaplace_model::NodeMemory {
                anon: 3 << 30,
                file: 0,
                huge: 0,
            },
        ),
        (
            1,
            numaplace_model::NodeMemory {
                anon: 1 << 30,
                file: 0,
                huge: 0,
            },
        ),
    ]));
    for t in &mut s.tasks {
        t.tgid = 1;
        // Threads 1-3 touched their data on node 0, thread 4 on node 1.
        let node = if t.tid == 4 { 1 } else { 0 };
        let v = (0..32)
            .map(|i| AddressSample {
                address: 0x10_0000 * t.tid as u64 + 64 * i,
                node: Some(node),
                write: false,
            })
            .collect();
        s.samples.insert(t.tid, v);
    }
    let managed: BTreeSet<i32> = [1].into();
    let plan = Symbiosis::new(SymbiosisParams::default()).decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    let node1 = topo.nodes()[1].span.clone();
    let pin = |tid: i32| {
        plan.decisions.iter().find_map(|d| match &d.action {
            Action::Pin { task, cpus, .. } if task.tid == tid => Some(cpus.clone()),
            _ => None,
        })
    };
    let four = pin(4).expect("thread 4 moves to its memory's node");
    assert!(four.is_subset(&node1), "{plan:?}");
    for tid in 1..=3 {
        if let Some(c) = pin(tid) {
            assert!(
                !c.is_subset(&node1),
                "thread {tid} left its memory: {plan:?}"
            );
        }
    }
}

/// Ten tasks on two caches of four CPUs: five to each cache, which would
/// put two tasks on one CPU and one on each of the others for as long as
/// they run. Each task is held on its cache's CPUs instead, where Linux
/// shares them evenly; eight (two to a CPU on each cache) are paired.
#[test]
fn tasks_outnumbering_a_caches_cpus_unevenly_share_them_by_turns() {
    let topo = Topology::synthetic("pack:2 numa:1 l3:1 core:2 pu:2").unwrap();
    let managed: BTreeSet<i32> = (1..=10).collect();
    let ten: Vec<(i32, u32, u32)> = (1..=10).map(|t| (t, 0, 100 * t as u32)).collect();
    let s = snapshot(&topo, &ten);
    let plan = Symbiosis::new(SymbiosisParams::default()).decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    let mut per_cache: BTreeMap<String, usize> = BTreeMap::new();
    for d in &plan.decisions {
        let Action::Pin { cpus, .. } = &d.action else {
            panic!("{d:?}")
        };
        *per_cache.entry(cpus.to_list_string()).or_default() += 1;
        assert!(
            d.reason.contains("with its 5 tasks")
                && d.reason.contains("2 of them would take turns 2 to a CPU"),
            "{}",
            d.reason
        );
    }
    assert_eq!(
        per_cache,
        BTreeMap::from([("0-3".to_string(), 5), ("4-7".to_string(), 5)]),
        "{plan:?}"
    );
    let eight: Vec<(i32, u32, u32)> = (1..=8).map(|t| (t, 0, 100 * t as u32)).collect();
    let s = snapshot(&topo, &eight);
    let plan = Symbiosis::new(SymbiosisParams::default()).decide(&View {
        topology: &topo,
        snapshot: &s,
        managed: &managed,
    });
    assert_eq!(plan.decisions.len(), 8, "{plan:?}");
    for d in &plan.decisions {
        let Action::Pin { cpus, .. } = &d.action else {
            panic!("{d:?}")
        };
        assert_eq!(cpus.len(), 1, "paired on one CPU: {d:?}");
    }
}
