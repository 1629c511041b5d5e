//! The problem laid out for the search: thread classes refined by their
//! allowed CPUs, the machine as a tree of units (packages, slots of one
//! LLC and node, cores, CPUs) with each unit's interchangeable
//! predecessor, and a feasible assignment by augmenting paths.

use super::*;

pub(super) const NONE: usize = usize::MAX;

/// A node of the machine's tree: package, slot (LLC × node within a
/// package), core or CPU.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    /// Leaf positions `start..end` in tree order.
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) parent: usize,
    pub(super) children: Vec<usize>,
    /// Interned structural signature: units of one parent with equal
    /// structure are interchangeable.
    pub(super) structure: u32,
    /// The previous sibling of the same structure.
    pub(super) prev_equiv: usize,
}

/// The problem, validated and laid out for the enumeration and the search.
pub(super) struct Prepared {
    pub(super) n: usize,
    pub(super) ncpu: usize,
    /// One thread per core in force.
    pub(super) opc: bool,
    /// `one_per_core` asked but impossible with the allowed CPUs.
    pub(super) opc_dropped: bool,
    pub(super) classes: Vec<u32>,
    /// Per refined class its threads, increasing.
    pub(super) rc_threads: Vec<Vec<usize>>,
    /// Per thread, per CPU: may it go there.
    pub(super) allowed: Vec<Vec<bool>>,
    /// Per refined class, per CPU.
    pub(super) rc_allowed: Vec<Vec<bool>>,
    pub(super) cpu_core: Vec<usize>,
    pub(super) cpu_llc: Vec<usize>,
    /// Index of each CPU among its core's CPUs.
    pub(super) cpu_sibling: Vec<usize>,
    pub(super) units: Vec<Unit>,
    /// CPU (dense id) at each leaf position.
    pub(super) leaves: Vec<usize>,
    /// Leaf position of each CPU.
    pub(super) cpu_pos: Vec<usize>,
    /// Per leaf position, the units holding it: leaf, core, slot, package.
    pub(super) chain: Vec<[usize; 4]>,
    /// Core units starting at or after each leaf position.
    pub(super) cores_from: Vec<usize>,
    /// LLC order of the spread start: by index within the package, then
    /// package.
    pub(super) spread_llcs: Vec<usize>,
}

impl Prepared {
    pub(super) fn new(p: &OracleProblem) -> Result<Prepared, OracleError> {
        let t = p.topology;
        let n = p.classes.len();
        let ncpu = t.cpus().len();
        if p.allowed.len() != n {
            return Err(OracleError::AllowedLength {
                threads: n,
                allowed: p.allowed.len(),
            });
        }
        if n > ncpu {
            return Err(OracleError::TooManyThreads {
                threads: n,
                cpus: ncpu,
            });
        }
        let classes = RefinedClasses::new(p, ncpu);
        let cpu_color = cpu_colors(t, &classes.sets);
        let cpu_core: Vec<usize> = t.cpus().iter().map(|c| c.core).collect();
        let cpu_llc: Vec<usize> = t.cpus().iter().map(|c| c.llc).collect();
        let cpu_sibling: Vec<usize> = (t.cpus().iter())
            .map(|c| {
                (t.cores()[c.core].cpus.iter())
                    .position(|&x| x == c.id)
                    .unwrap_or(0)
            })
            .collect();
        let (units, leaves, spread_llcs) = unit_tree(p, &cpu_color);
        let (cpu_pos, chain, cores_from) = leaf_chains(&units, &leaves, ncpu);
        let mut prep = Prepared {
            n,
            ncpu,
            opc: false,
            opc_dropped: false,
            classes: p.classes.clone(),
            rc_threads: classes.rc_threads,
            allowed: classes.allowed,
            rc_allowed: classes.rc_allowed,
            cpu_core,
            cpu_llc,
            cpu_sibling,
            units,
            leaves,
            cpu_pos,
            chain,
            cores_from,
            spread_llcs,
        };
        let order: Vec<usize> = (0..n).collect();
        let prefs: Vec<Vec<usize>> = vec![(0..ncpu).collect(); n];
        if p.one_per_core && n <= t.cores().len() {
            prep.opc = true;
            if prep.assign(&order, &prefs).is_none() {
                prep.opc = false;
                prep.opc_dropped = true;
            }
        }
        if prep.assign(&order, &prefs).is_none() {
            return Err(OracleError::Infeasible);
        }
        Ok(prep)
    }

