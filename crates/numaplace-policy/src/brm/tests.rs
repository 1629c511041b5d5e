//! Tests of `brm`.

use std::collections::{BTreeMap, BTreeSet};

use numaplace_model::{Snapshot, TaskGroup};

use super::*;
use crate::testutil::{counters, decide, kvm, pins, process, task, threads_by_process};

// ---- Update, by hand ----

fn state(unc: &[Option<f64>], prob: u8, bias: usize) -> ThreadState {
    ThreadState {
        ewma: None,
        sampled_on: None,
        unc: unc.to_vec(),
        prob,
        bias,
        reset_at: u64::MAX,
        reset_node: None,
        backoff: 0,
    }
}

#[test]
fn update_on_two_nodes() {
    // Here (0) records 200; node 1 saw 150: one node lower, +1, bias 1.
    let mut st = state(&[None, Some(150.0)], 10, 0);
    st.update(0, 200.0);
    assert_eq!((st.unc[0], st.prob, st.bias), (Some(200.0), 11, 1));
    // Here records 100, below node 1: −1, the bias stays where it was.
    st.update(0, 100.0);
    assert_eq!((st.prob, st.bias), (10, 1));
    // Equal is not higher: −1.
    st.update(0, 150.0);
    assert_eq!(st.prob, 9);
    // Node 1 never measured counts as lower: +1 and bias 1.
    let mut st = state(&[None, None], 0, 0);
    st.update(0, 80.0);
    assert_eq!((st.prob, st.bias), (1, 1));
}

#[test]
fn update_on_four_nodes_counts_every_node_and_biases_to_the_lowest() {
    // Here is node 2 at 300; nodes 0, 1, 3 saw 250, 120, 400.
    let mut st = state(&[Some(250.0), Some(120.0), None, Some(400.0)], 50, 2);
    st.update(2, 300.0);
    // Node 0 lower: +1, bias 0 (300 > 250); node 1 lower: +1, bias 1
    // (250 > 120); node 3 higher: −1.
    assert_eq!((st.prob, st.bias), (51, 1));
    // A node not measured is lower than any record: it takes the bias.
    let mut st = state(&[Some(250.0), Some(120.0), None, None], 50, 2);
    st.update(2, 300.0);
    assert_eq!((st.prob, st.bias), (53, 3));
    // Here the lowest: −3, the bias untouched (the paper's form).
    let mut st = state(&[Some(250.0), Some(120.0), None, Some(400.0)], 50, 1);
    st.update(2, 100.0);
    assert_eq!((st.prob, st.bias), (47, 1));
    // Two lower nodes, the bias already on the lower one: it stays.
    let mut st = state(&[Some(90.0), Some(120.0), None, Some(400.0)], 0, 0);
    st.update(2, 300.0);
    assert_eq!((st.prob, st.bias), (1, 0), "+1 +1 −1 from 0 is 1");
}

#[test]
fn probability_stays_within_0_and_100() {
    let mut st = state(&[None, None, None, None], 99, 0);
    st.update(0, 500.0);
    assert_eq!(st.prob, 100);
    st.update(0, 500.0);
    assert_eq!(st.prob, 100);
    let mut st = state(&[Some(1.0), Some(900.0), Some(900.0), Some(900.0)], 1, 1);
    st.update(0, 2.0);
    assert_eq!(st.prob, 0);
    st.update(0, 2.0);
    assert_eq!(st.prob, 0);
}

#[test]
fn a_difference_within_the_noise_margin_is_not_higher() {
    // Exactly the margin above node 1's record is not higher: −1.
    let mut st = state(&[None, Some(200.0)], 10, 0);
    st.update(0, 200.0 * (1.0 + NOISE_MARGIN));
    assert_eq!((st.prob, st.bias), (9, 0));
    // Just above it: +1 and bias 1.
    st.update(0, 200.0 * (1.0 + NOISE_MARGIN) + 0.5);
    assert_eq!((st.prob, st.bias), (10, 1));
}

#[test]
fn the_moving_average_starts_again_on_another_node() {
    let mut st = ThreadState::new(2, 0, 10);
    assert_eq!(st.observe(0, 100.0), 100.0);
    assert_eq!(st.observe(0, 180.0), 110.0);
    // Moved to node 1: the samples from node 0 are dropped.
    assert_eq!(st.observe(1, 300.0), 300.0);
    assert_eq!(st.observe(1, 140.0), 280.0);
    assert_eq!(st.sampled_on, Some(1));
}

