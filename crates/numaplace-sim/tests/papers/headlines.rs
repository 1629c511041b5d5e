//! The papers' headline results side by side with the simulator's (issue
//! 17 item 3; the table is in docs/simulator.md, "The papers' headlines,
//! side by side"). One test per row of that table: each runs the paper's
//! headline experiment as the simulator has it, prints the paper's number
//! beside the simulator's, and asserts the simulator's number within a
//! tolerance around what it measured when the table was written, so a
//! change of the model that moves a headline fails here and the table is
//! updated with it.
//!
//! Seeds are stated per experiment: the papers' 10 for \[Rao13\] and \[Blagodurov11\],
//! one for \[Bae12\]'s bound mapping runs, bound runs for \[Symbiosis-Bloom\]; the
//! whole file runs in about 20-40 s in release mode on 2 cores. The
//! fuller experiments are brm.rs, adaptive.rs, symbiosis.rs and dino.rs. The
//! baseline is `default` (Linux without automatic NUMA balancing), as the
//! seeds measured. Print the rows with
//! `cargo test --release -p numaplace-sim --test papers headlines:: -- --nocapture`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::seed000;

use numaplace_policy::PolicyKind;
use numaplace_sim::adaptive::{Pair, fig4_suite, measure_pairs};
use numaplace_sim::oracle_search::best_binding;
use numaplace_sim::outcome::job_of;
use numaplace_sim::run::{Driver, RunOptions, mean_rsd, parallel, run};
use numaplace_sim::{Machine, RunResult, Workload, scenario};

/// Prints one row: the paper's number and the simulator's.
fn row(id: &str, paper: &str, sim: f64) {
    eprintln!("headline {id}: paper {paper}; simulator {sim:.1}");
}

/// `measured` within `tol` of `at` (the value the table quotes).
fn within(id: &str, measured: f64, at: f64, tol: f64) {
    assert!(
        (measured - at).abs() <= tol,
        "{id}: the simulator now gives {measured:.2}, the table says {at:.1} ± {tol}: \
         update docs/simulator.md's headline table (and this test) if the model changed on purpose"
    );
}

// ---------------------------------------------------------------------
// [Rao13] (§6, Fig. 8-9): BRM against the
// default scheduler and the hand-optimised binding on westmere-2s.

/// Seeds per policy and workload for \[Rao13\]'s rows (the paper: 10).
const SEEDS_000: u64 = 10;

struct BrmRow {
    name: String,
    micro: bool,
    default: f64,
    brm: (f64, f64),
    /// `best_binding`: \[Rao13\]'s hand-optimised binding (micro only).
    hand: Option<f64>,
}

/// brm.rs's workloads (`support/seed000.rs`): the micro-benchmark sweep (4 threads, 128 KiB
/// shared, 4-128 MiB aggregate), each NPB-like job alone and each
/// SPEC-like multiprogrammed workload.
fn seed000() -> &'static [BrmRow] {
    static ROWS: OnceLock<Vec<BrmRow>> = OnceLock::new();
    ROWS.get_or_init(|| {
        let jobs = seed000::workloads();
        let rows = parallel(jobs, 2, |(name, micro, w)| {
            let m = Machine::preset(&w.machine).unwrap();
            BrmRow {
                micro,
                default: seed000::measure(&m, &w, SEEDS_000, |_| PolicyKind::Default).0,
                brm: seed000::measure(&m, &w, SEEDS_000, seed000::brm),
                hand: micro.then(|| best_binding(&m, &w, 200, 1).unwrap().runtime_s),
                name,
            }
        });
        for r in &rows {
            eprintln!(
                "  [Rao13] {:<10} default {:7.2} s, brm {:7.2} s (RSD {:.1} %) {:+.1} %{}",
                r.name,
                r.default,
                r.brm.0,
                r.brm.1,
                100.0 * (r.brm.0 / r.default - 1.0),
                r.hand.map_or(String::new(), |h| format!(
                    ", hand-optimised {h:.2} s, brm {:+.1} % from it",
                    100.0 * (r.brm.0 / h - 1.0)
                ))
            );
        }
        rows
    })
}

