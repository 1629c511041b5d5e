//! The replay world of docs/architecture.md: a policy decides on a recorded
//! snapshot stream, and an actuator applies nothing.
//!
//! A recording shows the threads where they really ran, not where the
//! policy put them, so a policy replayed naively would find every pin it
//! made undone the next round and make it again (or, through the engine,
//! take the thread for one that chose its own CPUs). [`ReplayActuator`]
//! takes pins as done and shows them to the policy in the later snapshots
//! ([`ReplayActuator::overlay`]): the thread's allowed CPUs become the
//! pin, and its last CPU one of them if it was elsewhere. What the threads
//! did (CPU time, counters, memory per node, sampled addresses) stays as
//! recorded: a replay shows what a policy would have decided on what was
//! seen, not what would have happened had it been obeyed (the simulator
//! answers that).
//!
//! Memory moves are kept the same way, in bytes per node: a move takes
//! anonymous memory from the process's other nodes (in proportion to what
//! each holds) to the target, up to the pages asked for, and every later
//! snapshot shows the process's memory per node with the moves made so far
//! laid over what was recorded. Which pages moved is not known (a replayed
//! `MoveWindow` moves its page count, wherever they were), and memory the
//! process allocates later is placed as recorded.
//!
//! Where the recording itself shows a thread's affinity change (someone
//! pinned it while it was recorded), the overlay steps aside and the
//! engine sees the change, as the daemon would.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use numaplace_model::{Action, CpuSet, NodeMemory, Outcome, PageCounts, Snapshot, TaskId};

use crate::engine::{Actuator, AffinityError, Telemetry};

/// Counts of what a replayed policy asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    pub pins: u64,
    pub memory_moves: u64,
    pub window_moves: u64,
}

/// Pins and memory moves taken as done, kept for the snapshots that
/// follow.
#[derive(Debug)]
pub struct ReplayActuator {
    page_size: u64,
    /// Per thread: the pin, and the affinity the recording showed when it
    /// was made.
    pins: HashMap<TaskId, (CpuSet, CpuSet)>,
    /// The recorded affinity of every thread in the snapshot last
    /// overlaid, before the overlay (what a pin made now replaces).
    recorded: HashMap<TaskId, CpuSet>,
    /// Per process, its moves in order: (node, bytes); consecutive moves
    /// to one node are one entry.
    moves: HashMap<TaskId, Vec<(u32, u64)>>,
    /// Per process, anonymous bytes per node as last shown (with the
    /// moves), updated by the moves of the round.
    anon: HashMap<TaskId, BTreeMap<u32, u64>>,
    pub counts: ReplayCounts,
}

impl Default for ReplayActuator {
    fn default() -> Self {
        ReplayActuator::new(4096)
    }
}

/// Moves up to `bytes` of anonymous memory from the other nodes of `anon`
/// to `to`, from each in proportion to what it holds; returns the bytes
/// moved.
fn shift(anon: &mut BTreeMap<u32, u64>, to: u32, bytes: u64) -> u64 {
    let elsewhere: u64 = anon.iter().filter(|(n, _)| **n != to).map(|(_, b)| b).sum();
    let want = bytes.min(elsewhere);
    if want == 0 {
        return 0;
    }
    let mut moved = 0;
    let others: Vec<u32> = anon.keys().copied().filter(|&n| n != to).collect();
    for (i, n) in others.iter().enumerate() {
        let have = anon[n];
        let take = if i + 1 == others.len() {
            (want - moved).min(have)
        } else {
            ((want as u128 * have as u128) / elsewhere as u128) as u64
        };
        *anon.get_mut(n).expect("listed") -= take;
        moved += take;
    }
    *anon.entry(to).or_default() += moved;
    moved
}

impl ReplayActuator {
    /// `page_size`: bytes per page, for the page counts of memory moves.
    pub fn new(page_size: u64) -> ReplayActuator {
        ReplayActuator {
            page_size: page_size.max(1),
            pins: HashMap::new(),
            recorded: HashMap::new(),
            moves: HashMap::new(),
            anon: HashMap::new(),
            counts: ReplayCounts::default(),
        }
    }

    /// Shows the pins and memory moves made so far in `s`, the next
    /// recorded snapshot.
    pub fn overlay(&mut self, s: &mut Snapshot) {
        self.overlay_memory(s);
        self.recorded = s
            .tasks
            .iter()
            .map(|t| (t.id(), t.allowed_cpus.clone()))
            .collect();
        let alive = &self.recorded;
        self.pins.retain(|id, _| alive.contains_key(id));
        for t in &mut s.tasks {
            let Some((pin, then)) = self.pins.get(&t.id()) else {
                continue;
            };
            if t.allowed_cpus != *then {
                // Changed in the recording itself: the real change wins.
                self.pins.remove(&t.id());
                continue;
            }
            t.allowed_cpus = pin.clone();
            if t.last_cpu.is_none_or(|c| !pin.contains(c)) {
                t.last_cpu = pin.first();
            }
        }
    }

