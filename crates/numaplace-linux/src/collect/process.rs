//! Reading one process: its main thread, its threads (or what is carried
//! of them, see `carry.rs`), and its memory per node.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::time::Instant;

use numaplace_model::{CpuSet, NodeMemory, NumaFaults, Snapshot, Task, TaskGroup};

use super::carry::process_cpu_ns;
use super::faults::ThreadFaults;
use super::iterated::as_stat;
use super::kept_memory::MemoryKey;
use super::{Collector, MAX_CPUS};
use crate::actuate::{thread_affinity, thread_affinity_with};
use crate::confinement::Cgroups;
use crate::procfs::{ProcError, TaskStat};
use crate::taskiter::TaskRecord;
use crate::vm;

impl Collector {
    /// Reads one process and its threads; `None` if it vanished or its
    /// main thread cannot be read. Its memory is read later, in
    /// [`Collector::read_memory`].
    pub(super) fn read_process(
        &mut self,
        pid: i32,
        now: Instant,
    ) -> Option<(TaskGroup, Vec<Task>)> {
        // The CPU clock first: a carried reading holds only if nothing of
        // the process ran since the clock was read before it. Where the
        // round's task-iterator pass saw the process, the sum of its
        // threads' run times in that pass (the kernel's clock of a process
        // sums every thread's time, walking them all).
        let passed_ns = (self.iterated.as_ref())
            .and_then(|i| i.threads(pid))
            .map(|ts| ts.iter().fold(0u64, |a, r| a.wrapping_add(r.runtime_ns)));
        let cpu_ns = if self.carry.is_some() && self.root.is_host() {
            passed_ns.or_else(|| process_cpu_ns(pid))
        } else {
            None
        };
        let passed = self.iterated.as_ref().and_then(|i| i.stat(pid, pid));
        let main = match passed.map_or_else(|| self.proc.stat(pid, pid), Ok) {
            Ok(s) => s,
            Err(e) => {
                self.note(&e);
                return None;
            }
        };
        let passed_mems = (self.iterated.as_ref())
            .and_then(|i| i.record(pid, pid))
            .and_then(|r| r.allowed_mems.clone());
        let mems = match passed_mems
            .map_or_else(|| self.proc.status(pid, pid).map(|s| s.mems_allowed), Ok)
        {
            Ok(m) => m,
            Err(e) => {
                self.note(&e);
                if matches!(e, ProcError::Gone { .. }) {
                    return None;
                }
                CpuSet::new()
            }
        };
        let carried = match (cpu_ns, &mut self.carry) {
            (Some(ns), Some(c)) => c.quiet(pid, ns, &main, now).and_then(|q| {
                let passed = self.iterated.as_ref().and_then(|i| i.threads(pid));
                carried_tasks(&q.tasks, &mems, passed)
            }),
            _ => None,
        };
        let mut tasks = match carried {
            Some(tasks) => {
                self.carried.push(pid);
                self.faults.carried(pid, main.start_time);
                tasks
            }
            None => self.read_threads(pid, &main, &mems, cpu_ns, now)?,
        };
        let (cmdline, cgroups) = match self.iterated.as_ref().and_then(|i| i.meta(pid, now)) {
            Some(kept) => kept,
            None => {
                let mut whole = true;
                let cmdline = self.proc.cmdline(pid).unwrap_or_else(|e| {
                    self.note(&e);
                    whole = false;
                    Vec::new()
                });
                let cgroups = match self.proc.cgroup(pid) {
                    Ok(c) => Cgroups::of(&c),
                    Err(e) => {
                        self.note(&e);
                        whole = false;
                        Cgroups::default()
                    }
                };
                if let Some(i) = &mut self.iterated {
                    if whole {
                        i.store_meta(pid, &cmdline, &cgroups, now);
                    }
                }
                (cmdline, cgroups)
            }
        };
        // Its cgroup's cpuset, read this round (the kubelet, libvirt or
        // systemd may change it at any time): its threads' confinement.
        // The kubelet's exclusive CPUs are no one else's.
        let (confined, manager) = self.confinements.room(&cgroups);
        if confined.is_some() || manager.is_some() {
            for t in &mut tasks {
                t.confined_cpus = confined.clone();
                t.manager = manager.clone();
            }
        }
        let cgroup = cgroups.unified;
        let named: Vec<(i32, &str)> = tasks.iter().map(|t| (t.tid, t.comm.as_str())).collect();
        let (kind, vcpus) = vm::classify(&self.root, pid, &named, &cmdline);
        for (tid, n) in vcpus {
            if let Some(t) = tasks.iter_mut().find(|t| t.tid == tid) {
                t.vcpu = Some(n);
            }
        }
        let threads: BTreeSet<i32> = tasks.iter().map(|t| t.tid).collect();
        let group = TaskGroup {
            pid,
            start_time: main.start_time,
            comm: main.comm,
            cmdline,
            cgroup,
            kind,
            threads: threads.into_iter().collect(),
            memory: None,
        };
        Some((group, tasks))
    }

