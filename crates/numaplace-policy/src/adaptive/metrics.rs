//! The eight page-level metrics of \[Bae12\]
//! §4.1, computed as §4.3's `Aggregate` does from per-vcore page sets.
//! Pure functions: the simulator's page model, a recording and a live
//! host's sampled addresses all go through the same code.
//!
//! What each world can see:
//! - the simulator's page model ([`numaplace_model::PageSets`] in the
//!   snapshot): every page a thread consistently touched in the window,
//!   as a VMM's accessed / dirty bits would show them (§4.2);
//! - a live host's sampled data addresses (`Snapshot::samples`, PEBS /
//!   IBS): only the sampled pages, a lower bound that grows with the
//!   sample count, so the rates are smaller than a VMM's and the
//!   classifier's threshold must be trained on the same source;
//! - per process, soft-dirty bits (`/proc/pid/clear_refs` = 4, then
//!   `pagemap` bit 55) and idle-page tracking
//!   (`/sys/kernel/mm/page_idle/bitmap`): every written / accessed page
//!   of the process, but not per thread, so the sharing ratios cannot be
//!   computed from them (all threads share one set); not wired here.

use numaplace_model::{AddressSample, PageSets, PageWindow};
use serde::{Deserialize, Serialize};

/// \[Bae12\] §4.1's metrics, in the order §5.3's models take them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PageMetrics {
    /// (1) average pages accessed per vcore in a window of memory operations.
    pub r_am: f64,
    /// (2) average pages written per vcore in a window of memory operations.
    pub r_wm: f64,
    /// (3) shared page access ratio over memory operations.
    pub s_am: f64,
    /// (4) shared page write ratio over memory operations.
    pub s_wm: f64,
    /// (5) average pages accessed per vcore in a window of stores.
    pub r_aw: f64,
    /// (6) average pages written per vcore in a window of stores.
    pub r_ww: f64,
    /// (7) shared page access ratio over stores.
    pub s_aw: f64,
    /// (8) shared page write ratio over stores.
    pub s_ww: f64,
}

impl PageMetrics {
    /// The model's feature vector, §4.1's numbering.
    pub fn features(&self) -> [f64; 8] {
        [
            self.r_am, self.r_wm, self.s_am, self.s_wm, self.r_aw, self.r_ww, self.s_aw, self.s_ww,
        ]
    }

    /// Element-wise mean of several probes (§5.3 suggests averaging to
    /// reduce burstiness).
    pub fn mean(all: &[PageMetrics]) -> Option<PageMetrics> {
        if all.is_empty() {
            return None;
        }
        let mut sum = [0.0; 8];
        for m in all {
            for (s, f) in sum.iter_mut().zip(m.features()) {
                *s += f;
            }
        }
        let n = all.len() as f64;
        let f = sum.map(|s| s / n);
        Some(PageMetrics {
            r_am: f[0],
            r_wm: f[1],
            s_am: f[2],
            s_wm: f[3],
            r_aw: f[4],
            r_ww: f[5],
            s_aw: f[6],
            s_ww: f[7],
        })
    }
}

/// Pages in both sorted, repeat-free lists.
pub fn intersection_len(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// §4.3: `r = 1/n Σ |set_i|` and `s = 1/(r (n−1) n) Σ_{j<k} |set_j ∩ set_k|`
/// (the paper's normalisation: sets shared by all vcores give s = 1/2).
fn rate_and_share(sets: &[&[u64]]) -> (f64, f64) {
    let n = sets.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let r = sets.iter().map(|s| s.len()).sum::<usize>() as f64 / n as f64;
    if n < 2 || r == 0.0 {
        return (r, 0.0);
    }
    let mut both = 0usize;
    for j in 0..n - 1 {
        for k in j + 1..n {
            both += intersection_len(sets[j], sets[k]);
        }
    }
    (r, both as f64 / (r * (n - 1) as f64 * n as f64))
}

/// The eight metrics of one probe over a VM's (or process's) vcores.
pub fn page_metrics(vcores: &[&PageSets]) -> PageMetrics {
    let pick = |f: fn(&PageSets) -> &PageWindow, g: fn(&PageWindow) -> &Vec<u64>| {
        vcores
            .iter()
            .map(|p| g(f(p)).as_slice())
            .collect::<Vec<_>>()
    };
    let (r_am, s_am) = rate_and_share(&pick(|p| &p.per_mem, |w| &w.accessed));
    let (r_wm, s_wm) = rate_and_share(&pick(|p| &p.per_mem, |w| &w.written));
    let (r_aw, s_aw) = rate_and_share(&pick(|p| &p.per_store, |w| &w.accessed));
    let (r_ww, s_ww) = rate_and_share(&pick(|p| &p.per_store, |w| &w.written));
    PageMetrics {
        r_am,
        r_wm,
        s_am,
        s_wm,
        r_aw,
        r_ww,
        s_aw,
        s_ww,
    }
}

/// A thread's page sets from sampled data addresses (a live host, §4.2's
/// sets as far as sampling shows them): the memory-operation window holds
/// every sampled page, the store window the pages of the samples from the
/// first store on (samples arrive in time order), so it spans a stretch
/// of the same length in stores rather than in all operations.
pub fn page_sets_from_samples(samples: &[AddressSample], page_size: u64) -> PageSets {
    let page = |a: &AddressSample| a.address / page_size.max(1);
    let window = |v: &[AddressSample]| {
        let mut accessed: Vec<u64> = v.iter().map(page).collect();
        let mut written: Vec<u64> = v.iter().filter(|a| a.write).map(page).collect();
        for s in [&mut accessed, &mut written] {
            s.sort_unstable();
            s.dedup();
        }
        PageWindow { accessed, written }
    };
    let first_store = samples
        .iter()
        .position(|a| a.write)
        .unwrap_or(samples.len());
    PageSets {
        per_mem: window(samples),
        per_store: window(&samples[first_store..]),
    }
}