    /// Calls `visit` on every placement up to symmetry until it returns
    /// false or `limit` were visited; returns how many were.
    pub(super) fn enumerate(&self, visit: &mut dyn FnMut(&[u32]) -> bool, limit: usize) -> usize {
        self.enumerate_within(visit, limit, usize::MAX).0
    }

    /// [`Prepared::enumerate`] within `work` steps (CPUs tried); also
    /// whether it got to the end (or to `limit`) within them.
    pub(super) fn enumerate_within(
        &self,
        visit: &mut dyn FnMut(&[u32]) -> bool,
        limit: usize,
        work: usize,
    ) -> (usize, bool) {
        let mut e = Enumeration {
            work,
            p: self,
            content: vec![0; self.leaves.len()],
            count: vec![0; self.units.len()],
            equal: vec![[false; 4]; self.leaves.len()],
            remaining: self.rc_threads.iter().map(Vec::len).collect(),
            total: self.n,
            placement: vec![0; self.n],
            found: 0,
            limit,
            visit,
        };
        if limit > 0 {
            e.fill(0);
        }
        (e.found, e.work > 0)
    }

    /// A placement taking, for each thread in `order`, the first free CPU in
    /// its preference list, or if that fails any placement (augmenting
    /// paths, preferences first); `None` when there is none.
    pub(super) fn assign(&self, order: &[usize], prefs: &[Vec<usize>]) -> Option<Vec<u32>> {
        // A "slot" is what one thread takes: a core with one per core, else a CPU.
        let slot = |cpu: usize| if self.opc { self.cpu_core[cpu] } else { cpu };
        let nslots = self
            .cpu_core
            .iter()
            .max()
            .map_or(0, |m| m + 1)
            .max(self.ncpu);
        let mut owner: Vec<usize> = vec![NONE; nslots];
        let mut pos: Vec<usize> = vec![NONE; self.n];
        let mut greedy_ok = true;
        for &t in order {
            match (prefs[t].iter()).find(|&&c| self.allowed[t][c] && owner[slot(c)] == NONE) {
                Some(&c) => {
                    owner[slot(c)] = t;
                    pos[t] = c;
                }
                None => {
                    greedy_ok = false;
                    break;
                }
            }
        }
        if !greedy_ok {
            owner.iter_mut().for_each(|o| *o = NONE);
            pos.iter_mut().for_each(|p| *p = NONE);
            fn augment(
                t: usize,
                prep: &Prepared,
                prefs: &[Vec<usize>],
                slot: &dyn Fn(usize) -> usize,
                seen: &mut [bool],
                owner: &mut [usize],
                pos: &mut [usize],
            ) -> bool {
                for &c in &prefs[t] {
                    let s = slot(c);
                    if !prep.allowed[t][c] || seen[s] {
                        continue;
                    }
                    seen[s] = true;
                    if owner[s] == NONE || augment(owner[s], prep, prefs, slot, seen, owner, pos) {
                        owner[s] = t;
                        pos[t] = c;
                        return true;
                    }
                }
                false
            }
            for &t in order {
                let mut seen = vec![false; nslots];
                if !augment(t, self, prefs, &slot, &mut seen, &mut owner, &mut pos) {
                    return None;
                }
            }
        }
        Some(pos.iter().map(|&c| c as u32).collect())
    }
}

/// Threads refined by class and allowed CPUs: the distinct allowed sets,
/// each refined class's threads and CPUs, each thread's CPUs.
struct RefinedClasses<'a> {
    sets: Vec<&'a CpuSet>,
    rc_threads: Vec<Vec<usize>>,
    rc_allowed: Vec<Vec<bool>>,
    allowed: Vec<Vec<bool>>,
}

