//! Every policy on one scenario over the same seeds, and the oracle's
//! placement as one more row (`numaplace compare`): the runs of
//! [`crate::run`] side by side, each policy's summary against `default`'s
//! and the oracle's.

use std::time::Duration;

use numaplace_policy::PolicyKind;

use crate::machine::Machine;
use crate::outcome::{Comparison, PolicySummary, RunResult};
use crate::run::{Driver, RunOptions, mismatch, parallel, run, summarise};
use crate::workload::Workload;

/// How to compare.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The policies compared, each run on every seed.
    pub policies: Vec<PolicyKind>,
    /// The seeds.
    pub seeds: Vec<u64>,
    /// Run the oracle's static placement as one more row.
    pub oracle: bool,
    /// Evaluations the oracle may spend.
    pub oracle_budget: usize,
    /// Time between rounds; each policy's default when `None`.
    pub interval: Option<Duration>,
    /// Runs at once (threads).
    pub workers: usize,
    /// The kernel the policies other than the two yardsticks run on
    /// ([`crate::run::numa_balancing`]).
    pub numa_balancing: Option<bool>,
    /// Who moves memory while that kernel balances.
    pub memory_mover: numaplace_policy::engine::MemoryMover,
    /// Whether policies may turn the kernel's balancing on or off
    /// ([`RunOptions::manage_kernel_balancing`]).
    pub manage_kernel_balancing: bool,
    /// Each seed's world drawn within ± this many percent of the machine
    /// the policies are told ([`RunOptions::mismatch`]); `None`: the
    /// scenario's `mismatch_percent`.
    pub mismatch: Option<f64>,
}

/// What to say when a policy's mean beats the oracle's by more than 1 %:
/// the search fell short, and gaps against it bound nothing.
pub fn oracle_shortfall(policies: &[PolicySummary]) -> Option<String> {
    let beaten: Vec<String> = policies
        .iter()
        .filter(|p| p.policy != "oracle" && p.vs_oracle_percent.is_some_and(|v| v < -1.0))
        .map(|p| {
            format!(
                "{} by {:.1} %",
                p.policy,
                -p.vs_oracle_percent.unwrap_or(0.0)
            )
        })
        .collect();
    (!beaten.is_empty()).then(|| {
        format!(
            "the oracle is not a bound here: faster than its placement are {} (so `vs oracle` \
             says not a bound); its search fell short (raise --oracle-budget), or the mix favours \
             a placement that changes over time (applications that come and go or change phase)",
            beaten.join(", ")
        )
    })
}

/// Every policy on one scenario over the same seeds.
pub fn compare(machine: &Machine, workload: &Workload, opts: &CompareOptions) -> Comparison {
    let mut jobs = Vec::new();
    for (pi, _) in opts.policies.iter().enumerate() {
        for (si, &seed) in opts.seeds.iter().enumerate() {
            jobs.push((pi, si, seed));
        }
    }
    let results = parallel(jobs, opts.workers, |(pi, si, seed)| {
        let o = RunOptions {
            seed,
            interval: opts.interval,
            trace: si == 0,
            numa_balancing: opts.numa_balancing,
            memory_mover: opts.memory_mover,
            manage_kernel_balancing: opts.manage_kernel_balancing,
            mismatch: opts.mismatch,
            ..RunOptions::default()
        };
        run(
            machine,
            workload,
            Driver::Policy(&opts.policies[pi]),
            &o,
            &mut |_| {},
        )
    });
    let mut by_policy: Vec<(String, Vec<RunResult>)> = opts
        .policies
        .iter()
        .map(|k| (k.name().to_string(), Vec::new()))
        .collect();
    for (i, r) in results.into_iter().enumerate() {
        by_policy[i / opts.seeds.len()].1.push(r);
    }
    let mut oracle_note = None;
    if opts.oracle {
        // Under a mismatch the oracle searches in the world of the first
        // seed (the truth, not what the policies are told) and its
        // placement runs in each seed's world, as the policies do.
        let world = RunOptions {
            seed: opts.seeds.first().copied().unwrap_or(0),
            mismatch: opts.mismatch,
            ..RunOptions::default()
        };
        let drawn = mismatch(workload, &world);
        match crate::oracle_search::best_static_in(
            machine,
            workload,
            opts.oracle_budget,
            opts.workers,
            &world,
        ) {
            Ok(best) => {
                let mut note = format!(
                    "{} ({} simulations, budget {})",
                    best.method, best.evaluations, opts.oracle_budget
                );
                if let Some(p) = drawn {
                    note.push_str(&format!(
                        "; searched in the world of seed {} (each machine parameter drawn \
                         within ±{p} % of the machine the policies see), its placement run in \
                         each seed's world",
                        world.seed
                    ));
                }
                oracle_note = Some(note);
                let runs = parallel(opts.seeds.clone(), opts.workers, |seed| {
                    let o = RunOptions {
                        seed,
                        trace: seed == opts.seeds[0],
                        mismatch: opts.mismatch,
                        ..RunOptions::default()
                    };
                    crate::oracle_search::run_best(machine, workload, &best, &o)
                });
                by_policy.push(("oracle".into(), runs));
            }
            Err(why) => oracle_note = Some(format!("not run: {why}")),
        }
    }
    let mut policies: Vec<PolicySummary> = by_policy.iter().map(|(n, r)| summarise(n, r)).collect();
    let base = policies
        .iter()
        .find(|p| p.policy == "default")
        .map(|p| p.mean_runtime_s);
    let best = policies
        .iter()
        .find(|p| p.policy == "oracle")
        .map(|p| p.mean_runtime_s);
    for p in &mut policies {
        p.vs_default_percent = base.map(|b| 100.0 * (p.mean_runtime_s / b - 1.0));
        p.vs_oracle_percent = best.map(|b| 100.0 * (p.mean_runtime_s / b - 1.0));
    }
    let oracle_short = oracle_shortfall(&policies);
    let examples = by_policy
        .into_iter()
        .filter_map(|(_, mut runs)| (!runs.is_empty()).then(|| runs.swap_remove(0)))
        .collect();
    Comparison {
        scenario: workload.name.clone(),
        description: workload.description.clone(),
        machine: machine.name.clone(),
        seeds: opts.seeds.clone(),
        policies,
        oracle: oracle_note,
        oracle_short,
        mismatch_percent: opts
            .mismatch
            .or(workload.mismatch_percent)
            .filter(|&p| p > 0.0),
        examples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(policy: &str, vs_oracle: Option<f64>) -> PolicySummary {
        let mut p = summarise(policy, &[]);
        p.vs_oracle_percent = vs_oracle;
        p
    }

    #[test]
    fn a_policy_beating_the_oracle_by_more_than_one_percent_is_said() {
        let rows = [
            row("default", Some(12.0)),
            row("dino", Some(-0.9)),
            row("oracle", Some(0.0)),
        ];
        assert_eq!(oracle_shortfall(&rows), None, "within 1 % is noise");
        let rows = [
            row("default", Some(12.0)),
            row("dino", Some(-3.25)),
            row("auto", Some(-1.5)),
            row("oracle", Some(0.0)),
        ];
        let s = oracle_shortfall(&rows).expect("said");
        assert!(s.contains("not a bound"), "{s}");
        assert!(s.contains("dino by 3.2 %, auto by 1.5 %"), "{s}");
        assert_eq!(oracle_shortfall(&[row("dino", None)]), None);
    }
}
