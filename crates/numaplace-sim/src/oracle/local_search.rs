//! The local search for problems too large to enumerate: first-improvement
//! hill climbing from spread, packed and random starts, with swaps and moves
//! to free CPUs that are not equivalent to one already tried.

use super::*;

/// What the local search found.
pub(super) struct LocalSearch {
    pub(super) placement: Vec<u32>,
    pub(super) cost: f64,
    pub(super) evaluated: usize,
    pub(super) starts: usize,
}

impl LocalSearch {
    pub(super) fn run(
        p: &Prepared,
        cost: &mut dyn FnMut(&[u32], f64) -> f64,
        budget: usize,
        seed: u64,
    ) -> LocalSearch {
        let starts = Self::starts(p, seed);
        let mut best: Option<(Vec<u32>, f64)> = None;
        let mut used = 0;
        let mut ran = 0;
        for (k, start) in starts.iter().enumerate() {
            let left = budget - used;
            if left == 0 {
                break;
            }
            let share = left / (starts.len() - k);
            let share = share.max(1);
            let (pl, c, e) = climb(p, start.clone(), cost, share);
            used += e;
            ran += 1;
            if best.as_ref().is_none_or(|(_, b)| c < *b) {
                best = Some((pl, c));
            }
        }
        let (placement, cost) = best.expect("the budget allows one evaluation at least");
        LocalSearch {
            placement,
            cost,
            evaluated: used,
            starts: ran,
        }
    }

    /// Spread, packed, and random placements.
    pub(super) fn starts(p: &Prepared, seed: u64) -> Vec<Vec<u32>> {
        let order: Vec<usize> = (0..p.n).collect();
        let mut out = Vec::new();
        // Spread: thread k prefers LLC domain k (round-robin, alternating
        // packages), then the next ones; within a domain the first sibling
        // of every core before the second ones.
        let by_llc: Vec<Vec<usize>> = (p.spread_llcs.iter())
            .map(|&l| {
                let mut cpus: Vec<usize> = (0..p.ncpu).filter(|&c| p.cpu_llc[c] == l).collect();
                cpus.sort_unstable_by_key(|&c| (p.cpu_sibling[c], p.cpu_pos[c]));
                cpus
            })
            .collect();
        let nl = by_llc.len().max(1);
        let spread: Vec<Vec<usize>> = (0..p.n)
            .map(|k| {
                (0..by_llc.len())
                    .flat_map(|j| by_llc[(k + j) % nl].iter().copied())
                    .collect()
            })
            .collect();
        // Packed: CPUs in tree order (one per core skips the siblings).
        let packed: Vec<Vec<usize>> = vec![p.leaves.clone(); p.n];
        for prefs in [spread, packed] {
            if let Some(pl) = p.assign(&order, &prefs) {
                out.push(pl);
            }
        }
        let mut rng = crate::rng::Rng::new(seed);
        for _ in 0..RANDOM_STARTS {
            let mut order = order.clone();
            rng.shuffle(&mut order);
            let prefs: Vec<Vec<usize>> = (0..p.n)
                .map(|_| {
                    let mut v: Vec<usize> = (0..p.ncpu).collect();
                    rng.shuffle(&mut v);
                    v
                })
                .collect();
            if let Some(pl) = p.assign(&order, &prefs) {
                out.push(pl);
            }
        }
        out
    }
}