#[test]
fn resets_back_off_while_a_thread_stays_and_not_once_it_moved() {
    let mut rng = Rng::new(11);
    let mut st = ThreadState::new(2, 0, 0);
    let mut periods = Vec::new();
    for _ in 0..6 {
        let round = st.reset_at;
        assert!(st.maybe_reset(round, 0, &mut rng, 10, 10));
        periods.push(st.reset_at - round);
    }
    // First reset: nothing to compare with; then doubling up to 2^MAX.
    assert_eq!(periods, vec![10, 20, 40, 80, 80, 80]);
    assert_eq!(st.backoff, MAX_BACKOFF);
    // On another node at the next reset: the plain period again.
    let round = st.reset_at;
    assert!(st.maybe_reset(round, 1, &mut rng, 10, 10));
    assert_eq!((st.backoff, st.reset_at - round), (0, 10));
}

// ---- BiasRandomPick and the generator ----

#[test]
fn draws_replay_and_pick_follows_the_probability() {
    let (mut a, mut b) = (Rng::new(7), Rng::new(7));
    let xs: Vec<u8> = (0..1000).map(|_| a.draw()).collect();
    let ys: Vec<u8> = (0..1000).map(|_| b.draw()).collect();
    assert_eq!(xs, ys);
    assert!(xs.iter().all(|&x| x < 100));
    assert_ne!(
        xs,
        (0..1000).map(|_| Rng::new(8).draw()).collect::<Vec<_>>()
    );
    // The first draws of seed 7, pinned so a change of generator shows.
    assert_eq!(Rng::new(7).draw_n(5), vec![94, 74, 38, 64, 64]);
    let mut r = Rng::new(7);
    let mut moves = 0;
    for _ in 0..10_000 {
        let d = r.draw();
        assert!(!bias_random_pick(0, d), "probability 0 never moves");
        assert!(bias_random_pick(100, d), "probability 100 always moves");
        moves += usize::from(bias_random_pick(37, d));
    }
    assert!((3400..4000).contains(&moves), "{moves} of 10000 at 37 %");
    // Every value 0..100 comes up.
    let seen: BTreeSet<u8> = xs.into_iter().collect();
    assert_eq!(seen.len(), 100);
    let mut r = Rng::new(3);
    for _ in 0..1000 {
        assert!((20..=60).contains(&r.between(60, 20)));
    }
}

impl Rng {
    fn draw_n(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.draw()).collect()
    }
}

// ---- EWMA, system-wide penalty, reset ----

#[test]
fn moving_average_is_seven_eighths_old() {
    assert_eq!(ewma(None, 240.0), 240.0);
    assert_eq!(ewma(Some(240.0), 80.0), 220.0);
    let mut st = ThreadState::new(2, 0, 10);
    assert_eq!(st.observe(0, 100.0), 100.0);
    assert_eq!(st.observe(0, 180.0), 110.0);
    assert_eq!(st.observe(0, 110.0), 110.0);
    // After 20 samples of 0 from 800, 800·(7/8)^20 is left.
    let mut e = Some(800.0);
    for _ in 0..20 {
        e = Some(ewma(e, 0.0));
    }
    assert!((e.unwrap() - 800.0 * 0.875f64.powi(20)).abs() < 1e-9);
}

#[test]
fn system_penalty_weighs_by_requests() {
    // 100 cycles × 3000 requests and 400 × 1000: 700,000 / 4000.
    assert_eq!(system_penalty([(100.0, 3000), (400.0, 1000)]), Some(175.0));
    assert_eq!(system_penalty([(100.0, 0)]), None);
    assert_eq!(system_penalty([]), None);
}

#[test]
fn penalties_are_forgotten_after_the_drawn_period() {
    let mut rng = Rng::new(5);
    let mut st = state(&[Some(100.0), Some(200.0)], 40, 1);
    st.reset_at = 30;
    assert!(!st.maybe_reset(29, 0, &mut rng, 20, 60));
    assert_eq!(st.unc, vec![Some(100.0), Some(200.0)]);
    assert!(st.maybe_reset(30, 0, &mut rng, 20, 60));
    assert_eq!(st.unc, vec![None, None]);
    assert_eq!((st.prob, st.bias), (40, 1), "only the table is reset");
    assert!((50..=90).contains(&st.reset_at), "{}", st.reset_at);
    let next = st.reset_at;
    st.unc[0] = Some(1.0);
    assert!(!st.maybe_reset(next - 1, 0, &mut rng, 20, 60));
    assert!(st.maybe_reset(next, 0, &mut rng, 20, 60));
    assert_eq!(st.unc, vec![None, None]);
}

// ---- A little world ----

