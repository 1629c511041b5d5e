//! The oracle's search on small mixes: CPU sets against a CPU per thread,
//! the budget, candidates stopped early.

use super::judge::score;
use super::oversubscribed::search_shared;
use super::*;

/// Six threads on four CPUs: a short application of three threads and
/// a long one of three. With a CPU per thread (balanced: two CPUs
/// doubled) either a long thread shares a CPU with a short one or two
/// short ones share, and a short thread alone finishes early and
/// leaves its CPU idle while the doubled ones go on at half speed; the
/// simulated Linux within a CPU set moves a doubled thread there.
fn oversubscribed() -> (Machine, Workload) {
    let text = r#"
machine = "synthetic:pack:2 numa:1 l3:1(size=4MiB) core:2 pu:1"
max_seconds = 60
[[app]]
name = "long"
threads = 3
instructions = 6e9
uncore_pki = 1
llc_mpki = 0.1
working_set = "1MiB"
[[app]]
name = "short"
threads = 3
instructions = 1.5e9
uncore_pki = 1
llc_mpki = 0.1
working_set = "1MiB"
"#;
    let w = crate::scenario::parse(text, "oversubscribed.toml").unwrap();
    (Machine::preset(&w.machine).unwrap(), w)
}

#[test]
fn cpu_sets_beat_a_cpu_per_thread_on_an_oversubscribed_mix() {
    let (m, w) = oversubscribed();
    let judge = Judge::new(&m, &RunOptions::default());
    let shared = search_shared(&judge, &w, 60, 2, true, f64::INFINITY).unwrap();
    let best = best_static(&m, &w, 60, 2).unwrap();
    assert!(best.sets.is_some(), "{}", best.method);
    assert!(
        best.runtime_s < 0.97 * shared.runtime_s,
        "CPU sets {} s, a CPU per thread {} s: {}",
        best.runtime_s,
        shared.runtime_s,
        best.method
    );
    // The oracle's placement run again gives its score, and bounds
    // Linux's default on the same world.
    let again = run_best(&m, &w, &best, &RunOptions::default());
    assert_eq!(score(&again), best.runtime_s);
    let linux = run(
        &m,
        &w,
        Driver::Policy(&numaplace_policy::PolicyKind::Default),
        &RunOptions::default(),
        &mut |_| {},
    );
    assert!(best.runtime_s <= score(&linux) * 1.001, "{}", best.method);
    // static holds it: every thread of an application on its set.
    let pins = static_params(&m, &w, &best).pins;
    assert_eq!(pins.len(), 6);
    assert!(pins.iter().all(|p| p.cpus.len() >= 2), "{pins:?}");
}

#[test]
fn the_budget_bounds_every_simulation_of_the_search() {
    let (m, over) = oversubscribed();
    let fits = crate::scenario::builtin("default").unwrap().unwrap();
    let westmere = Machine::preset(&fits.machine).unwrap();
    // A sequence of applications: time groups, searched alone.
    let mut seq = over.clone();
    seq.apps[1].start_s = 30.0;
    for (machine, w) in [(&m, &over), (&westmere, &fits), (&m, &seq)] {
        let mut last = 0;
        for budget in [1, 3, 8, 30] {
            let b = best_static(machine, w, budget, 2).unwrap();
            assert!(
                b.evaluations <= budget.max(1),
                "{}: budget {budget}, {} simulations: {}",
                w.name,
                b.evaluations,
                b.method
            );
            assert!(b.evaluations >= last, "{}", b.method);
            last = b.evaluations;
        }
        assert!(last >= 3, "{}: the budget is used: {last}", w.name);
    }
}

#[test]
fn a_candidate_that_cannot_win_is_stopped_early() {
    let (m, w) = oversubscribed();
    let judge = Judge::new(&m, &RunOptions::default());
    let cpus = vec![vec![0, 0, 1], vec![1, 2, 3]];
    let full = judge.binding(&w, cpus.clone(), f64::INFINITY);
    assert!(full < f64::MAX);
    let opts = RunOptions {
        stop_at_or_above: Some(full / 2.0),
        ..RunOptions::default()
    };
    let driver = || Driver::Binding {
        name: "oracle",
        cpus: cpus.clone(),
    };
    let stopped = run(&m, &w, driver(), &opts, &mut |_| {});
    let whole = run(&m, &w, driver(), &RunOptions::default(), &mut |_| {});
    assert!(!stopped.finished && whole.finished);
    assert!(
        stopped.makespan_s < whole.makespan_s,
        "{} {}",
        stopped.makespan_s,
        whole.makespan_s
    );
    assert_eq!(score(&stopped), f64::MAX);
    // A bound above the result changes nothing.
    assert_eq!(judge.binding(&w, cpus, full * 1.01), full);
}
