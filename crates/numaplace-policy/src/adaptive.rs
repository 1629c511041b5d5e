//! `adaptive-mapping`: \[Bae12\], dynamic
//! adaptive virtual core mapping. Each VM's vCPU threads (or a process's
//! threads) run either *local* (fewest sockets) or *interleaved* (most
//! sockets, §1); the policy picks the mapping that suits the objective
//! (performance, power or energy, §5.2) and changes it as the workload
//! changes.
//!
//! Every round is one pass of §5.3's main loop for each group:
//! 1. Probing: the eight page metrics of §4.1 ([`metrics`]) from the
//!    snapshot's page sets (the simulator's page model) or the threads'
//!    sampled addresses (a live host), the group's CPI and vcore
//!    utilisations from the counters.
//! 2. Voting: the objective's model ([`models`]: classifier of §5.2,
//!    per-class performance model for the mapping the metrics were
//!    measured in, Fig. 7 power model, energy = their product) predicts
//!    the interleaved / local ratio; above 1 votes local, below 1
//!    interleaved; within `1 ± unconfident-band` the confidence is low.
//! 3. A confident vote is committed. An unsure one switches to the other
//!    mapping temporarily and votes again next round; agreeing votes are
//!    committed, disagreeing ones are settled by the CPI measured in each
//!    mapping (finalVoting, §5.3).
//! 4. Interim: probing and remapping cost (scan and remap cost models,
//!    [`params::AdaptiveConfig`]) over elapsed time must stay under the
//!    user's ceiling; when above, the group is not probed again until it
//!    is back under.
//!
//! A group starts in the local mapping, next to its memory (§6.2: "The
//! original mapping is selected to local mapping").
//!
//! Where the paper's premise does not hold for a group (its two layouts are
//! not the pair the models learned, [`premise`]), the models' vote does not
//! apply: the group holds the local mapping, next to its memory, and is
//! not probed; the reason goes with the pins.

pub mod classify;
pub mod fit;
pub mod mapping;
pub mod metrics;
pub mod models;
pub mod params;
pub mod power_fit;
pub mod premise;
mod vote;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use numaplace_model::task::printable;
use numaplace_model::{Action, CpuSet, Plan, Task, TaskGroup, Topology};

use crate::{Needs, Policy, Signal, View};
pub use classify::{Class, Classifier};
pub use models::{Mapping, Models, PowerModel};
pub use params::{AdaptiveConfig, AdaptiveParams, Objective};
pub use vote::Vote;

/// What the policy did to one group, for reports and tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupReport {
    /// The process's or VM's name.
    pub label: String,
    /// Times it was switched to the other mapping to measure it there.
    pub probes: u32,
    /// Changes of mapping after the initial local placement (temporary
    /// switches to probe included), as §6.2 / Fig. 11 count them.
    pub remaps: u32,
    /// Seconds those probes cost (modelled).
    pub probe_overhead_s: f64,
    /// Seconds the remaps cost (modelled).
    pub remap_overhead_s: f64,
    /// First and last round the group was seen, seconds since the epoch.
    pub first_s: f64,
    /// See `first_s`.
    pub last_s: f64,
    /// Its mapping now; `None` while it is left to Linux.
    pub mapping: Option<Mapping>,
    /// The vote that decided its mapping last.
    pub last_vote: Option<Vote>,
    /// The power model of the last vote.
    pub power_model: Option<PowerModel>,
    /// Why the group was left to Linux: its memory elsewhere when first
    /// seen ([`premise::memory_elsewhere`]), or no vote that applies
    /// ([`premise::fails`]) while the local mapping doubles vcores up on
    /// hardware threads.
    pub left_to_linux: Option<String>,
    /// Why the group holds the local mapping without voting, when
    /// \[Bae12\]'s premise did not hold for it last round ([`premise`]), or why
    /// it was not placed that round: none of its memory resident yet
    /// ([`premise::too_early`]), or a crowded machine
    /// ([`premise::crowding`]).
    pub vote_off: Option<String>,
}

impl GroupReport {
    /// Probing and remapping time over the time the group was watched.
    pub fn overhead_fraction(&self) -> f64 {
        (self.probe_overhead_s + self.remap_overhead_s) / (self.last_s - self.first_s).max(1e-9)
    }
}

/// Shared view of every group's report, by pid.
pub type Reports = Arc<Mutex<BTreeMap<i32, GroupReport>>>;

