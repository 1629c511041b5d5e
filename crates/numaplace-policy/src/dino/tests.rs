//! The DI and DINO policies on hand-built snapshots: what they pin, what
//! they leave alone, how memory follows.

use std::collections::{BTreeMap, BTreeSet};

use numaplace_model::{AddressSample, Counter, NodeMemory, Snapshot, Task, TaskGroup, Topology};
use proptest::prelude::*;

use super::*;
use crate::testutil::{counters, decide, pinned_tids, pins, process, task, threads_by_process};

/// A little world: threads with LLC miss rates, affinities that pins
/// change, memory per node per process.
struct Fake {
    topo: Topology,
    seq: u64,
    /// tid -> (tgid, mpki or None for "no counters", affinity).
    threads: BTreeMap<i32, (i32, Option<f64>, CpuSet)>,
    memory: BTreeMap<i32, BTreeMap<u32, u64>>,
    samples: BTreeMap<i32, Vec<AddressSample>>,
}

impl Fake {
    fn new(levels: &str) -> Fake {
        Fake {
            topo: Topology::synthetic(levels).unwrap(),
            seq: 0,
            threads: BTreeMap::new(),
            memory: BTreeMap::new(),
            samples: BTreeMap::new(),
        }
    }

    fn thread(&mut self, tid: i32, tgid: i32, mpki: f64) {
        let all = self.topo.span().clone();
        self.threads.insert(tid, (tgid, Some(mpki), all));
    }

    fn snapshot(&mut self) -> Snapshot {
        self.seq += 1;
        let mut s = Snapshot {
            seq: self.seq,
            interval_ns: 1_000_000_000,
            ..Snapshot::default()
        };
        for (&tid, (tgid, mpki, allowed)) in &self.threads {
            s.tasks.push(Task {
                start_time: 100 + tid as u64,
                comm: format!("app{tgid}"),
                last_cpu: allowed.first(),
                ..task(tid, *tgid, allowed)
            });
            if let Some(m) = mpki {
                s.counters.insert(
                    tid,
                    counters([
                        (Counter::Instructions, 1_000_000_000),
                        (Counter::LlcMisses, (*m * 1e6) as u64),
                    ]),
                );
            }
        }
        for (pid, threads) in threads_by_process(&s.tasks) {
            s.groups.push(TaskGroup {
                start_time: 100 + pid as u64,
                memory: self.memory.get(&pid).map(|m| {
                    m.iter()
                        .map(|(&n, &b)| {
                            (
                                n,
                                NodeMemory {
                                    anon: b,
                                    ..NodeMemory::default()
                                },
                            )
                        })
                        .collect()
                }),
                ..process(pid, &format!("app{pid}"), threads)
            });
        }
        s.samples = self.samples.clone();
        s
    }

    fn decide(&mut self, p: &mut dyn Policy) -> Plan {
        let s = self.snapshot();
        decide(p, &self.topo, &s)
    }

    /// Carries the pins out.
    fn apply(&mut self, plan: &Plan) {
        for (tid, cpus) in pins(plan) {
            self.threads.get_mut(&tid).unwrap().2 = cpus;
        }
    }

    fn node_of(&self, tid: i32) -> usize {
        let c = self.threads[&tid].2.first().unwrap();
        self.topo.cpu_by_os_id(c).unwrap().node
    }
}

/// Four domains of two cores (the paper's example machine), four devils
/// and four turtles of separate processes.
fn eight(f: &mut Fake) {
    for (k, mpki) in [40.0, 30.0, 20.0, 10.0, 0.5, 0.4, 0.3, 0.2]
        .into_iter()
        .enumerate()
    {
        f.thread(10 + k as i32, 10 + k as i32, mpki);
    }
}

