//! Undoing what a trial changed: each thread back onto the node it ran
//! on, then to its own affinity a round later ([`undo_of`]); each moved
//! group's memory back in its shares per node ([`Auto::memory_back`]),
//! carried on while the engine's rate limit spreads it
//! ([`Auto::finish_undoing`]).

use std::collections::BTreeMap;

use numaplace_model::{Action, Decision, Plan, Snapshot, TaskId, Topology};

use super::{Auto, Before, Experiment, GATHER, MEMORY_HOME, Move, layout_name};
use crate::View;

/// The thread a pin is for.
pub(super) fn pinned(a: &Action) -> Option<TaskId> {
    match a {
        Action::Pin { task, .. } => Some(*task),
        _ => None,
    }
}

/// Where a rollback's first step puts thread `x` ([`undo_of`]): the CPUs
/// of the node it last ran on within its affinity, when that is narrower
/// than its affinity; on a crowded machine (more runnable threads than
/// CPUs, [`crate::dino::aside::crowded`]) the very CPU it ran on. There
/// every CPU is shared and the kernel's balancing leaves a pairing as it
/// finds it, so a thread put back on its node alone may come to share a
/// CPU with one that ran alone before (mix:18003: two short programs that
/// had a CPU each shared one after a rolled-back gathering, 16.8 and
/// 18.6 s -> 25.4 and 27.7 s).
pub(super) fn home_within(
    t: &Topology,
    x: &numaplace_model::Task,
    crowded: bool,
) -> Option<numaplace_model::CpuSet> {
    let cpu = x.last_cpu.and_then(|c| t.cpu_by_os_id(c))?;
    let home = if crowded {
        numaplace_model::CpuSet::from_iter([cpu.os_id])
    } else {
        t.nodes()[cpu.node].span.clone()
    };
    Some(home.intersection(&x.allowed_cpus)).filter(|n| !n.is_empty() && *n != x.allowed_cpus)
}

/// The pins that undo `decisions` on `s`, in two steps: first each
/// pinned thread back onto the node it runs on now, or on a crowded
/// machine the CPU (within the affinity it has now, [`home_within`]),
/// then, a round later, back to that affinity. Given its old
/// affinity alone, a thread would stay where the move put it until the
/// scheduler's balancing happened to move it, so the machine after a
/// rollback would not be the one before the move. Memory is put back by
/// [`Auto::roll_back`], from where it was before
/// ([`Move::memory_before`]).
pub(super) fn undo_of(
    t: &Topology,
    s: &Snapshot,
    decisions: &[Decision],
) -> (Vec<Action>, Vec<Action>) {
    let (mut home, mut undo) = (Vec::new(), Vec::new());
    let crowded = crate::dino::aside::crowded(s, t).is_some();
    for d in decisions {
        let Action::Pin { task, tgid, .. } = &d.action else {
            continue;
        };
        if let Some(x) = s.task(task.tid).filter(|x| x.id() == *task) {
            if let Some(cpus) = home_within(t, x, crowded) {
                home.push(Action::Pin {
                    task: *task,
                    tgid: *tgid,
                    cpus,
                });
            }
            undo.push(Action::Pin {
                task: *task,
                tgid: *tgid,
                cpus: x.allowed_cpus.clone(),
            });
        }
    }
    (home, undo)
}

/// Bytes of a page, for moving a share of a process's memory (the
/// kernel's base page; huge pages move as many of them).
const PAGE: u64 = 4096;

/// The move that brings `process`'s memory on `node` back up to the share
/// `want` of it (a little short counts as back), if it is short of it.
pub(super) fn restore(s: &Snapshot, process: TaskId, node: u32, want: f64) -> Option<Action> {
    let m = s.group(process.tid)?.memory_total()?;
    let total: u64 = m.values().sum();
    let now = *m.get(&node).unwrap_or(&0) as f64 / total.max(1) as f64;
    if total == 0 || now >= want - 0.05 {
        return None;
    }
    Some(Action::MoveMemory {
        process,
        to_node: node,
        max_pages: Some((((want - now) * total as f64) as u64).div_ceil(PAGE).max(1)),
    })
}