/// One thread of the fake world.
#[derive(Clone)]
struct Thread {
    tgid: i32,
    comm: String,
    vcpu: Option<u32>,
    allowed: CpuSet,
    /// Where it runs while its affinity is the whole machine.
    last_cpu: u32,
    state: char,
    /// Uncore requests per interval; `None`: no counters.
    requests: Option<u64>,
}

struct Fake {
    topo: Topology,
    seq: u64,
    threads: BTreeMap<i32, Thread>,
    /// Uncore penalty a thread sees on each node (kernel id).
    penalty: Vec<f64>,
    /// Extra runnable threads of other processes, by CPU.
    busy: Vec<u32>,
    /// Memory per node (kernel id, bytes) of a process, by pid; a process
    /// not here has its memory unread.
    memory: BTreeMap<i32, BTreeMap<u32, u64>>,
    /// What the VMs' guests hint (`Snapshot::guest_hints`).
    hints: BTreeMap<i32, std::collections::BTreeSet<u32>>,
}

impl Fake {
    fn new(levels: &str) -> Fake {
        let topo = Topology::synthetic(levels).unwrap();
        let n = topo.nodes().len();
        Fake {
            topo,
            seq: 0,
            threads: BTreeMap::new(),
            penalty: vec![100.0; n],
            busy: Vec::new(),
            memory: BTreeMap::new(),
            hints: BTreeMap::new(),
        }
    }

    fn thread(&mut self, tid: i32, tgid: i32, comm: &str, vcpu: Option<u32>, cpu: u32) {
        self.threads.insert(
            tid,
            Thread {
                tgid,
                comm: comm.into(),
                vcpu,
                allowed: self.topo.span().clone(),
                last_cpu: cpu,
                state: 'R',
                requests: Some(1_000_000),
            },
        );
    }

    fn cpu_of(&self, t: &Thread) -> u32 {
        if t.allowed.contains(t.last_cpu) {
            t.last_cpu
        } else {
            t.allowed.first().unwrap()
        }
    }

    fn node_of(&self, tid: i32) -> u32 {
        let c = self.cpu_of(&self.threads[&tid]);
        let n = self.topo.cpu_by_os_id(c).unwrap().node;
        self.topo.nodes()[n].os_id
    }

    fn snapshot(&mut self) -> Snapshot {
        self.seq += 1;
        let mut s = Snapshot {
            seq: self.seq,
            interval_ns: 100_000_000,
            guest_hints: self.hints.clone(),
            ..Snapshot::default()
        };
        for (&tid, t) in &self.threads {
            s.tasks.push(Task {
                start_time: 100 + tid as u64,
                comm: t.comm.clone(),
                state: t.state,
                last_cpu: Some(self.cpu_of(t)),
                vcpu: t.vcpu,
                ..task(tid, t.tgid, &t.allowed)
            });
            if let Some(r) = t.requests {
                let node = self.node_of(tid) as usize;
                let occupancy = (self.penalty[node] * r as f64) as u64;
                s.counters.insert(
                    tid,
                    counters([
                        (Counter::UncoreRequests, r),
                        (Counter::UncoreOccupancy, occupancy),
                    ]),
                );
            }
        }
        let members = threads_by_process(&s.tasks);
        for (k, &cpu) in self.busy.iter().enumerate() {
            s.tasks.push(Task {
                comm: "other".into(),
                last_cpu: Some(cpu),
                ..task(90_000 + k as i32, 90_000, self.topo.span())
            });
        }
        for (pid, threads) in members {
            let mut g = TaskGroup {
                start_time: 100 + pid as u64,
                ..process(pid, &format!("app{pid}"), threads)
            };
            g.memory = self.memory.get(&pid).map(|m| {
                m.iter()
                    .map(|(&n, &anon)| {
                        let mem = numaplace_model::NodeMemory {
                            anon,
                            file: 0,
                            huge: 0,
                        };
                        (n, mem)
                    })
                    .collect()
            });
            if self.threads[&g.threads[0]].vcpu.is_some() {
                g.comm = "qemu-system-x86".into();
                g.kind = kvm("web", "kvm-vcpu fds");
            }
            s.groups.push(g);
        }
        s
    }

    fn decide(&mut self, p: &mut dyn Policy) -> Plan {
        let s = self.snapshot();
        decide(p, &self.topo, &s)
    }

    fn apply(&mut self, plan: &Plan) {
        for (tid, cpus) in pins(plan) {
            self.threads.get_mut(&tid).unwrap().allowed = cpus;
        }
    }
}

fn id(tid: i32) -> TaskId {
    TaskId {
        tid,
        start_time: 100 + tid as u64,
    }
}

