//! `symbiosis`: symbiotic scheduling on shared caches from cache-footprint
//! signatures (\[Symbiosis-Bloom\]).
//!
//! **Signatures (§3.1-3.2).** Each task comes with what the counting
//! Bloom filter of its cache recorded when it last left its CPU: its
//! *occupancy weight* (ones in its running bit vector) and its *symbiosis*
//! with every other CPU of the cache (ones in RBV XOR that CPU's core
//! filter; high means little overlap). The simulator has the hardware
//! (`numaplace-sim`'s `bloom` module) and fills `Snapshot::signatures`. A
//! live host has none: when the snapshot carries no signatures, this
//! policy builds an approximation from sampled data addresses
//! (`Snapshot::samples`), see [`live`], and so asks for samples.
//!
//! **Algorithms (§3.3), parameter `algorithm`:**
//! - `weight-sorting` (§3.3.1): tasks sorted by occupancy weight, cut into
//!   groups of `ceil(P/N)`, one group per core, so the heaviest time-share
//!   a core and never run together;
//! - `interference-graph` (§3.3.2): interference = 1/symbiosis, the two
//!   directions of each edge added, the graph split by a balanced minimum
//!   cut (exact up to `exact-limit` tasks, Kernighan-Lin beyond), applied
//!   hierarchically for more than two cores;
//! - `weighted-interference-graph` (§3.3.3, the default; the best of the
//!   three in §5.2): each direction multiplied by the weight of its source,
//!   so two small footprints no longer look like a heavy conflict.
//!
//! With `two-phase` (§3.3.4), the threads of a multithreaded process are
//! first grouped among themselves by weight sorting, and the graph then
//! keeps those groups together and apart. A VM is a process whose threads
//! are vCPUs: its signatures are its vCPU threads' (per-VM signatures,
//! §3.1 last paragraph), so the same rules place VMs.
//!
//! **Bigger machines.** Cores that share a cache are grouped by LLC; with
//! several LLC domains, tasks are first split between domains so that the
//! heavy interferers are apart, then grouped onto cores inside each
//! domain ([`place`]).
//!
//! **Stability.** The paper's allocator runs every 100 ms and the mapping
//! chosen most often is kept (§4.1). Here a new placement is applied only
//! when some task is not yet on one core, or when it lowers the modelled
//! interference between co-running tasks by at least `min-gain-percent`.
//!
//! **Left alone.** Threads outside the scope, threads that chose their own
//! CPUs (as the engine requires), threads without a signature.

pub mod live;
pub mod partition;
pub mod place;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use numaplace_model::task::printable;
use numaplace_model::{Action, CacheSignature, CpuSet, Plan, TaskId, Topology};

use crate::{Needs, Policy, Signal, View};
use place::{Member, Options};

/// Which of §3.3's algorithms decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// §3.3.1: sort by occupancy weight, group in sorted order.
    WeightSorting,
    /// §3.3.2: interference graph (1/symbiosis), balanced min-cut.
    InterferenceGraph,
    /// §3.3.3: interference weighted by occupancy, balanced min-cut.
    #[default]
    WeightedInterferenceGraph,
}

impl Algorithm {
    /// Every algorithm, in §3.3's order.
    pub const ALL: [Algorithm; 3] = [
        Algorithm::WeightSorting,
        Algorithm::InterferenceGraph,
        Algorithm::WeightedInterferenceGraph,
    ];

    /// Its name, as `algorithm` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::WeightSorting => "weight-sorting",
            Algorithm::InterferenceGraph => "interference-graph",
            Algorithm::WeightedInterferenceGraph => "weighted-interference-graph",
        }
    }
}

/// The policy's parameters (`[policy]` with `name = "symbiosis"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    default,
    deny_unknown_fields,
    rename_all = "kebab-case",
    remote = "Self"
)]
pub struct SymbiosisParams {
    /// Which of §3.3's algorithms decides.
    pub algorithm: Algorithm,
    /// §3.3.4's two phases for multithreaded processes (and VMs).
    pub two_phase: bool,
    /// Largest number of tasks split by trying every balanced split;
    /// beyond, Kernighan-Lin. 2 to 20 (C(20,10) splits take milliseconds).
    pub exact_limit: usize,
    /// A new placement replaces a complete one only if it lowers the
    /// modelled interference between co-running tasks by this much, %.
    pub min_gain_percent: f64,
    /// Live hosts: the software filter has `2^live-filter-bits` entries
    /// (default 13: 8192 bits, the 1 KB RBV of §5.5). 6 to 20.
    pub live_filter_bits: u32,
    /// Live hosts: rounds of address samples that make one signature.
    pub live_window_rounds: usize,
}

