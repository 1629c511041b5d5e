//! `numad-like`: the peer baseline, after numad's documented behaviour
//! (numad(8); numad.c of numad 0.5): processes big enough to matter — at
//! least 300 MB of memory or half a CPU (`MEMORY_THRESHOLD`,
//! `CPU_THRESHOLD`) — are each placed on the node with the most free CPU
//! and free memory (numad ranks nodes by the product of the two, its
//! "magnitude") among the nodes where both its memory and its CPU use fit
//! (a core's further hardware threads count a fifth of a CPU each, numad's
//! `-t 20`: without that, a 4-vCPU memory-bound VM was packed onto the two
//! cores of one node, 30 % slower than Linux on mix:186), their threads
//! bound to that node's CPUs and their memory moved there; a process moved is not looked at again for a while
//! (numad's "done too recently"), so placements stay put. Where the
//! round has the nodes' `numastat`, a node that turned away allocations
//! meant for it ranks after those that did not (`numad/spill.rs`).

mod spill;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use numaplace_model::task::printable;
use numaplace_model::{Action, CpuSet, Node, NodeSet, Plan, Snapshot, TaskGroup, TaskId, Topology};

use crate::{Needs, Policy, View};

/// The numad-like policy's parameters (`[policy]` with
/// `name = "numad-like"`), numad's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NumadParams {
    /// A process is big enough to place from this much memory, MiB
    /// (numad: 300 MB).
    pub min_memory_mib: u64,
    /// ... or from this share of one CPU, percent (numad: 50).
    pub min_cpu_percent: u64,
    /// What a core's second (third, ...) hardware thread adds to a node's
    /// CPU room, percent of a core (numad's `-t`, default 20: "hardware
    /// threads typically share most core resources", numad(8); numad.c
    /// discounts each node's free CPU by the rest). 100 counts every
    /// hardware thread as a CPU.
    pub htt_percent: u64,
    /// A process placed is left alone this long, seconds.
    pub cooldown_secs: u64,
    /// Move the process's memory with its threads.
    pub move_memory: bool,
    /// Where the process fits on the node holding most of its memory,
    /// that node (nothing to move); otherwise, among the nodes it fits,
    /// the one whose memory is the least busy (the fewest LLC misses per
    /// second from the threads running there, the process's own left out:
    /// \[Blagodurov11\]'s distributed intensity) where misses are counted, numad's
    /// roomiest otherwise: `auto`'s choice. Off for `numad-like`, as numad.
    pub prefer_quiet_node: bool,
}

impl Default for NumadParams {
    fn default() -> Self {
        NumadParams {
            min_memory_mib: 300,
            min_cpu_percent: 50,
            htt_percent: 20,
            cooldown_secs: 60,
            move_memory: true,
            prefer_quiet_node: false,
        }
    }
}

/// numad's placement: each process big enough gets the fewest, least
/// loaded nodes that hold it, its memory moved after it.
pub struct NumadLike {
    params: NumadParams,
    /// When each process was last placed (snapshot time, ns), and on
    /// which node (kernel id).
    placed: HashMap<TaskId, (u64, u32)>,
    /// Each thread's CPU time (ticks) at the last round.
    prev_ticks: HashMap<TaskId, u64>,
}

impl NumadLike {
    /// The policy with `params`, knowing nothing yet.
    pub fn new(params: NumadParams) -> Self {
        NumadLike {
            params,
            placed: HashMap::new(),
            prev_ticks: HashMap::new(),
        }
    }

    /// CPUs each thread used over the interval, from utime + stime.
    fn thread_cpus(&mut self, s: &Snapshot) -> HashMap<i32, f64> {
        let secs = s.interval_ns as f64 / 1e9;
        let hz = s.machine.clock_ticks.max(1) as f64;
        let mut out = HashMap::new();
        let mut next = HashMap::new();
        for t in &s.tasks {
            let ticks = t.utime + t.stime;
            if let Some(&prev) = self.prev_ticks.get(&t.id()) {
                if secs > 0.0 {
                    out.insert(t.tid, ticks.saturating_sub(prev) as f64 / hz / secs);
                }
            }
            next.insert(t.id(), ticks);
        }
        self.prev_ticks = next;
        out
    }
}

/// Free resources per node (dense id) as numad sees them.
#[derive(Debug, Clone, Copy, Default)]
struct NodeRoom {
    cpus: f64,
    memory: f64,
}

impl NodeRoom {
    fn magnitude(&self) -> f64 {
        self.cpus.max(0.0) * self.memory.max(0.0)
    }
}

fn mib(b: f64) -> String {
    format!("{:.0} MiB", b / (1 << 20) as f64)
}

