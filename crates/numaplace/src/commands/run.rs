//! `numaplace run` (the daemon) and `numaplace advise` (one round, nothing
//! applied).
//!
//! `Opts -> Daemon::init -> run(stop)`: the start restores whatever an
//! earlier run that was killed left pinned, then every interval the engine
//! decides on a fresh snapshot; SIGTERM / SIGINT end the loop and every
//! affinity numaplace changed is restored before it exits.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use numaplace_linux::actuate::HostActuator;
use numaplace_linux::actuate::libvirt::{SharedDomains, SharedState, ThroughLibvirt};
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::guest_hints::Hinted;
use numaplace_linux::state::StateFile;
use numaplace_linux::{Collector, LiveTelemetry, SysRoot};
use numaplace_model::task::printable;
use numaplace_model::{Action, CpuSet, Outcome, Snapshot, TaskId};
use numaplace_policy::Scope;
use numaplace_policy::engine::{
    Actuator, AffinityError, Engine, EngineTotals, JournalEntry, MemoryMover, NoGuard, Observer,
    Pair, PinGuard, Reconfigure, RecordingActuator, RoundReport,
};

use crate::cli::RunArgs;
use crate::commands::InputError;
use crate::config::{Config, describe_policy};
use crate::daemon_reload::{Reloader, Waited, wait_for_a_scope};
use crate::daemon_settings::{Settings, settings};
use crate::daemon_setup::{
    Journal, StateGuard, collector_for, describe_decision, describe_left_alone, describe_scope,
    engine_config, merge_scope, without_signals,
};
use crate::metrics::{self, MetricsState};
use crate::synthetic_counters::{Synthesized, SyntheticCounters};

/// The longest a quiet process (none of its threads ran) goes without being
/// read in full: what the daemon's rounds can miss of it (a thread woken but
/// not yet run, memory moved by another process; see the collector's
/// `set_carry_over`) is at most this old. At a 1 s interval an idle process
/// is read in full one round in ten.
const CARRY_MAX_AGE: Duration = Duration::from_secs(10);

/// Carries actions out on the host, or only records them (dry run).
enum Hands {
    /// The host, libvirt's domains through libvirt.
    Host(ThroughLibvirt<HostActuator>),
    Dry(RecordingActuator),
}

impl Actuator for Hands {
    fn apply(&mut self, action: &Action) -> Outcome {
        match self {
            Hands::Host(h) => Actuator::apply(h, action),
            Hands::Dry(r) => r.apply(action),
        }
    }

    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError> {
        match self {
            Hands::Host(h) => Actuator::affinity(h, task, tgid),
            Hands::Dry(r) => r.affinity(task, tgid),
        }
    }

    fn kernel_balancing_value(&self) -> Option<Result<u32, String>> {
        match self {
            Hands::Host(h) => Actuator::kernel_balancing_value(h),
            Hands::Dry(_) => None,
        }
    }

    fn set_kernel_balancing_value(&mut self, value: u32) -> Result<(), String> {
        match self {
            Hands::Host(h) => Actuator::set_kernel_balancing_value(h, value),
            Hands::Dry(r) => r.set_kernel_balancing_value(value),
        }
    }
}

pub(crate) const EMPTY_SCOPE: &str = "the scope names nothing: give --pid, --comm, --cgroup or --vms (or a [scope] table in the config), or --all for every process";

/// What the daemon does with the loop's events: each journal entry to the
/// journal file (and the log), the metrics after each round, and a stop
/// after `--rounds` rounds.
struct Daemon<'m> {
    journal: Journal,
    metrics: &'m Mutex<MetricsState>,
    collect_ns: Arc<AtomicU64>,
    rounds_limit: Option<u64>,
    rounds: u64,
    totals: EngineTotals,
    /// Set by SIGHUP: the configuration is read again after the round.
    hup: Arc<AtomicBool>,
    reloader: Reloader<'m>,
    /// What the reload gives the engine for the next rounds.
    reloaded: Option<Reconfigure>,
    /// What `GET /state` serves (`numaplace top`), built each round where
    /// the metrics listener is on.
    top: Option<crate::top_state::Feed<'m>>,
}

