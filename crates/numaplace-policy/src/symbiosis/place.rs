//! The three allocation algorithms of \[Symbiosis-Bloom\] §3.3 as one pure function:
//! tasks with their signatures in, a core for each out.
//!
//! Two levels. Tasks on different cores of one shared cache run at the
//! same time and compete for it; tasks time-sharing one core never run
//! together (§3.3: "processes that adversely affect each others'
//! performance should be scheduled to the same core"); tasks under
//! different last-level caches do not compete at all. So:
//!
//! 1. **LLC domains** (only on machines with several): tasks are dealt to
//!    the domains in proportion to their cores so that the interference
//!    *inside* each domain is smallest: the balanced min-cut of the
//!    negated interference graph (heavy pairs cut apart). Weight sorting
//!    deals the tasks in order of weight, heaviest first, snaking over the
//!    domains, so heavy tasks land in different domains. Our extension:
//!    the paper has one shared L2 (§3.1).
//! 2. **Cores of a domain**: as §3.3 describes, each core gets
//!    `ceil(P/N)` or `floor(P/N)` tasks: weight sorting groups them in
//!    order of weight (§3.3.1); the interference graphs group them by a
//!    balanced min-cut applied hierarchically (§3.3.2), with the plain
//!    (§3.3.2) or weighted (§3.3.3) interference metric, and threads of one
//!    multithreaded process fixed by the two-phase rule (§3.3.4).

use std::collections::BTreeMap;

use super::Algorithm;
use super::partition::{Graph, partition, proportional_counts};

/// One task as the algorithms see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The task.
    pub tid: i32,
    /// Its process: threads of one process share data (§3.3.4).
    pub tgid: i32,
    /// Occupancy weight, ones in its running bit vector (§3.1).
    pub weight: f64,
    /// Filter entries (the largest possible weight).
    pub entries: f64,
    /// The CPU (kernel id) its signature was taken on.
    pub cpu: u32,
    /// Symbiosis with other CPUs of its cache (kernel id -> ones in
    /// RBV XOR CF), §3.1.
    pub symbiosis: BTreeMap<u32, u32>,
    /// Where it is now, (domain, core within the domain), if pinned to one
    /// core: the algorithms prefer to leave it there among equal choices.
    pub now: Option<(usize, usize)>,
}

/// The symbiosis of the pair `a`, `b` (ones in the XOR of their
/// footprints, §3.1), as the graphs use it: the expected XOR of two
/// footprints of weights `wa` and `wb` hashed into `n` entries,
/// `wa + wb - 2·wa·wb/n`. The second value says whether the hardware's own
/// count was available (`a`'s symbiosis with the CPU `b` ran on).
///
/// Our choice, measured: the hardware compares a task's RBV with *core*
/// filters, which hold whatever ran on that core (the task's own core-mate,
/// stale lines), so a pair measured across cores and a pair measured on one
/// core are not comparable; a graph built from the raw counts kept the
/// pairing the signatures were taken in for all 495 mixes of
/// `tests/policies/symbiosis.rs`. The weights come from the same hardware and a
/// good hash spreads footprints at random (§5.3), so the expectation is
/// the pair's symbiosis with the co-runners removed; the raw count is
/// reported beside it.
pub fn symbiosis_of(a: &Member, b: &Member) -> (f64, Option<u32>) {
    let n = a.entries.max(1.0);
    let expected = a.weight + b.weight - 2.0 * a.weight * b.weight / n;
    (expected, a.symbiosis.get(&b.cpu).copied())
}

/// The undirected edge between `a` and `b`: the two directed interference
/// metrics added (§3.3.2). Interference is the reciprocal of symbiosis
/// (§3.3.2); the weighted graph multiplies each direction by the weight of
/// its source (§3.3.3). Weight sorting has no graph; for comparing
/// placements it uses the product of the weights over the entries.
pub fn edge(alg: Algorithm, a: &Member, b: &Member) -> f64 {
    let (sab, _) = symbiosis_of(a, b);
    let (sba, _) = symbiosis_of(b, a);
    match alg {
        Algorithm::InterferenceGraph => 1.0 / sab.max(1.0) + 1.0 / sba.max(1.0),
        Algorithm::WeightedInterferenceGraph => a.weight / sab.max(1.0) + b.weight / sba.max(1.0),
        Algorithm::WeightSorting => a.weight * b.weight / a.entries.max(1.0),
    }
}