fn vcpus_only() -> BrmParams {
    BrmParams::default()
}

#[test]
fn a_thread_on_the_worse_node_moves_to_the_better_one_and_stays_mostly() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    f.penalty = vec![300.0, 100.0];
    f.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    let mut brm = Brm::new(vcpus_only());
    let mut moved_at = None;
    for round in 0..100 {
        let plan = f.decide(&mut brm);
        f.apply(&plan);
        if f.node_of(1) == 1 {
            moved_at = Some(round);
            let (_, cpus) = &pins(&plan)[0];
            assert_eq!(cpus.to_list_string(), "4-7");
            let r = &plan.decisions[0].reason;
            assert!(
                r.starts_with(
                    "brm: vCPU 0 (thread 1) of vm:web from node 0 to node 1 (CPUs 4-7): \
                         system-wide uncore penalty 300 cycles here, node 1 not measured yet; \
                         its own 300 cycles; migration probability "
                ),
                "{r}"
            );
            assert!(r.contains(" > draw "), "{r}");
            break;
        }
    }
    let moved_at = moved_at.expect("moved to node 1 within 100 rounds");
    // With seed 1 it takes this many rounds; replaying gives the same.
    let mut g = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    g.penalty = vec![300.0, 100.0];
    g.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    let mut again = Brm::new(vcpus_only());
    let mut replay = None;
    for round in 0..100 {
        let plan = g.decide(&mut again);
        g.apply(&plan);
        if g.node_of(1) == 1 {
            replay = Some(round);
            break;
        }
    }
    assert_eq!(replay, Some(moved_at));
    // From then on, resets send it exploring now and then, but it
    // spends most rounds on the better node.
    let mut on_one = 0;
    for _ in 0..300 {
        let plan = f.decide(&mut brm);
        f.apply(&plan);
        on_one += usize::from(f.node_of(1) == 1);
    }
    assert!(on_one > 240, "{on_one} of 300 rounds on node 1");
}

/// While one thread of a process explores a node it has not measured, the
/// process's other threads hold still; another process's threads do not.
#[test]
fn the_threads_of_a_process_hold_while_one_of_them_explores() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    f.penalty = vec![300.0, 100.0];
    f.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    f.thread(2, 1, "CPU 1/KVM", Some(1), 1);
    f.thread(3, 3, "CPU 0/KVM", Some(0), 2);
    let mut brm = Brm::new(vcpus_only());
    let mut first_move: BTreeMap<i32, u64> = BTreeMap::new();
    for round in 0..300u64 {
        let plan = f.decide(&mut brm);
        f.apply(&plan);
        for (tid, _) in pins(&plan) {
            first_move.entry(tid).or_insert(round);
        }
    }
    let (a, b) = (first_move[&1], first_move[&2]);
    assert!(
        a.abs_diff(b) >= EXPLORATION_ROUNDS,
        "threads 1 and 2 of one process left node 0 at rounds {a} and {b}"
    );
    let c = first_move[&3];
    assert!(
        c.abs_diff(a.min(b)) < EXPLORATION_ROUNDS,
        "thread 3, another process, should not wait for them: rounds {a}, {b}, {c}"
    );
}

/// On four nodes the tour is slower: a node recorded as high as the
/// current one lowers the probability as much as an unmeasured one
/// raises it, so a thread that has seen two nodes as bad as its own
/// stops exploring until a reset sends it off again.
#[test]
fn on_four_nodes_the_best_node_is_found_after_a_reset() {
    let mut f = Fake::new("pack:4 numa:1 l3:1 core:2 pu:1");
    f.penalty = vec![300.0, 300.0, 300.0, 100.0];
    f.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    let mut brm = Brm::new(BrmParams::default());
    let mut first = None;
    let mut on_best = 0;
    for round in 0..1000 {
        let plan = f.decide(&mut brm);
        f.apply(&plan);
        if f.node_of(1) == 3 {
            first.get_or_insert(round);
            on_best += 1;
        }
    }
    let first = first.expect("found node 3");
    assert!(first < 300, "{first}");
    assert!(on_best > 650, "{on_best} of 1000 rounds on node 3");
}

