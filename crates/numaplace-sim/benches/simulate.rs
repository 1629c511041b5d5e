//! How fast the simulator is, in the three measurements the issue asks
//! for; each also prints one plain line to stderr to quote:
//!
//! - `simulate/westmere-16-threads`: 16 single-thread apps (memory-bound
//!   and CPU-bound, first-touch) on westmere-2s with a 10 ms step under
//!   the `default` policy, for a fixed 20 simulated seconds; prints
//!   simulated seconds per wall second.
//! - `simulate/oracle-westmere-8-distinct`: `best_static` for 8 distinct
//!   single-thread apps on westmere-2s's 2 x 4 cores (35 placements up to
//!   symmetry, each a full simulation); prints the time and the method.
//! - `simulate/oracle-mix364`: `best_static` on generated mix 364 (45
//!   threads in 11 applications on a synthetic 2-package machine of 36
//!   CPUs with two CPU-less memory nodes: oversubscribed), the mix whose
//!   oracle did not finish in 10 minutes (issue 31, item 4); prints the
//!   time, the simulations and the method at the default budget (300) on
//!   every CPU, and benches a budget of 12.
//! - `simulate/compare-6x10-workers-N`: `compare` of 6 policies x 10 seeds
//!   on the built-in default scenario, no oracle, with 1 worker and with
//!   one per CPU; prints seconds.
//!
//! `cargo bench -p numaplace-sim --bench simulate`
// criterion_group! defines `pub fn benches`, which no doc comment can reach.
#![allow(missing_docs)]

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use numaplace_policy::PolicyKind;
use numaplace_sim::compare::{CompareOptions, compare};
use numaplace_sim::oracle_search::best_static;
use numaplace_sim::run::{Driver, RunOptions, run};
use numaplace_sim::{
    AppKind, AppSpec, LinuxModel, Machine, MemoryPlacement, Pattern, Phase, ThreadModel, Workload,
    scenario,
};

const MIB: u64 = 1 << 20;

/// A memory-bound thread model (mcf/milc-like numbers of default.toml).
fn memory_bound(i: usize) -> ThreadModel {
    ThreadModel {
        cpi_core: 0.7 + 0.05 * (i % 3) as f64,
        uncore_pki: 30.0 + 5.0 * (i % 4) as f64,
        working_set: (256 + 128 * (i % 4) as u64) * MIB,
        pattern: Pattern::PowerLaw {
            llc_mpki: 18.0 + 2.0 * (i % 3) as f64,
            alpha: 0.3,
        },
        mlp: 1.5 + (i % 3) as f64,
        shared_writes_pki: 0.0,
    }
}

/// A CPU-bound thread model (povray/h264ref-like).
fn cpu_bound(i: usize) -> ThreadModel {
    ThreadModel {
        cpi_core: 0.8 + 0.1 * (i % 2) as f64,
        uncore_pki: 1.0 + 3.0 * (i % 2) as f64,
        working_set: (4 + 20 * (i % 2) as u64) * MIB,
        pattern: Pattern::PowerLaw {
            llc_mpki: 0.05 + 0.45 * (i % 2) as f64,
            alpha: 0.5,
        },
        mlp: 1.0,
        shared_writes_pki: 0.0,
    }
}

/// `n` single-thread first-touch apps on westmere-2s, even ones
/// memory-bound, odd ones CPU-bound, `instructions` each.
fn singles(name: &str, n: usize, instructions: f64, max_seconds: f64) -> Workload {
    let apps = (0..n)
        .map(|i| AppSpec {
            name: format!("app{i}"),
            kind: AppKind::Process,
            threads: 1,
            phases: vec![Phase {
                instructions,
                model: if i % 2 == 0 {
                    memory_bound(i)
                } else {
                    cpu_bound(i)
                },
            }],
            shared_bytes: 0,
            sharers: 1,
            memory: MemoryPlacement::FirstTouch,
            cpus: None,
            cpus_by_cgroup: false,
            start_s: 0.0,
            runs: 1,
            job: None,
        })
        .collect();
    Workload {
        name: name.into(),
        description: String::new(),
        machine: "westmere-2s".into(),
        apps,
        step_ms: 10.0,
        max_seconds,
        mismatch_percent: None,
        linux: LinuxModel::default(),
    }
}

fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

