//! `/proc/stat`'s per-CPU lines: `cpuN user nice system idle iowait irq
//! softirq steal guest guest_nice`, cumulative, in clock ticks (proc(5)).
//!
//! Only the `cpuN` lines are read (the summary `cpu` line and the
//! `intr`/`ctxt`/... lines are skipped). `guest` and `guest_nice` are
//! already counted in `user` and `nice` (kernel/sched/cputime.c,
//! account_guest_time), so they are left out of the total.

use std::collections::BTreeMap;

use super::error::ParseError;

const FILE: &str = "/proc/stat";

/// One CPU's cumulative time, clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// `idle` (field 4): time the CPU had nothing to run. numad counts
    /// only this as free (numad.c, update_cpu_data); `iowait` is not idle
    /// time the kernel promises.
    pub idle: u64,
    /// Every field up to `steal` summed: all the time the CPU accounted.
    pub total: u64,
}

impl CpuTimes {
    /// The share of the time between `earlier` and `self` that the CPU
    /// was idle; `None` when no time was accounted in between (the same
    /// sample twice, or a counter that went backwards).
    pub fn idle_share_since(&self, earlier: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let idle = self.idle.checked_sub(earlier.idle)?;
        if total == 0 || idle > total {
            return None;
        }
        Some(idle as f64 / total as f64)
    }
}

/// Fields of a `cpuN` line that are summed into the total: user, nice,
/// system, idle, iowait, irq, softirq, steal.
const SUMMED: usize = 8;
/// Kernels since 2.6.0 write at least user..iowait... and idle is the 4th.
const AT_LEAST: usize = 4;

/// Parses `/proc/stat`: each online CPU's times by kernel CPU number.
/// Refuses a `cpuN` line with fewer than four numbers or a number that is
/// not one, and a file with no `cpuN` line at all.
pub fn parse_cpu_times(text: &str) -> Result<BTreeMap<u32, CpuTimes>, ParseError> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(id) = name.strip_prefix("cpu").filter(|s| !s.is_empty()) else {
            continue;
        };
        let id: u32 = id.parse().map_err(|_| {
            ParseError::invalid(FILE, "cpu line", name, "cpu followed by a CPU number")
        })?;
        let mut times = CpuTimes::default();
        let mut seen = 0;
        for (i, f) in fields.take(SUMMED).enumerate() {
            let v: u64 = f
                .parse()
                .map_err(|_| ParseError::invalid(FILE, "cpu time", f, "a number of clock ticks"))?;
            if i == 3 {
                times.idle = v;
            }
            times.total = times.total.saturating_add(v);
            seen += 1;
        }
        if seen < AT_LEAST {
            return Err(ParseError::Malformed {
                file: FILE,
                what: format!("{name}: {seen} times, the kernel writes at least {AT_LEAST}"),
            });
        }
        out.insert(id, times);
    }
    if out.is_empty() {
        return Err(ParseError::MissingField {
            file: FILE,
            field: "cpuN",
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This development host's /proc/stat (2 CPUs), cut after `ctxt`.
    const HOST: &str = "cpu  1969524 4066 398291 30521587 12843 0 10521 0 0 0\n\
cpu0 985716 2033 199011 15259871 6460 0 5617 0 0 0\n\
cpu1 983807 2032 199280 15261716 6383 0 4903 0 0 0\n\
intr 152096017 27 9 0 0 0 0 0 0 0 0\n\
ctxt 372580372\n";

    #[test]
    fn reads_each_cpu_and_skips_the_summary_line() {
        let t = parse_cpu_times(HOST).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[&0].idle, 15_259_871);
        assert_eq!(
            t[&0].total,
            985_716 + 2033 + 199_011 + 15_259_871 + 6460 + 5617
        );
    }

    #[test]
    fn guest_time_is_not_counted_twice() {
        let t = parse_cpu_times("cpu3 10 0 0 30 0 0 0 0 7 7\n").unwrap();
        assert_eq!(
            t[&3],
            CpuTimes {
                idle: 30,
                total: 40
            }
        );
    }

    #[test]
    fn idle_share_between_two_samples() {
        let a = CpuTimes {
            idle: 100,
            total: 200,
        };
        let b = CpuTimes {
            idle: 175,
            total: 300,
        };
        assert_eq!(b.idle_share_since(&a), Some(0.75));
        assert_eq!(a.idle_share_since(&a), None, "no time passed");
        assert_eq!(a.idle_share_since(&b), None, "counters went back");
    }

    #[test]
    fn refuses_what_the_kernel_never_writes() {
        assert!(parse_cpu_times("intr 1 2\n").is_err(), "no cpu line");
        assert!(parse_cpu_times("cpu0 1 2 3\n").is_err(), "three times");
        assert!(parse_cpu_times("cpu0 1 2 x 4\n").is_err(), "not a number");
        assert!(
            parse_cpu_times("cpuX 1 2 3 4\n").is_err(),
            "not a CPU number"
        );
    }
}
