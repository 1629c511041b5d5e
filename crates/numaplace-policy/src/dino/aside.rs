//! Where \[Blagodurov11\]'s premises do not hold, DI and DINO step aside (issue 16,
//! "do no harm"). Each rule is a pure function of what a round saw.
//!
//! * **A crowded machine.** \[Blagodurov11\] runs one thread per core (§2.1, §3.2:
//!   16 applications on 16 cores). With more runnable threads than CPUs,
//!   pinning threads to cores stops the kernel's work-conserving balancing
//!   (a thread that finishes leaves its core idle while pinned threads
//!   queue elsewhere until the next round), and §3.3.3 leaves fine-grained
//!   time sharing to the kernel anyway. [`crowding`] says when.
//! * **Memory that does not follow.** DI-Plain moves threads and leaves
//!   their memory (§3.1); §3.2 shows what that costs on NUMA machines (up
//!   to 36 % slower). A thread whose memory sits on one node with CPUs is
//!   *anchored* there ([`home`]): DI-Plain does not place it on another
//!   node. A thread whose memory is spread (interleaved, or on a node
//!   without CPUs, equally far from every core) loses nothing by moving,
//!   so DI-Plain's premise holds for it. A thread's own accesses say
//!   where its memory is best: sampled addresses, else the kernel's NUMA
//!   hinting faults where it balances (a VM without a PMU), else its
//!   process's pages ([`home`], [`Evidence`]).

use std::collections::BTreeMap;

use numaplace_model::{AddressSample, NodeMemory, NumaFaults, Snapshot, Topology};

/// A thread is anchored to a node holding at least this share of its
/// memory (sampled addresses, or its process's resident memory).
pub const ANCHOR_SHARE: f64 = 0.6;

/// Sampled addresses needed to judge one thread's memory by them.
pub const MIN_SAMPLES: usize = 8;

/// The lower end of the 95 % Wilson score interval of a share of
/// `hits` in `n` draws.
pub fn wilson_lower(hits: f64, n: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    let z = 1.96_f64;
    let p = hits / n;
    let z2n = z * z / n;
    let centre = p + z2n / 2.0;
    let spread = z * (p * (1.0 - p) / n + z2n / (4.0 * n)).sqrt();
    (centre - spread) / (1.0 + z2n)
}

/// Runnable threads on the machine and its CPUs, when there are more
/// threads than CPUs.
pub fn crowded(s: &Snapshot, t: &Topology) -> Option<(usize, usize)> {
    let cpus = t.span().len();
    let runnable = s.tasks.iter().filter(|k| k.state == 'R').count();
    (runnable > cpus).then_some((runnable, cpus))
}

/// Runnable threads on the machine against its CPUs, when there are more
/// threads: the reason to step aside, for the journal.
pub fn crowding(s: &Snapshot, t: &Topology) -> Option<String> {
    crowded(s, t).map(|(runnable, cpus)| {
        format!(
            "{runnable} runnable threads on {cpus} CPUs: [Blagodurov11] places one thread per core \
             (§3.2), and pinning a crowded machine stops the kernel balancing time-shared \
             CPUs (§3.3.3 leaves that to the kernel), so threads are left to Linux"
        )
    })
}

/// Where a thread's memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// At least [`ANCHOR_SHARE`] of it on this node, which has CPUs.
    Anchored(u32),
    /// Spread over nodes, or mostly on a node without CPUs.
    Spread,
}

/// Hinting faults (decayed counts) a thread needs before its faults are
/// taken as where its memory is.
pub const MIN_FAULTS: u64 = 16;

/// Which reading said where a thread's memory is; every decision that
/// used it names it in its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// Its own sampled data addresses (PEBS, IBS, or the simulator's).
    Samples,
    /// Its own NUMA hinting faults per node, from `/proc/PID/task/TID/sched`
    /// while the kernel balances (where its accesses went lately).
    HintingFaults,
    /// Its process's anonymous memory per node (`numa_maps`).
    ProcessMemory,
}

