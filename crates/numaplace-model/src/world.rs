//! What every world supplies to the engine's loop (docs/architecture.md, "One
//! loop, three worlds"): the live host, a recording and the simulator each
//! implement [`Telemetry`] (where snapshots come from) and [`Actuator`]
//! (what carries actions out); the daemon adds a [`PinGuard`] that writes
//! a thread's original affinity down before it is pinned; every action and
//! what became of it is a [`JournalEntry`]. The interfaces live here, below
//! the policies and below every world, so that no world depends on another
//! to implement them.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::{Action, CpuSet, Outcome, Snapshot, TaskId};

/// Where snapshots come from: the live host, a recording, the simulator.
pub trait Telemetry {
    type Error: std::error::Error + Send + Sync + 'static;

    /// The next round's snapshot once that round is due: the live host
    /// waits for its interval and reads the machine, a recording reads its
    /// next snapshot, the simulator runs its model up to the round's time.
    /// `Ok(None)` when the world has ended (a stop signal, the end of the
    /// recording, every simulated application finished); an error ends the
    /// loop with it.
    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, Self::Error>;

    /// After each round: the processes in scope, and those numaplace acted
    /// on (whose next reading must be fresh, not carried over).
    fn after_round(&mut self, _managed: &BTreeSet<i32>, _acted_on: &BTreeSet<i32>) {}
}

/// A world whose telemetry and actuator are two objects (the live host: a
/// collector that reads, an actuator that acts): the pair is both.
pub struct Pair<T, A> {
    pub telemetry: T,
    pub actuator: A,
}

impl<T: Telemetry, A> Telemetry for Pair<T, A> {
    type Error = T::Error;

    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, T::Error> {
        self.telemetry.next_snapshot()
    }

    fn after_round(&mut self, managed: &BTreeSet<i32>, acted_on: &BTreeSet<i32>) {
        self.telemetry.after_round(managed, acted_on);
    }
}

impl<T, A: Actuator> Actuator for Pair<T, A> {
    fn apply(&mut self, action: &Action) -> Outcome {
        self.actuator.apply(action)
    }

    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError> {
        self.actuator.affinity(task, tgid)
    }
}

/// Why a thread's affinity could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AffinityError {
    /// The task exited, or its tid now names another task.
    Gone,
    /// A kernel thread: numaplace never touches one, not even to restore.
    KernelThread,
    /// The world could not tell (the kernel refused the call), and why.
    Unreadable(String),
}

impl std::fmt::Display for AffinityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AffinityError::Gone => f.write_str("the task is gone, or its tid names another task"),
            AffinityError::KernelThread => {
                f.write_str("a kernel thread: numaplace never changes its affinity")
            }
            AffinityError::Unreadable(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for AffinityError {}

/// What carries actions out: the live host, a recorder that applies
/// nothing, a replay, the simulator.
pub trait Actuator {
    fn apply(&mut self, action: &Action) -> Outcome;

    /// A thread's affinity now, after checking it is still the same task:
    /// what restoring an original affinity reads first.
    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError>;

    /// The whole value of `kernel.numa_balancing` now, what restoring it
    /// reads first; `None` where this world cannot set it (a dry run, a
    /// replay), so nothing is restored there.
    fn kernel_balancing_value(&self) -> Option<Result<u32, String>> {
        None
    }

    /// Writes the whole value of `kernel.numa_balancing` (a restore).
    fn set_kernel_balancing_value(&mut self, _value: u32) -> Result<(), String> {
        Err("this world has no kernel.numa_balancing to set".into())
    }
}

/// Called before a pin is applied, to record the thread's original
/// affinity durably; an error cancels the pin.
pub trait PinGuard {
    fn before_pin(
        &mut self,
        task: TaskId,
        tgid: i32,
        original: &CpuSet,
        new: &CpuSet,
    ) -> Result<(), String>;

    /// Before the kernel's automatic NUMA balancing is turned `on` (or
    /// off): record the setting as it is, so that a stop or a crash puts
    /// it back. Worlds without a kernel of their own to restore (the
    /// simulator, replays, dry runs) record nothing.
    fn before_kernel_balancing(&mut self, _on: bool) -> Result<(), String> {
        Ok(())
    }
}

/// A guard that records nothing (dry runs, replays, the simulator).
pub struct NoGuard;

impl PinGuard for NoGuard {
    fn before_pin(&mut self, _: TaskId, _: i32, _: &CpuSet, _: &CpuSet) -> Result<(), String> {
        Ok(())
    }
}

/// One line of the decision journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// The snapshot's round.
    pub round: u64,
    pub time_unix_ns: u64,
    pub policy: String,
    pub pid: i32,
    /// The process's label (VM name or program name). Untrusted.
    pub label: String,
    #[serde(flatten)]
    pub action: Action,
    pub reason: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Applies nothing: keeps the actions it is asked to carry out and answers
/// [`Outcome::NotApplied`] (dry runs, `advise`, tests). Its affinities are
/// what the caller told it (e.g. a snapshot's allowed CPUs); a task it was
/// not told about is gone.
#[derive(Debug, Clone, Default)]
pub struct RecordingActuator {
    /// The actions asked for, in order.
    pub actions: Vec<Action>,
    affinities: HashMap<TaskId, CpuSet>,
}

impl RecordingActuator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Tells it a task's affinity.
    pub fn set_affinity(&mut self, task: TaskId, cpus: CpuSet) {
        self.affinities.insert(task, cpus);
    }

    /// Takes the recorded actions, leaving none.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }
}

impl Actuator for RecordingActuator {
    fn apply(&mut self, action: &Action) -> Outcome {
        self.actions.push(action.clone());
        Outcome::NotApplied
    }

    fn affinity(&self, task: TaskId, _tgid: i32) -> Result<CpuSet, AffinityError> {
        self.affinities
            .get(&task)
            .cloned()
            .ok_or(AffinityError::Gone)
    }
}
