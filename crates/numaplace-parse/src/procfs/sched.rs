//! `/proc/<pid>/task/<tid>/sched`: the scheduler's debug view of one task,
//! of which numaplace reads only the NUMA balancing lines, the signal of
//! where a task's memory accesses go that needs no PMU.
//!
//! The kernel writes them (`sched_show_numa` in kernel/sched/debug.c, the
//! per-node lines from `show_numa_stats` in kernel/sched/fair.c through
//! `print_numa_stats`) only when it was built with `CONFIG_NUMA_BALANCING`
//! (and the file exists only with `CONFIG_SCHED_DEBUG`):
//!
//! ```text
//! mm->numa_scan_seq                            :                    3
//! numa_pages_migrated                          :                 1024
//! numa_preferred_nid                           :                    1
//! total_numa_faults                            :                  512
//! current_node=1, numa_group_id=0
//! numa_faults node=0 task_private=4 task_shared=0 group_private=0 group_shared=0
//! numa_faults node=1 task_private=500 task_shared=8 group_private=0 group_shared=0
//! ```
//!
//! The `task_*` counts per node are the task's memory-side hinting faults
//! (`NUMA_MEM`: the node of the page that faulted), decayed by half at each
//! of the task's scan periods; `group_*` the same for its NUMA group (0
//! without one). A node line is written for every online node (zeros for a
//! task that never faulted); `numa_preferred_nid` is -1 without a
//! preference. Other lines are ignored, and the NUMA lines may be absent
//! altogether: that is not an error but "no signal" (`Ok(None)`).

use std::collections::BTreeMap;

use super::error::{ParseError, shorten};

const FILE: &str = "sched";

/// One node's hinting faults of one task (decayed counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeFaults {
    /// Faults on pages only this task touched lately.
    pub task_private: u64,
    /// Faults on pages other tasks touched too.
    pub task_shared: u64,
    /// The same for the task's NUMA group.
    pub group_private: u64,
    /// The group's faults on pages other tasks touched too.
    pub group_shared: u64,
}

impl NodeFaults {
    /// The task's own faults on the node, private and shared.
    pub fn task(&self) -> u64 {
        self.task_private.saturating_add(self.task_shared)
    }
}

/// The NUMA balancing lines of a task's `sched`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedNuma {
    /// Pages the kernel's balancing moved for this task (cumulative).
    pub pages_migrated: Option<u64>,
    /// The node the kernel prefers for the task; `None` for none (-1).
    pub preferred_node: Option<u32>,
    /// `total_numa_faults` (decayed, all nodes, memory and CPU side).
    pub total_faults: Option<u64>,
    /// The node of the CPU the task is on.
    pub current_node: Option<u32>,
    /// Hinting faults per node, by node id.
    pub faults: BTreeMap<u32, NodeFaults>,
}

/// The line of dashes the kernel writes under the header (67 of them);
/// 20 or more cannot come from a comm (at most 15 bytes).
const SEPARATOR_DASHES: usize = 20;

/// Parses a task's `sched`. `Ok(None)` when the text has no NUMA balancing
/// lines (a kernel without `CONFIG_NUMA_BALANCING`); an error when a NUMA
/// line is there but not in the kernel's form.
///
/// The header (`<comm> (<pid>, #threads: <n>)`) carries the task's own
/// name, which may hold a newline and so forge a short line such as
/// `current_node=7`: everything up to the line of dashes under it is
/// skipped. Text without that line (a fragment) is read whole.
pub fn parse_sched_numa(text: &str) -> Result<Option<SchedNuma>, ParseError> {
    let mut numa = SchedNuma::default();
    let mut seen = false;
    let is_separator = |l: &str| {
        let l = l.trim_end();
        l.len() >= SEPARATOR_DASHES && l.bytes().all(|b| b == b'-')
    };
    let body = match text.lines().position(is_separator) {
        Some(i) => text.lines().skip(i + 1).collect::<Vec<_>>(),
        None => text.lines().collect(),
    };
    for line in body {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("numa_faults ") {
            let (node, faults) = node_line(rest)?;
            if numa.faults.insert(node, faults).is_some() {
                return Err(invalid("numa_faults", line, "one line per node"));
            }
            seen = true;
        } else if let Some(rest) = line.strip_prefix("current_node=") {
            let node = rest.split(',').next().unwrap_or_default().trim();
            numa.current_node = Some(int(node, "current_node")?);
            seen = true;
        } else if let Some((key, value)) = line.split_once(':') {
            let value = value.trim();
            match key.trim() {
                "numa_pages_migrated" => {
                    numa.pages_migrated = Some(int(value, "numa_pages_migrated")?);
                    seen = true;
                }
                "numa_preferred_nid" => {
                    let nid: i64 = int(value, "numa_preferred_nid")?;
                    numa.preferred_node = u32::try_from(nid).ok();
                    if nid < -1 || nid > i64::from(u32::MAX) {
                        return Err(invalid("numa_preferred_nid", value, "a node id or -1"));
                    }
                    seen = true;
                }
                "total_numa_faults" => {
                    numa.total_faults = Some(int(value, "total_numa_faults")?);
                    seen = true;
                }
                _ => {}
            }
        }
    }
    Ok(seen.then_some(numa))
}

