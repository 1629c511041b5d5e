//! Memory events the kernel counts in software, so they need no PMU and
//! count in virtual machines too: each node's `numastat` (where the page
//! allocator served, and for whom), the machine's NUMA lines of
//! `/proc/vmstat` (hinting faults, pages migrated) and each process's page
//! faults (`minflt`, `majflt`). A snapshot (`crate::Snapshot`) holds them as
//! counts over its round, raw, as it holds counter deltas; the rates per
//! second come from pure functions ([`NumaStat::per_second`] here,
//! `Snapshot::node_rates`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// One node's `numastat` (`/sys/devices/system/node/nodeN/numastat`): the
/// page allocator's allocations from the node (each one page, or one block
/// of pages such as a huge page), by whether they went where they were
/// meant to and whether the task they were for ran on the node (the
/// kernel's `Documentation/admin-guide/numastat.rst`). Cumulative since
/// boot as read; over a round in a snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaStat {
    /// Allocations here that were meant for this node.
    pub numa_hit: u64,
    /// Allocations here that were meant for another node, which was short
    /// of free memory.
    pub numa_miss: u64,
    /// Allocations meant for this node that went to another, this one being
    /// short of free memory: the node turned away its own allocations.
    pub numa_foreign: u64,
    /// Allocations of an interleaving policy that went here as it meant.
    pub interleave_hit: u64,
    /// Allocations here for a task running on this node.
    pub local_node: u64,
    /// Allocations here for a task running on another node: memory that
    /// task reaches remotely.
    pub other_node: u64,
}

impl NumaStat {
    /// The counts from `earlier` to `self`, two readings of the same node;
    /// a counter that went back (the node went offline and came back)
    /// counts nothing.
    pub fn since(&self, earlier: &NumaStat) -> NumaStat {
        NumaStat {
            numa_hit: self.numa_hit.saturating_sub(earlier.numa_hit),
            numa_miss: self.numa_miss.saturating_sub(earlier.numa_miss),
            numa_foreign: self.numa_foreign.saturating_sub(earlier.numa_foreign),
            interleave_hit: self.interleave_hit.saturating_sub(earlier.interleave_hit),
            local_node: self.local_node.saturating_sub(earlier.local_node),
            other_node: self.other_node.saturating_sub(earlier.other_node),
        }
    }

    /// These counts (over `interval_ns`) per second; `None` without an
    /// interval.
    pub fn per_second(&self, interval_ns: u64) -> Option<NumaStatRates> {
        let secs = seconds(interval_ns)?;
        Some(NumaStatRates {
            numa_hit: self.numa_hit as f64 / secs,
            numa_miss: self.numa_miss as f64 / secs,
            numa_foreign: self.numa_foreign as f64 / secs,
            interleave_hit: self.interleave_hit as f64 / secs,
            local_node: self.local_node as f64 / secs,
            other_node: self.other_node as f64 / secs,
        })
    }
}

/// A node's [`NumaStat`] as allocations per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaStatRates {
    /// Allocations per second of `numa_hit` (see [`NumaStat`]).
    pub numa_hit: f64,
    /// Allocations per second of `numa_miss` (see [`NumaStat`]).
    pub numa_miss: f64,
    /// Allocations per second of `numa_foreign` (see [`NumaStat`]).
    pub numa_foreign: f64,
    /// Allocations per second of `interleave_hit` (see [`NumaStat`]).
    pub interleave_hit: f64,
    /// Allocations per second of `local_node` (see [`NumaStat`]).
    pub local_node: f64,
    /// Allocations per second of `other_node` (see [`NumaStat`]).
    pub other_node: f64,
}

/// The machine's NUMA counters of `/proc/vmstat`; a counter this kernel
/// does not write is `None` (the hinting faults and balancing migrations
/// need `CONFIG_NUMA_BALANCING`). Cumulative since boot as read; over a
/// round in a snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmNumaStat {
    /// Hinting faults the kernel's automatic NUMA balancing took.
    pub numa_hint_faults: Option<u64>,
    /// ... of them on a page of the node the faulting task ran on.
    pub numa_hint_faults_local: Option<u64>,
    /// Pages automatic NUMA balancing moved to the node that faulted.
    pub numa_pages_migrated: Option<u64>,
    /// Pages migrated for any reason (balancing, `move_pages`, compaction).
    pub pgmigrate_success: Option<u64>,
}

impl VmNumaStat {
    /// The counts from `earlier` to `self`; a counter missing from either
    /// reading is missing, one that went back counts nothing.
    pub fn since(&self, earlier: &VmNumaStat) -> VmNumaStat {
        let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        VmNumaStat {
            numa_hint_faults: d(self.numa_hint_faults, earlier.numa_hint_faults),
            numa_hint_faults_local: d(self.numa_hint_faults_local, earlier.numa_hint_faults_local),
            numa_pages_migrated: d(self.numa_pages_migrated, earlier.numa_pages_migrated),
            pgmigrate_success: d(self.pgmigrate_success, earlier.pgmigrate_success),
        }
    }