/// The share of `pid`'s memory on `node`, if its memory is known.
/// Bytes of `pid`'s resident memory not on `node`.
pub(super) fn away_from(s: &Snapshot, pid: i32, node: u32) -> f64 {
    (s.group(pid).and_then(|g| g.memory_total())).map_or(0.0, |m| {
        m.iter()
            .filter(|(n, _)| **n != node)
            .map(|(_, b)| *b as f64)
            .sum()
    })
}

/// The moves of `moves` with memory still to carry, in the order the
/// engine is asked to carry them: the least left first, as the model
/// counts them arriving under its one rate limit
/// ([`super::predict::serve_order`]).
pub(super) fn in_serve_order<'a>(s: &Snapshot, moves: &'a [Move]) -> Vec<&'a Move> {
    let left: Vec<f64> = (moves.iter())
        .map(|m| {
            m.memory_to
                .map_or(0.0, |(process, node)| away_from(s, process.tid, node))
        })
        .collect();
    (super::predict::serve_order(&left).into_iter())
        .map(|i| &moves[i])
        .collect()
}

pub(super) fn share_on(s: &Snapshot, pid: i32, node: u32) -> Option<f64> {
    let m = s.group(pid)?.memory_total()?;
    let total: u64 = m.values().sum();
    (total > 0).then(|| *m.get(&node).unwrap_or(&0) as f64 / total as f64)
}

impl Auto {
    /// A rollback's memory moves still to finish, asked again while a node
    /// holds less of the process's memory than it did before the move (at
    /// most a few rounds).
    pub(super) fn finish_undoing(&mut self, s: &Snapshot, plan: &mut Plan) {
        self.undoing.retain_mut(|(process, node, want, left)| {
            let Some(action) = restore(s, *process, *node, *want) else {
                return false;
            };
            if *left == 0 {
                return false;
            }
            *left -= 1;
            plan.push(
                action,
                format!(
                    "auto: rollback: memory back to node {node} ({:.0} % of it was there), continued",
                    100.0 * *want
                ),
            );
            true
        });
    }

    /// Undoes move `m` of experiment `number`, saying `why` in each
    /// undoing action's reason: the threads back on the nodes (on a
    /// crowded machine the CPUs) they ran on and, next round, to their affinities as they were; the memory back
    /// to the nodes it was on, in the shares it had there. A gathering
    /// rolled back holds numad's whole placement back as long: it showed
    /// the threads do not gain from running together.
    pub(super) fn roll_back(
        &mut self,
        s: &Snapshot,
        number: u64,
        m: Move,
        why: &str,
        plan: &mut Plan,
    ) {
        let reason = format!(
            "auto: experiment {number} ({} of {}) rolled back: {why}",
            m.kind, m.label
        );
        if m.kind == GATHER {
            if let Some(until) = self.backoff.until(m.pid, GATHER) {
                self.backoff.hold(m.pid, MEMORY_HOME, until);
            }
        }
        let memory = if m.moved_memory {
            self.memory_back(s, &m)
        } else {
            Vec::new()
        };
        let mut undo = Vec::new();
        for a in m.undo {
            let home = m
                .undo_home
                .iter()
                .find(|h| pinned(h).is_some() && pinned(h) == pinned(&a));
            match home {
                Some(h) => {
                    undo.push(h.clone());
                    self.releasing
                        .push((a, format!("{reason} (second step: its own affinity back)")));
                }
                None => undo.push(a),
            }
        }
        undo.extend(memory);
        for a in undo {
            plan.push(a, reason.clone());
        }
    }

