//! The settings `numaplace run` starts with (and reloads on SIGHUP): the
//! config file, the command line's flags on top, then what they name read
//! and checked (the interval, the CPUs, the machine file, the metrics
//! address, the made-up counters), in one pass; and the pieces of it that
//! `top` and `replay` take too (the policy, CPUs and scope the command
//! line gives, the topology cut to the CPUs, the engine's config).

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::{SysRoot, TopologySource, discover_repaired};
use numaplace_model::{CpuSet, Topology};
use numaplace_policy::engine::EngineConfig;
use numaplace_policy::{PolicyKind, Scope};
use numaplace_sim::Machine;
use numaplace_sim::machine::Source;

use super::metrics;
use crate::cli::{PolicyArgs, RunArgs, ScopeArgs};
use crate::config::Config;
use crate::duration::parse_duration;
use crate::error::InputError;
use crate::synthetic_counters::SyntheticCounters;

/// The settings of a run, from the config file with the command line on top.
pub struct Settings {
    /// The config, with the command line's options written into it.
    pub config: Config,
    /// Time between rounds: the config's, or the policy's default.
    pub interval: Duration,
    /// The machine numaplace places onto (`cpus` applied).
    pub topology: Topology,
    /// `--counters-from`: counters made up for threads that match its rules.
    pub synthetic: Option<SyntheticCounters>,
    /// `[machine] file`: this host as `numaplace calibrate` measured it,
    /// on the topology numaplace places onto.
    pub(crate) machine: Option<Machine>,
}

impl Settings {
    /// The config's policy, told the machine where a file gives it.
    pub fn policy(&self) -> Box<dyn numaplace_policy::Policy> {
        let mut p = self.config.policy.build();
        if let Some(m) = &self.machine {
            p.told(m);
        }
        p
    }

    /// What the policy's model of the machine runs on, for the start log;
    /// `None` for a policy that does not predict.
    pub(crate) fn machine_line(&self) -> Option<String> {
        if !matches!(self.config.policy, PolicyKind::Auto(_)) {
            return None;
        }
        Some(match (&self.machine, &self.config.machine.file) {
            (Some(m), Some(f)) => {
                let p = &m.params;
                let named = p.named();
                let measured = named
                    .iter()
                    .filter(|(_, x)| matches!(x.source, Source::Measured(_)))
                    .count();
                format!(
                    "auto predicts with the machine file {} ({}: {measured} of its {} parameters \
                     measured, the rest stated defaults; {:.2} GHz, {:.0} ns local memory, \
                     {:.1} GB/s a node)",
                    f.display(),
                    m.name,
                    named.len(),
                    p.ghz.value,
                    p.local_latency_ns.value,
                    p.node_bandwidth_gbs.value
                )
            }
            _ => "auto predicts with generic parameters for this topology: `numaplace calibrate \
                  -o /etc/numaplace/machine.json` measures this host, and `[machine] file` \
                  (or --machine) gives the file to the daemon"
                .into(),
        })
    }
}

/// The configuration `run` would use: the file (or the default one), the
/// command line's flags on top.
fn effective_config(args: &RunArgs) -> Result<Config> {
    let mut config = Config::load(args.choice.config.as_deref())?;
    choose(&mut config, &args.choice, &args.scope)?;
    if let Some(i) = &args.interval {
        config.interval = Some(i.clone());
    }
    if args.dry_run {
        config.dry_run = true;
    }
    if let Some(j) = &args.journal {
        config.journal = Some(j.clone());
    }
    if let Some(s) = &args.state {
        config.state = s.clone();
    }
    if let Some(m) = &args.metrics {
        config.metrics.listen = Some(m.clone());
    }
    if let Some(m) = &args.machine {
        config.machine.file = Some(m.clone());
    }
    Ok(config)
}

/// The settings of `run` (and `advise`) with `args`: the config read,
/// checked and merged with the command line, the machine discovered.
pub fn settings(args: &RunArgs) -> Result<Settings> {
    let config = effective_config(args)?;
    let interval = match &config.interval {
        Some(text) => {
            let i = parse_duration(text, "interval").map_err(InputError)?;
            if i < Duration::from_millis(10) {
                return Err(InputError(format!(
                    "interval {text:?}: must be at least 10ms (the daemon decides once per interval)"
                ))
                .into());
            }
            i
        }
        None => config.policy.build().default_interval(),
    };
    // What discovery repaired in this machine's files, said once (a
    // reload reads the machine again and finds the same).
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let found = discover_repaired(&TopologySource::Sysfs(SysRoot::host()))?;
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        for r in &found.repairs {
            tracing::warn!("topology repaired: {r}");
        }
    }
    let topology = restrict(found.topology.clone(), &config)?;
    let machine = config
        .machine
        .file
        .as_deref()
        .map(|f| load_machine(f, &found.topology, &topology))
        .transpose()?;
    if let Some(l) = &config.metrics.listen {
        metrics::parse_listen(l)?;
    }
    let synthetic = SyntheticCounters::load_given(args.choice.counters_from.as_deref())?;
    Ok(Settings {
        config,
        interval,
        topology,
        synthetic,
        machine,
    })
}

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
fn load_machine(path: &Path, host: &Topology, placed: &Topology) -> Result<Machine> {
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
pub fn choose(config: &mut Config, choice: &PolicyArgs, scope: &ScopeArgs) -> Result<()> {
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
pub fn restrict(topology: Topology, config: &Config) -> Result<Topology> {
    let Some(list) = &config.cpus else {
        return Ok(topology);
    };
    let cpus: CpuSet = list.parse().map_err(|e| InputError(format!("cpus: {e}")))?;
    Ok(topology
        .restrict(&cpus)
        .map_err(|e| InputError(format!("cpus {list}: {}", e.0)))?)
}

pub(super) fn merge_scope(scope: &mut Scope, args: &ScopeArgs) {
    scope.all |= args.all;
    scope.vms |= args.select.vms;
    scope.pids.extend(&args.select.pid);
    scope.comms.extend(args.select.comm.iter().cloned());
    scope.cgroups.extend(args.select.cgroup.iter().cloned());
}

/// The engine's config for this host: the kernel's balancing as read at
/// start.
pub fn engine_config(c: &Config, balancing: NumaBalancing) -> EngineConfig {
    EngineConfig {
        kernel_balancing: balancing.balances_between_nodes(),
        ..c.engine.clone()
    }
}