impl Default for SymbiosisParams {
    fn default() -> Self {
        SymbiosisParams {
            algorithm: Algorithm::default(),
            two_phase: true,
            exact_limit: 16,
            min_gain_percent: 5.0,
            live_filter_bits: 13,
            live_window_rounds: 8,
        }
    }
}

checked_params!(SymbiosisParams);

/// Checks the ranges; the error names the key and what to give. The serde
/// conversion calls it, so config, replay and simulator all check them.
impl crate::Params for SymbiosisParams {
    fn validate(&self) -> Result<(), String> {
        if !(2..=20).contains(&self.exact_limit) {
            return Err(format!(
                "symbiosis: exact-limit {} out of range: give 2 to 20 tasks",
                self.exact_limit
            ));
        }
        if !(0.0..100.0).contains(&self.min_gain_percent) {
            return Err(format!(
                "symbiosis: min-gain-percent {} out of range: give a percentage in [0, 100)",
                self.min_gain_percent
            ));
        }
        if !(6..=20).contains(&self.live_filter_bits) {
            return Err(format!(
                "symbiosis: live-filter-bits {} out of range: give 6 to 20",
                self.live_filter_bits
            ));
        }
        if self.live_window_rounds == 0 {
            return Err("symbiosis: live-window-rounds must be at least 1".into());
        }
        Ok(())
    }
}

/// The `symbiosis` policy. See the module documentation.
pub struct Symbiosis {
    params: SymbiosisParams,
    ours: HashMap<TaskId, CpuSet>,
    windows: live::SampleWindows,
}

/// A task this round.
struct Candidate {
    id: TaskId,
    tgid: i32,
    label: String,
    allowed: CpuSet,
    /// The CPUs its cgroup confines it to, if any: its pins stay within
    /// them ([`crate::confine`]).
    confined: Option<CpuSet>,
    /// The CPU it last ran on.
    last_cpu: Option<u32>,
    sig: CacheSignature,
}

/// The CPUs numaplace may use, grouped by LLC domain: the places
/// (\[Symbiosis-Bloom\]'s "cores") that tasks time-share.
///
/// A place is one hardware thread, not a whole core: tasks given one CPU
/// take turns and never run together, which is what the paper's pairing
/// relies on, while tasks on two hardware threads of one SMT core run at
/// the same time and share even the core's private caches. Each domain
/// lists the first hardware thread of every core before any second one,
/// so with fewer tasks than CPUs every core gets one task before any core
/// gets two.
struct Domains {
    /// Per domain: its LLC (dense id) and its places, one CPU each.
    list: Vec<(usize, Vec<CpuSet>)>,
}

impl Domains {
    /// The LLC domains of the CPUs of `within` (numaplace's CPUs of one
    /// node).
    fn new(t: &Topology, within: &CpuSet) -> Domains {
        let mut list = Vec::new();
        for llc in t.llcs() {
            let cores: Vec<Vec<u32>> = llc
                .cores
                .iter()
                .map(|&c| {
                    t.cores()[c]
                        .span
                        .intersection(t.span())
                        .intersection(within)
                        .iter()
                        .collect()
                })
                .filter(|cpus: &Vec<u32>| !cpus.is_empty())
                .collect();
            let depth = cores.iter().map(Vec::len).max().unwrap_or(0);
            let mut places = Vec::new();
            for k in 0..depth {
                for cpus in &cores {
                    if let Some(&cpu) = cpus.get(k) {
                        let mut one = CpuSet::new();
                        one.insert(cpu);
                        places.push(one);
                    }
                }
            }
            if !places.is_empty() {
                list.push((llc.id, places));
            }
        }
        Domains { list }
    }

