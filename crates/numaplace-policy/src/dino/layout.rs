//! Where DINO and DI put threads: the placement layout, the matching of
//! threads to its slots, and the pass for multithreaded applications
//! (\[Blagodurov11\], §3.1 and §3.3.3).
//!
//! Everything here is a pure function of its arguments: no snapshots, no
//! I/O, no clock. The policy in [`super`] turns what telemetry saw into
//! [`Slotted`] threads and a [`Domains`] description, and turns the
//! [`Solution`] back into actions.
//!
//! # The two algorithms
//!
//! * DI-Plain (§3.1) sorts threads by miss rate and deals them over the
//!   memory domains from both ends of the sorted array in turn, so every
//!   domain gets a mix of heavy and light threads. It has no memory of the
//!   previous round: a thread moves whenever its rank in the array moves,
//!   which is why DI-Plain and DI-Migrate migrate so often (§3.2).
//!   [`distributed_intensity`] is that algorithm.
//! * DINO (§3.3) deals *classes* ([`Class`]) rather than threads, giving a
//!   layout (which class each core slot wants, [`placement_layout`]); then
//!   it fills the slots so that a thread whose slot did not change stays
//!   put, and finally pulls threads of one process into one domain where
//!   that costs no contention. [`solve`] runs all of it and keeps each
//!   intermediate step in the [`Solution`].
//!
//! # The dealing rule (shared by both)
//!
//! §3.3.3 describes the layout in words: the forward pass goes over
//! `dom0, dom1, …` and the backward pass "starts with dom3". Taken
//! literally on the paper's own example (classes `D D d d d t t t`, four
//! domains of two cores), that wording gives `D d | D t | d t | d t`, but
//! the layout the paper prints is `D t | D t | d t | d d`. The printed
//! layout is exactly what comes out when *every* pass, forward or
//! backward, visits the domains in ascending order; the only thing a
//! backward pass changes is which end of the array it takes from. We
//! follow the printed example (it is the only unambiguous specification
//! and the acceptance test), and DI uses the same dealing since §3.1
//! describes the backward pass of DI as going over "consecutive domains"
//! as well.
//!
//! Precisely: with n threads on c cores, every core has `n / c` slots
//! (rounded down) and the first `n mod c` cores dealt one more, so no core
//! idles while another time-shares. Passes alternate between the front
//! (most intensive) and the back (least intensive) of the sorted array,
//! starting with the front. A pass visits, in ascending order, each domain
//! that still has an unused core; at each it takes that core's number of
//! slots from its end of the array and puts them in the lowest unused core
//! of that domain ("instead of taking one class-instance from the array at
//! a time, DINO will take T", §3.3.3). Domains whose cores are all used
//! drop out of later passes, so domains with unequal core counts are
//! handled naturally: the larger ones keep receiving elements after the
//! smaller ones are full. With fewer threads than cores, dealing stops
//! when the array is exhausted and the remaining cores get no slot at all.
//!
//! §3.3.3 puts `T = threads / cores` slots on each core; taken literally
//! with `T` rounded up, a thread count that is not a multiple of the core
//! count leaves cores idle (9 threads on 8 cores: three idle cores), so
//! the remainder is spread instead (our reading).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Memory-intensity classes of §3.3.2, ordered by intensity (Turtle <
/// Devil < SuperDevil), so sorting in descending order puts the most
/// memory-intensive threads first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Few last-level cache misses (under 2 per 1000 instructions in §3.3.2).
    Turtle,
    /// A memory-intensive thread.
    Devil,
    /// A very memory-intensive thread (over 100 misses per 1000
    /// instructions in §3.3.2).
    SuperDevil,
}

impl Class {
    /// All classes, least intensive first.
    pub const ALL: [Class; 3] = [Class::Turtle, Class::Devil, Class::SuperDevil];