    /// Lists a process's threads and reads each; `None` if none could be
    /// read. `main` is the main thread's `stat`, read this round (after
    /// `cpu_ns`). With `cpu_ns` (its CPU clock, read before), a read that
    /// found every thread listed is kept for the rounds the process stays
    /// quiet.
    ///
    /// Per thread: one `openat` of its `stat` relative to the process's
    /// `task/` directory (held open for the process), read into a buffer
    /// reused across threads, and its allowed CPUs (one syscall on the live
    /// host, into a reused buffer too).
    fn read_threads(
        &mut self,
        pid: i32,
        main: &TaskStat,
        mems: &CpuSet,
        cpu_ns: Option<u64>,
        now: Instant,
    ) -> Option<Vec<Task>> {
        let mut tids = std::mem::take(&mut self.tids);
        // The round's pass of the task iterator, where it saw the process:
        // its threads and their fields, nothing listed or read per thread.
        let mut passed = self.iterated.as_ref().and_then(|i| {
            let threads = i.threads(pid)?;
            tids.clear();
            tids.extend(threads.iter().map(|r| r.tid));
            Some(
                threads
                    .iter()
                    .map(|r| (as_stat(r, threads.len()), r.allowed_cpus.clone()))
                    .collect::<Vec<_>>()
                    .into_iter(),
            )
        });
        let (dir, listing) = if passed.is_some() {
            (None, None)
        } else {
            match self.proc.task_dir(pid) {
                Ok(d) => {
                    let listing = d.tids(&mut self.bufs, &mut tids).err();
                    (Some(d), listing)
                }
                Err(e) => (None, Some(e)),
            }
        };
        let listed = listing.is_none();
        if let Some(e) = listing {
            self.note(&e);
            tids.clear();
            tids.push(pid);
        }
        let mut tasks = Vec::with_capacity(tids.len());
        // Held `stat` files (the daemon's rounds): last round's, and this
        // round's in tid order.
        let mut old: Vec<(i32, Option<File>)> = match &mut self.held {
            Some(h) => h.take(pid).into_iter().map(|(t, f)| (t, Some(f))).collect(),
            None => Vec::new(),
        };
        let mut new = Vec::new();
        let mut faults = 0u64;
        for &tid in &tids {
            // The main thread's was read already, this round.
            let mut passed_cpus = None;
            let read = if let Some(p) = &mut passed {
                let (stat, cpus) = p.next().expect("a record per tid");
                passed_cpus = cpus;
                Ok(stat)
            } else if tid == pid {
                Ok(main.clone())
            } else {
                match (&dir, &self.held) {
                    (Some(d), Some(h)) => h.stat(d, tid, &mut old, &mut new, &mut self.bufs),
                    (Some(d), None) => d.stat(tid, &mut self.bufs),
                    (None, _) => self.proc.stat(pid, tid),
                }
            };
            let stat = match read {
                Ok(s) => s,
                Err(e) => {
                    self.note(&e);
                    continue;
                }
            };
            faults = faults.wrapping_add(stat.min_flt).wrapping_add(stat.maj_flt);
            self.faults.thread(ThreadFaults {
                tid,
                start_time: stat.start_time,
                minor: stat.min_flt,
                major: stat.maj_flt,
            });
            // Allowed CPUs per thread: one syscall on the live host, the
            // thread's `status` in a snapshot tree. `status` is the most
            // expensive file the kernel generates per thread, so on the
            // host only the process's is read (for its memory nodes, which
            // its threads share: they come from its cpuset).
            let (allowed_cpus, tgid) = if let Some(cpus) = passed_cpus {
                (cpus, pid)
            } else if self.root.is_host() {
                match thread_affinity_with(tid, MAX_CPUS, &mut self.affinity_words) {
                    Ok(c) => (c, pid),
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                        self.gaps.gone += 1;
                        continue;
                    }
                    Err(_) => {
                        self.gaps.denied += 1;
                        (CpuSet::new(), pid)
                    }
                }
            } else {
                match self.proc.status(pid, tid) {
                    Ok(s) => (s.cpus_allowed, s.tgid),
                    Err(e) => {
                        self.note(&e);
                        if matches!(e, ProcError::Gone { .. }) {
                            continue;
                        }
                        (CpuSet::new(), pid)
                    }
                }
            };
            tasks.push(Task {
                tid,
                tgid,
                start_time: stat.start_time,
                comm: stat.comm,
                state: stat.state,
                last_cpu: stat.processor,
                allowed_cpus,
                allowed_mems: mems.clone(),
                confined_cpus: None,
                manager: None,
                utime: stat.utime,
                stime: stat.stime,
                vcpu: None,
            });
        }
        if let (Some(ns), Some(c)) = (cpu_ns, &mut self.carry) {
            // A process with a thread running or runnable is never found
            // quiet (`CarryOver::quiet`): keeping its threads would only
            // cost a copy of each.
            let may_be_quiet = tasks.iter().all(|t| t.state != 'R');
            if listed && tasks.len() == tids.len() && may_be_quiet {
                c.store(pid, ns, tasks.clone(), now);
            } else {
                c.forget(pid);
            }
        }
        self.round_faults
            .insert(pid, (main.start_time, faults, tasks.len()));
        let complete = listed && tasks.len() == tids.len();
        self.faults.read(pid, main.start_time, complete);
        drop(old);
        if let Some(h) = &mut self.held {
            h.put(pid, new);
        }
        self.tids = tids;
        (!tasks.is_empty()).then_some(tasks)
    }

    /// Memory per node of every process with a memory map of its own
    /// (kernel threads have none) that the memory scope takes in.
    pub(super) fn read_memory(&mut self, snapshot: &mut Snapshot, now: Instant) {
        // Tasks are in tid order by now: `Snapshot::task` (the scope's
        // thread names) is a binary search.
        let wanted: Vec<bool> = snapshot
            .groups
            .iter()
            .map(|g| {
                !g.cmdline.is_empty()
                    && (self.memory_scope.as_ref()).is_none_or(|s| s.matches(g, snapshot))
            })
            .collect();
        let mut faults_of = Vec::new();
        self.host_moves = match &self.kept {
            Some(_) => self.proc.vmstat_page_moves().ok().flatten(),
            None => None,
        };
        for (g, wanted) in snapshot.groups.iter_mut().zip(wanted) {
            if wanted {
                g.memory = self.memory_of(g.pid, now);
                if g.memory.is_some() && self.explicit_policy.contains(&g.pid) {
                    snapshot.explicit_mempolicy.insert(g.pid);
                }
                if self.numa_faults && self.carried.binary_search(&g.pid).is_err() {
                    faults_of.push((g.pid, g.threads.clone()));
                }
            }
        }
        for (pid, tids) in faults_of {
            for tid in tids {
                if let Some(f) = self.numa_faults_of(pid, tid) {
                    snapshot.numa_faults.insert(tid, f);
                }
            }
        }
    }

    /// A thread's memory-side hinting faults per node, from its `sched`;
    /// `None` if it has none to read. The first read that shows the kernel
    /// writes none stops the reading, with the reason kept for the log.
    fn numa_faults_of(&mut self, pid: i32, tid: i32) -> Option<NumaFaults> {
        if self.numa_faults_missing.is_some() {
            return None;
        }
        match self.proc.sched_numa(pid, tid) {
            Ok(Some(n)) => Some(NumaFaults {
                memory: n.faults.iter().map(|(&node, f)| (node, f.task())).collect(),
                preferred_node: n.preferred_node,
            }),
            Ok(None) => {
                self.say_numa_faults_missing(format!(
                    "/proc/{pid}/task/{tid}/sched has no NUMA balancing lines (a kernel built \
                     without CONFIG_NUMA_BALANCING)"
                ));
                None
            }
            Err(ProcError::Unavailable { path }) => {
                self.say_numa_faults_missing(format!(
                    "{} does not exist (a kernel built without CONFIG_SCHED_DEBUG)",
                    path.display()
                ));
                None
            }
            Err(e) => {
                self.note(&e);
                None
            }
        }
    }

    /// Notes, and says once, that this kernel shows no hinting faults.
    fn say_numa_faults_missing(&mut self, why: String) {
        tracing::warn!(
            "not measured: NUMA hinting faults per node (where each thread's memory accesses \
             go, without a PMU): {why}; policies go without them"
        );
        self.numa_faults_missing = Some(why);
    }

    /// A process's memory per node: carried over if it is quiet and was
    /// read recently, else from its `numa_maps`.
    fn memory_of(&mut self, pid: i32, now: Instant) -> Option<BTreeMap<u32, NodeMemory>> {
        if let Some(m) = self.carry.as_ref().and_then(|c| c.memory(pid, now)) {
            return Some(m.clone());
        }
        let key = self.memory_key(pid);
        if let (Some(key), Some(kept)) = (&key, &self.kept) {
            if let Some(m) = kept.get(pid, key, now) {
                self.memory_kept.push(pid);
                return Some(m.clone());
            }
        }
        match self.proc.numa_maps(pid) {
            Ok(m) => {
                if m.explicit_policy_bytes > 0 {
                    self.explicit_policy.insert(pid);
                } else {
                    self.explicit_policy.remove(&pid);
                }
                let memory: BTreeMap<u32, NodeMemory> = m
                    .nodes
                    .iter()
                    .map(|(&n, p)| {
                        (
                            n,
                            NodeMemory {
                                anon: p.anon,
                                file: p.file,
                                huge: p.huge,
                            },
                        )
                    })
                    .collect();
                if let Some(c) = &mut self.carry {
                    c.store_memory(pid, memory.clone(), now);
                }
                if let (Some(key), Some(kept)) = (key, &mut self.kept) {
                    kept.store(pid, key, memory.clone(), now);
                }
                Some(memory)
            }
            Err(e) => {
                self.note(&e);
                None
            }
        }
    }
}