    /// The domain holding `cpu`.
    fn domain_of(&self, cpu: u32) -> Option<usize> {
        self.list
            .iter()
            .position(|(_, places)| places.iter().any(|p| p.contains(cpu)))
    }

    /// The (domain, core) whose CPUs are exactly `cpus`.
    fn find(&self, cpus: &CpuSet) -> Option<(usize, usize)> {
        self.list
            .iter()
            .enumerate()
            .find_map(|(d, (_, cores))| cores.iter().position(|c| c == cpus).map(|k| (d, k)))
    }
}

impl Symbiosis {
    /// The policy with `params`, knowing nothing yet.
    pub fn new(params: SymbiosisParams) -> Symbiosis {
        Symbiosis {
            params,
            ours: HashMap::new(),
            windows: live::SampleWindows::default(),
        }
    }

    fn candidates(&self, view: &View<'_>, sigs: &BTreeMap<i32, CacheSignature>) -> Vec<Candidate> {
        let s = view.snapshot;
        let span = view.topology.span();
        let labels = view.labels();
        let mut out = Vec::new();
        for t in &s.tasks {
            if !view.placeable(t, &self.ours) {
                continue;
            }
            let Some(sig) = sigs.get(&t.tid) else {
                continue;
            };
            if !span.contains(sig.cpu) {
                continue;
            }
            out.push(Candidate {
                id: t.id(),
                tgid: t.tgid,
                label: labels
                    .get(&t.tgid)
                    .cloned()
                    .unwrap_or_else(|| printable(&t.comm)),
                allowed: t.allowed_cpus.clone(),
                confined: t.confined_cpus.clone(),
                last_cpu: t.last_cpu,
                sig: sig.clone(),
            });
        }
        out
    }
}

impl Policy for Symbiosis {
    fn name(&self) -> &'static str {
        "symbiosis"
    }

    /// The paper's allocator runs every 100 ms (§4.1); a second is enough
    /// for processes that run for minutes and keeps the samples useful.
    fn default_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }

    fn needs(&self) -> Needs {
        Needs {
            counters: false,
            memory: true,
            samples: true,
            page_sets: false,
        }
    }

    fn without(&self, signal: Signal) -> Option<String> {
        match signal {
            Signal::Samples => Some(
                "builds each thread's cache signature from its sampled data addresses \
                 ([Symbiosis-Bloom]'s Bloom filters exist only in the simulator), which are not \
                 sampled here: no thread has a signature, so it leaves every one where it is"
                    .into(),
            ),
            Signal::LlcOccupancy => Some(
                "weighs threads by the lines they were sampled on instead of their LLC \
                 occupancy (resctrl)"
                    .into(),
            ),
            _ => None,
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let mut plan = Plan::default();
        let p = &self.params;
        self.windows.update(view.snapshot, p.live_window_rounds);
        let built;
        let (sigs, source) = if view.snapshot.signatures.is_empty() {
            built = self
                .windows
                .signatures(view.topology, view.snapshot, p.live_filter_bits);
            (&built, "signature from sampled addresses")
        } else {
            (&view.snapshot.signatures, "Bloom-filter signature")
        };
        let cands = self.candidates(view, sigs);
        let alive: std::collections::HashSet<TaskId> = cands.iter().map(|c| c.id).collect();
        self.ours.retain(|k, _| alive.contains(k));
        // [Symbiosis-Bloom] pairs tasks on the caches of one memory node (a Core 2
        // Duo). Here a task whose memory (its own sampled addresses, else
        // its process's) is mostly on one node ([`thread_home`]) is placed
        // on that node's caches and cores, never away from its
        // memory; the others (memory spread or not known) are dealt out
        // over the nodes heaviest first, each to the node with the fewest
        // tasks per core, then the least occupancy weight, so the heavy
        // ones end apart.
        let t = view.topology;
        let homes = memory_homes(view);
        if cands.iter().all(|c| thread_home(view, c, &homes).is_none()) {
            // No task's memory ties it to a node: the whole machine is
            // one pool, as in [Symbiosis-Bloom].
            self.place_on_node(view, None, &cands, source, &mut plan);
            return plan;
        }
        let mut by_node: BTreeMap<usize, Vec<Candidate>> = BTreeMap::new();
        let mut free = Vec::new();
        for c in cands {
            match thread_home(view, &c, &homes) {
                Some(node) => by_node.entry(node).or_default().push(c),
                None => free.push(c),
            }
        }
        // A node keeps no more of its tasks than it has cores while
        // another node has room: the rest are dealt out with the free ones
        // (CPU time first, as Linux's balancing would; lightest first, so
        // the heavy stay by their memory).
        let room: usize = t
            .cpu_nodes()
            .map(|n| {
                n.cores
                    .len()
                    .saturating_sub(by_node.get(&n.id).map_or(0, Vec::len))
            })
            .sum();
        if room > 0 {
            for (&node, tasks) in by_node.iter_mut() {
                let cores = t.nodes()[node].cores.len();
                if tasks.len() > cores {
                    tasks.sort_by(|a, b| {
                        b.sig
                            .occupancy_weight
                            .cmp(&a.sig.occupancy_weight)
                            .then(a.id.tid.cmp(&b.id.tid))
                    });
                    free.extend(tasks.drain(cores..));
                }
            }
        }
        deal(t, &mut by_node, free);
        for (node, cands) in by_node {
            self.place_on_node(view, Some(node), &cands, source, &mut plan);
        }
        plan
    }
}

