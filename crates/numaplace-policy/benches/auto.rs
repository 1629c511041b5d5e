//! One `auto` decision at scale (issue 16): 2,000 threads in 100 processes
//! on a 256-CPU, 8-node synthetic machine ("pack:4 numa:2 l3:1 core:16
//! pu:2"), with instructions, cycles and LLC misses counted per thread (so
//! auto judges its moves: the path with experiments, not the counter-free
//! fallback) and memory per node read for every process and node.
//!
//! Each process has 20 threads using a tenth of a CPU each (200 of the 256
//! CPUs in all) and 600 MiB, 70 % on one node and 30 % on another, so
//! numad's placement, auto's move, has a move to propose for each (with
//! 2,000 threads on 128 cores, DI-Migrate's layout, which auto tries
//! first, steps aside as the machine is crowded; DI and DINO are still
//! asked every round, and timed with the rest). The
//! policy is built from the registry (`PolicyKind::from_name("auto")`) and
//! warmed up on a small world that carries its pins and memory moves out,
//! round after round, until its baselines exist. Two steady-state rounds
//! are timed, each from a freshly warmed policy (criterion's setup, not
//! timed):
//!
//! - `..._start_experiment`: every process has its baseline; numad proposes
//!   a placement for each, and auto starts an experiment on the first.
//! - `..._experiment_under_way`: the round after, the move carried out;
//!   auto measures the processes' progress against their baselines.
//!
//! `cargo bench -p numaplace-policy --bench auto`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use numaplace_model::{
    Action, Counter, CpuSet, MachineReadings, NodeMeminfo, NodeMemory, Plan, Snapshot, Task,
    Topology,
};
use numaplace_policy::testutil::{counters, process, task};
use numaplace_policy::{Policy, PolicyKind, View};

const GROUPS: usize = 100;
const THREADS_PER_GROUP: usize = 20;
const MACHINE: &str = "pack:4 numa:2 l3:1 core:16 pu:2";
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Pids are `FIRST_PID + group * PID_STRIDE`, the threads' tids follow.
const FIRST_PID: i32 = 10_000;
const PID_STRIDE: i32 = 100;

/// What the threads may run on and where the processes' memory is, which
/// the policy's actions change; everything else is the same every round.
struct World {
    topology: Topology,
    /// Allowed CPUs per thread, by group then thread.
    allowed: Vec<Vec<CpuSet>>,
    /// Memory per node (kernel id) per group.
    memory: Vec<BTreeMap<u32, NodeMemory>>,
    /// Every process: all in scope.
    managed: BTreeSet<i32>,
    seq: u64,
}

fn anon(bytes: u64) -> NodeMemory {
    NodeMemory {
        anon: bytes,
        file: 0,
        huge: 0,
    }
}

fn pid_of(group: usize) -> i32 {
    FIRST_PID + group as i32 * PID_STRIDE
}

/// The group and thread index of `tid`.
fn index_of(tid: i32) -> (usize, usize) {
    let k = (tid - FIRST_PID) as usize;
    (k / PID_STRIDE as usize, k % PID_STRIDE as usize)
}

impl World {
    fn new() -> World {
        let topology = Topology::synthetic(MACHINE).expect("a synthetic machine");
        assert_eq!(topology.cpus().len(), 256);
        let nodes = topology.nodes().len() as u32;
        assert_eq!(nodes, 8);
        let allowed = vec![vec![topology.span().clone(); THREADS_PER_GROUP]; GROUPS];
        let memory = (0..GROUPS as u32)
            .map(|g| {
                BTreeMap::from([
                    (g % nodes, anon(420 * MIB)),
                    ((g + 3) % nodes, anon(180 * MIB)),
                ])
            })
            .collect();
        World {
            topology,
            allowed,
            memory,
            managed: (0..GROUPS).map(pid_of).collect(),
            seq: 0,
        }
    }

