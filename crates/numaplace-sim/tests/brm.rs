//! Issue 7's acceptance in the simulator: BRM against Linux's default and
//! the oracle on westmere-2s (seed 000's machine), 10 seeds: the
//! micro-benchmark sweep of §6 (4 threads, 128 KiB shared, 4-128 MiB
//! aggregate), the NPB-like jobs and the SPEC-like workloads, each alone.

use numaplace_policy::PolicyKind;
use numaplace_policy::brm::BrmParams;
use numaplace_sim::best::best_binding;
use numaplace_sim::run::{Driver, RunOptions, mean_rsd, run};
use numaplace_sim::{AppSpec, Machine, Workload, scenario};

const SEEDS: u64 = 10;

struct Row {
    name: String,
    default: (f64, f64),
    brm: (f64, f64),
    oracle: f64,
}

impl Row {
    fn vs_default(&self) -> f64 {
        100.0 * (self.brm.0 / self.default.0 - 1.0)
    }
    fn vs_oracle(&self) -> f64 {
        100.0 * (self.brm.0 / self.oracle - 1.0)
    }
}

/// Mean run time of the workload's application runs, mean and RSD over
/// seeds; `kind` gives the policy for a seed.
fn measure(m: &Machine, w: &Workload, kind: impl Fn(u64) -> PolicyKind) -> (f64, f64) {
    let v: Vec<f64> = (0..SEEDS)
        .map(|seed| {
            let kind = &kind(seed);
            let opts = RunOptions {
                seed,
                // BRM at the paper's cadence (§5: every 10 ms); the other
                // policies ignore it (default has no rounds to speak of).
                interval: Some(std::time::Duration::from_millis(10)),
                ..RunOptions::default()
            };
            let r = run(m, w, Driver::Policy(kind), &opts, &mut |_| {});
            assert!(r.finished, "{} {} seed {seed}", w.name, kind.name());
            r.mean_runtime_s().unwrap()
        })
        .collect();
    mean_rsd(&v)
}

fn row(name: &str, w: &Workload) -> Row {
    let m = Machine::preset(&w.machine).unwrap();
    let oracle = best_binding(&m, w, 200, 1)
        .expect("the oracle runs")
        .runtime_s;
    Row {
        name: name.to_string(),
        default: measure(&m, w, |_| PolicyKind::Default),
        brm: measure(&m, w, brm),
        oracle,
    }
}

/// BRM with its own draws seeded from the run's seed: the spread over
/// seeds is then BRM's as well as the simulated Linux's.
fn brm(seed: u64) -> PolicyKind {
    PolicyKind::Brm(BrmParams {
        seed: 1000 + seed,
        ..BrmParams::default()
    })
}

/// One application of a scenario, alone from time 0.
fn alone(w: &Workload, app: &AppSpec) -> Workload {
    let mut a = app.clone();
    a.start_s = 0.0;
    Workload {
        name: a.name.clone(),
        apps: vec![a],
        ..w.clone()
    }
}

fn print(rows: &[Row]) {
    eprintln!(
        "{:<14} {:>9} {:>6} {:>9} {:>6} {:>9} {:>8} {:>8}",
        "workload", "default s", "RSD %", "brm s", "RSD %", "oracle s", "vs def %", "vs orc %"
    );
    for r in rows {
        eprintln!(
            "{:<14} {:>9.2} {:>6.1} {:>9.2} {:>6.1} {:>9.2} {:>+8.1} {:>+8.1}",
            r.name,
            r.default.0,
            r.default.1,
            r.brm.0,
            r.brm.1,
            r.oracle,
            r.vs_default(),
            r.vs_oracle()
        );
    }
}

fn rows() -> Vec<Row> {
    let micro = scenario::builtin("microbench-westmere").unwrap().unwrap();
    let mut rows = Vec::new();
    for mib in [4u64, 8, 16, 32, 64, 128] {
        let mut w = micro.clone();
        for p in &mut w.apps[0].phases {
            p.model.working_set = mib * 1024 * 1024 / 4;
        }
        rows.push(row(&format!("micro {mib}M"), &w));
    }
    let npb = scenario::builtin("npb-westmere").unwrap().unwrap();
    for a in &npb.apps {
        rows.push(row(&a.name, &alone(&npb, a)));
    }
    // The SPEC-like workloads run one after another: apps starting
    // together are one workload.
    let spec = scenario::builtin("spec-westmere").unwrap().unwrap();
    let mut starts: Vec<f64> = spec.apps.iter().map(|a| a.start_s).collect();
    starts.dedup();
    for s in starts {
        let apps: Vec<AppSpec> = spec
            .apps
            .iter()
            .filter(|a| a.start_s == s)
            .map(|a| AppSpec {
                start_s: 0.0,
                ..a.clone()
            })
            .collect();
        let name = apps[0].name.split(['.', '-']).next().unwrap().to_string();
        let w = Workload {
            name: name.clone(),
            apps,
            ..spec.clone()
        };
        rows.push(row(&name, &w));
    }
    print(&rows);
    rows
}

/// Seed 000 Fig. 8-9 and §6: BRM is faster than the default on every
/// NUMA-sensitive workload (everything but ep, which it must not slow by
/// more than 2 %; the paper saw 5.8 % and 21.9 % losses on ep and mg), its
/// run-to-run spread is at most 2 % wherever the default's is larger, and
/// it stays within 5 % of the best static placement everywhere (the paper:
/// within 3.4 % of the hand-optimised binding on the micro-benchmark).
/// One test, so the 18 workloads x 10 seeds run once.
#[test]
fn brm_beats_the_default_steadies_runs_and_stays_near_the_oracle() {
    for r in rows() {
        if r.name == "ep" {
            assert!(
                r.vs_default() <= 2.0,
                "{}: {:+.1} %",
                r.name,
                r.vs_default()
            );
        } else {
            assert!(
                r.brm.0 < r.default.0,
                "{}: {:+.1} %",
                r.name,
                r.vs_default()
            );
        }
        if r.default.1 > 2.0 {
            assert!(
                r.brm.1 <= 2.0,
                "{}: RSD {:.1} % vs default {:.1} %",
                r.name,
                r.brm.1,
                r.default.1
            );
        }
        assert!(
            r.vs_oracle() <= 5.0,
            "{}: {:+.1} % from the oracle",
            r.name,
            r.vs_oracle()
        );
    }
}
