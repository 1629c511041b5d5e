//! The live host as the engine's telemetry: every interval, a snapshot of
//! the machine from the [`Collector`], until a stop signal. A round that
//! runs long does not make the next ones pile up; a reading that fails is
//! said and its round skipped.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numaplace_model::world::Telemetry;
use numaplace_model::{Scope, Snapshot};

use crate::Collector;

/// What the owner of the loop may change of the reading while it runs (a
/// daemon's configuration reloaded): the interval, from the next round's
/// deadline on, and the processes whose memory is read.
#[derive(Debug, Default)]
pub struct LiveControl {
    interval_ns: AtomicU64,
    memory_scope: Mutex<Option<Scope>>,
}

impl LiveControl {
    /// Sets the time between rounds from the next round on.
    pub fn set_interval(&self, interval: Duration) {
        self.interval_ns
            .store(interval.as_nanos() as u64, Ordering::Relaxed);
    }

    fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns.load(Ordering::Relaxed))
    }

    /// The memory of processes `scope` takes in is read from the next
    /// round on ([`Collector::set_memory_scope`]).
    pub fn set_memory_scope(&self, scope: Scope) {
        *self.memory_scope.lock().unwrap_or_else(|p| p.into_inner()) = Some(scope);
    }

    fn take_memory_scope(&self) -> Option<Scope> {
        self.memory_scope
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// Snapshots of the live host, one per interval.
pub struct LiveTelemetry {
    collector: Collector,
    control: Arc<LiveControl>,
    /// When the next round is due.
    next: Instant,
    stop: Arc<AtomicBool>,
    /// Nanoseconds spent reading the machine, over every round (shared:
    /// the metrics read it while the loop runs).
    collect_ns: Arc<AtomicU64>,
}

impl LiveTelemetry {
    /// The first round is due at `first`, the others every `interval`
    /// after it; the rounds end once `stop` is set (a signal handler).
    pub fn new(
        collector: Collector,
        interval: Duration,
        first: Instant,
        stop: Arc<AtomicBool>,
    ) -> LiveTelemetry {
        let control = Arc::new(LiveControl::default());
        control.set_interval(interval);
        LiveTelemetry {
            collector,
            control,
            next: first,
            stop,
            collect_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The collector that reads the host.
    pub fn collector(&self) -> &Collector {
        &self.collector
    }

    /// The handle that changes the interval and the memory read while the
    /// rounds run.
    pub fn control(&self) -> Arc<LiveControl> {
        Arc::clone(&self.control)
    }

    /// Nanoseconds spent reading the machine so far, as the rounds go on.
    pub fn collect_ns(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.collect_ns)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

impl Telemetry for LiveTelemetry {
    type Error = Infallible;

    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, Infallible> {
        // A slow round does not make the next ones pile up.
        let now = Instant::now();
        if now > self.next {
            self.next = now;
        }
        loop {
            // Deadline-driven: sleep in slices so a signal ends the wait soon.
            while !self.stopped() && Instant::now() < self.next {
                std::thread::sleep((self.next - Instant::now()).min(Duration::from_millis(100)));
            }
            if self.stopped() {
                return Ok(None);
            }
            self.next += self.control.interval();
            if let Some(scope) = self.control.take_memory_scope() {
                self.collector.set_memory_scope(Some(scope));
            }
            let t0 = Instant::now();
            match self.collector.collect() {
                Ok(snapshot) => {
                    self.collect_ns
                        .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    // Hinting faults exist while the kernel balances
                    // between nodes, which a policy (auto) or an operator
                    // may switch during the run: from the next round they
                    // are read or not as it now says.
                    if let Some(on) = snapshot.machine.numa_balancing {
                        self.collector.set_numa_faults(on);
                    }
                    return Ok(Some(snapshot));
                }
                Err(e) => {
                    tracing::warn!("reading the machine failed, skipping this round: {e:#}");
                }
            }
        }
    }

    fn after_round(&mut self, managed: &BTreeSet<i32>, acted_on: &BTreeSet<i32>) {
        // What numaplace did to a process shows in its next reading.
        for &pid in acted_on {
            self.collector.refresh(pid);
        }
        // Data addresses are sampled from the processes in scope only.
        self.collector.set_sample_processes(Some(managed.clone()));
    }
}