impl Observer for Daemon<'_> {
    fn entry(&mut self, _: &Snapshot, e: &JournalEntry) {
        self.journal.write(e);
        if let Some(top) = &mut self.top {
            top.builder.entry(e);
        }
    }

    fn round_done(&mut self, snap: &Snapshot, report: &RoundReport) -> ControlFlow<()> {
        self.rounds += 1;
        self.totals.add(report);
        // Test builds only: a bug in the loop, to show that what the
        // daemon changed is put back all the same (cli_daemon's test).
        #[cfg(debug_assertions)]
        if std::env::var("NUMAPLACE_TEST_PANIC_AT_ROUND")
            .is_ok_and(|r| r.parse() == Ok(self.rounds))
        {
            panic!(
                "NUMAPLACE_TEST_PANIC_AT_ROUND: a bug in round {}",
                self.rounds
            );
        }
        // Once per thread and reason, not each round.
        for n in &report.newly_left_alone {
            tracing::info!(
                "left alone: thread {} of {} (pid {}): {}",
                n.tid,
                printable(&n.label),
                n.pid,
                n.why
            );
        }
        if self.hup.swap(false, Ordering::Relaxed) {
            self.reloaded = self.reloader.reload();
            if let (Some(r), Some(top)) = (&self.reloaded, &mut self.top) {
                top.watch.scope = r.scope.clone();
            }
        }
        {
            let state = self.top.as_mut().map(|t| Arc::new(t.json(snap, report)));
            let mut m = self.metrics.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(state) = state {
                m.state_json = state;
            }
            m.totals = self.totals.clone();
            m.managed_processes = report.managed;
            m.threads_seen = snap.tasks.len();
            m.left_alone.clone_from(&report.left_alone);
            m.collect_ns = self.collect_ns.load(Ordering::Relaxed);
            m.last_round_unix_s = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
        }
        if self.rounds_limit.is_some_and(|n| self.rounds >= n) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn reconfigure(&mut self) -> Option<Reconfigure> {
        self.reloaded.take()
    }
}

