//! Same seed, same result, bit for bit: a run (with its trace) and a
//! comparison are the same whenever they are repeated and whatever the
//! number of workers; and a different seed gives a different run of the
//! simulated Linux, so the checks are not vacuous.

use numaplace_policy::PolicyKind;
use numaplace_sim::compare::{CompareOptions, compare};
use numaplace_sim::run::{Driver, RunOptions, run};
use numaplace_sim::{Machine, RunResult, Workload, scenario};

fn load(name: &str) -> (Workload, Machine) {
    let w = scenario::builtin(name)
        .unwrap_or_else(|| panic!("no built-in scenario {name}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let m = Machine::preset(&w.machine).unwrap();
    (w, m)
}

fn once(w: &Workload, m: &Machine, policy: &str, seed: u64) -> RunResult {
    let kind = PolicyKind::from_name(policy).unwrap();
    let mut journal = Vec::new();
    let mut r = run(
        m,
        w,
        Driver::Policy(&kind),
        &RunOptions {
            seed,
            trace: true,
            ..RunOptions::default()
        },
        &mut |e| journal.push(serde_json::to_string(e).unwrap()),
    );
    // The journal is part of what must repeat: fold it into the result's
    // name so one string comparison covers both.
    r.policy = format!("{}\n{}", r.policy, journal.join("\n"));
    r
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap()
}

#[test]
fn same_seed_same_run() {
    for name in [scenario::DEFAULT, "spec-barcelona"] {
        let (w, m) = load(name);
        for policy in ["default", "numad-like"] {
            for seed in [0, 7] {
                let a = once(&w, &m, policy, seed);
                let b = once(&w, &m, policy, seed);
                assert!(a.trace.as_ref().is_some_and(|t| !t.times.is_empty()));
                assert!(a.finished, "{name} {policy} seed {seed} did not finish");
                if policy == "numad-like" {
                    assert!(
                        a.policy.lines().count() > 1,
                        "{name}: numad-like took no action, so its journal checks nothing"
                    );
                }
                let (ja, jb) = (json(&a), json(&b));
                assert!(
                    ja == jb,
                    "{name}, policy {policy}, seed {seed}: two runs differ (JSON {} vs {} bytes)",
                    ja.len(),
                    jb.len()
                );
                // Bit for bit, not only as JSON prints it.
                assert_eq!(a.makespan_s.to_bits(), b.makespan_s.to_bits());
                assert_eq!(a, b);
            }
        }
    }
}

#[test]
fn different_seeds_differ() {
    let (w, m) = load(scenario::DEFAULT);
    let runs: Vec<RunResult> = (0..3)
        .map(|seed| {
            let mut r = once(&w, &m, "default", seed);
            // Only the seed field would differ trivially.
            r.seed = 0;
            r
        })
        .collect();
    let texts: Vec<String> = runs.iter().map(json).collect();
    assert_ne!(texts[0], texts[1], "seeds 0 and 1 give the same run");
    assert_ne!(texts[0], texts[2], "seeds 0 and 2 give the same run");
    assert_ne!(texts[1], texts[2], "seeds 1 and 2 give the same run");
    // Not only the trace: the outcome itself.
    assert!(
        runs[0].runs != runs[1].runs || runs[0].makespan_s != runs[1].makespan_s,
        "seeds 0 and 1 differ only in the trace"
    );
}

#[test]
fn compare_does_not_depend_on_workers() {
    let (w, m) = load(scenario::DEFAULT);
    let opts = |workers| CompareOptions {
        policies: vec![
            PolicyKind::from_name("default").unwrap(),
            PolicyKind::from_name("numad-like").unwrap(),
            PolicyKind::from_name("autonuma").unwrap(),
        ],
        seeds: (0..3).collect(),
        oracle: true,
        // Enough for a search, small for a debug build.
        oracle_budget: 12,
        interval: None,
        workers,
        numa_balancing: None,
        memory_mover: Default::default(),
        manage_kernel_balancing: true,
        mismatch: None,
    };
    let one = compare(&m, &w, &opts(1));
    let two = compare(&m, &w, &opts(2));
    let two_again = compare(&m, &w, &opts(2));
    let four = compare(&m, &w, &opts(4));
    assert_eq!(
        one.policies
            .iter()
            .map(|p| p.policy.as_str())
            .collect::<Vec<_>>(),
        ["default", "numad-like", "autonuma", "oracle"]
    );
    let kernels: Vec<bool> = one.policies.iter().map(|p| p.numa_balancing).collect();
    assert_eq!(kernels, [false, false, true, false]);
    assert!(one.examples.iter().all(|r| r.trace.is_some()));
    let j = json(&one);
    assert!(j == json(&two), "compare with 2 workers differs from 1");
    assert!(
        j == json(&two_again),
        "compare with 2 workers differs run to run"
    );
    assert!(j == json(&four), "compare with 4 workers differs from 1");
    assert_eq!(one, two);

    // The comparison's example runs are the runs `simulate` gives.
    let (w2, m2) = load(scenario::DEFAULT);
    let kind = PolicyKind::from_name("numad-like").unwrap();
    let alone = run(
        &m2,
        &w2,
        Driver::Policy(&kind),
        &RunOptions {
            seed: 0,
            trace: true,
            ..RunOptions::default()
        },
        &mut |_| {},
    );
    assert!(json(&alone) == json(&one.examples[1]));
}
