//! Per-thread page sets for \[Bae12\] §4.2-4.3:
//! what a VMM's accessed / dirty bits would show for each vcore over a
//! window of memory operations and a window of stores, drawn from the
//! thread model.
//!
//! The model's references are the accesses that reach the LLC (uncore
//! requests and shared writes); L1 / L2 hits touch pages these already
//! touch. A window of `window_refs` references is scanned twice (§4.3's
//! Scan runs at least twice; the sets are the intersection, the pages
//! "consistently" touched). A thread's reference goes to its application's
//! shared area with probability shared_writes / (shared_writes + uncore)
//! (as the signature model feeds the caches, `sampling.rs`) and is then a
//! write; otherwise to a private page, by the thread's pattern (uniform,
//! or the power law with page ranks scattered by a hash), a store with
//! probability [`PRIVATE_STORE_SHARE`]. The store window spans
//! `window_refs` stores, so more references. A page of popularity m is in
//! a scan of n references with probability 1 − e^(−n·m); each page is
//! drawn independently, so only the counts of private pages matter and
//! shared pages are the same numbers for every thread.

use super::*;
use crate::workload::Pattern;
use numaplace_model::{PageSets, PageWindow};

/// Share of private references that are stores (about a third of memory
/// operations in SPEC-like code; a modelling choice, not from a seed).
pub const PRIVATE_STORE_SHARE: f64 = 0.3;

/// How the page model is asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageSetConfig {
    /// References per window (the PMU trigger count of §4.2).
    pub window_refs: f64,
}

impl Default for PageSetConfig {
    fn default() -> Self {
        PageSetConfig {
            window_refs: 65536.0,
        }
    }
}

/// Popularity of each of `pages` pages (summing to 1), page order.
fn popularity(pattern: Pattern, pages: u64) -> Vec<f64> {
    let n = pages.max(1);
    match pattern {
        Pattern::Uniform => vec![1.0 / n as f64; n as usize],
        Pattern::PowerLaw { alpha, .. } => {
            let a = 1.0 + alpha.max(0.05);
            let mut m = vec![0.0; n as usize];
            let mut total = 0.0;
            for r in 0..n {
                let w = ((r + 1) as f64).powf(-a);
                let page = r.wrapping_mul(0x9e37_79b9_7f4a_7c15) % n;
                m[page as usize] += w;
                total += w;
            }
            m.iter_mut().for_each(|v| *v /= total);
            m
        }
    }
}

/// Pages drawn from `pages` pages of popularity `pop` (None: uniform)
/// consistently touched in two scans of `refs / 2` references each, and
/// those among them written with probability `write_share` per reference.
fn draw(
    rng: &mut Rng,
    first_page: u64,
    pages: u64,
    pop: Option<&[f64]>,
    refs: f64,
    write_share: f64,
    out: &mut PageWindow,
) {
    let half = refs / 2.0;
    for i in 0..pages {
        let m = pop.map_or(1.0 / pages.max(1) as f64, |p| p[i as usize]);
        let p = 1.0 - (-half * m).exp();
        if rng.unit() < p * p {
            out.accessed.push(first_page + i);
            let pw = 1.0 - (-half * m * write_share).exp();
            if write_share > 0.0 && rng.unit() < pw * pw {
                out.written.push(first_page + i);
            }
        }
    }
}

impl World {
    /// Report per-thread page sets in every snapshot.
    pub fn enable_page_sets(&mut self, config: PageSetConfig) {
        self.page_sets = Some(config);
    }

    pub(super) fn page_set_records(&mut self) -> BTreeMap<i32, PageSets> {
        let mut out = BTreeMap::new();
        let Some(cfg) = self.page_sets else {
            return out;
        };
        let page = PAGE as u64;
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if !th.alive || th.done {
                continue;
            }
            let spec = &self.workload.apps[th.app];
            let m = th.model(spec, &self.spin);
            let shared_pages = spec.shared_bytes / page;
            let q = if shared_pages > 0 && th.index < spec.sharers && m.shared_writes_pki > 0.0 {
                m.shared_writes_pki / (m.shared_writes_pki + m.uncore_pki).max(1e-9)
            } else {
                0.0
            };
            let private_pages = (m.working_set / page).max(1);
            let pop = match m.pattern {
                Pattern::Uniform => None,
                p => Some(popularity(p, private_pages)),
            };
            let first_private = (PRIVATE_BASE + u64::from(th.index) * PRIVATE_STRIDE) / page;
            let store_share = (1.0 - q) * PRIVATE_STORE_SHARE + q;
            let rng = &mut self.page_rng;
            let mut sets = PageSets::default();
            for (refs, w) in [
                (cfg.window_refs, &mut sets.per_mem),
                (cfg.window_refs / store_share.max(1e-6), &mut sets.per_store),
            ] {
                draw(
                    rng,
                    SHARED_BASE / page,
                    shared_pages,
                    None,
                    refs * q,
                    1.0,
                    w,
                );
                let private_refs = refs * (1.0 - q);
                draw(
                    rng,
                    first_private,
                    private_pages,
                    pop.as_deref(),
                    private_refs,
                    PRIVATE_STORE_SHARE,
                    w,
                );
            }
            out.insert(th.tid, sets);
        }
        out
    }
}