impl Policy for NumadLike {
    fn name(&self) -> &'static str {
        "numad-like"
    }

    /// numad's own default interval is 5 to 15 s (`-i 5:15`, numad(8)).
    fn default_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(5)
    }

    /// numad looks at memory and CPU time, never at counters.
    fn needs(&self) -> Needs {
        Needs {
            counters: false,
            memory: true,
            samples: false,
            page_sets: false,
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let (t, s) = (view.topology, view.snapshot);
        let usage = self.thread_cpus(s);
        let mut plan = Plan::default();
        if s.interval_ns == 0 {
            return plan; // no CPU usage known yet
        }
        let mut room = node_room(t, s, &usage, self.params.htt_percent);
        let runnable = (s.tasks.iter())
            .filter(|k| k.state == 'R' && k.last_cpu.is_none_or(|c| t.span().contains(c)))
            .count();
        // Where no LLC misses rank the nodes (`numad/spill.rs`).
        let spills = spill::turned_away(t, s, self.params.prefer_quiet_node);

        for (g, cpus, mem) in self.big_enough(view, &usage) {
            if let Some(&(at, node)) = self.placed.get(&g.id()) {
                if s.time_unix_ns.saturating_sub(at) < self.params.cooldown_secs * 1_000_000_000 {
                    self.follow_memory(view, g, &mem, node, &mut plan);
                    continue;
                }
            }
            let p = Process::new(view, g, cpus, mem, &room, &usage);
            if let Some(left) = self.place(view, p, runnable, &spills, &mut plan) {
                room = left;
            }
        }
        plan
    }
}

/// A process numad may place this round, with what decides where it goes.
struct Process<'s> {
    g: &'s TaskGroup,
    /// The CPUs it used over the interval.
    cpus: f64,
    /// Its memory per node (kernel id), bytes, and in all.
    mem: BTreeMap<u32, u64>,
    total: u64,
    /// The node (dense id) holding most of its memory.
    home: Option<usize>,
    /// Every node's room, what the process holds itself counted as room
    /// where it is.
    room_for: Vec<NodeRoom>,
    /// The nodes its cpuset lets it have memory on; `None`: any.
    mems: Option<&'s NodeSet>,
    /// The CPUs its cgroup confines it to, if it does.
    confined: Option<&'s CpuSet>,
}

impl<'s> Process<'s> {
    fn new(
        view: &View<'s>,
        g: &'s TaskGroup,
        cpus: f64,
        mem: BTreeMap<u32, u64>,
        room: &[NodeRoom],
        usage: &HashMap<i32, f64>,
    ) -> Process<'s> {
        let (t, s) = (view.topology, view.snapshot);
        let total: u64 = mem.values().sum();
        let home = mem
            .iter()
            .max_by_key(|&(_, b)| *b)
            .and_then(|(&os, _)| t.node_by_os_id(os))
            .map(|n| n.id);
        // What the process itself holds counts as room where it is.
        let mut room_for = room.to_vec();
        for (&os, &b) in &mem {
            if let Some(n) = t.node_by_os_id(os) {
                room_for[n.id].memory += b as f64;
            }
        }
        for tid in &g.threads {
            let (Some(task), Some(u)) = (s.task(*tid), usage.get(tid)) else {
                continue;
            };
            if let Some(c) = task.last_cpu.and_then(|c| t.cpu_by_os_id(c)) {
                room_for[c.node].cpus += u;
            }
        }
        // Only nodes its cpuset lets it have memory on (Mems_allowed;
        // unknown: any).
        let mems = s
            .task(g.pid)
            .map(|m| &m.allowed_mems)
            .filter(|m| !m.is_empty());
        // Where its cgroup confines it (a libvirt domain, a pod,
        // `AllowedCPUs=`): of each node, the CPUs within that.
        let confined = (g.threads.iter())
            .filter_map(|&tid| s.task(tid))
            .find_map(|k| k.confined_cpus.as_ref());
        Process {
            g,
            cpus,
            mem,
            total,
            home,
            room_for,
            mems,
            confined,
        }
    }

    /// Of node `n`, the CPUs within the process's confinement.
    fn reach(&self, n: &Node) -> CpuSet {
        match self.confined {
            Some(c) => n.span.intersection(c),
            None => n.span.clone(),
        }
    }

    /// Its memory fits, and `free` CPUs of the node (within its
    /// confinement) hold its CPU use.
    ///
    /// numad places a process only where both its memory and its CPU use
    /// fit (numad.c asks for as many nodes as the process needs CPUs and
    /// memory): free memory, and as many CPUs as it uses (the roomiest
    /// such node is then taken, so other load counts in the choice); one
    /// that fits no node is left where it is (numad would spread it over
    /// several nodes, which Linux's own spreading already does).
    fn fits_with(&self, n: &Node, free: f64) -> bool {
        let free = match self.confined {
            Some(_) => free.min(self.reach(n).len() as f64),
            None => free,
        };
        (self.confined.is_none() || !self.reach(n).is_empty())
            && self.mems.is_none_or(|m| m.contains(n.os_id))
            && self.room_for[n.id].memory >= self.total as f64
            && free + CPU_SLACK >= self.cpus
    }
}

