//! The live view's wire format: what a running daemon serves as `GET
//! /state` and `numaplace top --connect` draws ([`TopState`]), and the
//! reader of such an answer ([`parse_answer`]). A library of its own so
//! that the reader, which takes whatever a peer on the daemon's address
//! sends, can be fuzzed (`fuzz/fuzz_targets/top_state.rs`).
//!
//! Everything a process chose (names, VM names) is escaped with
//! [`printable`] and cut to [`MAX_LABEL`] characters where the daemon
//! builds the state, and the lists are capped ([`MAX_GROUPS`],
//! [`MAX_DECISIONS`]); the reader holds a peer's answer to the same rules,
//! whoever sent it.

use std::collections::BTreeMap;

use numaplace_model::task::printable;
use serde::{Deserialize, Serialize};

/// The format of [`TopState`]; a reader refuses another.
pub const FORMAT: u32 = 1;
/// Groups at most: those in scope first, then the busiest others.
pub const MAX_GROUPS: usize = 200;
/// Decisions kept, newest last.
pub const MAX_DECISIONS: usize = 64;
/// Characters of a name kept (after escaping).
pub const MAX_LABEL: usize = 64;
/// Characters of a reason kept (after escaping).
pub const MAX_REASON: usize = 600;

/// One frame of `top`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopState {
    /// [`FORMAT`], the version of this layout.
    pub format: u32,
    /// The name of the policy the daemon runs (`auto`, `dino`, ...).
    pub policy: String,
    /// Whether actions are carried out (`false`: a dry run, or `top`'s own
    /// advice, which applies nothing).
    pub applies: bool,
    /// The daemon's round number, counted from 1 at its start.
    pub round: u64,
    /// When the round's snapshot was taken, in nanoseconds since the Unix
    /// epoch.
    pub time_unix_ns: u64,
    /// Nanoseconds the round's CPU times cover; 0 in the first round.
    pub interval_ns: u64,
    /// One row per NUMA node the daemon sees, by node number.
    pub nodes: Vec<NodeRow>,
    /// Memory bandwidth per resctrl L3 domain, where resctrl measures it.
    pub bandwidth: Vec<BandwidthRow>,
    /// Processes and VMs, at most [`MAX_GROUPS`] of them.
    pub groups: Vec<GroupRow>,
    /// Groups seen but left out ([`MAX_GROUPS`]).
    pub groups_left_out: usize,
    /// The latest decisions of the policy, at most [`MAX_DECISIONS`], newest
    /// last.
    pub decisions: Vec<DecisionRow>,
}

/// One NUMA node in a frame: its CPUs, how busy they were, its memory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRow {
    /// The kernel's node number.
    pub id: u32,
    /// Its CPUs, as a list (`0-3,8-11`).
    pub cpus: String,
    /// How many CPUs that list holds.
    pub cpu_count: usize,
    /// CPUs' worth of time the threads seen ran on it over the interval;
    /// `None` in the first round (no interval yet).
    pub busy_cpus: Option<f64>,
    /// Bytes, from the node's meminfo; `None` where it was not read.
    pub mem_total: Option<u64>,
    /// Bytes free on the node, from the same meminfo; `None` where it was
    /// not read.
    pub mem_free: Option<u64>,
    /// Page allocations per second over the interval, from the node's
    /// `numastat`; `None` in the first round and where not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocations: Option<NodeAllocations>,
}

/// A node's page allocations per second over a round (its `numastat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeAllocations {
    /// For tasks running on the node (`local_node`).
    pub local_per_s: f64,
    /// For tasks running on other nodes, which reach them remotely
    /// (`other_node`).
    pub remote_per_s: f64,
    /// Meant for the node but served by another, the node short of free
    /// memory (`numa_foreign`).
    pub turned_away_per_s: f64,
}

/// Memory bandwidth measured in one resctrl L3 domain over a round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthRow {
    /// The resctrl L3 domain.
    pub domain: u32,
    /// Bytes per second of all monitoring groups over the interval.
    pub bytes_per_s: f64,
}

/// One process or VM in a frame: where its threads ran, its memory, how
/// the policy sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupRow {
    /// Its process id (a VM's: its QEMU process's).
    pub pid: i32,
    /// The process's or VM's name, escaped and cut. Untrusted.
    pub label: String,
    /// `process` or `vm`.
    pub kind: String,
    /// Whether the policy may act on it.
    pub in_scope: bool,
    /// How many threads it had in the round's snapshot.
    pub threads: usize,
    /// Threads by the node of the CPU they last ran on.
    pub running: BTreeMap<u32, usize>,
    /// The CPUs its threads last ran on.
    pub cpus: String,
    /// CPUs' worth of time it ran over the interval.
    pub busy_cpus: Option<f64>,
    /// Bytes per node (`numa_maps`), where its memory was read.
    pub memory: Option<BTreeMap<u32, u64>>,
    /// What the policy classed it as, where the policy classes groups.
    pub class: Option<String>,
    /// The per-process signals the round had for it that the policy reads
    /// (`hw counters` or `sw counters`, `samples N`, `hinting faults N`,
    /// `numa_maps`).
    pub signals: Vec<String>,
    /// Its threads no policy may place, by reason: `2 chose-cpus`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_alone: Vec<String>,
}