    /// The one-letter tag the paper's tables use: `t`, `d`, `D`.
    pub fn letter(self) -> char {
        match self {
            Class::Turtle => 't',
            Class::Devil => 'd',
            Class::SuperDevil => 'D',
        }
    }

    /// The name, as serde spells it.
    pub fn name(self) -> &'static str {
        match self {
            Class::Turtle => "turtle",
            Class::Devil => "devil",
            Class::SuperDevil => "super-devil",
        }
    }

    /// Dense index 0..3 for per-class tables.
    fn index(self) -> usize {
        self as usize
    }
}

/// The machine as the algorithm sees it: memory domains in order, each
/// with a number of cores. Cores are numbered globally from 0 in domain
/// order, so domain `d` owns the contiguous range that starts after the
/// cores of domains `0..d`. A domain may have no cores; it then takes no
/// part in placement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Domains {
    /// Cores of each domain, e.g. `vec![2, 2, 2, 2]` for the example of
    /// §3.3.3.
    pub cores_per_domain: Vec<usize>,
}

impl Domains {
    /// Total number of cores.
    pub fn cores(&self) -> usize {
        self.cores_per_domain.iter().sum()
    }

    /// The domain that owns a (global) core.
    ///
    /// # Panics
    ///
    /// If `core >= self.cores()`.
    pub fn domain_of(&self, core: usize) -> usize {
        let mut start = 0;
        for (d, &n) in self.cores_per_domain.iter().enumerate() {
            start += n;
            if core < start {
                return d;
            }
        }
        panic!("core {core} is not on a machine of {start} cores");
    }

    /// The domain of every core, indexed by core.
    fn core_table(&self) -> Vec<usize> {
        self.cores_per_domain
            .iter()
            .enumerate()
            .flat_map(|(d, &n)| std::iter::repeat_n(d, n))
            .collect()
    }

    /// Each domain's cores as a half-open range `[start, end)`.
    fn ranges(&self) -> Vec<(usize, usize)> {
        let mut start = 0;
        self.cores_per_domain
            .iter()
            .map(|&n| {
                let r = (start, start + n);
                start += n;
                r
            })
            .collect()
    }
}

/// One thread's input to [`solve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slotted {
    /// Unique id of the thread (the "new_threadID" of §3.3.3).
    pub thread: u64,
    /// The process it belongs to; threads with equal values belong to one
    /// multithreaded application.
    pub process: i64,
    /// Its class this round (after whatever smoothing the caller applies).
    pub class: Class,
    /// Where the previous round's solution put it, if it had one.
    pub old: Option<OldPlace>,
    /// The domain holding its memory, when its memory is anchored to one
    /// (`None`: spread, or not known). The pass for multithreaded
    /// applications never moves a thread out of this domain.
    pub home: Option<usize>,
}

/// A thread's place in the previous solution (the "old_core" and
/// "old_class" of §3.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldPlace {
    /// The core it was placed on. A core the machine no longer has counts
    /// as no old place.
    pub core: usize,
    /// The class it was placed as.
    pub class: Class,
}

