//! What the predictor reads of a round beyond the counters: which of a
//! process's memory its threads share stores to (from sampled stores, over
//! rounds), and where each thread's pages are.

use std::collections::BTreeMap;

use numaplace_model::{Counter, Snapshot, Topology};

use super::MIN_SAMPLES;

/// Bytes of a region of a process's memory whose stores are counted
/// together: a shared area is contiguous, and sampled stores of different
/// threads seldom hit one 4 KiB page within a few rounds.
const REGION: u64 = 64 * 1024;

/// Rounds a sampled store is remembered.
const WRITES_KEPT: u64 = 8;

/// Regions of each process's memory its threads were sampled storing to
/// over the last rounds: by (pid, region), the first thread seen, whether
/// another was seen too, and the round last seen.
#[derive(Debug, Default)]
pub(crate) struct Writers {
    regions: BTreeMap<(i32, u64), (i32, bool, u64)>,
}

impl Writers {
    /// Adds the round's sampled stores and forgets those too old or of
    /// processes gone.
    pub(crate) fn update(&mut self, s: &Snapshot) {
        for g in &s.groups {
            for &tid in &g.threads {
                for x in s
                    .samples
                    .get(&tid)
                    .into_iter()
                    .flatten()
                    .filter(|x| x.write)
                {
                    let e = self
                        .regions
                        .entry((g.pid, x.address / REGION))
                        .or_insert((tid, false, s.seq));
                    e.1 |= e.0 != tid;
                    e.2 = s.seq;
                }
            }
        }
        self.regions.retain(|(pid, _), (_, _, seen)| {
            s.seq < *seen + WRITES_KEPT && s.group(*pid).is_some()
        });
    }

    fn shared(&self, pid: i32, address: u64) -> bool {
        self.regions
            .get(&(pid, address / REGION))
            .is_some_and(|r| r.1)
    }
}

/// This round's samples of a process's threads against the regions its
/// threads share stores to.
pub(super) struct SharedWrites {
    /// Per thread: samples, and those that were stores to shared regions.
    per_thread: BTreeMap<i32, (usize, usize)>,
    /// Bytes of shared regions.
    pub(super) bytes: u64,
    threads: Vec<i32>,
}

impl SharedWrites {
    pub(super) fn of(s: &Snapshot, writers: &Writers, pid: i32, threads: &[i32]) -> SharedWrites {
        let mut per_thread = BTreeMap::new();
        for &tid in threads {
            let samples = s.samples.get(&tid).map_or(&[][..], |v| v.as_slice());
            let shared = samples
                .iter()
                .filter(|x| x.write && writers.shared(pid, x.address))
                .count();
            per_thread.insert(tid, (samples.len(), shared));
        }
        let regions = writers
            .regions
            .range((pid, 0)..=(pid, u64::MAX))
            .filter(|(_, r)| r.1)
            .count() as u64;
        SharedWrites {
            per_thread,
            bytes: regions * REGION,
            threads: threads.to_vec(),
        }
    }

    /// The share of `tid`'s samples that were stores to shared regions.
    pub(super) fn fraction(&self, tid: i32) -> f64 {
        match self.per_thread.get(&tid) {
            Some(&(n, k)) if n > 0 => k as f64 / n as f64,
            _ => 0.0,
        }
    }

    /// The CPUs' worth of time the other sharers of `tid`'s process ran
    /// over the round.
    pub(super) fn others_running(&self, s: &Snapshot, tid: i32, secs: f64) -> f64 {
        self.threads
            .iter()
            .filter(|&&o| o != tid && self.fraction(o) > 0.0)
            .filter_map(|o| s.counters.get(o)?.get(Counter::TaskClock))
            .map(|ns| (ns as f64 / 1e9 / secs).min(1.0))
            .sum()
    }
}

/// Whether a process's memory lies spread like its threads (each node's
/// share of its memory within 0.25 of its share of the threads): then
/// first touch left each thread's memory beside it.
pub(super) fn spread_like_threads(
    t: &Topology,
    s: &Snapshot,
    g: &numaplace_model::TaskGroup,
    pages: &[f64],
) -> bool {
    let mut on = vec![0.0; pages.len()];
    let mut n = 0.0;
    for x in g.threads.iter().filter_map(|&tid| s.task(tid)) {
        if let Some(c) = x.last_cpu.and_then(|c| t.cpu_by_os_id(c)) {
            on[c.node] += 1.0;
            n += 1.0;
        }
    }
    n > 1.0
        && on.iter().filter(|&&x| x > 0.0).count() > 1
        && on
            .iter()
            .zip(pages)
            .all(|(&k, &p)| (k / n - p).abs() <= 0.25)
}

/// A thread's pages per dense node (see the module's doc).
pub(super) fn own_pages(
    t: &Topology,
    s: &Snapshot,
    tid: i32,
    node: usize,
    spread_like: bool,
    group: &[f64],
) -> Vec<f64> {
    let mut p = vec![0.0; group.len()];
    if let Some(samples) = s.samples.get(&tid) {
        let mut n = 0.0;
        for x in samples {
            if let Some(d) = x.node.and_then(|os| t.node_by_os_id(os)) {
                p[d.id] += 1.0;
                n += 1.0;
            }
        }
        if n >= MIN_SAMPLES as f64 {
            p.iter_mut().for_each(|v| *v /= n);
            return p;
        }
        p.iter_mut().for_each(|v| *v = 0.0);
    }
    if spread_like || group.iter().all(|&v| v == 0.0) {
        p[node] = 1.0;
        return p;
    }
    group.to_vec()
}
