//! What `run`, `advise`, `record` and `top` share to set a daemon up: the
//! config with the command line on top, the topology it places onto, the
//! machine file `auto` predicts with, the engine's config, the collector,
//! what a policy says it does without a signal, and a journal entry for
//! people. A module of its own, so that no command imports another.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Result;
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_model::task::printable;
use numaplace_model::{CpuSet, Topology};
use numaplace_policy::engine::{Engine, EngineConfig, JournalEntry, LeftAloneNote};
use numaplace_policy::{PolicyKind, Scope};
use numaplace_sim::Machine;

use crate::cli::{PolicyArgs, ScopeArgs};
use crate::commands::InputError;
use crate::config::Config;

/// `n` nodes, in words.
fn nodes_text(n: usize) -> String {
    if n == 1 {
        "1 node".into()
    } else {
        format!("{n} nodes")
    }
}

/// The machine file `path`, checked against this host's `host` topology
/// (every CPU and node, before `cpus` cuts it down) and given `placed`,
/// the topology numaplace places onto: a file of another machine is an
/// error, not a model of the wrong machine.
pub(crate) fn load_machine(path: &Path, host: &Topology, placed: &Topology) -> Result<Machine> {
    let m = Machine::load(path).map_err(|e| {
        InputError(format!(
            "[machine] file: {e}; write it on this host with `numaplace calibrate -o {}`",
            path.display()
        ))
    })?;
    let (cpus, nodes) = (m.topology.cpus().len(), m.topology.nodes().len());
    let (host_cpus, host_nodes) = (host.cpus().len(), host.nodes().len());
    if (cpus, nodes) != (host_cpus, host_nodes) {
        return Err(InputError(format!(
            "[machine] file {}: it describes a machine of {cpus} CPUs in {} ({}), this host has \
             {host_cpus} CPUs in {}: it was written on another \
             machine, or before CPUs or nodes went on- or offline; run `numaplace calibrate -o {}` \
             on this host",
            path.display(),
            nodes_text(nodes),
            m.name,
            nodes_text(host_nodes),
            path.display()
        ))
        .into());
    }
    Ok(Machine {
        topology: placed.clone(),
        ..m
    })
}

/// `config` with the policy, CPUs and scope the command line gives on
/// top, checked.
pub(crate) fn choose(config: &mut Config, choice: &PolicyArgs, scope: &ScopeArgs) -> Result<()> {
    if let Some(p) = &choice.policy {
        config.policy =
            PolicyKind::from_name(p).map_err(|e| InputError(format!("--policy: {e}")))?;
        config.policy_named = true;
    }
    if let Some(c) = &choice.cpus {
        config.cpus = Some(c.clone());
    }
    merge_scope(&mut config.scope, scope);
    config.scope.validate().map_err(InputError)?;
    Ok(())
}

/// `topology` cut down to the config's `cpus`, if it names some.
pub(crate) fn restrict(topology: Topology, config: &Config) -> Result<Topology> {
    let Some(list) = &config.cpus else {
        return Ok(topology);
    };
    let cpus: CpuSet = list.parse().map_err(|e| InputError(format!("cpus: {e}")))?;
    Ok(topology
        .restrict(&cpus)
        .map_err(|e| InputError(format!("cpus {list}: {}", e.0)))?)
}

pub(crate) fn merge_scope(scope: &mut Scope, args: &ScopeArgs) {
    scope.all |= args.all;
    scope.vms |= args.vms;
    scope.pids.extend(&args.pid);
    scope.comms.extend(args.comm.iter().cloned());
    scope.cgroups.extend(args.cgroup.iter().cloned());
}

/// The engine's config for this host: the kernel's balancing as read at
/// start.
pub(crate) fn engine_config(c: &Config, balancing: NumaBalancing) -> EngineConfig {
    EngineConfig {
        kernel_balancing: balancing.balances_between_nodes(),
        ..c.engine.clone()
    }
}

