//! Threads' `stat` fields from one pass of the BPF task iterator
//! (`taskiter`), the daemon's source on a host that allows it.
//!
//! A round starts with one pass over every task of the host; each process
//! the round reads then takes its main thread's and its threads' fields
//! from the pass, with no `task/` listing and no `stat` read per thread.
//! A process the pass did not see (started since, or hidden from BPF by
//! the host's security policy) is read from `/proc` as before. The pass is
//! the round's picture of who exists: a thread started after it waits for
//! the next round, and one that exited after it is dropped when the
//! actuator finds its start time no longer matches (as for any reading).

use std::collections::HashMap;

use crate::procfs::TaskStat;
use crate::taskiter::{TaskIterError, TaskIterator, TaskRecord};

#[derive(Debug)]
pub(super) struct Iterated {
    it: TaskIterator,
    /// The last pass, sorted by (tgid, tid).
    records: Vec<TaskRecord>,
    /// Each process's records in `records`.
    by_tgid: HashMap<i32, (usize, usize)>,
}

impl Iterated {
    pub fn open(user_hz: u64) -> Result<Iterated, TaskIterError> {
        Ok(Iterated {
            it: TaskIterator::open(user_hz)?,
            records: Vec::new(),
            by_tgid: HashMap::new(),
        })
    }

    /// A new pass.
    pub fn refresh(&mut self) -> Result<(), TaskIterError> {
        self.by_tgid.clear();
        if let Err(e) = self.it.read(&mut self.records) {
            self.records.clear();
            return Err(e);
        }
        self.records.sort_unstable_by_key(|r| (r.tgid, r.tid));
        let mut start = 0;
        while start < self.records.len() {
            let tgid = self.records[start].tgid;
            let end = start
                + self.records[start..]
                    .iter()
                    .position(|r| r.tgid != tgid)
                    .unwrap_or(self.records.len() - start);
            self.by_tgid.insert(tgid, (start, end));
            start = end;
        }
        Ok(())
    }

    /// A process's threads in the last pass, by tid; `None` if the pass
    /// did not see it.
    pub fn threads(&self, tgid: i32) -> Option<&[TaskRecord]> {
        let &(start, end) = self.by_tgid.get(&tgid)?;
        Some(&self.records[start..end])
    }

    /// A thread's fields as `stat` gives them.
    pub fn stat(&self, tgid: i32, tid: i32) -> Option<TaskStat> {
        let threads = self.threads(tgid)?;
        let i = threads.binary_search_by_key(&tid, |r| r.tid).ok()?;
        Some(as_stat(&threads[i], threads.len()))
    }
}

/// A record as the `stat` fields the collector reads (the parent's pid is
/// not in the record; nothing in a round reads it).
pub(super) fn as_stat(r: &TaskRecord, threads: usize) -> TaskStat {
    TaskStat {
        pid: r.tid,
        comm: r.comm.clone(),
        state: r.state,
        ppid: 0,
        flags: r.flags,
        min_flt: r.min_flt,
        maj_flt: r.maj_flt,
        utime: r.utime,
        stime: r.stime,
        num_threads: threads as i64,
        start_time: r.start_time,
        processor: Some(r.cpu),
    }
}
