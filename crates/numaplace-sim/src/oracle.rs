//! The oracle: the best static placement of threads on CPUs for a cost
//! the caller gives — the "hand-optimized" or "optimal" placement the seed
//! papers compare their policies against.
//!
//! # What is searched
//!
//! A placement puts every thread on its own CPU (dense ids), inside the
//! thread's allowed CPUs, and — when [`OracleProblem::one_per_core`] holds
//! and there are at least as many cores as threads — on a core of its own.
//! (If the allowed CPUs leave no placement with a core per thread, cores
//! are shared after all and the method says so.)
//!
//! # Symmetry
//!
//! Many placements cost the same by construction, and the oracle
//! evaluates one per orbit of this group:
//! * SMT siblings of a core are interchangeable;
//! * cores of one LLC domain *and* one NUMA node are interchangeable (an LLC
//!   holding several nodes, sub-NUMA clustering, is split by node, since
//!   memory is per node);
//! * packages with their nodes, LLCs and cores are interchangeable when the
//!   caller says so ([`OracleProblem::packages_symmetric`]) and they are
//!   alike;
//! * threads of one class are interchangeable.
//!
//! Units are interchangeable only when they are alike down to the CPUs:
//! same shape, same CPU kinds, and the same membership in every thread's
//! allowed set (a thread allowed on package 0 only breaks the package
//! symmetry); threads of one class with different allowed sets are told
//! apart. The cost must be invariant under this group; if it is not (a cost
//! depending on which core of an LLC a thread is on), the "optimum" is
//! only the best of one representative per orbit.
//!
//! The enumeration is exact. It fills CPUs in tree order (package, LLC and
//! node, core, sibling) with thread classes, and keeps an assignment only
//! when in every group of interchangeable units their contents, read leaf
//! by leaf, are in non-increasing lexicographic order. An empty CPU reads
//! lowest, so a thread opens the *first* empty unit of its kind (the usual
//! "first empty equivalent unit" rule, which alone would count twice the
//! orbits whose classes repeat across units). Each unit is compared with
//! its interchangeable predecessor as it is filled, so branches are cut at
//! the first CPU that breaks the order. Interchangeable units are laid out
//! alike position by position (a core's CPUs and an LLC's cores sorted by
//! kind), which makes this order a canonical form: each orbit is generated
//! exactly once. Threads of a class then take that class's CPUs in
//! increasing order.
//!
//! # Beyond enumeration
//!
//! When there are more placements up to symmetry than the evaluation
//! budget, [`search`] runs a local search instead: hill climbing by first
//! improvement from several starts — spread (threads round-robin over the
//! LLC domains, alternating packages), packed (cores in order), and a few
//! random placements from a splitmix64 generator seeded by the caller —
//! with two moves: swap the CPUs of two threads of different classes, or
//! move one thread to a free CPU (one per symmetry class of free CPU). A
//! start climbs until no move improves the cost or its share of the
//! budget is spent; shares left unspent pass to the next start. The
//! result is deterministic for a seed but is a local optimum, and
//! [`OracleResult::exhaustive`] says which kind was found.

use std::collections::HashMap;
use std::fmt;

use numaplace_model::{CpuSet, Topology};

/// A placement problem: which threads, where they may go, which
/// symmetries the cost respects.
#[derive(Debug, Clone)]
pub struct OracleProblem<'a> {
    pub topology: &'a Topology,
    /// Per thread an equivalence class: threads of one class are
    /// interchangeable (identical copies).
    pub classes: Vec<u32>,
    /// Per thread the CPUs (dense ids — the same as kernel ids on synthetic
    /// machines) it may use (its cpuset), or `None` = all. Ids past the
    /// machine's CPUs are ignored.
    pub allowed: Vec<Option<CpuSet>>,
    /// Packages (with their nodes/LLCs) may be permuted without changing the
    /// cost: true only when the caller knows the memory placement and
    /// distances are symmetric (e.g. all first-touch on a 2-socket
    /// machine); false when memory is bound to node 0.
    pub packages_symmetric: bool,
    /// At most one thread per core (no SMT sharing) when there are enough
    /// cores; default true.
    pub one_per_core: bool,
}

