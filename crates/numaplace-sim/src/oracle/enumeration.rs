//! The exact enumeration: every placement up to symmetry, each orbit once
//! (the canonical form of the module docs).

use super::*;

/// The exact enumeration's depth-first state.
///
/// The canonical order of a unit's contents is the sequence of its leaves'
/// contents (0 empty, r + 1 a thread of refined class r), compared
/// lexicographically; interchangeable units are alike position by
/// position, so a unit is compared with its previous interchangeable
/// sibling leaf by leaf, as it is filled, and a branch is cut at the first
/// leaf that makes it greater.
pub(super) struct Enumeration<'a, 'v> {
    pub(super) p: &'a Prepared,
    /// Per leaf position: 0 empty, r + 1 a thread of refined class r.
    pub(super) content: Vec<u32>,
    /// Threads in each unit so far.
    pub(super) count: Vec<u32>,
    /// Per leaf position and level (leaf, core, slot, package): whether the
    /// unit's contents up to this leaf equal its previous interchangeable
    /// sibling's.
    pub(super) equal: Vec<[bool; 4]>,
    pub(super) remaining: Vec<usize>,
    pub(super) total: usize,
    pub(super) placement: Vec<u32>,
    pub(super) found: usize,
    pub(super) limit: usize,
    /// Steps (CPUs tried) left; at 0 the enumeration stops unfinished.
    pub(super) work: usize,
    pub(super) visit: &'v mut dyn FnMut(&[u32]) -> bool,
}

impl Enumeration<'_, '_> {
    /// Fills leaf positions from `i`; false to stop everything.
    pub(super) fn fill(&mut self, i: usize) -> bool {
        let p = self.p;
        let m = p.leaves.len();
        if self.work == 0 {
            return false;
        }
        self.work -= 1;
        if i == m {
            return self.total > 0 || self.emit();
        }
        // Room left for the remaining threads: with one per core, the
        // cores after this position and this one if still empty.
        let core = p.chain[i][1];
        let room = if p.opc {
            p.cores_from[i + 1] + usize::from(self.count[core] == 0)
        } else {
            m - i
        };
        if self.total > room {
            return true;
        }
        let cpu = p.leaves[i];
        // A thread of each refined class with threads left, highest first,
        // then none.
        let open = !(p.opc && self.count[core] > 0);
        for x in (0..=self.remaining.len()).rev() {
            if x > 0 {
                let r = x - 1;
                if !open || self.remaining[r] == 0 || !p.rc_allowed[r][cpu] {
                    continue;
                }
            }
            if !self.ordered(i, x as u32) {
                continue;
            }
            self.content[i] = x as u32;
            let go_on = if x > 0 {
                let r = x - 1;
                self.remaining[r] -= 1;
                self.total -= 1;
                for &u in &p.chain[i] {
                    self.count[u] += 1;
                }
                let go_on = self.fill(i + 1);
                for &u in &p.chain[i] {
                    self.count[u] -= 1;
                }
                self.total += 1;
                self.remaining[r] += 1;
                go_on
            } else {
                self.fill(i + 1)
            };
            self.content[i] = 0;
            if !go_on {
                return false;
            }
        }
        true
    }

    /// Whether content `x` at leaf position `i` keeps every unit holding it
    /// no greater than its previous interchangeable sibling; records which
    /// stay equal so far.
    pub(super) fn ordered(&mut self, i: usize, x: u32) -> bool {
        let p = self.p;
        let mut eq = [false; 4];
        for (level, &u) in p.chain[i].iter().enumerate() {
            let unit = &p.units[u];
            let v = unit.prev_equiv;
            if v == NONE {
                continue;
            }
            if unit.start == i || self.equal[i - 1][level] {
                let y = self.content[i - unit.start + p.units[v].start];
                if x > y {
                    return false;
                }
                eq[level] = x == y;
            }
        }
        self.equal[i] = eq;
        true
    }

    pub(super) fn emit(&mut self) -> bool {
        let p = self.p;
        // Each refined class's CPUs, increasing, to its threads in order.
        let mut cpus: Vec<Vec<usize>> = vec![Vec::new(); p.rc_threads.len()];
        for (i, &c) in self.content.iter().enumerate() {
            if c > 0 {
                cpus[c as usize - 1].push(p.leaves[i]);
            }
        }
        for (r, mut cs) in cpus.into_iter().enumerate() {
            cs.sort_unstable();
            for (&t, c) in p.rc_threads[r].iter().zip(cs) {
                self.placement[t] = c as u32;
            }
        }
        self.found += 1;
        (self.visit)(&self.placement) && self.found < self.limit
    }
}