/// Deals the elements `0..n` of a sorted array over the cores (see the
/// module documentation for the rule). Returns, per core, the element
/// indices of its slots in the order they were taken. Empty when there is
/// no core.
///
/// `wanted[core]`, where given, counts the threads whose old place is that
/// core: domains are dealt to most wanted first, and within a domain its
/// most wanted cores first (ties in core order). Which cores get slots
/// when there are fewer threads than cores, and which domains get the
/// extra slot otherwise, is not the paper's choice (§3.3.3 deals "the
/// cores", none in particular); dealt in core order, four threads on a
/// machine of eight 2-core packages got slots only on packages 0-3, three
/// of them a package away from the one their memory was on, and DINO
/// moved them there and their memory after them, 29 % slower than Linux
/// over an 11 s run (mix:56116). Without `wanted`, core order.
fn deal(n: usize, domains: &Domains, wanted: Option<&[usize]>) -> Vec<Vec<usize>> {
    let cores = domains.cores();
    let mut per_core = vec![Vec::new(); cores];
    if n == 0 || cores == 0 {
        return per_core;
    }
    // Balanced: every core gets floor(n / cores) slots and the first
    // n mod cores cores dealt one more. §3.3.3 says a pass takes T =
    // threads / cores instances per core; taking ceil(T) on every core
    // would leave cores idle (9 threads on 8 cores: three idle cores),
    // which no scheduler wants, so the remainder is spread instead.
    let (base, extra) = (n / cores, n % cores);
    let mut dealt = 0usize;
    let weight = |core: usize| wanted.and_then(|w| w.get(core)).copied().unwrap_or(0);
    // Each domain's cores in the order they take slots.
    let order: Vec<Vec<usize>> = domains
        .ranges()
        .into_iter()
        .map(|(a, b)| {
            let mut v: Vec<usize> = (a..b).collect();
            v.sort_by_key(|&c| (Reverse(weight(c)), c));
            v
        })
        .collect();
    // next[d]: how many of domain d's cores are used.
    let mut next = vec![0usize; order.len()];
    let mut active: Vec<usize> = (0..order.len()).filter(|&d| !order[d].is_empty()).collect();
    active.sort_by_key(|&d| {
        (
            Reverse(order[d].iter().map(|&c| weight(c)).sum::<usize>()),
            d,
        )
    });
    let (mut lo, mut hi) = (0, n);
    let mut from_front = true;
    // The slots of all cores add up to n, so the array runs out exactly
    // when the cores do.
    while lo < hi && !active.is_empty() {
        for &d in &active {
            if lo == hi {
                break;
            }
            let core = order[d][next[d]];
            next[d] += 1;
            let k = if dealt < extra { base + 1 } else { base }.min(hi - lo);
            dealt += 1;
            if from_front {
                per_core[core].extend(lo..lo + k);
                lo += k;
            } else {
                per_core[core].extend((hi - k..hi).rev());
                hi -= k;
            }
        }
        active.retain(|&d| next[d] < order[d].len());
        from_front = !from_front;
    }
    per_core
}

/// DINO's placement layout (§3.3.3): for each core, the classes of its
/// slots. Each core has `threads / cores` slots, rounded down or up (at
/// least one when there are threads); cores left over when there are
/// fewer threads than cores get none, and so does every core when there
/// are no threads.
///
/// The layout depends only on how many instances of each class there are:
/// `classes_sorted_desc` is expected sorted most intensive first, and is
/// sorted here anyway if it is not.
pub fn placement_layout(classes_sorted_desc: &[Class], domains: &Domains) -> Vec<Vec<Class>> {
    let mut sorted = classes_sorted_desc.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    deal(sorted.len(), domains, None)
        .into_iter()
        .map(|slots| slots.into_iter().map(|i| sorted[i]).collect())
        .collect()
}

/// DI-Plain's placement (§3.1): `sorted_threads` are thread ids sorted by
/// miss rate, most memory-intensive first; they are dealt over the domains
/// from alternating ends, with the same rule as [`placement_layout`] (and
/// the same `T` slots per core when there are more threads than cores).
/// Returns `(thread, core)` for every thread, in input order; nothing when
/// the machine has no core.
///
/// There is no class and no matching against the previous round: a thread
/// lands wherever its rank sends it, so any change of rank moves it. That
/// is the behaviour §3.2 measured, and the reason DINO exists. The DI
/// policies match on top of it, among the threads of one process in one
/// class only (`distributed_intensity.rs`, `keep_places`).
pub fn distributed_intensity(sorted_threads: &[u64], domains: &Domains) -> Vec<(u64, usize)> {
    let n = sorted_threads.len();
    let mut core_of = vec![usize::MAX; n];
    for (core, slots) in deal(n, domains, None).iter().enumerate() {
        for &i in slots {
            core_of[i] = core;
        }
    }
    if core_of.contains(&usize::MAX) {
        return Vec::new();
    }
    sorted_threads.iter().copied().zip(core_of).collect()
}