enum Phase {
    Steady,
    /// Switched to the other mapping to vote again (§5.3's low-confidence
    /// branch); `first` was voted in `from`.
    Trial {
        first: Vote,
        from: Mapping,
    },
}

struct Group {
    mapping: Mapping,
    /// Where its vcores are pinned now: kept while no other group needs
    /// those CPUs, so a group moves only when its mapping changes.
    layout: mapping::Layout,
    /// Placed in the local mapping before any of its memory was resident
    /// ([`premise::too_early`]): its memory is judged once it shows.
    placed_blind: bool,
    phase: Phase,
    /// Interim (§5.3): tsc_prev, the overhead since, and no probe before
    /// `hold_until` (seconds).
    window_start: f64,
    overhead: f64,
    hold_until: f64,
}

/// The policy.
pub struct AdaptiveMapping {
    params: AdaptiveParams,
    groups: BTreeMap<i32, Group>,
    /// Groups left to Linux for their life ([`GroupReport::left_to_linux`]).
    left: std::collections::BTreeSet<i32>,
    reports: Reports,
    power: power_fit::PowerFit,
}

impl AdaptiveMapping {
    /// The policy with `params`, knowing nothing yet.
    pub fn new(params: AdaptiveParams) -> AdaptiveMapping {
        AdaptiveMapping {
            params,
            groups: BTreeMap::new(),
            left: Default::default(),
            reports: Reports::default(),
            power: power_fit::PowerFit::default(),
        }
    }

    /// A handle on the per-group reports that stays valid after the
    /// policy is boxed and handed to the engine.
    pub fn reports(&self) -> Reports {
        self.reports.clone()
    }
}

/// The sockets ([`mapping::Sockets`], dense ids) holding some of the
/// group's memory, most first (a node listed with nothing resident on it
/// names no socket).
fn memory_packages(t: &Topology, g: &numaplace_model::TaskGroup) -> Vec<usize> {
    let sockets = mapping::Sockets::of(t);
    let mut by: Vec<(u64, usize)> = Vec::new();
    for (node, m) in g.memory.iter().flatten() {
        let bytes = m.anon + m.file + m.huge;
        if let Some(p) = t.node_by_os_id(*node).and_then(|n| sockets.of_node(n)) {
            if bytes > 0 {
                by.push((bytes, p));
            }
        }
    }
    by.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    by.into_iter().map(|(_, p)| p).collect()
}

/// The share of the group's resident memory on the given sockets
/// ([`mapping::Sockets`], dense ids); `None` when none is resident or it
/// is not known.
fn memory_share(t: &Topology, g: &numaplace_model::TaskGroup, on_sockets: &[usize]) -> Option<f64> {
    let sockets = mapping::Sockets::of(t);
    let (mut on, mut total) = (0u64, 0u64);
    for (node, m) in g.memory.iter().flatten() {
        let bytes = m.anon + m.file + m.huge;
        total += bytes;
        if t.node_by_os_id(*node)
            .and_then(|n| sockets.of_node(n))
            .is_some_and(|p| on_sockets.contains(&p))
        {
            on += bytes;
        }
    }
    (total > 0).then(|| on as f64 / total as f64)
}

/// The share of `g`'s resident memory on each of `sockets`, in their
/// order; `None` while none is resident.
fn socket_shares(
    t: &Topology,
    g: &numaplace_model::TaskGroup,
    sockets: &[usize],
) -> Option<Vec<f64>> {
    sockets
        .iter()
        .map(|p| memory_share(t, g, std::slice::from_ref(p)))
        .collect()
}