impl<'a> RefinedClasses<'a> {
    fn new(p: &'a OracleProblem<'_>, ncpu: usize) -> RefinedClasses<'a> {
        let n = p.classes.len();
        let mut sets: Vec<&CpuSet> = Vec::new();
        let mut thread_set: Vec<usize> = Vec::with_capacity(n);
        for a in &p.allowed {
            thread_set.push(match a {
                None => NONE,
                Some(s) => match sets.iter().position(|x| *x == s) {
                    Some(i) => i,
                    None => {
                        sets.push(s);
                        sets.len() - 1
                    }
                },
            });
        }
        let allowed_of = |set: usize| -> Vec<bool> {
            (0..ncpu)
                .map(|c| set == NONE || sets[set].contains(c as u32))
                .collect()
        };
        let mut rc_key: Vec<(u32, usize)> = Vec::new();
        let mut thread_rc = Vec::with_capacity(n);
        let mut rc_threads: Vec<Vec<usize>> = Vec::new();
        let mut rc_allowed = Vec::new();
        for (i, key) in p.classes.iter().copied().zip(thread_set).enumerate() {
            let r = match rc_key.iter().position(|k| *k == key) {
                Some(r) => r,
                None => {
                    rc_key.push(key);
                    rc_threads.push(Vec::new());
                    rc_allowed.push(allowed_of(key.1));
                    rc_key.len() - 1
                }
            };
            thread_rc.push(r);
            rc_threads[r].push(i);
        }
        let allowed: Vec<Vec<bool>> = thread_rc.iter().map(|&r| rc_allowed[r].clone()).collect();

        RefinedClasses {
            sets,
            rc_threads,
            rc_allowed,
            allowed,
        }
    }
}

/// Each CPU's color: its kind and the allowed sets holding it (CPUs of
/// one color are interchangeable for every thread).
fn cpu_colors(t: &Topology, sets: &[&CpuSet]) -> Vec<u32> {
    let mut color_ids: HashMap<Vec<u32>, u32> = HashMap::new();
    (t.cpus().iter())
        .map(|c| {
            let mut key = vec![c.kind.map_or(0, |k| k as u32 + 1)];
            key.extend(
                (0..sets.len())
                    .filter(|&s| sets[s].contains(c.id as u32))
                    .map(|s| s as u32),
            );
            let next = color_ids.len() as u32;
            *color_ids.entry(key).or_insert(next)
        })
        .collect()
}

/// The tree of units, packages > slots (LLC × node) > cores > CPUs, with
/// its leaves (CPUs in tree order) and the LLC order of the spread start.
fn unit_tree(p: &OracleProblem, cpu_color: &[u32]) -> (Vec<Unit>, Vec<usize>, Vec<usize>) {
    let t = p.topology;
    let mut b = TreeBuilder::default();
    let mut spread_llcs: Vec<(usize, usize, usize)> = Vec::new();
    let mut pkg_units = Vec::new();
    for (pi, pkg) in t.packages().iter().enumerate() {
        let mut cores = pkg.cores.clone();
        cores.sort_unstable();
        if cores.is_empty() {
            continue;
        }
        let mut slots: Vec<((usize, usize), Vec<usize>)> = Vec::new();
        for &c in &cores {
            let core = &t.cores()[c];
            let key = (core.llc, core.node);
            match slots.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(c),
                None => slots.push((key, vec![c])),
            }
        }
        let mut llcs_seen: Vec<usize> = Vec::new();
        for ((llc, _), _) in &slots {
            if !llcs_seen.contains(llc) {
                spread_llcs.push((llcs_seen.len(), pi, *llc));
                llcs_seen.push(*llc);
            }
        }
        let pkg_unit = b.open();
        for (si, (_, slot_cores)) in slots.iter().enumerate() {
            // CPUs of a core, and cores of a slot, in order of their
            // structure: alike units are then alike position by position.
            let mut laid: Vec<(u32, Vec<usize>)> = (slot_cores.iter())
                .map(|&c| {
                    let mut cpus: Vec<(u32, usize)> = (t.cores()[c].cpus.iter())
                        .map(|&cpu| (b.intern(vec![0, cpu_color[cpu]]), cpu))
                        .collect();
                    cpus.sort_unstable();
                    let mut key = vec![1, cpus.len() as u32];
                    key.extend(cpus.iter().map(|&(s, _)| s));
                    (
                        b.intern(key),
                        cpus.into_iter().map(|(_, cpu)| cpu).collect(),
                    )
                })
                .collect();
            laid.sort_by_key(|(s, _)| *s);
            let slot_unit = b.open();
            for (_, cpus) in laid {
                let core_unit = b.open();
                for cpu in cpus {
                    b.leaf(cpu, cpu_color[cpu]);
                }
                b.close(core_unit, vec![1]);
            }
            b.close(slot_unit, vec![2, si as u32]);
        }
        let label = if p.packages_symmetric { 0 } else { pi as u32 };
        b.close(pkg_unit, vec![3, label]);
        pkg_units.push(pkg_unit);
    }
    b.finish_root(&pkg_units);
    spread_llcs.sort_unstable();
    let spread_llcs = spread_llcs.into_iter().map(|(_, _, l)| l).collect();

    let TreeBuilder { units, leaves, .. } = b;
    (units, leaves, spread_llcs)
}

