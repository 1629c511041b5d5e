//! The engine's safety rules and the numad-like baseline, on made-up
//! snapshots of a two-node machine.

use std::collections::BTreeMap;

use numaplace_model::*;
use numaplace_policy::engine::{
    Engine, EngineConfig, JournalEntry, MemoryMover, NoGuard, PinGuard, RecordingActuator,
};
use numaplace_policy::{PolicyKind, Scope};

const MIB: u64 = 1 << 20;

fn topo() -> Topology {
    // Two nodes of two CPUs each: node 0 = CPUs 0-1, node 1 = CPUs 2-3.
    Topology::synthetic("pack:2 numa:1 core:2 pu:1").unwrap()
}

fn task(tid: i32, tgid: i32, cpu: u32, allowed: &str, ticks: u64) -> Task {
    Task {
        tid,
        tgid,
        start_time: 1000 + tid as u64,
        comm: format!("t{tid}"),
        state: 'R',
        last_cpu: Some(cpu),
        allowed_cpus: CpuSet::parse_list(allowed).unwrap(),
        allowed_mems: CpuSet::parse_list("0-1").unwrap(),
        confined_cpus: None,
        manager: None,
        utime: ticks,
        stime: 0,
        vcpu: None,
    }
}

/// A 512 MiB process (pid 100, threads 100 and 101, busy on node 0's CPUs
/// with all its memory on node 0), node 1 idle with more free memory.
fn snapshot(seq: u64, ticks: u64, allowed: &str) -> Snapshot {
    let mut nodes = BTreeMap::new();
    nodes.insert(
        0,
        NodeMeminfo {
            total: 4096 * MIB,
            free: 1024 * MIB,
        },
    );
    nodes.insert(
        1,
        NodeMeminfo {
            total: 4096 * MIB,
            free: 3072 * MIB,
        },
    );
    Snapshot {
        seq,
        time_unix_ns: seq * 1_000_000_000,
        interval_ns: if seq == 0 { 0 } else { 1_000_000_000 },
        tasks: vec![
            task(100, 100, 0, allowed, ticks),
            task(101, 100, 1, allowed, ticks),
        ],
        groups: vec![TaskGroup {
            pid: 100,
            start_time: 1100,
            comm: "app".into(),
            cmdline: vec!["app".into()],
            cgroup: Some("/app.slice".into()),
            kind: GroupKind::Process,
            threads: vec![100, 101],
            memory: Some(
                [(
                    0,
                    NodeMemory {
                        anon: 512 * MIB,
                        file: 0,
                        huge: 0,
                    },
                )]
                .into_iter()
                .collect(),
            ),
        }],
        counters: BTreeMap::new(),
        machine: MachineReadings {
            nodes,
            ..MachineReadings::default()
        },
        ..Snapshot::default()
    }
}

fn run(engine: &mut Engine, s: &Snapshot) -> (Vec<JournalEntry>, Vec<Action>) {
    let mut act = RecordingActuator::default();
    let mut journal = Vec::new();
    engine.round(&topo(), s, &mut act, &mut NoGuard, &mut |e| {
        journal.push(e.clone())
    });
    (journal, act.actions)
}

/// The scope of every process.
fn every_process() -> Scope {
    Scope {
        all: true,
        ..Scope::default()
    }
}

fn numad() -> Box<dyn numaplace_policy::Policy> {
    PolicyKind::from_name("numad-like").unwrap().build()
}

#[test]
fn numad_like_moves_a_big_process_to_the_roomier_node() {
    let scope = every_process();
    let mut e = Engine::new(numad(), scope, EngineConfig::default());
    let (j, _) = run(&mut e, &snapshot(0, 0, "0-3"));
    assert!(j.is_empty(), "no CPU usage known in the first round");
    let (j, acts) = run(&mut e, &snapshot(1, 100, "0-3"));
    let pins: Vec<&Action> = acts
        .iter()
        .filter(|a| matches!(a, Action::Pin { .. }))
        .collect();
    assert_eq!(pins.len(), 2, "{j:#?}");
    for p in &pins {
        let Action::Pin { cpus, .. } = p else {
            unreachable!()
        };
        assert_eq!(cpus.to_string(), "2-3");
    }
    assert!(acts.iter().any(|a| matches!(
        a,
        Action::MoveMemory {
            to_node: 1,
            max_pages: Some(_),
            ..
        }
    )));
    assert!(
        j.iter()
            .all(|e| e.reason.contains("node 1 has the most free CPU and memory")),
        "{j:#?}"
    );
    assert!(
        j[0].reason.contains("100% of its memory is on node 0"),
        "{}",
        j[0].reason
    );
    assert!(j.iter().all(|e| e.outcome == Outcome::NotApplied));

    // Placed: left alone during the cooldown.
    let (j, _) = run(&mut e, &snapshot(2, 200, "0-3"));
    assert!(j.is_empty(), "{j:#?}");
}

#[test]
fn nothing_outside_the_scope_and_an_empty_scope_is_nothing() {
    let mut e = Engine::new(numad(), Scope::default(), EngineConfig::default());
    run(&mut e, &snapshot(0, 0, "0-3"));
    let (j, acts) = run(&mut e, &snapshot(1, 100, "0-3"));
    assert!(j.is_empty() && acts.is_empty());

    let scope = Scope {
        comms: vec!["other*".into()],
        ..Scope::default()
    };
    let mut e = Engine::new(numad(), scope, EngineConfig::default());
    run(&mut e, &snapshot(0, 0, "0-3"));
    let (_, acts) = run(&mut e, &snapshot(1, 100, "0-3"));
    assert!(acts.is_empty());
}

#[test]
fn threads_that_chose_their_cpus_are_never_pinned() {
    // Both threads were started with `taskset -c 0-1`.
    let scope = every_process();
    let mut e = Engine::new(numad(), scope, EngineConfig::default());
    run(&mut e, &snapshot(0, 0, "0-1"));
    let (j, acts) = run(&mut e, &snapshot(1, 100, "0-1"));
    assert!(
        acts.iter().all(|a| !matches!(a, Action::Pin { .. })),
        "{acts:?}"
    );
    let skipped: Vec<&JournalEntry> = j
        .iter()
        .filter(|e| matches!(e.outcome, Outcome::Skipped { .. }))
        .collect();
    assert_eq!(skipped.len(), 2);
    assert!(format!("{:?}", skipped[0].outcome).contains("left alone"));
}

