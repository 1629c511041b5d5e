//! The model against what the papers measured on real machines
//! (docs/simulator.md, "Validation"). Each test names the
//! figure it reproduces and the tolerance it allows; where the model does
//! not reach a target the test is ignored with the measured values.

use numaplace_sim::model::Mechanisms;
use numaplace_sim::run::{Driver, RunOptions, run};
use numaplace_sim::{
    AppKind, AppSpec, LinuxModel, Machine, MemoryPlacement, Phase, RunResult, ThreadModel, Workload,
};

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// The micro-benchmark of \[Rao13\] Fig. 3: `threads` threads with
/// `ws` private bytes each and a `shared` area, about `hops` list hops each.
fn micro(machine: &str, threads: u32, ws: u64, shared: u64, memory: MemoryPlacement) -> Workload {
    let model = ThreadModel::microbench(ws, shared);
    // Enough loops for about 2e7 hops (or 2e6 shared lines) per thread.
    let per_loop = (ws as f64 / 64.0).max(shared as f64 / 64.0).max(1.0);
    let loops = (2e7 / per_loop).max(1.0).ceil();
    let instructions = ThreadModel::microbench_instructions(ws, shared, loops);
    Workload {
        name: "micro".into(),
        description: String::new(),
        machine: machine.into(),
        apps: vec![AppSpec {
            name: "micro".into(),
            kind: AppKind::Process,
            threads,
            phases: vec![Phase {
                instructions,
                model,
            }],
            shared_bytes: shared,
            sharers: threads,
            memory,
            cpus: None,
            cpus_by_cgroup: false,
            start_s: 0.0,
            runs: 1,
            job: None,
        }],
        step_ms: 10.0,
        max_seconds: 36_000.0,
        mismatch_percent: None,
        linux: LinuxModel::default(),
    }
}

fn bound(w: &Workload, cpus: &[usize]) -> RunResult {
    let m = Machine::preset(&w.machine).unwrap();
    let r = run(
        &m,
        w,
        Driver::Binding {
            name: "bound",
            cpus: vec![cpus.to_vec()],
        },
        &RunOptions::default(),
        &mut |_| {},
    );
    assert!(r.finished, "{r:?}");
    r
}

/// \[Rao13\] measures a multithreaded run as the mean of its threads'
/// run times (§2.2).
fn runtime(r: &RunResult) -> f64 {
    r.runs[0].mean_thread_s().unwrap()
}

// westmere-2s dense CPUs: package 0 is 0-7, package 1 is 8-15; core k is
// CPUs 2k and 2k+1 (its two hardware threads).
const SOCKET0: [usize; 4] = [0, 2, 4, 6];
const SOCKET1: [usize; 4] = [8, 10, 12, 14];

/// Target 1, \[Rao13\] Fig. 4a: one thread, memory on node 0, run on node 0
/// (local) or node 1 (remote). No penalty while the working set fits the
/// 12 MiB LLC; about 26 % at 16 MiB and 44 % at 256 MiB (±4 points);
/// growing with the working set (each step at least as large, 1 point
/// of slack).
#[test]
fn target_1_remote_penalty_grows_with_the_working_set() {
    let mut last = 0.0;
    let mut seen = Vec::new();
    for mib in [1u64, 4, 8, 12, 16, 32, 64, 128, 256] {
        let w = micro("westmere-2s", 1, mib * MIB, 0, MemoryPlacement::Node(0));
        let ratio = runtime(&bound(&w, &[8])) / runtime(&bound(&w, &[0]));
        seen.push((mib, ratio));
        if mib <= 12 {
            assert!((ratio - 1.0).abs() < 0.02, "{mib} MiB: {ratio:.3}");
        }
        assert!(ratio >= last - 0.01, "{seen:?}");
        last = ratio;
    }
    eprintln!("remote/local: {seen:?}");
    let at = |m: u64| seen.iter().find(|s| s.0 == m).unwrap().1;
    assert!((at(16) - 1.26).abs() < 0.04, "{seen:?}");
    assert!((at(256) - 1.44).abs() < 0.04, "{seen:?}");
}

