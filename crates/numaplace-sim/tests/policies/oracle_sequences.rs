//! The oracle on workloads with more threads than CPUs: whose applications
//! run one after the other (\[Rao13\]'s NPB sequence), searched group by
//! group of applications that overlap in time, judged on the whole
//! workload, and as good as searching each application alone; and whose
//! threads time-share CPUs (\[Symbiosis-Bloom\]'s pairs), the best balanced
//! assignment.

use numaplace_sim::Machine;
use numaplace_sim::oracle_search::best_static;
use numaplace_sim::run::{Driver, RunOptions, run};
use numaplace_sim::workload::Workload;

#[test]
fn a_sequence_of_applications_gets_an_oracle_per_time_group() {
    let w = numaplace_sim::scenario::builtin("npb-westmere")
        .unwrap()
        .unwrap();
    let m = Machine::preset(&w.machine).unwrap();
    assert!(w.threads() > m.topology.cpus().len());
    let best = best_static(&m, &w, 8 * 50, 1).unwrap();
    println!("{}: {:.2} s", best.method, best.runtime_s);
    assert!(
        best.method.starts_with(&format!("{} groups", w.apps.len())),
        "{}",
        best.method
    );
    // Each application alone, from time 0, with the same budget each.
    let mut alone = Vec::new();
    for a in &w.apps {
        let mut a = a.clone();
        a.start_s = 0.0;
        let one = Workload {
            apps: vec![a],
            ..w.clone()
        };
        alone.push(best_static(&m, &one, 50, 1).unwrap().runtime_s);
    }
    let mean_alone = alone.iter().sum::<f64>() / alone.len() as f64;
    println!("mean of the applications' own oracles: {mean_alone:.2} s");
    assert!(
        (best.runtime_s / mean_alone - 1.0).abs() < 0.01,
        "{:.2} s vs {mean_alone:.2} s",
        best.runtime_s
    );
    let default = run(
        &m,
        &w,
        Driver::Policy(&numaplace_policy::PolicyKind::Default),
        &RunOptions::default(),
        &mut |_| {},
    );
    assert!(best.runtime_s < default.mean_runtime_s().unwrap());
    // The binding reuses CPUs across groups: more threads than CPUs.
    let bound: usize = best.cpus.iter().map(Vec::len).sum();
    assert_eq!(bound, w.threads());
}

/// Applications that run together on more threads than CPUs time-share
/// them under any placement: the oracle then searches CPU sets per
/// application first and a CPU per thread (balanced, two threads a CPU
/// here) with what is left, every simulation within its budget.
#[test]
fn applications_that_run_together_time_share_within_the_budget() {
    let mut w = numaplace_sim::scenario::builtin("npb-westmere")
        .unwrap()
        .unwrap();
    let m = Machine::preset(&w.machine).unwrap();
    for a in &mut w.apps {
        a.start_s = 0.0;
    }
    assert_eq!(w.threads(), 32);
    let best = best_static(&m, &w, 4, 1).unwrap();
    assert!(
        best.method.contains("32 threads time-share 16 CPUs"),
        "{}",
        best.method
    );
    assert!(
        best.evaluations <= 4,
        "{}: {}",
        best.evaluations,
        best.method
    );
    assert!(best.sets.is_some(), "CPU sets first: {}", best.method);
    let best = best_static(&m, &w, 12, 1).unwrap();
    assert!(
        best.evaluations <= 12,
        "{}: {}",
        best.evaluations,
        best.method
    );
    assert!(
        best.method.contains("a CPU set per application") && best.method.contains("CPU per thread"),
        "both searched: {}",
        best.method
    );
    match &best.sets {
        Some(sets) => assert_eq!(sets.len(), w.apps.len()),
        None => {
            let mut per_cpu = vec![0; 16];
            for c in best.cpus.iter().flatten() {
                per_cpu[*c] += 1;
            }
            assert_eq!(per_cpu, vec![2; 16]);
        }
    }
    assert!(best.runtime_s.is_finite() && best.runtime_s > 0.0);
}

/// \[Symbiosis-Bloom\]'s four programs on core2duo's two CPUs: 6 balanced
/// assignments, all judged, and none of the three pairings is faster than
/// the one the oracle keeps.
#[test]
fn the_pairs_oracle_is_the_best_pairing() {
    let w = numaplace_sim::scenario::builtin("pairs-core2duo")
        .unwrap()
        .unwrap();
    let m = Machine::preset(&w.machine).unwrap();
    let best = best_static(&m, &w, 300, 1).unwrap();
    assert!(best.method.contains("6 evaluations"), "{}", best.method);
    for pairing in [[0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0]] {
        let r = run(
            &m,
            &w,
            Driver::Binding {
                name: "pairing",
                cpus: pairing.iter().map(|&c| vec![c]).collect(),
            },
            &RunOptions::default(),
            &mut |_| {},
        );
        let t = r.mean_runtime_s().unwrap();
        assert!(
            t >= best.runtime_s - 1e-9,
            "{pairing:?}: {t} < {}",
            best.runtime_s
        );
    }
}
