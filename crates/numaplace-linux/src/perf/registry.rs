//! The set of threads a per-thread perf user watches (the counters'
//! monitor, the address sampler): which have their events open, which
//! cannot have them and why, and which wait for file descriptors. Both
//! follow a changing tid list the same way; only how they open a thread's
//! events and word their refusals differ.

use std::collections::{BTreeMap, BTreeSet};

/// What one sync of a watched thread set did ([`PerfMonitor::sync`],
/// [`AddressSampler::sync`]).
///
/// [`PerfMonitor::sync`]: super::PerfMonitor::sync
/// [`AddressSampler::sync`]: super::AddressSampler::sync
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Opened for threads new to the list.
    pub opened: usize,
    /// Closed because the thread left the list.
    pub closed: usize,
    /// Exited before its counters could be opened.
    pub gone: usize,
    /// Cannot be counted (permission, other errors); not retried.
    pub refused: usize,
    /// No fd left for them.
    pub starved: usize,
}

/// Why a thread's events could not be opened.
pub(super) enum OpenFailure {
    /// The thread exited first.
    Gone,
    /// No file descriptor (or buffer budget) left: retried once some are
    /// freed.
    OutOfFds,
    /// Anything else: not retried while the thread stays listed.
    Refused(String),
}

#[derive(Debug)]
pub(super) struct ThreadSet<T> {
    pub threads: BTreeMap<i32, T>,
    /// Threads that cannot be watched, and why; forgotten when they leave
    /// the tid list.
    pub refused: BTreeMap<i32, String>,
    /// Threads that found no fd; retried once fds are freed.
    pub starved: BTreeSet<i32>,
    fds_freed: bool,
}

impl<T> Default for ThreadSet<T> {
    fn default() -> Self {
        ThreadSet {
            threads: BTreeMap::new(),
            refused: BTreeMap::new(),
            starved: BTreeSet::new(),
            fds_freed: false,
        }
    }
}

impl<T> ThreadSet<T> {
    /// Makes the watched set follow `tids`: closes the events of threads
    /// no longer listed, opens events for new ones with `open` (when
    /// `can_open`), at most `max_threads` at a time. `first_starved` runs
    /// when a thread is the first to find no room.
    pub(super) fn sync(
        &mut self,
        tids: &[i32],
        max_threads: usize,
        can_open: bool,
        mut open: impl FnMut(i32) -> Result<T, OpenFailure>,
        first_starved: impl Fn(),
    ) -> SyncReport {
        let want: BTreeSet<i32> = tids.iter().copied().collect();
        let mut report = SyncReport::default();
        let before = self.threads.len();
        self.threads.retain(|tid, _| want.contains(tid));
        report.closed = before - self.threads.len();
        self.fds_freed |= report.closed > 0;
        self.refused.retain(|tid, _| want.contains(tid));
        self.starved.retain(|tid| want.contains(tid));
        if !can_open {
            return report;
        }
        let retry_starved = std::mem::take(&mut self.fds_freed);
        for tid in want {
            if self.threads.contains_key(&tid) || self.refused.contains_key(&tid) {
                continue;
            }
            if tid <= 0 {
                // 0 would be this thread and -1 every thread: never a target.
                self.refused
                    .insert(tid, format!("{tid} is not a thread id"));
                report.refused += 1;
                continue;
            }
            if self.starved.contains(&tid) && !retry_starved {
                report.starved += 1;
                continue;
            }
            if self.threads.len() >= max_threads {
                self.starve(tid, &first_starved);
                report.starved += 1;
                continue;
            }
            match open(tid) {
                Ok(t) => {
                    self.starved.remove(&tid);
                    self.threads.insert(tid, t);
                    report.opened += 1;
                }
                Err(OpenFailure::Gone) => {
                    self.refused.insert(tid, "exited".into());
                    report.gone += 1;
                }
                Err(OpenFailure::OutOfFds) => {
                    self.starve(tid, &first_starved);
                    report.starved += 1;
                }
                Err(OpenFailure::Refused(why)) => {
                    self.refused.insert(tid, why);
                    report.refused += 1;
                }
            }
        }
        report
    }

    fn starve(&mut self, tid: i32, first_starved: &impl Fn()) {
        if self.starved.is_empty() {
            first_starved();
        }
        self.starved.insert(tid);
    }

    /// Forgets a thread whose events failed or whose thread exited, and
    /// says why while it stays listed; its fds are free for starved ones.
    pub(super) fn drop_thread(&mut self, tid: i32, why: String) {
        self.threads.remove(&tid);
        self.fds_freed = true;
        self.refused.insert(tid, why);
    }

    /// Listed threads not watched, and why; starved ones with `starved_why`.
    pub(super) fn unwatched(&self, starved_why: &str) -> BTreeMap<i32, String> {
        let mut out = self.refused.clone();
        for &tid in &self.starved {
            out.insert(tid, starved_why.to_owned());
        }
        out
    }
}