impl<'a> OracleProblem<'a> {
    /// Threads of these classes allowed everywhere, packages not symmetric,
    /// one thread per core.
    pub fn new(topology: &'a Topology, classes: Vec<u32>) -> Self {
        let n = classes.len();
        OracleProblem {
            topology,
            classes,
            allowed: vec![None; n],
            packages_symmetric: false,
            one_per_core: true,
        }
    }
}

/// The best placement found.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleResult {
    /// Dense CPU id per thread.
    pub placement: Vec<u32>,
    pub cost: f64,
    /// How many placements the cost function was called on.
    pub evaluated: usize,
    /// Whether every placement was considered (up to symmetry), so `cost`
    /// is the optimum; false for a local search.
    pub exhaustive: bool,
    /// How it was found, for people: `exhaustive: 35 placements up to
    /// symmetry`, or `local search: ... from K starts, N evaluations`.
    pub method: String,
}

/// Why there is no placement at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OracleError {
    /// More threads than the machine has CPUs.
    TooManyThreads { threads: usize, cpus: usize },
    /// `allowed` does not have one entry per thread.
    AllowedLength { threads: usize, allowed: usize },
    /// The allowed CPUs leave no way to give every thread its own CPU.
    Infeasible,
}

impl fmt::Display for OracleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OracleError::TooManyThreads { threads, cpus } => write!(
                f,
                "{threads} threads cannot have a CPU each on a machine of {cpus} CPUs"
            ),
            OracleError::AllowedLength { threads, allowed } => write!(
                f,
                "{threads} threads but {allowed} allowed cpusets (one per thread expected)"
            ),
            OracleError::Infeasible => write!(
                f,
                "the threads' allowed CPUs leave no way to give each its own CPU"
            ),
        }
    }
}

impl std::error::Error for OracleError {}

/// Random starts of the local search, besides spread and packed.
const RANDOM_STARTS: usize = 4;

/// Thread slots (placements × threads) kept from the counting pass of an
/// exhaustive search, so small problems are enumerated once.
const KEEP_MAX: usize = 1 << 22;

/// The best placement for `cost`: exhaustive up to symmetry when there are
/// at most `budget` placements to evaluate, a local search of at most
/// `budget` evaluations (at least one) otherwise. See the module docs.
pub fn search(
    p: &OracleProblem,
    cost: &mut dyn FnMut(&[u32]) -> f64,
    budget: usize,
    seed: u64,
) -> Result<OracleResult, OracleError> {
    let prep = Prepared::new(p)?;
    let budget = budget.max(1);
    let note = if prep.opc_dropped {
        " (sharing cores: the allowed CPUs leave no placement with a core per thread)"
    } else {
        ""
    };
    // Count, keeping the placements while they are few enough to keep
    // (else they are enumerated again).
    let mut kept: Vec<u32> = Vec::new();
    let mut keep = true;
    let canonical = prep.enumerate(
        &mut |pl| {
            if keep && kept.len() + pl.len() <= KEEP_MAX {
                kept.extend_from_slice(pl);
            } else {
                keep = false;
                kept = Vec::new();
            }
            true
        },
        budget.saturating_add(1),
    );
    if canonical <= budget {
        let mut best: Option<(Vec<u32>, f64)> = None;
        let mut consider = |pl: &[u32]| {
            let c = sane(cost(pl));
            if best.as_ref().is_none_or(|(_, b)| c < *b) {
                best = Some((pl.to_vec(), c));
            }
            true
        };
        let n = if keep && prep.n > 0 {
            for pl in kept.chunks(prep.n) {
                consider(pl);
            }
            canonical
        } else {
            prep.enumerate(&mut consider, usize::MAX)
        };
        let (placement, cost) = best.ok_or(OracleError::Infeasible)?;
        return Ok(OracleResult {
            placement,
            cost,
            evaluated: n,
            exhaustive: true,
            method: format!(
                "exhaustive: {n} placement{} up to symmetry{note}",
                if n == 1 { "" } else { "s" }
            ),
        });
    }
    let ls = LocalSearch::run(&prep, cost, budget, seed);
    let starts = match ls.starts {
        1 => "1 start (spread)".to_string(),
        2 => "2 starts (spread, packed)".to_string(),
        k => format!("{k} starts (spread, packed, {} random)", k - 2),
    };
    Ok(OracleResult {
        placement: ls.placement,
        cost: ls.cost,
        evaluated: ls.evaluated,
        exhaustive: false,
        method: format!(
            "local search: more than {budget} placements up to symmetry, so first-improvement \
             hill climbing (swaps, moves to free CPUs) from {starts}, {} evaluations{note}",
            ls.evaluated
        ),
    })
}