#[test]
fn a_failed_write_ahead_cancels_the_pin() {
    struct Broken;
    impl PinGuard for Broken {
        fn before_pin(&mut self, _: TaskId, _: i32, _: &CpuSet, _: &CpuSet) -> Result<(), String> {
            Err("disk full".into())
        }
    }
    let scope = every_process();
    let mut e = Engine::new(numad(), scope, EngineConfig::default());
    let mut act = RecordingActuator::default();
    let mut journal = Vec::new();
    e.round(
        &topo(),
        &snapshot(0, 0, "0-3"),
        &mut act,
        &mut Broken,
        &mut |x| journal.push(x.clone()),
    );
    e.round(
        &topo(),
        &snapshot(1, 100, "0-3"),
        &mut act,
        &mut Broken,
        &mut |x| journal.push(x.clone()),
    );
    assert!(act.actions.iter().all(|a| !matches!(a, Action::Pin { .. })));
    assert!(
        journal
            .iter()
            .any(|x| format!("{:?}", x.outcome).contains("disk full"))
    );
}

#[test]
fn migration_rate_limit() {
    let scope = every_process();
    let config = EngineConfig {
        migrate_mib_per_sec: 0,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(numad(), scope, config);
    run(&mut e, &snapshot(0, 0, "0-3"));
    let (j, acts) = run(&mut e, &snapshot(1, 100, "0-3"));
    assert!(acts.iter().all(|a| !a.moves_memory()));
    assert!(
        j.iter()
            .any(|x| format!("{:?}", x.outcome).contains("rate limit"))
    );

    // 64 MiB/s over one second: at most 16384 pages of 4 KiB.
    let config = EngineConfig {
        migrate_mib_per_sec: 64,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(numad(), every_process(), config);
    run(&mut e, &snapshot(0, 0, "0-3"));
    let (_, acts) = run(&mut e, &snapshot(1, 100, "0-3"));
    assert!(
        acts.iter().any(|a| matches!(
            a,
            Action::MoveMemory {
                max_pages: Some(16384),
                ..
            }
        )),
        "{acts:?}"
    );
}

#[test]
fn default_policy_does_nothing() {
    let mut e = Engine::new(
        PolicyKind::Default.build(),
        every_process(),
        EngineConfig::default(),
    );
    run(&mut e, &snapshot(0, 0, "0-3"));
    let (j, acts) = run(&mut e, &snapshot(1, 100, "0-3"));
    assert!(j.is_empty() && acts.is_empty());
    assert_eq!(e.totals().rounds, 2);
}

#[test]
fn numad_like_finishes_a_move_the_rate_limit_cut_short() {
    let scope = every_process();
    let mut e = Engine::new(numad(), scope, EngineConfig::default());
    run(&mut e, &snapshot(0, 0, "0-3"));
    run(&mut e, &snapshot(1, 100, "0-3")); // placed on node 1
    // Next round: threads pinned there, but only half the memory moved.
    let mut s = snapshot(2, 200, "2-3");
    s.groups[0].memory = Some(
        [
            (
                0,
                NodeMemory {
                    anon: 256 * MIB,
                    file: 0,
                    huge: 0,
                },
            ),
            (
                1,
                NodeMemory {
                    anon: 256 * MIB,
                    file: 0,
                    huge: 0,
                },
            ),
        ]
        .into_iter()
        .collect(),
    );
    let (j, acts) = run(&mut e, &s);
    assert!(
        acts.iter().all(|a| !matches!(a, Action::Pin { .. })),
        "{acts:?}"
    );
    assert!(
        acts.iter()
            .any(|a| matches!(a, Action::MoveMemory { to_node: 1, .. })),
        "{acts:?}"
    );
    assert!(j[0].reason.contains("moving the rest"), "{}", j[0].reason);
}

/// Replaying a recording: a pin is taken as done and shown to the policy
/// in later snapshots (allowed CPUs and last CPU), so it is made once and
/// the engine never mistakes it for the thread's own choice; a change the
/// recording itself shows wins over the overlay.
#[test]
fn replay_shows_the_policys_pins_in_later_rounds() {
    use numaplace_policy::replay::ReplayActuator;
    let scope = every_process();
    let mut e = Engine::new(numad(), scope, EngineConfig::default());
    let mut act = ReplayActuator::new(4096);
    let mut journal = Vec::new();
    let mut seen = Vec::new();
    let mut memory = Vec::new();
    for seq in 0..5 {
        let mut s = snapshot(seq, seq * 100, "0-3");
        act.overlay(&mut s);
        seen.push(s.tasks.clone());
        memory.push(s.groups[0].memory.clone().unwrap());
        e.round(&topo(), &s, &mut act, &mut NoGuard, &mut |j| {
            journal.push(j.clone())
        });
    }
    assert_eq!(act.counts.pins, 2, "{journal:#?}");
    // 512 MiB at the engine's 256 MiB/s: two rounds of moves, then it is
    // all on node 1 and numad-like stops asking.
    assert_eq!(act.counts.memory_moves, 2, "{journal:#?}");
    let moved: Vec<u64> = journal
        .iter()
        .filter_map(|j| match &j.outcome {
            Outcome::Pages(p) => Some(p.moved),
            _ => None,
        })
        .collect();
    assert_eq!(moved, [65536, 65536]);
    let anon = |round: usize, node: u32| memory[round].get(&node).map_or(0, |m| m.anon) / MIB;
    assert_eq!((anon(1, 0), anon(1, 1)), (512, 0), "recorded");
    assert_eq!((anon(2, 0), anon(2, 1)), (256, 256), "half moved");
    assert_eq!((anon(4, 0), anon(4, 1)), (0, 512), "all moved");
    assert!(
        journal
            .iter()
            .all(|j| !matches!(&j.outcome, Outcome::Skipped { .. }))
    );
    // Rounds 0 and 1 as recorded; from round 2 on, where numad-like put them.
    for t in &seen[1] {
        assert_eq!(
            (t.allowed_cpus.to_string(), t.last_cpu),
            ("0-3".into(), Some(t.tid as u32 - 100))
        );
    }
    for round in &seen[2..] {
        for t in round {
            assert_eq!(t.allowed_cpus.to_string(), "2-3");
            assert_eq!(t.last_cpu, Some(2), "moved off node 0's CPUs");
        }
    }
    // Thread 100 pinned to CPU 0 in the recording itself: that shows.
    let mut s = snapshot(4, 400, "0-3");
    s.tasks[0].allowed_cpus = CpuSet::parse_list("0").unwrap();
    act.overlay(&mut s);
    assert_eq!(s.tasks[0].allowed_cpus.to_string(), "0");
    assert_eq!(s.tasks[0].last_cpu, Some(0));
    assert_eq!(s.tasks[1].allowed_cpus.to_string(), "2-3");
}

/// The kernel refuses every pin (EPERM): the engine asks again after 1,
/// 2, 4, 8 ... rounds instead of every round, journals each refusal with
/// when it asks next, and a different target is tried at once.
#[test]
fn refused_actions_back_off() {
    use std::sync::{Arc, Mutex};
    struct Always(Arc<Mutex<&'static str>>);
    impl numaplace_policy::Policy for Always {
        fn name(&self) -> &'static str {
            "always"
        }
        fn decide(&mut self, v: &numaplace_policy::View<'_>) -> Plan {
            let mut p = Plan::default();
            let t = v.snapshot.task(100).unwrap();
            let cpus = CpuSet::parse_list(&self.0.lock().unwrap()).unwrap();
            p.push(
                Action::Pin {
                    task: t.id(),
                    tgid: 100,
                    cpus,
                },
                "wants it",
            );
            p
        }
    }
    struct Refuse(u32);
    impl numaplace_policy::engine::Actuator for Refuse {
        fn apply(&mut self, _: &Action) -> Outcome {
            self.0 += 1;
            Outcome::Refused {
                errno: "EPERM".into(),
                why: "not ours".into(),
            }
        }
        fn affinity(
            &self,
            _: TaskId,
            _: i32,
        ) -> Result<CpuSet, numaplace_policy::engine::AffinityError> {
            Err(numaplace_policy::engine::AffinityError::Unreadable(
                "EPERM".into(),
            ))
        }
    }
    let scope = every_process();
    let target = Arc::new(Mutex::new("2-3"));
    let mut e = Engine::new(
        Box::new(Always(target.clone())),
        scope,
        EngineConfig::default(),
    );
    let mut act = Refuse(0);
    let round = |e: &mut Engine, act: &mut Refuse, seq: u64| {
        let mut journal = Vec::new();
        let s = snapshot(seq, seq * 100, "0-3");
        let r = e.round(&topo(), &s, act, &mut NoGuard, &mut |j| {
            journal.push(j.clone())
        });
        (r.held_back, journal)
    };
    let mut tried = Vec::new();
    let mut held = 0;
    for seq in 1..=20 {
        let (h, journal) = round(&mut e, &mut act, seq);
        held += h;
        match &journal[..] {
            [] => {}
            [j] => match &j.outcome {
                Outcome::Refused { why, .. } => tried.push((seq, why.clone())),
                o => panic!("{o:?}"),
            },
            more => panic!("{more:?}"),
        }
    }
    let rounds: Vec<u64> = tried.iter().map(|t| t.0).collect();
    assert_eq!(rounds, [1, 3, 6, 11, 20]);
    assert_eq!((act.0, held), (5, 15));
    assert!(
        tried[0]
            .1
            .ends_with("not ours; refused 1 time in a row: asked again in 1 round"),
        "{tried:?}"
    );
    assert!(
        tried[3]
            .1
            .ends_with("refused 4 times in a row: asked again in 8 rounds"),
        "{tried:?}"
    );
    // Held back at round 21 (next try at 37) ...
    assert_eq!(round(&mut e, &mut act, 21).0, 1);
    assert_eq!(act.0, 5);
    // ... but another target is asked at once (a cpuset may allow it).
    *target.lock().unwrap() = "0";
    let (h, journal) = round(&mut e, &mut act, 22);
    assert_eq!((h, act.0, journal.len()), (0, 6, 1));
}

/// A name scope matches a process by its own name or any of its threads'.
#[test]
fn a_name_scope_matches_by_any_threads_name() {
    let s = snapshot(1, 100, "0-3");
    let managed = |comms: &[&str]| {
        let scope = Scope {
            comms: comms.iter().map(|c| c.to_string()).collect(),
            ..Scope::default()
        };
        Engine::new(numad(), scope, EngineConfig::default()).managed(&s)
    };
    assert_eq!(managed(&["t101"]), [100].into());
    assert_eq!(managed(&["ap?"]), [100].into());
    assert!(managed(&["t102", "other"]).is_empty());
}

/// A process whose cpuset allows memory on node 0 only: numad-like keeps
/// it on node 0's CPUs instead of sending it to the roomier node 1, and the
/// engine never asks the kernel to move memory to a node the cpuset does
/// not allow (it would refuse with EACCES, after the pins).
#[test]
fn memory_stays_on_the_nodes_the_cpuset_allows() {
    let scope = every_process();
    let only_node_0 = |seq, ticks| {
        let mut s = snapshot(seq, ticks, "0-3");
        for t in &mut s.tasks {
            t.allowed_mems = CpuSet::parse_list("0").unwrap();
        }
        s
    };
    let mut e = Engine::new(numad(), scope.clone(), EngineConfig::default());
    run(&mut e, &only_node_0(0, 0));
    let (j, acts) = run(&mut e, &only_node_0(1, 100));
    assert!(!acts.is_empty(), "{j:#?}");
    for a in &acts {
        match a {
            Action::Pin { cpus, .. } => assert_eq!(cpus.to_string(), "0-1"),
            other => panic!("only pins to node 0: {other:?}"),
        }
    }

    // Any policy: a move to node 1 is skipped with the reason, untried.
    struct MoveTo1;
    impl numaplace_policy::Policy for MoveTo1 {
        fn name(&self) -> &'static str {
            "move-to-1"
        }
        fn decide(&mut self, v: &numaplace_policy::View<'_>) -> Plan {
            let mut p = Plan::default();
            let g = v.snapshot.group(100).unwrap();
            p.push(
                Action::MoveMemory {
                    process: g.id(),
                    to_node: 1,
                    max_pages: None,
                },
                "wants node 1",
            );
            p
        }
    }
    let mut e = Engine::new(Box::new(MoveTo1), scope, EngineConfig::default());
    let (j, acts) = run(&mut e, &only_node_0(1, 100));
    assert!(acts.is_empty(), "{acts:?}");
    match &j[..] {
        [entry] => assert_eq!(
            entry.outcome,
            Outcome::Skipped {
                why: "node 1 is not among the memory nodes its cpuset allows (0): the kernel \
                      would refuse the move"
                    .into()
            }
        ),
        other => panic!("{other:#?}"),
    }
}

/// Two pins of one thread in one plan: the first is made, the second is
/// refused with its reason, and the thread stays ours (the snapshot still
/// shows the affinity before the first pin, which must not read as the
/// thread having chosen its own CPUs).
#[test]
fn a_second_pin_of_a_thread_in_one_plan_is_refused_and_the_thread_stays_ours() {
    struct PinTwice(&'static str, &'static str);
    impl numaplace_policy::Policy for PinTwice {
        fn name(&self) -> &'static str {
            "pin-twice"
        }
        fn decide(&mut self, v: &numaplace_policy::View<'_>) -> Plan {
            let mut p = Plan::default();
            let t = v.snapshot.task(100).unwrap();
            for cpus in [self.0, self.1] {
                p.push(
                    Action::Pin {
                        task: t.id(),
                        tgid: 100,
                        cpus: CpuSet::parse_list(cpus).unwrap(),
                    },
                    format!("to {cpus}"),
                );
            }
            p
        }
    }
    let mut e = Engine::new(
        Box::new(PinTwice("2-3", "0-1")),
        every_process(),
        EngineConfig::default(),
    );
    let (j, acts) = run(&mut e, &snapshot(1, 100, "0-3"));
    assert_eq!(
        acts,
        [Action::Pin {
            task: TaskId {
                tid: 100,
                start_time: 1100
            },
            tgid: 100,
            cpus: CpuSet::parse_list("2-3").unwrap()
        }]
    );
    assert!(
        matches!(&j[1].outcome, Outcome::Skipped { why } if why.contains("pinned already this round")),
        "{j:#?}"
    );
    // Next round it runs where the first pin put it: still ours (not
    // "left alone"), and there already.
    let (j, _) = run(&mut e, &snapshot(2, 200, "2-3"));
    assert_eq!(
        j[0].outcome,
        Outcome::Skipped {
            why: "already there".into()
        }
    );
}

