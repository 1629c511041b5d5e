//! What one collection round saw: tasks, their raw counter deltas, memory
//! per node, machine-level readings. Snapshots are what the recorder writes
//! and the replay source yields, so everything here is raw; derived
//! metrics come from [`crate::metrics`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::counters::CounterDeltas;
use crate::memory_events::{NoRates, NumaStat, NumaStatRates, PageFaults, VmNumaStat};
use crate::task::{NumaFaults, Task, TaskGroup};
use crate::topology::Topology;

/// One round.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Round number, from 0.
    pub seq: u64,
    /// When the round was taken, nanoseconds since the Unix epoch.
    pub time_unix_ns: u64,
    /// Nanoseconds the deltas cover (monotonic clock); 0 in the first round.
    pub interval_ns: u64,
    /// Every thread seen, in tid order once sorted ([`Snapshot::sort_tasks`]).
    pub tasks: Vec<Task>,
    /// Every process (an application or a VM) seen, with its threads.
    pub groups: Vec<TaskGroup>,
    /// Counter deltas over the interval, by tid (tasks in `tasks` only).
    pub counters: BTreeMap<i32, CounterDeltas>,
    /// Machine-wide readings: nodes' memory, energy, the kernel's NUMA
    /// settings.
    pub machine: MachineReadings,
    /// Data addresses sampled per thread over the interval (perf sampling
    /// with data addresses on a live host where the PMU has it; the page
    /// model in the simulator), by tid. \[Blagodurov11\] §4 moves memory around
    /// them; \[Bae12\] §4 builds page sets from them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub samples: BTreeMap<i32, Vec<AddressSample>>,
    /// Cache-footprint signatures (\[Symbiosis-Bloom\] §3.1), by tid: what the
    /// counting Bloom filter of its last-level cache recorded when the
    /// thread last left its CPU. Only the simulator has the hardware; a
    /// live host may approximate it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub signatures: BTreeMap<i32, CacheSignature>,
    /// Pages each thread touched in the two probe windows of \[Bae12\]
    /// §4.2-4.3, by tid, where the world can see them: the simulator's
    /// page model (when asked for). A live host has no per-thread accessed
    /// bits outside a VMM; it builds the same sets from `samples` instead
    /// (a lower bound: only the sampled pages).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub page_sets: BTreeMap<i32, PageSets>,
    /// Where each thread's memory accesses go, by tid, from the kernel's
    /// automatic NUMA balancing hinting faults (`/proc/<pid>/task/<tid>/sched`
    /// on a live host while `kernel.numa_balancing` is on; the simulated
    /// kernel's statistics when the simulator's balancing is on): a signal
    /// that needs no PMU. Empty where the world has none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub numa_faults: BTreeMap<i32, NumaFaults>,
    /// Processes (pids) with memory under an explicit memory policy
    /// (`bind`, `interleave`, `prefer`... in `numa_maps`), which the
    /// kernel's automatic NUMA balancing never moves.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub explicit_mempolicy: BTreeSet<i32>,
    /// Per VM (its pid), the vCPUs (QEMU's vCPU index, `Task::vcpu`) whose
    /// guest says they run threads that pinned themselves: \[Rao13\] §4.3's
    /// tagged vCPUs, sent by `numaplace guest` over a virtio-serial port. A
    /// VM is here only while its guest's hints are live; an empty set means
    /// the guest speaks and tags none. Empty in recordings made before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub guest_hints: BTreeMap<i32, BTreeSet<u32>>,
    /// Page faults each process's threads took over the interval (their
    /// `stat`'s `minflt` and `majflt` on a live host; the pages first
    /// touched in the simulator), by pid: a signal that needs no PMU. A
    /// process first seen this round has none (a count needs two readings).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub page_faults: BTreeMap<i32, PageFaults>,
}

