//! `doctor`'s row for the memory events the kernel counts in software, so
//! they need no PMU and count in virtual machines: each node's `numastat`
//! (what numad-like and auto rank nodes by where they have it) and the
//! NUMA lines of `/proc/vmstat`. Besides the row, doctor shows the
//! counters since boot and, read twice over its sampling interval, their
//! rates (`--json`: a `numastat` object on the row).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use numaplace_linux::SysRoot;
use numaplace_linux::numastat::{read_numastat, read_vmstat_numa};
use numaplace_model::memory_events::VmNumaRates;
use numaplace_model::{NumaStat, NumaStatRates, VmNumaStat};
use serde::Serialize;

use super::{Check, Row, Status};
use crate::duration::parse_duration;
use crate::error::InputError;

/// The row's id, which the JSON's `numastat` object goes with.
const ID: &str = "numastat";

/// The policies that read it.
fn used_by() -> Vec<String> {
    vec!["numad-like".into(), "auto".into()]
}

/// The row: whether every online node's `numastat` reads, from where.
pub(crate) fn check(root: &SysRoot) -> Check {
    let dir = root.join("sys/devices/system/node");
    match read_numastat(root) {
        Ok(nodes) => {
            let vmstat = match read_vmstat_numa(root) {
                Ok(v) if v.numa_hint_faults.is_none() => {
                    "; /proc/vmstat has no hinting-fault counters (no CONFIG_NUMA_BALANCING)"
                }
                Ok(_) => "; hinting faults and migrations from /proc/vmstat",
                Err(_) => "; /proc/vmstat could not be read",
            };
            Check {
                id: ID.into(),
                name: "allocations per node (numastat)".into(),
                status: Status::Ok,
                source: format!(
                    "{}/nodeN/numastat of {} node{} (counted in software: no PMU needed, \
                     works in VMs){vmstat}",
                    dir.display(),
                    nodes.len(),
                    if nodes.len() == 1 { "" } else { "s" }
                ),
                fix: None,
                used_by: used_by(),
            }
        }
        Err(e) => Check {
            id: ID.into(),
            name: "allocations per node (numastat)".into(),
            status: Status::Missing,
            source: e.to_string(),
            fix: Some(
                "a kernel built with CONFIG_NUMA (every major distribution's is); in a \
                 container, mount the host's /sys"
                    .into(),
            ),
            used_by: used_by(),
        },
    }
}

/// The most `--interval` may be.
const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// `--interval`, checked: 0 to `MAX_INTERVAL`.
pub fn interval(text: &str) -> Result<Duration, InputError> {
    let d = parse_duration(text, "--interval").map_err(InputError)?;
    if d > MAX_INTERVAL {
        return Err(InputError(format!(
            "--interval {text:?}: at most 60s (how long doctor samples the numastat counters; 0 \
             for none)"
        )));
    }
    Ok(d)
}

/// The counters since boot and, where read twice, per second between.
#[derive(Debug, Clone, Serialize)]
pub struct Counted<C, R> {
    /// The counters as read, counted since boot.
    pub since_boot: C,
    /// Their rates between the two readings; absent where read once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_second: Option<R>,
}

/// What doctor read of the counters: the JSON's `numastat` object.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Seconds between the two readings the rates are over; absent: read
    /// once (`--interval 0`, or the second reading failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// By node (kernel id).
    pub nodes: BTreeMap<u32, Counted<NumaStat, NumaStatRates>>,
    /// The machine-wide NUMA counters of `/proc/vmstat`, where read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vmstat: Option<Counted<VmNumaStat, VmNumaRates>>,
    /// Why the nodes' counters, or their second reading, could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// The first reading, taken as doctor starts, so that the time its checks
/// take counts toward the interval.
pub struct Sampling {
    root: SysRoot,
    at: Instant,
    nodes: Result<BTreeMap<u32, NumaStat>, String>,
    vmstat: Option<VmNumaStat>,
}

impl Sampling {
    /// Takes the first reading under `root`, now.
    pub fn start(root: &SysRoot) -> Sampling {
        Sampling {
            root: root.clone(),
            at: Instant::now(),
            nodes: read_numastat(root).map_err(|e| e.to_string()),
            vmstat: read_vmstat_numa(root).ok(),
        }
    }

