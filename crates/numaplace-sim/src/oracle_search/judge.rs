//! What the oracle's search judges with: the [`Best`] placement it
//! returns, the [`Judge`] that simulates a candidate and counts the
//! simulations spent, and the helpers that lay a placement over a workload
//! (threads per application, memory per application).

use std::sync::atomic::{AtomicUsize, Ordering};

use numaplace_model::CpuSet;

use crate::machine::Machine;
use crate::outcome::RunResult;
use crate::run::{Driver, RunOptions, run};
use crate::workload::{MemoryPlacement, Workload};

/// The best binding found, and how.
#[derive(Debug, Clone)]
pub struct Best {
    /// `cpus[app][thread]`: dense CPU ids.
    pub cpus: Vec<Vec<usize>>,
    /// Per application: where its memory goes (first touch under the
    /// binding, or interleaved over its threads' nodes).
    pub memory: Vec<MemoryPlacement>,
    /// Per application, where the placement is a CPU set per application
    /// whose threads time-share it (the simulated Linux placing them
    /// within it) rather than a CPU per thread: then `cpus` is empty.
    pub sets: Option<Vec<CpuSet>>,
    /// Mean run time it gives, seconds.
    pub runtime_s: f64,
    /// How the search found it, in words (the `Oracle:` line of `compare`).
    pub method: String,
    /// Simulations the search ran, at most its budget.
    pub evaluations: usize,
}

/// The world the oracle judges candidates in, and what it has spent.
pub(super) struct Judge<'a> {
    pub(super) machine: &'a Machine,
    /// The run seed and mismatch of the world (the rest is the default).
    pub(super) seed: u64,
    pub(super) mismatch: Option<f64>,
    pub(super) spent: AtomicUsize,
}

impl<'a> Judge<'a> {
    pub(super) fn new(machine: &'a Machine, world: &RunOptions) -> Judge<'a> {
        Judge {
            machine,
            seed: world.seed,
            mismatch: world.mismatch,
            spent: AtomicUsize::new(0),
        }
    }

    pub(super) fn spent(&self) -> usize {
        self.spent.load(Ordering::Relaxed)
    }

    /// One simulation of `workload` driven by `driver`, stopped as soon as
    /// it cannot beat `bound`; its mean run time, or `f64::MAX` when it
    /// did not finish (or was stopped).
    pub(super) fn judge(&self, workload: &Workload, driver: Driver<'_>, bound: f64) -> f64 {
        self.spent.fetch_add(1, Ordering::Relaxed);
        let opts = RunOptions {
            seed: self.seed,
            mismatch: self.mismatch,
            stop_at_or_above: bound.is_finite().then_some(bound),
            ..RunOptions::default()
        };
        score(&run(self.machine, workload, driver, &opts, &mut |_| {}))
    }

    pub(super) fn binding(&self, workload: &Workload, cpus: Vec<Vec<usize>>, bound: f64) -> f64 {
        let driver = Driver::Binding {
            name: "oracle",
            cpus,
        };
        self.judge(workload, driver, bound)
    }
}

/// A candidate's score: its mean run time if every run finished.
pub(super) fn score(r: &RunResult) -> f64 {
    match r.mean_runtime_s() {
        Some(m) if r.finished => m,
        _ => f64::MAX,
    }
}

/// A placement of every thread in order, as `cpus[app][thread]`.
pub(super) fn per_app(
    workload: &Workload,
    mut cpus: impl Iterator<Item = usize>,
) -> Vec<Vec<usize>> {
    workload
        .apps
        .iter()
        .map(|a| {
            (0..a.threads)
                .map(|_| cpus.next().expect("one CPU per thread"))
                .collect()
        })
        .collect()
}

/// Where the search starts each application's memory: first touch under
/// the binding (on its threads' nodes), or the scenario's placement.
pub(super) fn start_memory(workload: &Workload, free_memory: bool) -> Vec<MemoryPlacement> {
    workload
        .apps
        .iter()
        .map(|a| {
            if free_memory {
                MemoryPlacement::FirstTouch
            } else {
                a.memory
            }
        })
        .collect()
}

/// `workload` with each application's memory placed as `memory` says.
pub fn with_memory(workload: &Workload, memory: &[MemoryPlacement]) -> Workload {
    let mut w = workload.clone();
    for (a, m) in w.apps.iter_mut().zip(memory) {
        a.memory = *m;
    }
    w
}
