//! Tests of the state `numaplace top` shows: the frame built from a round's
//! snapshot and journal entries, its lists and texts bounded.

use super::*;
use numaplace_model::snapshot::{NodeMeminfo, ResctrlSample};
use numaplace_model::world::Current;
use numaplace_model::{Action, CpuSet, NodeMemory, Outcome, Task, TaskGroup};

/// Two nodes of two CPUs each (CPUs 0-1 on node 0, 2-3 on node 1).
fn machine() -> Topology {
    Topology::synthetic("pack:2 numa:1 l3:1 core:2 pu:1").unwrap()
}

fn task(tid: i32, tgid: i32, cpu: u32, ticks: u64) -> Task {
    Task {
        tid,
        tgid,
        start_time: 7,
        comm: "w".into(),
        state: 'R',
        last_cpu: Some(cpu),
        allowed_cpus: CpuSet::default(),
        allowed_mems: CpuSet::default(),
        confined_cpus: None,
        manager: None,
        utime: ticks,
        stime: 0,
        vcpu: None,
    }
}

fn group(pid: i32, comm: &str, threads: Vec<i32>) -> TaskGroup {
    TaskGroup {
        pid,
        start_time: 7,
        comm: comm.into(),
        cmdline: vec![comm.into()],
        cgroup: None,
        kind: GroupKind::Process,
        threads,
        memory: None,
    }
}

/// A round `seq` in which process 10's two threads (on CPUs 0 and 3) have
/// run `ticks` each since boot; process 20 (another) is idle.
fn round(seq: u64, ticks: u64) -> Snapshot {
    let mut g = group(10, "app\u{1b}[31m", vec![10, 11]);
    g.memory = Some(BTreeMap::from([
        (
            0,
            NodeMemory {
                anon: 3 << 20,
                ..NodeMemory::default()
            },
        ),
        (
            1,
            NodeMemory {
                anon: 1 << 20,
                ..NodeMemory::default()
            },
        ),
    ]));
    let mut s = Snapshot {
        seq,
        interval_ns: if seq == 0 { 0 } else { 1_000_000_000 },
        tasks: vec![
            task(10, 10, 0, ticks),
            task(11, 10, 3, ticks),
            task(20, 20, 1, 5),
        ],
        groups: vec![g, group(20, "idle", vec![20])],
        ..Snapshot::default()
    };
    s.machine.clock_ticks = 100;
    s.machine.nodes = BTreeMap::from([
        (
            0,
            NodeMeminfo {
                total: 8 << 30,
                free: 2 << 30,
            },
        ),
        (
            1,
            NodeMeminfo {
                total: 8 << 30,
                free: 6 << 30,
            },
        ),
    ]);
    // Instructions counted for one of process 10's threads; only CPU time
    // (software) for process 20.
    for (tid, counter) in [(10, Counter::Instructions), (20, Counter::TaskClock)] {
        s.counters.insert(
            tid,
            numaplace_model::CounterDeltas {
                values: BTreeMap::from([(counter, 5)]),
                enabled_ns: 1,
                running_ns: 1,
            },
        );
    }
    s.numa_faults.insert(
        11,
        numaplace_model::NumaFaults {
            memory: BTreeMap::from([(1, 40)]),
            preferred_node: None,
        },
    );
    s
}

fn scope_pid_10() -> Scope {
    Scope {
        pids: vec![10],
        ..Scope::default()
    }
}

fn watch(topology: &Topology, scope: Scope, reads: Reads, applies: bool) -> Watch<'_> {
    Watch {
        topology,
        scope,
        reads,
        policy: "p".into(),
        applies,
    }
}

const READS: Reads = Reads {
    counters: true,
    memory: true,
    samples: true,
};