/// What the policy says it does without each of the `missing` signals, in
/// their order, one entry per thing said: the names of the signals it said
/// it for (`A and B`) and what it said.
pub(crate) fn without_signals(
    engine: &Engine,
    missing: impl IntoIterator<Item = numaplace_policy::Signal>,
) -> Vec<(String, String)> {
    let mut said: Vec<(Vec<&str>, String)> = Vec::new();
    for signal in missing {
        let Some(what) = engine.without(signal) else {
            continue;
        };
        match said.iter_mut().find(|(_, w)| *w == what) {
            Some((names, _)) => names.push(signal.name()),
            None => said.push((vec![signal.name()], what)),
        }
    }
    said.into_iter()
        .map(|(names, what)| (names.join(" and "), what))
        .collect()
}

/// A collector of what the policy reads, and machine readings; the
/// operator's `[perf]` encodings of the uncore pair first, and the VM
/// sources of `[vms]`.
pub(crate) fn collector_for(engine: &Engine, c: &Config) -> Collector {
    let needs = engine.needs();
    let mut collector = Collector::with_config(
        SysRoot::host(),
        CollectOptions {
            memory: needs.memory,
            counters: needs.counters,
            samples: needs.samples,
            machine: true,
        },
        numaplace_linux::perf::SamplerConfig::default(),
        c.perf.encodings(),
    );
    // VMs whose vCPU threads carry no names: the config's QMP sockets, libvirt.
    collector.set_vm_sources(Some(c.vms.sources(c.vms.libvirt_unreachable())));
    // The kubelet's exclusive CPUs are no one else's; its Guaranteed pods
    // are its own.
    collector.set_kubelet(c.kubernetes.files());
    collector
}

/// A journal entry for people: `app (pid 12): pin thread 13 from CPUs 0-7
/// to CPUs 2-3` and, on the next line, `because <reason>`; names and
/// reasons escaped.
pub(crate) fn describe_decision(e: &JournalEntry) -> String {
    let what = crate::top_state::describe_action(&e.action, e.current.as_ref());
    if e.action.machine_wide() {
        return format!("the machine: {what}\n    because {}", printable(&e.reason));
    }
    format!(
        "{} (pid {}): {what}\n    because {}",
        printable(&e.label),
        e.pid,
        printable(&e.reason)
    )
}

/// The most processes `advise` lists as left alone; the rest are counted.
const LEFT_ALONE_SHOWN: usize = 40;

/// What `advise` says of the threads no policy may place: one line per
/// process and reason, naming the threads; empty if there are none.
pub(crate) fn describe_left_alone(notes: &[LeftAloneNote]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    // (pid, why) -> (label, tids), in pid order.
    let mut by: std::collections::BTreeMap<(i32, &str), (&str, Vec<i32>)> = Default::default();
    for n in notes {
        by.entry((n.pid, n.why.as_str()))
            .or_insert((n.label.as_str(), Vec::new()))
            .1
            .push(n.tid);
    }
    let mut out = format!(
        "Left alone: {} thread{} of processes in scope no policy may place:\n",
        notes.len(),
        if notes.len() == 1 { "" } else { "s" }
    );
    for ((pid, why), (label, tids)) in by.iter().take(LEFT_ALONE_SHOWN) {
        let shown: Vec<String> = tids.iter().take(8).map(|t| t.to_string()).collect();
        let more = tids.len().saturating_sub(8);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {} (pid {pid}), thread{} {}{more}: {why}\n",
            printable(label),
            if tids.len() == 1 { "" } else { "s" },
            shown.join(", ")
        ));
    }
    if by.len() > LEFT_ALONE_SHOWN {
        out.push_str(&format!(
            "  ... and {} more process and reason pairs\n",
            by.len() - LEFT_ALONE_SHOWN
        ));
    }
    out
}

/// What numaplace says at start when it runs confined itself (a
/// container's or a systemd unit's cpuset, a taskset): it still sees the
/// whole machine, and places others' threads on every CPU of it their
/// own cgroups allow. `None` when it may run anywhere.
pub(crate) fn own_confinement(topology: &numaplace_model::Topology) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    let own = numaplace_model::CpuSet::parse_list(list.trim()).ok()?;
    let all = topology.span();
    (!all.is_subset(&own)).then(|| {
        format!(
            "numaplace itself may run only on CPUs {own} (its cgroup's cpuset or its affinity); \
             it sees the whole machine, CPUs {all}, and places others' threads on any of them \
             their own cgroups allow"
        )
    })
}

