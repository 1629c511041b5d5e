//! `brm`: Bias Random vCPU Migration (\[Rao13\] §4, Algorithm
//! 1), moved from Xen's scheduler to a host daemon that pins threads.
//!
//! **The metric (§3.1).** For each candidate thread and interval,
//! [`uncore_penalty`] gives the cycles one uncore request costs: cycles with
//! a request outstanding over requests sent (P = t'/λ, Little's law). Each
//! thread keeps an exponentially weighted moving average of it, a new
//! sample weighing one eighth (§5's `(7·old + sample)/8`).
//!
//! **The system-wide penalty (§4.2).** One number per round for all the
//! candidates together; see [`system_penalty`] for how we weigh them. Each
//! candidate writes it into its own per-node table under the node it runs
//! on: the table holds what the whole system looked like the last time the
//! thread was on each node, so a move that hurts other threads (or helps
//! them) is charged to the node it went to.
//!
//! **Update and pick (§4.4, Algorithm 1).** [`ThreadState::update`]
//! compares the entry of the thread's node with every other node's: each
//! node recorded lower raises the migration probability by one and may
//! become the bias (the destination), each other node lowers it by one,
//! within 0..=100. A node never measured counts as lower, which is what
//! sends threads to explore. [`bias_random_pick`] then moves the thread to
//! its bias node when a draw in 0..100 falls below the probability, and the
//! probability starts again from 0.
//!
//! **Reset (§4.2).** After a random number of rounds (`reset-min-rounds` to
//! `reset-max-rounds`, drawn again each time) a thread forgets its table,
//! so nodes it has not run on lately are explored again after a phase
//! change.
//!
//! **Where we depart from Algorithm 1, and why.** Run as printed in the
//! simulator (westmere-2s, 10 seeds, 10 ms rounds), BRM stayed 5-14 %
//! slower than the best static placement on the micro-benchmark and the
//! NPB-like jobs: four threads sharing data kept drifting apart, spending
//! 30-45 % of the run split across the sockets, because every exploration
//! of one thread pulled the others after it, and an explorer coming back
//! crossed a follower going out. Four changes bring every one of those
//! workloads within 3.2 % of the oracle with a run-to-run spread of at most
//! 1.3 % (docs/results/2026-11-22-brm.md has the table and what each
//! change is worth):
//! - while a thread explores a node it has not measured since its reset,
//!   the other threads of its process hold still for
//!   [`EXPLORATION_ROUNDS`] (keeping their probabilities). §4.4 relies on
//!   randomness to spread migrations over time because a lock across
//!   Xen's cores is costly; a daemon decides every thread in one place, so
//!   this serialisation is free;
//! - this node's record must exceed another's by [`NOISE_MARGIN`] to count
//!   as higher ([`ThreadState::update`]);
//! - a thread's moving average starts again when it changes nodes
//!   ([`ThreadState::observe`]): samples from the node it left would
//!   otherwise make the first records of the new node look like the old;
//! - the reset period doubles (up to 2^[`MAX_BACKOFF`] times) each time a
//!   reset finds the thread on the node the previous one left it on, and
//!   drops back once it has moved: explorations that keep confirming the
//!   node become rarer.
//!
//! **Where the premise does not hold (issue 16, [`premise`]).**
//! In \[Rao13\]'s experiments memory sits on one node whatever the
//! threads do; with first touch it is where a thread first ran, and an
//! exploration away from it makes every access remote. So explorations (moves to a node not
//! measured since the last reset) step aside for a single-thread program
//! next to its memory and for threads whose process's memory follows them
//! over several nodes; they go first to the node holding the process's
//! memory, else to a node drawn among those not measured with an idle
//! CPU (Algorithm 1's first in index order sends every thread of an
//! eight-node machine to node 0). Needs each process's memory per node;
//! without it BRM is as above. docs/results/2026-11-22-brm.md has what
//! each rule is worth over generated mixes.
//!
//! **Candidates (§4.3, §8).** In the paper, the guest kernel tags a vCPU
//! while it runs a thread whose CPU affinity was set explicitly inside the
//! guest. That affinity lives in the guest and a host cannot see it, so
//! here a thread is a candidate when the configuration tags it (its or its
//! process's name matches `comms`, or it is a VM's vCPU thread and `vcpus`
//! is on), or, as §8 proposes for a non-intrusive variant, when its uncore
//! request rate exceeds `min-uncore-requests-per-s`. Once a candidate, a
//! thread stays one for its life, as the paper's tag stays until the
//! thread exits. §8's second rule, dropping a thread whose penalty does not
//! change when it moves, is not implemented. Threads that are not
//! candidates are left to Linux.
//!
//! **The guest's own tags (§4.3, `guest-hints`).** Where a VM's guest runs
//! `numaplace guest`, it says which of its vCPUs run threads whose affinity
//! was set narrower than its CPUs, as the paper's `tag` / `clear` calls do
//! (`Snapshot::guest_hints`, read by the daemon from a virtio-serial
//! port). For such a VM the guest decides: a vCPU thread is a candidate
//! exactly while its guest hints it, whatever `vcpus`, `comms` or the
//! request rate say, and when the hint clears BRM forgets it and gives a
//! vCPU it moved back to all the CPUs numaplace may use, as Xen drops the
//! tag and the vCPU's bias with it. The reason of a move says "guest hint". A VM whose guest says
//! nothing (no agent, or its hints expired) is decided as above.
//!
//! **Moves.** A move pins the thread to all CPUs of the bias node (those
//! numaplace may use), so the kernel still balances it within the node. As
//! §4.4 lets Xen's load balancing override BRM, a candidate is not moved
//! into a node without an idle CPU while its own node has one: no action,
//! and its probability is kept for a later round.
//!
//! **Left alone.** Threads that chose their own CPUs (an affinity narrower
//! than numaplace's CPUs and not set by this policy), as the engine
//! requires; threads without uncore counts this round (no PMU, no request),
//! which cannot be scored; threads outside the scope.
//!
//! **Randomness (§5).** The paper draws from the low digits of the time
//! stamp counter. We draw from a seeded generator held by the policy
//! ([`Rng`], `seed`), so a recorded or simulated run replays exactly; every
//! reason gives the draw.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use numaplace_model::metrics::uncore_penalty;
use numaplace_model::{Action, Counter, CpuSet, Plan, Task, TaskId, Topology};