#[test]
fn dino_spreads_devils_and_then_leaves_a_stable_world_alone() {
    let mut f = Fake::new("pack:4 numa:1 l3:1 core:2 pu:1");
    eight(&mut f);
    let mut dino = Dino::new(DinoParams::default());
    let plan = f.decide(&mut dino);
    assert_eq!(pinned_tids(&plan).len(), 8, "{plan:?}");
    f.apply(&plan);
    // One devil per domain.
    let domains: BTreeSet<usize> = (10..14).map(|t| f.node_of(t)).collect();
    assert_eq!(domains.len(), 4);
    for d in &plan.decisions {
        assert!(d.reason.starts_with("dino: "), "{}", d.reason);
        assert!(d.reason.contains(" slot ") && d.reason.contains("first placement"));
    }
    assert!(
        plan.decisions[0]
            .reason
            .contains("devil thread 10 of app10")
    );
    // Nothing changed: nothing moves.
    assert!(pinned_tids(&f.decide(&mut dino)).is_empty());
    // Miss rates change within the classes: still nothing moves (DI would).
    for (k, mpki) in [12.0, 60.0, 3.0, 90.0, 1.9, 0.1, 1.0, 1.5]
        .into_iter()
        .enumerate()
    {
        f.threads.get_mut(&(10 + k as i32)).unwrap().1 = Some(mpki);
    }
    assert!(pinned_tids(&f.decide(&mut dino)).is_empty());
    let mut di = DistributedIntensity::plain();
    let mut g = Fake::new("pack:4 numa:1 l3:1 core:2 pu:1");
    eight(&mut g);
    let plan = g.decide(&mut di);
    g.apply(&plan);
    assert!(pinned_tids(&g.decide(&mut di)).is_empty());
    for (k, mpki) in [12.0, 60.0, 3.0, 90.0, 1.9, 0.1, 1.0, 1.5]
        .into_iter()
        .enumerate()
    {
        g.threads.get_mut(&(10 + k as i32)).unwrap().1 = Some(mpki);
    }
    assert!(
        !pinned_tids(&g.decide(&mut di)).is_empty(),
        "DI follows every change of rank"
    );
}

/// \[Blagodurov11\]'s DI ranks afresh every round: two threads of about the same
/// miss rate trade cores (and, under DI-Migrate, memory) whenever their
/// rates cross. With hysteresis they keep last round's order until their
/// rates differ by more than it; a clear change still moves them.
#[test]
fn rank_hysteresis_keeps_threads_of_about_equal_intensity_in_place() {
    let di = |hysteresis: f64| {
        DistributedIntensity::migrate(DiParams {
            rank_hysteresis_percent: hysteresis,
            ..DiParams::default()
        })
    };
    let world = || {
        let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
        for (tid, mpki) in [(10, 30.0), (11, 8.3), (12, 8.0), (13, 0.5)] {
            f.thread(tid, tid, mpki);
        }
        f
    };
    for (hysteresis, crossing_moves) in [(0.0, true), (10.0, false)] {
        let mut f = world();
        let mut p = di(hysteresis);
        let plan = f.decide(&mut p);
        f.apply(&plan);
        let cpus = |f: &Fake| (f.threads[&11].2.clone(), f.threads[&12].2.clone());
        let (a, b) = cpus(&f);
        assert_ne!(a, b, "{plan:?}");
        // The two middle threads' rates cross by 4 %.
        f.threads.get_mut(&11).unwrap().1 = Some(8.0);
        f.threads.get_mut(&12).unwrap().1 = Some(8.3);
        let plan = f.decide(&mut p);
        assert_eq!(
            !pinned_tids(&plan).is_empty(),
            crossing_moves,
            "hysteresis {hysteresis}: {plan:?}"
        );
        f.apply(&plan);
        if !crossing_moves {
            assert_eq!(cpus(&f), (a.clone(), b.clone()));
            // A clear change (8.0 against 20.0) is followed.
            f.threads.get_mut(&12).unwrap().1 = Some(20.0);
            let plan = f.decide(&mut p);
            assert!(!pinned_tids(&plan).is_empty(), "{plan:?}");
            f.apply(&plan);
            assert_eq!(cpus(&f), (b, a));
        }
    }
    let bad = DiParams {
        rank_hysteresis_percent: f64::NAN,
        ..DiParams::default()
    };
    assert!(
        crate::Params::validate(&bad)
            .unwrap_err()
            .contains("rank-hysteresis-percent")
    );
}