#[test]
fn candidates_by_comm_vcpu_and_request_rate() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    f.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    f.thread(2, 2, "postgres", None, 1);
    f.thread(3, 3, "worker", None, 2);
    f.threads.get_mut(&3).unwrap().requests = Some(50_000_000);
    f.thread(4, 4, "quiet", None, 3);
    let seen = |p: BrmParams, f: &mut Fake| {
        let mut brm = Brm::new(p);
        f.decide(&mut brm);
        (1..=4)
            .filter(|&t| brm.state(id(t)).is_some())
            .collect::<Vec<i32>>()
    };
    // By default vCPUs and threads above 5e6 requests a second: every
    // thread here sends at least 1e7.
    assert_eq!(seen(BrmParams::default(), &mut f), vec![1, 2, 3, 4]);
    let vcpus_only = BrmParams {
        min_uncore_requests_per_s: None,
        ..BrmParams::default()
    };
    assert_eq!(seen(vcpus_only, &mut f), vec![1]);
    let by_comm = BrmParams {
        vcpus: false,
        comms: vec!["postgres*".into()],
        min_uncore_requests_per_s: None,
        ..BrmParams::default()
    };
    assert_eq!(seen(by_comm, &mut f), vec![2]);
    // The process's name counts too.
    let by_process = BrmParams {
        vcpus: false,
        comms: vec!["app3".into()],
        min_uncore_requests_per_s: None,
        ..BrmParams::default()
    };
    assert_eq!(seen(by_process, &mut f), vec![3]);
    // 50,000,000 requests in 100 ms is 5e8 per second; the others 1e7.
    let inferred = BrmParams {
        vcpus: false,
        min_uncore_requests_per_s: Some(1e8),
        ..BrmParams::default()
    };
    assert_eq!(seen(inferred.clone(), &mut f), vec![3]);
    // Once a candidate, always: the rate falling does not untag it.
    let mut brm = Brm::new(inferred);
    f.decide(&mut brm);
    f.threads.get_mut(&3).unwrap().requests = Some(10);
    f.decide(&mut brm);
    assert!(brm.state(id(3)).is_some());
    // Without counters a candidate is not scored (and nothing moves).
    f.threads.get_mut(&1).unwrap().requests = None;
    let mut brm = Brm::new(BrmParams {
        min_uncore_requests_per_s: None,
        ..BrmParams::default()
    });
    for _ in 0..50 {
        assert!(f.decide(&mut brm).is_empty());
    }
    assert!(brm.state(id(1)).is_none());
}

#[test]
fn threads_that_chose_their_cpus_are_never_pinned() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    f.penalty = vec![500.0, 100.0];
    f.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    f.thread(2, 1, "CPU 1/KVM", Some(1), 1);
    f.threads.get_mut(&2).unwrap().allowed = CpuSet::parse_list("0-5").unwrap();
    let mut brm = Brm::new(BrmParams::default());
    let mut moved = BTreeSet::new();
    for _ in 0..200 {
        let plan = f.decide(&mut brm);
        moved.extend(pins(&plan).into_iter().map(|(t, _)| t));
        f.apply(&plan);
    }
    assert_eq!(moved, [1].into_iter().collect());
    assert!(brm.state(id(2)).is_none());
    // Thread 1 sets its own CPUs after a pin of ours: forgotten.
    f.threads.get_mut(&1).unwrap().allowed = CpuSet::parse_list("2").unwrap();
    assert!(f.decide(&mut brm).is_empty());
    assert!(brm.state(id(1)).is_none());
}

#[test]
fn no_move_into_a_full_node_while_home_has_an_idle_cpu() {
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.penalty = vec![400.0, 100.0];
    f.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    // Node 1 (CPUs 2-3) has two runnable threads: no idle CPU; node 0
    // has thread 1 alone on two CPUs.
    f.busy = vec![2, 3];
    let mut brm = Brm::new(BrmParams::default());
    for _ in 0..200 {
        assert!(f.decide(&mut brm).is_empty());
    }
    let st = brm.state(id(1)).unwrap();
    assert!(st.prob > 50, "the probability is kept: {}", st.prob);
    assert_eq!(st.bias, 1);
    // Node 0 full as well: node 1 is not measured yet, and an exploration
    // into a node without an idle CPU would measure time-sharing, not the
    // uncore (issue 16): it still waits, the probability kept.
    f.busy = vec![1, 2, 3];
    assert!(f.decide(&mut brm).is_empty());
    assert!(brm.state(id(1)).unwrap().prob > 50);
    // Node 1 measured as better: with both nodes full, the move goes ahead.
    let st = brm.threads.get_mut(&id(1)).unwrap();
    (st.unc[1], st.prob) = (Some(50.0), 100);
    let plan = f.decide(&mut brm);
    assert_eq!(pins(&plan).len(), 1, "{plan:?}");
    assert_eq!(brm.state(id(1)).unwrap().prob, 0);
    // Node 1 with an idle CPU: also.
    let mut g = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    g.penalty = vec![400.0, 100.0];
    g.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    g.busy = vec![2];
    let mut brm = Brm::new(BrmParams::default());
    let moved = (0..200).any(|_| {
        let p = g.decide(&mut brm);
        g.apply(&p);
        !p.is_empty()
    });
    assert!(moved);
}

