//! Each process's page faults over a round ([`Snapshot::page_faults`]):
//! its threads' `minflt` and `majflt` (from the `stat` the round reads
//! anyway, or the task iterator's pass) against the last round's reading
//! of the same threads.
//!
//! A thread read in both rounds counts what it took in between; a thread
//! new since a reading that saw every thread started since, and counts
//! all it took; a thread that exited in between takes its last faults
//! with it (they are missed, not counted negative). A process carried
//! over (`carry.rs`: none of its threads ran) took none. A process seen
//! for the first time, or whose pid now names another process, has no
//! count.
//!
//! [`Snapshot::page_faults`]: numaplace_model::Snapshot::page_faults

use std::collections::{BTreeMap, HashMap};

use numaplace_model::PageFaults;

/// One thread's cumulative faults, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ThreadFaults {
    pub tid: i32,
    pub start_time: u64,
    pub minor: u64,
    pub major: u64,
}

/// A process's threads as one round read them.
#[derive(Debug, Clone)]
struct Reading {
    start_time: u64,
    /// By tid, increasing.
    threads: Vec<ThreadFaults>,
    /// Every thread listed was read: a thread missing from it is new.
    complete: bool,
}

/// The last round's readings and this round's, and this round's counts.
#[derive(Debug, Default)]
pub(super) struct FaultCounts {
    last: HashMap<i32, Reading>,
    now: HashMap<i32, Reading>,
    /// Threads of the process being read.
    pending: Vec<ThreadFaults>,
    counts: BTreeMap<i32, PageFaults>,
}

impl FaultCounts {
    /// A thread of the process being read.
    pub(super) fn thread(&mut self, t: ThreadFaults) {
        self.pending.push(t);
    }

    /// The process whose threads were just given ([`FaultCounts::thread`])
    /// is read; `complete` if every thread listed was.
    pub(super) fn read(&mut self, pid: i32, start_time: u64, complete: bool) {
        let mut threads = std::mem::take(&mut self.pending);
        threads.sort_unstable_by_key(|t| t.tid);
        let now = Reading {
            start_time,
            threads,
            complete,
        };
        if let Some(before) = self.last.get(&pid).filter(|r| r.start_time == start_time) {
            self.counts.insert(pid, faults_between(before, &now));
        }
        self.now.insert(pid, now);
    }

    /// The process was carried over from the last round (nothing of it
    /// ran): no faults, and the last reading stands.
    pub(super) fn carried(&mut self, pid: i32, start_time: u64) {
        if let Some(r) = self
            .last
            .remove(&pid)
            .filter(|r| r.start_time == start_time)
        {
            self.counts.insert(pid, PageFaults::default());
            self.now.insert(pid, r);
        }
    }

    /// This round's counts, by pid; what was read becomes the last round.
    pub(super) fn finish(&mut self) -> BTreeMap<i32, PageFaults> {
        self.last = std::mem::take(&mut self.now);
        self.pending.clear();
        std::mem::take(&mut self.counts)
    }
}

/// The faults a process took between two readings of its threads.
fn faults_between(before: &Reading, now: &Reading) -> PageFaults {
    let mut out = PageFaults::default();
    for t in &now.threads {
        let earlier = before
            .threads
            .binary_search_by_key(&t.tid, |b| b.tid)
            .ok()
            .map(|i| before.threads[i])
            .filter(|b| b.start_time == t.start_time);
        let (minor, major) = match earlier {
            Some(b) => (
                t.minor.saturating_sub(b.minor),
                t.major.saturating_sub(b.major),
            ),
            // New since a reading that saw every thread: all its faults
            // are since then. After a reading that missed some, it may be
            // one of those: nothing is known of it.
            None if before.complete => (t.minor, t.major),
            None => (0, 0),
        };
        out.minor = out.minor.saturating_add(minor);
        out.major = out.major.saturating_add(major);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tid: i32, minor: u64, major: u64) -> ThreadFaults {
        ThreadFaults {
            tid,
            start_time: 1000 + tid as u64,
            minor,
            major,
        }
    }

    fn read(c: &mut FaultCounts, pid: i32, threads: &[ThreadFaults], complete: bool) {
        for &th in threads {
            c.thread(th);
        }
        c.read(pid, 7, complete);
    }

    #[test]
    fn a_process_counts_what_its_threads_took_between_rounds() {
        let mut c = FaultCounts::default();
        read(&mut c, 10, &[t(10, 100, 1), t(11, 50, 0)], true);
        assert!(c.finish().is_empty(), "first seen: no count");
        // Thread 11 took 25 more, 12 is new (all 40 are since), 10 none.
        read(
            &mut c,
            10,
            &[t(12, 40, 2), t(10, 100, 1), t(11, 75, 0)],
            true,
        );
        assert_eq!(
            c.finish()[&10],
            PageFaults {
                minor: 65,
                major: 2
            }
        );
        // Thread 12 exited: its faults leave with it, none go negative.
        read(&mut c, 10, &[t(10, 101, 1), t(11, 75, 0)], true);
        assert_eq!(c.finish()[&10], PageFaults { minor: 1, major: 0 });
    }

    #[test]
    fn a_carried_process_took_none_and_keeps_its_reading() {
        let mut c = FaultCounts::default();
        read(&mut c, 10, &[t(10, 100, 0)], true);
        c.finish();
        c.carried(10, 7);
        assert_eq!(c.finish()[&10], PageFaults::default());
        read(&mut c, 10, &[t(10, 130, 0)], true);
        assert_eq!(c.finish()[&10].minor, 30, "against the carried reading");
        // Carried with no reading before (or another start time): nothing.
        c.carried(99, 7);
        assert!(!c.finish().contains_key(&99));
    }

    #[test]
    fn a_reused_pid_or_thread_starts_again() {
        let mut c = FaultCounts::default();
        read(&mut c, 10, &[t(10, 100, 0)], true);
        c.finish();
        c.thread(t(10, 5, 0));
        c.read(10, 8, true); // another process under pid 10
        assert!(c.finish().is_empty());
        // A thread whose tid came back with another start time is new.
        read(&mut c, 20, &[t(20, 10, 0)], true);
        c.finish();
        let mut again = t(20, 3, 0);
        again.start_time += 1;
        read(&mut c, 20, &[again], true);
        assert_eq!(c.finish()[&20].minor, 3);
    }

    /// After a reading that missed a thread (its `stat` refused), a thread
    /// not in it is not known to be new: its lifetime's faults are not
    /// this round's.
    #[test]
    fn an_incomplete_reading_counts_no_unknown_thread() {
        let mut c = FaultCounts::default();
        read(&mut c, 10, &[t(10, 100, 0)], false);
        c.finish();
        read(&mut c, 10, &[t(10, 110, 0), t(11, 90_000, 0)], true);
        assert_eq!(c.finish()[&10].minor, 10);
    }
}
