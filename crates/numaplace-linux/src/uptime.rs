//! How long the machine has been up, from `/proc/uptime`, in the clock
//! ticks a task's start time (`/proc/<pid>/stat` field 22) is counted in:
//! what makes a process's age ([`numaplace_model::Snapshot::age_s`]).

use crate::sysroot::SysRoot;

/// Parses `/proc/uptime` (`"350735.47 234388.90\n"`: seconds up, seconds
/// idle summed over CPUs) into clock ticks up at `hz` ticks a second;
/// `None` if the first field is not a non-negative number.
pub fn parse_uptime_ticks(text: &str, hz: u64) -> Option<u64> {
    let secs: f64 = text.split_whitespace().next()?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then_some((secs * hz as f64) as u64)
}

/// The machine's uptime in clock ticks under `root`; `None` where
/// `proc/uptime` cannot be read or parsed.
pub fn read_uptime_ticks(root: &SysRoot, hz: u64) -> Option<u64> {
    parse_uptime_ticks(&root.read("proc/uptime").ok()?, hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptime_is_read_in_clock_ticks() {
        assert_eq!(
            parse_uptime_ticks("350735.47 234388.90\n", 100),
            Some(35_073_547)
        );
        assert_eq!(parse_uptime_ticks("12.5 3.0", 1000), Some(12_500));
        assert_eq!(parse_uptime_ticks("0.00 0.00", 100), Some(0));
    }

    #[test]
    fn a_malformed_uptime_is_none() {
        for bad in ["", "\n", "abc 1.0", "-5.0 1.0", "NaN 1", "inf 2"] {
            assert_eq!(parse_uptime_ticks(bad, 100), None, "{bad:?}");
        }
    }

    #[test]
    fn this_machine_has_been_up_a_while() {
        let ticks = read_uptime_ticks(&SysRoot::host(), 100).expect("/proc/uptime");
        assert!(ticks > 0);
    }
}
