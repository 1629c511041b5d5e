//! \[Rao13\]'s experiments on westmere-2s, shared by brm.rs and
//! headlines.rs: the workloads (§6: the micro-benchmark sweep, each
//! NPB-like job alone, each SPEC-like multiprogrammed workload), BRM
//! seeded from the run, and a workload's mean run time over seeds.

use numaplace_policy::PolicyKind;
use numaplace_policy::brm::BrmParams;
use numaplace_sim::run::{Driver, RunOptions, mean_rsd, run};
use numaplace_sim::{AppSpec, Machine, Workload, scenario};

/// `(name, micro-benchmark?, workload)`: the micro-benchmark at 4-128 MiB
/// aggregate (4 threads, 128 KiB shared), each NPB-like job alone, and
/// each SPEC-like workload (the apps of spec-westmere that start together)
/// alone, every one starting at 0.
pub(crate) fn workloads() -> Vec<(String, bool, Workload)> {
    let mut jobs = Vec::new();
    let micro = scenario::builtin("microbench-westmere").unwrap().unwrap();
    for mib in [4u64, 8, 16, 32, 64, 128] {
        let mut w = micro.clone();
        for p in &mut w.apps[0].phases {
            p.model.working_set = mib * 1024 * 1024 / 4;
        }
        jobs.push((format!("micro {mib}M"), true, w));
    }
    let npb = scenario::builtin("npb-westmere").unwrap().unwrap();
    for a in &npb.apps {
        let mut a = a.clone();
        a.start_s = 0.0;
        let w = Workload {
            name: a.name.clone(),
            apps: vec![a],
            ..npb.clone()
        };
        jobs.push((w.name.clone(), false, w));
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
        jobs.push((name, false, w));
    }
    jobs
}

/// BRM with its own draws seeded from the run's seed: the spread over
/// seeds is then BRM's as well as the simulated Linux's.
pub(crate) fn brm(seed: u64) -> PolicyKind {
    PolicyKind::Brm(BrmParams {
        seed: 1000 + seed,
        ..BrmParams::default()
    })
}

/// Mean run time of the workload's application runs over seeds `0..seeds`,
/// mean and RSD; `kind` gives the policy for a seed.
pub(crate) fn measure(
    m: &Machine,
    w: &Workload,
    seeds: u64,
    kind: impl Fn(u64) -> PolicyKind,
) -> (f64, f64) {
    let v: Vec<f64> = (0..seeds)
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