/// Target 2, \[Rao13\] Fig. 4b: 4 threads, no sharing, each thread's data
/// local. Packing them on one LLC and spreading them 2 + 2 are the same
/// while the aggregate working set fits one LLC (±2 %); beyond it,
/// spreading wins by up to about 33 % (we accept a best gain of 20-45 %
/// of the packed run time) at the paper's sizes (powers of two); the gap
/// shrinks once a single thread's set outgrows the LLC (at 1 GiB
/// aggregate, under 60 % of the best gap). Between the paper's points the
/// model's knee is sharper than a real cache's: at 24 MiB aggregate it
/// gives 57 % (each thread's 6 MiB fits a 12 MiB LLC shared by two
/// exactly, and not at all by four).
#[test]
fn target_2_llc_contention() {
    let mut seen = Vec::new();
    for agg in [4u64, 8, 16, 32, 64, 128, 256, 512, 1024] {
        let w = micro(
            "westmere-2s",
            4,
            agg * MIB / 4,
            0,
            MemoryPlacement::FirstTouch,
        );
        let packed = runtime(&bound(&w, &SOCKET0));
        let spread = runtime(&bound(&w, &[0, 2, 8, 10]));
        let gain = 1.0 - spread / packed;
        seen.push((agg, gain));
        if agg <= 8 {
            assert!(gain.abs() < 0.02, "{agg} MiB: {gain:.3}");
        }
    }
    eprintln!("spread gain over packed: {seen:?}");
    let best = seen.iter().map(|s| s.1).fold(f64::MIN, f64::max);
    assert!((0.20..=0.45).contains(&best), "{seen:?}");
    let last = seen.last().unwrap().1;
    assert!(last < 0.6 * best, "{seen:?}");
}

fn one_line_sharing(n: usize) -> (f64, f64) {
    let w = micro("westmere-2s", n as u32, 0, 64, MemoryPlacement::Node(0));
    let within: Vec<usize> = if n <= 4 {
        SOCKET0[..n].to_vec()
    } else {
        (0..n).collect()
    };
    let across: Vec<usize> = SOCKET0[..n / 2]
        .iter()
        .chain(&SOCKET1[..n / 2])
        .copied()
        .collect();
    (runtime(&bound(&w, &within)), runtime(&bound(&w, &across)))
}

/// Target 3, \[Rao13\] Fig. 4c: threads sharing one cache line (no private
/// data), all on one socket or half on each: across sockets is always
/// slower.
#[test]
fn target_3_sharing_across_sockets_is_slower() {
    for n in [2, 4, 8] {
        let (within, across) = one_line_sharing(n);
        assert!(across > within * 1.05, "{n} threads: {within} vs {across}");
    }
}

/// Target 3, second half: the relative gap peaks at 4 threads.
#[test]
#[ignore = "the model's gap is largest at 2 threads (see the note in docs/simulator.md)"]
fn target_3_gap_peaks_at_four_threads() {
    let gaps: Vec<f64> = [2, 4, 8]
        .iter()
        .map(|&n| {
            let (w, a) = one_line_sharing(n);
            a / w - 1.0
        })
        .collect();
    eprintln!("across/within - 1 at 2, 4, 8 threads: {gaps:?}");
    assert!(gaps[1] > gaps[0] && gaps[1] > gaps[2], "{gaps:?}");
}

/// Intra-S (all 4 threads on socket 0, with the memory) over Inter-S (2 + 2).
fn intra_inter(agg: u64, shared: u64) -> (RunResult, RunResult) {
    let w = micro("westmere-2s", 4, agg / 4, shared, MemoryPlacement::Node(0));
    (bound(&w, &SOCKET0), bound(&w, &[0, 2, 8, 10]))
}

/// Target 4, \[Rao13\] Fig. 5b: 16 MiB aggregate, memory on node 0. Inter-S
/// wins below a shared area of about 32 KiB, Intra-S above it; we accept
/// a crossover between 8 and 128 KiB.
#[test]
fn target_4_sharing_size_decides_between_packing_and_spreading() {
    let mut seen = Vec::new();
    for kib in [0u64, 4, 8, 16, 32, 64, 128, 256, 1024] {
        let (intra, inter) = intra_inter(16 * MIB, kib * KIB);
        seen.push((kib, runtime(&inter) / runtime(&intra)));
    }
    eprintln!("inter/intra by shared KiB: {seen:?}");
    let first_pack = seen.iter().find(|s| s.1 > 1.0).map(|s| s.0);
    assert!(seen[0].1 < 1.0, "{seen:?}");
    assert!(
        first_pack.is_some_and(|k| (8..=128).contains(&k)),
        "{seen:?}"
    );
    assert!(seen.iter().rev().take(3).all(|s| s.1 > 1.0), "{seen:?}");
}