/// \[Bae12\] §4.3's per-vcore bit vectors as sorted page numbers: the pages
/// consistently accessed / written over a window of memory operations
/// (`accessed_per_mem_i`, `written_per_mem_i`) and over a window of store
/// operations (`accessed_per_store_i`, `written_per_store_i`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageSets {
    /// Over a window of memory operations.
    pub per_mem: PageWindow,
    /// Over a window of store operations.
    pub per_store: PageWindow,
}

/// Pages accessed and written in one window, sorted, without repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageWindow {
    /// Pages accessed (page numbers).
    pub accessed: Vec<u64>,
    /// Pages written (page numbers).
    pub written: Vec<u64>,
}

/// One sampled data access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressSample {
    /// Virtual address in the thread's process.
    pub address: u64,
    /// The node holding the page (kernel id), where known.
    pub node: Option<u32>,
    /// Whether it was a store.
    pub write: bool,
}

/// What \[Symbiosis-Bloom\]'s hardware recorded when a thread was switched out of a
/// CPU of a shared cache (§3.1-3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheSignature {
    /// The CPU (kernel id) it ran on.
    pub cpu: u32,
    /// Ones in its running bit vector: how much of the cache it filled.
    pub occupancy_weight: u32,
    /// Per CPU of the same cache (kernel id), its own included where the
    /// source has it (§3.3.2 uses the self-core value): ones in the
    /// running bit vector XOR that CPU's core filter; higher means the
    /// two footprints overlap less.
    pub symbiosis: BTreeMap<u32, u32>,
    /// Entries of the filter (the largest possible weight).
    pub entries: u32,
}

impl Snapshot {
    /// Each node's `numastat` in allocations per second over the round, by
    /// node (kernel id), or why there are none.
    pub fn node_rates(&self) -> Result<BTreeMap<u32, NumaStatRates>, NoRates> {
        if self.interval_ns == 0 {
            return Err(NoRates::FirstRound);
        }
        if self.machine.numastat.is_empty() {
            return Err(NoRates::NotRead);
        }
        Ok(self
            .machine
            .numastat
            .iter()
            .filter_map(|(&n, c)| Some((n, c.per_second(self.interval_ns)?)))
            .collect())
    }

    /// Seconds since a task or process that started at `start_time`
    /// (clock ticks since boot) began, when the round was taken; `None`
    /// where the world gave no uptime.
    pub fn age_s(&self, start_time: u64) -> Option<f64> {
        let now = self.machine.uptime_ticks?;
        Some(now.saturating_sub(start_time) as f64 / self.machine.clock_ticks.max(1) as f64)
    }

    /// The task `tid`. The collector and the simulator list tasks in tid
    /// order ([`Snapshot::sort_tasks`]), so this is a binary search, called
    /// per thread by policies; a list in any other order (a hand-made
    /// snapshot) is still searched right, one task at a time.
    pub fn task(&self, tid: i32) -> Option<&Task> {
        match self.tasks.binary_search_by_key(&tid, |t| t.tid) {
            Ok(i) if self.tasks[i].tid == tid => Some(&self.tasks[i]),
            _ => self.tasks.iter().find(|t| t.tid == tid),
        }
    }

    /// Puts the tasks in tid order, which [`Snapshot::task`] searches fast.
    pub fn sort_tasks(&mut self) {
        self.tasks.sort_unstable_by_key(|t| t.tid);
    }

    /// The process `pid`, if the round saw it.
    pub fn group(&self, pid: i32) -> Option<&TaskGroup> {
        self.groups.iter().find(|g| g.pid == pid)
    }
}

