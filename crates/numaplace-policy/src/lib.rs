//! numaplace's policies and the engine that runs them.
//!
//! A policy is a plain struct behind [`Policy`]: each round it gets a
//! [`View`] (the machine, what telemetry saw, which processes it may touch)
//! and returns a [`Plan`]. It never knows whether the world is a live host,
//! a replayed recording or the simulator: the [`engine`] feeds it from a
//! [`engine::Telemetry`] and hands its plan to an [`engine::Actuator`].

/// The serde impls of a policy's parameters that check them where they
/// are read, so that a config, a replay's config and the simulator all
/// refuse a value out of range with [`Params::validate`]'s message. The
/// type derives `Serialize` and `Deserialize` with
/// `#[serde(remote = "Self")]`, which makes the derived code the inherent
/// functions `T::serialize` and `T::deserialize` (the fields read
/// unchecked); `checked_params!(T)` implements the traits with them,
/// deserialising and then validating. One line per type instead of a copy
/// of its fields.
macro_rules! checked_params {
    ($t:ty) => {
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$t>::serialize(self, serializer)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let p = <$t>::deserialize(deserializer)?;
                $crate::Params::validate(&p).map_err(serde::de::Error::custom)?;
                Ok(p)
            }
        }
    };
}

pub mod adaptive;
pub mod as_if_applied;
pub mod auto;
pub mod brm;
pub mod dino;
pub mod engine;
pub mod numad;
pub mod preplacement;
pub mod registry;
pub mod replay;
pub mod static_placement;
pub mod symbiosis;
#[cfg(any(test, feature = "testutil"))]
pub mod testutil;

use std::collections::{BTreeMap, BTreeSet};

use std::collections::HashMap;

use numaplace_model::task::printable;
use numaplace_model::{Counter, CpuSet, Plan, Snapshot, Task, TaskId, Topology};

pub use numaplace_model::Scope;
pub use registry::{PolicyKind, UnknownPolicy};

/// What a policy sees in one round.
pub struct View<'a> {
    /// The machine: its packages, nodes, caches, cores and CPUs.
    pub topology: &'a Topology,
    /// The round's readings: every process and thread with its counters,
    /// memory per node and affinity.
    pub snapshot: &'a Snapshot,
    /// Processes (pids) the policy may act on; anything else it must leave
    /// alone (the engine also refuses actions outside it).
    pub managed: &'a BTreeSet<i32>,
}

