//! Tests of `model`.

use super::llc::{water_fill, water_fill_all, water_fill_in};
use super::*;
use crate::thread::ThreadModel;

pub(super) fn chase(ws: u64) -> ThreadModel {
    ThreadModel {
        cpi_core: 4.8,
        uncore_pki: 250.0,
        working_set: ws,
        pattern: Pattern::Uniform,
        mlp: 1.0,
        shared_writes_pki: 0.0,
    }
}

/// A thread of `model` on `cpu` for `share` of the time, sharing nothing.
fn runner<'a>(cpu: usize, share: f64, model: &'a ThreadModel, pages: &'a [f64]) -> Runner<'a> {
    Runner {
        cpu,
        share,
        model,
        pages,
        group: 0,
        shared_bytes: 0,
        shares: false,
        prev_ips: 0.0,
    }
}

fn solo(m: &Machine, model: &ThreadModel, cpu: usize, pages: &[f64]) -> Speed {
    let mut s = Solver::new(m, Constants::default());
    let mut out = Vec::new();
    s.solve(
        &[runner(cpu, 1.0, model, pages)],
        &Background::default(),
        &mut out,
    );
    out[0]
}

#[test]
fn remote_memory_costs_nothing_while_the_working_set_fits() {
    let m = Machine::preset("westmere-2s").unwrap();
    let fits = chase(8 << 20);
    let (local, remote) = (
        solo(&m, &fits, 0, &[1.0, 0.0]),
        solo(&m, &fits, 8, &[1.0, 0.0]),
    );
    assert_eq!(local.llc_miss_per_instr, 0.0);
    assert!((local.ips - remote.ips).abs() < 1e-6 * local.ips);
    let big = chase(64 << 20);
    let (local, remote) = (
        solo(&m, &big, 0, &[1.0, 0.0]),
        solo(&m, &big, 8, &[1.0, 0.0]),
    );
    assert!(
        remote.memory_ns > local.memory_ns + 50.0,
        "{local:?} {remote:?}"
    );
    assert!(remote.uncore_penalty_cycles > local.uncore_penalty_cycles);
    // A thread alone has the whole LLC.
    assert_eq!(local.llc_share, 12.0 * 1048576.0);
}

#[test]
fn water_filling_caps_at_the_working_set_and_passes_the_rest_on() {
    // Equal weights: 4 each of 12, but the first needs only 1.
    let first = water_fill(&[(1.0, 1.0), (1.0, 100.0), (1.0, 100.0)], 12.0);
    assert_eq!(first, 1.0);
    // The uncapped ones then split the remaining 11 evenly.
    let second = water_fill(&[(1.0, 100.0), (1.0, 1.0), (1.0, 100.0)], 12.0);
    assert_eq!(second, 5.5);
    // By weight when nobody is capped.
    assert_eq!(water_fill(&[(3.0, 100.0), (1.0, 100.0)], 8.0), 6.0);
}

