//! The daemon, `numaplace run`, and the wiring the commands that run its
//! policy share (`advise`, `top`, `replay`, `config`).
//!
//! `settings -> run`: the settings are resolved in one pass (the config
//! file, the command line on top, what they name read and checked); the
//! start binds the metrics listener, restores whatever an earlier run
//! that was killed left pinned and installs the signal handlers; then
//! every interval the engine decides on a fresh snapshot, the observer
//! journals, serves and reloads; SIGTERM / SIGINT end the loop and every
//! affinity numaplace changed is restored before it exits.

mod actuator;
mod collector;
pub mod metrics;
mod observer;
mod reload;
mod settings;
mod signals;
mod state;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use numaplace_linux::actuate::HostActuator;
use numaplace_linux::actuate::libvirt::{SharedDomains, SharedState, ThroughLibvirt};
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::guest_hints::Hinted;
use numaplace_linux::{LiveTelemetry, SysRoot};
use numaplace_policy::Scope;
use numaplace_policy::engine::{Engine, EngineTotals, NoGuard, Pair, PinGuard, RecordingActuator};

use crate::cli::RunArgs;
use crate::config::{Config, describe_policy};
use crate::error::InputError;
use crate::synthetic_counters::{Synthesized, SyntheticCounters};
use crate::top_state::{Feed, Reads, Watch};
use actuator::DaemonActuator;
use collector::start_collecting;
pub use collector::{blind_policy, collector_for};
use metrics::MetricsState;
use observer::{Daemon, Journal, run_catching_bugs};
use reload::{Reloader, Waited, wait_for_a_scope};
pub use settings::{Settings, choose, engine_config, restrict, settings};
use signals::Signals;
use state::{StateGuard, open_state_and_restore, put_back};

/// What `run` and `advise` say where the scope names nothing.
pub const EMPTY_SCOPE: &str = "the scope names nothing: give --pid, --comm, --cgroup or --vms (or a [scope] table in the config), or --all for every process";

/// `numaplace run`: the daemon, until SIGTERM or SIGINT (or `--rounds`).
pub fn run(args: &RunArgs) -> Result<()> {
    let s = settings(args)?;
    let balancing = NumaBalancing::read(&SysRoot::host());
    refuse_an_empty_scope(args, &s)?;
    let c = &s.config;
    let metrics = serve_metrics(c)?;
    // libvirt's domains are pinned through libvirt: VM discovery tells
    // the actuator which they are, each round.
    let domains = SharedDomains::default();
    let mut host = ThroughLibvirt::new(HostActuator::new(), c.vms.virsh(), Arc::clone(&domains));
    let state = open_state_and_restore(c, &mut host, &domains)?;
    let signals = Signals::install()?;
    let s = if c.scope.is_empty() {
        match wait_for_a_scope(&Reloader::new(args, &s, balancing), &signals) {
            Waited::Stopped => return Ok(()),
            Waited::Scope(new) => {
                let mut m = metrics.lock().unwrap_or_else(|p| p.into_inner());
                m.policy = new.config.policy.name().into();
                *new
            }
        }
    } else {
        s
    };
    let started = Started {
        host,
        state,
        domains,
        metrics,
        signals,
    };
    place(args, s, balancing, started)
}

/// The service (`run --config FILE`, no scope flag: the unit's command)
/// waits for its scope: with none named in the file it places nothing,
/// and processes it names may start later. Typed by hand, a scope must
/// name something running now.
fn refuse_an_empty_scope(args: &RunArgs, s: &Settings) -> Result<()> {
    let service = args.choice.config.is_some() && {
        let mut flags = Scope::default();
        settings::merge_scope(&mut flags, &args.scope);
        flags.is_empty()
    };
    if s.config.scope.is_empty() && !service {
        return Err(InputError(EMPTY_SCOPE.into()).into());
    }
    Ok(())
}

