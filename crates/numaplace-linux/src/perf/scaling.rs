//! Raw group readings and the pure arithmetic on them: multiplexing scale
//! and deltas between two readings.
//!
//! A reading keeps the kernel's raw cumulative counts; deltas scale the
//! *raw* difference by the interval's own `Δenabled / Δrunning` (as
//! `perf stat -I` does). Differencing two cumulatively scaled values
//! instead would smear one interval's multiplexing over the whole history,
//! and can even go backwards.

use std::collections::BTreeMap;

use numaplace_model::{Counter, CounterDeltas};

/// One read of a thread's group: raw cumulative counts and times.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupReading {
    /// Raw counts since the group was opened (not scaled).
    pub values: BTreeMap<Counter, u64>,
    /// `PERF_FORMAT_TOTAL_TIME_ENABLED`, ns.
    pub enabled_ns: u64,
    /// `PERF_FORMAT_TOTAL_TIME_RUNNING`, ns.
    pub running_ns: u64,
}

impl GroupReading {
    /// The reading of a freshly opened group: every counter at zero.
    pub fn zero(counters: impl IntoIterator<Item = Counter>) -> Self {
        GroupReading {
            values: counters.into_iter().map(|c| (c, 0)).collect(),
            enabled_ns: 0,
            running_ns: 0,
        }
    }

    /// Cumulative counts scaled for multiplexing (`value * enabled /
    /// running`); empty if the group never ran.
    pub fn scaled(&self) -> BTreeMap<Counter, u64> {
        self.values
            .iter()
            .filter_map(|(&c, &v)| scale(v, self.enabled_ns, self.running_ns).map(|s| (c, s)))
            .collect()
    }
}

/// `value * enabled / running`, rounded; `None` if the counter never ran
/// (`running == 0`): no estimate is better than an invented one.
pub fn scale(value: u64, enabled_ns: u64, running_ns: u64) -> Option<u64> {
    if running_ns == 0 {
        return None;
    }
    if running_ns >= enabled_ns {
        return Some(value);
    }
    let v = (u128::from(value) * u128::from(enabled_ns) + u128::from(running_ns) / 2)
        / u128::from(running_ns);
    Some(u64::try_from(v).unwrap_or(u64::MAX))
}

/// Whether `cur` cannot continue `prev`: a time or a count went backwards,
/// or the set of counters changed. That happens when the group was
/// reopened (a new group starts from zero) or reset.
pub fn restarted(prev: &GroupReading, cur: &GroupReading) -> bool {
    cur.enabled_ns < prev.enabled_ns
        || cur.running_ns < prev.running_ns
        || prev.values.len() != cur.values.len()
        || cur
            .values
            .iter()
            .any(|(c, &v)| prev.values.get(c).is_none_or(|&p| v < p))
}

