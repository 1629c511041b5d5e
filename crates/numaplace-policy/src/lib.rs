//! numaplace's policies and the engine that runs them.
//!
//! A policy is a plain struct behind [`Policy`]: each round it gets a
//! [`View`] (the machine, what telemetry saw, which processes it may touch)
//! and returns a [`Plan`]. It never knows whether the world is a live host,
//! a replayed recording or the simulator: the [`engine`] feeds it from a
//! [`engine::Telemetry`] and hands its plan to an [`engine::Actuator`].

pub mod adaptive;
pub mod auto;
pub mod brm;
pub mod dino;
pub mod engine;
pub mod numad;
pub mod preplacement;
pub mod registry;
pub mod replay;
pub mod static_placement;
pub mod symbiosis;
#[cfg(any(test, feature = "testutil"))]
pub mod testutil;

use std::collections::{BTreeMap, BTreeSet};

use std::collections::HashMap;

use numaplace_model::task::printable;
use numaplace_model::{Counter, CpuSet, Plan, Snapshot, Task, TaskId, Topology};

pub use numaplace_model::Scope;
pub use registry::{PolicyKind, UnknownPolicy};

/// What a policy sees in one round.
pub struct View<'a> {
    pub topology: &'a Topology,
    pub snapshot: &'a Snapshot,
    /// Processes (pids) the policy may act on; anything else it must leave
    /// alone (the engine also refuses actions outside it).
    pub managed: &'a BTreeSet<i32>,
}

impl View<'_> {
    /// Whether a policy may place thread `t` this round: its process is in
    /// scope, it has not exited, and its affinity covers the CPUs
    /// numaplace may place onto or is what the policy itself set last
    /// (`ours`). A thread with any other affinity chose its CPUs, and the
    /// engine leaves it alone.
    pub fn placeable<S: std::hash::BuildHasher>(
        &self,
        t: &Task,
        ours: &HashMap<TaskId, CpuSet, S>,
    ) -> bool {
        self.managed.contains(&t.tgid)
            && !matches!(t.state, 'Z' | 'X')
            && (self.topology.span().is_subset(&t.allowed_cpus)
                || ours.get(&t.id()) == Some(&t.allowed_cpus))
    }

    /// Each process's label (name, or VM name), printable, by pid: what
    /// decision reasons call it.
    pub fn labels(&self) -> HashMap<i32, String> {
        self.snapshot
            .groups
            .iter()
            .map(|g| (g.pid, printable(&g.label())))
            .collect()
    }
}

/// Which costly signals a policy reads, so the daemon collects only those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Hardware / software counters per thread (perf_event).
    pub counters: bool,
    /// Memory per node of every process (`numa_maps`).
    pub memory: bool,
    /// Sampled data addresses per thread (PEBS / IBS on a live host;
    /// `Snapshot::samples`): an fd and a ring buffer per thread, so only
    /// for policies that move the pages threads touch.
    pub samples: bool,
    /// Seed 002 §4's per-thread page sets (which pages each thread
    /// touched over a window, `Snapshot::page_sets`): the simulator keeps
    /// them only for policies that read them, as they cost memory per page.
    pub page_sets: bool,
}

/// A policy's parameters as a config gives them: checked where they are
/// read (the config file, a replay's config), before the policy is built,
/// so that a value out of range is an error naming the key and its range
/// instead of a wrong placement, a panic or an allocation that fails.
/// `validate` is the one home of each type's range checks: the serde
/// conversions that check (DINO's, BRM's, symbiosis') call it, as does
/// [`crate::PolicyKind::validate`].
pub trait Params {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// `key = v` within `lo..=hi`, or an error naming the key and the range.
pub fn within<T: PartialOrd + std::fmt::Display>(
    key: &str,
    v: T,
    lo: T,
    hi: T,
) -> Result<(), String> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(format!("{key} = {v}: must be {lo}..={hi}"))
    }
}

/// A placement policy.
pub trait Policy: Send {
    /// The registry name (`numad-like`).
    fn name(&self) -> &'static str;

