//! Threads' `stat` files held open from round to round (the daemon's
//! setting, [`Collector::set_carry_over`](super::Collector::set_carry_over),
//! on a host without counters or sampling, whose fds it leaves to them).
//!
//! Opening and closing a procfs file is more than half of what the kernel
//! charges for a thread's `stat` (issue 19: the floors of `benches/
//! collect.rs`, 22.0 ms to open, read and close 2,000 threads' `stat`,
//! 8.9 ms to read them held open): a held file is read again with one
//! `pread` from its start, which the kernel generates afresh. Identity
//! holds: an open `stat` is bound to the thread it was opened for (its
//! `struct pid`), not to the number, so once that thread has exited every
//! read fails with `ESRCH`, even after a new thread took its tid; the file
//! is then dropped and the tid, if still listed, opened again. The start
//! time read each round says the same.
//!
//! Files are held up to a budget, half the fd limit (raised to the hard
//! limit, as the counters' monitor does); beyond it, threads' `stat` are
//! opened and closed each round as before.

use std::collections::HashMap;
use std::fs::File;

use crate::procfs::{ProcError, TaskBuffers, TaskDir, TaskStat};

/// The `stat` files held, per process, sorted by tid.
#[derive(Debug)]
pub(super) struct HeldStats {
    processes: HashMap<i32, Vec<(i32, File)>>,
    held: usize,
    budget: usize,
}

impl HeldStats {
    /// Holds up to half the fd limit (raised first).
    pub(super) fn new() -> HeldStats {
        let soft = crate::perf::sampling::raise_fd_limit().soft;
        let budget = usize::try_from(soft / 2)
            .unwrap_or(usize::MAX)
            .saturating_sub(64);
        HeldStats::with_budget(budget)
    }

    pub(super) fn with_budget(budget: usize) -> HeldStats {
        HeldStats {
            processes: HashMap::new(),
            held: 0,
            budget,
        }
    }

    /// Takes a process's held files out, for a round over its threads
    /// ([`HeldStats::put`] gives back those still wanted).
    pub(super) fn take(&mut self, pid: i32) -> Vec<(i32, File)> {
        let files = self.processes.remove(&pid).unwrap_or_default();
        self.held -= files.len();
        files
    }

    /// Gives back a process's files after a round over its threads.
    pub(super) fn put(&mut self, pid: i32, files: Vec<(i32, File)>) {
        self.held += files.len();
        if !files.is_empty() {
            self.processes.insert(pid, files);
        }
    }

    /// Whether `more` files (beyond those held) may be held.
    fn room(&self, more: usize) -> bool {
        self.held + more < self.budget
    }

    /// Closes the files of processes not seen this round.
    pub(super) fn retain_seen(&mut self, seen: impl Fn(i32) -> bool) {
        self.processes.retain(|&pid, _| seen(pid));
        self.held = self.processes.values().map(Vec::len).sum();
    }

    /// The tids whose files are held for a process, increasing.
    #[cfg(test)]
    pub(super) fn tids(&self, pid: i32) -> Vec<i32> {
        self.processes
            .get(&pid)
            .map_or(Vec::new(), |f| f.iter().map(|(t, _)| *t).collect())
    }

    /// Reads thread `tid`'s `stat`: from its held file in `old` (sorted by
    /// tid, what [`HeldStats::take`] gave) if there is one and its thread
    /// is alive, else opened afresh; the file goes into `new` (tid order
    /// kept) if there is room.
    pub(super) fn stat(
        &self,
        dir: &TaskDir,
        tid: i32,
        old: &mut [(i32, Option<File>)],
        new: &mut Vec<(i32, File)>,
        bufs: &mut TaskBuffers,
    ) -> Result<TaskStat, ProcError> {
        let kept = (old.binary_search_by_key(&tid, |(t, _)| *t).ok()).and_then(|i| old[i].1.take());
        if let Some(file) = kept {
            match dir.read_stat(&file, tid, bufs) {
                Ok(s) => {
                    new.push((tid, file));
                    return Ok(s);
                }
                // That thread exited; the tid may be another's by now.
                Err(ProcError::Gone { .. }) => drop(file),
                Err(e) => return Err(e),
            }
        }
        let file = dir.open_stat(tid)?;
        let s = dir.read_stat(&file, tid, bufs)?;
        if self.room(new.len() + 1) {
            new.push((tid, file));
        }
        Ok(s)
    }
}