pub fn run(args: &RunArgs) -> Result<()> {
    let mut s = settings(args)?;
    let balancing = NumaBalancing::read(&SysRoot::host());
    let mut reloader = Reloader::new(args, &s, balancing);
    let c = &s.config;
    // The service (`run --config FILE`, no scope flag: the unit's command)
    // waits for its scope: with none named in the file it places nothing,
    // and processes it names may start later. Typed by hand, a scope must
    // name something running now.
    let service = args.choice.config.is_some() && {
        let mut flags = Scope::default();
        merge_scope(&mut flags, &args.scope);
        flags.is_empty()
    };
    if c.scope.is_empty() && !service {
        return Err(InputError(EMPTY_SCOPE.into()).into());
    }
    // The metrics endpoint is bound before any work, so a busy port or a
    // socket another daemon serves is refused at once.
    let shared = Arc::new(Mutex::new(MetricsState {
        policy: c.policy.name().into(),
        dry_run: c.dry_run,
        ..MetricsState::default()
    }));
    if let Some(l) = &c.metrics.listen {
        let listen = metrics::parse_listen(l)?;
        metrics::serve(&listen, Arc::clone(&shared), c.metrics.state_over_tcp)?;
        tracing::info!("metrics on {l}");
    }
    // libvirt's domains are pinned through libvirt: VM discovery tells
    // the actuator which they are, each round.
    let domains = SharedDomains::default();
    let mut host = ThroughLibvirt::new(HostActuator::new(), c.vms.virsh(), Arc::clone(&domains));
    let state = open_state_and_restore(c, &mut host, &domains)?;
    let stop = stop_on_signals()?;
    // SIGHUP reloads the configuration (crate::daemon_reload); by default
    // it would end the daemon without restoring anything.
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&hup))
        .context("installing signal handlers")?;
    if c.scope.is_empty() {
        match wait_for_a_scope(&reloader, &stop, &hup) {
            Waited::Stopped => return Ok(()),
            Waited::Scope(new) => {
                s = *new;
                reloader = Reloader::new(args, &s, balancing);
                let mut m = shared.lock().unwrap_or_else(|p| p.into_inner());
                m.policy = s.config.policy.name().into();
            }
        }
    }
    let c = &s.config;
    // The journal before the collector starts: a path it refuses (a
    // symlink, a FIFO) ends the daemon before any counter is opened.
    let journal = Journal::open(c.journal.as_deref())?;

    let mut engine = Engine::new(s.policy(), c.scope.clone(), engine_config(c, balancing));
    // `GET /state` shows the policy's classes of the groups.
    engine.report_classes(c.metrics.listen.is_some());
    // A dry run proposes each change once: what it proposed is shown to
    // the policy in the next rounds as if applied.
    engine.as_if_applied(c.dry_run);
    let (mut collector, managed) = start_collecting(&engine, c, balancing, s.synthetic.as_mut())?;
    collector.share_libvirt_domains(Arc::clone(&domains));
    let hands = if c.dry_run {
        Hands::Dry(RecordingActuator::default())
    } else {
        Hands::Host(host)
    };
    say_start(&s, managed);

    let live = LiveTelemetry::new(collector, s.interval, Instant::now() + s.interval, stop);
    reloader.control = Some(live.control());
    let mut daemon = Daemon {
        journal,
        metrics: &shared,
        collect_ns: live.collect_ns(),
        rounds_limit: args.rounds,
        rounds: 0,
        totals: EngineTotals::default(),
        hup,
        reloader,
        reloaded: None,
        top: c.metrics.listen.as_ref().map(|_| crate::top_state::Feed {
            builder: Default::default(),
            watch: crate::top_state::Watch {
                topology: &s.topology,
                scope: c.scope.clone(),
                reads: crate::top_state::Reads::of(&engine),
                policy: c.policy.name().into(),
                applies: !c.dry_run,
            },
        }),
    };
    let mut world = Pair {
        telemetry: Synthesized {
            inner: Hinted {
                inner: live,
                hints: c.guest_hints.reader(),
            },
            synthetic: s.synthetic.take(),
        },
        actuator: hands,
    };
    let mut no_guard = NoGuard;
    let mut state_guard = state.as_ref().map(|state| StateGuard { state });
    let guard: &mut dyn PinGuard = match state_guard.as_mut() {
        Some(g) => g,
        None => &mut no_guard,
    };
    let (rounds, bug) = run_catching_bugs(|| {
        let Ok(rounds) = engine.run(&s.topology, &mut world, guard, &mut daemon);
        rounds
    });
    let rounds = rounds.unwrap_or(daemon.rounds);
    let stopped = |report: &dyn std::fmt::Display| -> Result<()> {
        match &bug {
            None => Ok(()),
            Some(what) => Err(anyhow::anyhow!(
                "stopped by a bug after {rounds} rounds ({what}); {report}: please report it"
            )),
        }
    };

    // Put back what we changed.
    let (Hands::Host(mut host), Some(_)) = (world.actuator, state) else {
        tracing::info!("dry run: nothing to restore");
        if bug.is_none() {
            crate::output::say!(
                "numaplace: stopped after {rounds} rounds (dry run: nothing was changed)"
            );
        }
        return stopped(&"nothing was changed (dry run)");
    };
    // libvirt's domains as they are now (one may have stopped since the
    // last round), so their threads and nodesets go back through libvirt.
    crate::daemon_setup::read_libvirt_domains(c, &domains);
    let report = host.restore();
    tracing::info!("stopping after {rounds} rounds; restored: {report}");
    if bug.is_none() {
        crate::output::say!("numaplace: stopped after {rounds} rounds; {report}");
    }
    stopped(&format_args!("restored: {report}"))
}

