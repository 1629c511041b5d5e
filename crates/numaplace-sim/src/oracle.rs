//! The oracle: the best static placement of threads on CPUs for a cost
//! the caller gives — the "hand-optimized" or "optimal" placement the
//! papers of docs/references.md compare their policies against.
//!
//! # What is searched
//!
//! A placement puts every thread on its own CPU (dense ids), inside the
//! thread's allowed CPUs, and — when [`OracleProblem::one_per_core`] holds
//! and there are at least as many cores as threads — on a core of its own.
//! (If the allowed CPUs leave no placement with a core per thread, cores
//! are shared after all and the method says so.)
//!
//! # Symmetry
//!
//! Many placements cost the same by construction, and the oracle
//! evaluates one per orbit of this group:
//! * SMT siblings of a core are interchangeable;
//! * cores of one LLC domain *and* one NUMA node are interchangeable (an LLC
//!   holding several nodes, sub-NUMA clustering, is split by node, since
//!   memory is per node);
//! * packages with their nodes, LLCs and cores are interchangeable when the
//!   caller says so ([`OracleProblem::packages_symmetric`]) and they are
//!   alike;
//! * threads of one class are interchangeable.
//!
//! Units are interchangeable only when they are alike down to the CPUs:
//! same shape, same CPU kinds, and the same membership in every thread's
//! allowed set (a thread allowed on package 0 only breaks the package
//! symmetry); threads of one class with different allowed sets are told
//! apart. The cost must be invariant under this group; if it is not (a cost
//! depending on which core of an LLC a thread is on), the "optimum" is
//! only the best of one representative per orbit.
//!
//! The enumeration is exact. It fills CPUs in tree order (package, LLC and
//! node, core, sibling) with thread classes, and keeps an assignment only
//! when in every group of interchangeable units their contents, read leaf
//! by leaf, are in non-increasing lexicographic order. An empty CPU reads
//! lowest, so a thread opens the *first* empty unit of its kind (the usual
//! "first empty equivalent unit" rule, which alone would count twice the
//! orbits whose classes repeat across units). Each unit is compared with
//! its interchangeable predecessor as it is filled, so branches are cut at
//! the first CPU that breaks the order. Interchangeable units are laid out
//! alike position by position (a core's CPUs and an LLC's cores sorted by
//! kind), which makes this order a canonical form: each orbit is generated
//! exactly once. Threads of a class then take that class's CPUs in
//! increasing order.
//!
//! # Beyond enumeration
//!
//! When there are more placements up to symmetry than the evaluation
//! budget, [`search`] runs a local search instead: hill climbing by first
//! improvement from several starts — spread (threads round-robin over the
//! LLC domains, alternating packages), packed (cores in order), and a few
//! random placements from a splitmix64 generator seeded by the caller —
//! with two moves: swap the CPUs of two threads of different classes, or
//! move one thread to a free CPU (one per symmetry class of free CPU). A
//! start climbs until no move improves the cost or its share of the
//! budget is spent; shares left unspent pass to the next start. The
//! result is deterministic for a seed but is a local optimum, and
//! [`OracleResult::exhaustive`] says which kind was found.

use std::collections::HashMap;
use std::fmt;

use numaplace_model::{CpuSet, Topology};

mod enumeration;
mod local_search;
mod symmetry;

use enumeration::*;
use local_search::*;
use symmetry::*;

/// A placement problem: which threads, where they may go, which
/// symmetries the cost respects.
#[derive(Debug, Clone)]
pub struct OracleProblem<'a> {
    /// The machine.
    pub topology: &'a Topology,
    /// Per thread an equivalence class: threads of one class are
    /// interchangeable (identical copies).
    pub classes: Vec<u32>,
    /// Per thread the CPUs (dense ids — the same as kernel ids on synthetic
    /// machines) it may use (its cpuset), or `None` = all. Ids past the
    /// machine's CPUs are ignored.
    pub allowed: Vec<Option<CpuSet>>,
    /// Packages (with their nodes/LLCs) may be permuted without changing the
    /// cost: true only when the caller knows the memory placement and
    /// distances are symmetric (e.g. all first-touch on a 2-socket
    /// machine); false when memory is bound to node 0.
    pub packages_symmetric: bool,
    /// At most one thread per core (no SMT sharing) when there are enough
    /// cores; default true.
    pub one_per_core: bool,
}

impl<'a> OracleProblem<'a> {
    /// Threads of these classes allowed everywhere, packages not symmetric,
    /// one thread per core.
    pub fn new(topology: &'a Topology, classes: Vec<u32>) -> Self {
        let n = classes.len();
        OracleProblem {
            topology,
            classes,
            allowed: vec![None; n],
            packages_symmetric: false,
            one_per_core: true,
        }
    }
}

/// The best placement found.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleResult {
    /// Dense CPU id per thread.
    pub placement: Vec<u32>,
    /// The placement's cost, by the caller's cost function (lower is better).
    pub cost: f64,
    /// How many placements the cost function was called on.
    pub evaluated: usize,
    /// Whether every placement was considered (up to symmetry), so `cost`
    /// is the optimum; false for a local search.
    pub exhaustive: bool,
    /// How it was found, for people: `exhaustive: 35 placements up to
    /// symmetry`, or `local search: ... from K starts, N evaluations`.
    pub method: String,
}

/// Why there is no placement at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OracleError {
    /// More threads than the machine has CPUs.
    TooManyThreads {
        /// Threads to place.
        threads: usize,
        /// CPUs the machine has.
        cpus: usize,
    },
    /// `allowed` does not have one entry per thread.
    AllowedLength {
        /// Threads to place.
        threads: usize,
        /// Entries of `allowed`.
        allowed: usize,
    },
    /// The allowed CPUs leave no way to give every thread its own CPU.
    Infeasible,
}