impl Evidence {
    /// For a reason: "memory on node 1 by {describe}".
    pub fn describe(self) -> &'static str {
        match self {
            Evidence::Samples => "its sampled addresses",
            Evidence::HintingFaults => "its NUMA hinting faults",
            Evidence::ProcessMemory => "its process's resident memory",
        }
    }
}

/// A thread's memory home, from the first of these it has: its sampled
/// addresses (at least [`MIN_SAMPLES`] with a node), its hinting faults
/// (at least [`MIN_FAULTS`]: a host or VM without PEBS/IBS but with the
/// kernel's NUMA balancing on), its process's anonymous memory per node.
/// The first two are the thread's own accesses; the last is where its
/// process's pages are, which for a process whose threads each first-touch
/// their own data is the wrong answer for some of them. `None`: nothing is
/// known.
pub fn home(
    samples: &[AddressSample],
    faults: Option<&NumaFaults>,
    process: Option<&BTreeMap<u32, NodeMemory>>,
    cpu_nodes: &[u32],
) -> Option<(Home, Evidence)> {
    let mut per_node: BTreeMap<u32, f64> = BTreeMap::new();
    let known: Vec<u32> = samples.iter().filter_map(|a| a.node).collect();
    let evidence = if known.len() >= MIN_SAMPLES {
        for n in known {
            *per_node.entry(n).or_default() += 1.0;
        }
        Evidence::Samples
    } else if let Some(f) = faults.filter(|f| f.total() >= MIN_FAULTS) {
        for (&n, &count) in &f.memory {
            *per_node.entry(n).or_default() += count as f64;
        }
        Evidence::HintingFaults
    } else {
        for (&n, m) in process? {
            *per_node.entry(n).or_default() += m.anon as f64;
        }
        Evidence::ProcessMemory
    };
    let total: f64 = per_node.values().sum();
    if total <= 0.0 {
        return None;
    }
    let (&node, &most) = per_node.iter().max_by(|a, b| a.1.total_cmp(b.1))?;
    // Sampled addresses are a sample: 32 of an interleaved thread's land
    // 60 % on one node in a fifth of the rounds, so the share must also
    // be above half beyond the sample's noise (the lower end of its 95 %
    // Wilson interval). Measured: without this test, symbiosis sent about
    // ten threads of interleaved programs to the other node every round
    // (mix:53057, 11,600 thread moves an hour).
    let sure = evidence != Evidence::Samples || wilson_lower(most, total) > 0.5;
    let home = if most / total >= ANCHOR_SHARE && sure && cpu_nodes.contains(&node) {
        Home::Anchored(node)
    } else {
        Home::Spread
    };
    Some((home, evidence))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(on: &[(u32, usize)]) -> Vec<AddressSample> {
        on.iter()
            .flat_map(|&(node, n)| {
                (0..n).map(move |i| AddressSample {
                    address: 0x1000 * i as u64,
                    node: Some(node),
                    write: false,
                })
            })
            .collect()
    }

    /// 20 of 32 samples on one node (62 %) is what an interleaved thread
    /// shows a fifth of the time: not anchored; 26 of 32 is; the share of
    /// process memory (bytes, not a sample) needs only its 60 %.
    #[test]
    fn a_sampled_share_anchors_only_beyond_its_noise() {
        let nodes = [0, 1];
        let noisy = home(&samples(&[(0, 20), (1, 12)]), None, None, &nodes);
        assert_eq!(noisy, Some((Home::Spread, Evidence::Samples)));
        let sure = home(&samples(&[(0, 26), (1, 6)]), None, None, &nodes);
        assert_eq!(sure, Some((Home::Anchored(0), Evidence::Samples)));
        let mem = |anon| NodeMemory {
            anon,
            ..NodeMemory::default()
        };
        let process = BTreeMap::from([(0, mem(62)), (1, mem(38))]);
        let by_process = home(&[], None, Some(&process), &nodes);
        assert_eq!(
            by_process,
            Some((Home::Anchored(0), Evidence::ProcessMemory))
        );
        assert!(wilson_lower(16.0, 32.0) < 0.5 && wilson_lower(32.0, 32.0) > 0.85);
        assert_eq!(wilson_lower(0.0, 0.0), 0.0);
    }
}