/// Hill climbing by first improvement from `pos`, at most `share`
/// evaluations: returns the local optimum, its cost and the evaluations.
///
/// Threads are scanned in turn; a thread's neighbourhood is its moves to
/// free CPUs (one per symmetry class, see [`Prepared::fresh_target`]) and
/// its swaps with later threads of other classes. An improvement is taken
/// at once and the same thread scanned again; the climb ends when a full
/// turn of threads brings none.
pub(super) fn climb(
    p: &Prepared,
    mut pos: Vec<u32>,
    cost: &mut dyn FnMut(&[u32], f64) -> f64,
    share: usize,
) -> (Vec<u32>, f64, usize) {
    let mut evals = 1;
    let mut cur = sane(cost(&pos, f64::INFINITY));
    let n = p.n;
    let mut occupied = vec![false; p.ncpu];
    let mut count = vec![0u32; p.units.len()];
    for &c in &pos {
        occupied[c as usize] = true;
        for &u in &p.chain[p.cpu_pos[c as usize]] {
            count[u] += 1;
        }
    }
    let better = |c: f64, cur: f64| c < cur - 1e-12 * cur.abs().max(1.0);
    let (mut t, mut quiet) = (0, 0);
    'climb: while quiet < n {
        let mut improved = false;
        let from = pos[t] as usize;
        for c in 0..p.ncpu {
            if occupied[c] || !p.allowed[t][c] || !p.fresh_target(from, c, &count) {
                continue;
            }
            if evals >= share {
                break 'climb;
            }
            pos[t] = c as u32;
            let v = sane(cost(&pos, cur));
            evals += 1;
            if better(v, cur) {
                occupied[from] = false;
                occupied[c] = true;
                for &u in &p.chain[p.cpu_pos[from]] {
                    count[u] -= 1;
                }
                for &u in &p.chain[p.cpu_pos[c]] {
                    count[u] += 1;
                }
                cur = v;
                improved = true;
                break;
            }
            pos[t] = from as u32;
        }
        if !improved {
            for j in t + 1..n {
                let (a, b) = (pos[t] as usize, pos[j] as usize);
                if p.classes[j] == p.classes[t]
                    || p.cpu_core[a] == p.cpu_core[b]
                    || !p.allowed[t][b]
                    || !p.allowed[j][a]
                {
                    continue; // the same placement up to symmetry, or not allowed
                }
                if evals >= share {
                    break 'climb;
                }
                pos.swap(t, j);
                let v = sane(cost(&pos, cur));
                evals += 1;
                if better(v, cur) {
                    cur = v;
                    improved = true;
                    break;
                }
                pos.swap(t, j);
            }
        }
        if improved {
            quiet = 0;
        } else {
            quiet += 1;
            t = (t + 1) % n;
        }
    }
    (pos, cur, evals)
}

impl Prepared {
    /// Whether moving the thread on CPU `from` to the free CPU `to` gives a
    /// placement not equivalent to the current one or to the move to an
    /// earlier free CPU: not a sibling of `from`; on a core with no thread
    /// when one per core is in force; the first free CPU of its kind in
    /// its core; if its core (package) is empty, the first empty core
    /// (package) of its kind, and not one of the kind `from` is alone in.
    pub(super) fn fresh_target(&self, from: usize, to: usize, count: &[u32]) -> bool {
        if self.cpu_core[from] == self.cpu_core[to] {
            return false;
        }
        let f = &self.chain[self.cpu_pos[from]];
        let [leaf, core, _, pkg] = self.chain[self.cpu_pos[to]];
        if self.opc && count[core] > 0 {
            return false;
        }
        // Threads in unit u once the thread has left `from`.
        let left = |u: usize| count[u] - u32::from(f.contains(&u));
        let earlier_empty = |mut u: usize, full: u32| {
            while self.units[u].prev_equiv != NONE {
                u = self.units[u].prev_equiv;
                if left(u) < full {
                    return true;
                }
            }
            false
        };
        if earlier_empty(leaf, 1) {
            return false;
        }
        for (u, fu) in [(core, f[1]), (pkg, f[3])] {
            if left(u) == 0 {
                if earlier_empty(u, 1) {
                    return false;
                }
                let alike = self.units[u].structure == self.units[fu].structure
                    && self.units[u].parent == self.units[fu].parent;
                if alike && left(fu) == 0 {
                    return false; // the same as staying
                }
            }
        }
        true
    }
}