impl fmt::Display for OracleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OracleError::TooManyThreads { threads, cpus } => write!(
                f,
                "{threads} threads cannot have a CPU each on a machine of {cpus} CPUs"
            ),
            OracleError::AllowedLength { threads, allowed } => write!(
                f,
                "{threads} threads but {allowed} allowed cpusets (one per thread expected)"
            ),
            OracleError::Infeasible => write!(
                f,
                "the threads' allowed CPUs leave no way to give each its own CPU"
            ),
        }
    }
}

impl std::error::Error for OracleError {}

/// Random starts of the local search, besides spread and packed.
const RANDOM_STARTS: usize = 4;

/// Thread slots (placements × threads) kept from the counting pass of an
/// exhaustive search, so small problems are enumerated once.
const KEEP_MAX: usize = 1 << 22;

/// The best placement for `cost`: exhaustive up to symmetry when there are
/// at most `budget` placements to evaluate, a local search of at most
/// `budget` evaluations (at least one) otherwise. See the module docs.
pub fn search(
    p: &OracleProblem,
    cost: &mut dyn FnMut(&[u32]) -> f64,
    budget: usize,
    seed: u64,
) -> Result<OracleResult, OracleError> {
    search_bounded(p, &mut |pl, _| cost(pl), budget, seed)
}

/// Enumeration steps (CPUs tried) allowed per placement the budget
/// allows, per CPU and thread class: an enumeration that finds
/// placements slower than this (allowed sets that leave most branches
/// dead) is cut off and the search goes local, so the work before the
/// first evaluation is bounded by the budget too.
const ENUMERATION_WORK_PER_PLACEMENT: usize = 4;

/// [`search`] with a cost that is told the bound it must beat:
/// `cost(placement, bound)` may return any value at or above `bound` for a
/// placement that is no better than `bound` (a simulation stopped as soon
/// as it cannot win), since the search only asks whether a placement is
/// below the best it holds (exhaustive) or below its current position
/// (local search).
pub fn search_bounded(
    p: &OracleProblem,
    cost: &mut dyn FnMut(&[u32], f64) -> f64,
    budget: usize,
    seed: u64,
) -> Result<OracleResult, OracleError> {
    let prep = Prepared::new(p)?;
    let budget = budget.max(1);
    let note = if prep.opc_dropped {
        " (sharing cores: the allowed CPUs leave no placement with a core per thread)"
    } else {
        ""
    };
    // Count, keeping the placements while they are few enough to keep
    // (else they are enumerated again).
    let mut kept: Vec<u32> = Vec::new();
    let mut keep = true;
    let work = (budget.saturating_add(1))
        .saturating_mul(prep.leaves.len().max(1))
        .saturating_mul(prep.rc_threads.len() + 1)
        .saturating_mul(ENUMERATION_WORK_PER_PLACEMENT);
    let (canonical, complete) = prep.enumerate_within(
        &mut |pl| {
            if keep && kept.len() + pl.len() <= KEEP_MAX {
                kept.extend_from_slice(pl);
            } else {
                keep = false;
                kept = Vec::new();
            }
            true
        },
        budget.saturating_add(1),
        work,
    );
    if complete && canonical <= budget {
        let mut best: Option<(Vec<u32>, f64)> = None;
        let mut consider = |pl: &[u32]| {
            let bound = best.as_ref().map_or(f64::INFINITY, |b| b.1);
            let c = sane(cost(pl, bound));
            if best.as_ref().is_none_or(|(_, b)| c < *b) {
                best = Some((pl.to_vec(), c));
            }
            true
        };
        let n = if keep && prep.n > 0 {
            for pl in kept.chunks(prep.n) {
                consider(pl);
            }
            canonical
        } else {
            prep.enumerate(&mut consider, usize::MAX)
        };
        let (placement, cost) = best.ok_or(OracleError::Infeasible)?;
        return Ok(OracleResult {
            placement,
            cost,
            evaluated: n,
            exhaustive: true,
            method: format!(
                "exhaustive: {n} placement{} up to symmetry{note}",
                if n == 1 { "" } else { "s" }
            ),
        });
    }
    let ls = LocalSearch::run(&prep, cost, budget, seed);
    let starts = match ls.starts {
        1 => "1 start (spread)".to_string(),
        2 => "2 starts (spread, packed)".to_string(),
        k => format!("{k} starts (spread, packed, {} random)", k - 2),
    };
    let more = if complete {
        format!("more than {budget} placements up to symmetry")
    } else {
        format!(
            "fewer than {} placements up to symmetry found within the enumeration's share of the budget",
            budget + 1
        )
    };
    Ok(OracleResult {
        placement: ls.placement,
        cost: ls.cost,
        evaluated: ls.evaluated,
        exhaustive: false,
        method: format!(
            "local search: {more}, so first-improvement \
             hill climbing (swaps, moves to free CPUs) from {starts}, {} evaluations{note}",
            ls.evaluated
        ),
    })
}

/// Placements up to symmetry (see the module docs), counting no further
/// than `limit`; 0 when there is none.
pub fn count_canonical(p: &OracleProblem, limit: usize) -> usize {
    match Prepared::new(p) {
        Ok(prep) => prep.enumerate(&mut |_| true, limit),
        Err(_) => 0,
    }
}

/// NaN costs lose to everything.
fn sane(c: f64) -> f64 {
    if c.is_nan() { f64::INFINITY } else { c }
}

#[cfg(test)]
mod tests;
