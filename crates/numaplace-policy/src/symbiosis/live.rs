//! Signatures on a live host, where no counting Bloom filter exists: an
//! approximation of \[Symbiosis-Bloom\] §3.1 built in software from sampled data
//! addresses (`Snapshot::samples`, perf sampling with data addresses).
//!
//! Per thread, the cache lines of its samples over the last
//! `live-window-rounds` rounds are hashed (§5.3's XOR hash, one hash
//! function as §3.1 recommends) into a bit vector of `2^live-filter-bits`
//! entries: that is its running bit vector (RBV). A CPU's core filter
//! (CF) is the union of the RBVs of the threads that last ran on it. The
//! occupancy weight is the ones in the RBV, and the symbiosis with each
//! other CPU of the same LLC the ones in RBV XOR CF, exactly as the
//! hardware would compute them from its vectors.
//!
//! What it can see: which lines a thread touches often enough to be
//! sampled, so heavy cache users (many samples over many lines) get large
//! weights and threads with a small hot set small ones; overlap between
//! threads of one process (same address space). What it cannot see:
//! evictions (a line stays in the RBV for the whole window whether or not
//! it is still cached), lines never sampled (weights saturate at the
//! number of samples, so they rank footprints rather than measure them),
//! and sharing between processes: addresses are virtual, so the process id
//! is mixed into the hash and two processes never appear to share a line
//! (shared libraries and page cache included).
//!
//! Where resctrl monitors a process (a monitoring group named after its
//! pid, `mon_groups/<pid>` or `mon_groups/numaplace-<pid>`), its measured
//! LLC occupancy replaces the sampled weight: occupancy over the LLC size
//! times the filter entries, split evenly over the process's threads.

use numaplace_model::snapshot::xor_fold;
use std::collections::{BTreeMap, HashMap, VecDeque};

use numaplace_model::{CacheSignature, Snapshot, Topology};

/// A bit vector of `2^bits` entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    words: Vec<u64>,
    bits: u32,
}

impl Filter {
    /// An empty filter of `2^bits` entries.
    pub fn new(bits: u32) -> Filter {
        Filter {
            words: vec![0; (1usize << bits).div_ceil(64)],
            bits,
        }
    }

    /// Its entries.
    pub fn entries(&self) -> u32 {
        1 << self.bits
    }

    /// Sets entry `i` (hand-made vectors in tests and tools).
    pub fn set(&mut self, i: usize) {
        assert!(i < 1 << self.bits, "entry {i} of {}", 1u64 << self.bits);
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Sets the entry of cache line `line` (address / 64) of process `salt`.
    pub fn insert(&mut self, line: u64, salt: u64) {
        let i = xor_fold(line ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15), self.bits) as usize;
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Sets every entry set in `other`.
    pub fn union_with(&mut self, other: &Filter) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// Entries set.
    pub fn count_ones(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// Ones in `self XOR other` (\[Symbiosis-Bloom\] §3.1's symbiosis).
    pub fn xor_count_ones(&self, other: &Filter) -> u32 {
        self.words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum()
    }
}

/// The running bit vector of one thread from its sampled addresses.
pub fn footprint<'a>(addresses: impl IntoIterator<Item = &'a u64>, tgid: i32, bits: u32) -> Filter {
    let mut f = Filter::new(bits);
    for a in addresses {
        f.insert(a / 64, tgid as u64);
    }
    f
}

/// Sampled cache lines per thread over the last rounds.
#[derive(Debug, Default)]
pub struct SampleWindows {
    by_tid: HashMap<i32, VecDeque<Vec<u64>>>,
}

impl SampleWindows {
    /// Adds this round's samples, keeps the last `rounds` rounds, forgets
    /// threads no longer in the snapshot.
    pub fn update(&mut self, s: &Snapshot, rounds: usize) {
        self.by_tid.retain(|tid, _| s.task(*tid).is_some());
        for (tid, samples) in &s.samples {
            let w = self.by_tid.entry(*tid).or_default();
            w.push_back(samples.iter().map(|a| a.address).collect());
            while w.len() > rounds.max(1) {
                w.pop_front();
            }
        }
    }

    /// Signatures in the snapshot's format, one per thread with samples
    /// and a known last CPU; see the module documentation.
    pub fn signatures(
        &self,
        t: &Topology,
        s: &Snapshot,
        bits: u32,
    ) -> BTreeMap<i32, CacheSignature> {
        let mut rbv: BTreeMap<i32, (u32, Filter)> = BTreeMap::new();
        for (tid, rounds) in &self.by_tid {
            let Some(task) = s.task(*tid) else { continue };
            let Some(cpu) = task.last_cpu else { continue };
            let f = footprint(rounds.iter().flatten(), task.tgid, bits);
            if f.count_ones() > 0 {
                rbv.insert(*tid, (cpu, f));
            }
        }
        let mut cf: BTreeMap<u32, Filter> = BTreeMap::new();
        for (cpu, f) in rbv.values() {
            cf.entry(*cpu)
                .or_insert_with(|| Filter::new(bits))
                .union_with(f);
        }
        let empty = Filter::new(bits);
        let resctrl = resctrl_weights(t, s, 1 << bits);
        let mut out = BTreeMap::new();
        for (tid, (cpu, f)) in &rbv {
            let Some(c) = t.cpu_by_os_id(*cpu) else {
                continue;
            };
            let llc = &t.llcs()[c.llc];
            let symbiosis = llc
                .span
                .iter()
                .filter(|o| o != cpu)
                .map(|o| (o, f.xor_count_ones(cf.get(&o).unwrap_or(&empty))))
                .collect();
            let occupancy_weight = resctrl
                .get(&s.task(*tid).map_or(0, |x| x.tgid))
                .copied()
                .unwrap_or_else(|| f.count_ones());
            out.insert(
                *tid,
                CacheSignature {
                    cpu: *cpu,
                    occupancy_weight,
                    symbiosis,
                    entries: 1 << bits,
                },
            );
        }
        out
    }
}

/// Per process monitored by resctrl (a group `.../mon_groups/<pid>` or
/// `.../mon_groups/numaplace-<pid>`): its threads' share of the filter
/// entries, from LLC occupancy over LLC size summed over domains.
fn resctrl_weights(t: &Topology, s: &Snapshot, entries: u32) -> HashMap<i32, u32> {
    let llc_size = (0..t.llcs().len())
        .filter_map(|l| t.llc_size(l))
        .max()
        .unwrap_or(0);
    let mut out = HashMap::new();
    if llc_size == 0 {
        return out;
    }
    let mut bytes: HashMap<i32, u64> = HashMap::new();
    for r in &s.machine.resctrl {
        let Some(name) = r
            .group
            .rsplit("mon_groups/")
            .next()
            .filter(|_| r.group.contains("mon_groups/"))
        else {
            continue;
        };
        let name = name.trim_end_matches('/');
        let pid = name.strip_prefix("numaplace-").unwrap_or(name);
        if let (Ok(pid), Some(occ)) = (pid.parse::<i32>(), r.llc_occupancy) {
            *bytes.entry(pid).or_default() += occ;
        }
    }
    for (pid, b) in bytes {
        let threads = s.group(pid).map_or(1, |g| g.threads.len().max(1)) as u64;
        let w = (b as f64 / llc_size as f64 * f64::from(entries) / threads as f64).round() as u32;
        out.insert(pid, w.min(entries));
    }
    out
}
