//! What a thread is to the contention model: a small set of numbers
//! (its core CPI, its uncore requests and their miss curve in the LLC, its
//! memory-level parallelism, its writes to shared data) that the model
//! turns into speed on a given placement. The simulator's scenarios give
//! them as truth; `auto`'s predictor fits them to what a host measured.

use serde::{Deserialize, Serialize};

/// How a thread's accesses spread over its private working set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "pattern", rename_all = "kebab-case")]
pub enum Pattern {
    /// Uniformly random over the working set: the randomly linked list of
    /// \[Rao13\] Fig. 3. A cache of `C` bytes holds `C / W` of it, so the
    /// hit ratio is `min(1, C/W)`; every access is a dependent load, and
    /// beyond the TLB's reach every access also walks the page table.
    Uniform,
    /// The power law of cache misses (docs/simulator.md, M2): with a cache share
    /// `C`, `mpki(C) = llc_mpki · (min(C, W) / min(C_llc, W))^(−alpha)`,
    /// where `llc_mpki` is the thread's LLC misses per 1000 instructions
    /// when it has the whole LLC (`C_llc`) to itself; flat once `W` fits,
    /// never more than the uncore requests.
    PowerLaw {
        /// LLC misses per 1000 instructions with the whole LLC.
        llc_mpki: f64,
        /// How steeply misses grow as its cache share shrinks.
        alpha: f64,
    },
}

/// A thread's behaviour during one phase of its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadModel {
    /// Cycles per instruction when every access hits the private caches.
    pub cpi_core: f64,
    /// Demand requests that miss the private L2 and go to the uncore, per
    /// 1000 instructions. For [`Pattern::Uniform`] this is the rate of
    /// accesses to the working set, of which only those missing the L2
    /// (`1 − L2/W`) reach the uncore.
    pub uncore_pki: f64,
    /// Private working set, bytes.
    pub working_set: u64,
    /// How its accesses spread over that working set.
    pub pattern: Pattern,
    /// Memory-level parallelism: outstanding misses the core overlaps (1
    /// for a pointer chase).
    pub mlp: f64,
    /// Writes to the application's shared area per 1000 instructions
    /// (atomic adds in \[Rao13\] Fig. 3, sweeping the area word by word).
    pub shared_writes_pki: f64,
}

impl ThreadModel {
    /// A rank waiting at a barrier (`Barrier::Phase`): MPI's progress
    /// loop polls its message queues and flags, a few cache lines that
    /// stay in the L1, so it retires instructions at `cpi` cycles each and
    /// sends nothing to the uncore (no LLC references, no misses, no
    /// memory traffic). `cpi` is `Constants::spin_cpi` (assumed).
    pub fn spin(cpi: f64) -> ThreadModel {
        ThreadModel {
            cpi_core: cpi,
            uncore_pki: 0.0,
            working_set: 4096,
            pattern: Pattern::Uniform,
            mlp: 1.0,
            shared_writes_pki: 0.0,
        }
    }

    /// A thread of \[Rao13\]'s micro-benchmark (Fig. 3): a randomly linked
    /// list of 64-byte entries over `working_set` bytes, walked one
    /// dependent hop at a time, and after each walk an atomic add to every
    /// 8-byte word of the `shared` area. A hop is taken as 4 instructions
    /// and about 19 core cycles (L1 miss, L2 lookup, second-level TLB);
    /// an atomic add that finds its line as 20 cycles. Both are
    /// assumptions (Westmere latencies), the first checked by validation
    /// target 1.
    pub fn microbench(working_set: u64, shared: u64) -> ThreadModel {
        const INSTR_PER_HOP: f64 = 4.0;
        const CYCLES_PER_HOP: f64 = 19.2;
        const CYCLES_PER_ADD: f64 = 20.0;
        // A working set too small to matter still needs a size.
        let ws = working_set.max(64) as f64;
        let hops = if working_set == 0 { 0.0 } else { ws / 64.0 };
        let adds = shared as f64 / 8.0;
        let instructions = INSTR_PER_HOP * hops + adds;
        ThreadModel {
            cpi_core: (CYCLES_PER_HOP * hops + CYCLES_PER_ADD * adds) / instructions,
            uncore_pki: 1000.0 * hops / instructions,
            working_set: ws as u64,
            pattern: Pattern::Uniform,
            mlp: 1.0,
            shared_writes_pki: 1000.0 * adds / instructions,
        }
    }

    /// Instructions of `loops` iterations of [`ThreadModel::microbench`]'s
    /// loop.
    pub fn microbench_instructions(working_set: u64, shared: u64, loops: f64) -> f64 {
        let hops = working_set as f64 / 64.0;
        loops * (4.0 * hops + shared as f64 / 8.0)
    }
}