    /// Reads again once `interval` has passed since the first reading (not
    /// at all for zero) and reports both.
    pub fn finish(self, interval: Duration) -> Report {
        let first = match self.nodes {
            Ok(n) => n,
            Err(why) => {
                return Report {
                    interval_s: None,
                    nodes: BTreeMap::new(),
                    vmstat: None,
                    missing: Some(why),
                };
            }
        };
        if interval.is_zero() {
            return report(first, self.vmstat, None);
        }
        std::thread::sleep(interval.saturating_sub(self.at.elapsed()));
        let ns = self.at.elapsed().as_nanos() as u64;
        match read_numastat(&self.root) {
            Ok(now) => {
                let vm = read_vmstat_numa(&self.root).ok();
                let mut r = report(now.clone(), vm, Some(ns));
                for (n, c) in &mut r.nodes {
                    c.per_second =
                        (first.get(n)).and_then(|before| c.since_boot.since(before).per_second(ns));
                }
                if let (Some(c), Some(before)) = (&mut r.vmstat, self.vmstat) {
                    c.per_second = c.since_boot.since(&before).per_second(ns);
                }
                r
            }
            Err(e) => Report {
                missing: Some(format!("second reading: {e}")),
                ..report(first, self.vmstat, None)
            },
        }
    }
}

/// One reading as a report; `interval_ns` where a second one follows.
fn report(
    nodes: BTreeMap<u32, NumaStat>,
    vm: Option<VmNumaStat>,
    interval_ns: Option<u64>,
) -> Report {
    let counted = |since_boot| Counted {
        since_boot,
        per_second: None,
    };
    Report {
        interval_s: interval_ns.map(|ns| ns as f64 / 1e9),
        nodes: nodes.into_iter().map(|(n, c)| (n, counted(c))).collect(),
        vmstat: vm.map(|since_boot| Counted {
            since_boot,
            per_second: None,
        }),
        missing: None,
    }
}

/// The rows as `--json` prints them: each as it is, the numastat row with
/// the report as its `numastat` object.
pub fn json_rows<'a>(rows: &'a [Row], report: &'a Report) -> Vec<JsonRow<'a>> {
    rows.iter()
        .map(|row| JsonRow {
            row,
            numastat: (row.check.id == ID).then_some(report),
        })
        .collect()
}

/// A row of `doctor --json`: the row, and for the numastat row what was
/// read of the counters.
#[derive(Serialize)]
pub struct JsonRow<'a> {
    #[serde(flatten)]
    row: &'a Row,
    #[serde(skip_serializing_if = "Option::is_none")]
    numastat: Option<&'a Report>,
}

/// `name count [rate/s]` for each counter the kernel has (a count), the
/// rate where measured.
fn counters_line(cells: &[(&str, Option<u64>, Option<f64>)]) -> String {
    let cells: Vec<String> = (cells.iter())
        .filter_map(|&(name, count, rate)| {
            let count = count?;
            Some(match rate {
                Some(x) => format!("{name} {count} [{x:.0}/s]"),
                None => format!("{name} {count}"),
            })
        })
        .collect();
    cells.join("  ")
}