impl NumadLike {
    /// A process placed too recently to reconsider. But the engine's
    /// migration rate limit may have cut its memory move short: while its
    /// threads stay where they were put (node `node`), the rest of the
    /// memory follows, round by round.
    fn follow_memory(
        &self,
        view: &View<'_>,
        g: &TaskGroup,
        mem: &BTreeMap<u32, u64>,
        node: u32,
        plan: &mut Plan,
    ) {
        let (t, s) = (view.topology, view.snapshot);
        let total: u64 = mem.values().sum();
        let on_node = mem.get(&node).copied().unwrap_or(0);
        let still_there = t.node_by_os_id(node).is_some_and(|n| {
            g.threads
                .iter()
                .filter_map(|&tid| s.task(tid))
                .all(|task| task.allowed_cpus.is_subset(&n.span))
        });
        if self.params.move_memory && still_there && (on_node as f64) < 0.9 * total as f64 {
            plan.push(
                Action::MoveMemory {
                    process: g.id(),
                    to_node: node,
                    max_pages: None,
                },
                format!(
                    "numad-like: {} (pid {}) was placed on node {node} and {:.0}% of its {} \
                     is there so far: moving the rest (the migration rate limit spreads \
                     a move over rounds)",
                    printable(&g.label()),
                    g.pid,
                    100.0 * on_node as f64 / total.max(1) as f64,
                    mib(total as f64)
                ),
            );
        }
    }

    /// Places process `p` on the node numad (or, with
    /// `prefer_quiet_node`, auto) chooses: its threads' pins and its
    /// memory's move in `plan`. The nodes' room once it is there, for the
    /// next process; `None` where it fits no node or is there already.
    fn place<'t>(
        &mut self,
        view: &View<'t>,
        p: Process<'_>,
        runnable: usize,
        spills: &Option<Vec<f64>>,
        plan: &mut Plan,
    ) -> Option<Vec<NodeRoom>> {
        let (t, s) = (view.topology, view.snapshot);
        let (g, cpus, total) = (p.g, p.cpus, p.total);
        let quiet = self
            .params
            .prefer_quiet_node
            .then(|| misses_per_node(t, s, g.pid))
            .flatten();
        let home_node = self.home_node(t, &p, runnable);
        let fitting: Vec<&Node> = t
            .cpu_nodes()
            .filter(|n| p.fits_with(n, p.room_for[n.id].cpus))
            .collect();
        let ranks = quiet.as_deref().or(spills.as_deref());
        // None: fits no node.
        let best = home_node.or_else(|| roomiest(&fitting, &p.room_for, ranks))?;
        let on_best = p.mem.get(&best.os_id).copied().unwrap_or(0);
        let target = p.reach(best);
        let pinned = g
            .threads
            .iter()
            .filter_map(|&tid| s.task(tid))
            .all(|task| task.allowed_cpus.is_subset(&target));
        if pinned && (on_best as f64) >= 0.9 * total as f64 {
            return None; // already where numad would put it
        }
        let why = if home_node.is_some_and(|h| h.id == best.id) {
            format!(
                "numad-like: {} (pid {}) uses {} and {cpus:.2} CPUs; node {} holds {:.0}% of \
                 its memory and has room for it ({:.2} CPUs free): its threads go there, the \
                 rest of its memory after them",
                printable(&g.label()),
                g.pid,
                mib(total as f64),
                best.os_id,
                100.0 * on_best_share(&p.mem, best.os_id),
                p.room_for[best.id].cpus
            )
        } else {
            let among = spill::among(&fitting, best, &p.room_for, quiet.is_none(), spills);
            let room = (best, &p.room_for[best.id]);
            placement_reason(t, g, cpus, &p.mem, room, p.home, &among)
        };
        for &tid in &g.threads {
            let Some(task) = s.task(tid) else { continue };
            if task.allowed_cpus != target {
                plan.push(
                    Action::Pin {
                        task: task.id(),
                        tgid: g.pid,
                        cpus: target.clone(),
                    },
                    why.clone(),
                );
            }
        }
        if self.params.move_memory && on_best < total {
            plan.push(
                Action::MoveMemory {
                    process: g.id(),
                    to_node: best.os_id,
                    max_pages: None,
                },
                why.clone(),
            );
        }
        // Book the move so the next process sees the room it leaves.
        let mut room = p.room_for;
        room[best.id].memory -= total as f64;
        room[best.id].cpus -= cpus;
        self.placed.insert(g.id(), (s.time_unix_ns, best.os_id));
        Some(room)
    }

    /// auto's choice: where most of the memory already is, when the
    /// process fits there (nothing to move, cheap to try and undo).
    /// There the others' load on it need not leave it room, as
    /// long as the rest of the machine has idle CPUs to take that
    /// load (Linux's balancing moves the unpinned work off the
    /// CPUs the process is pinned to), give or take `SMALL_LOAD`
    /// (the daemon's own or a shell's): its threads go to where
    /// their memory already is, so nothing moves but them. On a
    /// crowded machine (more runnable threads than CPUs, the
    /// premise DI steps aside on too) the process's threads
    /// would time-share the node's CPUs with the work already
    /// there (mix:143, barcelona-4s with 23 runnable threads on 16
    /// CPUs: a 6-thread process pinned to the 4 CPUs of a busy node
    /// went 37 % slower while it was tried). Crowded, no CPU is
    /// counted spare, whatever the last interval's CPU use says (it
    /// misses threads that just started).
    fn home_node<'t>(&self, t: &'t Topology, p: &Process<'_>, runnable: usize) -> Option<&'t Node> {
        let crowded = runnable > t.span().len();
        p.home.map(|h| &t.nodes()[h]).filter(|n| {
            let spare: f64 = if crowded {
                0.0
            } else {
                (t.cpu_nodes().filter(|m| m.id != n.id))
                    .map(|m| p.room_for[m.id].cpus.max(0.0))
                    .sum()
            };
            let free = (p.room_for[n.id].cpus + spare + SMALL_LOAD).min(node_cpus(
                t,
                n,
                self.params.htt_percent,
            ));
            self.params.prefer_quiet_node
                && p.fits_with(n, free)
                && 2 * p.mem.get(&n.os_id).copied().unwrap_or(0) > p.total
        })
    }
}