#[test]
fn a_class_change_needs_seven_of_ten_intervals() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.thread(1, 1, 50.0);
    f.thread(2, 2, 40.0);
    f.thread(3, 3, 0.5);
    f.thread(4, 4, 0.5);
    let mut dino = Dino::new(DinoParams::default());
    let plan = f.decide(&mut dino);
    f.apply(&plan);
    // Thread 3 turns devil: after six intervals, nothing; at the seventh it moves.
    f.threads.get_mut(&3).unwrap().1 = Some(50.0);
    for _ in 0..6 {
        assert!(pinned_tids(&f.decide(&mut dino)).is_empty());
    }
    let plan = f.decide(&mut dino);
    f.apply(&plan);
    assert!(!pinned_tids(&plan).is_empty());
    assert!(
        plan.decisions
            .iter()
            .any(|d| d.reason.contains("its class changed from turtle")),
        "{plan:?}"
    );
}

#[test]
fn threads_without_counters_or_with_their_own_affinity_are_left_alone() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.thread(1, 1, 50.0);
    f.thread(2, 2, 40.0);
    f.threads.get_mut(&2).unwrap().1 = None;
    f.thread(3, 3, 30.0);
    f.threads.get_mut(&3).unwrap().2 = CpuSet::parse_list("0").unwrap();
    for p in [
        &mut Dino::new(DinoParams::default()) as &mut dyn Policy,
        &mut DistributedIntensity::plain(),
    ] {
        let plan = f.decide(p);
        assert_eq!(pinned_tids(&plan), vec![1], "{plan:?}");
    }
}

#[test]
fn memory_follows_sampled_addresses_and_stops_when_it_ping_pongs() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:1 pu:1");
    f.thread(1, 1, 50.0);
    let mut dino = Dino::new(DinoParams::default());
    let plan = f.decide(&mut dino);
    f.apply(&plan);
    let here = f.topo.nodes()[f.node_of(1)].os_id;
    let there = 1 - here;
    f.samples.insert(
        1,
        vec![AddressSample {
            address: 0x7000_0000,
            node: Some(there),
            write: false,
        }],
    );
    let plan = f.decide(&mut dino);
    let moves: Vec<_> = plan
        .decisions
        .iter()
        .filter(|d| matches!(d.action, Action::MoveWindow { .. }))
        .collect();
    assert_eq!(moves.len(), 1, "{plan:?}");
    let Action::MoveWindow {
        pages_before,
        pages_after,
        to_node,
        address,
        ..
    } = moves[0].action
    else {
        unreachable!()
    };
    assert_eq!(
        (pages_before, pages_after, to_node, address),
        (2048, 2048, here, 0x7000_0000)
    );
    assert!(moves[0].reason.contains("memory follows devil thread 1"));

    // The region bounces: the follower is told the thread is on the other
    // node, then back, and so on; after two bounces it stops.
    let mut follower = MemoryFollower::new(4096, true);
    let mut moved = 0;
    for round in 0..8u64 {
        let node = (round % 2) as u32;
        let mut s = f.snapshot();
        s.seq = round;
        s.samples.insert(
            1,
            vec![AddressSample {
                address: 0x7000_0000,
                node: Some(1 - node),
                write: true,
            }],
        );
        let mut plan = Plan::default();
        follower.plan(
            &s,
            &[Placed {
                tid: 1,
                tgid: 1,
                node,
                who: "t".into(),
            }],
            &mut plan,
        );
        moved += plan.decisions.len();
    }
    assert_eq!(moved, 3, "the first move and two bounces, then no more");
    assert_eq!(follower.frozen(), 1);
}

