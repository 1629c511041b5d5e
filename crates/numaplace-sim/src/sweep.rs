//! The robustness report: every policy over many cases (generated mixes,
//! shipped scenarios), each against `default` on the same seeds, so a
//! policy is judged by how it behaves where it was not tuned, not by its
//! best scenario (`numaplace compare --random N`).
//!
//! Per case, a policy's score is its mean application run time over the
//! seeds and its change is that against `default`'s ([`crate::run::summarise`],
//! as `compare` computes it). Per policy: the mean of the changes, the
//! worst, the share of cases more than 1 % and more than 5 % slower, and
//! the worst cases by name.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use numaplace_policy::PolicyKind;
use serde::{Deserialize, Serialize};

use crate::machine::Machine;
use crate::run::{Driver, RunOptions, parallel, run, score, summarise};
use crate::workload::Workload;

/// One thing to run every policy on.
#[derive(Debug, Clone)]
pub struct Case {
    /// How to name it again: `mix:SEED` or a shipped scenario's name.
    pub name: String,
    /// The machine it runs on.
    pub machine: Machine,
    /// What runs.
    pub workload: Workload,
    /// The scenario text, for a generated mix (written out when it is
    /// among the worst).
    pub text: Option<String>,
}

impl Case {
    /// Generated mix `seed`.
    pub fn mix(seed: u64) -> Result<Case, String> {
        let m = crate::generate::mix(seed);
        let workload = crate::scenario::parse(&m.text, &m.name).map_err(|e| e.to_string())?;
        let machine = Machine::preset(&workload.machine).map_err(|e| e.to_string())?;
        Ok(Case {
            name: m.name,
            machine,
            workload,
            text: Some(m.text),
        })
    }

    /// A shipped scenario on its own machine.
    pub fn shipped(name: &str) -> Result<Case, String> {
        let workload = crate::scenario::builtin(name)
            .ok_or_else(|| format!("no built-in scenario {name:?}"))?
            .map_err(|e| e.to_string())?;
        let machine = Machine::preset(&workload.machine).map_err(|e| e.to_string())?;
        Ok(Case {
            name: name.to_string(),
            machine,
            workload,
            text: None,
        })
    }
}

/// How to sweep.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Must include `default`, the yardstick.
    pub policies: Vec<PolicyKind>,
    /// The seeds each case runs on.
    pub seeds: Vec<u64>,
    /// Time between rounds; each policy's default when `None`.
    pub interval: Option<Duration>,
    /// Runs at once (threads).
    pub workers: usize,
    /// Worst cases named per policy.
    pub worst: usize,
    /// The kernel the policies other than the two yardsticks run on
    /// ([`crate::run::numa_balancing`]).
    pub numa_balancing: Option<bool>,
    /// Who moves memory while that kernel balances.
    pub memory_mover: numaplace_policy::engine::MemoryMover,
    /// Whether policies may turn that kernel's balancing on or off.
    pub manage_kernel_balancing: bool,
    /// Each run's world drawn within ± this many percent of the machine
    /// the policies are told ([`RunOptions::mismatch`]).
    pub mismatch: Option<f64>,
    /// Search the oracle's static placement of each case with this budget
    /// ([`crate::oracle_search::best_static_in`]) and run it on every seed.
    pub oracle_budget: Option<usize>,
}

/// One case's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseOutcome {
    /// The case's name (`mix:SEED` or a scenario's).
    pub name: String,
    /// Its machine's name.
    pub machine: String,
    /// Threads it runs, all applications together.
    pub threads: usize,
    /// Per policy (in the order of [`Sweep::policies`]): mean application
    /// run time over the seeds, seconds.
    pub mean_runtime_s: Vec<f64>,
    /// Per policy: each seed's mean application run time, seconds, in the
    /// order of [`Sweep::seeds`] (what the paired comparisons take).
    pub runtime_s: Vec<Vec<f64>>,
    /// Per policy: change against `default`, percent (negative: faster).
    pub vs_default_percent: Vec<f64>,
    /// Per policy: change against the faster of Linux's two yardsticks on
    /// this case, `default` and `autonuma`; empty when `autonuma` did not
    /// run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vs_linux_percent: Vec<f64>,
    /// The oracle's static placement's mean run time over the seeds, when
    /// it was searched and found one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_runtime_s: Option<f64>,
}