impl View<'_> {
    /// Whether a policy may place thread `t` this round: its process is in
    /// scope, it has not exited, and its affinity covers the CPUs
    /// numaplace may place it onto ([`View::room`]: the machine's, or
    /// those of them its cgroup confines it to) or is what the policy
    /// itself set last (`ours`). A thread with any other affinity chose
    /// its CPUs, and the engine leaves it alone.
    pub fn placeable<S: std::hash::BuildHasher>(
        &self,
        t: &Task,
        ours: &HashMap<TaskId, CpuSet, S>,
    ) -> bool {
        self.managed.contains(&t.tgid)
            && !matches!(t.state, 'Z' | 'X')
            && (t.chose_nothing(self.topology.span()) || ours.get(&t.id()) == Some(&t.allowed_cpus))
    }

    /// The CPUs thread `t` may be placed on: the machine's, or those of
    /// them its cgroup's cpuset confines it to (libvirt's domain, a pod,
    /// systemd's `AllowedCPUs=`). Every pin a policy asks for a thread
    /// lies within them; the engine refuses one that does not.
    pub fn room(&self, t: &Task) -> CpuSet {
        t.room(self.topology.span())
    }

    /// CPUs `cpus` a policy chose for `t`, made to lie within its
    /// [`View::room`]: as they are where they do; else those of them it
    /// may use; else its room's CPUs on the nodes of `cpus` (a policy that
    /// picked a core picked a node for its memory too); `None` where its
    /// room has no CPU on those nodes (the thread is not moved there).
    /// A policy pins what this returns and keeps that as what it set.
    pub fn confine(&self, t: &Task, cpus: &CpuSet) -> Option<CpuSet> {
        confine(self.topology, t.confined_cpus.as_ref(), cpus)
    }

    /// Why thread `t`, of a process in scope, is not one a policy may
    /// place; `None` where it is ([`View::placeable`] then holds, `ours`
    /// being what numaplace set last).
    pub fn left_alone<S: std::hash::BuildHasher>(
        &self,
        t: &Task,
        ours: &HashMap<TaskId, CpuSet, S>,
    ) -> Option<LeftAlone> {
        // Every thread, every round: the common answer first, without the
        // search for its process.
        if t.chose_nothing(self.topology.span()) || ours.get(&t.id()) == Some(&t.allowed_cpus) {
            return None;
        }
        if self.snapshot.group(t.tgid).is_some_and(|g| g.is_kernel()) {
            return Some(LeftAlone::Kernel);
        }
        if let Some(numaplace_model::Manager {
            who,
            hands_off: Some(why),
            ..
        }) = &t.manager
        {
            return Some(LeftAlone::Managed {
                who: who.clone(),
                why: why.clone(),
            });
        }
        let room = self.room(t);
        if room.is_empty() {
            return Some(LeftAlone::NoRoom {
                confined: t.confined_cpus.clone().unwrap_or_default(),
                span: self.topology.span().clone(),
            });
        }
        (!room.is_subset(&t.allowed_cpus)).then(|| LeftAlone::ChoseCpus {
            affinity: t.allowed_cpus.clone(),
            room,
            confined: t.confined_cpus.is_some(),
        })
    }

    /// Each process's label (name, or VM name), printable, by pid: what
    /// decision reasons call it.
    pub fn labels(&self) -> HashMap<i32, String> {
        self.snapshot
            .groups
            .iter()
            .map(|g| (g.pid, printable(&g.label())))
            .collect()
    }
}

/// Why a thread of a process in scope is not placed ([`View::left_alone`],
/// [`engine::Engine::left_alone`]): said by `advise`, `tasks`, `top`, once
/// per thread in the daemon's log, and counted by kind in `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftAlone {
    /// Its affinity is narrower than the CPUs it may be placed on: it,
    /// its launcher (`taskset`, `numactl`) or its runtime chose its CPUs.
    ChoseCpus {
        /// The CPUs its affinity allows.
        affinity: CpuSet,
        /// The CPUs it may be placed on ([`View::room`]).
        room: CpuSet,
        /// Whether a cgroup narrows `room`.
        confined: bool,
    },
    /// Its cgroup confines it to CPUs numaplace may not place onto.
    NoRoom {
        /// The CPUs its cgroup's cpuset allows.
        confined: CpuSet,
        /// The CPUs numaplace may place onto (its scope's machine).
        span: CpuSet,
    },
    /// It changed its affinity after numaplace had set it: it is its own
    /// from then on.
    TookItBack {
        /// The affinity it set itself.
        affinity: CpuSet,
    },
    /// A kernel thread.
    Kernel,
    /// Its manager holds its placement and numaplace leaves it there
    /// (libvirt, for a domain its owner pinned; or libvirt cannot be
    /// reached): `who` and `why` from [`numaplace_model::Manager`].
    Managed {
        /// The manager (`libvirt`).
        who: String,
        /// Why it holds the placement, in its manager's terms.
        why: String,
    },
}

impl LeftAlone {
    /// A short name for the reason: `/metrics`' label, `tasks --json`.
    pub fn kind(&self) -> &'static str {
        match self {
            LeftAlone::ChoseCpus { .. } => "chose-cpus",
            LeftAlone::NoRoom { .. } => "confined-elsewhere",
            LeftAlone::TookItBack { .. } => "took-affinity-back",
            LeftAlone::Kernel => "kernel-thread",
            LeftAlone::Managed { .. } => "held-by-manager",
        }
    }

    /// Every kind, in the order `/metrics` lists them.
    pub const KINDS: [&'static str; 5] = [
        "chose-cpus",
        "confined-elsewhere",
        "took-affinity-back",
        "kernel-thread",
        "held-by-manager",
    ];
}