#[test]
fn without_samples_the_whole_process_follows_and_says_why() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:1 pu:1");
    f.thread(1, 1, 50.0);
    f.memory
        .insert(1, [(0, 64 << 20), (1, 64 << 20)].into_iter().collect());
    let mut migrate = DistributedIntensity::migrate(DiParams::default());
    let plan = f.decide(&mut migrate);
    let mv: Vec<_> = plan
        .decisions
        .iter()
        .filter(|d| matches!(d.action, Action::MoveMemory { .. }))
        .collect();
    assert_eq!(mv.len(), 1, "{plan:?}");
    assert!(
        mv[0].reason.contains("no sampled data addresses"),
        "{}",
        mv[0].reason
    );
    // DI-Plain never moves memory.
    let plan = f.decide(&mut DistributedIntensity::plain());
    assert!(plan.decisions.iter().all(|d| !d.action.moves_memory()));
}

proptest! {
    /// Whatever the machine and the threads: a pin names one whole core of
    /// the machine, each thread at most once, and only threads whose
    /// affinity is the whole machine or what the policy itself set.
    #[test]
    fn plans_stay_on_the_machine_and_off_threads_that_chose_their_cpus(
        packages in 1usize..4,
        cores in 1usize..4,
        smt in 1usize..3,
        threads in proptest::collection::vec((0.0f64..150.0, any::<bool>(), any::<bool>(), 0i32..4), 0..24),
        rounds in 1usize..4,
    ) {
        let mut f = Fake::new(&format!("pack:{packages} numa:1 l3:1 core:{cores} pu:{smt}"));
        let span = f.topo.span().clone();
        let core_sets: BTreeSet<CpuSet> = f.topo.cores().iter().map(|c| c.span.clone()).collect();
        for (k, (mpki, counted, narrow, process)) in threads.iter().enumerate() {
            let tid = 100 + k as i32;
            f.thread(tid, 1 + process, *mpki);
            if !counted {
                f.threads.get_mut(&tid).unwrap().1 = None;
            }
            if *narrow {
                f.threads.get_mut(&tid).unwrap().2 = CpuSet::parse_list("0").unwrap();
            }
        }
        let narrow: BTreeSet<i32> = f
            .threads
            .iter()
            .filter(|(_, (_, _, a))| *a != span)
            .map(|(t, _)| *t)
            .collect();
        let mut policies: Vec<Box<dyn Policy>> = vec![
            Box::new(Dino::new(DinoParams::default())),
            Box::new(DistributedIntensity::plain()),
            Box::new(DistributedIntensity::migrate(DiParams::default())),
        ];
        for p in policies.iter_mut() {
            let mut g = Fake { topo: f.topo.clone(), seq: 0, threads: f.threads.clone(), memory: BTreeMap::new(), samples: BTreeMap::new() };
            for _ in 0..rounds {
                let plan = g.decide(p.as_mut());
                let mut seen = BTreeSet::new();
                for d in &plan.decisions {
                    if let Action::Pin { task, cpus, .. } = &d.action {
                        prop_assert!(core_sets.contains(cpus), "{cpus} is not one core");
                        prop_assert!(cpus.is_subset(&span));
                        prop_assert!(seen.insert(task.tid), "thread {} pinned twice", task.tid);
                        prop_assert!(!narrow.contains(&task.tid), "thread {} chose its CPUs", task.tid);
                    }
                }
                g.apply(&plan);
            }
        }
    }
}

/// Many multithreaded processes, several threads per core: once placed,
/// nothing moves while nothing changes (the multithreaded pass does not
/// undo itself round after round).
#[test]
fn a_crowded_multithreaded_world_settles() {
    let mut f = Fake::new("pack:8 numa:1 l3:1 core:16 pu:2");
    for k in 0..1000 {
        f.thread(10_000 + k, 10_000 + (k % 20) * 1000, (k % 150) as f64);
    }
    let mut dino = Dino::new(DinoParams::default());
    let plan = f.decide(&mut dino);
    assert_eq!(pinned_tids(&plan).len(), 1000);
    f.apply(&plan);
    for _ in 0..3 {
        let plan = f.decide(&mut dino);
        assert!(
            pinned_tids(&plan).is_empty(),
            "{} pins",
            pinned_tids(&plan).len()
        );
    }
}