/// The tasks whose memory ties them to no node (`free`) dealt out over
/// the nodes. First each stays on the node it is on (pinned there, else
/// last ran there) while that node holds fewer than its share of all the
/// tasks (in proportion to its cores, rounded up); the rest go heaviest
/// first, each to the node with the fewest tasks per core, then the
/// least occupancy weight, so the heavy ones end apart.
///
/// Our choice, measured: dealt anew every round, the noise in sampled
/// signatures reordered the tasks and sent about ten threads a round to
/// the other node (mix:53057, 16 threads with interleaved memory: 34,000
/// thread moves an hour, +16 % against Linux).
fn deal(t: &Topology, by_node: &mut BTreeMap<usize, Vec<Candidate>>, mut free: Vec<Candidate>) {
    free.sort_by(|a, b| {
        b.sig
            .occupancy_weight
            .cmp(&a.sig.occupancy_weight)
            .then(a.id.tid.cmp(&b.id.tid))
    });
    let nodes: Vec<&numaplace_model::topology::Node> = t
        .cpu_nodes()
        .filter(|n| !n.span.intersection(t.span()).is_empty())
        .collect();
    let all_cores: usize = nodes.iter().map(|n| n.cores.len()).sum::<usize>().max(1);
    let tasks = free.len() + by_node.values().map(Vec::len).sum::<usize>();
    let share = |n: &numaplace_model::topology::Node| (tasks * n.cores.len()).div_ceil(all_cores);
    let on = |c: &Candidate| -> Option<usize> {
        nodes
            .iter()
            .find(|n| !c.allowed.is_empty() && c.allowed.is_subset(&n.span))
            .map(|n| n.id)
            .or_else(|| {
                c.last_cpu
                    .and_then(|cpu| t.cpu_by_os_id(cpu))
                    .map(|cpu| cpu.node)
            })
    };
    let mut rest = Vec::new();
    for c in free {
        let stay = on(&c).and_then(|id| nodes.iter().find(|n| n.id == id));
        match stay {
            Some(n) if by_node.get(&n.id).map_or(0, Vec::len) < share(n) => {
                by_node.entry(n.id).or_default().push(c);
            }
            _ => rest.push(c),
        }
    }
    for c in rest {
        let load = |n: usize, by: &BTreeMap<usize, Vec<Candidate>>| {
            let tasks = by.get(&n).map_or(&[][..], |v| &v[..]);
            let cores = t.nodes()[n].cores.len().max(1) as f64;
            let weight: u64 = tasks
                .iter()
                .map(|x| u64::from(x.sig.occupancy_weight))
                .sum();
            (tasks.len() as f64 / cores, weight)
        };
        let best = nodes.iter().map(|n| n.id).min_by(|&a, &b| {
            let (la, wa) = load(a, by_node);
            let (lb, wb) = load(b, by_node);
            la.total_cmp(&lb).then(wa.cmp(&wb)).then(a.cmp(&b))
        });
        if let Some(node) = best {
            by_node.entry(node).or_default().push(c);
        }
    }
}

