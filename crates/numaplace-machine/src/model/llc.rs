//! M2: the last-level cache split among the threads that run at the same
//! time, per co-runner combination, by water-filling; and the uncore
//! requests and LLC misses per instruction a share gives a thread.

use super::*;

/// Splits `size` in proportion to the weights, no item getting more than
/// its cap, what a capped item leaves going to the others; returns the
/// first item's part.
#[cfg(test)]
pub(super) fn water_fill(items: &[(f64, f64)], size: f64) -> f64 {
    water_fill_in(items, size, &mut Vec::new())
}

/// [`water_fill`] with a scratch buffer (M2 calls it once per co-runner
/// combination).
pub(super) fn water_fill_in(items: &[(f64, f64)], size: f64, open: &mut Vec<usize>) -> f64 {
    open.clear();
    open.extend(0..items.len());
    let mut left = size;
    loop {
        let total: f64 = open.iter().map(|&k| items[k].0).sum();
        if total <= 0.0 {
            return items[0].1.min(left.max(0.0));
        }
        let mut capped = false;
        let mut first = None;
        open.retain(|&k| {
            let want = left * items[k].0 / total;
            if want >= items[k].1 {
                left -= items[k].1;
                capped = true;
                if k == 0 {
                    first = Some(items[0].1);
                }
                false
            } else {
                true
            }
        });
        if let Some(x) = first {
            return x;
        }
        if !capped {
            return left * items[0].0 / total;
        }
    }
}

/// [`water_fill_in`] for every item at once: `out[k]` gets item `k`'s
/// part. Items capped in a pass are capped together (water_fill_in caps
/// them one after the other within a pass); both end at the one
/// water-filling of the items, up to rounding.
pub(super) fn water_fill_all(
    items: &[(f64, f64)],
    size: f64,
    open: &mut Vec<usize>,
    out: &mut Vec<f64>,
) {
    out.clear();
    out.resize(items.len(), 0.0);
    open.clear();
    open.extend(0..items.len());
    let mut left = size;
    loop {
        let total: f64 = open.iter().map(|&k| items[k].0).sum();
        if total <= 0.0 {
            for &k in open.iter() {
                out[k] = items[k].1.min(left.max(0.0));
            }
            return;
        }
        let mut capped = false;
        let before = left;
        open.retain(|&k| {
            let want = before * items[k].0 / total;
            if want >= items[k].1 {
                left -= items[k].1;
                out[k] = items[k].1;
                capped = true;
                false
            } else {
                true
            }
        });
        if !capped {
            for &k in open.iter() {
                out[k] = left * items[k].0 / total;
            }
            return;
        }
    }
}

/// Most co-runner combinations M2 enumerates for one thread (the product,
/// over the other CPUs of its LLC, of the threads time-sharing each, an
/// idle slot counted as one). Beyond it the thread competes with each
/// other CPU's time-share-weighted mix instead, one split: the cost stays
/// bounded on heavily oversubscribed machines, where each combination
/// weighs little anyway.
pub const MAX_CORUN_COMBINATIONS: usize = 64;

/// One CPU's slots in M2's co-runner combinations: `slots[lo..hi]`, and
/// the CPU as one time-share-weighted mix (access rate, working set).
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuSlots {
    cpu: usize,
    lo: usize,
    hi: usize,
    mix: (f64, f64),
}

/// Buffers of M2, kept between steps.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    members: Vec<usize>,
    slots: Vec<(Option<usize>, f64)>,
    per_cpu: Vec<CpuSlots>,
    items: Vec<(f64, f64)>,
    open: Vec<usize>,
    pick: Vec<usize>,
    parts: Vec<f64>,
}

/// One co-runner combination of a thread (M2): the fraction of its
/// running time it spends in it, and its LLC share and misses per
/// instruction there.
#[derive(Debug, Clone, Copy)]
pub(super) struct Corun {
    pub(super) p: f64,
    pub(super) share: f64,
    pub(super) mu: f64,
}