/// One decision of the policy, as the daemon's journal records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRow {
    /// The round it was made in.
    pub round: u64,
    /// That round's snapshot time, in nanoseconds since the Unix epoch.
    pub time_unix_ns: u64,
    /// The process (or VM's QEMU process) it acts on.
    pub pid: i32,
    /// That process's or VM's name, escaped and cut. Untrusted.
    pub label: String,
    /// The action, in words (`pin thread 12 from CPUs 0-7 to CPUs 0-3`).
    pub action: String,
    /// Why the policy decided it, in its own words, escaped and cut to
    /// [`MAX_REASON`] characters.
    pub reason: String,
    /// What became of it (`done`, `not applied`, `refused: ...`).
    pub outcome: String,
}

/// Nodes at most: Linux's node ids are 0..=1023
/// (`numaplace_linux::topology::MAX_NODE_ID`).
pub const MAX_NODES: usize = 1024;

/// The most bytes of a daemon's answer read: far above what the daemon
/// builds (its lists are capped), far below what could hurt.
pub const MAX_ANSWER_BYTES: usize = 4 << 20;
/// `text` escaped and cut to `max` characters (an ellipsis says so).
pub fn bounded(text: &str, max: usize) -> String {
    let p = printable(text);
    if p.chars().count() <= max {
        return p;
    }
    let mut s: String = p.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// The frame in an HTTP answer to `GET /state`.
pub fn parse_answer(answer: &[u8]) -> Result<TopState, String> {
    if answer.is_empty() {
        return Err("it closed the connection without an answer".into());
    }
    let head_end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("not an HTTP answer: {}", excerpt(answer)))?;
    let head = String::from_utf8_lossy(&answer[..head_end]);
    let status = head.lines().next().unwrap_or("");
    let mut parts = status.split_whitespace();
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(format!("not an HTTP answer: {}", excerpt(answer)));
    };
    if !version.starts_with("HTTP/") {
        return Err(format!("not an HTTP answer: {}", excerpt(answer)));
    }
    let body = &answer[head_end + 4..];
    match code {
        "200" => {}
        "404" => {
            return Err(
                "it serves no /state (a numaplace older than `top`?); upgrade the daemon".into(),
            );
        }
        _ => return Err(format!("{}: {}", excerpt(status.as_bytes()), excerpt(body))),
    }
    let mut value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        format!(
            "its answer is not numaplace's state ({e}): {}",
            excerpt(body)
        )
    })?;
    defang(&mut value);
    let mut state: TopState = serde_json::from_value(value).map_err(|e| {
        format!(
            "its answer is not numaplace's state ({e}): {}",
            excerpt(body)
        )
    })?;
    cap(&mut state);
    if state.format != FORMAT {
        return Err(format!(
            "its state is format {}, this top reads {FORMAT}; use the same numaplace version",
            state.format
        ));
    }
    Ok(state)
}

/// What a peer sends is drawn on the user's terminal: whoever holds the
/// port (the daemon, or anyone while it is down) must not reach it. Every
/// string is escaped as the daemon escapes its own names (control
/// characters, bidirectional and invisible ones) and cut to the daemon's
/// longest ([`MAX_REASON`](crate::MAX_REASON)); a backslash is
/// kept as it is, since the daemon's own escapes are made of them.
fn defang(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            let safe = crate::bounded(s, crate::MAX_REASON);
            *s = safe.replace("\\\\", "\\");
        }
        Value::Array(a) => a.iter_mut().for_each(defang),
        Value::Object(o) => o.values_mut().for_each(defang),
        _ => {}
    }
}

/// Cuts a peer's lists to what the daemon sends at most: groups and
/// decisions by the daemon's limits, nodes by Linux's.
fn cap(state: &mut TopState) {
    use crate::{MAX_DECISIONS, MAX_GROUPS};
    state.groups.truncate(MAX_GROUPS);
    let gone = state.decisions.len().saturating_sub(MAX_DECISIONS);
    state.decisions.drain(..gone);
    state.nodes.truncate(crate::MAX_NODES);
    state.bandwidth.truncate(crate::MAX_NODES);
}

/// The start of what came, escaped, for a one-line error.
fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]);
    let s = crate::bounded(text.trim(), 48);
    if s.is_empty() {
        "(empty)".into()
    } else {
        format!("\"{s}\"")
    }
}

#[cfg(test)]
mod tests;