/// The daemon's start line at the default level (policy, interval,
/// processes in scope), what its model runs on and its own confinement.
fn say_start(s: &Settings, managed: usize) {
    let c = &s.config;
    tracing::info!(
        "numaplace {} running: policy {}, interval {:?}, {managed} processes in scope{}{}",
        env!("CARGO_PKG_VERSION"),
        describe_policy(c),
        s.interval,
        if c.dry_run { ", dry run" } else { "" },
        if s.synthetic.is_some() {
            ", SYNTHETIC counters (--counters-from)"
        } else {
            ""
        }
    );
    if let Some(line) = s.machine_line() {
        tracing::info!("{line}");
    }
    if let Some(line) = crate::daemon_setup::own_confinement(&s.topology) {
        tracing::info!("{line}");
    }
}

/// Runs the daemon's loop. A bug in it (a panic) is caught, so that what
/// the daemon changed is still put back before it exits: the panic's
/// message is on stderr already (the hook), and it is returned for the
/// daemon's last line. The rounds run, where the loop returned.
fn run_catching_bugs(run: impl FnOnce() -> u64) -> (Option<u64>, Option<String>) {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(rounds) => (Some(rounds), None),
        Err(payload) => {
            let what = (payload.downcast_ref::<String>().cloned())
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            (None, Some(what))
        }
    }
}

/// The state file, after putting back whatever an earlier run left changed
/// (it was killed before it could), given to the actuator for libvirt's
/// nodesets. A dry run changes nothing, so it neither needs nor touches
/// the state file (nor restores what an earlier real run left: that run's
/// next real start will).
fn open_state_and_restore(
    c: &Config,
    host: &mut ThroughLibvirt<HostActuator>,
    domains: &SharedDomains,
) -> Result<Option<SharedState>> {
    if c.dry_run {
        return Ok(None);
    }
    let state = StateFile::open(&c.state).map_err(|e| InputError(format!("{e}")))?;
    let left = !state.is_empty();
    if left {
        tracing::warn!(
            "{}: an earlier run did not stop cleanly and left {} threads pinned{}{}; \
             restoring them",
            c.state.display(),
            state.entries().len(),
            if state.kernel_balancing().is_some() {
                ", kernel.numa_balancing changed"
            } else {
                ""
            },
            match state.libvirt_nodesets().len() {
                0 => String::new(),
                n => format!(", the memory nodes of {n} libvirt domains changed"),
            }
        );
    }
    let state = Arc::new(Mutex::new(state));
    host.set_state(Arc::clone(&state));
    if left {
        // libvirt's domains go back through libvirt.
        crate::daemon_setup::read_libvirt_domains(c, domains);
        let report = host.restore();
        tracing::warn!("restored: {report}");
    }
    Ok(Some(state))
}

/// A flag SIGINT and SIGTERM set: the loop ends at the next check.
fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    Ok(stop)
}