    /// Time between rounds when the user gives none.
    fn default_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }

    /// The signals it reads: counters and memory unless it says
    /// otherwise; sampled addresses only if it asks for them.
    fn needs(&self) -> Needs {
        Needs {
            counters: true,
            memory: true,
            samples: false,
            page_sets: false,
        }
    }

    /// What it does instead when this machine cannot give `signal`: one
    /// sentence for the daemon's start-up warnings, or `None` if it does
    /// not read that signal. A policy that reads a signal must say here
    /// what becomes of its decisions without it.
    fn without(&self, signal: Signal) -> Option<String> {
        let _ = signal;
        None
    }

    /// Tells it the machine it places work on, once, before its first
    /// round: the model's parameters of the topology (latencies,
    /// bandwidths, clock, caches' hit latency). On a live host these are
    /// what `numaplace calibrate` measured, or `Machine::generic`'s stated
    /// defaults; in the simulator, the scenario's machine, which the
    /// simulated world may differ from (`compare --mismatch`). A policy
    /// that predicts with the machine model (`auto`) keeps it; the others
    /// ignore it.
    fn told(&mut self, machine: &numaplace_machine::Machine) {
        let _ = machine;
    }

    /// Decides one round.
    fn decide(&mut self, view: &View<'_>) -> Plan;

    /// What it made, at its last decision, of each group of `snapshot` it
    /// classes, by pid, in a few words (DINO's classes of the group's
    /// threads, `auto`'s state of its experiments): for the operator's
    /// view (`numaplace top`). Empty for a policy that classes nothing.
    fn classes(&self, snapshot: &numaplace_model::Snapshot) -> BTreeMap<i32, String> {
        let _ = snapshot;
        BTreeMap::new()
    }
}

/// A signal a policy may read that a machine may lack: a VM without a
/// virtual PMU counts none of the hardware events and samples no
/// addresses; uncore events need a known uncore PMU; resctrl needs RDT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    /// LLC misses and instructions per thread (MPKI).
    LlcMissRate,
    /// Cycles and instructions per thread (CPI, IPC).
    Cpi,
    /// The uncore's occupancy and requests per thread (BRM's penalty).
    UncorePenalty,
    /// Sampled data addresses per thread (PEBS / IBS).
    Samples,
    /// LLC occupancy from resctrl monitoring.
    LlcOccupancy,
    /// The machine's energy (RAPL).
    Energy,
}

impl Signal {
    pub const ALL: [Signal; 6] = [
        Signal::LlcMissRate,
        Signal::Cpi,
        Signal::UncorePenalty,
        Signal::Samples,
        Signal::LlcOccupancy,
        Signal::Energy,
    ];

    /// The per-thread counters that make it, for a signal counted by
    /// perf_event (empty for the others).
    pub fn counters(self) -> &'static [Counter] {
        match self {
            Signal::LlcMissRate => &[Counter::LlcMisses, Counter::Instructions],
            Signal::Cpi => &[Counter::Cycles, Counter::Instructions],
            Signal::UncorePenalty => &[Counter::UncoreOccupancy, Counter::UncoreRequests],
            Signal::Samples | Signal::LlcOccupancy | Signal::Energy => &[],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Signal::LlcMissRate => "LLC misses per 1000 instructions",
            Signal::Cpi => "cycles per instruction",
            Signal::UncorePenalty => "uncore occupancy and requests",
            Signal::Samples => "sampled data addresses",
            Signal::LlcOccupancy => "resctrl LLC occupancy",
            Signal::Energy => "energy readings (RAPL)",
        }
    }
}

/// Leaves Linux alone: the baseline every other policy is measured against.
/// As `autonuma` it is the same nothing, named for the kernel it runs on:
/// Linux's automatic NUMA balancing on (`kernel.numa_balancing=1`), the
/// other yardstick, which the simulator turns on under it.
#[derive(Debug, Default)]
pub struct DefaultPolicy {
    /// Named `autonuma`.
    pub autonuma: bool,
}

impl Policy for DefaultPolicy {
    fn name(&self) -> &'static str {
        if self.autonuma { "autonuma" } else { "default" }
    }

    fn needs(&self) -> Needs {
        Needs {
            counters: false,
            memory: false,
            samples: false,
            page_sets: false,
        }
    }

    fn decide(&mut self, _view: &View<'_>) -> Plan {
        Plan::default()
    }
}