/// Placements up to symmetry (see the module docs), counting no further
/// than `limit`; 0 when there is none.
pub fn count_canonical(p: &OracleProblem, limit: usize) -> usize {
    match Prepared::new(p) {
        Ok(prep) => prep.enumerate(&mut |_| true, limit),
        Err(_) => 0,
    }
}

/// NaN costs lose to everything.
fn sane(c: f64) -> f64 {
    if c.is_nan() { f64::INFINITY } else { c }
}

const NONE: usize = usize::MAX;

/// A node of the machine's tree: package, slot (LLC × node within a
/// package), core or CPU.
#[derive(Debug, Clone)]
struct Unit {
    /// Leaf positions `start..end` in tree order.
    start: usize,
    end: usize,
    parent: usize,
    children: Vec<usize>,
    /// Interned structural signature: units of one parent with equal
    /// structure are interchangeable.
    structure: u32,
    /// The previous sibling of the same structure.
    prev_equiv: usize,
}

/// The problem, validated and laid out for the enumeration and the search.
struct Prepared {
    n: usize,
    ncpu: usize,
    /// One thread per core in force.
    opc: bool,
    /// `one_per_core` asked but impossible with the allowed CPUs.
    opc_dropped: bool,
    classes: Vec<u32>,
    /// Per refined class its threads, increasing.
    rc_threads: Vec<Vec<usize>>,
    /// Per thread, per CPU: may it go there.
    allowed: Vec<Vec<bool>>,
    /// Per refined class, per CPU.
    rc_allowed: Vec<Vec<bool>>,
    cpu_core: Vec<usize>,
    cpu_llc: Vec<usize>,
    /// Index of each CPU among its core's CPUs.
    cpu_sibling: Vec<usize>,
    units: Vec<Unit>,
    /// CPU (dense id) at each leaf position.
    leaves: Vec<usize>,
    /// Leaf position of each CPU.
    cpu_pos: Vec<usize>,
    /// Per leaf position, the units holding it: leaf, core, slot, package.
    chain: Vec<[usize; 4]>,
    /// Core units starting at or after each leaf position.
    cores_from: Vec<usize>,
    /// LLC order of the spread start: by index within the package, then
    /// package.
    spread_llcs: Vec<usize>,
}