/// The daemon's collector, set for its own cost, after a first reading
/// (the baseline of the first round's CPU times and counters); says what
/// the machine cannot measure and what the policy does without it.
/// Returns it with the number of processes in scope: none is an error
/// where the scope names only pids, a wait otherwise.
fn start_collecting(
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
    if let Some(short) = super::doctor::short(&super::doctor::checks(&SysRoot::host())) {
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
fn blind_policy(engine: &Engine, collector: &Collector, synthetic: bool) -> Vec<String> {
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

/// `numaplace advise`: one round on the live machine, printed, nothing
/// applied.
/// `advise`'s view of the loop: the journal entries of its last round.
struct Advice {
    /// The last round's snapshot: whom it left alone, and why.
    last: Option<Snapshot>,
    rounds: u64,
    lines: Vec<JournalEntry>,
    /// The first round found no process in scope.
    none_in_scope: bool,
}

impl Advice {
    const ROUNDS: u64 = 2;
}

impl Observer for Advice {
    fn entry(&mut self, _: &Snapshot, e: &JournalEntry) {
        self.lines.push(e.clone());
    }

    fn round_done(&mut self, snap: &Snapshot, report: &RoundReport) -> ControlFlow<()> {
        self.rounds += 1;
        if self.rounds == 1 && report.managed == 0 {
            self.none_in_scope = true;
            return ControlFlow::Break(());
        }
        if self.rounds >= Self::ROUNDS {
            self.last = Some(snap.clone());
            return ControlFlow::Break(());
        }
        self.lines.clear();
        ControlFlow::Continue(())
    }
}

pub fn advise(args: &RunArgs) -> Result<()> {
    // The daemon's flags that mean nothing for one round applied nowhere:
    // refused rather than silently ignored (a config file may set them for
    // the daemon; there they are not advise's concern).
    let daemon_only: Vec<&str> = [
        ("--dry-run", args.dry_run),
        ("--journal", args.journal.is_some()),
        ("--state", args.state.is_some()),
        ("--metrics", args.metrics.is_some()),
        ("--rounds", args.rounds.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect();
    if !daemon_only.is_empty() {
        return Err(InputError(format!(
            "{}: the daemon's (numaplace run); advise decides one round and applies nothing,              so it writes no journal or state and serves no metrics: leave {} out",
            daemon_only.join(", "),
            if daemon_only.len() == 1 { "it" } else { "them" }
        ))
        .into());
    }
    let mut s = settings(args)?;
    let c = &s.config;
    if c.scope.is_empty() {
        return Err(InputError(EMPTY_SCOPE.into()).into());
    }
    let balancing = NumaBalancing::read(&SysRoot::host());
    let mut engine = Engine::new(s.policy(), c.scope.clone(), engine_config(c, balancing));
    let mut collector = collector_for(&engine, c);
    collector.set_numa_faults(balancing.balances_between_nodes());
    if !c.policy_named {
        println!("Note: policy {}.", describe_policy(c));
    }
    if let Some(synth) = &s.synthetic {
        println!("Note: {}.", synth.describe());
        if !engine.needs().counters {
            println!(
                "Note: policy {} reads no counters: --counters-from changes nothing it decides.",
                engine.policy_name()
            );
        }
    }
    for why in blind_policy(&engine, &collector, s.synthetic.is_some()) {
        println!("Note: {why}.");
    }
    if let Some(short) = super::doctor::short(&super::doctor::checks(&SysRoot::host())) {
        println!("Note: {short}.");
    }
    println!(
        "Note: {}; {}.",
        balancing.describe(),
        c.engine
            .memory_mover
            .describe(balancing.balances_between_nodes())
    );
    // Two rounds: the first gives the policy its baseline (CPU times); the
    // second's plan is the advice.
    let live = LiveTelemetry::new(
        collector,
        s.interval.min(Duration::from_secs(5)),
        Instant::now(),
        Arc::new(AtomicBool::new(false)),
    );
    let mut world = Pair {
        telemetry: Synthesized {
            inner: Hinted {
                inner: live,
                hints: c.guest_hints.reader(),
            },
            synthetic: s.synthetic.take(),
        },
        actuator: RecordingActuator::default(),
    };
    let mut advice = Advice {
        last: None,
        rounds: 0,
        lines: Vec::new(),
        none_in_scope: false,
    };
    let Ok(_) = engine.run(&s.topology, &mut world, &mut NoGuard, &mut advice);
    if advice.none_in_scope {
        return Err(InputError(format!(
            "the scope matches no running process ({}); start them first or widen it",
            describe_scope(&c.scope)
        ))
        .into());
    }
    let lines = advice.lines;

    if lines.is_empty() {
        println!("{}: nothing to change.", engine.policy_name());
    }
    for e in &lines {
        let note = match &e.outcome {
            Outcome::Skipped { why } => format!("  (would be skipped: {why})"),
            _ => String::new(),
        };
        println!("{}{note}", describe_decision(e));
    }
    if let Some(snap) = &advice.last {
        print!(
            "{}",
            describe_left_alone(&engine.left_alone(&s.topology, snap))
        );
    }
    Ok(())
}