#[test]
fn a_round_gives_nodes_groups_and_busy_cpus_from_the_last_round() {
    let topo = machine();
    let mut b = StateBuilder::default();
    let w = watch(&topo, scope_pid_10(), READS, false);
    let first = b.round(&w, &round(0, 100), &|_| None);
    assert_eq!(first.nodes.len(), 2);
    assert_eq!(first.nodes[0].busy_cpus, None, "no interval yet");
    assert_eq!(first.groups[0].busy_cpus, None);
    // Nor in the first round a builder sees, whatever its interval (the
    // daemon's first snapshot has one, from its baseline reading).
    let fresh = StateBuilder::default().round(&w, &round(5, 500), &|_| None);
    assert_eq!(fresh.nodes[0].busy_cpus, None);
    assert_eq!(fresh.groups[0].busy_cpus, None);

    // 50 ticks at 100 per second over one second: half a CPU per thread.
    let w = watch(&topo, scope_pid_10(), READS, true);
    let s = b.round(&w, &round(1, 150), &|pid| {
        (pid == 10).then(|| "devil".to_string())
    });
    assert_eq!(s.format, FORMAT);
    assert_eq!((s.round, s.applies, s.policy.as_str()), (1, true, "p"));
    let n0 = &s.nodes[0];
    assert_eq!((n0.id, n0.cpus.as_str(), n0.cpu_count), (0, "0-1", 2));
    assert_eq!(n0.busy_cpus, Some(0.5));
    assert_eq!(s.nodes[1].busy_cpus, Some(0.5));
    assert_eq!(n0.mem_total, Some(8 << 30));
    assert_eq!(s.nodes[1].mem_free, Some(6 << 30));
    assert!(s.bandwidth.is_empty(), "no resctrl: nothing measured");

    let app = &s.groups[0];
    assert_eq!(app.pid, 10, "in scope first");
    assert!(app.in_scope);
    assert_eq!(app.label, "app\\x1b[31m", "escaped");
    assert_eq!(app.threads, 2);
    assert_eq!(app.running, BTreeMap::from([(0, 1), (1, 1)]));
    assert_eq!(app.cpus, "0,3");
    assert_eq!(app.busy_cpus, Some(1.0));
    assert_eq!(
        app.memory,
        Some(BTreeMap::from([(0, 3 << 20), (1, 1 << 20)]))
    );
    assert_eq!(app.class.as_deref(), Some("devil"));
    assert_eq!(
        app.signals,
        ["hw counters", "hinting faults 40", "numa_maps"]
    );
    let idle = &s.groups[1];
    assert!(!idle.in_scope);
    assert_eq!(idle.busy_cpus, Some(0.0));
    assert_eq!(idle.class, None);
    assert_eq!(idle.signals, ["sw counters"]);

    // A policy that reads neither counters nor memory: neither is its
    // signal.
    let w = watch(&topo, scope_pid_10(), Reads::default(), true);
    let s = b.round(&w, &round(2, 200), &|_| None);
    assert_eq!(s.groups[0].signals, ["hinting faults 40"]);
}

/// Each node's numastat over the round as allocations per second; none
/// in the first round (nothing to count from) or where not read.
#[test]
fn allocations_per_node_from_numastat() {
    let topo = machine();
    let w = watch(&topo, scope_pid_10(), READS, false);
    let mut s = round(1, 10);
    s.interval_ns = 2_000_000_000;
    let stat = numaplace_model::NumaStat {
        local_node: 800,
        other_node: 200,
        numa_foreign: 6,
        ..Default::default()
    };
    s.machine.numastat.insert(1, stat);
    let f = StateBuilder::default().round(&w, &s, &|_| None);
    assert_eq!(f.nodes[0].allocations, None, "node 0 not read");
    let a = f.nodes[1].allocations.unwrap();
    assert_eq!(
        (a.local_per_s, a.remote_per_s, a.turned_away_per_s),
        (400.0, 100.0, 3.0)
    );
    s.interval_ns = 0;
    let f = StateBuilder::default().round(&w, &s, &|_| None);
    assert_eq!(f.nodes[1].allocations, None, "first round");
}