use crate::{Needs, Policy, Signal, View};
use numaplace_model::scope::glob;

mod algorithm;
mod params;
pub mod premise;
pub mod reach;

pub use algorithm::{
    MAX_BACKOFF, NOISE_MARGIN, Rng, ThreadState, bias_random_pick, ewma, system_penalty,
};
pub use params::{BrmParams, MAX_COMMS, MAX_RESET_ROUNDS};

/// How long, after a thread of a process moved to a node it had not
/// measured since its last reset, the other threads of that process hold
/// still: long enough for its average to settle there and for it to come
/// back if the node is worse (10 to 20 rounds in the simulator).
pub const EXPLORATION_ROUNDS: u64 = 30;

/// A node numaplace may place onto: its kernel id and CPUs.
struct Domain {
    os_id: u32,
    /// Its topology node (dense id).
    node: usize,
    cpus: CpuSet,
}

/// The nodes with CPUs numaplace may use, and each topology node's index
/// among them.
fn domains(t: &Topology) -> (Vec<Domain>, Vec<Option<usize>>) {
    let mut out = Vec::new();
    let mut by_node = vec![None; t.nodes().len()];
    for n in t.nodes() {
        let cpus = n.span.intersection(t.span());
        if cpus.is_empty() {
            continue;
        }
        by_node[n.id] = Some(out.len());
        out.push(Domain {
            os_id: n.os_id,
            node: n.id,
            cpus,
        });
    }
    (out, by_node)
}

/// The domain a thread is on: the one its affinity lies within, or the one
/// of the CPU it last ran on.
fn domain_of(
    t: &Task,
    topo: &Topology,
    doms: &[Domain],
    by_node: &[Option<usize>],
) -> Option<usize> {
    if let Some(d) = doms.iter().position(|d| t.allowed_cpus.is_subset(&d.cpus)) {
        return Some(d);
    }
    let cpu = topo.cpu_by_os_id(t.last_cpu?)?;
    by_node[cpu.node]
}

/// A candidate this round.
struct Scored<'a> {
    task: &'a Task,
    here: usize,
    sample: f64,
    requests: u64,
}

/// The `brm` policy. See the module documentation.
pub struct Brm {
    params: BrmParams,
    rng: Rng,
    /// Rounds decided so far.
    round: u64,
    /// Ordered, so that anything iterating over it replays the same way.
    threads: BTreeMap<TaskId, ThreadState>,
    /// What this policy set, to know its own pins from a thread's own.
    ours: HashMap<TaskId, CpuSet>,
    /// Per process, the thread exploring a node it has not measured, and
    /// the round until which it counts as exploring.
    explorers: HashMap<i32, (TaskId, u64)>,
}

