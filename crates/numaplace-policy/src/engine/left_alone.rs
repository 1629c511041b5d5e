//! Who the engine leaves alone, and why: the threads of processes in scope
//! that no policy may place ([`crate::LeftAlone`]), counted each round and
//! noted the first round each holds.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use numaplace_model::{Snapshot, Task, Topology};

use super::{Engine, RoundReport};
use crate::{LeftAlone, View};

/// A thread no policy may place, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftAloneNote {
    /// The thread.
    pub tid: i32,
    /// Its process.
    pub pid: i32,
    /// Its process's label (name, or VM name). Untrusted.
    pub label: String,
    /// [`crate::LeftAlone::kind`].
    pub kind: String,
    /// The reason in words.
    pub why: String,
}

impl LeftAloneNote {
    fn of(s: &Snapshot, t: &Task, why: &LeftAlone) -> LeftAloneNote {
        LeftAloneNote {
            tid: t.tid,
            pid: t.tgid,
            label: s.group(t.tgid).map(|g| g.label()).unwrap_or_default(),
            kind: why.kind().into(),
            why: why.to_string(),
        }
    }
}

impl Engine {
    /// The threads of processes in scope on `s` that no policy may place,
    /// and why ([`LeftAlone`]), in tid order.
    pub fn left_alone(&self, topology: &Topology, s: &Snapshot) -> Vec<LeftAloneNote> {
        let managed = self.managed(s);
        self.left_alone_of(topology, s, &managed)
            .into_iter()
            .map(|(t, why)| LeftAloneNote::of(s, t, &why))
            .collect()
    }

    pub(super) fn left_alone_of<'s>(
        &self,
        topology: &Topology,
        s: &'s Snapshot,
        managed: &BTreeSet<i32>,
    ) -> Vec<(&'s Task, LeftAlone)> {
        let view = View {
            topology,
            snapshot: s,
            managed,
        };
        let mut out = Vec::new();
        for t in &s.tasks {
            if !managed.contains(&t.tgid) || matches!(t.state, 'Z' | 'X') {
                continue;
            }
            let id = t.id();
            let took_back = self.hands_off.contains(&id)
                && self.applied.get(&id).is_some_and(|a| *a != t.allowed_cpus);
            let why = if took_back {
                Some(LeftAlone::TookItBack {
                    affinity: t.allowed_cpus.clone(),
                })
            } else {
                view.left_alone(t, &self.applied)
            };
            if let Some(why) = why {
                out.push((t, why));
            }
        }
        out
    }

    /// A thread its manager holds (libvirt's domains, the kubelet's
    /// Guaranteed pods) at its first pin: its affinity is the manager's,
    /// placed through it, or left to it for good (`Some`, saying why).
    pub(super) fn held_by_manager(&mut self, t: &Task) -> Option<numaplace_model::Outcome> {
        let m = t.manager.as_ref()?;
        let why = m.hands_off.as_ref()?;
        self.hands_off.insert(t.id());
        Some(numaplace_model::Outcome::Skipped {
            why: format!("left alone: {} holds its placement: {why}", m.who),
        })
    }

    /// Counts this round's threads left alone by kind, and notes those
    /// whose reason was not said before.
    pub(super) fn count_left_alone(
        &mut self,
        topology: &Topology,
        s: &Snapshot,
        managed: &BTreeSet<i32>,
        report: &mut RoundReport,
    ) {
        let found = self.left_alone_of(topology, s, managed);
        // Counted by the kind's name, a `String` made once per kind.
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (t, why) in found {
            let kind = why.kind();
            *counts.entry(kind).or_insert(0) += 1;
            *(report.left_alone_by_process.entry(t.tgid).or_default())
                .entry(kind.to_string())
                .or_insert(0) += 1;
            if self.said.insert(t.id(), (kind, s.seq)).map(|k| k.0) != Some(kind) {
                report.newly_left_alone.push(LeftAloneNote::of(s, t, &why));
            }
        }
        report.left_alone = counts
            .into_iter()
            .map(|(k, n)| (k.to_string(), n))
            .collect();
        // One placed again is said again when next left alone.
        self.said.retain(|_, (_, seq)| *seq == s.seq);
    }
}
