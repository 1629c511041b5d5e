//! What a policy decides: a plan of actions, each with its reason, and
//! what really happened when an actuator carried one out.

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;
use crate::task::TaskId;

/// Default window of \[Blagodurov11\] §4: K pages before and after a sampled hot
/// address are moved together.
pub const DEFAULT_WINDOW_PAGES: u64 = 4096;

/// One change to the world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Restrict a thread to CPUs (`sched_setaffinity`).
    Pin {
        /// The thread.
        task: TaskId,
        /// Its process, for the journal and for scope checks.
        tgid: i32,
        /// The CPUs it may run on from now on (kernel ids).
        cpus: CpuSet,
    },
    /// Move a process's resident pages that are not on `to_node` there.
    MoveMemory {
        /// The process whose memory moves.
        process: TaskId,
        /// The node the pages go to (kernel id).
        to_node: u32,
        /// At most this many pages this round (the migration rate limit).
        max_pages: Option<u64>,
    },
    /// Move the pages within `pages_before` / `pages_after` pages of a hot
    /// address to `to_node` (\[Blagodurov11\] §4).
    MoveWindow {
        /// The process whose memory moves.
        process: TaskId,
        /// The hot address, in the process's address space.
        address: u64,
        /// Pages below the address that go with it.
        pages_before: u64,
        /// Pages above the address that go with it.
        pages_after: u64,
        /// The node the pages go to (kernel id).
        to_node: u32,
    },
    /// Turn the kernel's automatic NUMA balancing between nodes on or off
    /// (bit 0x1 of `kernel.numa_balancing`; the memory-tiering bit 0x2 is
    /// kept as it is). Machine-wide: it touches every process, so the
    /// engine carries it out only when its scope is the whole machine.
    KernelBalancing {
        /// On (`true`) or off.
        on: bool,
    },
}

impl Action {
    /// The process the action touches; 0 for a machine-wide one
    /// ([`Action::machine_wide`]).
    pub fn pid(&self) -> i32 {
        match self {
            Action::Pin { tgid, .. } => *tgid,
            Action::MoveMemory { process, .. } | Action::MoveWindow { process, .. } => process.tid,
            Action::KernelBalancing { .. } => 0,
        }
    }

    /// Whether it moves memory (for the migration rate limit).
    pub fn moves_memory(&self) -> bool {
        matches!(self, Action::MoveMemory { .. } | Action::MoveWindow { .. })
    }

    /// Whether it changes the machine rather than one process (a kernel
    /// setting).
    pub fn machine_wide(&self) -> bool {
        matches!(self, Action::KernelBalancing { .. })
    }
}

/// An action and why the policy wants it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// What to change.
    pub action: Action,
    /// Why, in the policy's words, for the journal and the log.
    pub reason: String,
}

/// A round's decisions, in the order they are to be carried out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The decisions, first to be carried out first.
    pub decisions: Vec<Decision>,
}

impl Plan {
    /// Adds `action`, with `reason`, at the end.
    pub fn push(&mut self, action: Action, reason: impl Into<String>) {
        self.decisions.push(Decision {
            action,
            reason: reason.into(),
        });
    }

    /// Whether it decides nothing.
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
    }
}

/// Pages a memory move touched, by what became of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCounts {
    /// Now on the target node, moved by this action.
    pub moved: u64,
    /// Already on the target node.
    pub already: u64,
    /// Could not move now (`EBUSY`, `EAGAIN`: locked, under writeback).
    pub busy: u64,
    /// Could not move at all (`EFAULT`, `ENOENT`: not present, shared
    /// zero page, `EACCES`: mapped by several processes).
    pub failed: u64,
}

/// What really happened when an action was carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Done as asked.
    Done,
    /// A memory move ran: the page counts say how far it got.
    Pages(PageCounts),
    /// Not applied: dry run or advice only.
    NotApplied,
    /// The task is gone, or its id now names another task (reused tid).
    Gone,
    /// The kernel refused (`EPERM`, `EINVAL` from a cpuset the task may
    /// not use, ...): `errno` names it, `why` explains.
    Refused {
        /// The error's name (`EPERM`).
        errno: String,
        /// What it means here.
        why: String,
    },
    /// numaplace declined: out of scope, rate limit, the task set its own
    /// affinity.
    Skipped {
        /// Why numaplace declined.
        why: String,
    },
}