impl NumadLike {
    /// numad's candidates among the processes in scope: at least
    /// `min_memory_mib` of memory or `min_cpu_percent` of a CPU, the
    /// biggest first; each with the CPUs it used and its memory per node.
    fn big_enough<'s>(
        &self,
        view: &View<'s>,
        usage: &HashMap<i32, f64>,
    ) -> Vec<(&'s TaskGroup, f64, BTreeMap<u32, u64>)> {
        let mut big = Vec::new();
        for g in (view.snapshot.groups.iter()).filter(|g| view.managed.contains(&g.pid)) {
            // A process seen for the first time has no CPU use measured
            // yet (numad needs two samples too): not placed before.
            if g.threads.iter().any(|t| !usage.contains_key(t)) {
                continue;
            }
            let mem = g.memory_total().unwrap_or_default();
            let total: u64 = mem.values().sum();
            let cpus: f64 = g.threads.iter().filter_map(|t| usage.get(t)).sum();
            if total >= self.params.min_memory_mib << 20
                || cpus * 100.0 >= self.params.min_cpu_percent as f64
            {
                big.push((g, cpus, mem));
            }
        }
        big.sort_by(|a, b| {
            b.2.values()
                .sum::<u64>()
                .cmp(&a.2.values().sum::<u64>())
                .then(a.0.pid.cmp(&b.0.pid))
        });
        big
    }
}

/// The share of memory `mem` (bytes per node) on `node`.
fn on_best_share(mem: &BTreeMap<u32, u64>, node: u32) -> f64 {
    let total: u64 = mem.values().sum();
    *mem.get(&node).unwrap_or(&0) as f64 / total.max(1) as f64
}

/// The node numad takes among `fitting`: the lowest `first` (LLC misses,
/// or allocations turned away, per second, by dense id) where given, then
/// the most free CPU times free memory, the lower id on a tie.
fn roomiest<'t>(
    fitting: &[&'t numaplace_model::Node],
    room: &[NodeRoom],
    first: Option<&[f64]>,
) -> Option<&'t numaplace_model::Node> {
    fitting.iter().copied().max_by(|a, b| {
        let by_room = room[a.id].magnitude().total_cmp(&room[b.id].magnitude());
        match first {
            // Fewer is better: b's against a's.
            Some(m) => m[b.id].total_cmp(&m[a.id]).then(by_room),
            None => by_room,
        }
        .then(b.id.cmp(&a.id))
    })
}