impl Brm {
    /// The policy with `params`, knowing nothing yet.
    pub fn new(params: BrmParams) -> Brm {
        Brm {
            rng: Rng::new(params.seed),
            params,
            round: 0,
            threads: BTreeMap::new(),
            ours: HashMap::new(),
            explorers: HashMap::new(),
        }
    }

    /// What BRM remembers of a thread, if it is a candidate.
    pub fn state(&self, id: TaskId) -> Option<&ThreadState> {
        self.threads.get(&id)
    }

    /// Whether the configuration tags the thread (§4.3) or its request
    /// rate does (§8).
    fn tagged(&self, t: &Task, process_comm: &str, requests_per_s: Option<f64>) -> bool {
        let p = &self.params;
        (p.vcpus && t.vcpu.is_some())
            || p.comms
                .iter()
                .any(|pat| glob(pat, &t.comm) || glob(pat, process_comm))
            || matches!(
                (p.min_uncore_requests_per_s, requests_per_s),
                (Some(min), Some(rate)) if rate > min
            )
    }
}

/// Whether the thread's guest says it is a candidate (§4.3): `Some` for a
/// vCPU thread of a VM whose guest's hints are live (and `guest-hints` is
/// on), `None` where the guest says nothing.
fn hinted(params: &BrmParams, s: &numaplace_model::Snapshot, t: &Task) -> Option<bool> {
    if !params.guest_hints {
        return None;
    }
    let vcpu = t.vcpu?;
    s.guest_hints.get(&t.tgid).map(|h| h.contains(&vcpu))
}

fn fmt_penalty(v: Option<f64>) -> String {
    match v {
        Some(v) => format!("{v:.0}"),
        None => "unknown".into(),
    }
}

impl Policy for Brm {
    fn name(&self) -> &'static str {
        "brm"
    }

    /// The paper updates penalties every 10 ms scheduler tick (§5); a
    /// daemon reading counters per thread does it every 100 ms.
    fn default_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(100)
    }

    fn needs(&self) -> Needs {
        Needs {
            counters: true,
            memory: true,
            samples: false,
            page_sets: false,
        }
    }

    fn without(&self, signal: Signal) -> Option<String> {
        (signal == Signal::UncorePenalty).then(|| {
            "ranks nodes by each vCPU thread's uncore penalty ([Rao13] §3.1: uncore \
             occupancy over requests), which are not counted here: it tracks no thread \
             and leaves every one where it is"
                .into()
        })
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let mut plan = Plan::default();
        self.round += 1;
        let round = self.round;
        let s = view.snapshot;
        let topo = view.topology;
        let (doms, by_node) = domains(topo);

        let mut runnable = runnable_per_domain(s, topo, doms.len(), &by_node);
        let mut released = Vec::new();
        let mut scored = self.candidates(view, &doms, &by_node, round, &mut released);
        give_back(view, released, &mut plan);
        if scored.is_empty() || doms.is_empty() {
            return plan;
        }
        // A fixed order, and one draw per scored candidate per round
        // whatever its probability, so the draws go to the same threads on
        // replay.
        scored.sort_by_key(|c| c.task.id());
        let Some(global) = self.observe(&scored, doms.len(), round) else {
            return plan;
        };
        let this = Round {
            view,
            doms: &doms,
            round,
            global,
            labels: view.labels(),
            threads_on: threads_per_domain(s, topo, &doms, &by_node),
        };
        for c in &scored {
            if let Some(bias) = self.turn(c, &this, &runnable, &mut plan) {
                runnable[c.here] = runnable[c.here].saturating_sub(1);
                runnable[bias] += 1;
            }
        }
        plan
    }
}

/// What every candidate's turn in a round reads.
struct Round<'a, 's> {
    view: &'a View<'s>,
    doms: &'a [Domain],
    round: u64,
    /// The system-wide penalty of the round ([`system_penalty`]).
    global: f64,
    labels: HashMap<i32, String>,
    threads_on: HashMap<(i32, usize), usize>,
}

