//! Builders for the hand-made worlds the policies' tests and benches feed
//! them: threads, processes, VMs, counter deltas, and one round of a policy
//! with every process in scope.
//!
//! Compiled for this crate's own tests, and with the `testutil` feature,
//! which the crate's dev-dependency on itself turns on for its benches and
//! integration tests; other crates' tests may turn it on the same way.
//!
//! The builders fill in what a test does not care about; a test sets what
//! it does care about with struct update syntax:
//! `Task { comm: "CPU 0/KVM".into(), vcpu: Some(0), ..task(tid, pid, topo.span()) }`.

use std::collections::{BTreeMap, BTreeSet};

use numaplace_model::{
    Action, Counter, CounterDeltas, CpuSet, GroupKind, NodeSet, Plan, Snapshot, Task, TaskGroup,
    Topology,
};

use crate::{Policy, View};

/// A running thread `tid` of process `tgid` that may run on `allowed`:
/// started at tick 1, named `app`, no last CPU, no CPU time, no memory
/// policy, not a vCPU.
pub fn task(tid: i32, tgid: i32, allowed: &CpuSet) -> Task {
    Task {
        tid,
        tgid,
        start_time: 1,
        comm: "app".into(),
        state: 'R',
        last_cpu: None,
        allowed_cpus: allowed.clone(),
        allowed_mems: NodeSet::new(),
        confined_cpus: None,
        manager: None,
        utime: 0,
        stime: 0,
        vcpu: None,
    }
}

/// An ordinary process `pid` named `comm` (its command line that name
/// alone) with `threads`: started at tick 1, in no cgroup, its memory not
/// read.
pub fn process(pid: i32, comm: &str, threads: Vec<i32>) -> TaskGroup {
    TaskGroup {
        pid,
        start_time: 1,
        comm: comm.into(),
        cmdline: vec![comm.into()],
        cgroup: None,
        kind: GroupKind::Process,
        threads,
        memory: None,
    }
}

/// The kind of a KVM virtual machine called `name`, recognised by
/// `evidence`.
pub fn kvm(name: &str, evidence: &str) -> GroupKind {
    GroupKind::Vm {
        name: Some(name.into()),
        accel: "KVM".into(),
        evidence: evidence.into(),
    }
}

/// One thread's counter deltas: these counts, counted all the time the
/// counters were enabled (no multiplexing).
pub fn counters(values: impl IntoIterator<Item = (Counter, u64)>) -> CounterDeltas {
    CounterDeltas {
        values: values.into_iter().collect(),
        enabled_ns: 1,
        running_ns: 1,
    }
}

/// The threads of each process, by pid, in the order of `tasks`.
pub fn threads_by_process<'a>(
    tasks: impl IntoIterator<Item = &'a Task>,
) -> BTreeMap<i32, Vec<i32>> {
    let mut members: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for t in tasks {
        members.entry(t.tgid).or_default().push(t.tid);
    }
    members
}

/// Every process of the snapshot: the scope a test gives its policy.
pub fn all_processes(snapshot: &Snapshot) -> BTreeSet<i32> {
    snapshot.groups.iter().map(|g| g.pid).collect()
}

/// One round of `policy` on `snapshot`, every process in scope.
pub fn decide(policy: &mut dyn Policy, topology: &Topology, snapshot: &Snapshot) -> Plan {
    policy.decide(&View {
        topology,
        snapshot,
        managed: &all_processes(snapshot),
    })
}

/// `f` given the view of `snapshot` with every process in scope, as
/// [`decide`] gives it to a policy: for calling a policy's parts directly.
pub fn with_view<R>(topology: &Topology, snapshot: &Snapshot, f: impl FnOnce(&View<'_>) -> R) -> R {
    f(&View {
        topology,
        snapshot,
        managed: &all_processes(snapshot),
    })
}

/// The plan's pins, in order: the thread and the CPUs it is pinned to.
pub fn pins(plan: &Plan) -> Vec<(i32, CpuSet)> {
    plan.decisions
        .iter()
        .filter_map(|d| match &d.action {
            Action::Pin { task, cpus, .. } => Some((task.tid, cpus.clone())),
            _ => None,
        })
        .collect()
}

/// The threads the plan pins, in order.
pub fn pinned_tids(plan: &Plan) -> Vec<i32> {
    pins(plan).into_iter().map(|(tid, _)| tid).collect()
}
