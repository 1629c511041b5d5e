//! Where \[Bae12\]'s premise does not hold, `adaptive-mapping` does not vote
//! (issue 16, "do no harm"): the group holds the local mapping §6.2 starts
//! it in, next to its memory, where that gives every vcore a core of its
//! own, and is left to Linux where it would double vcores up on hardware
//! threads (nothing then says that pays: mix:41, 16 vcores held on two
//! packages of 4 cores × 2, ran 54 % slower than under Linux).
//!
//! \[Bae12\] chooses between two mappings of one
//! 8-vcore VM on a two-socket machine of 4 cores × 2 hardware threads per
//! socket (§2, Fig. 2; §6: "Each of them runs 8 threads in a guest with 8
//! virtual cores"): local puts the 8 vcores on one socket's 8 hardware
//! threads, two per core; interleaved puts them on 8 cores of both sockets,
//! one per core. Its performance models (§5.2, and the built-in ones that
//! `numaplace train` fits on the simulator's westmere-2s the same way) learn
//! the run-time ratio of exactly that pair. Two things they learned do not
//! carry over:
//!
//! * **Interleaving that frees no core.** Where the local mapping already
//!   gives every vcore a core of its own (a package with as many idle cores
//!   as vcores, or a machine without SMT), interleaving no longer frees the
//!   shared cores that make it pay for class 1 in §6; what is left is
//!   sending vcores away from the memory first touch put next to them. On
//!   generated mixes the models still voted interleaved there (ratios
//!   0.44-0.64, even for class 0) and such groups ran up to 32 % slower
//!   than under Linux (mix:1028: 8 vcores on an 8-core package, no SMT).
//! * **More than two sockets.** The interleaved mapping spreads over every
//!   socket (§1), and on two sockets half the vcores stay beside the
//!   memory; over N sockets only 1/N do, a case the models never saw
//!   (mix:1030, barcelona-4s: a memory-bound VM interleaved over four
//!   sockets ran 70 % slower).
//! * **A group larger than a socket.** The local mapping of a group that
//!   does not fit one socket's free hardware threads already spans
//!   several: the pair the models learned (one socket against two) is not
//!   there to choose between (mix:156: 11 threads on westmere-2s, voted
//!   interleaved with their memory first touched on one node, ran 14 %
//!   slower).
//!
//! The rules apply to the objectives that vote with the performance model
//! (performance and energy); the power objective votes with the power
//! model of §5.3 (Fig. 7), which is about cores and hardware threads in
//! use whatever the machine, and is kept.

use super::mapping::Layout;
use super::params::Objective;

/// Sockets in \[Bae12\]'s testbed (§2, Fig. 2).
pub const PAPER_SOCKETS: usize = 2;

/// Why the performance model does not speak for this pair of layouts of
/// `vcores` vcores, for the journal; `None` when the premise holds.
pub fn fails(
    objective: Objective,
    local: &Layout,
    inter: &Layout,
    vcores: usize,
) -> Option<String> {
    if objective == Objective::Power {
        return None;
    }
    if inter.sockets.len() > PAPER_SOCKETS {
        return Some(format!(
            "the interleaved mapping would spread its {vcores} vcores over {} sockets, leaving \
             only 1/{} of them beside memory first touch put on one: [Bae12]'s models were \
             learned on {PAPER_SOCKETS} sockets (§2), where half stay there, so their vote does \
             not apply",
            inter.sockets.len(),
            inter.sockets.len()
        ));
    }
    if local.sockets.len() > 1 {
        return Some(format!(
            "its {vcores} vcores do not fit one socket's free hardware threads, so the local \
             mapping already spans {} sockets: [Bae12]'s models learned one socket's hardware \
             threads against both sockets' cores (§2, §6: 8 vcores on a socket of 4 cores × 2), \
             and neither mapping is that here, so their vote does not apply",
            local.sockets.len()
        ));
    }
    if local.cores.len() >= inter.cores.len() {
        return Some(format!(
            "the local mapping already gives each of the {vcores} vcores a core of its own \
             ({} cores either way): [Bae12]'s models learned what interleaving gains by freeing \
             the cores local shares between hardware threads (§6: 8 vcores on 4 cores × 2), and \
             here it would only move vcores away from their memory, so their vote does not \
             apply",
            local.cores.len()
        ));
    }
    None
}