/// Interference between every pair of different processes; threads of
/// one process get 0, since they share data rather than compete (§3.3.4).
pub fn interference(alg: Algorithm, m: &[Member]) -> Graph {
    let mut g = Graph::new(m.len());
    for a in 0..m.len() {
        for b in a + 1..m.len() {
            if m[a].tgid != m[b].tgid {
                g.set(a, b, edge(alg, &m[a], &m[b]));
            }
        }
    }
    g
}

/// Interference between tasks that run at the same time on one cache
/// under `place` ((domain, core) per member): the quantity every
/// algorithm tries to make small.
pub fn co_run_cost(g: &Graph, place: &[(usize, usize)]) -> f64 {
    let mut c = 0.0;
    for a in 0..place.len() {
        for b in a + 1..place.len() {
            if place[a].0 == place[b].0 && place[a].1 != place[b].1 {
                c += g.get(a, b);
            }
        }
    }
    c
}

/// What the algorithms need besides the members.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Which algorithm.
    pub algorithm: Algorithm,
    /// §3.3.4's two phases for multithreaded processes.
    pub two_phase: bool,
    /// Largest number of tasks split by trying every balanced split.
    pub exact_limit: usize,
}

/// A (domain, core) for every member. `cores_per_domain[d]` cores in
/// domain `d`.
pub fn place(m: &[Member], cores_per_domain: &[usize], o: Options) -> Vec<(usize, usize)> {
    let n = m.len();
    let mut out = vec![(0, 0); n];
    if n == 0 || cores_per_domain.iter().all(|&c| c == 0) {
        return out;
    }
    let g = interference(o.algorithm, m);
    let scale = (0..n)
        .flat_map(|a| (0..n).map(move |b| (a, b)))
        .map(|(a, b)| g.get(a, b).abs())
        .fold(0.0, f64::max)
        .max(1e-9);
    let big = 1e3 * scale * n as f64;
    let by_weight = |v: &mut Vec<usize>| {
        v.sort_by(|&a, &b| {
            m[b].weight
                .total_cmp(&m[a].weight)
                .then(m[a].tid.cmp(&m[b].tid))
        })
    };
    let all: Vec<usize> = (0..n).collect();
    // Level 1: LLC domains.
    let counts = proportional_counts(n, cores_per_domain);
    let parts = if cores_per_domain.len() == 1 {
        vec![all]
    } else if o.algorithm == Algorithm::WeightSorting {
        let mut order = all;
        by_weight(&mut order);
        snake(&order, &counts)
    } else {
        // Apart: negated interference; together: threads of one process.
        let mut l = Graph::new(n);
        for a in 0..n {
            for b in a + 1..n {
                let w = if m[a].tgid == m[b].tgid {
                    big
                } else {
                    -g.get(a, b)
                };
                l.set(a, b, w);
            }
        }
        partition(
            &l,
            &prefer_current(m, &(0..n).collect::<Vec<_>>(), |x| x.0),
            &counts,
            o.exact_limit,
        )
    };
    let parts = match_parts(m, parts, &counts, |x| x.map(|p| p.0));
    // Level 2: cores of each domain.
    for (d, part) in parts.iter().enumerate() {
        let cores = cores_per_domain[d];
        if cores == 0 || part.is_empty() {
            continue;
        }
        let ccounts = proportional_counts(part.len(), &vec![1; cores]);
        let groups = if o.algorithm == Algorithm::WeightSorting {
            let mut order = part.clone();
            by_weight(&mut order);
            chunks(&order, &ccounts)
        } else {
            let mut c = Graph::new(n);
            for (i, &a) in part.iter().enumerate() {
                for &b in &part[i + 1..] {
                    c.set(a, b, g.get(a, b));
                }
            }
            if o.two_phase {
                two_phase(m, part, cores, big, &mut c, by_weight);
            }
            partition(
                &c,
                &prefer_current(m, part, |x| x.1),
                &ccounts,
                o.exact_limit,
            )
        };
        let groups = match_parts(m, groups, &ccounts, |x| x.filter(|p| p.0 == d).map(|p| p.1));
        for (k, grp) in groups.iter().enumerate() {
            for &i in grp {
                out[i] = (d, k);
            }
        }
    }
    out
}

