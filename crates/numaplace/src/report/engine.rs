//! The engine's words for people: a decision of the journal, the threads
//! in scope no policy may place, and the scope's rules.

use numaplace_model::task::printable;
use numaplace_policy::Scope;
use numaplace_policy::engine::{Engine, JournalEntry, LeftAloneNote};

/// A journal entry for people: `app (pid 12): pin thread 13 from CPUs 0-7
/// to CPUs 2-3` and, on the next line, `because <reason>`; names and
/// reasons escaped.
pub fn describe_decision(e: &JournalEntry) -> String {
    let what = crate::top_state::describe_action(&e.action, e.current.as_ref());
    if e.action.machine_wide() {
        return format!("the machine: {what}\n    because {}", printable(&e.reason));
    }
    format!(
        "{} (pid {}): {what}\n    because {}",
        printable(&e.label),
        e.pid,
        printable(&e.reason)
    )
}

/// The most processes `advise` lists as left alone; the rest are counted.
const LEFT_ALONE_SHOWN: usize = 40;

/// What `advise` says of the threads no policy may place: one line per
/// process and reason, naming the threads; empty if there are none.
pub fn describe_left_alone(notes: &[LeftAloneNote]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    // (pid, why) -> (label, tids), in pid order.
    let mut by: std::collections::BTreeMap<(i32, &str), (&str, Vec<i32>)> = Default::default();
    for n in notes {
        by.entry((n.pid, n.why.as_str()))
            .or_insert((n.label.as_str(), Vec::new()))
            .1
            .push(n.tid);
    }
    let mut out = format!(
        "Left alone: {} thread{} of processes in scope no policy may place:\n",
        notes.len(),
        if notes.len() == 1 { "" } else { "s" }
    );
    for ((pid, why), (label, tids)) in by.iter().take(LEFT_ALONE_SHOWN) {
        let shown: Vec<String> = tids.iter().take(8).map(|t| t.to_string()).collect();
        let more = tids.len().saturating_sub(8);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {} (pid {pid}), thread{} {}{more}: {why}\n",
            printable(label),
            if tids.len() == 1 { "" } else { "s" },
            shown.join(", ")
        ));
    }
    if by.len() > LEFT_ALONE_SHOWN {
        out.push_str(&format!(
            "  ... and {} more process and reason pairs\n",
            by.len() - LEFT_ALONE_SHOWN
        ));
    }
    out
}

/// The scope's rules as the log names them.
pub fn describe_scope(s: &Scope) -> String {
    let mut parts = Vec::new();
    if !s.pids.is_empty() {
        parts.push(format!("pids {:?}", s.pids));
    }
    if !s.comms.is_empty() {
        parts.push(format!("comms {:?}", s.comms));
    }
    if !s.cgroups.is_empty() {
        parts.push(format!("cgroups {:?}", s.cgroups));
    }
    if s.vms {
        parts.push("VMs".into());
    }
    parts.join(", ")
}

/// What the policy says it does without each of the `missing` signals, in
/// their order, one entry per thing said: the names of the signals it said
/// it for (`A and B`) and what it said.
pub fn without_signals(
    engine: &Engine,
    missing: impl IntoIterator<Item = numaplace_policy::Signal>,
) -> Vec<(String, String)> {
    let mut said: Vec<(Vec<&str>, String)> = Vec::new();
    for signal in missing {
        let Some(what) = engine.without(signal) else {
            continue;
        };
        match said.iter_mut().find(|(_, w)| *w == what) {
            Some((names, _)) => names.push(signal.name()),
            None => said.push((vec![signal.name()], what)),
        }
    }
    said.into_iter()
        .map(|(names, what)| (names.join(" and "), what))
        .collect()
}
