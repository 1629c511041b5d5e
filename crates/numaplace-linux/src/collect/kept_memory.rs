//! A running process's memory per node kept from an earlier round while
//! nothing says it changed.
//!
//! `numa_maps` walks every mapping's page tables: for a process with many
//! mappings it costs more than all its threads together (issue 19: 7.4 ms
//! for one process with 2,000 thread stacks, `benches/collect.rs`, against
//! 0.9 ms for one task-iterator pass over every task). The carry-over
//! keeps the memory of a process that did not run; this keeps the memory
//! of one that runs but whose pages cannot have changed node or number:
//! - a page is added to a process, or brought back from swap, only by one
//!   of its own page faults: its threads' fault counts (`stat`'s minflt
//!   and majflt, summed over its threads) would have grown, or its thread
//!   set changed (an exiting thread's counts leave the sum);
//! - a page leaves by `munmap`, `madvise` or reclaim: its size or resident
//!   set (`statm`) changes, or, for reclaim, the host's `pgsteal_*`;
//! - a page changes node only by migration (NUMA balancing, `move_pages`,
//!   `migratepages`, compaction, demotion: the host's `pgmigrate_success`)
//!   or by khugepaged collapsing it into a new huge page
//!   (`thp_collapse_alloc`).
//!
//! So the memory is read again when any of those moved since it was read,
//! and in any case once `max_age` has passed. The host-wide counters make
//! the rule cautious on a host that migrates or reclaims all the time:
//! there every process is read every round, as before.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use numaplace_model::NodeMemory;

/// What must not have moved for a process's memory to be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MemoryKey {
    /// The main thread's start time (the process is still that one).
    pub start_time: u64,
    /// Page faults of its threads read this round, summed.
    pub faults: u64,
    pub threads: usize,
    /// `statm`: size and resident set, pages.
    pub size: u64,
    pub resident: u64,
    /// The host's pages migrated, collapsed or reclaimed.
    pub host_moves: u64,
}

#[derive(Debug)]
struct Kept {
    key: MemoryKey,
    read_at: Instant,
    memory: BTreeMap<u32, NodeMemory>,
}

#[derive(Debug)]
pub(super) struct KeptMemory {
    max_age: Duration,
    kept: HashMap<i32, Kept>,
}

impl KeptMemory {
    pub(super) fn new(max_age: Duration) -> KeptMemory {
        KeptMemory {
            max_age,
            kept: HashMap::new(),
        }
    }

    /// The memory read under the same key, if less than `max_age` ago.
    pub(super) fn get(
        &self,
        pid: i32,
        key: &MemoryKey,
        now: Instant,
    ) -> Option<&BTreeMap<u32, NodeMemory>> {
        let k = self.kept.get(&pid)?;
        (k.key == *key && now.saturating_duration_since(k.read_at) < self.max_age)
            .then_some(&k.memory)
    }

    pub(super) fn store(
        &mut self,
        pid: i32,
        key: MemoryKey,
        memory: BTreeMap<u32, NodeMemory>,
        now: Instant,
    ) {
        self.kept.insert(
            pid,
            Kept {
                key,
                read_at: now,
                memory,
            },
        );
    }

    pub(super) fn forget(&mut self, pid: i32) {
        self.kept.remove(&pid);
    }

    pub(super) fn retain_seen(&mut self, seen: impl Fn(i32) -> bool) {
        self.kept.retain(|&pid, _| seen(pid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_while_nothing_moved_and_not_too_old() {
        let t0 = Instant::now();
        let key = MemoryKey {
            start_time: 5,
            faults: 100,
            threads: 3,
            size: 1000,
            resident: 400,
            host_moves: 7,
        };
        let mut k = KeptMemory::new(Duration::from_secs(10));
        let memory = BTreeMap::from([(
            1,
            NodeMemory {
                anon: 4096,
                ..NodeMemory::default()
            },
        )]);
        assert!(k.get(9, &key, t0).is_none());
        k.store(9, key, memory.clone(), t0);
        assert_eq!(k.get(9, &key, t0 + Duration::from_secs(9)), Some(&memory));
        assert!(
            k.get(9, &key, t0 + Duration::from_secs(10)).is_none(),
            "too old"
        );
        for changed in [
            MemoryKey {
                start_time: 6,
                ..key
            },
            MemoryKey { faults: 101, ..key },
            MemoryKey { threads: 2, ..key },
            MemoryKey { size: 999, ..key },
            MemoryKey {
                resident: 401,
                ..key
            },
            MemoryKey {
                host_moves: 8,
                ..key
            },
        ] {
            assert!(k.get(9, &changed, t0).is_none(), "{changed:?}");
        }
        k.forget(9);
        assert!(k.get(9, &key, t0).is_none());
        k.store(9, key, memory, t0);
        k.retain_seen(|pid| pid != 9);
        assert!(k.get(9, &key, t0).is_none());
    }
}
