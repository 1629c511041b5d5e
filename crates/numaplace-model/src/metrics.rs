//! Metrics derived from raw counter deltas, by pure functions.

use crate::counters::{Counter, CounterDeltas};

/// Instructions per cycle.
pub fn ipc(d: &CounterDeltas) -> Option<f64> {
    let (i, c) = (d.get(Counter::Instructions)?, d.get(Counter::Cycles)?);
    (c > 0).then(|| i as f64 / c as f64)
}

/// Last-level-cache misses per 1000 instructions: the memory intensity that
/// \[Blagodurov11\] §3 sorts and classifies threads by.
pub fn mpki(d: &CounterDeltas) -> Option<f64> {
    let (m, i) = (d.get(Counter::LlcMisses)?, d.get(Counter::Instructions)?);
    (i > 0).then(|| m as f64 * 1000.0 / i as f64)
}

/// Uncore penalty in cycles per uncore request (\[Rao13\] §3.1): by Little's
/// law, the cycles during which at least one demand request was outstanding
/// (t', [`Counter::UncoreOccupancy`]) divided by the requests sent to the
/// uncore (λ over the same interval, [`Counter::UncoreRequests`]). It is the
/// stall a request costs once overlapping requests are accounted for, so
/// the lower, the better the thread's placement. `None` without the two
/// counts or without a request.
pub fn uncore_penalty(d: &CounterDeltas) -> Option<f64> {
    let (t, r) = (
        d.get(Counter::UncoreOccupancy)?,
        d.get(Counter::UncoreRequests)?,
    );
    (r > 0).then(|| t as f64 / r as f64)
}

/// Share of the interval the thread ran, from the task clock.
pub fn cpu_share(d: &CounterDeltas, interval_ns: u64) -> Option<f64> {
    let t = d.get(Counter::TaskClock)?;
    (interval_ns > 0).then(|| t as f64 / interval_ns as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deltas(pairs: &[(Counter, u64)]) -> CounterDeltas {
        CounterDeltas {
            values: pairs.iter().copied().collect(),
            enabled_ns: 1,
            running_ns: 1,
        }
    }

    #[test]
    fn derived_metrics() {
        let d = deltas(&[
            (Counter::Instructions, 2_000_000),
            (Counter::Cycles, 1_000_000),
            (Counter::LlcMisses, 50_000),
        ]);
        assert_eq!(ipc(&d), Some(2.0));
        assert_eq!(mpki(&d), Some(25.0));
        assert_eq!(ipc(&deltas(&[(Counter::Instructions, 5)])), None);
        assert_eq!(
            mpki(&deltas(&[
                (Counter::Instructions, 0),
                (Counter::LlcMisses, 3)
            ])),
            None
        );
        let t = deltas(&[(Counter::TaskClock, 250_000_000)]);
        assert_eq!(cpu_share(&t, 1_000_000_000), Some(0.25));
    }

    #[test]
    fn uncore_penalty_is_busy_cycles_per_request() {
        // 3,000,000 cycles with a request outstanding, 20,000 requests:
        // 150 cycles each.
        let d = deltas(&[
            (Counter::UncoreOccupancy, 3_000_000),
            (Counter::UncoreRequests, 20_000),
        ]);
        assert_eq!(uncore_penalty(&d), Some(150.0));
        // No request, or a count missing: no penalty.
        assert_eq!(
            uncore_penalty(&deltas(&[
                (Counter::UncoreOccupancy, 5),
                (Counter::UncoreRequests, 0)
            ])),
            None
        );
        assert_eq!(
            uncore_penalty(&deltas(&[(Counter::UncoreOccupancy, 5)])),
            None
        );
        assert_eq!(
            uncore_penalty(&deltas(&[(Counter::UncoreRequests, 5)])),
            None
        );
    }
}
