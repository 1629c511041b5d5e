//! M8, a time slice's cache refill (docs/simulator.md): what it does to
//! threads that time-share a CPU, and that it does nothing where every
//! thread has its CPU to itself. Print the numbers with
//! `cargo test --release -p numaplace-sim --test papers slices:: -- --nocapture`.

use numaplace_policy::PolicyKind;
use numaplace_sim::model::{Constants, Mechanisms};
use numaplace_sim::run::{Driver, RunOptions, run};
use numaplace_sim::{AppSpec, Machine, RunResult, Workload, scenario};

fn builtin(name: &str) -> Workload {
    scenario::builtin(name).unwrap().unwrap()
}

/// Constants with the slice refill on or off.
fn with_refill(on: bool) -> Constants {
    Constants {
        mechanisms: Mechanisms {
            slice_refill: on,
            ..Mechanisms::default()
        },
        ..Constants::default()
    }
}

fn bound(m: &Machine, w: &Workload, cpus: &[usize], refill: bool) -> RunResult {
    let r = run(
        m,
        w,
        Driver::Binding {
            name: "bound",
            cpus: cpus.iter().map(|&c| vec![c]).collect(),
        },
        &RunOptions {
            constants: with_refill(refill),
            ..RunOptions::default()
        },
        &mut |_| {},
    );
    assert!(r.finished, "{r:?}");
    r
}

/// Every thread with a CPU to itself: no switch, so the refill must not
/// change a single run time, under the simulated Linux's placement and
/// balancing (seeded) on three machines.
#[test]
fn one_thread_per_cpu_runs_exactly_as_without_the_refill() {
    for name in [
        "microbench-westmere",
        "devils-barcelona",
        "classes-westmere",
    ] {
        let w = builtin(name);
        let m = Machine::preset(&w.machine).unwrap();
        for seed in 0..2 {
            let times = |refill: bool| {
                let r = run(
                    &m,
                    &w,
                    Driver::Policy(&PolicyKind::Default),
                    &RunOptions {
                        seed,
                        constants: with_refill(refill),
                        ..RunOptions::default()
                    },
                    &mut |_| {},
                );
                assert!(r.finished, "{name} seed {seed}");
                r.runs.iter().map(|a| a.runtime_s()).collect::<Vec<_>>()
            };
            assert_eq!(times(true), times(false), "{name} seed {seed}");
        }
    }
}

/// The pairs-core2duo programs, each alone on CPU 0 of `m` with `other`
/// time-sharing that CPU (long enough to outlast it): its run time with
/// the refill over without. Without it, two threads on one CPU that
/// never co-run each have the cache whenever they run.
fn time_shared_slowdown(m: &Machine, victim: &str, other: &str) -> f64 {
    let pairs = builtin("pairs-core2duo");
    let app = |n: &str| -> AppSpec { pairs.apps.iter().find(|a| a.name == n).unwrap().clone() };
    let mut bg = app(other);
    bg.name = format!("{other}-background");
    for p in &mut bg.phases {
        p.instructions *= 5.0;
    }
    let w = Workload {
        apps: vec![app(victim), bg],
        machine: m.name.clone(),
        max_seconds: 5000.0,
        ..pairs.clone()
    };
    let t = |refill| bound(m, &w, &[0, 0], refill).app_runtime_s(victim).unwrap();
    t(true) / t(false) - 1.0
}

/// A Pentium 4 Xeon pair as \[Symbiosis-Bloom\] §2.3.1 measured it (two processors,
/// each with its own 2 MB L2, one memory; the simulator's generic
/// parameters otherwise): two programs confined to one processor.
fn p4_xeon() -> Machine {
    Machine::synthetic("pack:2 l2:1(size=2MiB) l1d:1(size=16KiB) core:1 pu:1").unwrap()
}

const PROGRAMS: [&str; 4] = ["mcf", "libquantum", "omnetpp", "hmmer"];

/// What the refill costs a program that time-shares a processor, by what
/// runs in its absence: a cache hog evicts more of it than a light
/// program, a cache-sensitive program (mcf, α 0.7) loses more by it than
/// a streaming one (libquantum, α 0.1), and a light program with a small
/// set has little to lose.
#[test]
fn a_time_shared_program_pays_for_what_its_partner_evicts() {
    let m = p4_xeon();
    let mut table = Vec::new();
    for v in PROGRAMS {
        for o in PROGRAMS {
            if v != o {
                let s = time_shared_slowdown(&m, v, o);
                eprintln!("p4-xeon, one processor: {v} with {o}: +{:.1} %", 100.0 * s);
                table.push(((v, o), s));
            }
        }
    }
    let of = |v: &str, o: &str| table.iter().find(|(k, _)| *k == (v, o)).unwrap().1;
    assert!(table.iter().all(|(_, s)| *s >= 0.0), "{table:?}");
    assert!(of("mcf", "libquantum") > of("mcf", "hmmer"), "{table:?}");
    assert!(
        of("mcf", "omnetpp") > of("libquantum", "omnetpp"),
        "{table:?}"
    );
    assert!(of("hmmer", "libquantum") < 0.02, "{table:?}");
}

/// \[Symbiosis-Bloom\] §2.3.1 (Fig. 3): on the P4 Xeon, two programs confined to
/// one processor degrade each other by less than 10 %, "the context
/// switch overhead for cache warm-up" being the cause. The model with
/// CFS's defaults (6 ms slices on two CPUs) gives 14.6 % for mcf next to
/// libquantum and 13.0 % for omnetpp next to it, the rest below 9 %; the
/// paper's kernels (2.6.2x) had 20 ms and 4 ms, slices of 20 ms, a third
/// as many switches (docs/simulator.md, M8).
#[test]
#[ignore = "the model gives mcf 14.6 % next to libquantum with today's CFS slices (docs/simulator.md, M8)"]
fn seed003_time_sharing_one_p4_processor_degrades_less_than_10_percent() {
    let m = p4_xeon();
    for v in PROGRAMS {
        for o in PROGRAMS {
            if v != o {
                let s = time_shared_slowdown(&m, v, o);
                assert!(s < 0.10, "{v} with {o}: +{:.1} %", 100.0 * s);
            }
        }
    }
}