/// Gives the vCPUs in `released` back to Linux.
fn give_back(view: &View<'_>, released: Vec<&Task>, plan: &mut Plan) {
    // A vCPU whose guest no longer runs a pinned thread on it gets the
    // CPUs it had before BRM moved it (all those numaplace may use), as
    // the paper's clear ends the vCPU's bias (§4.3).
    for t in released {
        let span = view.room(t);
        if t.allowed_cpus != span {
            plan.push(
                Action::Pin {
                    task: t.id(),
                    tgid: t.tgid,
                    cpus: span.clone(),
                },
                format!(
                    "brm: vCPU {} (thread {}) back to Linux (CPUs {span}): its guest hint cleared",
                    t.vcpu.map_or_else(|| "?".to_string(), |v| v.to_string()),
                    t.tid
                ),
            );
        }
    }
}

impl Brm {
    /// Takes each candidate's sample into its moving average (a thread
    /// seen first gets its table and its first reset deadline); the round's
    /// system-wide penalty, `None` when no request was counted.
    fn observe(&mut self, scored: &[Scored<'_>], domains: usize, round: u64) -> Option<f64> {
        let (lo, hi) = (self.params.reset_min_rounds, self.params.reset_max_rounds);
        let mut averages = Vec::with_capacity(scored.len());
        for c in scored {
            let st = self.threads.entry(c.task.id()).or_insert_with(|| {
                ThreadState::new(domains, c.here, round + u64::from(self.rng.between(lo, hi)))
            });
            if st.unc.len() != domains {
                *st = ThreadState::new(domains, c.here, st.reset_at);
            }
            averages.push((st.observe(c.here, c.sample), c.requests));
        }
        system_penalty(averages.iter().copied())
    }

    /// One candidate's turn: Algorithm 1's reset, update and pick, then
    /// §4.4's load balancing, issue 16's explorations, its cgroup's CPUs
    /// and the process's one explorer. The node it moves to, its pin put
    /// in `plan`; `None` where it stays.
    fn turn(
        &mut self,
        c: &Scored<'_>,
        r: &Round<'_, '_>,
        runnable: &[usize],
        plan: &mut Plan,
    ) -> Option<usize> {
        let (lo, hi) = (self.params.reset_min_rounds, self.params.reset_max_rounds);
        let (s, doms, round) = (r.view.snapshot, r.doms, r.round);
        let id = c.task.id();
        let st = self.threads.get_mut(&id).expect("inserted above");
        st.maybe_reset(round, c.here, &mut self.rng, lo, hi);
        // Every node is within reach on a machine of REACH_NODES or fewer:
        // the process's memory is read only where it can narrow it.
        let within = if doms.len() <= reach::REACH_NODES {
            vec![true; doms.len()]
        } else {
            let shares = s.group(c.task.tgid).and_then(premise::memory_shares);
            let nodes: Vec<usize> = doms.iter().map(|d| d.node).collect();
            reach::reach(r.view.topology, &nodes, c.here, shares.as_ref())
        };
        st.update_within(c.here, r.global, |d| within[d]);
        let draw = self.rng.draw();
        let (prob, bias) = (st.prob, st.bias);
        if bias == c.here || !bias_random_pick(prob, draw) {
            return None;
        }
        // §4.4: load balancing wins over BRM.
        let idle = |d: usize| runnable[d] < doms[d].cpus.len();
        if !idle(bias) && idle(c.here) {
            return None;
        }
        // Issue 16: explorations step aside where [Rao13]'s premise
        // does not hold (brm/premise.rs), and go where they learn most.
        let group = s.group(c.task.tgid);
        let shares = group.and_then(premise::memory_shares);
        let mut bias = bias;
        let mut exploring = String::new();
        if st.unc[bias].is_none() {
            if let (Some(g), Some(m)) = (group, &shares) {
                let here_count = r
                    .threads_on
                    .get(&(c.task.tgid, c.here))
                    .copied()
                    .unwrap_or(1);
                if premise::stays(m, doms[c.here].os_id, g.threads.len(), here_count).is_some() {
                    return None;
                }
            }
            let home = shares
                .as_ref()
                .and_then(premise::home)
                .and_then(|os| doms.iter().position(|d| d.os_id == os));
            (bias, exploring) = exploration_target(
                &st.unc,
                c.here,
                home,
                &|d| idle(d) && within[d],
                doms,
                &mut self.rng,
            )?;
        }
        // Its cgroup's CPUs on that node (a confined vCPU goes only
        // where its domain's cpuset reaches).
        let cpus = r.view.confine(c.task, &doms[bias].cpus)?;
        // While one thread of a process explores, the others hold.
        let explore = st.unc[bias].is_none();
        if let Some(&(who, until)) = self.explorers.get(&c.task.tgid) {
            if who != id && until > round {
                return None;
            }
        }
        if explore {
            self.explorers
                .insert(c.task.tgid, (id, round + EXPLORATION_ROUNDS));
        }
        st.prob = 0;
        let pick = Pick {
            to: bias,
            prob,
            draw,
            exploring,
            shares,
            within,
        };
        let reason = move_reason(&self.params, c, st, r, &pick, &cpus);
        plan.push(
            Action::Pin {
                task: id,
                tgid: c.task.tgid,
                cpus: cpus.clone(),
            },
            reason,
        );
        self.ours.insert(id, cpus);
        Some(bias)
    }
}

/// A move BRM picked, for its reason.
struct Pick {
    /// The domain it goes to.
    to: usize,
    /// The migration probability and the draw below it.
    prob: u8,
    draw: u8,
    /// Why it explores there, if it does.
    exploring: String,
    /// Its process's memory per node, as shares.
    shares: Option<BTreeMap<u32, f64>>,
    /// Per domain, whether it is within the thread's reach ([`reach`]).
    within: Vec<bool>,
}

/// The words of a move: who, from where to where, the penalties per node,
/// the probability and the draw.
fn move_reason(
    params: &BrmParams,
    c: &Scored<'_>,
    st: &ThreadState,
    r: &Round<'_, '_>,
    pick: &Pick,
    cpus: &CpuSet,
) -> String {
    let (doms, bias) = (r.doms, pick.to);
    let to = &doms[bias];
    let mut others = String::new();
    let mut beyond = Vec::new();
    for (i, v) in st.unc.iter().enumerate() {
        if !pick.within[i] {
            beyond.push(doms[i].os_id.to_string());
        } else if i != c.here && i != bias {
            let _ = write!(others, ", {} on node {}", fmt_penalty(*v), doms[i].os_id);
        }
    }
    if !beyond.is_empty() {
        let _ = write!(
            others,
            "; nodes {} beyond its reach (it goes only to the {} nodes nearest its memory)",
            beyond.join(","),
            reach::REACH_NODES
        );
    }
    let who = match (c.task.vcpu, hinted(params, r.view.snapshot, c.task)) {
        (Some(v), Some(true)) => {
            format!(
                "vCPU {v} (thread {}, a candidate by guest hint)",
                c.task.tid
            )
        }
        (Some(v), _) => format!("vCPU {v} (thread {})", c.task.tid),
        (None, _) => format!("thread {}", c.task.tid),
    };
    let there = match st.unc[bias] {
        Some(v) => format!("{v:.0} last seen on node {}", to.os_id),
        None => format!("node {} not measured yet", to.os_id),
    };
    let (global, prob, draw, exploring) = (r.global, pick.prob, pick.draw, &pick.exploring);
    format!(
        "brm: {who} of {} from node {} to node {} (CPUs {cpus}): \
         system-wide uncore penalty {global:.0} cycles here, {there}{others}; \
         its own {:.0} cycles; migration probability {prob} > draw {draw}{exploring}{}",
        r.labels.get(&c.task.tgid).map_or("", String::as_str),
        doms[c.here].os_id,
        to.os_id,
        st.ewma.unwrap_or(c.sample),
        memory_note(pick.shares.as_ref(), doms[c.here].os_id, to.os_id),
    )
}

impl Brm {
    /// This round's candidates (\[Rao13\] §4.3: threads it already follows,
    /// or newly tagged ones) with their uncore penalty sample and the
    /// domain they ran in; forgets threads that are no longer candidates.
    /// Threads this policy pinned whose guest hint cleared go into
    /// `released`, to be given back to Linux.
    fn candidates<'s>(
        &mut self,
        view: &View<'s>,
        doms: &[Domain],
        by_node: &[Option<usize>],
        round: u64,
        released: &mut Vec<&'s Task>,
    ) -> Vec<Scored<'s>> {
        let (s, topo) = (view.snapshot, view.topology);
        let secs = s.interval_ns as f64 / 1e9;
        let comms: HashMap<i32, &str> = s.groups.iter().map(|g| (g.pid, g.comm.as_str())).collect();
        let mut alive = HashSet::new();
        let mut scored = Vec::new();
        for t in &s.tasks {
            if !view.placeable(t, &self.ours) {
                continue;
            }
            let id = t.id();
            let counters = s.counters.get(&t.tid);
            let requests = counters.and_then(|c| c.get(Counter::UncoreRequests));
            let rate = requests.filter(|_| secs > 0.0).map(|r| r as f64 / secs);
            let known = self.threads.contains_key(&id);
            match hinted(&self.params, s, t) {
                Some(false) => {
                    if self.ours.contains_key(&id) {
                        released.push(t);
                    }
                    continue;
                }
                Some(true) => {}
                None if !known
                    && !self.tagged(t, comms.get(&t.tgid).copied().unwrap_or(""), rate) =>
                {
                    continue;
                }
                None => {}
            }
            alive.insert(id);
            let (Some(sample), Some(here)) = (
                counters.and_then(uncore_penalty),
                domain_of(t, topo, doms, by_node),
            ) else {
                continue;
            };
            scored.push(Scored {
                task: t,
                here,
                sample,
                requests: requests.unwrap_or(0),
            });
        }
        self.threads.retain(|id, _| alive.contains(id));
        self.ours.retain(|id, _| alive.contains(id));
        self.explorers
            .retain(|_, (who, until)| alive.contains(who) && *until > round);
        scored
    }
}