/// \[Rao13\] abstract and §6.1 (Fig. 8b, lu): BRM up to 31.7 % faster than
/// the default scheduler, as 1 - brm / default on the best workload.
#[test]
fn seed000_brm_up_to_31_7_percent_better_than_the_default() {
    let best = seed000()
        .iter()
        .map(|r| 100.0 * (1.0 - r.brm.0 / r.default))
        .fold(f64::MIN, f64::max);
    row("000 BRM vs default, best workload, %", "31.7", best);
    // Measured 32.9 % (lu, 10 seeds; the paper's 31.7 % is lu's too).
    // Tolerance 3 points: a few percent is what the simulated Linux's
    // random start moves one workload's default over 10 seeds; more is a
    // change of the model.
    within("000 BRM vs default", best, 32.9, 3.0);
}

/// \[Rao13\] §6.1 (Fig. 8a): BRM within 3.4 % of the hand-optimised
/// binding on the micro-benchmark, as brm / hand - 1 on the worst size.
#[test]
fn seed000_brm_within_3_4_percent_of_hand_optimised() {
    let worst = seed000()
        .iter()
        .filter(|r| r.micro)
        .map(|r| 100.0 * (r.brm.0 / r.hand.unwrap() - 1.0))
        .fold(f64::MIN, f64::max);
    row("000 BRM vs hand-optimised, worst size, %", "3.4", worst);
    // Measured 3.2 % (micro 64M, 10 seeds). Tolerance 1.5 points, and
    // never more than a point above the paper's 3.4 %.
    within("000 BRM vs hand-optimised", worst, 3.2, 1.5);
    assert!(worst <= 4.4, "{worst}");
}

/// \[Rao13\] abstract and §6.2 (Fig. 9): BRM's run-time variation (RSD
/// over runs) on average at most 2 %.
#[test]
fn seed000_brm_runtime_variation_at_most_2_percent() {
    let rows = seed000();
    let mean = rows.iter().map(|r| r.brm.1).sum::<f64>() / rows.len() as f64;
    row("000 BRM RSD, mean over workloads, %", "<= 2", mean);
    // Measured 0.4 % (10 seeds). Tolerance 1 point, and at most the
    // paper's 2 %.
    within("000 BRM RSD", mean, 0.4, 1.0);
    assert!(mean <= 2.0, "{mean}");
}

// ---------------------------------------------------------------------
// [Bae12] (abstract, §3, Fig. 4-8): local
// against interleaved mapping of the Fig. 4 benchmarks on westmere-2s.

/// One seed: the mapping runs are bound, the spread over seeds is small.
fn seed002() -> &'static [Pair] {
    static PAIRS: OnceLock<Vec<Pair>> = OnceLock::new();
    PAIRS.get_or_init(|| {
        let m = Machine::preset("westmere-2s").unwrap();
        measure_pairs(&m, &fig4_suite(), &[0], 2)
    })
}