/// numad counts a core's second hardware thread as a fifth of a CPU
/// (numad's `-t 20`): on a machine of one two-thread core a node, a
/// process busy on two CPUs fits no node and stays where Linux put it;
/// counting every hardware thread (`htt_percent = 100`), it is placed.
#[test]
fn numad_like_counts_hardware_threads_as_a_fifth_of_a_core() {
    use numaplace_policy::numad::{NumadLike, NumadParams};
    // Node 0 = CPUs 0-1, one core; node 1 = CPUs 2-3, one core.
    let smt = Topology::synthetic("pack:2 numa:1 core:1 pu:2").unwrap();
    let place = |htt_percent: u64| {
        let policy = NumadLike::new(NumadParams {
            htt_percent,
            ..NumadParams::default()
        });
        let mut e = Engine::new(Box::new(policy), every_process(), EngineConfig::default());
        let mut pins = Vec::new();
        for (seq, ticks) in [(0, 0), (1, 100)] {
            let mut act = RecordingActuator::default();
            e.round(
                &smt,
                &snapshot(seq, ticks, "0-3"),
                &mut act,
                &mut NoGuard,
                &mut |_| {},
            );
            pins.extend(act.actions.into_iter().filter_map(|a| match a {
                Action::Pin { cpus, .. } => Some(cpus.to_string()),
                _ => None,
            }));
        }
        pins
    };
    assert_eq!(
        place(20),
        Vec::<String>::new(),
        "1.2 CPUs a node hold no 2-CPU process"
    );
    assert_eq!(place(100), vec!["2-3".to_string(), "2-3".to_string()]);
}