/// One policy over every case.
#[derive(Debug, Clone, Serialize)]
pub struct Robustness {
    /// The policy's name.
    pub policy: String,
    /// Mean over the cases of the change against `default`, percent.
    pub mean_percent: f64,
    /// The worst (largest) change, percent, and where.
    pub worst_percent: f64,
    /// The case of `worst_percent`.
    pub worst_case: String,
    /// Share of the cases more than 1 % / 5 % slower than `default`.
    pub over_1_percent: f64,
    /// See `over_1_percent`: more than 5 % slower.
    pub over_5_percent: f64,
    /// Cases where it was the fastest policy (ties count for each).
    pub best: usize,
    /// The worst cases, worst first: (case, change %).
    pub worst_cases: Vec<(String, f64)>,
    /// Against the faster of `default` and `autonuma` on each case (when
    /// `autonuma` ran): the mean change, the worst and where, and the
    /// share of cases more than 1 % slower.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_linux: Option<VsLinux>,
}

/// A policy against the better Linux of each case.
#[derive(Debug, Clone, Serialize)]
pub struct VsLinux {
    /// Mean change against the faster Linux of each case, percent.
    pub mean_percent: f64,
    /// The worst (largest) such change, percent.
    pub worst_percent: f64,
    /// The case of `worst_percent`.
    pub worst_case: String,
    /// Share of the cases more than 1 % slower than that Linux.
    pub over_1_percent: f64,
    /// The cases where it is slower than that Linux (the yardstick faster
    /// on the mean) by more than 1 % with 95 % confidence over the paired
    /// per-seed differences ([`crate::paired`]); `None` with one seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surely_over_1_percent: Option<Vec<String>>,
}

/// The policies that are no yardstick and no combination of others: each
/// is one placement system alone (the papers' and numad's).
const NOT_SINGLE: [&str; 4] = ["default", "autonuma", "auto", "static"];

/// What a placement system alone can get on these cases: on each case the
/// fastest of the single policies that ran (every policy but the two
/// Linux yardsticks, `auto` and `static`), against the faster Linux of
/// that case. A policy that picks per case, as `auto` means to, is judged
/// by the share of this gain it takes.
#[derive(Debug, Clone, Serialize)]
pub struct BestSingle {
    /// The single policies it chose from.
    pub policies: Vec<String>,
    /// Mean over the cases of the best single policy's change, percent.
    pub mean_percent: f64,
    /// Per policy (every one that ran): the share of that mean gain its own
    /// mean change against the faster Linux is, percent (100: as much
    /// as the best single policy of each case); absent where the best
    /// single policies gain nothing on the mean.
    pub share_percent: Vec<(String, f64)>,
}

impl BestSingle {
    fn of(names: &[String], cases: &[CaseOutcome], summary: &[Robustness]) -> Option<BestSingle> {
        let singles: Vec<usize> = (0..names.len())
            .filter(|&i| !NOT_SINGLE.contains(&names[i].as_str()))
            .collect();
        if singles.is_empty()
            || cases.is_empty()
            || cases.iter().any(|c| c.vs_linux_percent.is_empty())
        {
            return None;
        }
        let best = |c: &CaseOutcome| {
            (singles.iter())
                .map(|&i| c.vs_linux_percent[i])
                .fold(f64::INFINITY, f64::min)
        };
        let mean_percent = cases.iter().map(best).sum::<f64>() / cases.len() as f64;
        let share_percent = if mean_percent < 0.0 {
            (summary.iter())
                .filter_map(|r| {
                    Some((
                        r.policy.clone(),
                        100.0 * r.vs_linux.as_ref()?.mean_percent / mean_percent,
                    ))
                })
                .collect()
        } else {
            Vec::new()
        };
        Some(BestSingle {
            policies: singles.iter().map(|&i| names[i].clone()).collect(),
            mean_percent,
            share_percent,
        })
    }
}

