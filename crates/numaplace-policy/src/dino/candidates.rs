//! The threads DINO and DI place each round: the candidates (in scope,
//! not placed by anyone else, with LLC miss counts), the maps keyed by
//! thread, and giving threads back to Linux.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use numaplace_model::metrics::mpki;
use numaplace_model::{Action, CpuSet, Plan, TaskId};

use crate::View;

/// What DINO and DI do where LLC misses cannot be counted.
pub(super) const BLIND_WITHOUT_MPKI: &str = "classifies threads by their LLC misses per 1000 instructions \
     ([Blagodurov11] §3), which are not counted here: it leaves every thread where it is; \
     --counters-from FILE feeds made-up counters for testing";

/// What DINO and DI-Migrate do where data addresses cannot be sampled.
pub(super) const FOLLOW_WITHOUT_SAMPLES: &str = "moves the pages around a migrated thread's sampled data \
     addresses ([Blagodurov11] §4), which are not sampled here: it moves a process's anonymous \
     pages on other nodes instead, hot or not, and only once all its threads run on one node";

/// Maps keyed by thread, hashed cheaply: a decision over 10,000 threads
/// looks each up in three of them (issue 19 found SipHash a tenth of the
/// decision). Nothing is iterated in hash order, so the hasher cannot
/// change a decision.
pub(super) type TaskMap<V> = HashMap<TaskId, V, BuildHasherDefault<TaskIdHasher>>;
pub(super) type TaskSet = HashSet<TaskId, BuildHasherDefault<TaskIdHasher>>;

/// A multiplicative (Fx-style) hasher for [`TaskId`]s: tids and start
/// times are not chosen by an adversary who could make them collide at
/// will (the kernel hands them out), and the map stays correct if they do.
#[derive(Default)]
pub(super) struct TaskIdHasher(u64);

impl Hasher for TaskIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        const K: u64 = 0xf135_7aea_2e62_a9c5;
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(K);
    }

    fn write_i32(&mut self, v: i32) {
        self.write_u64(u64::from(v as u32));
    }
}

/// A thread this round: who it is and how intensive.
pub(super) struct Candidate<'a> {
    pub(super) id: TaskId,
    pub(super) tgid: i32,
    pub(super) mpki: f64,
    pub(super) label: &'a str,
    /// Its affinity now.
    pub(super) allowed: &'a CpuSet,
    /// The CPUs its cgroup confines it to, if any: its pins stay within
    /// them ([`crate::confine`]).
    pub(super) confined: Option<&'a CpuSet>,
    /// The CPU it last ran on.
    pub(super) last_cpu: Option<u32>,
}

/// The threads a DI policy may place: in scope, running, not placed by
/// anyone but numaplace, and with LLC miss counts.
pub(super) fn candidates<'a>(
    view: &View<'a>,
    labels: &'a HashMap<i32, String>,
    ours: &TaskMap<CpuSet>,
    skipped: &mut usize,
) -> Vec<Candidate<'a>> {
    let s = view.snapshot;
    let mut out = Vec::new();
    for t in &s.tasks {
        if !view.placeable(t, ours) {
            continue;
        }
        let Some(c) = s.counters.get(&t.tid) else {
            *skipped += 1;
            continue;
        };
        let Some(m) = mpki(c) else {
            *skipped += 1;
            continue;
        };
        out.push(Candidate {
            id: t.id(),
            tgid: t.tgid,
            mpki: m,
            label: labels.get(&t.tgid).map_or("", |l| l.as_str()),
            allowed: &t.allowed_cpus,
            confined: t.confined_cpus.as_ref(),
            last_cpu: t.last_cpu,
        });
    }
    out
}

/// The CPUs Linux has a thread run on when a policy gives it back: those
/// of `span` (the CPUs numaplace may place onto) its cgroup leaves it.
pub(super) fn linux_cpus(span: &CpuSet, confined: Option<&CpuSet>) -> CpuSet {
    confined.map_or_else(|| span.clone(), |k| span.intersection(k))
}

/// Gives every thread this policy pinned back to Linux (all the CPUs
/// numaplace may place onto), saying why; forgets them.
pub(super) fn release_all(
    name: &str,
    cands: &[Candidate<'_>],
    ours: &mut TaskMap<CpuSet>,
    span: &CpuSet,
    why: &str,
    plan: &mut Plan,
) {
    for c in cands {
        let back = linux_cpus(span, c.confined);
        if ours.remove(&c.id).is_some() && *c.allowed != back {
            plan.push(
                Action::Pin {
                    task: c.id,
                    tgid: c.tgid,
                    cpus: back.clone(),
                },
                format!(
                    "{name}: thread {} of {} back to Linux (CPUs {back}): {why}",
                    c.id.tid, c.label
                ),
            );
        }
    }
    ours.clear();
}
