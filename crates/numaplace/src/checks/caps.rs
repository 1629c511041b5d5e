//! The capabilities each of numaplace's features needs, and whether this
//! process has them: its effective and bounding sets (`CapEff`, `CapBnd`
//! in `/proc/self/status`), parsed by a pure function, checked per row of
//! the report, with the unit line that grants what is missing.
//!
//! What the kernel checks, feature by feature:
//! - the BPF task iterator: a tracing program, so `bpf_capable()` and
//!   `perfmon_capable()` (CAP_BPF and CAP_PERFMON, Linux 5.8; CAP_SYS_ADMIN
//!   stands for both) (kernel/bpf/syscall.c, `bpf_prog_load`);
//! - pinning another user's task: `sched_setaffinity` allows the task's
//!   owner, otherwise CAP_SYS_NICE (kernel/sched, `check_same_owner`);
//! - moving another user's pages (`move_pages`, `migrate_pages`):
//!   `ptrace_may_access(PTRACE_MODE_READ_REALCREDS)`, so CAP_SYS_PTRACE
//!   (mm/migrate.c `find_mm_struct`, mm/mempolicy.c); `migrate_pages` to
//!   nodes outside the task's cpuset also CAP_SYS_NICE;
//! - reading their `/proc` (`numa_maps`, the fd links that find vCPUs):
//!   CAP_SYS_PTRACE for the ptrace check, CAP_DAC_READ_SEARCH for the
//!   directories only their owner may search;
//! - their counters: `perf_event_open` on another task is a ptrace check
//!   (CAP_SYS_PTRACE), and above `perf_event_paranoid` 1, CAP_PERFMON;
//! - writing `kernel.numa_balancing`: CAP_SYS_ADMIN, whatever the file's
//!   mode (kernel/sched/core.c, `sysctl_numa_balancing`).

use numaplace_linux::SysRoot;
use serde::Serialize;

/// A capability a check names. Bit numbers from
/// include/uapi/linux/capability.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Cap {
    #[serde(rename = "CAP_DAC_READ_SEARCH")]
    DacReadSearch,
    #[serde(rename = "CAP_SYS_PTRACE")]
    SysPtrace,
    #[serde(rename = "CAP_SYS_ADMIN")]
    SysAdmin,
    #[serde(rename = "CAP_SYS_NICE")]
    SysNice,
    #[serde(rename = "CAP_PERFMON")]
    Perfmon,
    #[serde(rename = "CAP_BPF")]
    Bpf,
}

impl Cap {
    pub fn bit(self) -> u32 {
        match self {
            Cap::DacReadSearch => 2,
            Cap::SysPtrace => 19,
            Cap::SysAdmin => 21,
            Cap::SysNice => 23,
            Cap::Perfmon => 38,
            Cap::Bpf => 39,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Cap::DacReadSearch => "CAP_DAC_READ_SEARCH",
            Cap::SysPtrace => "CAP_SYS_PTRACE",
            Cap::SysAdmin => "CAP_SYS_ADMIN",
            Cap::SysNice => "CAP_SYS_NICE",
            Cap::Perfmon => "CAP_PERFMON",
            Cap::Bpf => "CAP_BPF",
        }
    }
}

/// A process's effective and bounding capability sets, as bit masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CapSets {
    pub effective: u64,
    pub bounding: u64,
}

impl CapSets {
    /// From the text of `/proc/PID/status`: its `CapEff:` and `CapBnd:`
    /// lines, each a hexadecimal mask. The error names the line that is
    /// missing or not a mask.
    pub(crate) fn parse(status: &str) -> Result<CapSets, String> {
        let mask = |key: &str| -> Result<u64, String> {
            let value = status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .ok_or_else(|| format!("no {key} line in /proc/self/status"))?;
            u64::from_str_radix(value.trim(), 16).map_err(|_| {
                format!(
                    "{key} in /proc/self/status is not a hexadecimal mask: {:?}",
                    value.trim()
                )
            })
        };
        Ok(CapSets {
            effective: mask("CapEff:")?,
            bounding: mask("CapBnd:")?,
        })
    }