impl Policy for AdaptiveMapping {
    fn name(&self) -> &'static str {
        "adaptive-mapping"
    }

    fn default_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(2)
    }

    fn needs(&self) -> Needs {
        Needs {
            counters: true,
            memory: true,
            samples: true,
            page_sets: true,
        }
    }

    fn without(&self, signal: Signal) -> Option<String> {
        match signal {
            Signal::Samples => Some(
                "measures [Bae12] §4.1's page metrics from sampled data addresses, which \
                 are not sampled here: it puts every group in the local mapping \
                 (§6.2's start) and never votes"
                    .into(),
            ),
            Signal::Energy if self.params.config.objective != Objective::Performance => Some(
                "fits its power model to the machine's energy readings (RAPL) as it runs, \
                 which are not read here: it keeps the power model of its coefficient file \
                 ([Bae12] Fig. 7's testbed unless `numaplace train` wrote one for this machine)"
                    .into(),
            ),
            Signal::Cpi => Some(
                "settles votes that disagree by CPI (§5.3 finalVoting), which are not \
                 counted here: for performance and energy such a group stays where the \
                 second vote was taken"
                    .into(),
            ),
            _ => None,
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let mut plan = Plan::default();
        let s = view.snapshot;
        let now = s.time_unix_ns as f64 / 1e9;
        let cfg = self.params.config.clone();
        if cfg.fit_power {
            self.power.observe(s, view.topology);
        }
        let live: std::collections::BTreeSet<i32> = s.groups.iter().map(|g| g.pid).collect();
        self.groups.retain(|pid, _| live.contains(pid));
        self.left.retain(|pid| live.contains(pid));
        // A crowded machine: no group is pinned (premise::crowding).
        let crowded = premise::crowding(s, view.topology);
        for g in &s.groups {
            if !view.managed.contains(&g.pid)
                || g.threads.len() < cfg.min_threads.max(1)
                || self.left.contains(&g.pid)
            {
                continue;
            }
            let Some(tasks) = self.members(view, g) else {
                continue;
            };
            let Some(gr) = self.layouts(view, g, tasks, now) else {
                continue;
            };
            self.decide_group(&gr, &cfg, crowded.as_ref(), &mut plan);
        }
        plan
    }
}

/// One group in one round: its threads in vcore order, its name, the CPUs
/// Linux gives it and its two mappings' layouts.
struct GroupRound<'a, 's> {
    view: &'a View<'s>,
    g: &'s TaskGroup,
    tasks: Vec<&'s Task>,
    label: String,
    /// The CPUs Linux gives it when this policy gives it back.
    room: CpuSet,
    local: mapping::Layout,
    inter: mapping::Layout,
    /// The snapshot's time, seconds.
    now: f64,
}

impl GroupRound<'_, '_> {
    /// The layout of mapping `m`.
    fn layout(&self, m: Mapping) -> &mapping::Layout {
        if m == Mapping::Local {
            &self.local
        } else {
            &self.inter
        }
    }

    /// Pins each vcore thread to its CPU of mapping `m`'s layout.
    fn pin(&self, plan: &mut Plan, m: Mapping, why: &str) {
        let (g, label) = (self.g, &self.label);
        for (t, &cpu) in self.tasks.iter().zip(&self.layout(m).cpus) {
            let cpus: CpuSet = [cpu].into_iter().collect();
            if t.allowed_cpus != cpus {
                plan.push(
                    Action::Pin {
                        task: t.id(),
                        tgid: g.pid,
                        cpus,
                    },
                    format!("adaptive-mapping: {label} vcore thread {} to CPU {cpu} ({m} mapping): {why}", t.tid),
                );
            }
        }
    }

    /// Gives the group back to Linux: every thread its room.
    fn back_to_linux(&self, plan: &mut Plan, why: &str) {
        back_to_linux(plan, &self.room, &self.tasks, self.g.pid, &self.label, why);
    }
}

/// The power model a vote uses, and where it comes from.
fn power_model<'a>(
    fit: &'a power_fit::PowerFit,
    params: &'a AdaptiveParams,
) -> (&'a PowerModel, &'static str) {
    match fit.model().filter(|_| params.config.fit_power) {
        Some(m) => (m, "fitted to this machine's energy readings"),
        None => (&params.models.power, "of the coefficient file"),
    }
}