/// auto's numad (`prefer_quiet_node`) takes a process to the node holding
/// its memory even where other work leaves it no room, when the rest of
/// the machine has idle CPUs for that work; on a crowded machine (more
/// runnable threads than CPUs) it does not: the process would time-share
/// that node's CPUs with the work already there.
#[test]
fn numads_home_node_is_refused_on_a_crowded_machine() {
    use numaplace_policy::numad::{NumadLike, NumadParams};
    // Process 100 (threads 100-101) runs on node 0, its memory on node 1;
    // process 200 has one busy thread on node 1 (CPU 2) and has just
    // started `new` more there (no CPU use measured yet: on paper, node 1
    // has one CPU of room, node 0 two).
    let placed = |new: i32| {
        let policy = NumadLike::new(NumadParams {
            cooldown_secs: 0,
            prefer_quiet_node: true,
            htt_percent: 100,
            ..NumadParams::default()
        });
        let mut e = Engine::new(Box::new(policy), every_process(), EngineConfig::default());
        let mut pins = Vec::new();
        for (seq, ticks) in [(0, 0), (1, 100)] {
            let mut s = snapshot(seq, ticks, "0-3");
            if let Some(m) = s.groups[0].memory.as_mut() {
                let on0 = m.remove(&0).unwrap();
                m.insert(1, on0);
            }
            let threads: Vec<i32> = (0..1 + if seq == 0 { 0 } else { new })
                .map(|i| 200 + i)
                .collect();
            for &tid in &threads {
                let t = if tid == 200 { ticks } else { 0 };
                s.tasks.push(task(tid, 200, 2 + (tid % 2) as u32, "0-3", t));
            }
            s.groups.push(TaskGroup {
                pid: 200,
                threads,
                memory: None,
                ..s.groups[0].clone()
            });
            let mut act = RecordingActuator::default();
            e.round(&topo(), &s, &mut act, &mut NoGuard, &mut |_| {});
            pins.extend(act.actions.into_iter().filter_map(|a| match a {
                Action::Pin { task, cpus, .. } if task.tid < 200 => Some(cpus.to_string()),
                _ => None,
            }));
        }
        pins
    };
    // No new thread: 3 runnable threads on 4 CPUs, and node 0, left by
    // the process, can take the other one.
    assert_eq!(placed(0), vec!["2-3".to_string(), "2-3".to_string()]);
    // Two: 5 runnable threads on 4 CPUs, no CPU to spare.
    assert!(!placed(2).contains(&"2-3".to_string()), "{:?}", placed(2));
}

/// A policy that pins thread 100 to node 1 and moves process 100's memory
/// there, every round.
struct PinAndMoveTo1;
impl numaplace_policy::Policy for PinAndMoveTo1 {
    fn name(&self) -> &'static str {
        "pin-and-move-to-1"
    }
    fn decide(&mut self, v: &numaplace_policy::View<'_>) -> Plan {
        let mut p = Plan::default();
        let g = v.snapshot.group(100).unwrap();
        let t = v.snapshot.task(100).unwrap();
        p.push(
            Action::Pin {
                task: t.id(),
                tgid: 100,
                cpus: CpuSet::parse_list("2-3").unwrap(),
            },
            "wants node 1",
        );
        p.push(
            Action::MoveMemory {
                process: g.id(),
                to_node: 1,
                max_pages: None,
            },
            "memory follows to node 1",
        );
        p
    }
}

/// What the engine does with a pin and a memory move, given who moves
/// memory, whether the kernel balances and whether the process's memory is
/// under an explicit policy: (pins carried out, memory moves carried out,
/// the memory move's outcome).
fn with_mover(mover: MemoryMover, kernel: bool, explicit: bool) -> (usize, usize, Outcome) {
    let config = EngineConfig {
        memory_mover: mover,
        kernel_balancing: kernel,
        ..EngineConfig::default()
    };
    let mut e = Engine::new(Box::new(PinAndMoveTo1), every_process(), config);
    let mut s = snapshot(1, 100, "0-3");
    if explicit {
        s.explicit_mempolicy.insert(100);
    }
    let (j, acts) = run(&mut e, &s);
    let pins = acts
        .iter()
        .filter(|a| matches!(a, Action::Pin { .. }))
        .count();
    let moves = acts.iter().filter(|a| a.moves_memory()).count();
    let entry = j
        .iter()
        .find(|e| e.action.moves_memory())
        .expect("the memory move is journalled, carried out or not");
    (pins, moves, entry.outcome.clone())
}

