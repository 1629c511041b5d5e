//! The daemon's collector: what the policy reads and the machine's
//! readings, set for the daemon's own cost, and what it says at start
//! about what this machine cannot measure (and what the policy does
//! without it), the kernel's NUMA balancing and made-up counters.

use std::time::Duration;

use anyhow::{Context, Result};
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_policy::engine::{Engine, MemoryMover};

use crate::checks;
use crate::config::Config;
use crate::error::InputError;
use crate::report::engine::{describe_scope, without_signals};
use crate::synthetic_counters::SyntheticCounters;

/// The longest a quiet process (none of its threads ran) goes without being
/// read in full: what the daemon's rounds can miss of it (a thread woken but
/// not yet run, memory moved by another process; see the collector's
/// `set_carry_over`) is at most this old. At a 1 s interval an idle process
/// is read in full one round in ten.
const CARRY_MAX_AGE: Duration = Duration::from_secs(10);

/// A collector of what the policy reads, and machine readings; the
/// operator's `[perf]` encodings of the uncore pair first, and the VM
/// sources of `[vms]`.
pub fn collector_for(engine: &Engine, c: &Config) -> Collector {
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

/// The daemon's collector, set for its own cost, after a first reading
/// (the baseline of the first round's CPU times and counters); says what
/// the machine cannot measure and what the policy does without it.
/// Returns it with the number of processes in scope: none is an error
/// where the scope names only pids, a wait otherwise.
pub(super) fn start_collecting(
    engine: &Engine,
    c: &Config,
    balancing: NumaBalancing,
    mut synthetic: Option<&mut SyntheticCounters>,
) -> Result<(Collector, usize)> {
    let mut collector = collector_for(engine, c);
    // The daemon's own cost per round: quiet processes carried over, and
    // memory read only where the policy may act (it reads no other).
    collector.set_carry_over(Some(CARRY_MAX_AGE));
    collector.set_memory_scope(Some(c.scope.clone()));
    for m in collector.missing_signals() {
        tracing::warn!("not measured: {m}");
    }
    for why in blind_policy(engine, &collector, synthetic.is_some()) {
        tracing::warn!("{why}");
    }
    if let Some(short) = checks::short(&checks::checks(&SysRoot::host())) {
        tracing::warn!("{short}");
    }
    say_balancing(balancing, c);
    // The kernel takes hinting faults only while it balances: then they
    // say, per thread, which node its memory accesses go to.
    collector.set_numa_faults(balancing.balances_between_nodes());
    if let Some(synth) = synthetic.as_deref() {
        say_synthetic(synth, engine);
    }
    let mut first = collector.collect().context("reading the machine")?;
    if let Some(synth) = synthetic.as_mut() {
        // The baseline of CPU times the next round's counters come from.
        synth.apply(&mut first);
    }
    let managed = engine.managed(&first);
    collector.set_sample_processes(Some(managed.clone()));
    // One rule, typed or in a config: rules that later processes can
    // match (names, cgroups, VMs, every process) wait for them; pids alone
    // cannot, a pid that is gone does not come back as the same process.
    let only_pids = {
        let sc = &c.scope;
        !sc.pids.is_empty() && !sc.all && !sc.vms && sc.comms.is_empty() && sc.cgroups.is_empty()
    };
    if managed.is_empty() && only_pids {
        return Err(InputError(format!(
            "the scope matches no running process ({}): none of those pids runs; start the              processes first, or name them by --comm, --cgroup or --vms to place them as they              start",
            describe_scope(&c.scope)
        ))
        .into());
    } else if managed.is_empty() {
        tracing::warn!(
            "the scope matches no running process yet ({}); numaplace places them as they appear",
            describe_scope(&c.scope)
        );
    }
    Ok((collector, managed.len()))
}

/// Which libvirt domains run now, into `domains` (what the actuator pins
/// their threads through): one reading of the tasks, before restoring
/// what an earlier run left pinned.
pub(super) fn read_libvirt_domains(
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

/// Says, at start, the kernel's automatic NUMA balancing mode and what
/// numaplace does about it (`[engine] memory_mover`): a warning where the
/// two may move the same pages.
fn say_balancing(balancing: NumaBalancing, c: &Config) {
    let on = balancing.balances_between_nodes();
    let mover = c.engine.memory_mover;
    let line = format!("{}; {}", balancing.describe(), mover.describe(on));
    if on && mover == MemoryMover::Numaplace {
        tracing::warn!("{line}");
    } else {
        tracing::info!("{line}");
    }
    if balancing != NumaBalancing::Absent {
        let may = c.engine.manage_kernel_balancing && c.scope.all;
        tracing::info!(
            "{}",
            if may {
                "kernel.numa_balancing may be turned on or off by the policy (auto tries the other \
                 setting as an experiment); the value found is recorded in the state file first \
                 and put back at stop ([engine] manage_kernel_balancing = false to forbid it)"
            } else if c.engine.manage_kernel_balancing {
                "kernel.numa_balancing is left as it is: the scope is not every process, and the \
                 setting is the whole machine's"
            } else {
                "kernel.numa_balancing is left as it is ([engine] manage_kernel_balancing = false)"
            }
        );
    }
    if on {
        tracing::info!(
            "where each thread's memory accesses go is read from the kernel's NUMA hinting \
             faults per node (/proc/PID/task/TID/sched); threads numaplace pins are not moved \
             back by the kernel (its task placement keeps to their allowed CPUs)"
        );
    }
}

/// Says, at start, that counters of threads matching `--counters-from` are
/// made up, and whether the policy reads them at all.
fn say_synthetic(synth: &SyntheticCounters, engine: &Engine) {
    tracing::warn!("{}", synth.describe());
    if !engine.needs().counters {
        tracing::warn!(
            "policy {} reads no counters: --counters-from changes nothing it decides",
            engine.policy_name()
        );
    }
}

/// What the policy does without each signal it reads that this machine
/// cannot give (counters that `--counters-from` makes up count as given):
/// one line per missing signal, in the policy's own words; signals for
/// which it says the same thing share one line (`auto` judges by
/// instructions, which both LLC misses and CPI need).
pub fn blind_policy(engine: &Engine, collector: &Collector, synthetic: bool) -> Vec<String> {
    use numaplace_model::Counter;
    use numaplace_policy::Signal;
    let counted = |cs: &[Counter]| {
        collector
            .perf()
            .is_some_and(|p| cs.iter().all(|&c| p.availability().is_counted(c)))
    };
    let missing = Signal::ALL.into_iter().filter(|&signal| !match signal {
        // --counters-from makes up instructions, cycles and LLC misses.
        Signal::LlcMissRate | Signal::Cpi => synthetic || counted(signal.counters()),
        Signal::UncorePenalty => counted(signal.counters()),
        Signal::Samples => collector
            .sampler()
            .is_some_and(|s| s.availability().reason().is_none()),
        Signal::Energy => collector.rapl().is_some(),
        Signal::LlcOccupancy => collector
            .resctrl()
            .is_some_and(|r| r.mon_features().iter().any(|f| f == "llc_occupancy")),
    });
    without_signals(engine, missing)
        .into_iter()
        .map(|(names, what)| format!("policy {} without {names}: {what}", engine.policy_name()))
        .collect()
}
