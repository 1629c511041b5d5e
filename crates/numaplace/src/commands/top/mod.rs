//! `numaplace top`: a live terminal view of the nodes, the groups and the
//! latest decisions with their reasons, from a running daemon's
//! `GET /state` or from `top`'s own rounds (the policy deciding, nothing
//! applied). `data` brings the frames, `render` draws them, `input` turns
//! keys into the operator's choices, `terminal` puts the terminal back on
//! every way out.

pub(crate) mod data;
pub(crate) mod input;
pub(crate) mod render;
pub(crate) mod terminal;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossterm::event::{self, Event};
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::probe::Input;
use numaplace_linux::{LiveTelemetry, SysRoot, TopologySource, discover_repaired};
use numaplace_policy::engine::{Engine, NoGuard, Pair, RecordingActuator};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use data::{Latest, LocalObserver, Shared};
use input::App;
use numaplace::cli::TopArgs;
use numaplace::config::Config;
use numaplace::daemon::metrics::{Listen, parse_listen};
use numaplace::duration::parse_duration;
use numaplace::error::InputError;
use numaplace::synthetic_counters::{Synthesized, SyntheticCounters};
use numaplace::top_state::{Feed, Reads, TopState, Watch};
use render::Status;

pub(crate) fn run(args: &TopArgs) -> Result<()> {
    let interval = parse_duration(&args.interval, "interval").map_err(InputError)?;
    if interval < Duration::from_millis(100) {
        return Err(InputError(format!(
            "--interval {:?}: at least 100ms (each frame is a round of reading the machine or the daemon)",
            args.interval
        ))
        .into());
    }
    let size = parse_size(&args.size)?;
    let latest: Shared = Arc::new(Mutex::new(Latest::default()));
    let stop = terminal::stop_on_signals()?;
    let source = match &args.connect {
        Some(addr) => {
            let listen = parse_listen(addr)
                .map_err(|e| InputError(e.0.replace("metrics listen", "--connect")))?;
            if args.once {
                // The address given answers as no numaplace daemon does:
                // the input's fault (exit 2), in one line.
                let state = data::fetch_within(&listen, data::DEADLINE)
                    .map_err(|e| InputError(format!("daemon not answering at {addr}: {e}")))?;
                return print_frame(&state, &format!("daemon {addr}"), size);
            }
            data::spawn_daemon_reader(
                listen.clone(),
                interval,
                Arc::clone(&latest),
                Arc::clone(&stop),
            )
            .context("starting the reader thread")?;
            format!("daemon {}", describe(&listen))
        }
        None => {
            let local = Local::new(args, interval)?;
            if args.once {
                local.rounds(2, &latest, &stop);
                let l = latest.lock().unwrap_or_else(|p| p.into_inner());
                let state = l
                    .state
                    .as_ref()
                    .context("no round finished (stopped by a signal?)")?;
                return print_frame(state, "this machine, nothing applied", size);
            }
            let (latest2, stop2) = (Arc::clone(&latest), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("np-top-collect".into())
                .spawn(move || local.rounds(u64::MAX, &latest2, &stop2))
                .context("starting the collection thread")?;
            "this machine (what the policy would do; nothing applied)".to_string()
        }
    };
    let shown = interactive(&latest, &stop, &source, args.connect.is_some());
    stop.store(true, Ordering::Relaxed);
    shown
}

fn describe(l: &Listen) -> String {
    match l {
        Listen::Tcp(a) => a.to_string(),
        Listen::Unix(p) => format!("unix:{}", p.display()),
    }
}

/// `120x40` as (columns, rows).
fn parse_size(text: &str) -> Result<(u16, u16)> {
    let bad = || {
        InputError(format!(
            "--size {text:?}: expected COLUMNSxROWS, each 10 to 1000, like 120x40"
        ))
    };
    let (w, h) = text.split_once('x').ok_or_else(bad)?;
    let w: u16 = w.parse().map_err(|_| bad())?;
    let h: u16 = h.parse().map_err(|_| bad())?;
    if !(10..=1000).contains(&w) || !(10..=1000).contains(&h) {
        return Err(bad().into());
    }
    Ok((w, h))
}

/// The frame as text, one line per terminal row, trailing blanks cut.
pub(crate) fn frame_text(
    app: &App,
    state: Option<&TopState>,
    status: &Status,
    (w, h): (u16, u16),
) -> Result<String> {
    let mut t = Terminal::new(TestBackend::new(w, h)).context("a text frame")?;
    t.draw(|f| render::draw(f, app, state, status))
        .context("drawing the frame")?;
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    Ok(out)
}

fn print_frame(state: &TopState, source: &str, size: (u16, u16)) -> Result<()> {
    let status = Status {
        source,
        problem: None,
    };
    let text = frame_text(&App::default(), Some(state), &status, size)?;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the frame to stdout"),
    }
}