fn left_to_kernel(o: &Outcome) -> bool {
    matches!(o, Outcome::Skipped { why } if why.starts_with("left to the kernel's automatic NUMA balancing"))
}

#[test]
fn with_the_kernels_balancing_off_numaplace_moves_memory_in_every_mode() {
    for mover in [
        MemoryMover::Numaplace,
        MemoryMover::Kernel,
        MemoryMover::WhereKernelCannot,
    ] {
        for explicit in [false, true] {
            let (pins, moves, o) = with_mover(mover, false, explicit);
            assert_eq!((pins, moves), (1, 1), "{mover:?} {explicit}: {o:?}");
            assert!(!left_to_kernel(&o), "{mover:?}: {o:?}");
        }
    }
}

#[test]
fn memory_mover_kernel_leaves_every_memory_move_to_the_kernel() {
    for explicit in [false, true] {
        let (pins, moves, o) = with_mover(MemoryMover::Kernel, true, explicit);
        assert_eq!((pins, moves), (1, 0), "pins still go; no memory moves");
        assert!(left_to_kernel(&o), "{o:?}");
        assert!(
            format!("{o:?}").contains("memory_mover = \\\"kernel\\\""),
            "{o:?}"
        );
    }
}

#[test]
fn memory_mover_where_kernel_cannot_moves_only_memory_under_an_explicit_policy() {
    let (pins, moves, o) = with_mover(MemoryMover::WhereKernelCannot, true, false);
    assert_eq!((pins, moves), (1, 0));
    assert!(left_to_kernel(&o), "{o:?}");
    assert!(format!("{o:?}").contains("default policy"), "{o:?}");
    let (pins, moves, o) = with_mover(MemoryMover::WhereKernelCannot, true, true);
    assert_eq!((pins, moves), (1, 1), "{o:?}");
    assert!(!left_to_kernel(&o), "{o:?}");
    // It is the default.
    assert_eq!(
        EngineConfig::default().memory_mover,
        MemoryMover::WhereKernelCannot
    );
}

/// A libvirt domain bound to node 0 by its cgroup (`restrictive`): its
/// memory moves through libvirt, which changes the node it is bound to, so
/// neither its `Mems_allowed` nor the kernel's balancing (which cannot
/// move it off node 0) stops the move; without libvirt setting the nodes
/// the same move is outside its cpuset and not tried.
#[test]
fn memory_libvirt_binds_is_moved_through_libvirt_not_left_to_the_kernel() {
    for sets in [true, false] {
        let config = EngineConfig {
            kernel_balancing: true,
            ..EngineConfig::default()
        };
        let mut e = Engine::new(Box::new(PinAndMoveTo1), every_process(), config);
        let mut s = snapshot(1, 100, "0-3");
        for t in &mut s.tasks {
            t.allowed_mems = CpuSet::parse_list("0").unwrap();
            t.manager = Some(numaplace_model::Manager {
                who: "libvirt domain web".into(),
                hands_off: None,
                sets_memory_nodes: sets,
            });
        }
        let (j, acts) = run(&mut e, &s);
        let moves = acts.iter().filter(|a| a.moves_memory()).count();
        let o = &j.iter().find(|e| e.action.moves_memory()).unwrap().outcome;
        if sets {
            assert_eq!(moves, 1, "{o:?}");
        } else {
            assert_eq!(moves, 0, "{o:?}");
            assert!(
                matches!(o, Outcome::Skipped { why } if why.contains("not among the memory nodes its cpuset allows (0)")),
                "{o:?}"
            );
        }
    }
}

#[test]
fn memory_mover_numaplace_moves_everything_and_says_they_may_fight() {
    for explicit in [false, true] {
        let (pins, moves, o) = with_mover(MemoryMover::Numaplace, true, explicit);
        assert_eq!((pins, moves), (1, 1), "{o:?}");
    }
    assert!(
        MemoryMover::Numaplace
            .describe(true)
            .contains("back and forth")
    );
    assert!(MemoryMover::Kernel.describe(false).contains("no effect"));
}

/// A policy that turns the kernel's balancing on, then moves process
/// 100's memory to node 1.
struct BalancingOnThenMove;

impl numaplace_policy::Policy for BalancingOnThenMove {
    fn name(&self) -> &'static str {
        "balancing-on"
    }

    fn decide(&mut self, _view: &numaplace_policy::View<'_>) -> Plan {
        let mut p = Plan::default();
        p.push(Action::KernelBalancing { on: true }, "test: on");
        p.push(
            Action::MoveMemory {
                process: TaskId {
                    tid: 100,
                    start_time: 1100,
                },
                to_node: 1,
                max_pages: None,
            },
            "test: memory to node 1",
        );
        p
    }
}

/// Records what the write-ahead was asked; fails if told to.
#[derive(Default)]
struct KernelGuard {
    asked: Vec<bool>,
    fail: bool,
}

impl PinGuard for KernelGuard {
    fn before_pin(&mut self, _: TaskId, _: i32, _: &CpuSet, _: &CpuSet) -> Result<(), String> {
        Ok(())
    }

    fn before_kernel_balancing(&mut self, on: bool) -> Result<(), String> {
        self.asked.push(on);
        if self.fail {
            return Err("disk full".into());
        }
        Ok(())
    }
}

/// One round of [`BalancingOnThenMove`] on a kernel whose balancing is
/// `now`: the journal, the actions carried out, what the guard was asked.
fn balancing_round(
    scope: Scope,
    config: EngineConfig,
    now: Option<bool>,
    fail: bool,
) -> (Vec<JournalEntry>, Vec<Action>, Vec<bool>) {
    let mut e = Engine::new(Box::new(BalancingOnThenMove), scope, config);
    let mut s = snapshot(1, 100, "0-3");
    s.machine.numa_balancing = now;
    let mut act = RecordingActuator::default();
    let mut guard = KernelGuard {
        fail,
        ..KernelGuard::default()
    };
    let mut journal = Vec::new();
    e.round(&topo(), &s, &mut act, &mut guard, &mut |x| {
        journal.push(x.clone())
    });
    (journal, act.actions, guard.asked)
}