    /// Notes a rollback of the layout at `round`; returns the rounds it
    /// waits before it is tried again (doubling, as [`Backoff`]'s).
    pub(super) fn hold_layout(&mut self, round: u64) -> u64 {
        self.layout_held.0 += 1;
        let wait = self.judge.backoff_after(self.layout_held.0);
        self.hold_layout_until(round + wait);
        wait
    }

    /// Holds the layout until round `until`, noting the groups in scope.
    pub(super) fn hold_layout_until(&mut self, until: u64) {
        self.layout_held.1 = until;
        self.layout_held_for = self.first_seen.keys().copied().collect();
    }

    /// Undoes a layout's trial: every thread it re-pinned back onto the
    /// node (on a crowded machine the CPU) it ran on before and, next round, to its affinity as it was
    /// (threads that came during the trial: to the affinity they came
    /// with); every moved group's memory back in its shares per node.
    pub(super) fn roll_back_layout(
        &mut self,
        view: &View<'_>,
        e: Experiment,
        why: &str,
        plan: &mut Plan,
    ) {
        let s = view.snapshot;
        let reason = format!(
            "auto: experiment {} ({}) rolled back: {why}",
            e.number,
            layout_name(e.model)
        );
        let before = e.layout.unwrap_or_default();
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            for x in g.threads.iter().filter_map(|&tid| s.task(tid)) {
                let (home, to) = match before.get(&x.tid).filter(|b| b.task == x.id()) {
                    Some(b) => (b.node.clone(), (b.task, b.tgid, b.allowed.clone())),
                    None => match self.first_affinity.get(&x.tid).filter(|f| f.0 == x.id()) {
                        Some(f) => (None, f.clone()),
                        None => continue,
                    },
                };
                if x.allowed_cpus == to.2 {
                    continue; // the layout left it as it was
                }
                let release = Action::Pin {
                    task: to.0,
                    tgid: to.1,
                    cpus: to.2,
                };
                match home {
                    Some(cpus) => {
                        plan.push(
                            Action::Pin {
                                task: to.0,
                                tgid: to.1,
                                cpus,
                            },
                            reason.clone(),
                        );
                        self.releasing.push((
                            release,
                            format!("{reason} (second step: its own affinity back)"),
                        ));
                    }
                    None => plan.push(release, reason.clone()),
                }
            }
        }
        for m in e.moves {
            for a in self.memory_back(s, &m) {
                plan.push(a, reason.clone());
            }
        }
    }

    /// The moves that put move `m`'s group's memory back on the nodes it
    /// was on, in the shares it had there ([`Move::memory_before`]); each
    /// is asked again for up to four rounds while the rate limit spreads
    /// it ([`Auto::finish_undoing`]).
    pub(super) fn memory_back(&mut self, s: &Snapshot, m: &Move) -> Vec<Action> {
        let Some(process) = s.group(m.pid).map(|g| g.id()) else {
            return Vec::new();
        };
        let total: u64 = m.memory_before.values().sum();
        let mut back = Vec::new();
        for (&node, &bytes) in &m.memory_before {
            let want = bytes as f64 / total.max(1) as f64;
            if let Some(a) = restore(s, process, node, want) {
                self.undoing.push((process, node, want, 4));
                back.push(a);
            }
        }
        back
    }
}

/// Every thread in scope's affinity and where a layout's rollback first
/// puts it ([`home_within`]), by tid: what a layout's trial keeps to put
/// back ([`super::Experiment::layout`]).
pub(super) fn layout_before(view: &View<'_>) -> BTreeMap<i32, Before> {
    let (t, s) = (view.topology, view.snapshot);
    let crowded = crate::dino::aside::crowded(s, t).is_some();
    let mut before = BTreeMap::new();
    for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
        for x in g.threads.iter().filter_map(|&tid| s.task(tid)) {
            before.insert(
                x.tid,
                Before {
                    task: x.id(),
                    tgid: g.pid,
                    allowed: x.allowed_cpus.clone(),
                    node: home_within(t, x, crowded),
                },
            );
        }
    }
    before
}