/// Where an exploration goes (issue 16), with the words for its reason:
/// the node holding the process's memory when it is not measured yet and
/// has an idle CPU (\[Rao13\]'s setting: memory on one node, the threads
/// trying it against the others); else a node drawn among those not
/// measured with an idle CPU. Algorithm 1 takes the first node in index
/// order, which on a two-node machine is the only one but on eight sends
/// every thread of the machine to node 0 first; a node without an idle
/// CPU would measure time-sharing, not the uncore. `None`: nowhere to go.
fn exploration_target(
    unc: &[Option<f64>],
    here: usize,
    home: Option<usize>,
    idle: &dyn Fn(usize) -> bool,
    doms: &[Domain],
    rng: &mut Rng,
) -> Option<(usize, String)> {
    let open: Vec<usize> = (0..unc.len())
        .filter(|&d| d != here && unc[d].is_none() && idle(d))
        .collect();
    if let Some(h) = home.filter(|h| open.contains(h)) {
        return Some((
            h,
            format!(
                "; exploring node {} first: it holds its process's memory",
                doms[h].os_id
            ),
        ));
    }
    match open.len() {
        0 => None,
        1 => Some((open[0], String::new())),
        n => {
            let pick = open[rng.below(n as u64) as usize];
            Some((
                pick,
                format!(
                    "; exploring node {} drawn among {n} not measured with an idle CPU",
                    doms[pick].os_id
                ),
            ))
        }
    }
}

