//! Confinement is not a choice (issue 32): an application its cgroup's
//! cpuset confines (`cpus_by = "cgroup"`: libvirt's domain, a pod in the
//! kubelet's shared pool) is placed within those CPUs by every policy, and
//! never outside them; one that chose its CPUs itself (`taskset`) is left
//! alone.
//!
//! Over generated mixes with random confinements: every pin any policy
//! asks for a thread of a confined application lies within its cpuset (the
//! engine refuses one that does not, so a refusal for it fails too), and
//! the policies do place such threads (the check is not vacuous).

use numaplace_model::{Action, CpuSet, Outcome};
use numaplace_policy::PolicyKind;
use numaplace_sim::rng::Rng;
use numaplace_sim::run::{Driver, RunOptions, run};
use numaplace_sim::world::comm;
use numaplace_sim::{AppKind, Machine, Workload, generate, scenario};
use proptest::prelude::*;

/// Every policy that pins threads.
const POLICIES: &[&str] = &[
    "numad-like",
    "auto",
    "dino",
    "di-plain",
    "di-migrate",
    "brm",
    "adaptive-mapping",
    "symbiosis",
];

/// Mix `seed`, cut to `seconds`, with some applications confined by a
/// cgroup to random CPUs (one node's, or a random run of CPUs, enough for
/// their threads): (the workload, its machine, per confined application
/// its label in the journal and its CPUs as kernel ids).
fn confined_mix(seed: u64, pick: u64, seconds: f64) -> (Workload, Machine, Vec<(String, CpuSet)>) {
    let text = generate::mix(seed).text;
    let mut w = scenario::parse(&text, "mix.toml").expect("a generated mix parses");
    let m = Machine::preset(&w.machine).expect("its machine");
    let t = &m.topology;
    let ncpu = t.cpus().len();
    let mut r = Rng::new(pick);
    let mut confined = Vec::new();
    for a in &mut w.apps {
        if a.cpus.is_some() || r.below(2) == 0 {
            continue;
        }
        let threads = a.threads as usize;
        // An application with as many threads as the machine has CPUs (or
        // more: oversubscribed mixes) is not confined here: no smaller
        // cpuset holds its threads.
        if threads >= ncpu {
            continue;
        }
        // One node's CPUs where it fits one, else a run of CPUs.
        let nodes: Vec<&numaplace_model::Node> = (t.nodes().iter())
            .filter(|n| n.span.len() >= threads)
            .collect();
        let dense: CpuSet = if !nodes.is_empty() && r.below(2) == 0 {
            let n = nodes[r.below(nodes.len())];
            (t.cpus().iter().enumerate())
                .filter(|(_, c)| n.span.contains(c.os_id))
                .map(|(d, _)| d as u32)
                .collect()
        } else {
            let len = threads.max(1) + r.below(ncpu - threads.max(1) + 1);
            let start = r.below(ncpu - len + 1);
            (start as u32..(start + len) as u32).collect()
        };
        if dense.len() < threads || dense.len() == ncpu {
            continue;
        }
        let kernel: CpuSet = dense.iter().map(|d| t.cpus()[d as usize].os_id).collect();
        a.cpus = Some(dense);
        a.cpus_by_cgroup = true;
        // What the journal calls it (the process's label).
        let label = match a.kind {
            AppKind::Vm => format!("vm:{}", a.name),
            AppKind::Process => comm(&a.name),
        };
        confined.push((label, kernel));
    }
    w.max_seconds = w.max_seconds.min(seconds);
    (w, m, confined)
}

/// Runs `policy` on the mix; (pins of confined threads carried out,
/// violations: each a line saying what left a confinement).
fn check(
    w: &Workload,
    m: &Machine,
    confined: &[(String, CpuSet)],
    policy: &str,
) -> (usize, Vec<String>) {
    let kind = PolicyKind::from_name(policy).unwrap();
    let mut entries = Vec::new();
    run(
        m,
        w,
        Driver::Policy(&kind),
        &RunOptions {
            seed: 1,
            ..RunOptions::default()
        },
        &mut |e| entries.push(e.clone()),
    );
    let (mut placed, mut bad) = (0, Vec::new());
    for e in &entries {
        let Action::Pin { cpus, .. } = &e.action else {
            continue;
        };
        let Some((_, within)) = confined.iter().find(|(name, _)| *name == e.label) else {
            continue;
        };
        if !cpus.is_subset(within) {
            bad.push(format!(
                "{policy}: {} pinned to {cpus} outside its cgroup's {within}: {}",
                e.label, e.reason
            ));
        }
        match &e.outcome {
            Outcome::Done => placed += 1,
            Outcome::Skipped { why } if why.contains("its cgroup confines") => {
                bad.push(format!("{policy}: {}: {why}", e.label));
            }
            _ => {}
        }
    }
    (placed, bad)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn no_policy_places_a_thread_outside_its_cgroups_cpus(seed in 0u64..1_000_000, pick: u64) {
        let (w, m, confined) = confined_mix(seed, pick, 30.0);
        prop_assume!(!confined.is_empty());
        for policy in POLICIES {
            let (_, bad) = check(&w, &m, &confined, policy);
            prop_assert!(bad.is_empty(), "mix:{seed} pick {pick}:\n{}", bad.join("\n"));
        }
    }
}

/// The property is not vacuous: on mixes with confined applications, the
/// policies do pin their threads (within their CPUs), and a confined
/// application is placed the way an unconfined one would be.
#[test]
fn confined_applications_are_placed_within_their_cpus() {
    let mut placed = 0;
    let mut tried = 0;
    for seed in 0..40u64 {
        let (w, m, confined) = confined_mix(seed, seed.wrapping_mul(0x9e37_79b9), 20.0);
        if confined.is_empty() {
            continue;
        }
        tried += 1;
        for policy in ["numad-like", "dino"] {
            let (n, bad) = check(&w, &m, &confined, policy);
            assert!(bad.is_empty(), "mix:{seed}:\n{}", bad.join("\n"));
            placed += n;
        }
        if tried == 8 {
            break;
        }
    }
    assert!(tried >= 4, "only {tried} mixes had a confined application");
    assert!(
        placed > 0,
        "no policy pinned a thread of a confined application on {tried} mixes: the property holds vacuously"
    );
}