/// A core and a slot of it in DINO's layout.
pub type CoreSlot = (usize, usize);

/// The whole DINO solution of [`solve`], with each intermediate step of
/// §3.3.3 (for tests and the journal). The three thread grids have the
/// shape of `layout`: per core, one entry per slot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Solution {
    /// Per core, the class of each slot.
    pub layout: Vec<Vec<Class>>,
    /// The "initial shape": only the threads kept where they were (same
    /// core, same class, and a slot of that class left on the core).
    pub initial: Vec<Vec<Option<u64>>>,
    /// Every slot filled: the remaining threads added to free slots of
    /// their class.
    pub filled: Vec<Vec<Option<u64>>>,
    /// After the pass that groups the threads of multithreaded processes
    /// in one domain; this is the placement to apply.
    pub final_: Vec<Vec<Option<u64>>>,
}

impl Solution {
    /// Per thread of `n` slotted, its (core, slot) in the solution's final
    /// layout and its core once every slot was filled (before the pass that
    /// groups a process's threads in one domain), where it has them.
    pub fn places(&self, n: usize) -> (Vec<Option<CoreSlot>>, Vec<Option<usize>>) {
        let mut core_of = vec![None; n];
        let mut filled_core = vec![None; n];
        for (core, slots) in self.final_.iter().enumerate() {
            for (slot, t) in slots.iter().enumerate() {
                if let Some(t) = t {
                    core_of[*t as usize] = Some((core, slot));
                }
            }
        }
        for (core, slots) in self.filled.iter().enumerate() {
            for t in slots.iter().flatten() {
                filled_core[*t as usize] = Some(core);
            }
        }
        (core_of, filled_core)
    }

    /// `(thread, core)` of the final placement, in core then slot order.
    pub fn assignment(&self) -> Vec<(u64, usize)> {
        self.final_
            .iter()
            .enumerate()
            .flat_map(|(core, slots)| slots.iter().flatten().map(move |&t| (t, core)))
            .collect()
    }
}

/// Free slots of each class on each core, handed out lowest core (and
/// lowest slot) first, either anywhere or within one domain. Every cursor
/// only moves forward, so all the look-ups of one [`solve`] together cost
/// O(slots + cores + domains).
struct FreeSlots {
    /// `free[core][class]`: slot indices, highest first (so `pop` gives
    /// the lowest).
    free: Vec<[Vec<usize>; 3]>,
    ranges: Vec<(usize, usize)>,
    /// `core_cursor[class][domain]`: no core of the domain below it has a
    /// free slot of the class.
    core_cursor: [Vec<usize>; 3],
    /// `domain_cursor[class]`: no domain below it has a free slot of the
    /// class.
    domain_cursor: [usize; 3],
}

impl FreeSlots {
    fn new(layout: &[Vec<Class>], domains: &Domains) -> FreeSlots {
        let free = layout
            .iter()
            .map(|slots| {
                let mut by_class: [Vec<usize>; 3] = Default::default();
                for (s, c) in slots.iter().enumerate().rev() {
                    by_class[c.index()].push(s);
                }
                by_class
            })
            .collect();
        let ranges = domains.ranges();
        let starts: Vec<usize> = ranges.iter().map(|r| r.0).collect();
        FreeSlots {
            free,
            ranges,
            core_cursor: [starts.clone(), starts.clone(), starts],
            domain_cursor: [0; 3],
        }
    }

    /// Takes the lowest free slot of `class` on `core`.
    fn take_on_core(&mut self, core: usize, class: Class) -> Option<usize> {
        self.free[core][class.index()].pop()
    }