#[test]
fn moves_within_a_round_count_against_the_idle_cpus() {
    // Two vCPUs on node 0 (two CPUs a node), one of them asleep; node 1
    // holds one other runnable thread, so one idle CPU. Both vCPUs want
    // node 1 for sure this round: the first takes its idle CPU, the
    // second stays, since node 0 then has an idle CPU and node 1 none.
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:2 pu:1");
    f.penalty = vec![400.0, 100.0];
    f.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    f.thread(2, 1, "CPU 1/KVM", Some(1), 1);
    f.threads.get_mut(&2).unwrap().state = 'S';
    f.busy = vec![2];
    let mut brm = Brm::new(BrmParams::default());
    f.decide(&mut brm);
    for t in [1, 2] {
        let st = brm.threads.get_mut(&id(t)).unwrap();
        st.unc[1] = None;
        (st.prob, st.bias) = (100, 1);
    }
    let plan = f.decide(&mut brm);
    assert_eq!(pins(&plan).len(), 1, "{plan:?}");
    assert_eq!(pins(&plan)[0].0, 1);
    assert_eq!(brm.state(id(1)).unwrap().prob, 0);
    assert_eq!(brm.state(id(2)).unwrap().prob, 100, "kept");
}

#[test]
fn replays_exactly_with_a_seed() {
    let run = |seed: u64| {
        let mut f = Fake::new("pack:4 numa:1 l3:1 core:2 pu:1");
        f.penalty = vec![300.0, 200.0, 100.0, 250.0];
        for k in 0..4 {
            f.thread(
                10 + k,
                1,
                &format!("CPU {k}/KVM"),
                Some(k as u32),
                2 * k as u32,
            );
        }
        let mut brm = Brm::new(BrmParams {
            seed,
            ..BrmParams::default()
        });
        let mut all = Vec::new();
        for _ in 0..100 {
            let plan = f.decide(&mut brm);
            f.apply(&plan);
            all.extend(plan.decisions.into_iter().map(|d| d.reason));
        }
        all
    };
    let a = run(9);
    assert!(!a.is_empty());
    assert_eq!(a, run(9));
    assert_ne!(a, run(10));
}

// ---- Where [Rao13]'s premise does not hold (issue 16, brm/premise.rs) ----

/// Rounds in which `f` pinned anything, with the pins.
fn run(f: &mut Fake, brm: &mut Brm, rounds: usize) -> Vec<(i32, CpuSet, String)> {
    let mut out = Vec::new();
    for _ in 0..rounds {
        let plan = f.decide(brm);
        f.apply(&plan);
        for (d, (tid, cpus)) in plan.decisions.iter().zip(pins(&plan)) {
            out.push((tid, cpus, d.reason.clone()));
        }
    }
    out
}

#[test]
fn a_single_thread_program_next_to_its_memory_does_not_explore() {
    // Node 1 would look better, but thread 1's memory is all on node 0,
    // where it runs (first touch): a trip makes every access remote.
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    f.penalty = vec![300.0, 100.0];
    f.thread(1, 1, "mcf", None, 0);
    f.memory.insert(1, BTreeMap::from([(0, 100 << 20)]));
    let params = BrmParams {
        comms: vec!["mcf".into()],
        ..BrmParams::default()
    };
    let mut brm = Brm::new(params.clone());
    assert_eq!(run(&mut f, &mut brm, 300), vec![]);
    // Its memory on node 1 instead ([Rao13]'s setting, memory placed
    // elsewhere): it explores as Algorithm 1 does.
    f.memory.insert(1, BTreeMap::from([(1, 100 << 20)]));
    let mut brm = Brm::new(params);
    assert!(!run(&mut f, &mut brm, 300).is_empty());
}

#[test]
fn threads_whose_memory_follows_them_do_not_explore() {
    // Four threads, two on each node, the memory half on each (each
    // thread's first touch): none explores.
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    f.penalty = vec![300.0, 100.0];
    for (tid, cpu) in [(1, 0), (2, 1), (3, 4), (4, 5)] {
        f.thread(tid, 1, "lu", None, cpu);
    }
    f.memory
        .insert(1, BTreeMap::from([(0, 100 << 20), (1, 100 << 20)]));
    let params = BrmParams {
        comms: vec!["lu".into()],
        ..BrmParams::default()
    };
    let mut brm = Brm::new(params.clone());
    assert_eq!(run(&mut f, &mut brm, 300), vec![]);
    // All the memory on node 0 ([Rao13] Fig. 3's micro-benchmark): the
    // threads explore.
    f.memory.insert(1, BTreeMap::from([(0, 200 << 20)]));
    let mut brm = Brm::new(params);
    assert!(!run(&mut f, &mut brm, 300).is_empty());
}