/// What the oracle's static placement gets where it bounds every policy
/// (none is more than 1 % faster than it: the rule `compare` says "not a
/// bound" by), against the faster Linux of each case, and the share of
/// that gain each policy takes on the same cases.
#[derive(Debug, Clone, Serialize)]
pub struct OracleBound {
    /// Cases with an oracle placement, and those where it bounds.
    pub cases: usize,
    /// Cases where no policy beat the oracle by more than 1 %.
    pub bounded: usize,
    /// Mean change of the oracle over the bounded cases, percent.
    pub mean_percent: f64,
    /// Per policy: its mean change over the same cases as a share of the
    /// oracle's, percent; empty where the oracle gains nothing there.
    pub share_percent: Vec<(String, f64)>,
}

impl OracleBound {
    fn of(names: &[String], cases: &[CaseOutcome]) -> Option<OracleBound> {
        let with: Vec<(&CaseOutcome, f64)> = (cases.iter())
            .filter(|c| !c.vs_linux_percent.is_empty() && c.vs_linux_percent.len() == names.len())
            .filter_map(|c| Some((c, c.oracle_runtime_s?)))
            .collect();
        if with.is_empty() {
            return None;
        }
        let bounds = |(c, o): &(&CaseOutcome, f64)| c.mean_runtime_s.iter().all(|&m| m >= o * 0.99);
        let bounded: Vec<&(&CaseOutcome, f64)> = with.iter().filter(|x| bounds(x)).collect();
        let n = bounded.len().max(1) as f64;
        // The oracle against the faster Linux of its case: the ratio of its
        // time to the policy's, applied to the policy's change.
        let oracle = |(c, o): &(&CaseOutcome, f64)| {
            let m = c.mean_runtime_s[0];
            100.0 * ((1.0 + c.vs_linux_percent[0] / 100.0) * o / m - 1.0)
        };
        let mean_percent = bounded.iter().map(|x| oracle(x)).sum::<f64>() / n;
        let share_percent = if mean_percent < 0.0 && !bounded.is_empty() {
            (0..names.len())
                .map(|i| {
                    let mean = bounded
                        .iter()
                        .map(|(c, _)| c.vs_linux_percent[i])
                        .sum::<f64>()
                        / n;
                    (names[i].clone(), 100.0 * mean / mean_percent)
                })
                .collect()
        } else {
            Vec::new()
        };
        Some(OracleBound {
            cases: with.len(),
            bounded: bounded.len(),
            mean_percent,
            share_percent,
        })
    }
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    /// The policies, in the order asked.
    pub policies: Vec<String>,
    /// The seeds each case ran on.
    pub seeds: Vec<u64>,
    /// The worlds were drawn within ± this many percent of the machines
    /// the policies were told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatch_percent: Option<f64>,
    /// Every case's outcome.
    pub cases: Vec<CaseOutcome>,
    /// Per policy, its robustness over the cases.
    pub summary: Vec<Robustness>,
    /// The best single policy of each case (when `autonuma` and a single
    /// policy ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_single: Option<BestSingle>,
    /// The oracle, where it was searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oracle: Option<OracleBound>,
}