impl AdaptiveMapping {
    /// The group's threads in vcore order; `None` where one is gone or
    /// chose its own CPUs.
    fn members<'s>(&self, view: &View<'s>, g: &TaskGroup) -> Option<Vec<&'s Task>> {
        let s = view.snapshot;
        let mut tasks: Vec<&Task> = g.threads.iter().filter_map(|&t| s.task(t)).collect();
        // Every thread alive, and none that chose its own CPUs (an
        // affinity that is neither the whole machine nor one CPU of
        // this policy's layouts, which pin one thread per CPU).
        if tasks.len() != g.threads.len()
            || tasks.iter().any(|t| {
                matches!(t.state, 'Z' | 'X')
                    || !(t.chose_nothing(view.topology.span())
                        || (t.allowed_cpus.len() == 1 && self.groups.contains_key(&g.pid)))
            })
        {
            return None;
        }
        tasks.sort_by_key(|t| (t.vcpu.unwrap_or(u32::MAX), t.tid));
        Some(tasks)
    }

    /// The group's two layouts; `None` where one does not fit.
    fn layouts<'a, 's>(
        &self,
        view: &'a View<'s>,
        g: &'s TaskGroup,
        tasks: Vec<&'s Task>,
        now: f64,
    ) -> Option<GroupRound<'a, 's>> {
        // Names come from /proc (or a VM's command line): escaped.
        let label = format!("{} ({})", printable(&g.label()), g.pid);
        let prefer = memory_packages(view.topology, g);
        // The CPUs the other groups hold: both mappings are laid out
        // on the rest, and a group that does not fit there is left to
        // Linux (the mappings assume vcores that own their cores).
        // Where its cgroup confines it (a libvirt domain's cpuset):
        // the CPUs outside that are taken too. Linux's, when this
        // policy gives the group back: its room.
        let room = tasks.first().map(|t| view.room(t))?;
        let taken: CpuSet = self
            .groups
            .iter()
            .filter(|(pid, _)| **pid != g.pid)
            .flat_map(|(_, st)| st.layout.cpus.iter().copied())
            .collect::<CpuSet>()
            .union(&view.topology.span().difference(&room));
        let current: Vec<Option<u32>> = tasks.iter().map(|t| t.last_cpu).collect();
        let fresh = |m: Mapping| {
            mapping::layout(view.topology, m, tasks.len(), &prefer, &taken)
                .map(|l| mapping::matched(view.topology, &l, &current))
        };
        // The group's layout as it stands: every vcore where it was put,
        // or, where threads ended, those left on the CPUs they hold.
        let kept = self.groups.get(&g.pid).and_then(|st| {
            let layout = if st.layout.cpus.len() == tasks.len() {
                Some(st.layout.clone())
            } else {
                let held: Option<Vec<u32>> = (tasks.iter())
                    .map(|t| t.allowed_cpus.first().filter(|_| t.allowed_cpus.len() == 1))
                    .collect();
                held.and_then(|cpus| mapping::survivors(view.topology, &st.layout, &cpus))
            };
            layout
                .filter(|l| l.cpus.iter().all(|c| !taken.contains(*c)))
                .map(|l| (st.mapping, l))
        });
        let (local, inter) = match kept {
            Some((Mapping::Local, l)) => (Some(l), fresh(Mapping::Interleaved)),
            Some((_, l)) => (fresh(Mapping::Local), Some(l)),
            None => (fresh(Mapping::Local), fresh(Mapping::Interleaved)),
        };
        let (Some(local), Some(inter)) = (local, inter) else {
            return None;
        };
        Some(GroupRound {
            view,
            g,
            tasks,
            label,
            room,
            local,
            inter,
            now,
        })
    }

    /// One group's round: left to Linux on a crowded machine or where
    /// \[Bae12\]'s premise fails, else placed when first seen, or voted on.
    fn decide_group(
        &mut self,
        gr: &GroupRound<'_, '_>,
        cfg: &AdaptiveConfig,
        crowded: Option<&String>,
        plan: &mut Plan,
    ) {
        let (g, tasks, local) = (gr.g, &gr.tasks, &gr.local);
        let reports = self.reports.clone();
        let mut reports = reports.lock().unwrap_or_else(|e| e.into_inner());
        let report = reports.entry(g.pid).or_insert_with(|| GroupReport {
            label: gr.label.clone(),
            first_s: gr.now,
            ..GroupReport::default()
        });
        report.last_s = gr.now;
        if let Some(why) = crowded.filter(|_| cfg.objective != Objective::Power) {
            if self.groups.remove(&g.pid).is_some() {
                gr.back_to_linux(plan, why);
            }
            report.vote_off = Some(why.clone());
            return;
        }
        // [Bae12]'s premise (premise.rs): where the models' vote does
        // not apply, the group holds the local mapping and is not probed.
        let aside = premise::fails(cfg.objective, local, &gr.inter, tasks.len());
        report.vote_off = aside.clone();
        // Holding local is the safe answer only where it gives every
        // vcore a core: doubled up on hardware threads ([Bae12]'s local
        // mapping) with no vote to say it pays, the group is left to
        // Linux, and threads this policy pinned get the machine back.
        if let Some(why) = aside.as_ref().filter(|_| local.cores.len() < tasks.len()) {
            let why = format!(
                "{why}, and the local mapping would put its {} vcores on {} cores: left to Linux",
                tasks.len(),
                local.cores.len()
            );
            if self.groups.remove(&g.pid).is_some() {
                gr.back_to_linux(plan, &why);
            }
            report.left_to_linux = Some(why);
            self.left.insert(g.pid);
            return;
        }
        if self.groups.contains_key(&g.pid) {
            self.known_group(gr, cfg, aside.as_ref(), report, plan);
        } else {
            self.first_seen(gr, cfg, aside.as_ref(), report, plan);
        }
    }

    /// A group seen for the first time: in the local mapping, next to its
    /// memory (\[Bae12\] §6.2), unless its memory is elsewhere or not
    /// resident yet.
    fn first_seen(
        &mut self,
        gr: &GroupRound<'_, '_>,
        cfg: &AdaptiveConfig,
        aside: Option<&String>,
        report: &mut GroupReport,
        plan: &mut Plan,
    ) {
        let (view, g, local) = (gr.view, gr.g, &gr.local);
        let (share, elsewhere) = memory_premise(view.topology, g, &local.sockets);
        if let Some(why) = elsewhere {
            report.left_to_linux = Some(why);
            self.left.insert(g.pid);
            return;
        }
        let known = g.memory.is_some();
        // How much its vcores write pages they share, where its pages are
        // seen (the page model, sampled addresses): probed only where
        // `too_early` asks.
        let shared_writes = || {
            vote::probe(view.snapshot, &gr.tasks, &self.params, cfg)
                .filter(|p| p.metrics.r_am > 0.0)
                .map(|p| (p.metrics.s_wm + p.metrics.s_ww) / 2.0)
        };
        let vcores = gr.tasks.len();
        if let Some(why) =
            premise::too_early(cfg.objective, share, known, local, vcores, shared_writes)
        {
            report.vote_off = Some(why);
            return;
        }
        let memory = match share {
            Some(f) => format!(
                " ({:.0} % of it on socket{} {:?})",
                f * 100.0,
                if local.sockets.len() == 1 { "" } else { "s" },
                local.sockets
            ),
            None => " (none resident yet)".to_string(),
        };
        let why = match aside {
            None => format!(
                "first seen; [Bae12] §6.2 starts every VM in the local mapping, next to its memory{memory}"
            ),
            Some(why) => format!(
                "first seen; [Bae12] §6.2 starts every VM in the local mapping, next to its memory{memory}, and it stays there: {why}"
            ),
        };
        gr.pin(plan, Mapping::Local, &why);
        self.groups.insert(
            g.pid,
            Group {
                mapping: Mapping::Local,
                layout: local.clone(),
                placed_blind: share.is_none(),
                phase: Phase::Steady,
                window_start: gr.now,
                overhead: 0.0,
                hold_until: gr.now,
            },
        );
        report.mapping = Some(Mapping::Local);
    }

    /// A group placed before: given back to Linux where its memory turned
    /// out to be elsewhere, kept in its mapping, back to local where the
    /// premise fails, and else probed and voted on once its overhead
    /// allows (§5.3).
    fn known_group(
        &mut self,
        gr: &GroupRound<'_, '_>,
        cfg: &AdaptiveConfig,
        aside: Option<&String>,
        report: &mut GroupReport,
        plan: &mut Plan,
    ) {
        let (view, g, local) = (gr.view, gr.g, &gr.local);
        let st = self.groups.get_mut(&g.pid).expect("a known group");
        if st.placed_blind {
            let (share, elsewhere) = memory_premise(view.topology, g, &st.layout.sockets);
            if let Some(why) = elsewhere.filter(|_| st.mapping == Mapping::Local) {
                let why = format!("placed before its memory was resident, and now {why}");
                self.groups.remove(&g.pid);
                gr.back_to_linux(plan, &why);
                report.left_to_linux = Some(why);
                self.left.insert(g.pid);
                return;
            }
            st.placed_blind = share.is_none();
        }
        st.layout = gr.layout(st.mapping).clone();
        // Threads moved by someone else (or new ones): back in place.
        gr.pin(
            plan,
            st.mapping,
            "keeps the group in its current mapping (it had left it)",
        );
        if let Some(why) = aside {
            if st.mapping != Mapping::Local {
                gr.pin(
                    plan,
                    Mapping::Local,
                    &format!("back to the local mapping, next to its memory: {why}"),
                );
                st.mapping = Mapping::Local;
                st.layout = local.clone();
                st.phase = Phase::Steady;
                report.remaps += 1;
                report.mapping = Some(Mapping::Local);
            }
            return;
        }
        if gr.now + 1e-9 < st.hold_until {
            return;
        }
        let Some(probe) = vote::probe(view.snapshot, &gr.tasks, &self.params, cfg) else {
            return;
        };
        report.probes += 1;
        report.probe_overhead_s += probe.cost_s;
        st.overhead += probe.cost_s;
        let power = power_model(&self.power, &self.params);
        let voted = vote::vote(&probe, st.mapping, local, &gr.inter, &self.params, power);
        next_phase(st, gr, cfg, &voted, report, plan);
        report.mapping = Some(st.mapping);
        report.last_vote = Some(voted);
        report.power_model = Some(power.0.clone());
    }
}

