//! Where \[Rao13\]'s premise does not hold, BRM steps aside (issue 16).
//!
//! \[Rao13\]'s experiments (§2.2, §6) place all memory on node 0 with
//! numactl and run threads that contend for the uncore; BRM moves threads
//! only, so a move changes a thread's contention and nothing of where its
//! memory is. With Linux's first touch a thread's memory is where it first
//! ran, and there a move away from it makes every access remote while the
//! exploration that finds this out costs a trip (about 14 rounds away on two
//! nodes). Over generated mixes (`numaplace compare --random`) this was most
//! of BRM's loss; these rules are measured there
//! (docs/results/2026-11-22-brm.md).
//!
//! The rules change only explorations (moves to a node not measured since
//! the thread's last reset); moves to a node measured as better are the
//! paper's, as are Update, the pick and the resets.

use std::collections::BTreeMap;

use numaplace_model::TaskGroup;

/// The share of a process's memory on one node from which that node is the
/// process's home: all but a tenth, as `memory = node:N` or numactl gives
/// (\[Rao13\] §2.2's setting), or a single thread's first touch.
pub const HOME_SHARE: f64 = 0.9;

/// A multithreaded process's memory follows its threads (each thread's
/// first touch on its node) when the node a thread runs on holds at least
/// this fraction of the share of the process's threads that run there.
pub const FOLLOW_FRACTION: f64 = 0.8;

/// A node holds part of a process's memory from this share on.
const SOME_SHARE: f64 = 0.05;

/// A process's memory per node (kernel id), as shares of its total; `None`
/// when it was not read or is empty.
pub fn memory_shares(g: &TaskGroup) -> Option<BTreeMap<u32, f64>> {
    let m = g.memory_total()?;
    let total: u64 = m.values().sum();
    (total > 0).then(|| {
        m.iter()
            .map(|(&n, &b)| (n, b as f64 / total as f64))
            .collect()
    })
}

/// The node (kernel id) holding at least [`HOME_SHARE`] of the memory.
pub fn home(shares: &BTreeMap<u32, f64>) -> Option<u32> {
    shares
        .iter()
        .find(|(_, s)| **s >= HOME_SHARE)
        .map(|(&n, _)| n)
}

/// Why a thread does not explore: its memory is local, so a trip to
/// another node makes its accesses remote, which \[Rao13\]'s setting
/// (memory on one node whatever the threads do) never had to weigh.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stay {
    /// A single-thread program on the node holding its memory.
    LocalSingleThread {
        /// The share of its memory on that node, 0-1.
        share: f64,
    },
    /// A multithreaded process whose memory is spread over the nodes as its
    /// threads are (first touch by each thread): this thread's node holds
    /// `share` of it while `threads` of the process's threads run here.
    MemoryFollowsThreads {
        /// The share of the process's memory on this thread's node, 0-1.
        share: f64,
        /// The share of its threads running there, 0-1.
        threads: f64,
    },
}

impl Stay {
    /// For a reason or a test: what the rule saw.
    pub fn describe(&self, node: u32) -> String {
        match *self {
            Stay::LocalSingleThread { share } => format!(
                "a single-thread program with {:.0} % of its memory on node {node}",
                100.0 * share
            ),
            Stay::MemoryFollowsThreads { share, threads } => format!(
                "its process's memory follows its threads: {:.0} % of it on node {node}, \
                 where {:.0} % of its threads run",
                100.0 * share,
                100.0 * threads
            ),
        }
    }
}

/// Whether a thread on node `here` (kernel id) stays out of explorations:
/// `threads` is its process's thread count, `threads_here` how many of
/// them run on `here`.
pub fn stays(
    shares: &BTreeMap<u32, f64>,
    here: u32,
    threads: usize,
    threads_here: usize,
) -> Option<Stay> {
    let share = shares.get(&here).copied().unwrap_or(0.0);
    if threads <= 1 {
        return (share >= HOME_SHARE).then_some(Stay::LocalSingleThread { share });
    }
    // Memory on one node ([Rao13]'s setting) is not following threads,
    // even when they all run there: BRM's exploration is what it is for.
    let spread =
        shares.values().filter(|&&s| s >= SOME_SHARE).count() >= 2 && home(shares).is_none();
    let of_threads = threads_here as f64 / threads as f64;
    (spread && share >= FOLLOW_FRACTION * of_threads).then_some(Stay::MemoryFollowsThreads {
        share,
        threads: of_threads,
    })
}