    pub(crate) fn has(&self, cap: Cap) -> bool {
        self.effective & (1 << cap.bit()) != 0
    }

    pub(crate) fn may_have(&self, cap: Cap) -> bool {
        self.bounding & (1 << cap.bit()) != 0
    }
}

/// What a feature needs: all the capabilities of any one of `any_of`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Need {
    /// What they are for, as the row says it ("loading the task iterator").
    pub feature: &'static str,
    pub any_of: &'static [&'static [Cap]],
}

impl Need {
    /// `CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN`.
    pub(crate) fn words(&self) -> String {
        self.any_of
            .iter()
            .map(|set| {
                set.iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(" and ")
            })
            .collect::<Vec<_>>()
            .join(", or ")
    }

    /// The verdict against `sets`: the first alternative held in full, or
    /// the one that misses the fewest (the first of those).
    pub(crate) fn check(&self, sets: &CapSets) -> CapCheck {
        let missing =
            |set: &[Cap]| -> Vec<Cap> { set.iter().copied().filter(|&c| !sets.has(c)).collect() };
        let best = self
            .any_of
            .iter()
            .map(|set| missing(set))
            .min_by_key(Vec::len)
            .unwrap_or_default();
        CapCheck {
            feature: self.feature.to_string(),
            needs: self.words(),
            not_in_bounding_set: best
                .iter()
                .copied()
                .filter(|&c| !sets.may_have(c))
                .collect(),
            missing: best,
        }
    }
}

/// Whether this process has what a feature needs, and if not, which
/// capabilities it lacks and whether its bounding set forbids them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapCheck {
    pub feature: String,
    /// The capabilities that would do, in words.
    pub needs: String,
    /// Missing from the effective set (empty: it has what it needs).
    pub missing: Vec<Cap>,
    /// Of those, the ones the bounding set lacks too: no process of this
    /// service can gain them until the unit grants them.
    pub not_in_bounding_set: Vec<Cap>,
}

impl CapCheck {
    pub fn ok(&self) -> bool {
        self.missing.is_empty()
    }

    /// One line for the report: what it needs and whether it has it.
    pub fn line(&self) -> String {
        if self.ok() {
            return format!("{} needs {}: has it", self.feature, self.needs);
        }
        let names = |caps: &[Cap]| caps.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ");
        let bounding = if self.not_in_bounding_set.is_empty() {
            String::new()
        } else {
            format!(
                " ({} not even in the bounding set)",
                names(&self.not_in_bounding_set)
            )
        };
        format!(
            "{} needs {}: missing {}{bounding}",
            self.feature,
            self.needs,
            names(&self.missing)
        )
    }

    /// How to grant what is missing: the unit's lines (the shipped
    /// examples/numaplace.service has them all), or, where the bounding
    /// set allows it, running as root.
    pub fn fix(&self) -> Option<String> {
        if self.ok() {
            return None;
        }
        let names = self
            .missing
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(" ");
        Some(if self.not_in_bounding_set.is_empty() {
            format!(
                "{names} is allowed but not held: run numaplace as root, or give a non-root \
                 service `AmbientCapabilities={names}`"
            )
        } else {
            format!(
                "grant {names} in the unit: `CapabilityBoundingSet={names}` in [Service] \
                 (`systemctl edit numaplace` adds it to the shipped set; Kubernetes: \
                 securityContext.capabilities.add), then restart numaplace"
            )
        })
    }
}

/// The BPF task iterator: a tracing program (`bpf_iter_task`).
pub(crate) const TASK_ITERATOR: Need = Need {
    feature: "loading the task iterator",
    any_of: &[&[Cap::Bpf, Cap::Perfmon], &[Cap::SysAdmin]],
};

/// `sched_setaffinity` on another user's task.
pub(crate) const PINNING_OTHERS: Need = Need {
    feature: "pinning other users' tasks",
    any_of: &[&[Cap::SysNice]],
};