impl std::fmt::Display for LeftAlone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeftAlone::ChoseCpus {
                affinity,
                room,
                confined,
            } => write!(
                f,
                "chose its own CPUs: its affinity is {affinity}, narrower than the {} \
                 (taskset, numactl or its runtime's own pinning)",
                if *confined {
                    format!("CPUs {room} its cgroup confines it to")
                } else {
                    format!("machine's CPUs {room}")
                }
            ),
            LeftAlone::NoRoom { confined, span } => write!(
                f,
                "its cgroup confines it to CPUs {confined}, none of which numaplace may use \
                 ({span})"
            ),
            LeftAlone::TookItBack { affinity } => write!(
                f,
                "set its own affinity ({affinity}) after numaplace had placed it: left to it \
                 from then on"
            ),
            LeftAlone::Kernel => write!(f, "a kernel thread"),
            LeftAlone::Managed { who, why } => write!(f, "{who} holds its placement: {why}"),
        }
    }
}

/// [`View::confine`] for a thread confined to `confined` (`None`: not
/// confined), for policies that keep a thread's confinement rather than
/// the thread.
pub fn confine(topology: &Topology, confined: Option<&CpuSet>, cpus: &CpuSet) -> Option<CpuSet> {
    let Some(c) = confined else {
        return Some(cpus.clone());
    };
    if cpus.is_subset(c) {
        return Some(cpus.clone());
    }
    let room = topology.span().intersection(c);
    let within = cpus.intersection(&room);
    if !within.is_empty() {
        return Some(within);
    }
    let nodes: CpuSet = (topology.nodes().iter())
        .filter(|n| n.span.intersects(cpus))
        .fold(CpuSet::new(), |a, n| a.union(&n.span));
    Some(nodes.intersection(&room)).filter(|x| !x.is_empty())
}

/// Which costly signals a policy reads, so the daemon collects only those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Hardware / software counters per thread (perf_event).
    pub counters: bool,
    /// Memory per node of every process (`numa_maps`).
    pub memory: bool,
    /// Sampled data addresses per thread (PEBS / IBS on a live host;
    /// `Snapshot::samples`): an fd and a ring buffer per thread, so only
    /// for policies that move the pages threads touch.
    pub samples: bool,
    /// \[Bae12\] §4's per-thread page sets (which pages each thread
    /// touched over a window, `Snapshot::page_sets`): the simulator keeps
    /// them only for policies that read them, as they cost memory per page.
    pub page_sets: bool,
}

/// A policy's parameters as a config gives them: checked where they are
/// read (the config file, a replay's config), before the policy is built,
/// so that a value out of range is an error naming the key and its range
/// instead of a wrong placement, a panic or an allocation that fails.
/// `validate` is the one home of each type's range checks: the serde
/// impls that check (DINO's, BRM's, symbiosis', made by `checked_params!`)
/// call it, as does [`crate::PolicyKind::validate`].
pub trait Params {
    /// `Ok` where every value is within its range; otherwise one line
    /// naming the key, the value and the range. The default accepts all.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// `key = v` within `lo..=hi`, or an error naming the key and the range.
pub fn within<T: PartialOrd + std::fmt::Display>(
    key: &str,
    v: T,
    lo: T,
    hi: T,
) -> Result<(), String> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(format!("{key} = {v}: must be {lo}..={hi}"))
    }
}

/// A placement policy.
pub trait Policy: Send {
    /// The registry name (`numad-like`).
    fn name(&self) -> &'static str;