impl Prepared {
    fn new(p: &OracleProblem) -> Result<Prepared, OracleError> {
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
        // Distinct allowed sets, each thread's, and the refined classes.
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

        // Colors.
        let mut color_ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let cpu_color: Vec<u32> = (t.cpus().iter())
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
            .collect();
        let cpu_core: Vec<usize> = t.cpus().iter().map(|c| c.core).collect();
        let cpu_llc: Vec<usize> = t.cpus().iter().map(|c| c.llc).collect();
        let cpu_sibling: Vec<usize> = (t.cpus().iter())
            .map(|c| {
                (t.cores()[c.core].cpus.iter())
                    .position(|&x| x == c.id)
                    .unwrap_or(0)
            })
            .collect();

        // The tree: packages > slots (LLC × node) > cores > CPUs.
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

        let mut prep = Prepared {
            n,
            ncpu,
            opc: false,
            opc_dropped: false,
            classes: p.classes.clone(),
            rc_threads,
            allowed,
            rc_allowed,
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
    fn enumerate(&self, visit: &mut dyn FnMut(&[u32]) -> bool, limit: usize) -> usize {
        let mut e = Enumeration {
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
        e.found
    }

    /// A placement taking, for each thread in `order`, the first free CPU in
    /// its preference list, or if that fails any placement (augmenting
    /// paths, preferences first); `None` when there is none.
    fn assign(&self, order: &[usize], prefs: &[Vec<usize>]) -> Option<Vec<u32>> {
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

/// Builds the unit tree depth first.
#[derive(Default)]
struct TreeBuilder {
    units: Vec<Unit>,
    leaves: Vec<usize>,
    stack: Vec<usize>,
    structures: HashMap<Vec<u32>, u32>,
}

impl TreeBuilder {
    fn new_unit(&mut self) -> usize {
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

    fn intern(&mut self, key: Vec<u32>) -> u32 {
        let next = self.structures.len() as u32;
        *self.structures.entry(key).or_insert(next)
    }

    fn open(&mut self) -> usize {
        let u = self.new_unit();
        self.stack.push(u);
        u
    }

    fn leaf(&mut self, cpu: usize, color: u32) {
        let u = self.new_unit();
        self.leaves.push(cpu);
        self.units[u].end = self.leaves.len();
        self.units[u].structure = self.intern(vec![0, color]);
    }

    /// Closes `u`; its structure is `label` and its children's structures
    /// in order. Children are laid out in order of structure (slots of a
    /// package by position, which is part of their structure), so alike
    /// units have equal structures and are alike position by position.
    fn close(&mut self, u: usize, mut label: Vec<u32>) {
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
    fn finish_root(&mut self, pkgs: &[usize]) {
        self.link(pkgs);
    }

    /// Points each unit at the previous sibling of the same structure.
    fn link(&mut self, siblings: &[usize]) {
        for (i, &u) in siblings.iter().enumerate() {
            let s = self.units[u].structure;
            self.units[u].prev_equiv = (siblings[..i].iter().rev())
                .copied()
                .find(|&v| self.units[v].structure == s)
                .unwrap_or(NONE);
        }
    }
}

/// The exact enumeration's depth-first state.
///
/// The canonical order of a unit's contents is the sequence of its leaves'
/// contents (0 empty, r + 1 a thread of refined class r), compared
/// lexicographically; interchangeable units are alike position by
/// position, so a unit is compared with its previous interchangeable
/// sibling leaf by leaf, as it is filled, and a branch is cut at the first
/// leaf that makes it greater.
struct Enumeration<'a, 'v> {
    p: &'a Prepared,
    /// Per leaf position: 0 empty, r + 1 a thread of refined class r.
    content: Vec<u32>,
    /// Threads in each unit so far.
    count: Vec<u32>,
    /// Per leaf position and level (leaf, core, slot, package): whether the
    /// unit's contents up to this leaf equal its previous interchangeable
    /// sibling's.
    equal: Vec<[bool; 4]>,
    remaining: Vec<usize>,
    total: usize,
    placement: Vec<u32>,
    found: usize,
    limit: usize,
    visit: &'v mut dyn FnMut(&[u32]) -> bool,
}

impl Enumeration<'_, '_> {
    /// Fills leaf positions from `i`; false to stop everything.
    fn fill(&mut self, i: usize) -> bool {
        let p = self.p;
        let m = p.leaves.len();
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
    fn ordered(&mut self, i: usize, x: u32) -> bool {
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

    fn emit(&mut self) -> bool {
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

/// What the local search found.
struct LocalSearch {
    placement: Vec<u32>,
    cost: f64,
    evaluated: usize,
    starts: usize,
}

impl LocalSearch {
    fn run(
        p: &Prepared,
        cost: &mut dyn FnMut(&[u32]) -> f64,
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
    fn starts(p: &Prepared, seed: u64) -> Vec<Vec<u32>> {
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
fn climb(
    p: &Prepared,
    mut pos: Vec<u32>,
    cost: &mut dyn FnMut(&[u32]) -> f64,
    share: usize,
) -> (Vec<u32>, f64, usize) {
    let mut evals = 1;
    let mut cur = sane(cost(&pos));
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
            let v = sane(cost(&pos));
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
                let v = sane(cost(&pos));
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
    fn fresh_target(&self, from: usize, to: usize, count: &[u32]) -> bool {
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

#[cfg(test)]
mod tests;