#[test]
fn a_time_shared_co_runner_counts_per_combination() {
    // core2duo: X on CPU 0; a cache hog and a light thread time-share
    // CPU 1. X co-runs half of its time with each.
    let m = Machine::preset("core2duo").unwrap();
    let model = |uncore_pki, llc_mpki, alpha, ws| ThreadModel {
        cpi_core: 0.8,
        uncore_pki,
        working_set: ws,
        pattern: Pattern::PowerLaw { llc_mpki, alpha },
        mlp: 1.5,
        shared_writes_pki: 0.0,
    };
    let x = model(80.0, 25.0, 0.7, 1 << 30);
    let hog = model(35.0, 28.0, 0.1, 32 << 20);
    let light = model(3.0, 0.3, 0.1, 1 << 20);
    let pages = [1.0];
    let mut s = Solver::new(&m, Constants::default());
    let mut with = |others: &[(&ThreadModel, f64)]| {
        let mut rs = vec![runner(0, 1.0, &x, &pages)];
        rs.extend(others.iter().map(|&(o, share)| runner(1, share, o, &pages)));
        let mut out = Vec::new();
        s.solve(&rs, &Background::default(), &mut out);
        out[0]
    };
    let (h, l) = (with(&[(&hog, 1.0)]), with(&[(&light, 1.0)]));
    let both = with(&[(&hog, 0.5), (&light, 0.5)]);
    // Next to the light thread X has most of the 4 MiB; next to the
    // hog, less. Half the time each: the mean share, and a miss
    // rate between the two, nearer the light one's (the fast half runs
    // more instructions).
    assert!(l.llc_share > 0.8 * (4 << 20) as f64, "{l:?}");
    assert!(h.llc_share < l.llc_share - 512.0 * 1024.0, "{h:?} {l:?}");
    let mean_share = 0.5 * (h.llc_share + l.llc_share);
    assert!((both.llc_share - mean_share).abs() < 0.05 * mean_share);
    let mean_mu = 0.5 * (h.llc_miss_per_instr + l.llc_miss_per_instr);
    assert!(both.llc_miss_per_instr > l.llc_miss_per_instr);
    assert!(both.llc_miss_per_instr < mean_mu, "{both:?} {h:?} {l:?}");
    // The speed is the harmonic mean of the two combinations' speeds.
    let harmonic = 2.0 / (1.0 / h.ips + 1.0 / l.ips);
    assert!((both.ips - harmonic).abs() < 0.05 * harmonic);
}

#[test]
fn only_sharers_pay_for_shared_lines() {
    let m = Machine::preset("westmere-2s").unwrap();
    let model = ThreadModel::microbench(0, 4096);
    let mut s = Solver::new(&m, Constants::default());
    let pages = [1.0, 0.0];
    let runner = |cpu, shares| Runner {
        cpu,
        share: 1.0,
        model: &model,
        pages: &pages,
        group: 0,
        shared_bytes: 4096,
        shares,
        prev_ips: 0.0,
    };
    let mut out = Vec::new();
    // Two sharers on two sockets: each write waits for the other's line.
    s.solve(
        &[runner(0, true), runner(8, true)],
        &Background::default(),
        &mut out,
    );
    assert!(out[0].transfers_per_instr > 0.0);
    let shared = out[0].ips;
    // The second thread does not share: the first writes alone.
    s.solve(
        &[runner(0, true), runner(8, false)],
        &Background::default(),
        &mut out,
    );
    assert_eq!(out[0].transfers_per_instr, 0.0);
    assert!(out[0].ips > 2.0 * shared, "{} vs {shared}", out[0].ips);
}

#[test]
fn cfs_slices_follow_the_kernels_defaults_scaled_by_the_cpu_count() {
    // 2 CPUs: factor 1 + ilog2(2) = 2, latency 12 ms, granularity 1.5 ms.
    let duo = Solver::new(&Machine::preset("core2duo").unwrap(), Constants::default());
    assert!((duo.slice_s(2) - 0.006).abs() < 1e-12);
    assert!((duo.slice_s(4) - 0.003).abs() < 1e-12);
    assert!((duo.slice_s(16) - 0.0015).abs() < 1e-12);
    // 16 CPUs: the factor stops at 8 CPUs, 4: 24 ms and 3 ms.
    let w = Solver::new(
        &Machine::preset("westmere-2s").unwrap(),
        Constants::default(),
    );
    assert!((w.slice_s(2) - 0.012).abs() < 1e-12);
    assert!((w.slice_s(10) - 0.003).abs() < 1e-12);
}

#[test]
fn a_refill_costs_the_misses_beyond_the_steady_state() {
    // Power law c^-a from an empty cache: a / (1 + a) of the content.
    for alpha in [0.1, 0.5, 0.7] {
        let got = slices::excess_misses(|c: f64| c.powf(-alpha), 0.0, 1000.0);
        let want = 1000.0 * alpha / (1.0 + alpha);
        assert!((got - want).abs() < 0.02 * want, "{alpha}: {got} {want}");
    }
    // A set that fits refills whole; nothing lost costs nothing.
    let fits = |c: f64| 1.0 - (c / 1000.0).min(1.0);
    assert!((slices::excess_misses(fits, 200.0, 1000.0) - 800.0).abs() < 1e-9);
    assert_eq!(slices::excess_misses(fits, 1000.0, 1000.0), 0.0);
}