#[test]
fn an_exploration_tries_the_node_holding_the_memory_first() {
    // Four nodes; thread 1 runs on node 0, its memory is bound to node 2.
    // Algorithm 1 would try node 1 first (the first not measured).
    let mut f = Fake::new("pack:4 numa:1 l3:1 core:2 pu:1");
    f.thread(1, 1, "milc", None, 0);
    f.memory.insert(1, BTreeMap::from([(2, 100 << 20)]));
    let mut brm = Brm::new(BrmParams {
        comms: vec!["milc".into()],
        ..BrmParams::default()
    });
    let pins = run(&mut f, &mut brm, 50);
    let (tid, cpus, reason) = pins.first().expect("explored");
    assert_eq!((*tid, cpus.to_list_string().as_str()), (1, "4-5"));
    assert!(
        reason.contains("exploring node 2 first: it holds its process's memory"),
        "{reason}"
    );
    assert!(
        reason.ends_with("its process's memory 0 % on node 0, 100 % on node 2"),
        "{reason}"
    );
}

#[test]
fn explorations_are_spread_over_the_nodes_not_measured() {
    // Eight nodes, one single-thread program on each, memory unread:
    // Algorithm 1's first node not measured would send seven of them to
    // node 0 at once. Drawn among the nodes with an idle CPU, their first
    // trips go to several nodes.
    let mut f = Fake::new("pack:8 numa:1 l3:1 core:2 pu:1");
    for k in 0..8 {
        f.thread(k + 1, k + 1, "job", None, 2 * k as u32);
    }
    let mut brm = Brm::new(BrmParams {
        comms: vec!["job".into()],
        ..BrmParams::default()
    });
    let mut first: BTreeMap<i32, String> = BTreeMap::new();
    for (tid, cpus, reason) in run(&mut f, &mut brm, 30) {
        if let std::collections::btree_map::Entry::Vacant(e) = first.entry(tid) {
            assert!(reason.contains("not measured"), "{reason}");
            e.insert(cpus.to_list_string());
        }
    }
    let places: BTreeSet<&String> = first.values().collect();
    assert!(first.len() >= 4, "{first:?}");
    assert!(places.len() >= 3, "first trips all to {places:?}");
}

#[test]
fn premise_rules_by_hand() {
    use premise::{Stay, home, stays};
    let one = BTreeMap::from([(0, 0.95), (1, 0.05)]);
    assert_eq!(home(&one), Some(0));
    assert_eq!(
        stays(&one, 0, 1, 1),
        Some(Stay::LocalSingleThread { share: 0.95 })
    );
    assert_eq!(stays(&one, 1, 1, 1), None, "away from its memory");
    assert_eq!(
        stays(&one, 0, 4, 4),
        None,
        "memory on one node: [Rao13]'s setting"
    );
    let half = BTreeMap::from([(0, 0.5), (1, 0.5)]);
    assert_eq!(home(&half), None);
    assert!(stays(&half, 0, 4, 2).is_some());
    assert_eq!(
        stays(&half, 0, 4, 4),
        None,
        "all four here, half the memory away"
    );
}