impl Solver {
    /// Uncore requests per instruction of `r` (M2; they do not depend on
    /// its LLC share).
    pub(super) fn uncore_per_instr(&self, r: &Runner<'_>) -> f64 {
        let m = r.model;
        match m.pattern {
            Pattern::Uniform => {
                let l2 = self.l2_bytes[self.cpu_core[r.cpu]];
                m.uncore_pki / 1000.0 * (1.0 - (l2 / m.working_set as f64).min(1.0))
            }
            Pattern::PowerLaw { .. } => m.uncore_pki / 1000.0,
        }
    }

    /// Uncore requests and LLC misses per instruction of `r` with an LLC
    /// share of `c` bytes (M2).
    pub(super) fn misses(&self, r: &Runner<'_>, c: f64) -> (f64, f64) {
        let m = r.model;
        let ws = m.working_set as f64;
        match m.pattern {
            Pattern::Uniform => {
                let l2 = self.l2_bytes[self.cpu_core[r.cpu]];
                let h2 = (l2 / ws).min(1.0);
                let hl = (c / ws).min(1.0).max(h2);
                (
                    m.uncore_pki / 1000.0 * (1.0 - h2),
                    m.uncore_pki / 1000.0 * (1.0 - hl),
                )
            }
            Pattern::PowerLaw { llc_mpki, alpha } => {
                let a = m.uncore_pki / 1000.0;
                let llc = self.llc_bytes[self.cpu_llc[r.cpu]];
                let mu = if llc < LINE {
                    // No last-level cache (or none the topology
                    // describes): every uncore request goes to memory.
                    a
                } else {
                    let full = llc.min(ws).max(LINE);
                    let c = c.min(ws).max(LINE);
                    (llc_mpki / 1000.0 * (c / full).powf(-alpha)).min(a)
                };
                (a, mu)
            }
        }
    }