/// `move_pages`/`migrate_pages` on another user's process.
pub(crate) const MOVING_OTHERS: Need = Need {
    feature: "moving other users' pages",
    any_of: &[&[Cap::SysPtrace]],
};

/// Other users' `/proc/PID/numa_maps` and fd links.
pub(crate) const READING_OTHERS: Need = Need {
    feature: "reading other users' /proc files",
    any_of: &[&[Cap::SysPtrace, Cap::DacReadSearch]],
};

/// Per-thread counters of other users' threads, where
/// `perf_event_paranoid` is above 1.
pub(crate) const COUNTING_OTHERS: Need = Need {
    feature: "counting other users' threads",
    any_of: &[&[Cap::Perfmon, Cap::SysPtrace], &[Cap::SysAdmin]],
};

/// The same where `perf_event_paranoid` is 1 or less: only the ptrace
/// check remains.
pub(crate) const COUNTING_OTHERS_PERMISSIVE: Need = Need {
    feature: "counting other users' threads",
    any_of: &[&[Cap::SysPtrace], &[Cap::SysAdmin]],
};

/// Writing `kernel.numa_balancing`.
pub(crate) const SYSCTL_WRITE: Need = Need {
    feature: "writing kernel.numa_balancing",
    any_of: &[&[Cap::SysAdmin]],
};

/// The capability a row's feature needs, by the row's id: `None` for a
/// row that needs none. `paranoid` is `kernel.perf_event_paranoid`.
pub(crate) fn need_of(id: &str, paranoid: Option<i32>) -> Option<Need> {
    Some(match id {
        "task-iterator" => TASK_ITERATOR,
        "pinning" => PINNING_OTHERS,
        "moving-memory" => MOVING_OTHERS,
        "memory-per-node" => READING_OTHERS,
        "llc-miss-rate" | "cpi" | "uncore-penalty" | "samples" => match paranoid {
            Some(p) if p <= 1 => COUNTING_OTHERS_PERMISSIVE,
            _ => COUNTING_OTHERS,
        },
        "kernel-balancing-switch" => SYSCTL_WRITE,
        _ => return None,
    })
}

