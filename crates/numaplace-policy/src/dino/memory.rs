//! Memory that follows its threads (\[Blagodurov11\] §4): pages a thread touches on
//! another node move to the thread's node, K pages around each sampled
//! address at a time, and memory that keeps bouncing between nodes (threads
//! of one application in several domains sharing it) stops moving (§3.3.2).
//!
//! §4.1 found moving the pages around a sampled access ("sequential
//! forward-backward", K/2 before and K/2 after) saved the most remote
//! accesses, and K = 4096 a good size at the sampling rates of the
//! hardware; §4.2 samples with IBS (PEBS on Intel). Where the snapshot has
//! no sampled addresses for a thread (a host without PEBS/IBS, or a VM
//! without a PMU), the fallback moves the process's resident pages that sit
//! on other nodes, and only when all its threads are placed on one node:
//! the reason of every such move says it is the fallback.
//!
//! Memory under a policy of its own (a process that bound or interleaved
//! it) follows its threads like any other: tried, leaving it where its
//! policy put it cut DI-Migrate's mean gain over 100 generated mixes from
//! 7.8 % to 6.7 % and DINO's from 3.5 % to 2.5 % (mix:57061: DI-Migrate
//! -24.4 % against Linux with it, -2.4 % without), for one mix it fixed
//! (mix:56096, 9.6 % slower than Linux, 6.4 % without the moves).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::fmt;

use numaplace_model::{Action, Plan, Snapshot};

/// The most pages moved around one sampled address (4 GiB of 4 KiB pages).
pub const MAX_WINDOW_PAGES: u64 = 1 << 20;

/// Bytes per page (the simulator's and x86's base page).
const PAGE: u64 = 4096;

/// Where a thread is to run, for the memory that should follow it.
#[derive(Debug, Clone)]
pub struct Placed<'a> {
    /// The thread.
    pub tid: i32,
    /// Its process.
    pub tgid: i32,
    /// Kernel id of the node of the CPUs it is placed on.
    pub node: u32,
    /// For the reason: `devil thread 1234 of mcf`.
    pub who: Who<'a>,
}

/// A thread as a reason names it, written out only when a reason does (a
/// decision places every thread, but moves the memory of few).
#[derive(Debug, Clone)]
pub enum Who<'a> {
    /// Said as it is.
    Text(Cow<'a, str>),
    /// `[CLASS ]thread TID of LABEL`.
    Thread {
        /// Its class's name, where known.
        class: Option<&'static str>,
        /// The thread.
        tid: i32,
        /// Its process's name.
        label: &'a str,
    },
}

impl<'a> From<&'a str> for Who<'a> {
    fn from(s: &'a str) -> Who<'a> {
        Who::Text(Cow::Borrowed(s))
    }
}

impl From<String> for Who<'_> {
    fn from(s: String) -> Self {
        Who::Text(Cow::Owned(s))
    }
}

