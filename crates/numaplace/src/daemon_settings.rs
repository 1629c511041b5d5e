//! The settings `numaplace run` starts with (and reloads on SIGHUP): the
//! config file, the command line's flags on top, then what they name read
//! and checked (the interval, the CPUs, the machine file, the metrics
//! address, the made-up counters).

use std::time::Duration;

use anyhow::Result;
use numaplace_linux::{SysRoot, TopologySource, discover_repaired};
use numaplace_model::Topology;
use numaplace_policy::PolicyKind;
use numaplace_sim::Machine;
use numaplace_sim::machine::Source;

use crate::cli::RunArgs;
use crate::commands::InputError;
use crate::config::Config;
use crate::daemon_setup::{choose, load_machine, restrict};
use crate::duration::parse_duration;
use crate::metrics;
use crate::synthetic_counters::SyntheticCounters;

/// The settings of a run, from the config file with the command line on top.
pub(crate) struct Settings {
    pub(crate) config: Config,
    pub(crate) interval: Duration,
    pub(crate) topology: Topology,
    /// `--counters-from`: counters made up for threads that match its rules.
    pub(crate) synthetic: Option<SyntheticCounters>,
    /// `[machine] file`: this host as `numaplace calibrate` measured it,
    /// on the topology numaplace places onto.
    pub(crate) machine: Option<Machine>,
}

impl Settings {
    /// The config's policy, told the machine where a file gives it.
    pub(crate) fn policy(&self) -> Box<dyn numaplace_policy::Policy> {
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
pub(crate) fn effective_config(args: &RunArgs) -> Result<Config> {
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

pub(crate) fn settings(args: &RunArgs) -> Result<Settings> {
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