/// Why numad puts `g` on `best`: its size, the node's room (and `among`:
/// which nodes it was the roomiest of, where not all it fits), and where
/// its memory is when that is elsewhere.
fn placement_reason(
    t: &Topology,
    g: &TaskGroup,
    cpus: f64,
    mem: &BTreeMap<u32, u64>,
    (best, room): (&numaplace_model::Node, &NodeRoom),
    home: Option<usize>,
    among: &str,
) -> String {
    let total: u64 = mem.values().sum();
    format!(
        "numad-like: {} (pid {}) uses {} and {cpus:.2} CPUs; node {} has the most free CPU and memory \
         ({:.2} CPUs, {} free){among}{}",
        printable(&g.label()),
        g.pid,
        mib(total as f64),
        best.os_id,
        room.cpus,
        mib(room.memory),
        match home {
            Some(h) if h != best.id => format!(
                "; {:.0}% of its memory is on node {}",
                100.0 * mem.get(&t.nodes()[h].os_id).copied().unwrap_or(0) as f64
                    / total.max(1) as f64,
                t.nodes()[h].os_id
            ),
            _ => String::new(),
        }
    )
}

/// LLC misses per second of the threads that last ran on each node
/// (dense id), those of process `except` left out; `None` when no thread's
/// misses are counted.
fn misses_per_node(t: &Topology, s: &Snapshot, except: i32) -> Option<Vec<f64>> {
    let secs = s.interval_ns as f64 / 1e9;
    if secs <= 0.0 {
        return None;
    }
    let mut per = vec![0.0; t.nodes().len()];
    let mut counted = false;
    for task in s.tasks.iter().filter(|t| t.tgid != except) {
        let Some(m) = s
            .counters
            .get(&task.tid)
            .and_then(|c| c.get(numaplace_model::Counter::LlcMisses))
        else {
            continue;
        };
        counted = true;
        if let Some(cpu) = task.last_cpu.and_then(|c| t.cpu_by_os_id(c)) {
            per[cpu.node] += m as f64 / secs;
        }
    }
    counted.then_some(per)
}

/// A process's measured CPU use may exceed its thread count by tick
/// rounding: this much over a node's CPUs still fits.
const CPU_SLACK: f64 = 0.1;

/// Other load on the node holding a process's memory that does not keep
/// the process from going there (`prefer_quiet_node`): a daemon's or a
/// shell's, CPUs.
const SMALL_LOAD: f64 = 0.5;

/// The CPUs node `n` offers, as numad counts them: a core is one CPU and
/// each further hardware thread of it `htt_percent` % of one (numad.c's
/// `CPUs_total`); only the machine's CPUs (those in scope) count.
pub fn node_cpus(t: &Topology, n: &numaplace_model::Node, htt_percent: u64) -> f64 {
    let extra = htt_percent.min(100) as f64 / 100.0;
    n.cores
        .iter()
        .map(|&c| t.cores()[c].span.intersection(t.span()).len())
        .filter(|&k| k > 0)
        .map(|k| 1.0 + (k - 1) as f64 * extra)
        .sum()
}

/// Free CPUs (the node's CPUs, hardware threads discounted as numad does,
/// less what the threads last seen there used) and free memory of every
/// node.
fn node_room(
    t: &Topology,
    s: &Snapshot,
    usage: &HashMap<i32, f64>,
    htt_percent: u64,
) -> Vec<NodeRoom> {
    let mut room: Vec<NodeRoom> = t
        .nodes()
        .iter()
        .map(|n| NodeRoom {
            cpus: node_cpus(t, n, htt_percent),
            memory: s.machine.nodes.get(&n.os_id).map_or(0.0, |m| m.free as f64),
        })
        .collect();
    for task in &s.tasks {
        if let (Some(u), Some(c)) = (
            usage.get(&task.tid),
            task.last_cpu.and_then(|c| t.cpu_by_os_id(c)),
        ) {
            room[c.node].cpus -= u;
        }
    }
    room
}

impl crate::Params for NumadParams {
    fn validate(&self) -> Result<(), String> {
        // Bounds that keep `<< 20` and `* 1e9` of the rounds from
        // overflowing: 1 PiB of memory, a day of cool-down.
        crate::within("min_memory_mib", self.min_memory_mib, 0, 1 << 30)?;
        crate::within("min_cpu_percent", self.min_cpu_percent, 0, 100 * 65_536)?;
        crate::within("htt_percent", self.htt_percent, 0, 100)?;
        crate::within("cooldown_secs", self.cooldown_secs, 0, 86_400)
    }
}
