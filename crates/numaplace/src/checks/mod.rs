//! What works on this machine: every signal the policies read and every
//! interface numaplace acts through, where each comes from here, whether
//! it works, who needs it, and the one thing to do where it does not.
//! `numaplace doctor` prints the rows; `run` and `advise` say in one line
//! ([`short`]) what does not work.
//!
//! It asks the same readers the daemon uses (the collector with every
//! option on, the kernel's files, one harmless call of each syscall the
//! engine makes), so what it says is what `run` would meet.

mod actuation;
mod caps;
pub mod numastat;
mod readiness;
mod render;
mod signals;
mod sources;

use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_policy::Signal;
use numaplace_policy::registry::PolicyKind;
use serde::Serialize;

#[cfg(test)]
use crate::config::Config;
use actuation::actuation;
pub use readiness::{NOT_READY, Reads, exit_status};
pub use render::{render, short};
use signals::{libpfm, signal_check};
use sources::{hinting_faults, memory_per_node, reading_threads, topology};

/// Whether something works here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Works.
    Ok,
    /// Works in part (some of its events, only one's own tasks).
    Partial,
    /// Could work, but is switched off.
    Off,
    /// Not here.
    Missing,
}

impl Status {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Partial => "partial",
            Status::Off => "off",
            Status::Missing => "MISSING",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// A short stable name for programs and the one-line form
    /// (`llc-miss-rate`, `samples`, `pinning`).
    pub id: String,
    /// What: a signal a policy reads, or an interface the engine uses.
    pub name: String,
    /// Whether it works here: ok, partly, switched off or missing.
    pub status: Status,
    /// Where it comes from here: events and their encodings, files,
    /// syscalls; or why it is not there.
    pub source: String,
    /// The one thing to do where it does not work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The policies that read it (empty: the engine itself, or every one).
    pub used_by: Vec<String>,
}

/// A check as `doctor` reports it: with the capabilities its feature
/// needs, and whether the configured policy needs it.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The check itself.
    #[serde(flatten)]
    pub check: Check,
    /// The capabilities the feature needs and whether numaplace has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caps: Option<caps::CapCheck>,
    /// Whether the configured policy (or the engine running it) reads it:
    /// the exit status is 0 only when every needed row is ok.
    pub needed: bool,
}

/// The checks as rows: each with its capability check (where its feature
/// needs one; a row that works only for numaplace's own tasks without
/// them is partial) and whether `reads` needs it.
pub fn rows(root: &SysRoot, checks: Vec<Check>, reads: &Reads) -> Vec<Row> {
    let sets = caps::sets(root);
    let paranoid = caps::paranoid(root);
    let mut unchecked_said = false;
    checks
        .into_iter()
        .map(|mut check| {
            let need = caps::need_of(&check.id, paranoid);
            let caps = match (&sets, need) {
                (Ok(sets), Some(need)) => Some(need.check(sets)),
                (Err(why), Some(_)) if !unchecked_said => {
                    unchecked_said = true;
                    check.source = format!(
                        "{}; capabilities not checked here or below: {why}",
                        check.source
                    );
                    None
                }
                _ => None,
            };
            if caps.as_ref().is_some_and(|c| !c.ok()) && check.status == Status::Ok {
                check.status = Status::Partial;
            }
            let needed = reads.needs(&check);
            Row {
                check,
                caps,
                needed,
            }
        })
        .collect()
}

/// Every check, on the machine under `root`.
pub fn checks(root: &SysRoot) -> Vec<Check> {
    let mut out = vec![topology(root)];
    let collector = Collector::new(
        root.clone(),
        CollectOptions {
            memory: true,
            counters: true,
            machine: true,
            samples: true,
        },
    );
    // What can be counted, sampled and read is decided when the collector
    // is made (on numaplace's own thread); nothing is collected, so no
    // thread of the machine gets a counter for this.
    out.push(libpfm());
    for signal in Signal::ALL {
        out.push(signal_check(&collector, signal));
    }
    out.push(memory_per_node(root));
    out.push(reading_threads(root));
    out.push(hinting_faults(root));
    out.push(numastat::check(root));
    out.extend(actuation(root));
    out
}

/// The policies that say what they do without `signal`: those that read it.
pub(crate) fn readers(signal: Signal) -> Vec<String> {
    PolicyKind::NAMES
        .iter()
        .filter(|name| {
            PolicyKind::from_name(name)
                .map(|k| k.build().without(signal).is_some())
                .unwrap_or(false)
        })
        .map(|n| n.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_form_names_what_does_not_work() {
        let c = |id: &str, status| Check {
            id: id.into(),
            name: format!("the {id}"),
            status,
            source: String::new(),
            fix: None,
            used_by: Vec::new(),
        };
        assert_eq!(short(&[c("topology", Status::Ok)]), None);
        let s = short(&[c("topology", Status::Ok), c("samples", Status::Missing)]).unwrap();
        assert!(s.starts_with("doctor: samples missing ("), "{s}");
    }

    /// On this machine: every check has a source, the topology and the
    /// actuation syscalls work, and whatever does not work says what to
    /// do (its own `to do`, or its capability line's).
    #[test]
    fn every_check_on_this_machine_says_where_it_comes_from() {
        let root = SysRoot::host();
        let reads = Reads::of(&Config::default());
        let rows = rows(&root, checks(&root), &reads);
        assert!(rows.len() >= 13, "{rows:?}");
        let ids: std::collections::BTreeSet<&str> =
            rows.iter().map(|r| r.check.id.as_str()).collect();
        assert_eq!(ids.len(), rows.len(), "one id each: {rows:?}");
        for r in &rows {
            assert!(!r.check.source.is_empty(), "{r:?}");
            if r.check.status != Status::Ok && r.check.status != Status::Partial {
                let cap_fix = r.caps.as_ref().and_then(|c| c.fix());
                assert!(r.check.fix.is_some() || cap_fix.is_some(), "{r:?}");
            }
        }
        let by = |n: &str| &rows.iter().find(|r| r.check.name == n).unwrap().check;
        assert_eq!(by("topology").status, Status::Ok);
        assert_ne!(by("pinning threads").status, Status::Missing);
        assert_ne!(by("moving memory").status, Status::Missing);
        assert!(
            by(Signal::UncorePenalty.name())
                .used_by
                .contains(&"brm".to_string())
        );
        // Every row whose feature needs a capability carries its check.
        for id in [
            "task-iterator",
            "pinning",
            "moving-memory",
            "kernel-balancing-switch",
        ] {
            let r = rows.iter().find(|r| r.check.id == id).unwrap();
            assert!(r.caps.is_some(), "{r:?}");
        }
        assert!(
            rows.iter()
                .find(|r| r.check.id == "topology")
                .unwrap()
                .needed
        );
    }
}