    /// Time between rounds when the user gives none.
    fn default_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }

    /// The signals it reads: counters and memory unless it says
    /// otherwise; sampled addresses only if it asks for them.
    fn needs(&self) -> Needs {
        Needs {
            counters: true,
            memory: true,
            samples: false,
            page_sets: false,
        }
    }

    /// What it does instead when this machine cannot give `signal`: one
    /// sentence for the daemon's start-up warnings, or `None` if it does
    /// not read that signal. A policy that reads a signal must say here
    /// what becomes of its decisions without it.
    fn without(&self, signal: Signal) -> Option<String> {
        let _ = signal;
        None
    }

    /// Tells it the machine it places work on, once, before its first
    /// round: the model's parameters of the topology (latencies,
    /// bandwidths, clock, caches' hit latency). On a live host these are
    /// what `numaplace calibrate` measured, or `Machine::generic`'s stated
    /// defaults; in the simulator, the scenario's machine, which the
    /// simulated world may differ from (`compare --mismatch`). A policy
    /// that predicts with the machine model (`auto`) keeps it; the others
    /// ignore it.
    fn told(&mut self, machine: &numaplace_machine::Machine) {
        let _ = machine;
    }

    /// Decides one round.
    fn decide(&mut self, view: &View<'_>) -> Plan;

    /// What it made, at its last decision, of each group of `snapshot` it
    /// classes, by pid, in a few words (DINO's classes of the group's
    /// threads, `auto`'s state of its experiments): for the operator's
    /// view (`numaplace top`). Empty for a policy that classes nothing.
    fn classes(&self, snapshot: &numaplace_model::Snapshot) -> BTreeMap<i32, String> {
        let _ = snapshot;
        BTreeMap::new()
    }
}

/// A signal a policy may read that a machine may lack: a VM without a
/// virtual PMU counts none of the hardware events and samples no
/// addresses; uncore events need a known uncore PMU; resctrl needs RDT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    /// LLC misses and instructions per thread (MPKI).
    LlcMissRate,
    /// Cycles and instructions per thread (CPI, IPC).
    Cpi,
    /// The uncore's occupancy and requests per thread (BRM's penalty).
    UncorePenalty,
    /// Sampled data addresses per thread (PEBS / IBS).
    Samples,
    /// LLC occupancy from resctrl monitoring.
    LlcOccupancy,
    /// The machine's energy (RAPL).
    Energy,
}

impl Signal {
    /// Every signal, in the order declared above.
    pub const ALL: [Signal; 6] = [
        Signal::LlcMissRate,
        Signal::Cpi,
        Signal::UncorePenalty,
        Signal::Samples,
        Signal::LlcOccupancy,
        Signal::Energy,
    ];

    /// The per-thread counters that make it, for a signal counted by
    /// perf_event (empty for the others).
    pub fn counters(self) -> &'static [Counter] {
        match self {
            Signal::LlcMissRate => &[Counter::LlcMisses, Counter::Instructions],
            Signal::Cpi => &[Counter::Cycles, Counter::Instructions],
            Signal::UncorePenalty => &[Counter::UncoreOccupancy, Counter::UncoreRequests],
            Signal::Samples | Signal::LlcOccupancy | Signal::Energy => &[],
        }
    }

    /// What it is, in words, for messages (`LLC misses per 1000
    /// instructions`).
    pub fn name(self) -> &'static str {
        match self {
            Signal::LlcMissRate => "LLC misses per 1000 instructions",
            Signal::Cpi => "cycles per instruction",
            Signal::UncorePenalty => "uncore occupancy and requests",
            Signal::Samples => "sampled data addresses",
            Signal::LlcOccupancy => "resctrl LLC occupancy",
            Signal::Energy => "energy readings (RAPL)",
        }
    }
}

/// Leaves Linux alone: the baseline every other policy is measured against.
/// As `autonuma` it is the same nothing, named for the kernel it runs on:
/// Linux's automatic NUMA balancing on (`kernel.numa_balancing=1`), the
/// other yardstick, which the simulator turns on under it.
#[derive(Debug, Default)]
pub struct DefaultPolicy {
    /// Named `autonuma`.
    pub autonuma: bool,
}

impl Policy for DefaultPolicy {
    fn name(&self) -> &'static str {
        if self.autonuma { "autonuma" } else { "default" }
    }

    fn needs(&self) -> Needs {
        Needs {
            counters: false,
            memory: false,
            samples: false,
            page_sets: false,
        }
    }

    fn decide(&mut self, _view: &View<'_>) -> Plan {
        Plan::default()
    }
}