/// Runs every policy on every case over the seeds, in parallel over
/// `workers` threads; `progress(done, total)` is called after each run.
pub fn sweep(
    cases: &[Case],
    opts: &SweepOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Sweep, String> {
    let outcomes = run_cases(cases, opts, progress)?;
    Sweep::of(
        opts.policies.iter().map(|p| p.name().to_string()).collect(),
        opts.seeds.clone(),
        opts.mismatch,
        opts.worst,
        outcomes,
    )
}

/// The index of `default` among `names`, the sweep's yardstick.
fn default_of(names: &[String]) -> Result<usize, String> {
    names
        .iter()
        .position(|n| n == "default")
        .ok_or_else(|| "the sweep judges against `default`: include it in the policies".into())
}

/// Every case's outcome, in the order of `cases` (what a shard of a sweep
/// writes, [`crate::shard`]): every policy run on it over the seeds, in
/// parallel over `workers` threads; `progress(done, total)` is called
/// after each run.
pub fn run_cases(
    cases: &[Case],
    opts: &SweepOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<CaseOutcome>, String> {
    let names: Vec<String> = opts.policies.iter().map(|p| p.name().to_string()).collect();
    let base = default_of(&names)?;
    let autonuma = names.iter().position(|n| n == "autonuma");
    let (np, ns) = (opts.policies.len(), opts.seeds.len());
    let mut jobs = Vec::with_capacity(cases.len() * np * ns);
    for ci in 0..cases.len() {
        for pi in 0..np {
            for &seed in &opts.seeds {
                jobs.push((ci, pi, seed));
            }
        }
    }
    let total = jobs.len();
    let done = AtomicUsize::new(0);
    let runs = parallel(jobs, opts.workers, |(ci, pi, seed)| {
        let c = &cases[ci];
        let o = RunOptions {
            seed,
            interval: opts.interval,
            numa_balancing: opts.numa_balancing,
            memory_mover: opts.memory_mover,
            manage_kernel_balancing: opts.manage_kernel_balancing,
            mismatch: opts.mismatch,
            ..RunOptions::default()
        };
        let r = run(
            &c.machine,
            &c.workload,
            Driver::Policy(&opts.policies[pi]),
            &o,
            &mut |_| {},
        );
        progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
        r
    });
    let mut outcomes = Vec::with_capacity(cases.len());
    for (ci, c) in cases.iter().enumerate() {
        let at = |pi: usize| {
            let from = (ci * np + pi) * ns;
            summarise(&names[pi], &runs[from..from + ns]).mean_runtime_s
        };
        let mean: Vec<f64> = (0..np).map(at).collect();
        let per_seed: Vec<Vec<f64>> = (0..np)
            .map(|pi| {
                let from = (ci * np + pi) * ns;
                runs[from..from + ns].iter().map(score).collect()
            })
            .collect();
        let change = mean
            .iter()
            .map(|m| 100.0 * (m / mean[base] - 1.0))
            .collect();
        let vs_linux = match autonuma {
            Some(a) => {
                let linux = mean[base].min(mean[a]);
                mean.iter().map(|m| 100.0 * (m / linux - 1.0)).collect()
            }
            None => Vec::new(),
        };
        outcomes.push(CaseOutcome {
            name: c.name.clone(),
            machine: c.machine.name.clone(),
            threads: c.workload.threads(),
            mean_runtime_s: mean,
            runtime_s: per_seed,
            vs_default_percent: change,
            vs_linux_percent: vs_linux,
            oracle_runtime_s: opts.oracle_budget.and_then(|b| oracle_of(c, opts, b)),
        });
    }
    Ok(outcomes)
}

impl Sweep {
    /// The report over `cases` (each run with `policies` over `seeds`;
    /// the worlds within ± `mismatch` percent): per policy its robustness,
    /// with its `worst` cases named, the best single policy of each case
    /// and the oracle's bound where it was searched.
    pub fn of(
        policies: Vec<String>,
        seeds: Vec<u64>,
        mismatch: Option<f64>,
        worst: usize,
        cases: Vec<CaseOutcome>,
    ) -> Result<Sweep, String> {
        let base = default_of(&policies)?;
        let autonuma = policies.iter().position(|n| n == "autonuma");
        let summary: Vec<Robustness> = (0..policies.len())
            .map(|pi| {
                let linux = autonuma.map(|a| (base, a));
                robustness(&policies[pi], pi, &cases, worst, linux)
            })
            .collect();
        let best_single = BestSingle::of(&policies, &cases, &summary);
        let oracle = OracleBound::of(&policies, &cases);
        Ok(Sweep {
            best_single,
            oracle,
            policies,
            seeds,
            mismatch_percent: mismatch.filter(|&p| p > 0.0),
            cases,
            summary,
        })
    }
}

/// The mean run time of case `c`'s oracle placement over the seeds: searched
/// in the world of the first seed (under a mismatch, the truth), run in
/// each seed's, as `compare` does; `None` where the search found none.
fn oracle_of(c: &Case, opts: &SweepOptions, budget: usize) -> Option<f64> {
    let world = RunOptions {
        seed: opts.seeds.first().copied().unwrap_or(0),
        mismatch: opts.mismatch,
        ..RunOptions::default()
    };
    let best =
        crate::oracle_search::best_static_in(&c.machine, &c.workload, budget, opts.workers, &world)
            .ok()?;
    let runs = parallel(opts.seeds.clone(), opts.workers, |seed| {
        let o = RunOptions {
            seed,
            mismatch: opts.mismatch,
            ..RunOptions::default()
        };
        crate::oracle_search::run_best(&c.machine, &c.workload, &best, &o)
    });
    Some(summarise("oracle", &runs).mean_runtime_s)
}

/// The cases where policy `pi` is slower than the faster Linux of each
/// (`default` at `base` or `autonuma`, whichever is faster on the mean)
/// by more than `percent` with 95 % confidence over the paired per-seed
/// differences; `None` with fewer than two seeds.
fn surely_slower(
    cases: &[CaseOutcome],
    pi: usize,
    base: usize,
    autonuma: usize,
    percent: f64,
) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for c in cases {
        let linux = if c.mean_runtime_s[autonuma] < c.mean_runtime_s[base] {
            autonuma
        } else {
            base
        };
        let lb = crate::paired::lower_bound_percent(&c.runtime_s[pi], &c.runtime_s[linux])?;
        if lb > percent {
            out.push(c.name.clone());
        }
    }
    Some(out)
}

/// Policy `pi`'s robustness over `cases`; against the faster Linux where
/// `linux` (the indices of `default` and `autonuma`) says both ran.
fn robustness(
    policy: &str,
    pi: usize,
    cases: &[CaseOutcome],
    worst: usize,
    linux: Option<(usize, usize)>,
) -> Robustness {
    let n = cases.len().max(1) as f64;
    let mut changes: Vec<(String, f64)> = cases
        .iter()
        .map(|c| (c.name.clone(), c.vs_default_percent[pi]))
        .collect();
    changes.sort_by(|a, b| b.1.total_cmp(&a.1));
    let share = |over: f64| changes.iter().filter(|(_, x)| *x > over).count() as f64 / n;
    let best = cases
        .iter()
        .filter(|c| {
            let m = c.mean_runtime_s[pi];
            c.mean_runtime_s.iter().all(|&o| m <= o * (1.0 + 1e-9))
        })
        .count();
    let vs_linux = linux
        .filter(|_| !cases.is_empty())
        .filter(|_| cases.iter().all(|c| !c.vs_linux_percent.is_empty()))
        .map(|(base, autonuma)| {
            let v: Vec<(&str, f64)> = cases
                .iter()
                .map(|c| (c.name.as_str(), c.vs_linux_percent[pi]))
                .collect();
            let worst = v
                .iter()
                .copied()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .expect("cases");
            VsLinux {
                mean_percent: v.iter().map(|x| x.1).sum::<f64>() / n,
                worst_percent: worst.1,
                worst_case: worst.0.to_string(),
                over_1_percent: v.iter().filter(|x| x.1 > 1.0).count() as f64 / n,
                surely_over_1_percent: surely_slower(cases, pi, base, autonuma, 1.0),
            }
        });
    Robustness {
        vs_linux,
        policy: policy.to_string(),
        mean_percent: changes.iter().map(|(_, x)| x).sum::<f64>() / n,
        worst_percent: changes.first().map_or(0.0, |w| w.1),
        worst_case: changes.first().map(|w| w.0.clone()).unwrap_or_default(),
        over_1_percent: share(1.0),
        over_5_percent: share(5.0),
        best,
        worst_cases: changes.into_iter().take(worst).collect(),
    }
}

impl Sweep {
    /// The report as a table.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = format!(
            "{} cases, seeds {}, each policy against default on the same seeds\n",
            self.cases.len(),
            seed_range(&self.seeds)
        );
        if let Some(p) = self.mismatch_percent {
            let _ = writeln!(
                s,
                "world: each machine parameter drawn within ±{p} % of the machine the policies \
                 see (a world per seed)"
            );
        }
        let _ = writeln!(
            s,
            "{:<17} {:>7} {:>8} {:>7} {:>7} {:>5}  worst case",
            "policy", "mean %", "worst %", ">1 %", ">5 %", "best"
        );
        for r in &self.summary {
            let _ = writeln!(
                s,
                "{:<17} {:>+7.1} {:>+8.1} {:>6.1}% {:>6.1}% {:>5}  {}",
                r.policy,
                r.mean_percent,
                r.worst_percent,
                100.0 * r.over_1_percent,
                100.0 * r.over_5_percent,
                r.best,
                if r.worst_percent > 0.0 {
                    r.worst_case.as_str()
                } else {
                    "-"
                }
            );
        }
        s.push_str(
            "mean / worst: change of the mean application run time against `default` (negative = \
             faster), over the cases; >1 % / >5 %: share of cases that much slower than default; \
             best: cases where the policy was the fastest.\n",
        );
        if self.summary.iter().any(|r| r.vs_linux.is_some()) {
            let _ = writeln!(
                s,
                "\nagainst the faster Linux of each case (`default` or `autonuma`):\n\
                 {:<17} {:>7} {:>8} {:>7} {:>7}  worst case",
                "policy", "mean %", "worst %", ">1 %", "sure>1"
            );
            for r in &self.summary {
                if let Some(v) = &r.vs_linux {
                    let _ = writeln!(
                        s,
                        "{:<17} {:>+7.1} {:>+8.1} {:>6.1}% {:>7}  {}",
                        r.policy,
                        v.mean_percent,
                        v.worst_percent,
                        100.0 * v.over_1_percent,
                        v.surely_over_1_percent
                            .as_ref()
                            .map_or("-".to_string(), |c| c.len().to_string()),
                        if v.worst_percent > 0.0 {
                            v.worst_case.as_str()
                        } else {
                            "-"
                        }
                    );
                }
            }
            s.push_str(
                "sure>1: cases slower than that Linux by more than 1 % with 95 % confidence over \
                 the paired per-seed differences (Student's t; - with one seed).\n",
            );
        }
        if let Some(b) = &self.best_single {
            let _ = writeln!(
                s,
                "\nthe best single policy of each case ({} to choose from): {:+.2} % mean against \
                 the faster Linux",
                b.policies.len(),
                b.mean_percent
            );
            if !b.share_percent.is_empty() {
                let _ = writeln!(
                    s,
                    "share of that gain each takes: {}",
                    shares(&b.share_percent)
                );
            }
        }
        if let Some(o) = &self.oracle {
            let _ = writeln!(
                s,
                "\nthe oracle's static placement bounds every policy on {} of the {} cases it \
                 placed: {:+.2} % mean against the faster Linux there",
                o.bounded, o.cases, o.mean_percent
            );
            if !o.share_percent.is_empty() {
                let _ = writeln!(
                    s,
                    "share of its gain each takes there: {}",
                    shares(&o.share_percent)
                );
            }
        }
        s
    }
}