/// The share of the group's memory on `sockets`, and why a mapping on
/// them misses \[Bae12\]'s premise of memory beside the vcores, if it does
/// (most of it elsewhere, or lopsided over them: premise.rs).
fn memory_premise(t: &Topology, g: &TaskGroup, sockets: &[usize]) -> (Option<f64>, Option<String>) {
    let share = memory_share(t, g, sockets);
    let shares = socket_shares(t, g, sockets);
    let why = premise::memory_elsewhere(share, sockets)
        .or_else(|| premise::memory_lopsided(shares.as_deref(), sockets));
    (share, why)
}

/// §5.3 after a vote: a confident one is committed; an unconfident one
/// tries the other mapping to vote again there, and the second vote
/// settles it.
fn next_phase(
    st: &mut Group,
    gr: &GroupRound<'_, '_>,
    cfg: &AdaptiveConfig,
    voted: &Vote,
    report: &mut GroupReport,
    plan: &mut Plan,
) {
    let now = gr.now;
    let phase = std::mem::replace(&mut st.phase, Phase::Steady);
    match phase {
        Phase::Steady if voted.confident => {
            if voted.mapping != st.mapping {
                let why = format!("{}; committed (confident)", voted.describe(cfg));
                remap(st, gr, cfg, voted.mapping, why, report, plan);
            }
            interim(st, now, cfg.overhead_ceiling);
        }
        Phase::Steady => {
            let from = st.mapping;
            let why = format!(
                "{}; not confident, so trying the {} mapping to vote again there (§5.3)",
                voted.describe(cfg),
                from.other()
            );
            remap(st, gr, cfg, from.other(), why, report, plan);
            st.phase = Phase::Trial {
                first: voted.clone(),
                from,
            };
        }
        Phase::Trial { first, from } => {
            let (to, why) = vote::settle(&first, from, voted, st.mapping, cfg);
            if to != st.mapping {
                remap(st, gr, cfg, to, why, report, plan);
            }
            interim(st, now, cfg.overhead_ceiling);
        }
    }
}