/// Machine-wide readings of the round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineReadings {
    /// Memory of each node (kernel id): total and free bytes.
    pub nodes: BTreeMap<u32, NodeMeminfo>,
    /// Energy used over the interval per powercap zone.
    pub energy: Vec<EnergyDelta>,
    /// resctrl monitoring per group and cache domain.
    pub resctrl: Vec<ResctrlSample>,
    /// Clock ticks per second of `utime` / `stime` (`sysconf(_SC_CLK_TCK)`).
    #[serde(default = "default_clock_ticks")]
    pub clock_ticks: u64,
    /// Whether the kernel's automatic NUMA balancing moves pages between
    /// nodes now (`kernel.numa_balancing` bit 0x1); `None` where the
    /// kernel has no such setting or it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_balancing: Option<bool>,
    /// Clock ticks since boot when the round was taken (`/proc/uptime` in
    /// [`MachineReadings::clock_ticks`]), the unit of a task's
    /// `start_time`: how long a process has run
    /// ([`Snapshot::age_s`]); `None` where unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_ticks: Option<u64>,
    /// Each node's `numastat` over the interval (the allocations the page
    /// allocator served from it, and for whom), by node (kernel id): needs
    /// no PMU. Empty in the
    /// first round (a count over a round needs two readings), where the
    /// kernel has none, and in recordings made before;
    /// [`Snapshot::node_rates`] says which.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub numastat: BTreeMap<u32, NumaStat>,
    /// The machine's `/proc/vmstat` NUMA counters over the interval
    /// (hinting faults, pages migrated); `None` in the first round and
    /// where not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmstat_numa: Option<VmNumaStat>,
}

fn default_clock_ticks() -> u64 {
    100
}

/// A node's memory, from its `meminfo`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMeminfo {
    /// Bytes of memory on the node.
    pub total: u64,
    /// Bytes free on the node.
    pub free: u64,
}

/// Energy of one powercap (RAPL) zone over the interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnergyDelta {
    /// The zone's directory name, e.g. `intel-rapl:0`.
    pub zone: String,
    /// The zone's own name, e.g. `package-0`, `dram`.
    pub name: String,
    /// Microjoules over the interval; `None` in the first round.
    pub microjoules: Option<u64>,
}

/// resctrl monitoring of one group on one L3 domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResctrlSample {
    /// The monitoring group's path under `/sys/fs/resctrl` (`` for the root).
    pub group: String,
    /// The L3 domain (resctrl's `mon_L3_NN`).
    pub domain: u32,
    /// LLC occupancy now, bytes.
    pub llc_occupancy: Option<u64>,
    /// Memory bandwidth over the interval, bytes (total and local).
    pub mbm_total_bytes: Option<u64>,
    /// Of which to the domain's local memory, bytes.
    pub mbm_local_bytes: Option<u64>,
}

/// What a recording starts with: which machine, which signals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordHeader {
    /// Always [`RecordHeader::FORMAT`].
    pub format: String,
    /// [`RecordHeader::VERSION`] when written by this numaplace.
    pub version: u32,
    /// The numaplace version that wrote it.
    pub writer: String,
    /// The interval asked for, nanoseconds.
    pub interval_ns: u64,
    /// The recorded machine.
    pub topology: Topology,
    /// What could not be measured on the recording machine, and why.
    #[serde(default)]
    pub missing_signals: Vec<String>,
}

impl RecordHeader {
    /// What a recording's first line says it is.
    pub const FORMAT: &'static str = "numaplace-record";
    /// The layout version this numaplace writes and reads.
    pub const VERSION: u32 = 1;
}

impl Default for MachineReadings {
    fn default() -> Self {
        MachineReadings {
            nodes: BTreeMap::new(),
            energy: Vec::new(),
            resctrl: Vec::new(),
            clock_ticks: default_clock_ticks(),
            numa_balancing: None,
            uptime_ticks: None,
            numastat: BTreeMap::new(),
            vmstat_numa: None,
        }
    }
}

/// \[Symbiosis-Bloom\] §5.3's "XOR" index hash: the XOR of the `bits`-wide pieces of
/// `x`, lowest piece first (`bits` in 1..64). The simulator's Bloom
/// filters index cache-line addresses with it, and so does the live
/// approximation built from sampled addresses.
pub fn xor_fold(mut x: u64, bits: u32) -> u64 {
    let mask = (1u64 << bits) - 1;
    let mut acc = 0;
    while x != 0 {
        acc ^= x & mask;
        x >>= bits;
    }
    acc
}