/// `--cpus` gives numaplace part of the machine: threads free to run on
/// all of it are placed within that part.
#[test]
fn a_restricted_machine_still_places_threads_that_may_run_anywhere() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.thread(1, 1, 50.0);
    f.thread(2, 2, 40.0);
    let part = f
        .topo
        .restrict(&CpuSet::parse_list("0,2").unwrap())
        .unwrap();
    let s = f.snapshot();
    let plan = decide(&mut Dino::new(DinoParams::default()), &part, &s);
    let cpus: BTreeSet<String> = plan
        .decisions
        .iter()
        .filter_map(|d| match &d.action {
            Action::Pin { cpus, .. } => Some(cpus.to_list_string()),
            _ => None,
        })
        .collect();
    assert_eq!(cpus, ["0", "2"].map(String::from).into_iter().collect());
}

/// Issue 16: with more runnable threads than CPUs, pins would stop the
/// kernel's balancing; DI leaves the threads to Linux and gives back the
/// ones it pinned. (DINO keeps placing: its slots change only with classes,
/// and the sweep measured it slower when it stepped aside.)
#[test]
fn a_crowded_machine_is_left_to_linux() {
    for p in [
        &mut DistributedIntensity::plain() as &mut dyn Policy,
        &mut DistributedIntensity::migrate(DiParams::default()),
    ] {
        let mut f = Fake::new("pack:2 numa:1 l3:1 core:1 pu:1");
        f.thread(1, 1, 50.0);
        f.thread(2, 2, 0.5);
        let plan = f.decide(p);
        assert_eq!(pinned_tids(&plan).len(), 2, "{}: {plan:?}", p.name());
        f.apply(&plan);
        // A third runnable thread on two CPUs.
        f.thread(3, 3, 30.0);
        let plan = f.decide(p);
        let all = f.topo.span().clone();
        let back = pins(&plan);
        assert_eq!(back.len(), 2, "{}: {plan:?}", p.name());
        assert!(back.iter().all(|(_, cpus)| *cpus == all));
        assert!(
            plan.decisions
                .iter()
                .all(|d| d.reason.contains("back to Linux")
                    && d.reason.contains("3 runnable threads on 2 CPUs")),
            "{plan:?}"
        );
        f.apply(&plan);
        assert!(pins(&f.decide(p)).is_empty(), "{}", p.name());
    }
}

/// Issue 16: DI-Plain's memory stays (§3.1), so it does not take a thread
/// away from the node holding its memory; a thread whose memory is spread
/// is placed as DI ranks it.
#[test]
fn di_plain_leaves_a_thread_beside_its_memory() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    // The most intensive thread ranks first: DI deals it to node 0.
    f.thread(1, 1, 50.0);
    f.thread(2, 2, 0.5);
    f.memory.insert(1, BTreeMap::from([(0, 0), (1, 1 << 30)]));
    // It takes, on node 1, the core DI dealt to thread 2, which goes
    // where thread 1 was dealt.
    let mut di = DistributedIntensity::plain();
    let plan = f.decide(&mut di);
    let node1 = f.topo.nodes()[1].span.clone();
    let first: BTreeMap<i32, CpuSet> = pins(&plan).into_iter().collect();
    assert!(first[&1].is_subset(&node1), "{plan:?}");
    assert!(!first[&2].is_subset(&node1), "{plan:?}");
    assert!(
        plan.decisions.iter().any(|d| d.reason.contains(
            "beside its memory (by its process's resident memory), in the place of thread 2"
        )),
        "{plan:?}"
    );
    // Spread memory: nothing to leave, it is placed.
    f.memory
        .insert(1, BTreeMap::from([(0, 1 << 29), (1, 1 << 29)]));
    let mut di = DistributedIntensity::plain();
    let plan = f.decide(&mut di);
    assert!(pinned_tids(&plan).contains(&1), "{plan:?}");
    // Pinned by DI, then its memory is found on the other node: it goes
    // there, in the place of the thread dealt there.
    f.apply(&plan);
    f.memory.insert(1, BTreeMap::from([(1, 1 << 30)]));
    let plan = f.decide(&mut di);
    let back: BTreeMap<i32, CpuSet> = pins(&plan).into_iter().collect();
    assert!(back[&1].is_subset(&node1), "{plan:?}");
    assert!(
        plan.decisions
            .iter()
            .any(|d| d.reason.contains("beside its memory")),
        "{plan:?}"
    );
    // With no thread dealt to its node to trade with (every thread's
    // memory there), it is left to Linux within the node while the node
    // has room: the rule of `roomed`, as before.
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.thread(1, 1, 50.0);
    f.thread(2, 2, 0.5);
    for tgid in [1, 2] {
        f.memory.insert(tgid, BTreeMap::from([(1, 1 << 30)]));
    }
    let plan = f.decide(&mut DistributedIntensity::plain());
    let first: BTreeMap<i32, CpuSet> = pins(&plan).into_iter().collect();
    assert_eq!(first.get(&1), Some(&node1), "{plan:?}");
    assert!(
        plan.decisions.iter().any(|d| d.reason.contains(
            "its memory is on node 1 (by its process's resident memory) and does not follow it"
        )),
        "{plan:?}"
    );
}