/// §3.3.4, phase one: the threads of each multithreaded process in `part`
/// are grouped by weight sorting into `ceil(T/N)` per core; in phase two
/// threads of one group are joined by a very large edge and threads of
/// different groups by none, so the min-cut keeps the groups.
fn two_phase(
    m: &[Member],
    part: &[usize],
    cores: usize,
    big: f64,
    c: &mut Graph,
    by_weight: impl Fn(&mut Vec<usize>),
) {
    let mut procs: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for &i in part {
        procs.entry(m[i].tgid).or_default().push(i);
    }
    for mut threads in procs.into_values().filter(|t| t.len() > 1) {
        by_weight(&mut threads);
        let size = threads.len().div_ceil(cores);
        for (x, &a) in threads.iter().enumerate() {
            for (y, &b) in threads.iter().enumerate().skip(x + 1) {
                c.set(a, b, if x / size == y / size { big } else { 0.0 });
            }
        }
    }
}

/// `part` ordered so that members already together come together (by
/// their current place), others after: the exact search keeps the first
/// of equally good splits, so ties keep the present placement.
fn prefer_current(
    m: &[Member],
    part: &[usize],
    key: impl Fn((usize, usize)) -> usize,
) -> Vec<usize> {
    let mut v = part.to_vec();
    v.sort_by_key(|&i| (m[i].now.map_or(usize::MAX, &key), i));
    v
}

/// The sorted order cut into consecutive groups of `counts` (§3.3.1).
fn chunks(order: &[usize], counts: &[usize]) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut rest = order;
    for &c in counts {
        let (a, b) = rest.split_at(c.min(rest.len()));
        out.push(a.to_vec());
        rest = b;
    }
    out
}

/// The sorted order dealt over the parts, forward then backward, each
/// part taking no more than its count.
fn snake(order: &[usize], counts: &[usize]) -> Vec<Vec<usize>> {
    let k = counts.len();
    let mut out = vec![Vec::new(); k];
    let seq: Vec<usize> = (0..k).chain((0..k).rev()).collect();
    let mut pos = 0;
    for &i in order {
        loop {
            let p = seq[pos % seq.len()];
            pos += 1;
            if out[p].len() < counts[p] {
                out[p].push(i);
                break;
            }
        }
    }
    out
}

/// Parts assigned to slots of the same size so that as many members as
/// possible stay where they are (`slot_of` gives a member's current slot).
fn match_parts(
    m: &[Member],
    parts: Vec<Vec<usize>>,
    counts: &[usize],
    slot_of: impl Fn(Option<(usize, usize)>) -> Option<usize>,
) -> Vec<Vec<usize>> {
    let k = counts.len();
    let mut pairs = Vec::new();
    for (p, part) in parts.iter().enumerate() {
        for s in (0..k).filter(|&s| counts[s] == part.len()) {
            let stay = part
                .iter()
                .filter(|&&i| slot_of(m[i].now) == Some(s))
                .count();
            pairs.push((std::cmp::Reverse(stay), p, s));
        }
    }
    pairs.sort();
    let mut slot_of_part = vec![None; parts.len()];
    let mut taken = vec![false; k];
    for (_, p, s) in pairs {
        if slot_of_part[p].is_none() && !taken[s] {
            slot_of_part[p] = Some(s);
            taken[s] = true;
        }
    }
    let mut out = vec![Vec::new(); k];
    for (p, part) in parts.into_iter().enumerate() {
        let s = slot_of_part[p].unwrap_or(p);
        out[s] = part;
    }
    out
}