/// `node=N task_private=.. task_shared=.. group_private=.. group_shared=..`
fn node_line(rest: &str) -> Result<(u32, NodeFaults), ParseError> {
    let mut node = None;
    let mut f = NodeFaults::default();
    let mut fields = 0;
    for token in rest.split_whitespace() {
        let Some((key, value)) = token.split_once('=') else {
            return Err(invalid("numa_faults", rest, "key=value fields"));
        };
        match key {
            "node" => node = Some(int(value, "numa_faults node")?),
            "task_private" => f.task_private = int(value, "task_private")?,
            "task_shared" => f.task_shared = int(value, "task_shared")?,
            "group_private" => f.group_private = int(value, "group_private")?,
            "group_shared" => f.group_shared = int(value, "group_shared")?,
            // A field of a kernel yet to come.
            _ => continue,
        }
        fields += 1;
    }
    let node = node.ok_or(ParseError::MissingField {
        file: FILE,
        field: "numa_faults node",
    })?;
    if fields < 3 {
        return Err(invalid("numa_faults", rest, "node=N and the fault counts"));
    }
    Ok((node, f))
}

fn int<T: std::str::FromStr>(value: &str, field: &'static str) -> Result<T, ParseError> {
    value
        .parse()
        .map_err(|_| invalid(field, value, "a whole number"))
}

fn invalid(field: &'static str, value: &str, expected: &'static str) -> ParseError {
    ParseError::InvalidField {
        file: FILE,
        field,
        value: shorten(value),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `sched` in the kernel's layout (written by hand after
    /// `sched_show_numa`): a thread of a 2-node machine reading memory on
    /// node 1.
    const BALANCING: &str = "\
numa_hog (212, #threads: 3)
-------------------------------------------------------------------
se.exec_start                                :         31811.425127
nr_switches                                  :                 1735
policy                                       :                    0
prio                                         :                  120
clock-delta                                  :                  110
mm->numa_scan_seq                            :                    6
numa_pages_migrated                          :                 8192
numa_preferred_nid                           :                    1
total_numa_faults                            :                 3126
current_node=1, numa_group_id=0
numa_faults node=0 task_private=12 task_shared=0 group_private=0 group_shared=0
numa_faults node=1 task_private=1508 task_shared=43 group_private=0 group_shared=0
";

    #[test]
    fn faults_per_node_and_the_preferred_node() {
        let n = parse_sched_numa(BALANCING).unwrap().unwrap();
        assert_eq!(n.pages_migrated, Some(8192));
        assert_eq!(n.preferred_node, Some(1));
        assert_eq!(n.total_faults, Some(3126));
        assert_eq!(n.current_node, Some(1));
        assert_eq!(n.faults.len(), 2);
        assert_eq!(n.faults[&0].task(), 12);
        assert_eq!(
            n.faults[&1],
            NodeFaults {
                task_private: 1508,
                task_shared: 43,
                group_private: 0,
                group_shared: 0
            }
        );
    }

    #[test]
    fn no_preference_is_minus_one() {
        let text = "numa_preferred_nid                           :                   -1\n\
                    current_node=0, numa_group_id=0\n\
                    numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0\n";
        let n = parse_sched_numa(text).unwrap().unwrap();
        assert_eq!(n.preferred_node, None);
        assert_eq!(n.faults[&0].task(), 0);
    }

    #[test]
    fn a_kernel_without_numa_balancing_has_no_signal() {
        let text = "cat (20538, #threads: 1)\n---\nse.exec_start : 1.0\nprio : 120\n";
        assert_eq!(parse_sched_numa(text), Ok(None));
        assert_eq!(parse_sched_numa(""), Ok(None));
    }

    #[test]
    fn a_thread_name_cannot_forge_a_line() {
        // prctl(PR_SET_NAME) takes any 15 bytes, a newline too.
        let text = format!(
            "x\ncurrent_node=7 (5, #threads: 1)\n{}\n{}",
            "-".repeat(67),
            BALANCING.lines().skip(2).collect::<Vec<_>>().join("\n")
        );
        let n = parse_sched_numa(&text).unwrap().unwrap();
        assert_eq!(n.current_node, Some(1));
        let only_header = format!(
            "x\ncurrent_node=7 (5, #threads: 1)\n{}\nprio : 120\n",
            "-".repeat(67)
        );
        assert_eq!(parse_sched_numa(&only_header), Ok(None));
    }

    #[test]
    fn malformed_numa_lines_are_errors() {
        let e = parse_sched_numa("numa_faults node=x task_private=1 task_shared=0\n").unwrap_err();
        assert!(e.to_string().contains("numa_faults node"), "{e}");
        let e = parse_sched_numa("numa_faults task_private=1 task_shared=0\n").unwrap_err();
        assert!(e.to_string().contains("no numa_faults node"), "{e}");
        let e = parse_sched_numa("numa_faults node=0\n").unwrap_err();
        assert!(e.to_string().contains("fault counts"), "{e}");
        let e = parse_sched_numa("numa_preferred_nid : -7\n").unwrap_err();
        assert!(e.to_string().contains("-1"), "{e}");
        let twice =
            "numa_faults node=0 task_private=1 task_shared=0 group_private=0 group_shared=0\n";
        assert!(parse_sched_numa(&twice.repeat(2)).is_err());
    }
}