#[cfg(test)]
mod task_lookup_tests {
    use super::*;

    fn with_tids(tids: &[i32]) -> Snapshot {
        Snapshot {
            tasks: tids
                .iter()
                .map(|&tid| Task {
                    tid,
                    tgid: tid,
                    start_time: 1,
                    comm: "t".into(),
                    state: 'S',
                    last_cpu: None,
                    allowed_cpus: crate::CpuSet::default(),
                    allowed_mems: crate::CpuSet::default(),
                    confined_cpus: None,
                    manager: None,
                    utime: 0,
                    stime: 0,
                    vcpu: None,
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    /// Recordings made before guest hints existed still read; the hints
    /// round-trip, and are left out of the JSON when there are none.
    #[test]
    fn guest_hints_are_optional_in_json() {
        let old = serde_json::to_string(&Snapshot::default()).unwrap();
        assert!(!old.contains("guest_hints"), "{old}");
        let s: Snapshot = serde_json::from_str(&old).unwrap();
        assert!(s.guest_hints.is_empty());
        let mut s = Snapshot::default();
        s.guest_hints.insert(42, BTreeSet::from([1, 3]));
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains(r#""guest_hints":{"42":[1,3]}"#), "{text}");
        assert_eq!(serde_json::from_str::<Snapshot>(&text).unwrap(), s);
    }

    #[test]
    fn finds_a_task_in_tid_order_or_any_other() {
        let mut s = with_tids(&[40, 7, 300, 12, 9, 1000, 2]);
        let all = [40, 7, 300, 12, 9, 1000, 2];
        for tid in all {
            assert_eq!(s.task(tid).map(|t| t.tid), Some(tid), "unsorted, {tid}");
        }
        assert!(s.task(8).is_none());
        s.sort_tasks();
        assert!(s.tasks.windows(2).all(|w| w[0].tid < w[1].tid));
        for tid in all {
            assert_eq!(s.task(tid).map(|t| t.tid), Some(tid), "sorted, {tid}");
        }
        assert!(s.task(8).is_none() && s.task(0).is_none() && s.task(2000).is_none());
    }
}

#[cfg(test)]
mod memory_event_tests {
    use super::*;
    use crate::memory_events::{NoRates, NumaStat, PageFaults, VmNumaStat};

    #[test]
    fn the_first_round_says_it_has_no_rates() {
        let mut s = Snapshot::default();
        s.machine
            .numastat
            .insert(0, NumaStat::counted(10, 0, 10, 0));
        assert_eq!(s.node_rates(), Err(NoRates::FirstRound));
        s.interval_ns = 1_000_000_000;
        assert_eq!(s.node_rates().unwrap()[&0].numa_hit, 10.0);
        s.machine.numastat.clear();
        assert_eq!(s.node_rates(), Err(NoRates::NotRead));
        assert!(NoRates::FirstRound.to_string().contains("second reading"));
    }

    /// Recordings made before these signals still read; the signals
    /// round-trip, and are left out of the JSON when there are none.
    #[test]
    fn snapshots_without_them_still_read() {
        let old = serde_json::to_string(&Snapshot::default()).unwrap();
        for key in ["numastat", "vmstat_numa", "page_faults"] {
            assert!(!old.contains(key), "{old}");
        }
        assert_eq!(
            serde_json::from_str::<Snapshot>(&old).unwrap(),
            Snapshot::default()
        );
        let mut s = Snapshot::default();
        s.machine.numastat.insert(1, NumaStat::counted(5, 1, 4, 1));
        s.machine.vmstat_numa = Some(VmNumaStat {
            numa_hint_faults: Some(9),
            ..VmNumaStat::default()
        });
        s.page_faults.insert(42, PageFaults { minor: 7, major: 0 });
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            text.contains(r#""page_faults":{"42":{"minor":7,"major":0}}"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Snapshot>(&text).unwrap(), s);
    }
}