    /// The next round's snapshot: 1 s since the last, every thread a tenth
    /// of a CPU busier, on a CPU it may run on, with its counters.
    fn next(&mut self) -> Snapshot {
        self.seq += 1;
        let mut s = Snapshot {
            seq: self.seq,
            time_unix_ns: self.seq * 1_000_000_000,
            interval_ns: 1_000_000_000,
            machine: MachineReadings {
                clock_ticks: 100,
                ..MachineReadings::default()
            },
            ..Snapshot::default()
        };
        for n in self.topology.nodes() {
            s.machine.nodes.insert(
                n.os_id,
                NodeMeminfo {
                    total: 64 * GIB,
                    free: 24 * GIB,
                },
            );
        }
        for (g, threads) in self.allowed.iter().enumerate() {
            let pid = pid_of(g);
            let tids: Vec<i32> = (0..THREADS_PER_GROUP as i32).map(|t| pid + t).collect();
            for (&tid, allowed) in tids.iter().zip(threads) {
                let cpus: Vec<u32> = allowed.iter().collect();
                s.tasks.push(Task {
                    utime: self.seq * 10,
                    last_cpu: Some(cpus[tid as usize % cpus.len()]),
                    ..task(tid, pid, allowed)
                });
                let instructions = 1_000_000_000 + (tid as u64 % 7) * 10_000_000;
                s.counters.insert(
                    tid,
                    counters([
                        (Counter::Instructions, instructions),
                        (Counter::Cycles, 2 * instructions),
                        (Counter::LlcMisses, instructions / 200),
                    ]),
                );
            }
            let mut p = process(pid, "app", tids);
            p.memory = Some(self.memory[g].clone());
            s.groups.push(p);
        }
        s
    }

    /// Carries the plan out at once: pins, and a process's memory moved
    /// to the node asked (all of it: no rate limit here).
    fn apply(&mut self, plan: &Plan) {
        for d in &plan.decisions {
            match &d.action {
                Action::Pin { task, cpus, .. } => {
                    let (g, t) = index_of(task.tid);
                    self.allowed[g][t] = cpus.clone();
                }
                Action::MoveMemory {
                    process, to_node, ..
                } => {
                    let (g, _) = index_of(process.tid);
                    let total = self.memory[g].values().map(|m| m.anon).sum();
                    self.memory[g] = BTreeMap::from([(*to_node, anon(total))]);
                }
                // The bench's snapshots name no kernel setting, so
                // auto asks for none.
                Action::MoveWindow { .. } | Action::KernelBalancing { .. } => {}
            }
        }
    }
}

fn decide(policy: &mut dyn Policy, world: &World, snapshot: &Snapshot) -> Plan {
    policy.decide(&View {
        topology: &world.topology,
        snapshot,
        managed: &world.managed,
    })
}

/// A fresh `auto` after `rounds` rounds of the world, its actions carried
/// out; returns it with the world and the next round's snapshot.
fn warmed(rounds: u64) -> (Box<dyn Policy>, World, Snapshot) {
    let mut policy = PolicyKind::from_name("auto").expect("auto").build();
    let mut world = World::new();
    for _ in 0..rounds {
        let s = world.next();
        let plan = decide(policy.as_mut(), &world, &s);
        world.apply(&plan);
    }
    let s = world.next();
    (policy, world, s)
}

/// The round auto starts its first experiment in: the first with a plan.
/// It must come after the first round (a baseline is measured first), or
/// auto is not judging and this would time the fallback.
fn first_experiment() -> u64 {
    let mut policy = PolicyKind::from_name("auto").expect("auto").build();
    let mut world = World::new();
    for round in 1..=50 {
        let s = world.next();
        let plan = decide(policy.as_mut(), &world, &s);
        if !plan.decisions.is_empty() {
            assert!(round > 1, "auto moved at once: it is not judging");
            eprintln!(
                "auto: first experiment in round {round}, {} actions: {}",
                plan.decisions.len(),
                plan.decisions[0].reason
            );
            world.apply(&plan);
            let s = world.next();
            let after = decide(policy.as_mut(), &world, &s);
            eprintln!(
                "auto: the round after, {} actions{}",
                after.decisions.len(),
                after
                    .decisions
                    .first()
                    .map(|d| format!(": {}", d.reason))
                    .unwrap_or_default()
            );
            return round;
        }
    }
    panic!("auto started no experiment in 50 rounds");
}

fn bench(c: &mut Criterion) {
    let start = first_experiment();
    c.bench_function(
        "auto_decide_2000_threads_100_groups_256_cpus_start_experiment",
        |b| {
            b.iter_batched(
                || warmed(start - 1),
                |(mut policy, world, s)| {
                    let plan = decide(policy.as_mut(), &world, black_box(&s));
                    (policy, world, s, plan)
                },
                BatchSize::SmallInput,
            )
        },
    );
    c.bench_function(
        "auto_decide_2000_threads_100_groups_256_cpus_experiment_under_way",
        |b| {
            b.iter_batched(
                || warmed(start),
                |(mut policy, world, s)| {
                    let plan = decide(policy.as_mut(), &world, black_box(&s));
                    (policy, world, s, plan)
                },
                BatchSize::SmallInput,
            )
        },
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