/// Target 4, \[Rao13\] Fig. 5c: the three factors together (128 KiB
/// shared, memory on node 0): packing is better at small working sets,
/// worse in the middle, better again at large ones.
#[test]
fn target_4_three_factors() {
    let mut seen = Vec::new();
    for mib in [4u64, 8, 16, 24, 32, 64, 128, 256] {
        let (intra, inter) = intra_inter(mib * MIB, 128 * KIB);
        seen.push((mib, runtime(&inter) / runtime(&intra)));
    }
    eprintln!("inter/intra by aggregate MiB: {seen:?}");
    let pack_first = seen[0].1 > 1.0;
    let spread_mid = seen.iter().any(|s| s.1 < 1.0);
    let pack_last = seen.last().unwrap().1 > 1.0;
    assert!(pack_first && spread_mid && pack_last, "{seen:?}");
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    cov / (vx * vy).sqrt()
}

/// Target 5, \[Rao13\] §3.2 / Fig. 7: over the Fig. 5 runs, the change of
/// run time from Intra-S to Inter-S follows the change of the uncore
/// penalty (paper r = 0.91) far better than the change of the LLC miss
/// rate (r = 0.61). We require r ≥ 0.85 for the penalty and at least 0.2
/// more than for the miss rate.
#[test]
fn target_5_uncore_penalty_tracks_runtime() {
    let mut configs = Vec::new();
    for mib in [4u64, 8, 16, 32, 64, 128] {
        configs.push((mib * MIB, 0));
        configs.push((mib * MIB, 128 * KIB));
    }
    for kib in [4u64, 16, 64, 256] {
        configs.push((16 * MIB, kib * KIB));
    }
    let (mut rt, mut pen, mut miss) = (Vec::new(), Vec::new(), Vec::new());
    for (agg, shared) in configs {
        let (intra, inter) = intra_inter(agg, shared);
        let rel = |a: f64, b: f64| if b.abs() < 1e-12 { 0.0 } else { (a - b) / b };
        rt.push(rel(runtime(&inter), runtime(&intra)));
        pen.push(rel(
            inter.uncore_penalty_cycles,
            intra.uncore_penalty_cycles,
        ));
        miss.push(rel(inter.llc_mpki, intra.llc_mpki));
    }
    let (rp, rm) = (pearson(&rt, &pen), pearson(&rt, &miss));
    eprintln!("r(runtime, penalty) = {rp:.3}, r(runtime, LLC MPKI) = {rm:.3}");
    assert!(rp >= 0.85, "{rp}");
    assert!(rp >= rm + 0.2, "{rp} vs {rm}");
}

/// \[Blagodurov11\] §2.1 (Fig. 3-5) on barcelona-4s: a target application and
/// three competing devils, each placed on a core (node k holds cores
/// 4k-4k+3) with its memory bound to a node. The thread models are the
/// shipped `spec-barcelona` scenario's. Returns the target's run time.
fn contention_case(
    target_cpu: usize,
    target_mem: u32,
    comp_cpus: [usize; 3],
    comp_mem: u32,
    mechanisms: Mechanisms,
) -> f64 {
    let spec = numaplace_sim::scenario::builtin("spec-barcelona")
        .unwrap()
        .unwrap();
    let app = |name: &str| spec.apps.iter().find(|a| a.name == name).unwrap().clone();
    let mut target = app("milc");
    target.runs = 1;
    target.memory = MemoryPlacement::Node(target_mem);
    let mut apps = vec![target];
    for name in ["mcf", "omnetpp", "soplex"] {
        let mut c = app(name);
        // The competitors keep running while the target does.
        c.runs = 1;
        for p in &mut c.phases {
            p.instructions *= 20.0;
        }
        c.memory = MemoryPlacement::Node(comp_mem);
        apps.push(c);
    }
    let w = Workload {
        apps,
        max_seconds: 100_000.0,
        ..spec
    };
    let m = Machine::preset("barcelona-4s").unwrap();
    let cpus = std::iter::once(vec![target_cpu])
        .chain(comp_cpus.iter().map(|&c| vec![c]))
        .collect();
    let mut opts = RunOptions::default();
    opts.constants.mechanisms = mechanisms;
    let r = run(
        &m,
        &w,
        Driver::Binding { name: "case", cpus },
        &opts,
        &mut |_| {},
    );
    r.runs
        .iter()
        .find(|a| a.app == "milc")
        .and_then(|a| a.runtime_s())
        .expect("the target finishes")
}