    /// M2: the LLC split among the threads that run at the same time.
    /// Threads time-sharing one CPU never run together: while a thread
    /// runs, it co-runs with one thread (or none) from each other CPU of
    /// its LLC, a combination that lasts, of its running time, the product
    /// of those threads' CPU shares (an idle remainder counting as a slot
    /// without a thread). For each combination the LLC is water-filled
    /// among the thread and its co-runners (their access rates and working
    /// sets while running) and gives a share and the misses per
    /// instruction there; appends them to `corun`, each runner of the LLC
    /// getting its range in `ranges`. The miss curve and the split are not
    /// linear, so the combinations are kept apart rather than mixed: a
    /// thread that co-runs half of the time with a cache hog suffers more
    /// than it would next to half a hog. Beyond
    /// [`MAX_CORUN_COMBINATIONS`] a thread competes with each other CPU's
    /// time-share-weighted mix of threads instead (one combination).
    pub(super) fn split_llc(
        &self,
        llc: usize,
        runners: &[Runner<'_>],
        ips: &[f64],
        sc: &mut Scratch,
        corun: &mut Vec<Corun>,
        ranges: &mut [(usize, usize)],
    ) {
        let Scratch {
            members,
            slots,
            per_cpu,
            items,
            open,
            pick,
            parts,
        } = sc;
        // The LLC's runners by CPU (then index: a fixed order).
        members.clear();
        members.extend((0..runners.len()).filter(|&i| self.cpu_llc[runners[i].cpu] == llc));
        if members.is_empty() {
            return;
        }
        members.sort_by_key(|&i| (runners[i].cpu, i));
        let size = self.llc_bytes[llc];
        // Access rate to the LLC while running: the uncore requests it
        // would make (its working set decides whether it needs the LLC).
        let rate = |i: usize| {
            let r = &runners[i];
            (ips[i] / r.share.max(1e-9) * r.model.uncore_pki / 1000.0).max(1e-9)
        };
        let item = |i: usize| (rate(i), runners[i].model.working_set as f64);
        if !self.constants.mechanisms.cache_sharing {
            for &i in members.iter() {
                let c = item(i).1.min(size);
                ranges[i] = (corun.len(), corun.len() + 1);
                let mu = self.misses(&runners[i], c).1;
                corun.push(Corun {
                    p: 1.0,
                    share: c,
                    mu,
                });
            }
            return;
        }
        cpu_slots(members, runners, rate, slots, per_cpu);
        if self.split_once && slots.len() == members.len() && per_cpu.len() == members.len() {
            // One thread per CPU, none idle: one combination, everybody's.
            items.clear();
            items.extend(members.iter().map(|&i| item(i)));
            water_fill_all(items, size, open, parts);
            for (k, &i) in members.iter().enumerate() {
                let c = parts[k];
                let mu = self.misses(&runners[i], c).1;
                ranges[i] = (corun.len(), corun.len() + 1);
                corun.push(Corun {
                    p: 1.0,
                    share: c,
                    mu,
                });
            }
            return;
        }
        for &i in members.iter() {
            let own = runners[i].cpu;
            let others = || per_cpu.iter().filter(move |s| s.cpu != own);
            let combinations = others()
                .try_fold(1usize, |n, s| n.checked_mul(s.hi - s.lo))
                .unwrap_or(usize::MAX);
            let lo = corun.len();
            if combinations > MAX_CORUN_COMBINATIONS {
                items.clear();
                items.push(item(i));
                items.extend(others().map(|s| s.mix));
                let c = water_fill_in(items, size, open);
                let mu = self.misses(&runners[i], c).1;
                corun.push(Corun {
                    p: 1.0,
                    share: c,
                    mu,
                });
                ranges[i] = (lo, lo + 1);
                continue;
            }
            // Every combination, in a fixed (mixed-radix) order over the
            // other CPUs' slots (the own CPU's entry of `pick` unused).
            pick.clear();
            pick.extend(per_cpu.iter().map(|s| s.lo));
            loop {
                items.clear();
                items.push(item(i));
                let mut p = 1.0;
                for (s, &at) in per_cpu.iter().zip(pick.iter()) {
                    if s.cpu == own {
                        continue;
                    }
                    let (j, f) = slots[at];
                    p *= f;
                    if let Some(j) = j {
                        items.push(item(j));
                    }
                }
                let c = water_fill_in(items, size, open);
                let mu = self.misses(&runners[i], c).1;
                corun.push(Corun { p, share: c, mu });
                if !next_combination(pick, per_cpu, own) {
                    break;
                }
            }
            ranges[i] = (lo, corun.len());
        }
    }
}

/// Per CPU of an LLC's runners `members` (sorted by CPU): its slots (a
/// thread, or `None` for idle time) with the fraction of time each runs,
/// and its time-share-weighted mix, each thread accessing the LLC at
/// `rate` while it runs.
fn cpu_slots(
    members: &[usize],
    runners: &[Runner<'_>],
    rate: impl Fn(usize) -> f64,
    slots: &mut Vec<(Option<usize>, f64)>,
    per_cpu: &mut Vec<CpuSlots>,
) {
    slots.clear();
    per_cpu.clear();
    let mut k = 0;
    while k < members.len() {
        let c = runners[members[k]].cpu;
        let end = k + members[k..]
            .iter()
            .take_while(|&&j| runners[j].cpu == c)
            .count();
        let on = &members[k..end];
        let busy: f64 = on.iter().map(|&j| runners[j].share).sum();
        let scale = busy.max(1.0);
        let start = slots.len();
        let (mut w, mut cap) = (0.0, 0.0);
        for &j in on {
            slots.push((Some(j), runners[j].share / scale));
            w += runners[j].share * rate(j);
            cap += runners[j].share * runners[j].model.working_set as f64;
        }
        if busy < 1.0 - 1e-9 {
            slots.push((None, 1.0 - busy));
        }
        per_cpu.push(CpuSlots {
            cpu: c,
            lo: start,
            hi: slots.len(),
            mix: (w, cap),
        });
        k = end;
    }
}

/// The next co-runner combination after `pick` (a slot per CPU, counted
/// in mixed radix over the CPUs other than `own`); `false` once every
/// combination has been.
fn next_combination(pick: &mut [usize], per_cpu: &[CpuSlots], own: usize) -> bool {
    let mut d = 0;
    while d < pick.len() {
        if per_cpu[d].cpu != own {
            pick[d] += 1;
            if pick[d] < per_cpu[d].hi {
                break;
            }
            pick[d] = per_cpu[d].lo;
        }
        d += 1;
    }
    d != pick.len()
}