impl fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Who::Text(s) => f.write_str(s),
            Who::Thread {
                class: Some(class),
                tid,
                label,
            } => write!(f, "{class} thread {tid} of {label}"),
            Who::Thread {
                class: None,
                tid,
                label,
            } => write!(f, "thread {tid} of {label}"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Region {
    /// Node it was last moved to, and the round.
    node: u32,
    round: u64,
    /// Moves back and forth in quick succession so far.
    bounces: u32,
}

/// Decides the memory moves of a round and remembers what moved where.
#[derive(Debug)]
pub struct MemoryFollower {
    /// Pages in a window (K): K/2 before the sampled page, K/2 after.
    window_pages: u64,
    /// Whether ping-ponging regions are frozen (DINO) or not (DI-Migrate).
    detect_ping_pong: bool,
    /// A move back to another node within this many rounds is a bounce.
    ping_pong_rounds: u64,
    /// Bounces after which a region is left where it is.
    ping_pong_limit: u32,
    regions: HashMap<(i32, u64), Region>,
}

impl MemoryFollower {
    /// A follower that moves `window_pages` around each hot page and, with
    /// `detect_ping_pong`, stops moving a region that keeps bouncing.
    pub fn new(window_pages: u64, detect_ping_pong: bool) -> MemoryFollower {
        MemoryFollower {
            window_pages: window_pages.max(1),
            detect_ping_pong,
            ping_pong_rounds: 10,
            ping_pong_limit: 2,
            regions: HashMap::new(),
        }
    }

    /// Regions left alone because their memory bounced between nodes.
    pub fn frozen(&self) -> usize {
        self.regions
            .values()
            .filter(|r| r.bounces >= self.ping_pong_limit)
            .count()
    }

    /// Adds this round's memory moves for `placed` threads to `plan`.
    pub fn plan(&mut self, s: &Snapshot, placed: &[Placed<'_>], plan: &mut Plan) {
        let round = s.seq;
        let half = self.window_pages / 2;
        let span = self.window_pages.max(1) * PAGE;
        // Whether all of a process's threads are placed on one node (and
        // which): `None` once two differ.
        let mut one_node_of: HashMap<i32, Option<u32>> = HashMap::new();
        for p in placed {
            one_node_of
                .entry(p.tgid)
                .and_modify(|n| {
                    if *n != Some(p.node) {
                        *n = None;
                    }
                })
                .or_insert(Some(p.node));
        }
        let groups: HashMap<i32, &numaplace_model::TaskGroup> =
            s.groups.iter().map(|g| (g.pid, g)).collect();
        let mut fallback_done = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for p in placed {
            let Some(g) = groups.get(&p.tgid) else {
                continue;
            };
            let samples = s.samples.get(&p.tid).map_or(&[][..], |v| &v[..]);
            if samples.is_empty() {
                // Fallback: the process's pages on other nodes, when all its
                // threads are to run on one node.
                let one_node = one_node_of.get(&p.tgid).is_some_and(Option::is_some);
                if !one_node || fallback_done.contains(&p.tgid) {
                    continue;
                }
                // Anonymous memory only: file pages mapped by several
                // processes (libraries, the program) cannot move and would
                // be asked for again every round.
                let off: u64 = g.memory.as_ref().map_or(0, |m| {
                    m.iter()
                        .filter(|(n, _)| **n != p.node)
                        .map(|(_, b)| b.anon)
                        .sum()
                });
                if off > 0 && fallback_done.insert(p.tgid) {
                    plan.push(
                        Action::MoveMemory {
                            process: g.id(),
                            to_node: p.node,
                            max_pages: None,
                        },
                        format!(
                            "memory follows {} to node {}: {} MiB of the process is on other nodes; no sampled data addresses for it (no PEBS/IBS sampling here), so its resident pages move instead of the hot ones",
                            p.who,
                            p.node,
                            off >> 20
                        ),
                    );
                }
                continue;
            }
            for a in samples {
                let Some(node) = a.node else { continue };
                if node == p.node {
                    continue;
                }
                let key = (p.tgid, a.address / span);
                if !seen.insert(key) {
                    continue;
                }
                if self.detect_ping_pong
                    && (self.regions.get(&key)).is_some_and(|r| r.bounces >= self.ping_pong_limit)
                {
                    continue;
                }
                let bounce = self.regions.get(&key).is_some_and(|r| {
                    r.node != p.node && round.saturating_sub(r.round) <= self.ping_pong_rounds
                });
                let r = self.regions.entry(key).or_insert(Region {
                    node: p.node,
                    round,
                    bounces: 0,
                });
                if bounce {
                    r.bounces += 1;
                }
                r.node = p.node;
                r.round = round;
                let note = if self.detect_ping_pong && r.bounces >= self.ping_pong_limit {
                    "; it has bounced between nodes, so this is its last move"
                } else {
                    ""
                };
                plan.push(
                    Action::MoveWindow {
                        process: g.id(),
                        address: a.address,
                        pages_before: half,
                        pages_after: half,
                        to_node: p.node,
                    },
                    format!(
                        "memory follows {} to node {}: it touched {:#x} on node {node}; moving the {} pages around it{note}",
                        p.who, p.node, a.address, self.window_pages
                    ),
                );
            }
        }
        // Forget regions not moved for long.
        let keep = self.ping_pong_rounds * 10;
        self.regions.retain(|_, r| {
            round.saturating_sub(r.round) <= keep || r.bounces >= self.ping_pong_limit
        });
    }
}