/// Per CPU its leaf position, per leaf the units holding it (leaf, core,
/// slot, package), and the core units starting at or after each leaf.
#[allow(clippy::type_complexity)]
fn leaf_chains(
    units: &[Unit],
    leaves: &[usize],
    ncpu: usize,
) -> (Vec<usize>, Vec<[usize; 4]>, Vec<usize>) {
    let m = leaves.len();
    let mut cpu_pos = vec![NONE; ncpu];
    let mut chain = vec![[NONE; 4]; m];
    for (i, u) in units.iter().enumerate() {
        if u.children.is_empty() && u.start < u.end {
            let core = u.parent;
            let slot = units[core].parent;
            cpu_pos[leaves[u.start]] = u.start;
            chain[u.start] = [i, core, slot, units[slot].parent];
        }
    }
    let mut cores_from = vec![0; m + 1];
    for i in (0..m).rev() {
        let core = chain[i][1];
        cores_from[i] = cores_from[i + 1] + usize::from(units[core].start == i);
    }

    (cpu_pos, chain, cores_from)
}

/// Builds the unit tree depth first.
#[derive(Default)]
pub(super) struct TreeBuilder {
    pub(super) units: Vec<Unit>,
    pub(super) leaves: Vec<usize>,
    pub(super) stack: Vec<usize>,
    pub(super) structures: HashMap<Vec<u32>, u32>,
}

impl TreeBuilder {
    pub(super) fn new_unit(&mut self) -> usize {
        let parent = self.stack.last().copied().unwrap_or(NONE);
        let start = self.leaves.len();
        self.units.push(Unit {
            start,
            end: start,
            parent,
            children: Vec::new(),
            structure: 0,
            prev_equiv: NONE,
        });
        let u = self.units.len() - 1;
        if parent != NONE {
            self.units[parent].children.push(u);
        }
        u
    }

    pub(super) fn intern(&mut self, key: Vec<u32>) -> u32 {
        let next = self.structures.len() as u32;
        *self.structures.entry(key).or_insert(next)
    }

    pub(super) fn open(&mut self) -> usize {
        let u = self.new_unit();
        self.stack.push(u);
        u
    }

    pub(super) fn leaf(&mut self, cpu: usize, color: u32) {
        let u = self.new_unit();
        self.leaves.push(cpu);
        self.units[u].end = self.leaves.len();
        self.units[u].structure = self.intern(vec![0, color]);
    }

    /// Closes `u`; its structure is `label` and its children's structures
    /// in order. Children are laid out in order of structure (slots of a
    /// package by position, which is part of their structure), so alike
    /// units have equal structures and are alike position by position.
    pub(super) fn close(&mut self, u: usize, mut label: Vec<u32>) {
        self.stack.pop();
        self.units[u].end = self.leaves.len();
        let kids: Vec<u32> = (self.units[u].children.iter())
            .map(|&c| self.units[c].structure)
            .collect();
        label.push(kids.len() as u32);
        label.extend(kids);
        self.units[u].structure = self.intern(label);
        self.link(&self.units[u].children.clone());
    }

    /// Packages have no parent unit; link them as siblings too.
    pub(super) fn finish_root(&mut self, pkgs: &[usize]) {
        self.link(pkgs);
    }

    /// Points each unit at the previous sibling of the same structure.
    pub(super) fn link(&mut self, siblings: &[usize]) {
        for (i, &u) in siblings.iter().enumerate() {
            let s = self.units[u].structure;
            self.units[u].prev_equiv = (siblings[..i].iter().rev())
                .copied()
                .find(|&v| self.units[v].structure == s)
                .unwrap_or(NONE);
        }
    }
}