/// Why a group first seen with none of its memory resident yet is not
/// placed this round; `None` when it may be.
///
/// Placed in a local mapping that doubles vcores up on one socket's
/// hardware threads, every page the group touches first lands on that
/// socket's node; the vote that follows (interleaved for class 1) then
/// sends half the vcores a hop away from all of it, and holding the
/// local mapping or leaving the group to Linux leaves one node serving
/// the whole group (mix:186: a memory-bound 4-vcore VM ran 39 % slower
/// than under Linux, mix:79 +14 %). \[Bae12\] starts a VM local beside
/// memory already there (§6.2; its VMs' memory sits on one socket, §2).
/// Left to Linux for a round, the group's first touch says where its
/// memory is, and [`memory_elsewhere`] decides from that.
///
/// The same where the local mapping spans several sockets (see the
/// comment in the body). A group placed before any of its memory was
/// resident (each vcore on a core of its own, on one socket) is judged
/// by [`memory_elsewhere`] once its memory shows: an interleave or bind
/// policy can put it away from the sockets the local mapping chose
/// blind (mix:145, barcelona-4s: 7 threads held on
/// two sockets, their memory interleaved over four nodes, ran 12.5 %
/// slower than under Linux).
pub fn too_early(
    objective: Objective,
    share: Option<f64>,
    memory_known: bool,
    local: &Layout,
    vcores: usize,
    shared_writes: impl FnOnce() -> Option<f64>,
) -> Option<String> {
    if objective == Objective::Power || share.is_some() || !memory_known {
        return None;
    }
    if local.cores.len() < vcores {
        return Some(format!(
            "none of its memory is resident yet and the local mapping would double its {vcores} \
             vcores up on {} cores, so first touch would put all of it on one node: not placed \
             until its memory shows where Linux's first touch put it",
            local.cores.len()
        ));
    }
    // On one socket with a core for every vcore, first touch puts all
    // of the group's memory on that socket's node, behind one memory
    // controller. That pays where its vcores write pages they share: the
    // lines they pass stay in one socket (\[Bae12\] §5.2's class 2, what
    // the local mapping is for). Where its probe shows them writing
    // almost none (under §5.2's 1 %), nothing is gained by it, and Linux
    // spreads a busy group's threads, each first-touching its pages
    // beside it (mix:54085: 4 threads streaming 730 MiB of their own,
    // placed local on barcelona-4s, ran 44 % slower than under Linux).
    // Measured: waiting also for groups that share, or whose pages
    // were not seen, lost most of the policy's gain (mean -4.5 % -> -1.6 %
    // over 100 generated mixes; threads sharing data ran up to 45 %
    // faster held on one socket).
    if local.sockets.len() == 1 {
        return shared_writes().filter(|&w| w < LITTLE_SHARING).map(|w| {
            format!(
                "none of its memory is resident yet and its vcores write almost no pages they \
                 share ({:.2} % of their stores' pages, under [Bae12] §5.2's {:.0} %), so \
                 holding its {vcores} vcores on socket {} gains nothing and first touch would \
                 put all of its memory behind that socket's memory controller: not placed \
                 until its memory shows where Linux's first touch put it",
                w * 100.0,
                LITTLE_SHARING * 100.0,
                local.sockets[0]
            )
        });
    }
    // Spread over several sockets, the mapping is next to the memory
    // only if the memory is spread like it ([`memory_lopsided`]): memory
    // bound to one node, placed blind, left half the vcores a link away
    // from all of it, and released once it showed, they stayed where the
    // pins had left them (mix:7017: +9.3 % against Linux).
    (local.sockets.len() > 1).then(|| {
        format!(
            "none of its memory is resident yet and the local mapping would spread its {vcores} \
             vcores over sockets {:?}, next to its memory only if the memory is spread like \
             them: not placed until its memory shows where it lies",
            local.sockets
        )
    })
}

/// Below this share of pages written by several vcores, a group's
/// vcores pass almost no lines between them: \[Bae12\] §5.2's class-1
/// threshold (1 %), the paper's line between groups that gain from one
/// socket's caches and those that do not.
pub const LITTLE_SHARING: f64 = 0.01;

/// The least share of a group's resident memory the local mapping's
/// sockets must hold for the local mapping to be "next to its memory".
pub const LOCAL_MEMORY_SHARE: f64 = 0.9;