    /// Takes the lowest free slot of `class` in `domain`.
    fn take_in_domain(&mut self, domain: usize, class: Class) -> Option<(usize, usize)> {
        let c = class.index();
        let end = self.ranges[domain].1;
        while self.core_cursor[c][domain] < end {
            let core = self.core_cursor[c][domain];
            if let Some(slot) = self.free[core][c].pop() {
                return Some((core, slot));
            }
            self.core_cursor[c][domain] += 1;
        }
        None
    }

    /// Takes the lowest free slot of `class` on the machine.
    fn take_anywhere(&mut self, class: Class) -> Option<(usize, usize)> {
        let c = class.index();
        while self.domain_cursor[c] < self.ranges.len() {
            if let Some(found) = self.take_in_domain(self.domain_cursor[c], class) {
                return Some(found);
            }
            self.domain_cursor[c] += 1;
        }
        None
    }
}

/// Runs DINO's placement for one round (§3.3.3).
///
/// 1. Threads are sorted by class, most intensive first; the sort is
///    stable, so the input order breaks ties and is "the sorted order"
///    below.
/// 2. [`placement_layout`] of the sorted classes, its slots dealt to the
///    domains and cores the threads' old places are on first (`deal`).
/// 3. Initial shape: in sorted order, a thread whose old class equals its
///    class, and whose old core still has a free slot of that class in the
///    new layout, takes that slot. When a core has fewer such slots than
///    threads eligible for them, the first threads in sorted order win.
/// 4. Filling: the other threads, in sorted order, each take the free slot
///    of their class on the lowest core, except that a free slot of their
///    class in the domain of their old core is preferred when there is
///    one. That preference is ours, not the paper's: §3.3.3 only says the
///    threads "fill the unused cores according to their new class"; taking
///    a slot in the old domain when possible spares a domain change (and
///    thus a memory migration) that buys nothing. It leaves the paper's
///    example as printed.
/// 5. The pass for multithreaded applications: threads are visited in the
///    order of their slots after filling (core, then slot). For each
///    visited thread A, each thread B of A's process that has not been
///    visited yet and sits outside A's domain is swapped with a thread C
///    of A's domain that belongs to another process and has B's class, as
///    long as such a C exists. Swapped threads have the same class, so the
///    layout is unchanged. The paper leaves the order of the Bs and the
///    choice of C open; here the Bs of a class are taken by ascending
///    domain and then visiting order, and C is the lowest slot of the
///    lowest-numbered other process with threads of that class in A's
///    domain. A swap is made only when it gathers more threads of one
///    process in one domain than it separates (our addition: without it the
///    pass can undo next round what it did this one, and DINO would move
///    threads every round for nothing). Neither B nor C is taken out of the
///    domain holding its memory ([`Slotted::home`]; our addition too: the
///    swap's gain, shared data nearer, is a guess, while a thread moved
///    off its memory pays every access until the memory follows, and under
///    the migration rate limit that can be the rest of its run: on a
///    generated mix, single-thread programs swapped away to gather other
///    applications ran 40-60 % slower, their memory never following).
///
/// Threads are indexed by process, class and domain, so the whole solve
/// costs O(N log N) in the number of threads (plus a term linear in the
/// number of swaps, each O(log N)).
///
/// With no core at all, nothing can be placed: every grid is empty.
pub fn solve(threads: &[Slotted], domains: &Domains) -> Solution {
    let cores = domains.cores();
    if cores == 0 {
        return Solution::default();
    }
    let n = threads.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| Reverse(threads[i].class));
    let classes: Vec<Class> = order.iter().map(|&i| threads[i].class).collect();
    // The layout's slots go to the cores threads hold first (`deal`).
    let mut wanted = vec![0usize; cores];
    for t in threads {
        if let Some(o) = t.old.filter(|o| o.core < cores) {
            wanted[o.core] += 1;
        }
    }
    let layout: Vec<Vec<Class>> = deal(n, domains, Some(&wanted))
        .into_iter()
        .map(|slots| slots.into_iter().map(|i| classes[i]).collect())
        .collect();
    let core_domain = domains.core_table();
    let mut free = FreeSlots::new(&layout, domains);
    // place[i]: (core, slot) of input thread i.
    let mut place: Vec<Option<(usize, usize)>> = vec![None; n];

    // Step 3: keep threads whose core still wants their (unchanged) class.
    let mut initial: Vec<Vec<Option<u64>>> =
        layout.iter().map(|slots| vec![None; slots.len()]).collect();
    for &i in &order {
        let t = &threads[i];
        let Some(old) = t.old else { continue };
        if old.core >= cores || old.class != t.class {
            continue;
        }
        if let Some(slot) = free.take_on_core(old.core, t.class) {
            initial[old.core][slot] = Some(t.thread);
            place[i] = Some((old.core, slot));
        }
    }

    // Step 4: everyone else into a free slot of their class.
    let mut filled = initial.clone();
    for &i in &order {
        if place[i].is_some() {
            continue;
        }
        let t = &threads[i];
        let old_domain = t
            .old
            .filter(|o| o.core < cores)
            .map(|o| core_domain[o.core]);
        let (core, slot) = old_domain
            .and_then(|d| free.take_in_domain(d, t.class))
            .or_else(|| free.take_anywhere(t.class))
            .expect("the layout has one slot per thread of each class");
        filled[core][slot] = Some(t.thread);
        place[i] = Some((core, slot));
    }
    let place: Vec<(usize, usize)> = place.into_iter().flatten().collect();

    // Step 5: pull the threads of one process together.
    let final_ = group_processes(threads, &core_domain, &filled, place);

    Solution {
        layout,
        initial,
        filled,
        final_,
    }
}

