//! `numaplace record` and `numaplace replay`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::{CollectOptions, Collector, Recorder, Replay, TopologySource, discover};
use std::io::Write;
use std::ops::ControlFlow;

use numaplace_model::{Action, Outcome, RecordHeader, Snapshot, TaskId};
use numaplace_policy::Signal;
use numaplace_policy::engine::{Engine, JournalEntry, NoGuard, Observer, RoundReport};
use numaplace_policy::replay::{ReplayActuator, ReplayWorld};

use numaplace::cli::ScopeArgs;
use numaplace::cli::{RecordArgs, ReplayArgs};
use numaplace::config::{Config, describe_policy};
use numaplace::daemon::{choose, restrict};
use numaplace::duration::parse_duration;
use numaplace::error::InputError;
use numaplace::machine::root_of;
use numaplace::report::engine::{describe_decision, without_signals};
use numaplace::synthetic_counters::{Synthesized, SyntheticCounters};

pub(crate) fn record(args: &RecordArgs) -> Result<()> {
    let interval = parse_duration(&args.interval, "--interval").map_err(InputError)?;
    if interval < Duration::from_millis(10) {
        return Err(InputError(format!("--interval {}: at least 10ms", args.interval)).into());
    }
    let duration = args
        .duration
        .as_deref()
        .map(|d| parse_duration(d, "--duration").map_err(InputError))
        .transpose()?;
    numaplace_linux::guest_hints::validate_patterns(&args.guest_hints)
        .map_err(|e| InputError(e.replace("[guest_hints] sockets", "--guest-hints")))?;
    Recorder::check_output(&args.output)?;
    let root = root_of(args.root.as_deref())?;
    let topology = discover(&TopologySource::Sysfs(root.clone()))?;
    let balancing = NumaBalancing::read(&root);
    let mut collector = Collector::new(
        root,
        CollectOptions {
            memory: !args.no_memory,
            counters: true,
            machine: true,
            samples: args.samples,
        },
    );
    // Hinting faults per node (where each thread's memory accesses go)
    // exist only while the kernel balances between nodes.
    tracing::info!("{}", balancing.describe());
    collector.set_numa_faults(balancing.balances_between_nodes());
    for m in collector.missing_signals() {
        tracing::warn!("not recorded: {m}");
    }
    let header = RecordHeader {
        format: RecordHeader::FORMAT.into(),
        version: RecordHeader::VERSION,
        writer: env!("CARGO_PKG_VERSION").into(),
        interval_ns: interval.as_nanos() as u64,
        topology,
        missing_signals: collector.missing_signals().to_vec(),
    };
    let mut recorder = Recorder::create(&args.output, &header, args.force)?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let start = Instant::now();
    let mut next = start;
    let mut rounds = 0u64;
    let mut hints = (!args.guest_hints.is_empty()).then(|| {
        numaplace_linux::guest_hints::GuestHints::new(
            numaplace_linux::SysRoot::host(),
            args.guest_hints.clone(),
        )
    });
    loop {
        let mut snap = collector.collect().context("collecting")?;
        if let Some(h) = hints.as_mut() {
            // The guests' hints go into the recording: a replay of BRM
            // takes them as the daemon would have.
            let round = h.poll(&snap, Instant::now());
            for n in &round.notes {
                tracing::warn!("{n}");
            }
            snap.guest_hints = round.hints;
        }
        recorder.write(&snap)?;
        rounds += 1;
        next += interval;
        let done = duration.is_some_and(|d| next.duration_since(start) > d);
        if done || stop.load(Ordering::Relaxed) {
            break;
        }
        // Deadline-driven: a slow round shortens the next wait, never
        // drifts the schedule; sleep in slices so a signal ends it soon.
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    recorder.finish()?;
    numaplace::output::say!(
        "numaplace: recorded {rounds} snapshots to {}",
        args.output.display()
    );
    Ok(())
}

pub(crate) fn replay(args: &ReplayArgs) -> Result<()> {
    if args.choice.policy.is_some() || args.choice.config.is_some() {
        return replay_decisions(args);
    }
    let replay = Replay::open(&args.file)?;
    let h = replay.header().clone();
    if !args.json {
        println!(
            "{}: written by numaplace {}, format {}, interval {:.3}s, machine: {} CPUs, {} nodes",
            args.file.display(),
            h.writer,
            h.version,
            h.interval_ns as f64 / 1e9,
            h.topology.cpus().len(),
            h.topology.nodes().len()
        );
        for m in &h.missing_signals {
            println!("not recorded: {m}");
        }
    }
    let mut n = 0;
    for snap in replay {
        let snap = snap?;
        n += 1;
        if args.json {
            println!("{}", numaplace::output::json::line(&snap)?);
        } else {
            let vms = snap
                .groups
                .iter()
                .filter(|g| numaplace_linux::collect::is_vm(g))
                .count();
            println!(
                "#{:<5} +{:>8.3}s  {:>5} processes ({vms} VMs), {:>6} threads, {:>6} with counters",
                snap.seq,
                snap.interval_ns as f64 / 1e9,
                snap.groups.len(),
                snap.tasks.len(),
                snap.counters.len()
            );
        }
    }
    if !args.json {
        println!("{n} snapshots");
    }
    Ok(())
}

/// Which signals a recording holds, for saying what the replayed policy
/// did without the others.
#[derive(Default)]
struct Present(std::collections::BTreeSet<Signal>);

impl Present {
    fn note(&mut self, s: &Snapshot) {
        for c in s.counters.values() {
            for signal in [Signal::LlcMissRate, Signal::Cpi, Signal::UncorePenalty] {
                if signal.counters().iter().all(|&k| c.get(k).is_some()) {
                    self.0.insert(signal);
                }
            }
        }
        if s.samples.values().any(|v| !v.is_empty()) {
            self.0.insert(Signal::Samples);
        }
        if s.machine.energy.iter().any(|e| e.microjoules.is_some()) {
            self.0.insert(Signal::Energy);
        }
        if s.machine.resctrl.iter().any(|r| r.llc_occupancy.is_some()) {
            self.0.insert(Signal::LlcOccupancy);
        }
    }
}

/// `replay --policy`'s view of the loop: each decision printed as it is
/// made (a line of JSON, or text under a `#round` head), what the
/// recording holds, and the totals for the summary.
struct Decisions<W: Write> {
    out: W,
    json: bool,
    present: Present,
    placed: std::collections::BTreeSet<TaskId>,
    pages: u64,
    max_decide_ns: u64,
    first_of_round: bool,
    io_error: Option<std::io::Error>,
}

impl<W: Write> Observer for Decisions<W> {
    fn entry(&mut self, snap: &Snapshot, e: &JournalEntry) {
        if let Action::Pin { task, .. } = &e.action {
            self.placed.insert(*task);
        }
        if let Outcome::Pages(p) = &e.outcome {
            self.pages += p.moved;
        }
        let line = if self.json {
            numaplace::output::json::line(e).map_err(std::io::Error::from)
        } else {
            let head = if std::mem::take(&mut self.first_of_round) {
                format!("#{} +{:.3}s\n", snap.seq, snap.interval_ns as f64 / 1e9)
            } else {
                String::new()
            };
            let note = match &e.outcome {
                Outcome::Skipped { why } => format!("  (skipped: {why})"),
                Outcome::Refused { why, .. } => format!("  (refused: {why})"),
                Outcome::Gone => "  (the task was gone)".into(),
                _ => String::new(),
            };
            Ok(format!("{head}  {}{note}", describe_decision(e)))
        };
        if let Err(e) = line.and_then(|l| writeln!(self.out, "{l}")) {
            self.io_error.get_or_insert(e);
        }
    }

    fn round_done(&mut self, snap: &Snapshot, report: &RoundReport) -> ControlFlow<()> {
        self.present.note(snap);
        self.first_of_round = true;
        self.max_decide_ns = self.max_decide_ns.max(report.decide_ns);
        if self.io_error.is_some() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

/// `replay --policy`: the engine over the recorded snapshots, with an
/// actuator that takes pins and memory moves as done and shows them in the
/// snapshots that follow (`numaplace_policy::replay`).
fn replay_decisions(args: &ReplayArgs) -> Result<()> {
    // No config file unless one is named: a replay is not this machine's.
    let mut config = match &args.choice.config {
        Some(path) => Config::load(Some(path))?,
        None => Config::default(),
    };
    let mut scope = args.scope.clone();
    if config.scope.is_empty() && scope == ScopeArgs::default() {
        scope.all = true;
    }
    choose(&mut config, &args.choice, &scope)?;
    let replay = Replay::open(&args.file)?;
    let header = replay.header().clone();
    let topology = restrict(header.topology.clone(), &config)?;
    let synthetic = SyntheticCounters::load_given(args.choice.counters_from.as_deref())?;
    let page_size = config.engine.page_size;
    let policy = describe_policy(&config);
    let mut engine = Engine::new(config.policy.build(), config.scope.clone(), config.engine);
    let out = std::io::stdout();
    let mut printer = Decisions {
        out: std::io::BufWriter::new(out.lock()),
        json: args.json,
        present: Present::default(),
        placed: std::collections::BTreeSet::new(),
        pages: 0,
        max_decide_ns: 0,
        first_of_round: true,
        io_error: None,
    };
    if !args.json {
        writeln!(
            printer.out,
            "{}: {} CPUs, {} nodes, recorded every {:.3}s by numaplace {}; replaying policy {} (nothing is applied)",
            args.file.display(),
            header.topology.cpus().len(),
            header.topology.nodes().len(),
            header.interval_ns as f64 / 1e9,
            header.writer,
            policy
        )?;
        if let Some(synth) = &synthetic {
            writeln!(printer.out, "Note: {}.", synth.describe())?;
        }
    }
    let mut world = ReplayWorld {
        telemetry: Synthesized {
            inner: replay,
            synthetic,
        },
        actuator: ReplayActuator::new(page_size),
    };
    let rounds = engine.run(&topology, &mut world, &mut NoGuard, &mut printer)?;
    if let Some(e) = printer.io_error.take() {
        return Err(e).context("writing the decisions");
    }
    let Decisions {
        mut out,
        present,
        placed,
        pages,
        max_decide_ns,
        ..
    } = printer;
    let actuator = world.actuator;
    let c = &actuator.counts;
    let totals = engine.totals();
    let summary = format!(
        "{rounds} rounds: {} pins of {} threads, {} memory moves and {} page-window moves ({pages} pages); decide time mean {:.1} µs, max {:.1} µs",
        c.pins,
        placed.len(),
        c.memory_moves,
        c.window_moves,
        totals.decide_ns as f64 / rounds.max(1) as f64 / 1e3,
        max_decide_ns as f64 / 1e3,
    );
    let missing = Signal::ALL.into_iter().filter(|s| !present.0.contains(s));
    let notes: Vec<String> = without_signals(&engine, missing)
        .into_iter()
        .map(|(names, w)| {
            format!(
                "the recording has no {names}: policy {} {w}",
                engine.policy_name()
            )
        })
        .collect();
    if args.json {
        numaplace::output::say!("numaplace: {summary}");
        for n in &notes {
            numaplace::output::say!("numaplace: {n}");
        }
    } else {
        writeln!(out, "{summary}")?;
        for n in &notes {
            writeln!(out, "Note: {n}.")?;
        }
    }
    out.flush()?;
    Ok(())
}