/// The counts over the interval from `prev` to `cur`, scaled by that
/// interval's `Δenabled / Δrunning`. If the group restarted in between,
/// `cur` is taken as counted from zero. If the thread did not run in the
/// interval (no enabled time), every count is zero; if it was enabled but
/// multiplexed out the whole time, `values` is empty (no value).
pub fn delta(prev: &GroupReading, cur: &GroupReading) -> CounterDeltas {
    let zero;
    let base = if restarted(prev, cur) {
        zero = GroupReading::zero(cur.values.keys().copied());
        &zero
    } else {
        prev
    };
    let enabled_ns = cur.enabled_ns - base.enabled_ns;
    let running_ns = cur.running_ns - base.running_ns;
    // A per-thread group is enabled only while its thread is on a CPU: no
    // enabled time means the thread did not run, so every count is a true
    // zero. Enabled but never running means it was multiplexed out: no value.
    let values = cur
        .values
        .iter()
        .filter_map(|(&c, &v)| {
            if enabled_ns == 0 {
                return Some((c, 0));
            }
            let d = v - base.values.get(&c).copied().unwrap_or(0);
            scale(d, enabled_ns, running_ns).map(|s| (c, s))
        })
        .collect();
    CounterDeltas {
        values,
        enabled_ns,
        running_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(values: &[(Counter, u64)], enabled_ns: u64, running_ns: u64) -> GroupReading {
        GroupReading {
            values: values.iter().copied().collect(),
            enabled_ns,
            running_ns,
        }
    }

    use Counter::{Cycles, Instructions, TaskClock};

    #[test]
    fn scales_only_when_multiplexed_and_never_invents() {
        assert_eq!(scale(100, 1000, 1000), Some(100));
        assert_eq!(scale(100, 1000, 250), Some(400));
        assert_eq!(scale(1, 3, 2), Some(2)); // 1.5 rounds to 2
        assert_eq!(scale(100, 1000, 0), None);
        assert_eq!(scale(0, 0, 0), None);
        // The kernel can report running a hair above enabled: no scaling up.
        assert_eq!(scale(100, 999, 1000), Some(100));
        // No overflow on huge counts.
        assert_eq!(scale(u64::MAX, 4, 2), Some(u64::MAX));
        assert_eq!(scale(u64::MAX / 2, 2, 1), Some(u64::MAX - 1));
    }

    #[test]
    fn cumulative_readings_scale() {
        let r = reading(&[(Instructions, 500), (Cycles, 1000)], 2000, 1000);
        assert_eq!(r.scaled()[&Instructions], 1000);
        assert!(reading(&[(Instructions, 5)], 10, 0).scaled().is_empty());
    }

    #[test]
    fn delta_without_multiplexing_is_the_difference() {
        let a = reading(&[(TaskClock, 1_000), (Instructions, 10)], 1_000, 1_000);
        let b = reading(&[(TaskClock, 5_000), (Instructions, 50)], 5_000, 5_000);
        let d = delta(&a, &b);
        assert_eq!(d.get(TaskClock), Some(4_000));
        assert_eq!(d.get(Instructions), Some(40));
        assert_eq!((d.enabled_ns, d.running_ns), (4_000, 4_000));
        // From a fresh group's zero reading: everything since open.
        let d = delta(&GroupReading::zero([TaskClock, Instructions]), &a);
        assert_eq!(d.get(TaskClock), Some(1_000));
    }

    #[test]
    fn delta_scales_by_the_interval_not_the_history() {
        // First interval fully counted, second only a quarter of the time.
        let a = reading(&[(Cycles, 1_000)], 1_000, 1_000);
        let b = reading(&[(Cycles, 1_250)], 2_000, 1_250);
        let d = delta(&a, &b);
        assert_eq!(d.get(Cycles), Some(1_000)); // 250 * 1000 / 250
        assert_eq!((d.enabled_ns, d.running_ns), (1_000, 250));

        // Differencing cumulatively scaled values goes wrong, even backwards.
        let a = reading(&[(Cycles, 1_000)], 1_000, 250);
        let b = reading(&[(Cycles, 2_000)], 2_000, 1_250);
        assert_eq!(delta(&a, &b).get(Cycles), Some(1_000));
        assert!(b.scaled()[&Cycles] < a.scaled()[&Cycles]);
    }

    #[test]
    fn interval_not_running_has_no_values_but_has_times() {
        let a = reading(&[(Cycles, 1_000)], 1_000, 1_000);
        let b = reading(&[(Cycles, 1_000)], 3_000, 1_000);
        let d = delta(&a, &b);
        assert!(d.values.is_empty());
        assert_eq!((d.enabled_ns, d.running_ns), (2_000, 0));
    }

    #[test]
    fn a_thread_that_did_not_run_counted_zero() {
        let a = reading(&[(Cycles, 1_000)], 1_000, 1_000);
        let d = delta(&a, &a);
        assert_eq!(d.get(Cycles), Some(0));
        assert_eq!((d.enabled_ns, d.running_ns), (0, 0));
    }

    #[test]
    fn restart_after_reopen_counts_from_zero() {
        let before = reading(&[(Cycles, 10_000), (Instructions, 9_000)], 50_000, 50_000);
        // The group was reopened: its counts start over below the old ones.
        let after = reading(&[(Cycles, 300), (Instructions, 200)], 400, 400);
        assert!(restarted(&before, &after));
        let d = delta(&before, &after);
        assert_eq!(d.get(Cycles), Some(300));
        assert_eq!(d.get(Instructions), Some(200));
        assert_eq!(d.enabled_ns, 400);
        // One count going backwards is enough, even if times advanced.
        let odd = reading(&[(Cycles, 10_100), (Instructions, 5)], 60_000, 60_000);
        assert_eq!(delta(&before, &odd).get(Instructions), Some(5));
        // A changed counter set is a restart too.
        let fewer = reading(&[(Cycles, 20_000)], 70_000, 70_000);
        assert!(restarted(&before, &fewer));
        assert_eq!(delta(&before, &fewer).get(Cycles), Some(20_000));
        assert!(!restarted(&before, &before));
    }
}