/// Inserts `value` into the set at `key`.
fn index_insert<K: Ord, V: Ord>(map: &mut BTreeMap<K, BTreeSet<V>>, key: K, value: V) {
    map.entry(key).or_default().insert(value);
}

/// Removes `value` from the set at `key`, dropping the set when it empties
/// (so a key present always has a non-empty set).
fn index_remove<K: Ord + Copy, V: Ord>(map: &mut BTreeMap<K, BTreeSet<V>>, key: K, value: &V) {
    if let Some(set) = map.get_mut(&key) {
        set.remove(value);
        if set.is_empty() {
            map.remove(&key);
        }
    }
}

/// The smallest value stored under a key other than `except`.
fn first_except<K: Ord + Copy, V: Ord + Copy>(
    map: &BTreeMap<K, BTreeSet<V>>,
    except: K,
) -> Option<(K, V)> {
    // Keys are unique, so at most two entries are looked at.
    map.iter()
        .find(|(k, _)| **k != except)
        .and_then(|(k, set)| set.first().map(|v| (*k, *v)))
}

/// Process (dense id) -> the (core, slot)s its threads hold, for one
/// domain and class.
type SlotIndex = BTreeMap<usize, BTreeSet<(usize, usize)>>;

/// Domain -> visiting ranks of a process's threads not visited yet, for one
/// process and class.
type RankIndex = BTreeMap<usize, BTreeSet<usize>>;