#[test]
fn only_threads_that_time_share_a_cpu_pay_for_switches() {
    let m = Machine::preset("core2duo").unwrap();
    let model = |uncore_pki, llc_mpki, alpha, ws| ThreadModel {
        cpi_core: 0.8,
        uncore_pki,
        working_set: ws,
        pattern: Pattern::PowerLaw { llc_mpki, alpha },
        mlp: 1.5,
        shared_writes_pki: 0.0,
    };
    let x = model(80.0, 25.0, 0.7, 1 << 30);
    let hog = model(35.0, 28.0, 0.1, 32 << 20);
    let light = model(3.0, 0.3, 0.1, 1 << 20);
    let pages = [1.0];
    let mut s = Solver::new(&m, Constants::default());
    let mut refill = |rs: &[Runner<'_>]| {
        let mut speeds = Vec::new();
        s.solve(rs, &Background::default(), &mut speeds);
        let mut out = Vec::new();
        s.slice_refill(rs, &speeds, &mut out);
        out
    };
    // One thread per CPU: nothing, whoever runs beside it.
    let alone = refill(&[runner(0, 1.0, &x, &pages), runner(1, 1.0, &hog, &pages)]);
    assert_eq!(alone, vec![0.0, 0.0]);
    // X time-sharing CPU 0 with the hog loses more of its cache than
    // with the light thread, and pays at most its whole CPU share.
    let with_hog = refill(&[runner(0, 0.5, &x, &pages), runner(0, 0.5, &hog, &pages)]);
    let with_light = refill(&[runner(0, 0.5, &x, &pages), runner(0, 0.5, &light, &pages)]);
    assert!(
        with_hog[0] > 4.0 * with_light[0],
        "{with_hog:?} {with_light:?}"
    );
    assert!(with_hog[0] > 0.0 && with_hog[0] <= 0.5e9, "{with_hog:?}");
    // The streaming hog loses little by losing its lines (a flat curve).
    assert!(with_hog[1] < with_hog[0], "{with_hog:?}");
    // Switched off, nothing.
    let mut c = Constants::default();
    c.mechanisms.slice_refill = false;
    let mut off = Solver::new(&m, c);
    let rs = [runner(0, 0.5, &x, &pages), runner(0, 0.5, &hog, &pages)];
    let mut speeds = Vec::new();
    off.solve(&rs, &Background::default(), &mut speeds);
    let mut out = Vec::new();
    off.slice_refill(&rs, &speeds, &mut out);
    assert_eq!(out, vec![0.0, 0.0]);
}

proptest::proptest! {
    /// Splitting an LLC once for all its threads (`Solver::split_once`)
    /// gives each the share the per-thread water-fill gives it, up to
    /// rounding.
    #[test]
    fn water_fill_all_agrees_with_each_items_own(
        items in proptest::collection::vec((0.0f64..1e9, 1.0f64..1e8), 1..40),
        size in 1.0f64..1e8,
    ) {
        let mut open = Vec::new();
        let mut parts = Vec::new();
        water_fill_all(&items, size, &mut open, &mut parts);
        for k in 0..items.len() {
            let mut own = vec![items[k]];
            own.extend(items.iter().enumerate().filter(|&(j, _)| j != k).map(|(_, x)| *x));
            let one = water_fill_in(&own, size, &mut open);
            proptest::prop_assert!(
                (one - parts[k]).abs() <= 1e-6 * size.max(1.0),
                "item {k}: {one} alone, {} all at once", parts[k]
            );
        }
        let total: f64 = parts.iter().sum();
        proptest::prop_assert!(total <= size * (1.0 + 1e-9));
    }
}
