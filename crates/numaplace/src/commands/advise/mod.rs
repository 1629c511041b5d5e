//! `numaplace advise`: one round of the daemon's policy on this machine,
//! printed, nothing applied; or, with `--numad-w`, numad's pre-placement
//! query.

mod numad_w;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Result;
use numaplace::checks;
use numaplace::cli::{AdviseArgs, RunArgs};
use numaplace::config::describe_policy;
use numaplace::daemon::{
    EMPTY_SCOPE, blind_policy, collector_for, engine_config, live_world, settings,
};
use numaplace::error::InputError;
use numaplace::report::engine::{describe_decision, describe_left_alone, describe_scope};
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::{LiveTelemetry, SysRoot};
use numaplace_model::{Outcome, Snapshot};
use numaplace_policy::engine::{
    Engine, JournalEntry, NoGuard, Observer, RecordingActuator, RoundReport,
};

/// `numaplace advise`: with `--numad-w`, numad's pre-placement query;
/// otherwise one round of the daemon's policy.
pub(crate) fn run(args: &AdviseArgs) -> Result<()> {
    match (&args.numad_w, &args.sysfs_root) {
        (Some(w), root) => numad_w::run(w, root.as_deref()),
        // clap's `requires` is not checked where a conflicting flag
        // (--all, --pid) is given: said here, not ignored.
        (None, Some(root)) => Err(InputError(format!(
            "--sysfs-root {}: read only with --numad-w (advise places this host's \
             processes; `numaplace topology --sysfs-root` shows another machine)",
            root.display()
        ))
        .into()),
        (None, None) => advise(&args.run),
    }
}

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

/// One round on the live machine, printed, nothing applied.
fn advise(args: &RunArgs) -> Result<()> {
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
    if let Some(short) = checks::short(&checks::checks(&SysRoot::host())) {
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
    let mut world = live_world(live, c, s.synthetic.take(), RecordingActuator::default());
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