/// The node holding a task's memory: where its own sampled data
/// addresses are mostly (at least [`crate::dino::aside::ANCHOR_SHARE`] of
/// them), where it has enough; else where its hinting faults are mostly,
/// where the kernel balances and it took enough; else its process's node
/// (`homes`). Threads
/// of one process each first-touch their own data on the node they run
/// on, so a process's memory "mostly on node 0" can be the memory of five
/// threads of eight there and of three elsewhere: judged by the process,
/// all eight were placed on node 0's cache and memory controller
/// (measured: +18 % on a generated mix of one 8-vCPU VM).
fn thread_home(view: &View<'_>, c: &Candidate, homes: &BTreeMap<i32, usize>) -> Option<usize> {
    let t = view.topology;
    let samples = view
        .snapshot
        .samples
        .get(&c.id.tid)
        .map_or(&[][..], |v| &v[..]);
    let cpu_nodes: Vec<u32> = t
        .cpu_nodes()
        .filter(|n| !n.span.intersection(t.span()).is_empty())
        .map(|n| n.os_id)
        .collect();
    // The thread's own accesses first: sampled addresses, else its
    // hinting faults (the kernel balancing, no PMU); the process's node
    // only where neither says anything.
    let faults = view.snapshot.numa_faults.get(&c.id.tid);
    match crate::dino::aside::home(samples, faults, None, &cpu_nodes) {
        Some((crate::dino::aside::Home::Anchored(os), _)) => t.node_by_os_id(os).map(|n| n.id),
        Some((crate::dino::aside::Home::Spread, _)) => None,
        None => homes.get(&c.tgid).copied(),
    }
}

/// Each process in scope whose memory is more than half on one node with
/// CPUs: that node (dense id).
fn memory_homes(view: &View<'_>) -> BTreeMap<i32, usize> {
    let t = view.topology;
    let mut out = BTreeMap::new();
    for g in &view.snapshot.groups {
        let Some(mem) = g.memory_total() else {
            continue;
        };
        let total: u64 = mem.values().sum();
        let majority = mem.iter().find(|(_, b)| **b * 2 > total);
        if let Some(n) = majority.and_then(|(&os, _)| t.node_by_os_id(os)) {
            if !n.span.intersection(t.span()).is_empty() {
                out.insert(g.pid, n.id);
            }
        }
    }
    out
}