/// Issue 19: without sampled addresses (no PEBS/IBS, a VM without a PMU)
/// a thread's own NUMA hinting faults say where its memory is, before its
/// process's pages do, and the reason names them. Two threads of one
/// process: its pages mostly on node 0, but thread 1's accesses go to
/// node 1.
#[test]
fn hinting_faults_place_a_thread_by_its_own_accesses() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.thread(1, 1, 50.0);
    f.thread(2, 1, 0.5);
    f.memory
        .insert(1, BTreeMap::from([(0, 3 << 30), (1, 1 << 30)]));
    let node0 = f.topo.nodes()[0].span.clone();
    let node1 = f.topo.nodes()[1].span.clone();
    let faults = |n0: u64, n1: u64| numaplace_model::NumaFaults {
        memory: BTreeMap::from([(0, n0), (1, n1)]),
        preferred_node: None,
    };
    // DI ranks thread 1 first onto node 0; its faults (90 % on node 1)
    // put it beside its memory on node 1.
    let mut s = f.snapshot();
    s.numa_faults.insert(1, faults(30, 270));
    let plan = decide(&mut DistributedIntensity::plain(), &f.topo, &s);
    let got: BTreeMap<i32, CpuSet> = pins(&plan).into_iter().collect();
    assert!(got[&1].is_subset(&node1), "{plan:?}");
    assert!(
        plan.decisions
            .iter()
            .any(|d| d.reason.contains("(by its NUMA hinting faults)")),
        "{plan:?}"
    );
    // Too few faults to go by: the process's pages (node 0) decide, and DI
    // deals thread 1 to node 0 as ranked.
    let mut s = f.snapshot();
    s.numa_faults.insert(1, faults(1, 5));
    let plan = decide(&mut DistributedIntensity::plain(), &f.topo, &s);
    let got: BTreeMap<i32, CpuSet> = pins(&plan).into_iter().collect();
    assert!(got.get(&1).is_some_and(|c| c.is_subset(&node0)), "{plan:?}");
    // Samples, where there are enough, come first.
    let mut s = f.snapshot();
    s.numa_faults.insert(1, faults(30, 270));
    s.samples.insert(
        1,
        (0..16)
            .map(|k| AddressSample {
                address: 0x1000 * k,
                node: Some(0),
                write: false,
            })
            .collect(),
    );
    let plan = decide(&mut DistributedIntensity::plain(), &f.topo, &s);
    let got: BTreeMap<i32, CpuSet> = pins(&plan).into_iter().collect();
    assert!(got.get(&1).is_some_and(|c| c.is_subset(&node0)), "{plan:?}");
}