fn why(j: &[JournalEntry], machine_wide: bool) -> String {
    let e = j
        .iter()
        .find(|e| e.action.machine_wide() == machine_wide)
        .expect("journalled");
    format!("{:?}", e.outcome)
}

#[test]
fn the_kernels_balancing_changes_only_with_the_whole_machine_in_scope_and_after_the_write_ahead() {
    // The whole machine, allowed: recorded first, carried out, and the
    // memory move after it in the same plan is left to the kernel now on.
    let (j, acts, asked) =
        balancing_round(every_process(), EngineConfig::default(), Some(false), false);
    assert_eq!(asked, vec![true]);
    assert_eq!(acts, vec![Action::KernelBalancing { on: true }], "{j:#?}");
    assert_eq!(j[0].pid, 0);
    // (The recording actuator is a dry run's.)
    assert!(why(&j, true).contains("NotApplied"), "{j:#?}");
    assert!(why(&j, false).contains("left to the kernel"), "{j:#?}");

    // A scope narrower than the machine: the setting is not its to change.
    let (j, acts, asked) = balancing_round(
        Scope {
            pids: vec![100],
            ..Scope::default()
        },
        EngineConfig::default(),
        Some(false),
        false,
    );
    assert!(asked.is_empty());
    assert!(!acts.iter().any(|a| a.machine_wide()));
    assert!(why(&j, true).contains("scope all"), "{j:#?}");
    assert!(
        acts.iter().any(|a| a.moves_memory()),
        "the kernel still off: numaplace moves the memory"
    );

    // Not allowed by the config.
    let (j, acts, _) = balancing_round(
        every_process(),
        EngineConfig {
            manage_kernel_balancing: false,
            ..EngineConfig::default()
        },
        Some(false),
        false,
    );
    assert!(!acts.iter().any(|a| a.machine_wide()));
    assert!(why(&j, true).contains("manage_kernel_balancing = false"));

    // A kernel without the setting.
    let (j, acts, _) = balancing_round(every_process(), EngineConfig::default(), None, false);
    assert!(!acts.iter().any(|a| a.machine_wide()));
    assert!(why(&j, true).contains("no automatic NUMA balancing"));

    // The write-ahead failed: not changed.
    let (j, acts, asked) =
        balancing_round(every_process(), EngineConfig::default(), Some(false), true);
    assert_eq!(asked, vec![true]);
    assert!(!acts.iter().any(|a| a.machine_wide()));
    assert!(why(&j, true).contains("disk full"));

    // Already on: nothing to do, nothing recorded.
    let (j, acts, asked) =
        balancing_round(every_process(), EngineConfig::default(), Some(true), false);
    assert!(asked.is_empty());
    assert!(!acts.iter().any(|a| a.machine_wide()));
    assert!(why(&j, true).contains("already on"));
}

/// [`snapshot`] with both threads in a cgroup whose cpuset is `confined`
/// (their affinity all of it, as the kernel sets it), thread 101 narrowed
/// within it to `narrowed` where given.
fn confined_snapshot(seq: u64, ticks: u64, confined: &str, narrowed: Option<&str>) -> Snapshot {
    let mut s = snapshot(seq, ticks, confined);
    for t in &mut s.tasks {
        t.confined_cpus = Some(CpuSet::parse_list(confined).unwrap());
        t.last_cpu = CpuSet::parse_list(confined).unwrap().first();
    }
    if let Some(n) = narrowed {
        s.tasks[1].allowed_cpus = CpuSet::parse_list(n).unwrap();
    }
    s
}