/// Why a group first seen with `share` of its memory on the local
/// mapping's sockets is left to Linux; `None` when the memory is there
/// (or none is resident yet: it will be first touched where §6.2's local
/// mapping puts the vcores).
///
/// \[Bae12\] maps vcores and leaves guest memory where it is ("we have not
/// yet considered the mappings of guest memory to physical memory", §7);
/// its local mapping is next to the memory because the testbed's memory
/// sits on one socket (§2: node interleaving off). A group that ran under
/// Linux before this policy first saw it has first-touched its memory on
/// the nodes Linux spread its threads over, and an interleave or bind
/// policy can do the same: neither mapping is then next to its memory
/// (local moves every vcore onto one socket, interleaved deals them with no
/// regard for which vcore's pages are where), so the group is left where
/// Linux keeps its threads, beside their pages (mix:1028: 8 vcores whose
/// memory Linux had spread over both sockets ran 37 % slower held local,
/// 32 % slower interleaved).
pub fn memory_elsewhere(share: Option<f64>, sockets: &[usize]) -> Option<String> {
    let share = share?;
    (share < LOCAL_MEMORY_SHARE).then(|| {
        format!(
            "only {:.0} % of its memory is on the local mapping's socket{} {sockets:?} \
             (at least {:.0} % wanted): [Bae12]'s local mapping is next to memory on one \
             socket and it does not place memory (§7), so neither mapping is next to this \
             group's pages; left to Linux, which keeps threads beside the pages they touched",
            share * 100.0,
            if sockets.len() == 1 { "" } else { "s" },
            LOCAL_MEMORY_SHARE * 100.0
        )
    })
}

/// Why a group whose local mapping spans several sockets is left to
/// Linux because its memory sits on only some of them: `shares`, the
/// share of its resident memory on each socket of the local mapping (in
/// `sockets`' order; [`super::mapping::Sockets`]). `None` while none is
/// resident, or when every such socket holds at least half its even part.
///
/// \[Bae12\]'s local mapping is one socket (§2): every vcore beside the
/// memory. Spread over two or more packages (8 vcores on barcelona-4s's
/// 4-core sockets), it is next to the memory only if the memory is spread
/// like the vcores, as first touch under the mapping puts it. Memory bound
/// to one node (an operator's `numatune`, a bind policy) leaves the vcores
/// of the other packages all reaching it over one link: mix:7017, an
/// 8-vcore VM with its memory on node 1, held on packages 0 and 1 ran
/// 14.9 % slower than under Linux, which spreads the vcores over four
/// links (issue 16's bound is 5 %).
pub fn memory_lopsided(shares: Option<&[f64]>, sockets: &[usize]) -> Option<String> {
    let shares = shares?;
    if sockets.len() < 2 || shares.len() != sockets.len() {
        return None;
    }
    let least = 0.5 / sockets.len() as f64;
    let (i, low) = (shares.iter().copied().enumerate()).min_by(|a, b| a.1.total_cmp(&b.1))?;
    (low < least).then(|| {
        format!(
            "the local mapping spans sockets {sockets:?} and socket {} holds only {:.0} % of \
             its memory (at least {:.0} % wanted): its vcores there would reach all of it over \
             one link ([Bae12]'s local mapping is one socket, next to all of the memory); left \
             to Linux",
            sockets[i],
            low * 100.0,
            least * 100.0
        )
    })
}

/// Why no group is placed on a crowded machine (as many runnable threads
/// as CPUs, or more); `None` when a CPU is left idle.
///
/// \[Bae12\] runs one 8-vcore VM on the 16 hardware threads of its testbed
/// (§2, §6): its mappings pin every vcore to a CPU of its own beside idle
/// ones. On a machine with more runnable threads than CPUs, a pinned vcore
/// cannot be moved off a CPU that other threads share, and the kernel's
/// balancing of the time-shared CPUs stops where the pins are (mix:1062,
/// barcelona-4s: 14 threads of one process held on 14 of the 16 cores
/// beside six single-thread programs, 14.6 % slower than under Linux).
/// With exactly as many, no CPU is idle, and the mapping's block of CPUs
/// pushes the other programs off the package where their memory is
/// (mix:54006: an 11-vcore VM held on a package and a half beside five
/// single-thread programs, 14.5 % slower than under Linux).
/// The power objective packs whatever the load, as its model does.
pub fn crowding(s: &numaplace_model::Snapshot, t: &numaplace_model::Topology) -> Option<String> {
    let cpus = t.span().len();
    let runnable = s.tasks.iter().filter(|k| k.state == 'R').count();
    (runnable >= cpus).then(|| {
        format!(
            "{runnable} runnable threads on {cpus} CPUs: [Bae12] pins one VM's vcores beside \
             idle CPUs (§2, §6), and pins on a machine with no idle CPU push other programs \
             off their memory's package or stop the kernel balancing time-shared CPUs, so \
             the group is left to Linux while the machine is crowded"
        )
    })
}