impl Symbiosis {
    /// Places the tasks `cands` given to `node` on that node's places.
    fn place_on_node(
        &mut self,
        view: &View<'_>,
        node: Option<usize>,
        cands: &[Candidate],
        source: &str,
        plan: &mut Plan,
    ) {
        let p = &self.params;
        let t = view.topology;
        let (span, cores, name) = node_scope(t, node);
        let doms = Domains::new(t, &span);
        if cands.is_empty() || doms.list.is_empty() {
            return;
        }
        // Its premise: tasks that take turns on cores or share one of
        // several caches. Fewer tasks than the node's cores and one cache:
        // every task has a core to itself and nothing to pair, so Linux
        // keeps balancing them (tasks pinned earlier get the node back).
        if doms.list.len() == 1 && cands.len() <= cores {
            self.nothing_to_pair(t, cands, (&span, cores, &name), plan);
            return;
        }
        if cands.len() < 2 {
            return;
        }
        let members = members(cands, &doms);
        let cores: Vec<usize> = doms.list.iter().map(|(_, c)| c.len()).collect();
        let o = Options {
            algorithm: p.algorithm,
            two_phase: p.two_phase,
            exact_limit: p.exact_limit,
        };
        let made = place::place(&members, &cores, o);
        let g = place::interference(p.algorithm, &members);
        let made_cost = place::co_run_cost(&g, &made);
        // The present placement, mended where tasks came, went or were
        // never placed ([`place::repair`]): kept unless placing every
        // task anew gains `min_gain_percent` on it.
        let mended = place::repair(&members, &g, &cores);
        let mended_cost = mended.as_ref().map(|n| place::co_run_cost(&g, n));
        let (new, change) = match (mended, mended_cost) {
            (Some(kept), Some(old)) if made_cost >= old * (1.0 - p.min_gain_percent / 100.0) => {
                let unchanged = kept.iter().zip(&members).all(|(k, m)| m.now == Some(*k));
                if unchanged {
                    // Not enough to gain: every task stays where it is.
                    for c in cands {
                        self.ours.insert(c.id, c.allowed.clone());
                    }
                    return;
                }
                let change = format!(
                    "the others stay where they are (modelled interference between co-running \
                     tasks {old:.3}; placing every task anew: {made_cost:.3}, which gains less than \
                     the {} % it takes to move them)",
                    p.min_gain_percent
                );
                (kept, change)
            }
            (_, Some(old)) => (
                made,
                format!(
                    "modelled interference between co-running tasks {old:.3} -> {made_cost:.3}"
                ),
            ),
            _ => (
                made,
                format!(
                    "first placement, modelled interference between co-running tasks {made_cost:.3}"
                ),
            ),
        };
        let alg = p.algorithm.name();
        let shared = uneven(&doms, &new);
        for (i, c) in cands.iter().enumerate() {
            let (d, k) = new[i];
            let llc = &doms.list[d].0;
            let place = match &shared[d] {
                Some(all) => all,
                None => &doms.list[d].1[k],
            };
            let Some(core_cpus) = &crate::confine(t, c.confined.as_ref(), place) else {
                continue;
            };
            let who = format!("thread {} of {}", c.id.tid, c.label);
            let (partner, apart) = match &shared[d] {
                Some(_) => (uneven_words(&new, d, doms.list[d].1.len()), String::new()),
                None => co_runners(i, cands, &members, &g, &new),
            };
            if c.allowed != *core_cpus {
                plan.push(
                    Action::Pin {
                        task: c.id,
                        tgid: c.tgid,
                        cpus: core_cpus.clone(),
                    },
                    format!(
                        "symbiosis ({alg}): {who} ({source}: occupancy weight {} of {}) to CPUs {core_cpus} (LLC {llc}): {partner}{apart}; {change}",
                        c.sig.occupancy_weight, c.sig.entries
                    ),
                );
            }
            self.ours.insert(c.id, core_cpus.clone());
        }
    }

    /// The tasks of a node with one cache and a core for each: left to
    /// Linux within the node's CPUs (`span`, of `cores` cores, called
    /// `name`).
    fn nothing_to_pair(
        &mut self,
        t: &Topology,
        cands: &[Candidate],
        (span, cores, name): (&CpuSet, usize, &str),
        plan: &mut Plan,
    ) {
        for c in cands {
            let Some(span) = crate::confine(t, c.confined.as_ref(), span) else {
                continue;
            };
            if c.allowed != span {
                plan.push(
                    Action::Pin {
                        task: c.id,
                        tgid: c.tgid,
                        cpus: span.clone(),
                    },
                    format!(
                        "symbiosis: thread {} of {} to {name}'s CPUs {span}, left to Linux \
                         within them: its {} tasks fit its {cores} cores and share one \
                         cache, so there is nothing to pair ([Symbiosis-Bloom]'s premise: tasks that \
                         take turns on cores)",
                        c.id.tid,
                        c.label,
                        cands.len(),
                    ),
                );
            }
            self.ours.insert(c.id, span.clone());
        }
    }
}

/// The CPUs numaplace may use on `node` (or the machine), its cores and
/// its name for the reasons.
fn node_scope(t: &Topology, node: Option<usize>) -> (CpuSet, usize, String) {
    match node {
        Some(n) => {
            let n = &t.nodes()[n];
            (
                n.span.intersection(t.span()),
                n.cores.len(),
                format!("node {}", n.os_id),
            )
        }
        None => (t.span().clone(), t.cores().len(), "the machine".to_string()),
    }
}