/// The largest gap between the two mappings over the suite, percent,
/// and the benchmark: the paper's words are "performance increased by as
/// much as 66 %" (the slower / the faster - 1) but "energy reduced by as
/// much as 31 %, power by as much as 17 %" (1 - the lower / the higher).
fn mapping_gap(value: impl Fn(&numaplace_sim::adaptive::Measured) -> f64, reduction: bool) -> f64 {
    let (name, gap) = seed002()
        .iter()
        .map(|p| {
            let (l, i) = (value(&p.local), value(&p.interleaved));
            let (lo, hi) = (l.min(i), l.max(i));
            let gap = if reduction {
                100.0 * (1.0 - lo / hi)
            } else {
                100.0 * (hi / lo - 1.0)
            };
            (p.name, gap)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    eprintln!("  [Bae12]: the largest gap is {name}'s, {gap:.1} %");
    gap
}

/// \[Bae12\] abstract and §3: the mapping changes performance by up to
/// 66 %.
#[test]
fn seed002_mappings_differ_by_up_to_66_percent_in_performance() {
    let gap = mapping_gap(|m| m.runtime_s, false);
    row("002 performance gap between mappings, %", "66", gap);
    // Measured 129.6 % (streamcluster, 1 seed). Tolerance 10 points: the
    // Fig. 4 suite's parameters are ours (adaptive.rs), so the number is
    // the model's and moves with any change to remote latency or link
    // bandwidth; 10 points is a change worth re-reading the table for.
    within("002 performance", gap, 129.6, 10.0);
}

/// \[Bae12\] abstract: energy reduced by up to 31 %.
#[test]
fn seed002_mappings_differ_by_up_to_31_percent_in_energy() {
    let gap = mapping_gap(|m| m.energy_j, true);
    row("002 energy reduction between mappings, %", "31", gap);
    // Measured 48.0 % (1 seed). Tolerance 5 points, as above.
    within("002 energy", gap, 48.0, 5.0);
}

/// \[Bae12\] abstract: power reduced by up to 17 %.
#[test]
fn seed002_mappings_differ_by_up_to_17_percent_in_power() {
    let gap = mapping_gap(|m| m.power_w, true);
    row("002 power reduction between mappings, %", "17", gap);
    // Measured 16.2 % (1 seed). Power is the Fig. 7 model fed with busy
    // cores, so it moves only if the run's busy-core mix does; tolerance
    // 2 points.
    within("002 power", gap, 16.2, 2.0);
}

// ---------------------------------------------------------------------
// [Symbiosis-Bloom] (abstract, §5.1.1, Fig. 11): four
// programs of the pool on a Core 2 Duo, the three pairings.

/// \[Symbiosis-Bloom\] §4.2: the three pairings as the CPU of each of four apps.
const PAIRINGS: [[usize; 4]; 3] = [[0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0]];
/// As in symbiosis.rs: runs shortened, the model's speeds do not depend
/// on run length.
const SHORTEN: f64 = 25.0;
/// Every `MIX_STRIDE`th of the 495 mixes of four (symbiosis.rs runs all).
const MIX_STRIDE: usize = 1;

/// Per program of the pool: its gain, percent, of the pairing with the
/// lowest mean run time of the four over its own worst pairing, per mix
/// it is in. The pairing is the best of the three (what a perfect
/// allocator picks; symbiosis.rs holds the weighted interference graph's
/// picks against it), so this is the most \[Symbiosis-Bloom\]'s allocation can gain
/// in the model.
fn seed003() -> &'static BTreeMap<String, Vec<f64>> {
    static GAINS: OnceLock<BTreeMap<String, Vec<f64>>> = OnceLock::new();
    GAINS.get_or_init(|| {
        let pool = scenario::builtin("pool-core2duo").unwrap().unwrap();
        let m = Machine::preset("core2duo").unwrap();
        let mut mixes = Vec::new();
        for a in 0..12 {
            for b in a + 1..12 {
                for c in b + 1..12 {
                    for d in c + 1..12 {
                        mixes.push([a, b, c, d]);
                    }
                }
            }
        }
        let mixes: Vec<[usize; 4]> = mixes.into_iter().step_by(MIX_STRIDE).collect();
        let per_mix = parallel(mixes, 2, |pick| {
            let apps = pick
                .iter()
                .map(|&i| {
                    let mut a = pool.apps[i].clone();
                    for p in &mut a.phases {
                        p.instructions /= SHORTEN;
                    }
                    a
                })
                .collect();
            let w = Workload {
                apps,
                max_seconds: 600.0,
                ..pool.clone()
            };
            let times: Vec<Vec<f64>> = PAIRINGS
                .iter()
                .map(|p| {
                    let r = run(
                        &m,
                        &w,
                        Driver::Binding {
                            name: "pairing",
                            cpus: p.iter().map(|&c| vec![c]).collect(),
                        },
                        &RunOptions::default(),
                        &mut |_| {},
                    );
                    assert!(r.finished);
                    w.apps
                        .iter()
                        .map(|a| r.app_runtime_s(&a.name).unwrap())
                        .collect()
                })
                .collect();
            let best = (0..3)
                .min_by(|&x, &y| {
                    let s = |k: usize| times[k].iter().sum::<f64>();
                    s(x).total_cmp(&s(y))
                })
                .unwrap();
            (0..4)
                .map(|i| {
                    let worst = (0..3).map(|k| times[k][i]).fold(0.0, f64::max);
                    (
                        pool.apps[pick[i]].name.clone(),
                        100.0 * (worst / times[best][i] - 1.0),
                    )
                })
                .collect::<Vec<_>>()
        });
        let mut gains: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (name, g) in per_mix.into_iter().flatten() {
            gains.entry(name).or_default().push(g);
        }
        let per: Vec<String> = gains
            .iter()
            .map(|(n, v)| {
                let max = v.iter().copied().fold(f64::MIN, f64::max);
                format!("{n} {max:.1}/{:.1}", mean_rsd(v).0)
            })
            .collect();
        eprintln!(
            "  [Symbiosis-Bloom], best pairing over the worst, per program max/mean %: {}",
            per.join(", ")
        );
        gains
    })
}

/// \[Symbiosis-Bloom\] abstract and Fig. 11: symbiotic allocation up to 54 % faster
/// (mcf) over a program's worst pairing, natively.
#[test]
fn seed003_symbiotic_pairing_up_to_54_percent() {
    let (name, max) = seed003()
        .iter()
        .map(|(n, v)| (n, v.iter().copied().fold(f64::MIN, f64::max)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    eprintln!("  [Symbiosis-Bloom]: the largest gain is {name}'s");
    row(
        "003 pairing gain, max over programs and mixes, %",
        "54",
        max,
    );
    // Measured 18.9 % (omnetpp; all 495 mixes, the best of the three
    // pairings) since M8 charges each switch-in its cache refill; 15.9 %
    // (mcf, as in the paper) before, when a time slice cost nothing.
    // The refill is larger for a cache-sensitive program whose partner
    // on its core evicts it, so the pairing matters more for omnetpp and
    // mcf. Tolerance 3 points: the pairings are bound runs,
    // deterministic; 3 points is a change of the cache or slice model.
    within("003 max", max, 18.9, 3.0);
}

/// \[Symbiosis-Bloom\] abstract: 22 % on average.
#[test]
fn seed003_symbiotic_pairing_22_percent_on_average() {
    let all: Vec<f64> = seed003().values().flatten().copied().collect();
    let mean = mean_rsd(&all).0;
    row(
        "003 pairing gain, mean over programs and mixes, %",
        "22",
        mean,
    );
    // Measured 2.9 % (all 495 mixes) with M8's refill; 3.4 % before.
    // The refill lengthens every pairing's runs, most where two
    // cache-sensitive programs alternate on one core, which is what
    // [Symbiosis-Bloom] pairs to keep them from co-running, so the gain of the
    // best pairing over the worst shrinks on average. Tolerance 1 point,
    // as above.
    within("003 mean", mean, 2.9, 1.0);
}

// ---------------------------------------------------------------------
// [Blagodurov11] (§1, §3.2, §5, Table 1): DI-Plain,
// DI-Migrate and DINO against Linux on barcelona-4s.

/// Seeds per policy for \[Blagodurov11\]'s rows (dino.rs: 10).
const SEEDS_004: u64 = 10;
const POLICIES_004: [&str; 4] = ["default", "di-plain", "di-migrate", "dino"];

/// Per policy, per job: mean run time of a process (over its copies and
/// the seeds) and its node migrations per process and hour.
type Jobs = BTreeMap<&'static str, BTreeMap<String, (f64, f64)>>;

fn seed004(name: &str) -> Jobs {
    let w = scenario::builtin(name).unwrap().unwrap();
    let m = Machine::preset(&w.machine).unwrap();
    let jobs: Vec<(&'static str, u64)> = POLICIES_004
        .iter()
        .flat_map(|&p| (0..SEEDS_004).map(move |s| (p, s)))
        .collect();
    let runs: Vec<(&'static str, RunResult)> = parallel(jobs, 2, |(p, seed)| {
        let kind = PolicyKind::from_name(p).unwrap();
        let opts = RunOptions {
            seed,
            ..RunOptions::default()
        };
        let r = run(&m, &w, Driver::Policy(&kind), &opts, &mut |_| {});
        assert!(r.finished, "{name} {p} seed {seed}");
        (p, r)
    });
    let mut out: Jobs = BTreeMap::new();
    for p in POLICIES_004 {
        let mut sums: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
        for a in runs
            .iter()
            .filter(|(q, _)| *q == p)
            .flat_map(|(_, r)| &r.runs)
        {
            let e = sums.entry(job_of(&a.app).to_string()).or_default();
            e.0 += a.runtime_s().unwrap();
            e.1 += a.node_migrations_per_thread_hour().unwrap();
            e.2 += 1.0;
        }
        let jobs = sums
            .into_iter()
            .map(|(j, (t, m, n))| (j, (t / n, m / n)))
            .collect();
        out.insert(p, jobs);
    }
    for (p, jobs) in &out {
        let line: Vec<String> = jobs
            .iter()
            .map(|(j, (t, m))| {
                let base = out["default"][j].0;
                format!("{j} {:+.1} % {m:.0}/h", 100.0 * (t / base - 1.0))
            })
            .collect();
        eprintln!("  [Blagodurov11] {name} {p:<10} {}", line.join(", "));
    }
    out
}

fn spec004() -> &'static Jobs {
    static J: OnceLock<Jobs> = OnceLock::new();
    J.get_or_init(|| seed004("spec-barcelona"))
}

fn mpi004() -> &'static Jobs {
    static J: OnceLock<Jobs> = OnceLock::new();
    J.get_or_init(|| seed004("mpi-barcelona"))
}

/// Over the jobs: the largest change of `policy` against default,
/// percent, signed so that positive is what the headline says (`better`:
/// 1 - policy / default; otherwise policy / default - 1).
fn up_to(jobs: &Jobs, policy: &str, better: bool) -> f64 {
    let (job, v) = jobs[policy]
        .iter()
        .map(|(j, (t, _))| {
            let base = jobs["default"][j].0;
            let v = if better {
                100.0 * (1.0 - t / base)
            } else {
                100.0 * (t / base - 1.0)
            };
            (j, v)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    eprintln!("  [Blagodurov11] {policy}: the largest is {job}'s, {v:.1} %");
    v
}

/// \[Blagodurov11\] §1: DINO up to 20 % better than the default Linux scheduler
/// (SPEC CPU workloads, §5 Fig. 9), per application.
#[test]
fn seed004_dino_up_to_20_percent_better_than_linux() {
    let v = up_to(spec004(), "dino", true);
    row("004 DINO vs default, SPEC CPU, best app, %", "20", v);
    // Measured 4.9 % (soplex, 10 seeds). Tolerance 3 points: per app
    // over 10 seeds the simulated Linux's random placement moves a few
    // percent.
    within("004 DINO SPEC", v, 4.9, 3.0);
}

/// \[Blagodurov11\] §1 and §5: SPEC MPI jobs up to 30 % faster under DINO.
#[test]
fn seed004_dino_up_to_30_percent_better_on_mpi_jobs() {
    let v = up_to(mpi004(), "dino", true);
    row("004 DINO vs default, MPI, best job, %", "30", v);
    // Measured 0.0 % (10 seeds), before and after the jobs got their
    // structure (ranks with 0.9-1.1 times the work meeting at a barrier at
    // each phase end; docs/simulator.md, "MPI jobs"). DINO moves no rank:
    // the simulated Linux already runs the 16 busy ranks one per core
    // beside their memory and never moves them, within 1.3 % of the
    // oracle's best static placement, so there is nothing to gain here.
    // Tolerance 3 points, as for the other [Blagodurov11] rows: a change here is
    // a change of the model or of DINO, and the table must say which.
    within("004 DINO MPI", v, 0.0, 3.0);
}

/// \[Blagodurov11\] §3.2 (Fig. 7): DI-Plain up to 36 % worse than the default
/// (SPEC CPU).
#[test]
fn seed004_di_plain_up_to_36_percent_worse() {
    let v = up_to(spec004(), "di-plain", false);
    row("004 DI-Plain vs default, SPEC CPU, worst app, %", "36", v);
    // Measured 1.6 % (namd, 10 seeds). Tolerance 3 points, as for DINO.
    within("004 DI-Plain", v, 1.6, 3.0);
}

/// \[Blagodurov11\] §3.2: DI-Migrate up to 25 % worse on MPI (GAPgeofem).
#[test]
fn seed004_di_migrate_up_to_25_percent_worse_on_mpi() {
    let v = up_to(mpi004(), "di-migrate", false);
    row("004 DI-Migrate vs default, MPI, worst job, %", "25", v);
    // Measured 0.2 % (lu, 10 seeds; 0.0 % before the jobs' structure).
    // The waiting ranks' falling miss rates reorder DI's sorted array every
    // round, but DI-Migrate leaves a rank whose memory is on one node
    // within that node (issue 16, `aside.rs`), so it re-places ranks within
    // nodes only and copies no memory: none of the cost the paper
    // measured. Tolerance 3 points.
    within("004 DI-Migrate MPI", v, 0.2, 3.0);
}

/// \[Blagodurov11\] Table 1: memory migrations per hour of execution per
/// application (MPI: per process), DI-Migrate 11-381, DINO 1-8.
#[test]
fn seed004_table1_memory_migrations_per_hour() {
    let range = |p: &str| {
        let v: Vec<f64> = [spec004(), mpi004()]
            .iter()
            .flat_map(|j| j[p].values().map(|(_, m)| *m))
            .collect();
        (
            v.iter().copied().fold(f64::MAX, f64::min),
            v.iter().copied().fold(f64::MIN, f64::max),
        )
    };
    let (mlo, mhi) = range("di-migrate");
    let (dlo, dhi) = range("dino");
    eprintln!(
        "headline 004 Table 1: paper DI-Migrate 11-381, DINO 1-8 per hour; simulator \
         DI-Migrate {mlo:.0}-{mhi:.0}, DINO {dlo:.0}-{dhi:.0}"
    );
    // Measured DI-Migrate 0-0 and DINO 0-66 per hour (10 seeds; `compare
    // --per-app` shows the same): DINO 5-66 on the SPEC apps (soplex 16,
    // milc 16, lbm 14, gamess 11, namd 21; 17-53 before its layout dealt
    // slots to the cores threads hold, b64719d), 0 on every MPI job. The
    // simulated SPEC apps keep one miss rate for a whole run, and
    // DI-Migrate leaves a thread whose memory is on one node within that
    // node (issue 16, `aside.rs`):
    // the MPI ranks' churn in DI's sorted order (re-placed about 1060
    // times per process and hour, `tests/dino.rs`) stays within nodes and
    // moves no memory. DINO moves a SPEC process across domains about once
    // per run. The paper's order (DI-Migrate far above DINO) is reversed.
    // Tolerances: DI-Migrate's max 5 per hour; DINO's max 15 and its min
    // 5 per hour (a process moves once or twice a run, so 30 runs per
    // app leave a few per hour of noise); on MPI jobs both 0, 5 per hour.
    within("004 Table 1 DI-Migrate max", mhi, 0.0, 5.0);
    within("004 Table 1 DINO max", dhi, 65.9, 15.0);
    for p in ["di-migrate", "dino"] {
        let mpi = mpi004()[p]
            .values()
            .map(|(_, m)| *m)
            .fold(f64::MIN, f64::max);
        within(&format!("004 Table 1 {p} max over MPI"), mpi, 0.0, 5.0);
    }
    let spec_lo = spec004()["dino"]
        .values()
        .map(|(_, m)| *m)
        .fold(f64::MAX, f64::min);
    within("004 Table 1 DINO min over SPEC", spec_lo, 5.4, 5.0);
}