/// Issue 16: DINO's first placement counts where a thread runs beside its
/// memory as its old place (§3.3.3 minimises migrations), so of two
/// devils each keeps the devil slot on its memory's node.
#[test]
fn dino_first_places_a_thread_on_its_memorys_node() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.thread(1, 1, 50.0);
    f.thread(2, 2, 40.0);
    f.memory.insert(1, BTreeMap::from([(1, 1 << 30)]));
    f.memory.insert(2, BTreeMap::from([(0, 1 << 30)]));
    let mut dino = Dino::new(DinoParams::default());
    let plan = f.decide(&mut dino);
    f.apply(&plan);
    assert_eq!(f.node_of(1), 1, "{plan:?}");
    assert_eq!(f.node_of(2), 0, "{plan:?}");
    assert!(
        plan.decisions
            .iter()
            .all(|d| d.reason.contains("first placement"))
    );
}

/// Issue 16: a thread DI leaves beside its memory is left to Linux
/// within its memory's node, not the whole machine: given the machine,
/// Linux moved it across nodes as soon as DI pinned another thread onto
/// the core it ran on. A node full of threads DI deals there and threads
/// left beside their memory gives the rest back to the whole machine.
#[test]
fn di_leaves_a_thread_within_its_memorys_node() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:3 pu:1");
    // Thread 1's memory is spread; threads 2-4 have theirs on node 0, of
    // three cores: DI deals some of them to node 1.
    for (tid, mpki) in [(1, 50.0), (2, 40.0), (3, 30.0), (4, 20.0)] {
        f.thread(tid, tid, mpki);
        if tid > 1 {
            f.memory.insert(tid, BTreeMap::from([(0, 1 << 30)]));
        }
    }
    let node0 = f.topo.nodes()[0].span.clone();
    let mut di = DistributedIntensity::plain();
    let plan = f.decide(&mut di);
    f.apply(&plan);
    let within: Vec<i32> = (2..=4).filter(|&t| f.threads[&t].2 == node0).collect();
    assert!(!within.is_empty(), "{plan:?}");
    assert!(
        plan.decisions
            .iter()
            .any(|d| d.reason.contains("to node 0's CPUs")
                && d.reason.contains("left to Linux within them")),
        "{plan:?}"
    );
    // No anchored thread is on node 1; node 0 holds no more threads
    // than its cores (the others stay with Linux on the whole machine).
    for t in 2..=4 {
        let cpus = &f.threads[&t].2;
        assert!(
            cpus.is_subset(&node0) || cpus == f.topo.span(),
            "{t}: {plan:?}"
        );
    }
    let on0 = (1..=4).filter(|t| f.threads[t].2.is_subset(&node0)).count();
    assert!(on0 <= 3, "{plan:?}");
    // Kept there next round: nothing moves.
    assert!(f.decide(&mut di).is_empty());
}

/// A node too small for the threads whose memory it holds keeps its room
/// for the threads that had it, however their ranks cross (mix:56096:
/// bound threads traded the room and the whole machine every round).
#[test]
fn the_room_beside_memory_stays_with_the_threads_that_had_it() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:3 pu:1");
    // Four threads with their memory on node 0, of three cores: DI deals
    // the first and last in rank there, the middle two to node 1, and of
    // those, one has the room left on node 0.
    for (tid, mpki) in [(1, 50.0), (2, 20.0), (3, 19.0), (4, 1.0)] {
        f.thread(tid, tid, mpki);
        f.memory.insert(tid, BTreeMap::from([(0, 1 << 30)]));
    }
    let node0 = f.topo.nodes()[0].span.clone();
    let mut di = DistributedIntensity::plain();
    let plan = f.decide(&mut di);
    f.apply(&plan);
    let roomed = |f: &Fake| -> Vec<i32> {
        [2, 3]
            .into_iter()
            .filter(|t| f.threads[t].2 == node0)
            .collect()
    };
    let had = roomed(&f);
    assert_eq!(had.len(), 1, "{plan:?}");
    // Their ranks cross, again and again: the room stays where it is.
    for round in 0..4 {
        let (a, b) = if round % 2 == 0 {
            (19.0, 20.0)
        } else {
            (20.0, 19.0)
        };
        f.threads.get_mut(&2).unwrap().1 = Some(a);
        f.threads.get_mut(&3).unwrap().1 = Some(b);
        let plan = f.decide(&mut di);
        f.apply(&plan);
        assert_eq!(roomed(&f), had, "round {round}: {plan:?}");
    }
}