/// Simulated seconds per wall second, 16 threads, 10 ms step.
fn sim_rate(c: &mut Criterion) {
    let machine = Machine::preset("westmere-2s").unwrap();
    // 1e13 instructions: no thread finishes, every run lasts exactly
    // max_seconds.
    const SIM_SECONDS: f64 = 20.0;
    let w = singles("sim-rate-16", 16, 1e13, SIM_SECONDS);
    assert_eq!(w.threads(), machine.topology.cpus().len());
    let (sim_total, wall_total) = (Cell::new(0.0f64), Cell::new(Duration::ZERO));
    c.bench_function("simulate/westmere-16-threads-10ms-20s", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for seed in 0..iters {
                let r = run(
                    &machine,
                    &w,
                    Driver::Policy(&PolicyKind::Default),
                    &RunOptions {
                        seed,
                        ..RunOptions::default()
                    },
                    &mut |_| {},
                );
                assert!(!r.finished && r.makespan_s >= SIM_SECONDS - 0.011);
                sim_total.set(sim_total.get() + r.makespan_s);
                black_box(r);
            }
            let took = start.elapsed();
            wall_total.set(wall_total.get() + took);
            took
        })
    });
    eprintln!(
        "sim seconds per wall second: {:.0} (16 threads on westmere-2s, 10 ms step, policy default, {:.0} simulated s over {:.2} wall s)",
        sim_total.get() / wall_total.get().as_secs_f64(),
        sim_total.get(),
        wall_total.get().as_secs_f64()
    );
}

/// The oracle for 8 distinct threads on 2 x 4 cores.
fn oracle(c: &mut Criterion) {
    let machine = Machine::preset("westmere-2s").unwrap();
    assert_eq!(machine.topology.cores().len(), 8);
    // About 5 simulated seconds per app alone: each of the 35 evaluations
    // is a full simulation.
    let w = singles("oracle-8", 8, 5e9, 300.0);
    let start = Instant::now();
    let best = best_static(&machine, &w, 1000, 1).unwrap();
    eprintln!(
        "oracle time for 8 threads on 2 x 4 cores: {:.3} s ({}; best mean runtime {:.2} s)",
        start.elapsed().as_secs_f64(),
        best.method,
        best.runtime_s
    );
    c.bench_function("simulate/oracle-westmere-8-distinct", |b| {
        b.iter(|| best_static(black_box(&machine), black_box(&w), 1000, 1).unwrap())
    });
}

/// The oracle on mix:364, oversubscribed with CPU-less memory nodes.
fn oracle_mix364(c: &mut Criterion) {
    let w = scenario::resolve("mix:364").unwrap();
    let machine = Machine::preset(&w.machine).unwrap();
    assert!(w.threads() > machine.topology.cpus().len());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    let best = best_static(&machine, &w, 300, cpus).unwrap();
    eprintln!(
        "oracle time for mix:364 (budget 300, {cpus} workers): {:.1} s, {} simulations, best mean runtime {:.2} s ({})",
        start.elapsed().as_secs_f64(),
        best.evaluations,
        best.runtime_s,
        best.method
    );
    let mut g = c.benchmark_group("simulate");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(30));
    g.bench_function("oracle-mix364-budget-12", |b| {
        b.iter(|| best_static(black_box(&machine), black_box(&w), 12, cpus).unwrap())
    });
    g.finish();
}

/// `compare`, 6 policies x 10 seeds, default scenario, no oracle.
fn compare_6x10(c: &mut Criterion) {
    let w = scenario::builtin(scenario::DEFAULT).unwrap().unwrap();
    let machine = Machine::preset(&w.machine).unwrap();
    // numaplace has only a few policies today (PolicyKind::NAMES: default,
    // numad-like, static), so the 6 are the available ones repeated in
    // turn.
    let policies: Vec<PolicyKind> = PolicyKind::NAMES
        .iter()
        .cycle()
        .take(6)
        .map(|n| PolicyKind::from_name(n).unwrap())
        .collect();
    let names: Vec<&str> = policies.iter().map(PolicyKind::name).collect();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut workers = vec![1];
    if cpus > 1 {
        workers.push(cpus);
    }
    for workers in workers {
        let opts = CompareOptions {
            policies: policies.clone(),
            seeds: (0..10).collect(),
            oracle: false,
            oracle_budget: 0,
            interval: None,
            workers,
            numa_balancing: None,
            memory_mover: Default::default(),
            manage_kernel_balancing: true,
            mismatch: None,
        };
        let start = Instant::now();
        black_box(compare(&machine, &w, &opts));
        eprintln!(
            "compare 6 policies x 10 seeds, workers {workers}: {:.3} s (default scenario, no oracle; policies {} = the {} available repeated)",
            start.elapsed().as_secs_f64(),
            names.join(","),
            PolicyKind::NAMES.len()
        );
        // Ten runs of up to a second each: more time than the others.
        let mut g = c.benchmark_group("simulate");
        g.measurement_time(Duration::from_secs(8));
        g.bench_function(format!("compare-6x10-workers-{workers}"), |b| {
            b.iter(|| compare(black_box(&machine), black_box(&w), &opts))
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = sim_rate, oracle, oracle_mix364, compare_6x10
}
criterion_main!(benches);