struct Cases {
    /// Degradation against scenario 0 of: the target's memory remote,
    /// alone (2); remote and shared with the devils' memory (3); scenario
    /// 7 (sharing the LLC with the devils, memory remote with theirs).
    s2: f64,
    s3: f64,
    s7: f64,
    /// Of scenario 7's degradation, the part each mechanism accounts for
    /// (switched off one at a time, normalised to sum to 1): cache,
    /// memory controller, interconnect, remote latency.
    parts: [f64; 4],
}

fn seed_004_cases() -> Cases {
    let all = Mechanisms::default();
    let base = contention_case(0, 0, [8, 9, 10], 2, all);
    let deg = |t: f64| t / base - 1.0;
    let s2 = deg(contention_case(4, 0, [8, 9, 10], 2, all));
    let s3 = deg(contention_case(4, 0, [0, 1, 2], 0, all));
    let s7_case = |m| contention_case(0, 1, [1, 2, 3], 1, m);
    let s7 = deg(s7_case(all));
    let without = [
        Mechanisms {
            cache_sharing: false,
            ..all
        },
        Mechanisms {
            controller_queueing: false,
            ..all
        },
        Mechanisms {
            link_queueing: false,
            ..all
        },
        Mechanisms {
            remote_latency: false,
            ..all
        },
    ];
    let gains: Vec<f64> = without
        .iter()
        .map(|&m| (s7 - deg(s7_case(m))).max(0.0))
        .collect();
    let total: f64 = gains.iter().sum();
    let parts = [0, 1, 2, 3].map(|k| gains[k] / total);
    eprintln!(
        "degradation: scenario 2 {:.0} %, 3 {:.0} %, 7 {:.0} %; scenario 7 by cause: cache {:.0} %, controller {:.0} %, interconnect {:.0} %, remote latency {:.0} %",
        100.0 * s2,
        100.0 * s3,
        100.0 * s7,
        100.0 * parts[0],
        100.0 * parts[1],
        100.0 * parts[2],
        100.0 * parts[3]
    );
    Cases { s2, s3, s7, parts }
}

/// Target 6, \[Blagodurov11\] Fig. 4-5, the trends: a devil whose memory is
/// remote and shared with three other devils' memory (Scenario 3) degrades
/// far more than with its memory remote alone (Scenario 2: at least twice as
/// much, and by at least 30 %); Scenario 7 is the worst; of its
/// degradation the cache is a minor part (at most 30 %; paper: at most
/// about 20 %) and the memory controller and interconnect together the
/// major one (at least half).
#[test]
fn target_6_contention_factors() {
    let c = seed_004_cases();
    assert!(c.s3 >= 0.3 && c.s3 >= 2.0 * c.s2, "{:.3} {:.3}", c.s2, c.s3);
    assert!(c.s7 >= c.s3, "{} vs {}", c.s7, c.s3);
    assert!(c.parts[0] <= 0.3, "{:?}", c.parts);
    assert!(c.parts[1] + c.parts[2] >= 0.5, "{:?}", c.parts);
}

/// Target 6, the size: milc in Scenario 3 degrades by about 110 % (we
/// would accept 80-150 %).
#[test]
#[ignore = "the model reaches about half of it (see docs/simulator.md, validation)"]
fn target_6_scenario_3_degradation_size() {
    let c = seed_004_cases();
    assert!((0.8..=1.5).contains(&c.s3), "{}", c.s3);
}
