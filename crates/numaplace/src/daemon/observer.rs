//! What the daemon does with the engine loop's events: each journal entry
//! to the journal file (and the log), the metrics and `numaplace top`'s
//! state after each round, a reload on SIGHUP, and a stop after
//! `--rounds` rounds.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use numaplace_model::Snapshot;
use numaplace_model::task::printable;
use numaplace_policy::engine::{EngineTotals, JournalEntry, Observer, Reconfigure, RoundReport};

use super::metrics::MetricsState;
use super::reload::Reloader;
use crate::top_state::Feed;

/// What the daemon does with the loop's events: each journal entry to the
/// journal file (and the log), the metrics after each round, and a stop
/// after `--rounds` rounds.
pub(super) struct Daemon<'m> {
    pub(super) journal: Journal,
    pub(super) metrics: &'m Mutex<MetricsState>,
    pub(super) collect_ns: Arc<AtomicU64>,
    pub(super) rounds_limit: Option<u64>,
    pub(super) rounds: u64,
    pub(super) totals: EngineTotals,
    /// Set by SIGHUP: the configuration is read again after the round.
    pub(super) hup: Arc<AtomicBool>,
    pub(super) reloader: Reloader<'m>,
    /// What the reload gives the engine for the next rounds.
    pub(super) reloaded: Option<Reconfigure>,
    /// What `GET /state` serves (`numaplace top`), built each round where
    /// the metrics listener is on.
    pub(super) top: Option<Feed<'m>>,
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

/// The decision journal: JSON lines, appended, mode 0600, never through a
/// symlink.
pub(super) struct Journal {
    out: Option<BufWriter<File>>,
}

impl Journal {
    pub(super) fn open(path: Option<&Path>) -> Result<Journal> {
        let Some(path) = path else {
            return Ok(Journal { out: None });
        };
        let f = crate::files::open_output(path, "journal", true, 0o600)?;
        Ok(Journal {
            out: Some(BufWriter::new(f)),
        })
    }

    /// Writes one entry and flushes it: an action carried out must be in
    /// the journal even if the daemon is killed the next instant.
    pub(super) fn write(&mut self, e: &JournalEntry) {
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

/// Runs the daemon's loop. A bug in it (a panic) is caught, so that what
/// the daemon changed is still put back before it exits: the panic's
/// message is on stderr already (the hook), and it is returned for the
/// daemon's last line. The rounds run, where the loop returned.
pub(super) fn run_catching_bugs(run: impl FnOnce() -> u64) -> (Option<u64>, Option<String>) {
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