/// \[Rao13\] §4.3: where a VM's guest tags vCPUs (`numaplace guest`), the
/// tagged ones are its candidates, only while tagged; a guest that says
/// nothing leaves the configuration's rules; `guest-hints = false` ignores
/// the guest.
#[test]
fn a_vms_guest_hints_decide_its_candidates_while_they_last() {
    use std::collections::BTreeSet;
    let mut f = Fake::new("pack:2 numa:1 l3:1 core:4 pu:1");
    f.penalty = vec![300.0, 100.0];
    f.thread(1, 1, "CPU 0/KVM", Some(0), 0);
    f.thread(2, 1, "CPU 1/KVM", Some(1), 1);
    let params = BrmParams {
        min_uncore_requests_per_s: None,
        ..BrmParams::default()
    };
    let candidates = |brm: &Brm| {
        (1..=2)
            .filter(|&t| brm.state(id(t)).is_some())
            .collect::<Vec<i32>>()
    };
    let mut brm = Brm::new(params.clone());
    f.decide(&mut brm);
    assert_eq!(candidates(&brm), vec![1, 2], "a silent guest: vcpus = true");
    // The guest tags vCPU 1 (thread 2): it alone, and vCPU 0 is forgotten.
    f.hints.insert(1, BTreeSet::from([1]));
    f.decide(&mut brm);
    assert_eq!(candidates(&brm), vec![2]);
    // It moves to the better node, and the reason says why it is a candidate.
    let moves = run(&mut f, &mut brm, 300);
    assert!(!moves.is_empty(), "vCPU 1 never moved");
    assert!(moves.iter().all(|(tid, _, _)| *tid == 2), "{moves:?}");
    assert!(
        moves[0]
            .2
            .contains("vCPU 1 (thread 2, a candidate by guest hint)"),
        "{}",
        moves[0].2
    );
    // The guest clears it: no candidate of this VM any more, and the pin
    // BRM made is given back.
    f.hints.insert(1, BTreeSet::new());
    assert_ne!(f.threads[&2].allowed, *f.topo.span(), "BRM pinned it");
    let back = run(&mut f, &mut brm, 1);
    assert_eq!(candidates(&brm), Vec::<i32>::new());
    assert_eq!(back.len(), 1, "{back:?}");
    assert_eq!((back[0].0, &back[0].1), (2, f.topo.span()));
    assert!(
        back[0].2.contains("back to Linux") && back[0].2.contains("guest hint cleared"),
        "{}",
        back[0].2
    );
    assert!(run(&mut f, &mut brm, 100).is_empty());
    // Off: the guest is not listened to.
    let mut deaf = Brm::new(BrmParams {
        guest_hints: false,
        ..params
    });
    f.decide(&mut deaf);
    assert_eq!(candidates(&deaf), vec![1, 2]);
}

/// On a machine of more than [`reach::REACH_NODES`] nodes a thread
/// compares and goes only to the nodes nearest its process's memory (by
/// the machine's distances), and its own; on one of that many or fewer,
/// every node (Algorithm 1 unchanged).
#[test]
fn a_thread_reaches_only_the_nodes_nearest_its_memory() {
    // Two packages of four nodes: 12 within a package, 30 across.
    let mut desc = Topology::synthetic("pack:2 numa:4 l3:1 core:2 pu:1")
        .unwrap()
        .to_desc();
    let n = desc.nodes.len();
    let package = |i: usize| i / 4;
    desc.distances = Some(
        (0..n * n)
            .map(|k| match (k / n, k % n) {
                (a, b) if a == b => 10,
                (a, b) if package(a) == package(b) => 12,
                _ => 30,
            })
            .collect(),
    );
    let t = Topology::new(desc).unwrap();
    let nodes: Vec<usize> = (0..n).collect();
    let on = |r: Vec<bool>| -> Vec<usize> { (0..r.len()).filter(|&d| r[d]).collect() };
    // Memory on node 5, the thread on node 1: node 5's package, and node 1.
    let shares = BTreeMap::from([(5, 0.7), (6, 0.3)]);
    assert_eq!(
        on(reach::reach(&t, &nodes, 1, Some(&shares))),
        [1, 4, 5, 6, 7]
    );
    // Memory unknown: the nodes nearest its own.
    assert_eq!(on(reach::reach(&t, &nodes, 6, None)), [4, 5, 6, 7]);
    // Four nodes or fewer: all of them.
    assert_eq!(on(reach::reach(&t, &nodes[..4], 0, None)), [0, 1, 2, 3]);
}

/// Sixteen nodes, a thread whose memory is bound to node 9: every move it
/// makes goes to the four nodes nearest node 9 (flat distances: node 9
/// and the three nearest its own, by id), and each reason says which
/// nodes are beyond its reach.
#[test]
fn explorations_on_sixteen_nodes_stay_near_the_memory() {
    let mut f = Fake::new("pack:4 numa:4 l3:1 core:2 pu:1");
    f.thread(1, 1, "milc", None, 0);
    f.memory.insert(1, BTreeMap::from([(9, 100 << 20)]));
    let mut brm = Brm::new(BrmParams {
        comms: vec!["milc".into()],
        ..BrmParams::default()
    });
    let pins = run(&mut f, &mut brm, 400);
    assert!(!pins.is_empty(), "it explores");
    let reachable = ["0-1", "2-3", "4-5", "18-19"];
    for (_, cpus, reason) in &pins {
        let cpus = cpus.to_list_string();
        assert!(reachable.contains(&cpus.as_str()), "{cpus}: {reason}");
        assert!(reason.contains("beyond its reach"), "{reason}");
    }
}