#[test]
fn bandwidth_is_per_resctrl_domain_where_measured() {
    let topo = machine();
    let mut b = StateBuilder::default();
    let mut s = round(1, 10);
    s.interval_ns = 2_000_000_000;
    for (group, bytes) in [("", 4000), ("g1", 2000)] {
        s.machine.resctrl.push(ResctrlSample {
            group: group.into(),
            domain: 0,
            llc_occupancy: None,
            mbm_total_bytes: Some(bytes),
            mbm_local_bytes: None,
        });
    }
    let f = b.round(&watch(&topo, Scope::default(), READS, false), &s, &|_| None);
    assert_eq!(f.bandwidth.len(), 1);
    assert_eq!(f.bandwidth[0].domain, 0);
    assert_eq!(f.bandwidth[0].bytes_per_s, 3000.0);
}

fn entry(round: u64, label: &str, reason: &str) -> JournalEntry {
    JournalEntry {
        round,
        time_unix_ns: 0,
        policy: "p".into(),
        pid: 10,
        label: label.into(),
        action: Action::Pin {
            task: TaskId {
                tid: 11,
                start_time: 7,
            },
            tgid: 10,
            cpus: "2-3".parse().unwrap(),
        },
        reason: reason.into(),
        outcome: Outcome::Refused {
            errno: "EPERM".into(),
            why: "not allowed".into(),
        },
        current: Some(Current {
            cpus: Some("0-7".parse().unwrap()),
            ..Current::default()
        }),
    }
}

/// Whatever processes call themselves and however many rounds pass, the
/// frame stays bounded: names and reasons cut, decisions and groups
/// capped.
#[test]
fn names_reasons_decisions_and_groups_are_bounded() {
    let topo = machine();
    let mut b = StateBuilder::default();
    let long = "x".repeat(10_000);
    for r in 0..(MAX_DECISIONS as u64 + 10) {
        b.entry(&entry(r, &long, &long));
    }
    let mut s = round(1, 10);
    s.groups = (0..(MAX_GROUPS as i32 + 50))
        .map(|i| group(1000 + i, &long, vec![]))
        .collect();
    let f = b.round(&watch(&topo, Scope::default(), READS, false), &s, &|_| {
        Some(long.clone())
    });
    assert_eq!(f.decisions.len(), MAX_DECISIONS);
    assert_eq!(f.decisions[0].round, 10, "the oldest dropped");
    let d = f.decisions.last().unwrap();
    assert_eq!(d.label.chars().count(), MAX_LABEL);
    assert!(d.label.ends_with('…'));
    assert_eq!(d.reason.chars().count(), MAX_REASON);
    assert_eq!(d.action, "pin thread 11 from CPUs 0-7 to CPUs 2-3");
    assert_eq!(d.outcome, "refused (EPERM): not allowed");
    assert_eq!(f.groups.len(), MAX_GROUPS);
    assert_eq!(f.groups_left_out, 50);
    assert!(
        f.groups
            .iter()
            .all(|g| g.label.chars().count() <= MAX_LABEL)
    );
    assert!(
        f.groups
            .iter()
            .all(|g| g.class.as_ref().unwrap().chars().count() <= MAX_LABEL)
    );
    // The whole frame's JSON has a size bound the reader's cap is far above.
    let json = serde_json::to_string(&f).unwrap();
    assert!(json.len() < 1 << 20, "{} bytes", json.len());
}

#[test]
fn kernel_threads_are_left_out() {
    let topo = machine();
    let mut s = round(1, 10);
    let mut k = group(2, "kthreadd", vec![]);
    k.cmdline.clear();
    s.groups.push(k);
    let f =
        StateBuilder::default().round(&watch(&topo, Scope::default(), READS, false), &s, &|_| None);
    assert!(f.groups.iter().all(|g| g.pid != 2));
}