impl Collector {
    /// What must stay the same for a running process's memory to be kept
    /// (`collect/kept_memory.rs`), read before its `numa_maps` would be;
    /// `None` where it cannot be known (not a daemon, its threads not read
    /// this round, `statm` or `vmstat` unreadable).
    fn memory_key(&self, pid: i32) -> Option<MemoryKey> {
        self.kept.as_ref()?;
        let host_moves = self.host_moves?;
        let &(start_time, faults, threads) = self.round_faults.get(&pid)?;
        let statm = self.proc.statm(pid).ok()?;
        Some(MemoryKey {
            start_time,
            faults,
            threads,
            size: statm.size,
            resident: statm.resident,
            host_moves,
        })
    }
}

/// A quiet process's threads as carried, with their allowed CPUs read now
/// (from the round's task-iterator pass where it has them, `passed`, by
/// tid); `None` if one cannot be read (it exited after all, or we may not
/// ask): the process is then read in full.
fn carried_tasks(
    carried: &[Task],
    mems: &CpuSet,
    passed: Option<&[TaskRecord]>,
) -> Option<Vec<Task>> {
    carried
        .iter()
        .map(|t| {
            let in_pass = passed
                .and_then(|ts| {
                    ts.binary_search_by_key(&t.tid, |r| r.tid)
                        .ok()
                        .map(|i| &ts[i])
                })
                .filter(|r| r.start_time == t.start_time)
                .and_then(|r| r.allowed_cpus.clone());
            let allowed_cpus = match in_pass {
                Some(c) => c,
                None => thread_affinity(t.tid, MAX_CPUS).ok()?,
            };
            Some(Task {
                tid: t.tid,
                tgid: t.tgid,
                start_time: t.start_time,
                comm: t.comm.clone(),
                state: t.state,
                last_cpu: t.last_cpu,
                allowed_cpus,
                allowed_mems: mems.clone(),
                confined_cpus: None,
                manager: None,
                utime: t.utime,
                stime: t.stime,
                vcpu: None,
            })
        })
        .collect()
}
