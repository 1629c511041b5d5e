//! The replay world of docs/architecture.md: a policy decides on a recorded
//! snapshot stream, and an actuator applies nothing.
//!
//! A recording shows the threads where they really ran, not where the
//! policy put them: [`ReplayActuator`] takes pins and memory moves as done
//! and shows them to the policy in the later snapshots
//! ([`ReplayActuator::overlay`], through [`AsIfApplied`], which says how).
//! What the threads did (CPU time, counters, memory per node, sampled
//! addresses) stays as recorded: a replay shows what a policy would have
//! decided on what was seen, not what would have happened had it been
//! obeyed (the simulator answers that). Where the recording itself shows a
//! thread's affinity change (someone pinned it while it was recorded), the
//! overlay steps aside and the engine sees the change, as the daemon
//! would.

use std::collections::BTreeSet;

use numaplace_model::{Action, CpuSet, Outcome, Snapshot, TaskId};

use crate::as_if_applied::AsIfApplied;
use crate::engine::{Actuator, AffinityError, Telemetry};

/// Counts of what a replayed policy asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    /// Pins asked for.
    pub pins: u64,
    /// Moves of a process's memory asked for.
    pub memory_moves: u64,
    /// Moves of pages around a hot address asked for.
    pub window_moves: u64,
}

/// Pins and memory moves taken as done, kept for the snapshots that
/// follow.
#[derive(Debug)]
pub struct ReplayActuator {
    as_if: AsIfApplied,
    /// What the policy asked for so far.
    pub counts: ReplayCounts,
}

impl Default for ReplayActuator {
    fn default() -> Self {
        ReplayActuator::new(4096)
    }
}

impl ReplayActuator {
    /// `page_size`: bytes per page, for the page counts of memory moves.
    pub fn new(page_size: u64) -> ReplayActuator {
        ReplayActuator {
            as_if: AsIfApplied::new(page_size),
            counts: ReplayCounts::default(),
        }
    }

    /// Shows the pins and memory moves made so far in `s`, the next
    /// recorded snapshot.
    pub fn overlay(&mut self, s: &mut Snapshot) {
        self.as_if.show(s);
    }
}

impl Actuator for ReplayActuator {
    /// The pin made in the replay where there is one, else what the
    /// recording showed last.
    fn affinity(&self, task: TaskId, _tgid: i32) -> Result<CpuSet, AffinityError> {
        self.as_if
            .affinity(task)
            .cloned()
            .ok_or(AffinityError::Gone)
    }

    fn apply(&mut self, action: &Action) -> Outcome {
        match action {
            Action::Pin { .. } => self.counts.pins += 1,
            Action::MoveMemory { .. } => self.counts.memory_moves += 1,
            Action::MoveWindow { .. } => self.counts.window_moves += 1,
            Action::KernelBalancing { .. } => {
                return Outcome::Skipped {
                    why: "a replay cannot change the recorded kernel's automatic NUMA balancing: \
                          its snapshots go on showing what the recorded kernel did"
                        .into(),
                };
            }
        }
        self.as_if.take(action)
    }
}

/// A recording as a world of the engine's loop: its snapshots with the
/// pins and memory moves the replayed policy made laid over them
/// ([`ReplayActuator::overlay`]), and the actuator that takes them as
/// done.
pub struct ReplayWorld<T> {
    /// The recording's snapshots.
    pub telemetry: T,
    /// What takes the actions as done.
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