    /// These counts (over `interval_ns`) per second; `None` without an
    /// interval.
    pub fn per_second(&self, interval_ns: u64) -> Option<VmNumaRates> {
        let secs = seconds(interval_ns)?;
        let r = |v: Option<u64>| v.map(|v| v as f64 / secs);
        Some(VmNumaRates {
            numa_hint_faults: r(self.numa_hint_faults),
            numa_hint_faults_local: r(self.numa_hint_faults_local),
            numa_pages_migrated: r(self.numa_pages_migrated),
            pgmigrate_success: r(self.pgmigrate_success),
        })
    }
}

/// [`VmNumaStat`] per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct VmNumaRates {
    /// `numa_hint_faults` per second; absent where this kernel has no such counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_hint_faults: Option<f64>,
    /// `numa_hint_faults_local` per second; absent where this kernel has no such counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_hint_faults_local: Option<f64>,
    /// `numa_pages_migrated` per second; absent where this kernel has no such counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_pages_migrated: Option<f64>,
    /// `pgmigrate_success` per second; absent where this kernel has no such counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pgmigrate_success: Option<f64>,
}

/// Page faults a process's threads took (`minflt`, `majflt` of their
/// `stat`): cumulative as read; over a round in a snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageFaults {
    /// Faults served without reading from disk: a fresh page (the first
    /// touch of memory), a page in the page cache, a copy on write.
    pub minor: u64,
    /// Faults that waited for a read from disk or swap.
    pub major: u64,
}

impl PageFaults {
    /// Minor and major faults per second over `interval_ns`; `None` without
    /// an interval.
    pub fn per_second(&self, interval_ns: u64) -> Option<(f64, f64)> {
        let secs = seconds(interval_ns)?;
        Some((self.minor as f64 / secs, self.major as f64 / secs))
    }
}

/// Why a round has no per-node `numastat` rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRates {
    /// The first round: a rate needs two readings, and there was one.
    FirstRound,
    /// The world read none: a kernel without `numastat` files (no
    /// `CONFIG_NUMA`), a collector not asked for machine readings, or a
    /// recording made before numaplace read them.
    NotRead,
}

impl fmt::Display for NoRates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoRates::FirstRound => "first round: rates need a second reading",
            NoRates::NotRead => "not read this round (no numastat files, or not collected)",
        })
    }
}

fn seconds(interval_ns: u64) -> Option<f64> {
    (interval_ns > 0).then(|| interval_ns as f64 / 1e9)
}

#[cfg(test)]
impl NumaStat {
    /// Counts of the four lines the tests set, the others 0.
    pub(crate) fn counted(hit: u64, foreign: u64, local: u64, other: u64) -> NumaStat {
        NumaStat {
            numa_hit: hit,
            numa_foreign: foreign,
            local_node: local,
            other_node: other,
            ..NumaStat::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_over_a_round_never_go_negative() {
        let before = NumaStat::counted(100, 5, 90, 10);
        let after = NumaStat::counted(400, 5, 300, 110);
        assert_eq!(after.since(&before), NumaStat::counted(300, 0, 210, 100));
        // A node that went offline and came back starts from zero.
        assert_eq!(before.since(&after), NumaStat::default());
        let r = after.since(&before).per_second(2_000_000_000).unwrap();
        assert_eq!(
            (r.numa_hit, r.local_node, r.other_node),
            (150.0, 105.0, 50.0)
        );
        assert_eq!(after.per_second(0), None);
    }

    #[test]
    fn vmstat_counters_the_kernel_lacks_stay_missing() {
        let before = VmNumaStat {
            numa_hint_faults: Some(10),
            numa_hint_faults_local: None,
            numa_pages_migrated: Some(4),
            pgmigrate_success: Some(7),
        };
        let after = VmNumaStat {
            numa_hint_faults: Some(30),
            numa_hint_faults_local: Some(3),
            numa_pages_migrated: Some(2),
            pgmigrate_success: None,
        };
        let d = after.since(&before);
        assert_eq!(d.numa_hint_faults, Some(20));
        assert_eq!(d.numa_hint_faults_local, None, "missing before");
        assert_eq!(d.numa_pages_migrated, Some(0), "went back");
        assert_eq!(d.pgmigrate_success, None, "missing now");
        let r = d.per_second(500_000_000).unwrap();
        assert_eq!(r.numa_hint_faults, Some(40.0));
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"numa_hint_faults":40.0,"numa_pages_migrated":0.0}"#
        );
    }

    #[test]
    fn page_fault_rates() {
        let f = PageFaults {
            minor: 3000,
            major: 6,
        };
        assert_eq!(f.per_second(3_000_000_000), Some((1000.0, 2.0)));
        assert_eq!(f.per_second(0), None);
    }
}