/// "auto 90 %, dino 41 %": each policy's share, whole percent (no "-0").
fn shares(of: &[(String, f64)]) -> String {
    (of.iter())
        .map(|(p, x)| format!("{p} {:.0} %", if x.abs() < 0.5 { 0.0 } else { *x }))
        .collect::<Vec<_>>()
        .join(", ")
}

fn seed_range(seeds: &[u64]) -> String {
    match (seeds.first(), seeds.last()) {
        (Some(a), Some(b)) if seeds.len() > 1 && b - a + 1 == seeds.len() as u64 => {
            format!("{a}-{b}")
        }
        _ => seeds
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options for `policies` over `seeds` on `workers` threads, the rest
    /// as `compare --random` has them by default.
    fn options(policies: Vec<PolicyKind>, seeds: Vec<u64>, workers: usize) -> SweepOptions {
        SweepOptions {
            policies,
            seeds,
            interval: None,
            workers,
            worst: 1,
            numa_balancing: None,
            memory_mover: Default::default(),
            manage_kernel_balancing: true,
            mismatch: None,
            oracle_budget: None,
        }
    }

    #[test]
    fn a_sweep_judges_each_policy_against_default_on_every_case() {
        let cases: Vec<Case> = [3, 11].iter().map(|&s| Case::mix(s).unwrap()).collect();
        let opts = options(
            vec![
                PolicyKind::Default,
                PolicyKind::from_name("numad-like").unwrap(),
                PolicyKind::Autonuma,
            ],
            vec![0, 1],
            2,
        );
        let calls = AtomicUsize::new(0);
        let s = sweep(&cases, &opts, &|_, total| {
            assert_eq!(total, 12);
            calls.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(calls.into_inner(), 12);
        assert_eq!(s.cases.len(), 2);
        for c in &s.cases {
            assert_eq!(c.vs_default_percent[0], 0.0);
            assert!(c.mean_runtime_s.iter().all(|m| *m > 0.0));
            // Against the faster Linux: one yardstick is it, the other no
            // faster; every policy's change is at least its change
            // against default.
            let (d, a) = (c.vs_linux_percent[0], c.vs_linux_percent[2]);
            assert!(d.min(a) == 0.0 && d.max(a) >= 0.0, "{d} {a}");
            for p in 0..3 {
                assert!(c.vs_linux_percent[p] >= c.vs_default_percent[p] - 1e-9);
            }
        }
        let linux = s.summary[1].vs_linux.as_ref().unwrap();
        let worst = s
            .cases
            .iter()
            .map(|c| c.vs_linux_percent[1])
            .fold(f64::MIN, f64::max);
        assert_eq!(linux.worst_percent, worst);
        assert!(s.table().contains("against the faster Linux"));
        // Each seed's run time is kept, the mean is theirs, and a case is
        // surely slower only where every reading of the seeds says so.
        for c in &s.cases {
            for p in 0..3 {
                let r = &c.runtime_s[p];
                assert_eq!(r.len(), 2);
                assert!((r.iter().sum::<f64>() / 2.0 - c.mean_runtime_s[p]).abs() < 1e-9);
            }
        }
        for p in 0..3 {
            let sure = s.summary[p].vs_linux.as_ref().unwrap();
            for name in sure.surely_over_1_percent.as_ref().expect("two seeds") {
                let c = s.cases.iter().find(|c| &c.name == name).unwrap();
                let linux = if c.mean_runtime_s[2] < c.mean_runtime_s[0] {
                    2
                } else {
                    0
                };
                let each = (c.runtime_s[p].iter().zip(&c.runtime_s[linux]))
                    .map(|(a, b)| 100.0 * (a / b - 1.0));
                assert!(each.clone().sum::<f64>() / 2.0 > 1.0, "{name}");
                assert_ne!(p, linux, "the faster Linux is not slower than itself");
            }
        }
        let numad = &s.summary[1];
        let worst = s
            .cases
            .iter()
            .map(|c| c.vs_default_percent[1])
            .fold(f64::MIN, f64::max);
        assert_eq!(numad.worst_percent, worst);
        assert_eq!(numad.worst_cases.len(), 1);
        assert!(s.table().contains("numad-like"));
    }

    #[test]
    fn a_sweep_without_default_is_refused() {
        let opts = options(vec![PolicyKind::from_name("dino").unwrap()], vec![0], 1);
        let e = sweep(&[Case::mix(1).unwrap()], &opts, &|_, _| {}).unwrap_err();
        assert!(e.contains("include it"), "{e}");
    }

    #[test]
    fn the_best_single_policy_is_chosen_per_case_and_each_policy_gets_its_share() {
        let names: Vec<String> = ["default", "autonuma", "dino", "numad-like", "auto"]
            .iter()
            .map(|n| n.to_string())
            .collect();
        // Against the faster Linux: dino wins case a (-10 %), numad-like
        // case b (-6 %); auto gets -6 % and -2 %.
        let case = |name: &str, v: [f64; 5]| CaseOutcome {
            name: name.into(),
            machine: "m".into(),
            threads: 4,
            mean_runtime_s: vec![10.0; 5],
            runtime_s: vec![vec![10.0]; 5],
            vs_default_percent: vec![0.0; 5],
            vs_linux_percent: v.to_vec(),
            oracle_runtime_s: None,
        };
        let cases = vec![
            case("a", [0.0, 3.0, -10.0, -4.0, -6.0]),
            case("b", [2.0, 0.0, 1.0, -6.0, -2.0]),
        ];
        let summary: Vec<Robustness> = (0..names.len())
            .map(|i| robustness(&names[i], i, &cases, 3, Some((0, 1))))
            .collect();
        let b = BestSingle::of(&names, &cases, &summary).unwrap();
        assert_eq!(b.policies, ["dino", "numad-like"]);
        assert!((b.mean_percent - -8.0).abs() < 1e-9, "{b:?}");
        let share = |p: &str| b.share_percent.iter().find(|x| x.0 == p).unwrap().1;
        assert!((share("auto") - 50.0).abs() < 1e-9, "{b:?}");
        assert!((share("dino") - 56.25).abs() < 1e-9, "{b:?}");
        assert!((share("default") - -12.5).abs() < 1e-9, "{b:?}");
        // Without autonuma there is no faster Linux to measure against;
        // without a single policy nothing to choose from.
        let mut no_linux = cases.clone();
        no_linux.iter_mut().for_each(|c| c.vs_linux_percent.clear());
        assert!(BestSingle::of(&names, &no_linux, &summary).is_none());
        let only: Vec<String> = ["default", "autonuma"]
            .iter()
            .map(|n| n.to_string())
            .collect();
        let two: Vec<CaseOutcome> = (cases.iter())
            .map(|c| CaseOutcome {
                vs_linux_percent: c.vs_linux_percent[..2].to_vec(),
                ..c.clone()
            })
            .collect();
        assert!(BestSingle::of(&only, &two, &summary[..2]).is_none());
    }

    #[test]
    fn the_oracle_bounds_where_no_policy_beats_it_and_each_policy_gets_its_share() {
        let names: Vec<String> = ["default", "autonuma", "auto"]
            .iter()
            .map(|n| n.to_string())
            .collect();
        let case = |name: &str, mean: [f64; 3], oracle: Option<f64>| {
            let linux = mean[0].min(mean[1]);
            CaseOutcome {
                name: name.into(),
                machine: "m".into(),
                threads: 4,
                mean_runtime_s: mean.to_vec(),
                runtime_s: mean.iter().map(|m| vec![*m]).collect(),
                vs_default_percent: mean.iter().map(|m| 100.0 * (m / mean[0] - 1.0)).collect(),
                vs_linux_percent: mean.iter().map(|m| 100.0 * (m / linux - 1.0)).collect(),
                oracle_runtime_s: oracle,
            }
        };
        let cases = vec![
            // The oracle 20 % faster than the faster Linux, auto 10 %.
            case("a", [10.0, 12.0, 9.0], Some(8.0)),
            // auto beats the oracle by 5 %: not a bound, left out.
            case("b", [10.0, 10.0, 9.5], Some(10.0)),
            // No oracle placement found.
            case("c", [10.0, 10.0, 10.0], None),
        ];
        let o = OracleBound::of(&names, &cases).unwrap();
        assert_eq!((o.cases, o.bounded), (2, 1), "{o:?}");
        assert!((o.mean_percent - -20.0).abs() < 1e-9, "{o:?}");
        let share = |p: &str| o.share_percent.iter().find(|x| x.0 == p).unwrap().1;
        assert!((share("auto") - 50.0).abs() < 1e-9, "{o:?}");
        assert!(share("default").abs() < 1e-9, "{o:?}");
        let none: Vec<CaseOutcome> = vec![case("c", [10.0, 10.0, 10.0], None)];
        assert!(OracleBound::of(&names, &none).is_none());
    }

    #[test]
    fn a_sweep_with_the_oracle_places_each_case() {
        let opts = SweepOptions {
            oracle_budget: Some(8),
            ..options(vec![PolicyKind::Default, PolicyKind::Autonuma], vec![0], 2)
        };
        let r = sweep(&[Case::mix(3).unwrap()], &opts, &|_, _| {}).unwrap();
        let o = r.cases[0].oracle_runtime_s.expect("an oracle placement");
        assert!(o > 0.0 && o.is_finite());
        let bound = r.oracle.as_ref().expect("the oracle's summary");
        assert_eq!(bound.cases, 1);
        assert!(
            r.table().contains("oracle's static placement"),
            "{}",
            r.table()
        );
    }
}
