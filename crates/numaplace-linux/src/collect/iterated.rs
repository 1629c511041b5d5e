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
//!
//! The pass also carries what a process's `status`, `cmdline` and
//! `cgroup` were read for: its memory nodes (its cpuset's, in the record),
//! the id of its cgroup, and its count of execs. A process's command line
//! and cgroup path are kept from an earlier round while it is the same
//! process running the same program (start time, exec count) in the same
//! cgroup (the id changes when anyone moves it), for at most `max_age`: a
//! program that rewrites its own argv (`setproctitle`) shows the new text
//! within that.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::confinement::Cgroups;
use crate::procfs::TaskStat;
use crate::taskiter::{TaskIterError, TaskIterator, TaskRecord};

#[derive(Debug)]
pub(super) struct Iterated {
    it: TaskIterator,
    /// The last pass, sorted by (tgid, tid).
    records: Vec<TaskRecord>,
    /// Each process's records in `records`.
    by_tgid: HashMap<i32, (usize, usize)>,
    /// Command lines and cgroups as last read, per process.
    meta: HashMap<i32, Meta>,
    max_age: Duration,
}

/// A process's command line and cgroup path, and what must be the same
/// for them to stand.
#[derive(Debug)]
struct Meta {
    key: (u64, u64, u64),
    read_at: Instant,
    cmdline: Vec<String>,
    cgroups: Cgroups,
}

impl Iterated {
    pub(super) fn open(user_hz: u64, max_age: Duration) -> Result<Iterated, TaskIterError> {
        Ok(Iterated {
            it: TaskIterator::open(user_hz)?,
            records: Vec::new(),
            by_tgid: HashMap::new(),
            meta: HashMap::new(),
            max_age,
        })
    }

    /// A thread's record in the last pass.
    pub(super) fn record(&self, tgid: i32, tid: i32) -> Option<&TaskRecord> {
        let threads = self.threads(tgid)?;
        let i = threads.binary_search_by_key(&tid, |r| r.tid).ok()?;
        Some(&threads[i])
    }

    /// What must be the same for a process's command line and cgroup to
    /// be kept: its main thread's start time, exec count and cgroup id;
    /// `None` where the pass lacks them.
    fn key(&self, pid: i32) -> Option<(u64, u64, u64)> {
        let r = self.record(pid, pid)?;
        Some((r.start_time, r.exec_id, r.cgroup_id?))
    }

    /// The process's command line and cgroup path, if kept.
    pub(super) fn meta(&self, pid: i32, now: Instant) -> Option<(Vec<String>, Cgroups)> {
        let key = self.key(pid)?;
        let m = self.meta.get(&pid)?;
        (m.key == key && now.saturating_duration_since(m.read_at) < self.max_age)
            .then(|| (m.cmdline.clone(), m.cgroups.clone()))
    }

    /// Keeps what was read of a process this round.
    pub(super) fn store_meta(
        &mut self,
        pid: i32,
        cmdline: &[String],
        cgroups: &Cgroups,
        now: Instant,
    ) {
        match self.key(pid) {
            Some(key) => {
                self.meta.insert(
                    pid,
                    Meta {
                        key,
                        read_at: now,
                        cmdline: cmdline.to_vec(),
                        cgroups: cgroups.clone(),
                    },
                );
            }
            None => {
                self.meta.remove(&pid);
            }
        }
    }

    /// Forgets the processes not seen this round.
    pub(super) fn retain_seen(&mut self, seen: impl Fn(i32) -> bool) {
        self.meta.retain(|&pid, _| seen(pid));
    }

    /// A new pass.
    pub(super) fn refresh(&mut self) -> Result<(), TaskIterError> {
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
    pub(super) fn threads(&self, tgid: i32) -> Option<&[TaskRecord]> {
        let &(start, end) = self.by_tgid.get(&tgid)?;
        Some(&self.records[start..end])
    }

    /// A thread's fields as `stat` gives them.
    pub(super) fn stat(&self, tgid: i32, tid: i32) -> Option<TaskStat> {
        let threads = self.threads(tgid)?;
        Some(as_stat(self.record(tgid, tid)?, threads.len()))
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
