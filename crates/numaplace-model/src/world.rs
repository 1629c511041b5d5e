//! What every world supplies to the engine's loop (docs/architecture.md, "One
//! loop, three worlds"): the live host, a recording and the simulator each
//! implement [`Telemetry`] (where snapshots come from) and [`Actuator`]
//! (what carries actions out); the daemon adds a [`PinGuard`] that writes
//! a thread's original affinity down before it is pinned; every action and
//! what became of it is a [`JournalEntry`]. The interfaces live here, below
//! the policies and below every world, so that no world depends on another
//! to implement them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::{Action, CpuSet, Outcome, Snapshot, TaskId};

/// Where snapshots come from: the live host, a recording, the simulator.
pub trait Telemetry {
    /// What ends the loop when reading fails.
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
    /// What reads.
    pub telemetry: T,
    /// What acts.
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
    /// Carries `action` out and says what became of it.
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
    /// Records `task`'s `original` affinity before it becomes `new`.
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
    /// That round's time, nanoseconds since the Unix epoch.
    pub time_unix_ns: u64,
    /// The policy that decided.
    pub policy: String,
    /// The process the action touches (0: machine-wide).
    pub pid: i32,
    /// The process's label (VM name or program name). Untrusted.
    pub label: String,
    /// What was decided.
    #[serde(flatten)]
    pub action: Action,
    /// Why, in the policy's words.
    pub reason: String,
    /// What became of it.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// What the action changes, as the snapshot the policy decided on
    /// showed it: with the action's own fields, the change as current ->
    /// proposed. Absent where the snapshot did not show it (the task was
    /// gone, its memory could not be read) and in journals written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Current>,
}

/// What an action changes, as it is before the action: one field, the
/// one of its kind. In a dry run it is as the earlier proposals left it
/// (they are shown to the policy as if applied), so consecutive entries
/// read as a diff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Current {
    /// The thread's CPUs (a pin: `cpus` is the proposed set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuSet>,
    /// The process's resident memory per node (kernel id), bytes (a
    /// memory move: `to_node` is where it goes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<BTreeMap<u32, u64>>,
    /// Whether the kernel's automatic NUMA balancing between nodes is on
    /// (a machine-wide action: `on` is the proposed setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<bool>,
}

impl Current {
    /// What `action` changes, as `s` shows it; `None` where `s` does not
    /// (its task or process is gone, its memory was not read).
    pub fn of(s: &Snapshot, action: &Action) -> Option<Current> {
        match action {
            Action::Pin { task, .. } => {
                let t = s.task(task.tid).filter(|t| t.id() == *task)?;
                Some(Current {
                    cpus: Some(t.allowed_cpus.clone()),
                    ..Current::default()
                })
            }
            Action::MoveMemory { process, .. } | Action::MoveWindow { process, .. } => {
                let g = s.group(process.tid).filter(|g| g.id() == *process)?;
                Some(Current {
                    memory: Some(g.memory_total()?),
                    ..Current::default()
                })
            }
            Action::KernelBalancing { .. } => Some(Current {
                on: Some(s.machine.numa_balancing?),
                ..Current::default()
            }),
        }
    }
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
    /// One that has recorded nothing yet.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A line written before entries said what they change still reads
    /// (no `current`), and one written now carries it beside the fields
    /// readers already know, under their old names.
    #[test]
    fn journal_lines_with_and_without_current_read() {
        let old = r#"{"round":3,"time_unix_ns":9,"policy":"static","pid":10,"label":"app","action":"pin","task":{"tid":11,"start_time":7},"tgid":10,"cpus":"2-3","reason":"r","outcome":"not_applied"}"#;
        let mut e: JournalEntry = serde_json::from_str(old).unwrap();
        assert_eq!(e.current, None);
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            old,
            "unchanged without it"
        );
        e.current = Some(Current {
            cpus: Some(CpuSet::parse_list("0-7").unwrap()),
            ..Current::default()
        });
        let new = serde_json::to_string(&e).unwrap();
        assert_eq!(
            new,
            old.replace(r#""}"#, r#"","current":{"cpus":"0-7"}}"#),
            "{new}"
        );
        assert_eq!(serde_json::from_str::<JournalEntry>(&new).unwrap(), e);
    }
}