/// Step 5 of [`solve`]: the multithreaded pass of §3.3.3 on the filled
/// grid; `place[i]` is where input thread `i` sits in it.
fn group_processes(
    threads: &[Slotted],
    core_domain: &[usize],
    filled: &[Vec<Option<u64>>],
    mut place: Vec<(usize, usize)>,
) -> Vec<Vec<Option<u64>>> {
    let n = threads.len();
    // Dense process ids, in ascending process order.
    let mut pids: Vec<i64> = threads.iter().map(|t| t.process).collect();
    pids.sort_unstable();
    pids.dedup();
    let proc_of: Vec<usize> = threads
        .iter()
        .map(|t| pids.binary_search(&t.process).unwrap_or(0))
        .collect();
    let domains = core_domain.iter().max().map_or(0, |&d| d + 1);

    // Visiting order: by slot after filling.
    let mut visit: Vec<usize> = (0..n).collect();
    visit.sort_unstable_by_key(|&i| place[i]);
    let mut rank = vec![0; n];
    for (r, &i) in visit.iter().enumerate() {
        rank[i] = r;
    }
    // at[core][slot]: input index of the thread there.
    let mut at: Vec<Vec<usize>> = filled.iter().map(|s| vec![usize::MAX; s.len()]).collect();
    // Whether thread i may leave domain d: not when d holds its memory.
    let movable = |i: usize, d: usize| threads[i].home != Some(d);
    // occupants[domain][class]: process -> slots it holds there, of the
    // threads that may leave the domain.
    let mut occupants: Vec<[SlotIndex; 3]> = (0..domains).map(|_| Default::default()).collect();
    // pending[process][class]: domain -> ranks of threads not visited yet
    // that may leave the domain.
    let mut pending: Vec<[RankIndex; 3]> = (0..pids.len()).map(|_| Default::default()).collect();
    // count[domain * processes + process]: its threads there, any class.
    let np = pids.len();
    let mut count = vec![0usize; domains * np];
    for i in 0..n {
        let (core, slot) = place[i];
        let (d, c, p) = (core_domain[core], threads[i].class.index(), proc_of[i]);
        at[core][slot] = i;
        if movable(i, d) {
            index_insert(&mut occupants[d][c], p, (core, slot));
            index_insert(&mut pending[p][c], d, rank[i]);
        }
        count[d * np + p] += 1;
    }

    for (r, &a) in visit.iter().enumerate() {
        let p = proc_of[a];
        let da = core_domain[place[a].0];
        index_remove(&mut pending[p][threads[a].class.index()], da, &r);
        for c in 0..3 {
            // Each round of this loop is one swap, so it ends.
            while let (Some((db, rb)), Some((q, c_place))) = (
                first_except(&pending[p][c], da),
                first_except(&occupants[da][c], p),
            ) {
                let b = visit[rb];
                let b_place = place[b];
                let ci = at[c_place.0][c_place.1];
                // Our addition: swap only when it gathers more than it
                // scatters (pairs of same-process threads sharing a domain
                // grow). The pass as written may undo, next round, what it
                // did this round, and then DINO would move threads every
                // second for nothing; with this rule every swap raises that
                // count, so the placement settles.
                let gain = count[da * np + p] + 1 + count[db * np + q] + 1;
                let loss = count[db * np + p] + count[da * np + q];
                if gain <= loss {
                    break;
                }
                count[da * np + p] += 1;
                count[db * np + p] -= 1;
                count[db * np + q] += 1;
                count[da * np + q] -= 1;
                // B moves into A's domain, C takes B's old slot; each is
                // indexed in its new domain only if it may leave that too.
                index_remove(&mut occupants[db][c], p, &b_place);
                index_remove(&mut occupants[da][c], q, &c_place);
                if movable(b, da) {
                    index_insert(&mut occupants[da][c], p, c_place);
                }
                if movable(ci, db) {
                    index_insert(&mut occupants[db][c], q, b_place);
                }
                index_remove(&mut pending[p][c], db, &rb);
                if movable(b, da) {
                    index_insert(&mut pending[p][c], da, rb);
                }
                if rank[ci] > r {
                    index_remove(&mut pending[q][c], da, &rank[ci]);
                    if movable(ci, db) {
                        index_insert(&mut pending[q][c], db, rank[ci]);
                    }
                }
                place[b] = c_place;
                place[ci] = b_place;
                at[c_place.0][c_place.1] = b;
                at[b_place.0][b_place.1] = ci;
            }
        }
    }

    at.iter()
        .map(|slots| {
            slots
                .iter()
                .map(|&i| threads.get(i).map(|t| t.thread))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests;