/// The view until `q`, Ctrl-C or a signal; the terminal put back after.
fn interactive(latest: &Shared, stop: &AtomicBool, source: &str, daemon: bool) -> Result<()> {
    let mut screen = terminal::Screen::enter()?;
    let mut app = App::default();
    while !stop.load(Ordering::Relaxed) && !app.quit {
        let (live, problem) = {
            let l = latest.lock().unwrap_or_else(|p| p.into_inner());
            (l.state.clone(), problem(&l, daemon))
        };
        let shown = match &app.frozen {
            Some(frozen) => frozen.as_ref(),
            None => live.as_ref(),
        };
        let status = Status { source, problem };
        screen
            .terminal
            .draw(|f| render::draw(f, &app, shown, &status))
            .context("drawing")?;
        // A hung-up terminal ends the view (crossterm's poll would spin on
        // it); otherwise keys, and a resize crossterm noted, without
        // waiting again.
        if terminal::wait_for_input(Duration::from_millis(200)) == Input::Gone {
            break;
        }
        if event::poll(Duration::ZERO).context("reading the keyboard")? {
            match event::read().context("reading the keyboard")? {
                Event::Key(k) => app.on_key(k, live.as_ref()),
                Event::Resize(..) => screen.terminal.autoresize().context("resizing")?,
                _ => {}
            }
        }
    }
    drop(screen);
    Ok(())
}

/// Why the view has no fresh frame, in one line, or `None`.
fn problem(l: &Latest, daemon: bool) -> Option<String> {
    let who = if daemon {
        "daemon not answering"
    } else {
        "reading the machine"
    };
    if let Some(since) = l.asking_since {
        if since.elapsed() > data::DEADLINE {
            return Some(format!(
                "{who}: no answer for {}s (connecting or waiting); retrying",
                since.elapsed().as_secs()
            ));
        }
    }
    let e = l.error.as_ref()?;
    let age = l
        .received
        .map(|r| format!(", the frame shown is {}s old", r.elapsed().as_secs()))
        .unwrap_or_default();
    Some(format!("{who} (retrying{age}): {e}"))
}

/// `top`'s own rounds: the policy on the live machine, nothing applied.
struct Local {
    engine: Engine,
    topology: numaplace_model::Topology,
    collector: numaplace_linux::Collector,
    scope: numaplace_model::Scope,
    policy: String,
    interval: Duration,
    /// `--counters-from`: counters made up for threads its rules match.
    synthetic: Option<SyntheticCounters>,
}

impl Local {
    fn new(args: &TopArgs, interval: Duration) -> Result<Local> {
        let mut config = Config::load(args.choice.config.as_deref())?;
        numaplace::daemon::choose(&mut config, &args.choice, &args.scope)?;
        if config.scope.is_empty() {
            config.scope.all = true;
        }
        let found = discover_repaired(&TopologySource::Sysfs(SysRoot::host()))?;
        let topology = numaplace::daemon::restrict(found.topology, &config)?;
        let balancing = NumaBalancing::read(&SysRoot::host());
        let mut engine = Engine::new(
            config.policy.build(),
            config.scope.clone(),
            numaplace::daemon::engine_config(&config, balancing),
        );
        engine.report_classes(true);
        // As a dry-run daemon: each change proposed once, in the decisions.
        engine.as_if_applied(true);
        let mut collector = numaplace::daemon::collector_for(&engine, &config);
        collector.set_numa_faults(balancing.balances_between_nodes());
        // numa_maps only where the policy may act: reading every process's
        // each round would cost more than the view is worth.
        collector.set_memory_scope(Some(config.scope.clone()));
        let synthetic = SyntheticCounters::load_given(args.choice.counters_from.as_deref())?;
        Ok(Local {
            engine,
            topology,
            collector,
            scope: config.scope,
            policy: config.policy.name().to_string(),
            interval,
            synthetic,
        })
    }

    /// Runs `max` rounds (or until `stop`), each frame into `latest`.
    fn rounds(self, max: u64, latest: &Shared, stop: &Arc<AtomicBool>) {
        let Local {
            mut engine,
            topology,
            collector,
            scope,
            policy,
            interval,
            synthetic,
        } = self;
        let live = LiveTelemetry::new(collector, interval, Instant::now(), Arc::clone(stop));
        let mut world = Pair {
            telemetry: Synthesized {
                inner: live,
                synthetic,
            },
            actuator: RecordingActuator::default(),
        };
        let mut observer = LocalObserver {
            feed: Feed {
                builder: Default::default(),
                watch: Watch {
                    topology: &topology,
                    scope,
                    reads: Reads::of(&engine),
                    policy,
                    applies: false,
                },
            },
            latest: Arc::clone(latest),
            stop: Arc::clone(stop),
            max_rounds: Some(max),
            rounds: 0,
        };
        let Ok(_) = engine.run(&topology, &mut world, &mut NoGuard, &mut observer);
    }
}

#[cfg(test)]
mod tests;