    fn overlay_memory(&mut self, s: &mut Snapshot) {
        let alive: std::collections::HashSet<TaskId> = s.groups.iter().map(|g| g.id()).collect();
        self.moves.retain(|id, _| alive.contains(id));
        self.anon.clear();
        for g in &mut s.groups {
            let id = g.id();
            let Some(memory) = g.memory.as_mut() else {
                continue;
            };
            let mut anon: BTreeMap<u32, u64> = memory.iter().map(|(n, m)| (*n, m.anon)).collect();
            for &(to, bytes) in self.moves.get(&id).into_iter().flatten() {
                shift(&mut anon, to, bytes);
            }
            for (n, b) in &anon {
                memory.entry(*n).or_insert_with(NodeMemory::default).anon = *b;
            }
            self.anon.insert(id, anon);
        }
    }

    /// Carries a memory move out on the overlay: up to `pages` pages.
    fn move_memory(&mut self, process: TaskId, to: u32, pages: Option<u64>) -> Outcome {
        let Some(anon) = self.anon.get_mut(&process) else {
            return Outcome::Gone;
        };
        let page = self.page_size;
        let already = anon.get(&to).copied().unwrap_or(0) / page;
        let moved = shift(anon, to, pages.map_or(u64::MAX, |p| p.saturating_mul(page))) / page;
        if moved > 0 {
            let list = self.moves.entry(process).or_default();
            match list.last_mut() {
                Some((n, b)) if *n == to => *b += moved * page,
                _ => list.push((to, moved * page)),
            }
        }
        Outcome::Pages(PageCounts {
            moved,
            already,
            busy: 0,
            failed: 0,
        })
    }
}

impl Actuator for ReplayActuator {
    /// The pin made in the replay where there is one, else what the
    /// recording showed last.
    fn affinity(&self, task: TaskId, _tgid: i32) -> Result<CpuSet, AffinityError> {
        self.pins
            .get(&task)
            .map(|(pin, _)| pin)
            .or_else(|| self.recorded.get(&task))
            .cloned()
            .ok_or(AffinityError::Gone)
    }

    fn apply(&mut self, action: &Action) -> Outcome {
        match action {
            Action::Pin { task, cpus, .. } => {
                self.counts.pins += 1;
                let Some(then) = self.recorded.get(task) else {
                    return Outcome::Gone;
                };
                self.pins.insert(*task, (cpus.clone(), then.clone()));
                Outcome::Done
            }
            Action::MoveMemory {
                process,
                to_node,
                max_pages,
            } => {
                self.counts.memory_moves += 1;
                self.move_memory(*process, *to_node, *max_pages)
            }
            Action::MoveWindow {
                process,
                to_node,
                pages_before,
                pages_after,
                ..
            } => {
                self.counts.window_moves += 1;
                self.move_memory(*process, *to_node, Some(pages_before + pages_after + 1))
            }
            Action::KernelBalancing { .. } => Outcome::Skipped {
                why: "a replay cannot change the recorded kernel's automatic NUMA balancing: \
                      its snapshots go on showing what the recorded kernel did"
                    .into(),
            },
        }
    }
}

/// A recording as a world of the engine's loop: its snapshots with the
/// pins and memory moves the replayed policy made laid over them
/// ([`ReplayActuator::overlay`]), and the actuator that takes them as
/// done.
pub struct ReplayWorld<T> {
    pub telemetry: T,
    pub actuator: ReplayActuator,
}

impl<T: Telemetry> Telemetry for ReplayWorld<T> {
    type Error = T::Error;

    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, T::Error> {
        let mut snapshot = self.telemetry.next_snapshot()?;
        if let Some(s) = snapshot.as_mut() {
            self.actuator.overlay(s);
        }
        Ok(snapshot)
    }

    fn after_round(&mut self, managed: &BTreeSet<i32>, acted_on: &BTreeSet<i32>) {
        self.telemetry.after_round(managed, acted_on);
    }
}

impl<T> Actuator for ReplayWorld<T> {
    fn apply(&mut self, action: &Action) -> Outcome {
        self.actuator.apply(action)
    }

    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError> {
        self.actuator.affinity(task, tgid)
    }
}

#[cfg(test)]
mod tests {
    use super::shift;
    use std::collections::BTreeMap;

    #[test]
    fn a_move_takes_from_the_other_nodes_in_proportion() {
        let mut anon: BTreeMap<u32, u64> = [(0, 300), (1, 100), (2, 0)].into();
        assert_eq!(shift(&mut anon, 2, 200), 200);
        assert_eq!(anon, [(0, 150), (1, 50), (2, 200)].into());
        // More than there is elsewhere: all of it.
        assert_eq!(shift(&mut anon, 1, 1000), 350);
        assert_eq!(anon, [(0, 0), (1, 400), (2, 0)].into());
        assert_eq!(shift(&mut anon, 1, 10), 0);
        // A node it has nothing on yet.
        assert_eq!(shift(&mut anon, 3, 7), 7);
        assert_eq!(anon[&3] + anon[&1], 400);
        // Rounding never moves more than asked.
        let mut odd: BTreeMap<u32, u64> = [(0, 1), (1, 1), (2, 1)].into();
        assert_eq!(shift(&mut odd, 2, 1), 1);
        assert_eq!(odd.values().sum::<u64>(), 3);
    }
}