/// Which libvirt domains run now, into `domains` (what the actuator pins
/// their threads through): one reading of the tasks, before restoring
/// what an earlier run left pinned.
pub(crate) fn read_libvirt_domains(
    c: &Config,
    domains: &numaplace_linux::actuate::libvirt::SharedDomains,
) {
    if !c.vms.libvirt {
        return;
    }
    let mut find = Collector::new(SysRoot::host(), Default::default());
    find.set_vm_sources(Some(c.vms.sources(c.vms.libvirt_unreachable())));
    find.share_libvirt_domains(std::sync::Arc::clone(domains));
    if let Err(e) = find.collect() {
        tracing::warn!("reading the tasks before restoring them: {e:#}");
    }
}

/// Write-ahead of original affinities into the state file.
pub(crate) struct StateGuard<'a> {
    pub(crate) state: &'a numaplace_linux::actuate::libvirt::SharedState,
}

impl StateGuard<'_> {
    fn file(&self) -> std::sync::MutexGuard<'_, numaplace_linux::state::StateFile> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl numaplace_model::world::PinGuard for StateGuard<'_> {
    fn before_pin(
        &mut self,
        task: numaplace_model::TaskId,
        tgid: i32,
        original: &CpuSet,
        new: &CpuSet,
    ) -> Result<(), String> {
        self.file()
            .record_pin(task, tgid, original.clone(), new.clone())
            .map_err(|e| e.to_string())
    }

    /// `kernel.numa_balancing` as it is now, recorded before numaplace
    /// turns balancing between nodes `on` or off (the tiering bit kept).
    fn before_kernel_balancing(&mut self, on: bool) -> Result<(), String> {
        let root = numaplace_linux::sysroot::SysRoot::host();
        let now = numaplace_linux::balancing::read_value(&root)
            .map_err(|e| format!("cannot read kernel.numa_balancing: {e}"))?;
        let applied = numaplace_linux::balancing::with_between_nodes(now, on);
        self.file()
            .record_kernel_balancing(now, applied)
            .map_err(|e| e.to_string())
    }
}

/// The decision journal: JSON lines, appended, mode 0600, never through a
/// symlink.
pub(crate) struct Journal {
    out: Option<BufWriter<File>>,
}

impl Journal {
    pub(crate) fn open(path: Option<&Path>) -> Result<Journal> {
        let Some(path) = path else {
            return Ok(Journal { out: None });
        };
        let f = crate::commands::open_output(path, "journal", true, 0o600)?;
        Ok(Journal {
            out: Some(BufWriter::new(f)),
        })
    }

    /// Writes one entry and flushes it: an action carried out must be in
    /// the journal even if the daemon is killed the next instant.
    pub(crate) fn write(&mut self, e: &JournalEntry) {
        // Labels and reasons carry names processes chose: escaped for the log.
        tracing::info!(pid = e.pid, label = %printable(&e.label), "{}: {:?}", printable(&e.reason), e.outcome);
        if let Some(out) = &mut self.out {
            let written = crate::output::json::to_writer(&mut *out, e)
                .map_err(std::io::Error::from)
                .and_then(|_| out.write_all(b"\n"))
                .and_then(|_| out.flush());
            if let Err(err) = written {
                tracing::warn!("journal: {err}");
            }
        }
    }
}

/// The scope's rules as the log names them.
pub(crate) fn describe_scope(s: &Scope) -> String {
    let mut parts = Vec::new();
    if !s.pids.is_empty() {
        parts.push(format!("pids {:?}", s.pids));
    }
    if !s.comms.is_empty() {
        parts.push(format!("comms {:?}", s.comms));
    }
    if !s.cgroups.is_empty() {
        parts.push(format!("cgroups {:?}", s.cgroups));
    }
    if s.vms {
        parts.push("VMs".into());
    }
    parts.join(", ")
}