/// The metrics endpoint, bound before any work, so a busy port or a
/// socket another daemon serves is refused at once.
fn serve_metrics(c: &Config) -> Result<Arc<Mutex<MetricsState>>> {
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
    Ok(shared)
}

/// What the start set up before the loop: the host's actuator, the state
/// file, libvirt's domains, the metrics and the signals' flags.
struct Started {
    host: ThroughLibvirt<HostActuator>,
    state: Option<SharedState>,
    domains: SharedDomains,
    metrics: Arc<Mutex<MetricsState>>,
    signals: Signals,
}

/// The loop: the engine on the live machine until a signal (or
/// `--rounds`), then what it changed put back.
fn place(args: &RunArgs, mut s: Settings, balancing: NumaBalancing, start: Started) -> Result<()> {
    let mut reloader = Reloader::new(args, &s, balancing);
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
    collector.share_libvirt_domains(Arc::clone(&start.domains));
    let actuator = if c.dry_run {
        DaemonActuator::Dry(RecordingActuator::default())
    } else {
        DaemonActuator::Host(start.host)
    };
    say_start(&s, managed);

    let live = LiveTelemetry::new(
        collector,
        s.interval,
        Instant::now() + s.interval,
        start.signals.stop,
    );
    reloader.control = Some(live.control());
    let mut daemon = Daemon {
        journal,
        metrics: &start.metrics,
        collect_ns: live.collect_ns(),
        rounds_limit: args.rounds,
        rounds: 0,
        totals: EngineTotals::default(),
        hup: start.signals.hup,
        reloader,
        reloaded: None,
        top: c.metrics.listen.as_ref().map(|_| Feed {
            builder: Default::default(),
            watch: Watch {
                topology: &s.topology,
                scope: c.scope.clone(),
                reads: Reads::of(&engine),
                policy: c.policy.name().into(),
                applies: !c.dry_run,
            },
        }),
    };
    let mut world = live_world(live, c, s.synthetic.take(), actuator);
    let mut no_guard = NoGuard;
    let mut state_guard = start.state.as_ref().map(|state| StateGuard { state });
    let guard: &mut dyn PinGuard = match state_guard.as_mut() {
        Some(g) => g,
        None => &mut no_guard,
    };
    let (rounds, bug) = run_catching_bugs(|| {
        let Ok(rounds) = engine.run(&s.topology, &mut world, guard, &mut daemon);
        rounds
    });
    let rounds = rounds.unwrap_or(daemon.rounds);
    put_back(world.actuator, start.state, c, &start.domains, rounds, bug)
}

/// The engine's world on this host: the live readings with the guests'
/// hints (`[guest_hints]`) and the made-up counters (`--counters-from`)
/// laid over them, and `actuator` to carry the plans out (or record them).
pub fn live_world<A>(
    live: LiveTelemetry,
    c: &Config,
    synthetic: Option<SyntheticCounters>,
    actuator: A,
) -> Pair<Synthesized<Hinted<LiveTelemetry>>, A> {
    Pair {
        telemetry: Synthesized {
            inner: Hinted {
                inner: live,
                hints: c.guest_hints.reader(),
            },
            synthetic,
        },
        actuator,
    }
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
    if let Some(line) = own_confinement(&s.topology) {
        tracing::info!("{line}");
    }
}

/// What numaplace says at start when it runs confined itself (a
/// container's or a systemd unit's cpuset, a taskset): it still sees the
/// whole machine, and places others' threads on every CPU of it their
/// own cgroups allow. `None` when it may run anywhere.
fn own_confinement(topology: &numaplace_model::Topology) -> Option<String> {
    let own = numaplace_linux::probe::own_allowed_cpus()?;
    let all = topology.span();
    (!all.is_subset(&own)).then(|| {
        format!(
            "numaplace itself may run only on CPUs {own} (its cgroup's cpuset or its affinity); \
             it sees the whole machine, CPUs {all}, and places others' threads on any of them \
             their own cgroups allow"
        )
    })
}