/// The present placement mended rather than made anew: members with a
/// place (`now`, a core) keep it; the others (newcomers, or tasks that
/// were never pinned) are placed one at a time, heaviest first, each on
/// a core with the fewest tasks (in its own domain where it has one,
/// then where it adds the least co-run interference); and while one core
/// holds two more tasks than another, the one of its tasks that gains
/// most by moving (what it adds where it is, less what it would add
/// there) moves to the emptiest core. Every core ends
/// with `floor(P/N)` or `ceil(P/N)` tasks, as [`place`] would deal them.
///
/// Our choice, measured: placing every task anew each time one arrives
/// moved every thread of a churning mix (mix:53057: 706 thread moves,
/// 520 across nodes, +14.4 % against Linux). `None` where no member has
/// a place: there is nothing to mend.
pub fn repair(m: &[Member], g: &Graph, cores_per_domain: &[usize]) -> Option<Vec<(usize, usize)>> {
    let valid = |p: (usize, usize)| p.0 < cores_per_domain.len() && p.1 < cores_per_domain[p.0];
    let mut at: Vec<Option<(usize, usize)>> =
        m.iter().map(|x| x.now.filter(|&p| valid(p))).collect();
    if at.iter().all(Option::is_none) || cores_per_domain.iter().all(|&c| c == 0) {
        return None;
    }
    let slots: Vec<(usize, usize)> = cores_per_domain
        .iter()
        .enumerate()
        .flat_map(|(d, &c)| (0..c).map(move |k| (d, k)))
        .collect();
    // Tasks per slot, kept as tasks are placed and moved.
    let mut load: BTreeMap<(usize, usize), usize> = slots.iter().map(|&s| (s, 0)).collect();
    for p in at.iter().flatten() {
        *load.entry(*p).or_default() += 1;
    }
    // What member `i` adds on slot `s`: interference with the members
    // running at the same time on the other cores of its domain.
    let adds = |at: &[Option<(usize, usize)>], i: usize, s: (usize, usize)| -> f64 {
        (0..m.len())
            .filter(|&j| j != i)
            .filter(|&j| at[j].is_some_and(|p| p.0 == s.0 && p.1 != s.1))
            .map(|j| g.get(i, j))
            .sum()
    };
    // Newcomers first, heaviest first.
    let mut newcomers: Vec<usize> = (0..m.len()).filter(|&i| at[i].is_none()).collect();
    newcomers.sort_by(|&a, &b| {
        m[b].weight
            .total_cmp(&m[a].weight)
            .then(m[a].tid.cmp(&m[b].tid))
    });
    for i in newcomers {
        let home = m[i].now.map(|p| p.0);
        let best = slots.iter().copied().min_by(|&a, &b| {
            load[&a]
                .cmp(&load[&b])
                .then((Some(a.0) != home).cmp(&(Some(b.0) != home)))
                .then(adds(&at, i, a).total_cmp(&adds(&at, i, b)))
                .then(a.cmp(&b))
        })?;
        at[i] = Some(best);
        *load.entry(best).or_default() += 1;
    }
    // Then even out: a core two tasks fuller than another gives one up.
    // Each move narrows the spread, so this ends; the bound is a guard.
    for _ in 0..4 * m.len() {
        let fullest = slots
            .iter()
            .copied()
            .max_by(|&a, &b| load[&a].cmp(&load[&b]).then(b.cmp(&a)))?;
        let emptiest = slots
            .iter()
            .copied()
            .min_by(|&a, &b| load[&a].cmp(&load[&b]).then(a.cmp(&b)))?;
        let (f, e) = (fullest, emptiest);
        if load[&f] < load[&e] + 2 {
            break;
        }
        let leaving = (0..m.len())
            .filter(|&i| at[i] == Some(f))
            .max_by(|&a, &b| {
                (adds(&at, a, f) - adds(&at, a, e))
                    .total_cmp(&(adds(&at, b, f) - adds(&at, b, e)))
                    .then(m[b].tid.cmp(&m[a].tid))
            })?;
        at[leaving] = Some(e);
        *load.entry(f).or_default() -= 1;
        *load.entry(e).or_default() += 1;
    }
    at.into_iter().collect()
}