#[test]
fn a_process_its_cgroup_confines_is_placed_within_its_cpus() {
    // Confined to CPUs 1-3 (node 0's CPU 1, node 1's 2-3): not a choice
    // of its own, so numad-like places it, on node 1's CPUs within them.
    let mut e = Engine::new(numad(), every_process(), EngineConfig::default());
    run(&mut e, &confined_snapshot(0, 0, "1-3", None));
    let (j, acts) = run(&mut e, &confined_snapshot(1, 100, "1-3", None));
    let pins: Vec<String> = acts
        .iter()
        .filter_map(|a| match a {
            Action::Pin { cpus, .. } => Some(cpus.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(pins, ["2-3", "2-3"], "{j:#?}");
    assert!(
        acts.iter()
            .any(|a| matches!(a, Action::MoveMemory { to_node: 1, .. })),
        "{acts:?}"
    );
    let s = confined_snapshot(1, 100, "1-3", None);
    assert!(e.left_alone(&topo(), &s).is_empty());
}

#[test]
fn a_thread_narrowed_inside_its_cgroup_is_left_alone_and_said_why_once() {
    let mut e = Engine::new(numad(), every_process(), EngineConfig::default());
    let mut act = RecordingActuator::default();
    let mut reports = Vec::new();
    for seq in 0..3 {
        let s = confined_snapshot(seq, 100 * seq, "1-3", Some("3"));
        reports.push(e.round(&topo(), &s, &mut act, &mut NoGuard, &mut |_| {}));
    }
    // Thread 100 is placed; 101 chose CPU 3 within its cgroup's 1-3.
    assert!(act.actions.iter().all(|a| match a {
        Action::Pin { task, .. } => task.tid == 100,
        _ => true,
    }));
    for r in &reports {
        assert_eq!(r.left_alone.get("chose-cpus"), Some(&1), "{r:?}");
    }
    // Said once, in the round it was first found.
    assert_eq!(reports[0].newly_left_alone.len(), 1);
    let n = &reports[0].newly_left_alone[0];
    assert_eq!((n.tid, n.pid, n.kind.as_str()), (101, 100, "chose-cpus"));
    assert!(
        n.why.contains("its affinity is 3")
            && n.why
                .contains("narrower than the CPUs 1-3 its cgroup confines it to"),
        "{}",
        n.why
    );
    assert!(reports[1].newly_left_alone.is_empty() && reports[2].newly_left_alone.is_empty());
    let s = confined_snapshot(3, 300, "1-3", Some("3"));
    let now = e.left_alone(&topo(), &s);
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].tid, 101);
}

#[test]
fn a_cgroup_outside_the_cpus_numaplace_may_use_leaves_its_threads_alone() {
    // The scope's machine is CPUs 0-3; the cgroup's CPUs are 4-5 (CPUs
    // this topology does not have, as when numaplace is itself confined).
    let mut s = snapshot(1, 100, "4-5");
    for t in &mut s.tasks {
        t.confined_cpus = Some(CpuSet::parse_list("4-5").unwrap());
    }
    let e = Engine::new(numad(), every_process(), EngineConfig::default());
    let notes = e.left_alone(&topo(), &s);
    assert_eq!(notes.len(), 2);
    assert!(
        notes.iter().all(|n| n.kind == "confined-elsewhere"),
        "{notes:?}"
    );
    assert!(
        notes[0]
            .why
            .contains("CPUs 4-5, none of which numaplace may use")
    );
}

/// Pins every thread to `cpus`, whatever its cgroup says.
struct PinTo(&'static str);

impl numaplace_policy::Policy for PinTo {
    fn name(&self) -> &'static str {
        "pin-to"
    }
    fn decide(&mut self, view: &numaplace_policy::View<'_>) -> Plan {
        let mut plan = Plan::default();
        for t in &view.snapshot.tasks {
            plan.push(
                Action::Pin {
                    task: t.id(),
                    tgid: t.tgid,
                    cpus: CpuSet::parse_list(self.0).unwrap(),
                },
                "test",
            );
        }
        plan
    }
}

#[test]
fn the_engine_refuses_a_pin_that_leaves_the_cgroups_cpus() {
    let mut e = Engine::new(
        Box::new(PinTo("1-2")),
        every_process(),
        EngineConfig::default(),
    );
    let (j, acts) = run(&mut e, &confined_snapshot(1, 100, "2-3", None));
    assert!(acts.is_empty(), "{acts:?}");
    assert_eq!(j.len(), 2);
    for x in &j {
        let Outcome::Skipped { why } = &x.outcome else {
            panic!("{x:?}")
        };
        assert!(
            why.contains("CPUs 1-2 are not all within the CPUs its cgroup confines it to (2-3)"),
            "{why}"
        );
    }
    // Within them: carried out.
    let mut e = Engine::new(
        Box::new(PinTo("3")),
        every_process(),
        EngineConfig::default(),
    );
    let (_, acts) = run(&mut e, &confined_snapshot(1, 100, "2-3", None));
    assert_eq!(acts.len(), 2);
}

/// A guard that keeps each pinned thread's original affinity, as the
/// state file would: `(tid, original)`.
struct Recorded(Vec<(i32, String)>);

impl PinGuard for Recorded {
    fn before_pin(
        &mut self,
        task: TaskId,
        _: i32,
        original: &CpuSet,
        _: &CpuSet,
    ) -> Result<(), String> {
        self.0.push((task.tid, original.to_string()));
        Ok(())
    }
}

#[test]
fn a_confined_thread_gets_the_whole_machine_back_which_the_kernel_narrows_to_its_cgroup() {
    let mut e = Engine::new(
        Box::new(PinTo("3")),
        every_process(),
        EngineConfig::default(),
    );
    let mut guard = Recorded(Vec::new());
    let mut act = RecordingActuator::default();
    e.round(
        &topo(),
        &confined_snapshot(1, 100, "2-3", None),
        &mut act,
        &mut guard,
        &mut |_| {},
    );
    // Given its confinement of today, it would keep it after the cgroup's
    // cpuset changed (the kernel keeps the affinity asked for).
    assert_eq!(
        guard.0,
        [(100, "0-3".to_string()), (101, "0-3".to_string())]
    );
}

/// [`snapshot`] of a libvirt domain's QEMU: both threads pinned by
/// libvirt to CPU 1 (numad's advice at its start), held by libvirt;
/// thread 101's pin left to its owner where `owner_pinned_101`.
fn libvirt_snapshot(seq: u64, ticks: u64, owner_pinned_101: bool) -> Snapshot {
    let mut s = snapshot(seq, ticks, "1");
    for t in &mut s.tasks {
        t.manager = Some(numaplace_model::Manager {
            who: "libvirt domain web".into(),
            hands_off: (owner_pinned_101 && t.tid == 101).then(|| {
                "its owner pinned it in libvirt's XML (<vcpupin vcpu='0' cpuset='1'>)".into()
            }),
            sets_memory_nodes: false,
        });
    }
    s
}

#[test]
fn a_domains_threads_libvirt_pinned_are_placed_and_get_libvirts_pin_back() {
    let mut e = Engine::new(
        Box::new(PinTo("3")),
        every_process(),
        EngineConfig::default(),
    );
    let mut guard = Recorded(Vec::new());
    let mut act = RecordingActuator::default();
    let s = libvirt_snapshot(1, 100, false);
    // Affinity narrower than the machine, but libvirt's, not a choice.
    assert!(e.left_alone(&topo(), &s).is_empty());
    e.round(&topo(), &s, &mut act, &mut guard, &mut |_| {});
    let pinned: Vec<i32> = (act.actions.iter())
        .filter_map(|a| match a {
            Action::Pin { task, .. } => Some(task.tid),
            _ => None,
        })
        .collect();
    assert_eq!(pinned, [100, 101]);
    // What is put back at a stop is libvirt's pin, as it was.
    assert_eq!(guard.0, [(100, "1".to_string()), (101, "1".to_string())]);
}

#[test]
fn a_thread_its_owner_pinned_in_libvirt_is_left_alone_and_said_why() {
    let mut e = Engine::new(
        Box::new(PinTo("3")),
        every_process(),
        EngineConfig::default(),
    );
    let mut act = RecordingActuator::default();
    let r = e.round(
        &topo(),
        &libvirt_snapshot(1, 100, true),
        &mut act,
        &mut NoGuard,
        &mut |_| {},
    );
    assert!(act.actions.iter().all(|a| match a {
        Action::Pin { task, .. } => task.tid == 100,
        _ => true,
    }));
    assert_eq!(r.left_alone.get("held-by-manager"), Some(&1), "{r:?}");
    let n = &r.newly_left_alone[0];
    assert_eq!((n.tid, n.kind.as_str()), (101, "held-by-manager"));
    assert_eq!(
        n.why,
        "libvirt domain web holds its placement: its owner pinned it in libvirt's XML \
         (<vcpupin vcpu='0' cpuset='1'>)"
    );
}

/// `static`: threads 0 and 1 of `app` on CPUs 2 and 3, its memory on
/// node 1; it asks again every round the snapshot shows them elsewhere.
fn app_on_node_1() -> Box<dyn numaplace_policy::Policy> {
    use numaplace_policy::static_placement::{StaticMemory, StaticParams, StaticPin};
    let pin = |thread, cpus: &str| StaticPin {
        process: "app".into(),
        thread,
        cpus: CpuSet::parse_list(cpus).unwrap(),
    };
    PolicyKind::Static(StaticParams {
        pins: vec![pin(0, "2"), pin(1, "3")],
        memory: vec![StaticMemory {
            process: "app".into(),
            node: 1,
        }],
    })
    .build()
}

/// A dry run's engine: nothing applied, what it proposes shown next round
/// as if applied.
fn dry_run(migrate_mib_per_sec: u64) -> Engine {
    let mut e = Engine::new(
        app_on_node_1(),
        every_process(),
        EngineConfig {
            migrate_mib_per_sec,
            ..EngineConfig::default()
        },
    );
    e.as_if_applied(true);
    e
}

fn current_cpus(e: &JournalEntry) -> String {
    e.current
        .as_ref()
        .and_then(|c| c.cpus.as_ref())
        .unwrap()
        .to_string()
}

fn current_memory(e: &JournalEntry) -> BTreeMap<u32, u64> {
    e.current.clone().and_then(|c| c.memory).unwrap()
}

/// The machine does not change (nothing is applied): over ten rounds (of
/// a second each: the rate limit lets the whole move through) each
/// change is proposed once, not applied, with what it changes as it was;
/// an engine that does not take them as applied (`advise`) proposes them
/// every round.
#[test]
fn a_dry_run_proposes_each_change_once_with_what_it_changes() {
    let mut e = dry_run(1024);
    let mut journal = Vec::new();
    for r in 1..=10 {
        journal.extend(run(&mut e, &snapshot(r, 100 * r, "0-3")).0);
    }
    let said: Vec<String> = journal.iter().map(|j| format!("{:?}", j.action)).collect();
    assert_eq!(journal.len(), 3, "{said:#?}");
    assert!(
        journal
            .iter()
            .all(|j| j.outcome == Outcome::NotApplied && j.round == 1)
    );
    let (pins, moves): (Vec<&JournalEntry>, Vec<&JournalEntry>) =
        (journal.iter()).partition(|j| matches!(j.action, Action::Pin { .. }));
    for (p, (tid, to)) in pins.iter().zip([(100, "2"), (101, "3")]) {
        let Action::Pin { task, cpus, .. } = &p.action else {
            unreachable!()
        };
        assert_eq!((task.tid, cpus.to_string()), (tid, to.to_string()));
        assert_eq!(current_cpus(p), "0-3", "{p:?}");
    }
    assert!(matches!(
        moves[0].action,
        Action::MoveMemory { to_node: 1, .. }
    ));
    assert_eq!(current_memory(moves[0]), [(0, 512 * MIB)].into());
    let t = e.totals();
    assert_eq!((t.rounds, t.not_applied, t.applied), (10, 3, 0), "{t:?}");

    // As a line of the journal: the change's fields as before, and beside
    // them what it changes.
    let line = serde_json::to_string(pins[0]).unwrap();
    assert!(line.contains(r#""action":"pin""#), "{line}");
    assert!(line.contains(r#""cpus":"2""#), "{line}");
    assert!(line.contains(r#""current":{"cpus":"0-3"}"#), "{line}");
    assert!(line.contains(r#""outcome":"not_applied""#), "{line}");

    let mut every_round = Engine::new(app_on_node_1(), every_process(), EngineConfig::default());
    let mut proposed = 0;
    for r in 1..=10 {
        proposed += run(&mut every_round, &snapshot(r, 100 * r, "0-3")).0.len();
    }
    assert_eq!(proposed, 30);
}

/// A memory move the rate limit cuts short is proposed again for what
/// is left, from where the first left it: consecutive entries read as a
/// diff.
#[test]
fn a_dry_runs_memory_move_cut_short_goes_on_from_where_it_left_off() {
    let mut e = dry_run(256);
    let mut moves = Vec::new();
    for r in 1..=10 {
        let (j, _) = run(&mut e, &snapshot(r, 100 * r, "0-3"));
        moves.extend(j.into_iter().filter(|j| j.action.moves_memory()));
    }
    let now: Vec<BTreeMap<u32, u64>> = moves.iter().map(current_memory).collect();
    assert_eq!(
        now,
        [
            [(0, 512 * MIB)].into(),
            [(0, 256 * MIB), (1, 256 * MIB)].into()
        ],
        "{moves:#?}"
    );
}

/// What a dry run takes as applied gives way to the world: a thread
/// that set its own CPUs since is left alone (as after a real pin), and
/// a thread that took a reused tid is a new thread, proposed for from
/// its own CPUs; a restarted process's memory is proposed again.
#[test]
fn a_dry_run_drops_what_the_world_changed_and_never_lends_it_to_a_reused_id() {
    let mut e = dry_run(1024);
    assert_eq!(run(&mut e, &snapshot(1, 100, "0-3")).0.len(), 3);
    let mut s = snapshot(2, 200, "0-3");
    s.tasks[0].allowed_cpus = CpuSet::parse_list("1").unwrap();
    s.tasks[1].start_time += 1;
    s.groups[0].start_time += 1;
    let (j, _) = run(&mut e, &s);
    let of = |tid: i32| {
        (j.iter())
            .find(|e| matches!(&e.action, Action::Pin { task, .. } if task.tid == tid))
            .unwrap()
    };
    assert!(
        matches!(&of(100).outcome, Outcome::Skipped { why } if why.contains("left alone")),
        "{:?}",
        of(100)
    );
    assert_eq!(current_cpus(of(100)), "1");
    assert_eq!(of(101).outcome, Outcome::NotApplied);
    assert_eq!(
        current_cpus(of(101)),
        "0-3",
        "not the pin proposed for the old 101"
    );
    let moved: Vec<&JournalEntry> = j.iter().filter(|e| e.action.moves_memory()).collect();
    assert_eq!(moved.len(), 1, "{j:#?}");
    assert_eq!(current_memory(moved[0]), [(0, 512 * MIB)].into());
}

/// In a dry run the kernel's balancing proposed on is shown on in the
/// next rounds, until the world shows the setting changed otherwise (the
/// operator's change wins, and the proposal is made again from there).
#[test]
fn a_dry_run_shows_the_kernels_balancing_as_proposed_until_the_operator_changes_it() {
    let mut e = Engine::new(
        Box::new(BalancingOnThenMove),
        every_process(),
        EngineConfig::default(),
    );
    e.as_if_applied(true);
    let mut machine_wide = |seq: u64, now: bool| {
        let mut s = snapshot(seq, 100 * seq, "0-3");
        s.machine.numa_balancing = Some(now);
        let (j, _) = run(&mut e, &s);
        let k = j.into_iter().find(|j| j.action.machine_wide()).unwrap();
        (k.current.clone().and_then(|c| c.on), k.outcome)
    };
    assert_eq!(machine_wide(1, false), (Some(false), Outcome::NotApplied));
    let (now, outcome) = machine_wide(2, false);
    assert_eq!(now, Some(true));
    assert!(format!("{outcome:?}").contains("already on"), "{outcome:?}");
    // The operator turned it on, then off again.
    assert!(format!("{:?}", machine_wide(3, true).1).contains("already on"));
    assert_eq!(machine_wide(4, false), (Some(false), Outcome::NotApplied));
}
