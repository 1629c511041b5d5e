//! The oracle on workloads with more threads than CPUs whose applications
//! run one after the other (seed 000's NPB sequence): searched group by
//! group of applications that overlap in time, judged on the whole
//! workload, and as good as searching each application alone.

use numaplace_sim::Machine;
use numaplace_sim::best::best_static;
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

#[test]
fn applications_that_run_together_must_fit() {
    let mut w = numaplace_sim::scenario::builtin("npb-westmere")
        .unwrap()
        .unwrap();
    let m = Machine::preset(&w.machine).unwrap();
    for a in &mut w.apps {
        a.start_s = 0.0;
    }
    let e = best_static(&m, &w, 100, 1).unwrap_err();
    assert_eq!(
        e,
        format!(
            "{} threads do not fit 16 CPUs one per CPU, and {} of them run at the same time",
            w.threads(),
            w.threads()
        )
    );
}