/// What `numaplace top` shows of DINO: each group's threads' classes, one
/// word where they agree, counts where they differ; nothing for a group
/// whose threads it has not classed.
#[test]
fn dino_says_the_classes_of_each_groups_threads() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    f.thread(10, 10, 150.0);
    f.thread(11, 10, 30.0);
    f.thread(12, 10, 40.0);
    f.thread(20, 20, 0.5);
    let all = f.topo.span().clone();
    f.threads.insert(30, (30, None, all));
    let mut dino = Dino::new(DinoParams::default());
    let s = f.snapshot();
    assert!(
        dino.classes(&s).is_empty(),
        "nothing classed before a round"
    );
    decide(&mut dino, &f.topo, &s);
    let classes = dino.classes(&s);
    assert_eq!(classes[&10], "super-devil 1, devil 2");
    assert_eq!(classes[&20], "turtle");
    assert!(
        !classes.contains_key(&30),
        "no counters, no class: {classes:?}"
    );
}

/// A devil whose memory anchors it to a node takes, there, the core DI
/// dealt to the devil of the nearest rank, which goes where the first was
/// dealt: the two devils run on two nodes, not side by side beside the
/// memory (mix:56096).
#[test]
fn an_anchored_devil_trades_places_with_the_devil_dealt_to_its_node() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    // Thread 1 (the most intensive) with its memory on node 1, thread 2
    // about as intensive with its memory spread, two spread turtles.
    for (tid, mpki) in [(1, 50.0), (2, 40.0), (3, 1.0), (4, 0.5)] {
        f.thread(tid, tid, mpki);
        let spread = BTreeMap::from([(0, 1 << 29), (1, 1 << 29)]);
        f.memory.insert(tid, spread);
    }
    f.memory.insert(1, BTreeMap::from([(1, 1 << 30)]));
    let node = |f: &Fake, tid: i32| -> Vec<usize> {
        let cpus = &f.threads[&tid].2;
        (f.topo.nodes().iter())
            .filter(|n| cpus.is_subset(&n.span))
            .map(|n| n.id)
            .collect()
    };
    let mut di = DistributedIntensity::plain();
    let plan = f.decide(&mut di);
    f.apply(&plan);
    assert_eq!(node(&f, 1), [1], "beside its memory: {plan:?}");
    assert_eq!(node(&f, 2), [0], "the other devil apart: {plan:?}");
}

/// Two threads of one process in one class whose miss rates cross every
/// round keep the cores they have: which of them takes which of their
/// two places changes nothing of the spread (mix:56096: three threads of
/// one program traded nodes, and their memory, every round).
#[test]
fn threads_of_one_process_and_class_keep_their_cores_as_their_ranks_cross() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.thread(1, 1, 20.0);
    f.thread(2, 1, 19.0);
    f.thread(3, 3, 1.0);
    f.thread(4, 4, 0.5);
    let mut di = DistributedIntensity::plain();
    let plan = f.decide(&mut di);
    f.apply(&plan);
    let had = (f.threads[&1].2.clone(), f.threads[&2].2.clone());
    assert_ne!(had.0, had.1, "{plan:?}");
    for round in 0..4 {
        let (a, b) = if round % 2 == 0 {
            (19.0, 20.0)
        } else {
            (20.0, 19.0)
        };
        f.threads.get_mut(&1).unwrap().1 = Some(a);
        f.threads.get_mut(&2).unwrap().1 = Some(b);
        let plan = f.decide(&mut di);
        f.apply(&plan);
        assert!(plan.is_empty(), "round {round}: {plan:?}");
        assert_eq!((f.threads[&1].2.clone(), f.threads[&2].2.clone()), had);
    }
}