/// `; its process's memory a % on node x, b % on node y`, for a reason.
fn memory_note(shares: Option<&BTreeMap<u32, f64>>, from: u32, to: u32) -> String {
    match shares {
        Some(m) => format!(
            "; its process's memory {:.0} % on node {from}, {:.0} % on node {to}",
            100.0 * m.get(&from).copied().unwrap_or(0.0),
            100.0 * m.get(&to).copied().unwrap_or(0.0)
        ),
        None => String::new(),
    }
}

/// Each process's threads per domain (pid, domain), placeable or not.
fn threads_per_domain(
    s: &numaplace_model::Snapshot,
    topo: &Topology,
    doms: &[Domain],
    by_node: &[Option<usize>],
) -> HashMap<(i32, usize), usize> {
    let mut out = HashMap::new();
    for t in &s.tasks {
        if let Some(d) = domain_of(t, topo, doms, by_node) {
            *out.entry((t.tgid, d)).or_insert(0) += 1;
        }
    }
    out
}

/// Runnable threads per domain, by the CPU each last ran on: a domain has
/// an idle CPU while it has fewer than CPUs (the kernel spreads runnable
/// threads over a node's CPUs).
fn runnable_per_domain(
    s: &numaplace_model::Snapshot,
    topo: &Topology,
    domains: usize,
    by_node: &[Option<usize>],
) -> Vec<usize> {
    let mut runnable = vec![0usize; domains];
    for t in &s.tasks {
        if t.state != 'R' {
            continue;
        }
        if let Some(d) = (t.last_cpu)
            .and_then(|c| topo.cpu_by_os_id(c))
            .and_then(|c| by_node[c.node])
        {
            runnable[d] += 1;
        }
    }
    runnable
}

#[cfg(test)]
mod tests;
