//! The engine's words for people: an action and its outcome, a decision
//! of the journal, the threads in scope no policy may place, the scope's
//! rules and what a policy does without a signal.

use numaplace_model::Outcome;
use numaplace_model::task::printable;
use numaplace_model::world::Current;
use numaplace_policy::Scope;
use numaplace_policy::engine::{Engine, JournalEntry, LeftAloneNote};

/// A journal entry for people: `app (pid 12): pin thread 13 from CPUs 0-7
/// to CPUs 2-3` and, on the next line, `because <reason>`; names and
/// reasons escaped.
pub fn describe_decision(e: &JournalEntry) -> String {
    let what = describe_action(&e.action, e.current.as_ref());
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

/// An action in words, as the journal's readers see it, with what it
/// changes as it was (`current`, where the entry has it): `pin thread 13
/// from CPUs 0-7 to CPUs 2-3`, `move memory to node 1 (now: node 0 512
/// MiB)`, `turn the kernel's automatic NUMA balancing off (now on)`.
pub(crate) fn describe_action(a: &numaplace_model::Action, current: Option<&Current>) -> String {
    use numaplace_model::Action;
    let memory_now = || {
        current
            .and_then(|c| c.memory.as_ref())
            .map_or_else(String::new, |m| {
                let held: Vec<String> = (m.iter().filter(|(_, b)| **b > 0))
                    .map(|(n, b)| format!("node {n} {}", super::topology::bytes(*b)))
                    .collect();
                if held.is_empty() {
                    " (now: none resident)".into()
                } else {
                    format!(" (now: {})", held.join(", "))
                }
            })
    };
    match a {
        Action::Pin { task, cpus, .. } => match current.and_then(|c| c.cpus.as_ref()) {
            Some(now) => format!("pin thread {} from CPUs {now} to CPUs {cpus}", task.tid),
            None => format!("pin thread {} to CPUs {cpus}", task.tid),
        },
        Action::MoveMemory { to_node, .. } => {
            format!("move memory to node {to_node}{}", memory_now())
        }
        Action::MoveWindow {
            to_node, address, ..
        } => format!(
            "move pages around {address:#x} to node {to_node}{}",
            memory_now()
        ),
        Action::KernelBalancing { on } => {
            let word = |on: bool| if on { "on" } else { "off" };
            let now = current.and_then(|c| c.on);
            format!(
                "turn the kernel's automatic NUMA balancing {}{}",
                word(*on),
                now.map_or_else(String::new, |n| format!(" (now {})", word(n)))
            )
        }
    }
}

/// What became of an action, in words.
pub(crate) fn describe_outcome(o: &Outcome) -> String {
    match o {
        Outcome::Done => "done".into(),
        Outcome::Pages(p) => format!("{} pages moved", p.moved),
        Outcome::NotApplied => "not applied".into(),
        Outcome::Gone => "gone".into(),
        Outcome::Refused { errno, why } => format!("refused ({errno}): {why}"),
        Outcome::Skipped { why } => format!("skipped: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use numaplace_model::{Action, TaskId};

    use super::*;

    /// Each kind of action in words with what it changes as it was, and
    /// without it where the entry has none (journals written before, a task
    /// gone).
    #[test]
    fn actions_are_described_from_what_they_change_to_what_they_propose() {
        let task = TaskId {
            tid: 11,
            start_time: 7,
        };
        let pin = Action::Pin {
            task,
            tgid: 10,
            cpus: "2-3".parse().unwrap(),
        };
        assert_eq!(describe_action(&pin, None), "pin thread 11 to CPUs 2-3");
        let memory = Current {
            memory: Some([(0, 512 << 20), (1, 0), (2, 3 << 30)].into()),
            ..Current::default()
        };
        let to_1 = Action::MoveMemory {
            process: task,
            to_node: 1,
            max_pages: None,
        };
        assert_eq!(
            describe_action(&to_1, Some(&memory)),
            "move memory to node 1 (now: node 0 512 MiB, node 2 3 GiB)"
        );
        let window = Action::MoveWindow {
            process: task,
            address: 0x7f00,
            pages_before: 1,
            pages_after: 1,
            to_node: 1,
        };
        assert_eq!(
            describe_action(&window, Some(&memory)),
            "move pages around 0x7f00 to node 1 (now: node 0 512 MiB, node 2 3 GiB)"
        );
        let off = Action::KernelBalancing { on: false };
        let on_now = Current {
            on: Some(true),
            ..Current::default()
        };
        assert_eq!(
            describe_action(&off, Some(&on_now)),
            "turn the kernel's automatic NUMA balancing off (now on)"
        );
        assert_eq!(
            describe_action(&off, None),
            "turn the kernel's automatic NUMA balancing off"
        );
    }
}
