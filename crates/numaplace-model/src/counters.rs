//! Hardware and software counters as numaplace names them, and raw
//! readings of them. Readings are raw: counts over an interval, already
//! scaled for multiplexing, with the enabled / running times that scaling
//! used; derived metrics (IPC, MPKI, uncore penalty) are computed from them
//! by pure functions, never stored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A counter numaplace reads per thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// Retired instructions (`PERF_COUNT_HW_INSTRUCTIONS`).
    Instructions,
    /// Core cycles (`PERF_COUNT_HW_CPU_CYCLES`).
    Cycles,
    /// Last-level-cache references (`PERF_COUNT_HW_CACHE_REFERENCES`).
    LlcReferences,
    /// Last-level-cache misses (`PERF_COUNT_HW_CACHE_MISSES`).
    LlcMisses,
    /// Cycles with at least one outstanding demand request to the uncore
    /// (\[Rao13\] §3.1's t'; Intel `offcore_requests_outstanding` with
    /// cmask=1, or the AMD equivalent).
    UncoreOccupancy,
    /// Demand requests sent to the uncore (\[Rao13\] §3.1's λ numerator;
    /// Intel `offcore_requests`).
    UncoreRequests,
    /// Software: nanoseconds on CPU (`PERF_COUNT_SW_TASK_CLOCK`).
    TaskClock,
    /// Software: context switches.
    ContextSwitches,
    /// Software: migrations between CPUs.
    CpuMigrations,
    /// Software: page faults.
    PageFaults,
}

impl Counter {
    /// The hardware events counted per thread (perf's generic events).
    pub const HARDWARE: [Counter; 4] = [
        Counter::Instructions,
        Counter::Cycles,
        Counter::LlcReferences,
        Counter::LlcMisses,
    ];
    /// The uncore events of BRM's penalty (\[Rao13\] §3.1), model-specific.
    pub const UNCORE: [Counter; 2] = [Counter::UncoreOccupancy, Counter::UncoreRequests];
    /// The kernel's software events, counted where hardware counters are
    /// not (a VM's virtual PMU).
    pub const SOFTWARE: [Counter; 4] = [
        Counter::TaskClock,
        Counter::ContextSwitches,
        Counter::CpuMigrations,
        Counter::PageFaults,
    ];

    /// The name used in tables, JSON and messages.
    pub fn name(self) -> &'static str {
        match self {
            Counter::Instructions => "instructions",
            Counter::Cycles => "cycles",
            Counter::LlcReferences => "llc_references",
            Counter::LlcMisses => "llc_misses",
            Counter::UncoreOccupancy => "uncore_occupancy",
            Counter::UncoreRequests => "uncore_requests",
            Counter::TaskClock => "task_clock",
            Counter::ContextSwitches => "context_switches",
            Counter::CpuMigrations => "cpu_migrations",
            Counter::PageFaults => "page_faults",
        }
    }
}

/// One thread's counter counts over one interval.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterDeltas {
    /// Counts, scaled by `enabled_ns / running_ns` where the kernel
    /// multiplexed the group.
    pub values: BTreeMap<Counter, u64>,
    /// Nanoseconds the counters were enabled over the interval.
    pub enabled_ns: u64,
    /// Nanoseconds they were really counting (less than enabled when
    /// multiplexed).
    pub running_ns: u64,
}

impl CounterDeltas {
    /// The delta of counter `c`; `None` where it was not counted.
    pub fn get(&self, c: Counter) -> Option<u64> {
        self.values.get(&c).copied()
    }
}