/// The tasks as the placement reads them: signature and where each is.
fn members(cands: &[Candidate], doms: &Domains) -> Vec<Member> {
    cands
        .iter()
        .map(|c| Member {
            tid: c.id.tid,
            tgid: c.tgid,
            weight: f64::from(c.sig.occupancy_weight),
            entries: f64::from(c.sig.entries.max(1)),
            cpu: c.sig.cpu,
            symbiosis: c.sig.symbiosis.clone(),
            // Where it is: its place if we pinned it there, else the
            // domain it last ran in (no place in it), so the first
            // split moves as few threads away from the cache and, on
            // first touch, the memory they have.
            now: doms.find(&c.allowed).or_else(|| {
                c.last_cpu
                    .and_then(|cpu| doms.domain_of(cpu))
                    .map(|d| (d, usize::MAX))
            }),
        })
        .collect()
}

/// Per domain, its CPUs where its tasks outnumber its places unevenly
/// (some places would get one task more than others), else `None`.
///
/// \[Symbiosis-Bloom\] groups P tasks on N cores, ceil(P/N) per core (§3.3);
/// where N does not divide P, the tasks on the fuller cores get a smaller
/// share of a CPU than the others, for as long as they are pinned, where
/// Linux would share the CPUs evenly by turns. Measured: mix:58005 (20
/// threads on westmere-2s's 16 CPUs), three single-thread programs each
/// held on a CPU shared with another task for the whole run, half a CPU
/// where Linux gives each 16/20 of one: 12 % slower than under Linux. So
/// such a domain's tasks keep the domain the placement chose (the heavy
/// interferers still split between caches) and Linux time-shares its CPUs
/// evenly among them.
fn uneven(doms: &Domains, new: &[(usize, usize)]) -> Vec<Option<CpuSet>> {
    (doms.list.iter().enumerate())
        .map(|(d, (_, places))| {
            let tasks = new.iter().filter(|(nd, _)| *nd == d).count();
            (tasks > places.len() && tasks % places.len() != 0).then(|| {
                let mut all = CpuSet::new();
                for p in places {
                    all = all.union(p);
                }
                all
            })
        })
        .collect()
}

/// For the reason of a task in an [`uneven`] domain.
fn uneven_words(new: &[(usize, usize)], d: usize, places: usize) -> String {
    let tasks = new.iter().filter(|(nd, _)| *nd == d).count();
    let (q, r) = (tasks / places, tasks % places);
    format!(
        "left to Linux among the LLC's {places} CPUs with its {tasks} tasks: pinned one place \
         each, {} of them would take turns {} to a CPU for as long as they run and the others \
         {q} to one, where Linux shares the CPUs evenly by turns",
        r * (q + 1),
        q + 1
    )
}

/// For task `i`'s reason: the task it time-shares its core with (or that
/// it is alone), and its strongest co-runner on another core of its LLC.
fn co_runners(
    i: usize,
    cands: &[Candidate],
    members: &[Member],
    g: &partition::Graph,
    new: &[(usize, usize)],
) -> (String, String) {
    let (d, k) = new[i];
    let mates: Vec<usize> = (0..cands.len())
        .filter(|&j| j != i && new[j] == new[i])
        .collect();
    let partner = match mates
        .iter()
        .max_by(|&&a, &&b| g.get(i, a).total_cmp(&g.get(i, b)))
    {
        Some(&j) => {
            let (s, measured) = place::symbiosis_of(&members[i], &members[j]);
            let measured = measured
                .map(|m| format!(", {m} with its CPU {}", members[j].cpu))
                .unwrap_or_default();
            format!(
                "time-shares the core with thread {} of {} (weight {}, interference {:.3}, pair symbiosis {:.0}{measured}), so the two never run at the same time",
                cands[j].id.tid,
                cands[j].label,
                members[j].weight,
                g.get(i, j),
                s,
            )
        }
        None => "alone on its core".to_string(),
    };
    let apart = (0..cands.len())
        .filter(|&j| new[j].0 == d && new[j].1 != k)
        .max_by(|&a, &b| g.get(i, a).total_cmp(&g.get(i, b)))
        .map(|j| {
            format!(
                "; its strongest co-runner in this LLC is thread {} of {} (interference {:.3})",
                cands[j].id.tid,
                cands[j].label,
                g.get(i, j)
            )
        })
        .unwrap_or_default();
    (partner, apart)
}

#[cfg(test)]
mod tests;