/// This process's sets, from `proc/self/status` under `root`.
pub(crate) fn sets(root: &SysRoot) -> Result<CapSets, String> {
    let status = root
        .read("proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    CapSets::parse(&status)
}

/// `kernel.perf_event_paranoid` under `root` (`None`: absent).
pub(crate) fn paranoid(root: &SysRoot) -> Option<i32> {
    root.read("proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/self/status` of `setpriv --bounding-set=-all,+sys_nice,
    /// +sys_ptrace,+perfmon,+dac_read_search` run by root (Linux 6.1).
    const SHIPPED_BEFORE: &str = "Name:\tnumaplace\nUmask:\t0022\nState:\tR (running)\n\
        CapInh:\t0000000000000000\nCapPrm:\t0000004000880004\nCapEff:\t0000004000880004\n\
        CapBnd:\t0000004000880004\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n";

    /// Root with every capability (Linux 6.1: 41 of them).
    const ROOT: &str = "CapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
        CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";

    #[test]
    fn the_sets_are_read_from_their_lines() {
        let s = CapSets::parse(SHIPPED_BEFORE).unwrap();
        assert_eq!(s.effective, 0x4000880004);
        assert_eq!(s.bounding, 0x4000880004);
        for c in [
            Cap::SysNice,
            Cap::SysPtrace,
            Cap::Perfmon,
            Cap::DacReadSearch,
        ] {
            assert!(s.has(c) && s.may_have(c), "{c:?}");
        }
        for c in [Cap::Bpf, Cap::SysAdmin] {
            assert!(!s.has(c) && !s.may_have(c), "{c:?}");
        }
        let root = CapSets::parse(ROOT).unwrap();
        assert!(root.has(Cap::Bpf) && root.has(Cap::SysAdmin));
    }

    #[test]
    fn a_missing_or_garbled_line_is_named() {
        let e = CapSets::parse("CapEff:\t0000000000000000\n").unwrap_err();
        assert!(e.contains("no CapBnd: line"), "{e}");
        let e = CapSets::parse("CapEff:\tzz\nCapBnd:\t0\n").unwrap_err();
        assert!(e.contains("CapEff: in /proc/self/status is not"), "{e}");
        assert!(e.contains("\"zz\""), "{e}");
    }

    #[test]
    fn the_old_unit_cannot_load_the_task_iterator_and_says_which_cap() {
        let s = CapSets::parse(SHIPPED_BEFORE).unwrap();
        let c = TASK_ITERATOR.check(&s);
        assert!(!c.ok());
        // Each alternative misses one capability (CAP_PERFMON is there):
        // the first is named.
        assert_eq!(c.missing, vec![Cap::Bpf]);
        assert_eq!(c.not_in_bounding_set, vec![Cap::Bpf]);
        assert_eq!(c.needs, "CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN");
        assert!(
            c.line()
                .contains("missing CAP_BPF (CAP_BPF not even in the bounding set)"),
            "{}",
            c.line()
        );
        assert!(
            c.fix().unwrap().contains("CapabilityBoundingSet=CAP_BPF"),
            "{:?}",
            c.fix()
        );
        assert!(
            SYSCTL_WRITE
                .check(&s)
                .fix()
                .unwrap()
                .contains("CAP_SYS_ADMIN")
        );
        assert!(PINNING_OTHERS.check(&s).ok());
        assert!(MOVING_OTHERS.check(&s).ok());
        assert!(READING_OTHERS.check(&s).ok());
        assert!(COUNTING_OTHERS.check(&s).ok());
    }

    #[test]
    fn cap_sys_admin_alone_stands_for_bpf_and_perfmon() {
        let s = CapSets {
            effective: 1 << Cap::SysAdmin.bit(),
            bounding: 1 << Cap::SysAdmin.bit(),
        };
        assert!(TASK_ITERATOR.check(&s).ok());
        assert!(SYSCTL_WRITE.check(&s).ok());
        assert!(!PINNING_OTHERS.check(&s).ok());
    }

    #[test]
    fn a_cap_the_bounding_set_allows_but_the_process_lacks_asks_for_root() {
        // A non-root service whose unit bounds CAP_SYS_NICE but gives no
        // ambient capabilities.
        let s = CapSets {
            effective: 0,
            bounding: 1 << Cap::SysNice.bit(),
        };
        let c = PINNING_OTHERS.check(&s);
        assert_eq!(c.missing, vec![Cap::SysNice]);
        assert!(c.not_in_bounding_set.is_empty());
        let fix = c.fix().unwrap();
        assert!(fix.contains("AmbientCapabilities=CAP_SYS_NICE"), "{fix}");
        assert!(!c.line().contains("bounding"), "{}", c.line());
    }

    #[test]
    fn counters_need_cap_perfmon_only_above_paranoid_1() {
        let s = CapSets {
            effective: 1 << Cap::SysPtrace.bit(),
            bounding: 1 << Cap::SysPtrace.bit(),
        };
        assert!(need_of("cpi", Some(1)).unwrap().check(&s).ok());
        let strict = need_of("cpi", Some(2)).unwrap().check(&s);
        assert_eq!(strict.missing, vec![Cap::Perfmon]);
        assert!(need_of("cpi", None).unwrap().check(&s).missing == vec![Cap::Perfmon]);
        assert!(need_of("topology", Some(2)).is_none());
        assert!(need_of("energy", Some(2)).is_none());
    }

    #[test]
    fn every_root_check_passes_and_has_no_fix() {
        let s = CapSets::parse(ROOT).unwrap();
        for need in [
            TASK_ITERATOR,
            PINNING_OTHERS,
            MOVING_OTHERS,
            READING_OTHERS,
            COUNTING_OTHERS,
            SYSCTL_WRITE,
        ] {
            let c = need.check(&s);
            assert!(c.ok() && c.fix().is_none(), "{c:?}");
            assert!(c.line().ends_with(": has it"), "{}", c.line());
        }
    }
}