/// Moves the group to mapping `to`, its remapping cost counted.
fn remap(
    st: &mut Group,
    gr: &GroupRound<'_, '_>,
    cfg: &AdaptiveConfig,
    to: Mapping,
    why: String,
    report: &mut GroupReport,
    plan: &mut Plan,
) {
    let remap_cost = cfg.remap_cost_ms / 1e3;
    gr.pin(plan, to, &why);
    st.mapping = to;
    st.layout = gr.layout(to).clone();
    st.overhead += remap_cost;
    report.remaps += 1;
    report.remap_overhead_s += remap_cost;
}

/// §5.3 Interim: with overhead `o` spent since `tsc_prev`, no probing until
/// o / elapsed ≤ ceiling; then a new window starts.
fn interim(st: &mut Group, now: f64, ceiling: f64) {
    let free_at = st.window_start + st.overhead / ceiling;
    st.hold_until = free_at.max(now);
    st.window_start = st.hold_until;
    st.overhead = 0.0;
}

#[cfg(test)]
mod tests;

/// Gives every thread of the group this policy had pinned the whole
/// machine back, with the reason.
fn back_to_linux(
    plan: &mut Plan,
    span: &CpuSet,
    tasks: &[&Task],
    pid: i32,
    label: &str,
    why: &str,
) {
    for t in tasks.iter().filter(|t| t.allowed_cpus != *span) {
        plan.push(
            Action::Pin {
                task: t.id(),
                tgid: pid,
                cpus: span.clone(),
            },
            format!(
                "adaptive-mapping: {label} vcore thread {} back to Linux (CPUs {span}): {why}",
                t.tid
            ),
        );
    }
}