/// The report for people, after the table: a line per node, one for
/// vmstat; each counter since boot, and per second where measured.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    if let Some(why) = &r.missing {
        let _ = writeln!(out, "numastat: not read: {why}");
    }
    if r.nodes.is_empty() {
        return out;
    }
    let over = match r.interval_s {
        Some(s) => format!(" [per second over {s:.2} s]"),
        None => " (read once: no rates)".to_string(),
    };
    let _ = writeln!(out, "\nallocations per node (numastat), since boot{over}:");
    for (n, c) in &r.nodes {
        let (s, p) = (&c.since_boot, c.per_second.as_ref());
        let rate = |f: fn(&NumaStatRates) -> f64| p.map(f);
        let line = counters_line(&[
            ("numa_hit", Some(s.numa_hit), rate(|p| p.numa_hit)),
            ("numa_miss", Some(s.numa_miss), rate(|p| p.numa_miss)),
            (
                "numa_foreign",
                Some(s.numa_foreign),
                rate(|p| p.numa_foreign),
            ),
            (
                "interleave_hit",
                Some(s.interleave_hit),
                rate(|p| p.interleave_hit),
            ),
            ("local_node", Some(s.local_node), rate(|p| p.local_node)),
            ("other_node", Some(s.other_node), rate(|p| p.other_node)),
        ]);
        let _ = writeln!(out, "  node {n}: {line}");
    }
    if let Some(v) = &r.vmstat {
        let (s, p) = (&v.since_boot, v.per_second.as_ref());
        let rate = |f: fn(&VmNumaRates) -> Option<f64>| p.and_then(f);
        let line = counters_line(&[
            (
                "numa_hint_faults",
                s.numa_hint_faults,
                rate(|p| p.numa_hint_faults),
            ),
            (
                "numa_hint_faults_local",
                s.numa_hint_faults_local,
                rate(|p| p.numa_hint_faults_local),
            ),
            (
                "numa_pages_migrated",
                s.numa_pages_migrated,
                rate(|p| p.numa_pages_migrated),
            ),
            (
                "pgmigrate_success",
                s.pgmigrate_success,
                rate(|p| p.pgmigrate_success),
            ),
        ]);
        if !line.is_empty() {
            let _ = writeln!(out, "  /proc/vmstat: {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// A tree with two nodes' `numastat`; `hits` per node.
    fn tree(hits: [u64; 2]) -> (tempfile::TempDir, SysRoot) {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("sys/devices/system/node");
        fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        write_nodes(&node, hits);
        let root = SysRoot::new(dir.path()).unwrap();
        (dir, root)
    }

    fn write_nodes(node: &std::path::Path, hits: [u64; 2]) {
        fs::create_dir_all(node).unwrap();
        fs::write(node.join("online"), "0-1\n").unwrap();
        for (n, hit) in hits.iter().enumerate() {
            fs::create_dir_all(node.join(format!("node{n}"))).unwrap();
            let text = format!(
                "numa_hit {hit}\nnuma_miss 0\nnuma_foreign {n}\ninterleave_hit 0\n\
                 local_node {hit}\nother_node 0\n"
            );
            fs::write(node.join(format!("node{n}/numastat")), text).unwrap();
        }
    }

    /// numad-like and auto read it where it is there, but no policy needs
    /// it to place: its absence does not fail doctor's readiness probe.
    #[test]
    fn no_policy_needs_it_to_be_ready() {
        let (dir, root) = tree([1, 2]);
        fs::remove_dir_all(dir.path().join("sys/devices/system/node")).unwrap();
        let row = check(&root);
        assert!(row.used_by.contains(&"auto".to_string()));
        for policy in ["auto", "numad-like"] {
            let config = crate::config::Config {
                policy: numaplace_policy::registry::PolicyKind::from_name(policy).unwrap(),
                ..Default::default()
            };
            assert!(
                !super::super::readiness::Reads::of(&config).needs(&row),
                "{policy}"
            );
        }
    }

    #[test]
    fn the_interval_is_checked() {
        assert_eq!(interval("0").unwrap(), Duration::ZERO);
        assert_eq!(interval("250ms").unwrap(), Duration::from_millis(250));
        assert!(interval("2m").unwrap_err().0.contains("at most 60s"));
        assert!(interval("soon").unwrap_err().0.contains("--interval"));
    }

    #[test]
    fn the_row_and_the_json_object_of_a_two_node_tree() {
        let (_dir, root) = tree([100, 7]);
        let row = check(&root);
        assert_eq!(row.status, Status::Ok, "{row:?}");
        assert!(row.source.contains("of 2 nodes"), "{}", row.source);
        assert!(
            row.source.contains("/proc/vmstat could not be read"),
            "{}",
            row.source
        );
        let report = Sampling::start(&root).finish(Duration::ZERO);
        let rows = [Row {
            check: row,
            caps: None,
            needed: false,
        }];
        let json = serde_json::to_value(json_rows(&rows, &report)).unwrap();
        let nodes = &json[0]["numastat"]["nodes"];
        assert_eq!(json[0]["id"], "numastat");
        assert_eq!(nodes["0"]["since_boot"]["numa_hit"], 100);
        assert_eq!(nodes["1"]["since_boot"]["numa_foreign"], 1);
        assert!(nodes["0"].get("per_second").is_none(), "read once: {json}");
        assert!(render(&report).contains("read once"), "{}", render(&report));
    }

    /// Read twice, the counts between are rates; what cannot be read says
    /// which file and what to do.
    #[test]
    fn rates_between_two_readings_and_a_missing_tree() {
        let (dir, root) = tree([100, 7]);
        let first = Sampling::start(&root);
        write_nodes(&dir.path().join("sys/devices/system/node"), [300, 7]);
        let r = first.finish(Duration::from_millis(1));
        let secs = r.interval_s.unwrap();
        let rate = r.nodes[&0].per_second.unwrap().numa_hit;
        assert!((rate * secs - 200.0).abs() < 1e-6, "{rate} over {secs}");
        assert_eq!(r.nodes[&1].per_second.unwrap().numa_hit, 0.0);
        assert!(
            render(&r).contains("node 0: numa_hit 300 ["),
            "{}",
            render(&r)
        );

        fs::remove_dir_all(dir.path().join("sys/devices/system/node")).unwrap();
        let row = check(&root);
        assert_eq!(row.status, Status::Missing);
        assert!(row.source.contains("without CONFIG_NUMA"), "{}", row.source);
        assert!(row.fix.as_deref().unwrap().contains("CONFIG_NUMA"));
        let r = Sampling::start(&root).finish(Duration::from_millis(1));
        assert!(r.nodes.is_empty() && r.missing.is_some());
        assert!(
            render(&r).starts_with("numastat: not read: "),
            "{}",
            render(&r)
        );
    }
}
