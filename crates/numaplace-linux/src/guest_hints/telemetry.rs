//! The live telemetry with the guests' hints: after each collection round,
//! the sockets are read and `Snapshot::guest_hints` filled, so the policy,
//! the journal and a recording see them like any other reading.

use std::collections::BTreeSet;
use std::time::Instant;

use numaplace_model::Snapshot;
use numaplace_model::world::Telemetry;

use super::GuestHints;

/// `inner`'s snapshots, with the guests' hints when `hints` follows any
/// socket patterns.
pub struct Hinted<T> {
    /// The world's own telemetry.
    pub inner: T,
    /// The guests' hints, where any are configured.
    pub hints: Option<GuestHints>,
}

impl<T: Telemetry> Telemetry for Hinted<T> {
    type Error = T::Error;

    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, T::Error> {
        let mut snapshot = self.inner.next_snapshot()?;
        if let (Some(s), Some(hints)) = (snapshot.as_mut(), self.hints.as_mut()) {
            let round = hints.poll(s, Instant::now());
            for note in &round.notes {
                tracing::warn!("{note}");
            }
            for change in &round.changes {
                tracing::info!("{change}");
            }
            s.guest_hints = round.hints;
        }
        Ok(snapshot)
    }

    fn after_round(&mut self, managed: &BTreeSet<i32>, acted_on: &BTreeSet<i32>) {
        self.inner.after_round(managed, acted_on);
    }
}
