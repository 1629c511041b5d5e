//! The power model fitted to this machine's own energy readings while the
//! policy runs: \[Bae12\] §5.2 fits Fig. 7's form, P = idle + a·p + b·l, to
//! measurements of the testbed; a live host has RAPL (the snapshot's
//! energy readings), and the simulator its energy model, so every round
//! gives one row: the machine's average watts over the interval against
//! the p and l of that interval.
//!
//! p and l come from the threads' CPU time over the interval (task clock,
//! else utime + stime), charged to the CPU each last ran on: per physical
//! core with utilisations u₁ ≥ u₂ of its hardware threads, p gets u₁ (the
//! core is busy at least that share of the time) and l gets u₂ (both
//! threads busy together at least that share): Eq. 1's overlap estimate.
//! Threads that moved during the interval are charged to one CPU, so
//! busy machines whose threads wander blur p and l; many rounds average
//! that out.
//!
//! The fit replaces the coefficient file's power model once it is
//! trustworthy: enough rounds, p and l both seen to vary, R² at least
//! [`MIN_R2`], and watts per core positive. Until then (and on machines
//! without energy readings) the file's model decides. RAPL covers the
//! packages (and DRAM where it has a zone), not the wall: its idle term is
//! lower than a wall meter's, which makes the interleaved / local ratio a
//! little larger than Fig. 7's would.

use std::collections::{HashMap, VecDeque};

use numaplace_model::{Counter, Snapshot, TaskId, Topology};

use super::fit::least_squares;
use super::models::PowerModel;

/// Rounds kept for the fit (a sliding window, so a machine whose power
/// changes, e.g. with its frequency, is followed).
pub const WINDOW: usize = 600;
/// Rounds before a fit is tried.
pub const MIN_ROUNDS: usize = 30;
/// Below this the fitted model is not used.
pub const MIN_R2: f64 = 0.9;
/// p and l must each span at least this many cores over the window, so
/// both coefficients are measured rather than extrapolated.
const MIN_SPREAD: f64 = 1.0;

/// Rows of (p, l, watts), and the model fitted to them.
#[derive(Debug, Default)]
pub struct PowerFit {
    /// Per thread, its CPU nanoseconds (task clock or ticks) last round.
    cpu_ns: HashMap<TaskId, u64>,
    rows: VecDeque<[f64; 3]>,
    fitted: Option<PowerModel>,
    /// Rounds with an energy reading.
    pub rounds: u64,
}

/// The machine's average watts over the interval from its energy zones:
/// the platform zone (`psys`) where there is one, which covers the rest;
/// else the top-level package and DRAM zones summed (their sub-zones,
/// `intel-rapl:0:0`, are parts of them, and `intel-rapl-mmio` zones repeat
/// the packages through another interface); the simulator's one zone.
fn watts(s: &Snapshot) -> Option<f64> {
    if s.interval_ns == 0 {
        return None;
    }
    let top: Vec<_> = s
        .machine
        .energy
        .iter()
        .filter(|z| z.zone.matches(':').count() <= 1 && !z.zone.contains("mmio"))
        .collect();
    let psys: Vec<_> = top.iter().filter(|z| z.name == "psys").copied().collect();
    let zones = if psys.is_empty() { top } else { psys };
    let uj: Option<u64> = zones.iter().map(|z| z.microjoules).sum();
    uj.filter(|_| !zones.is_empty())
        .map(|uj| uj as f64 / (s.interval_ns as f64 / 1e3))
}

impl PowerFit {
    /// Takes one round: its energy and the machine's busy cores.
    pub fn observe(&mut self, s: &Snapshot, topology: &Topology) {
        let ticks_ns = 1e9 / s.machine.clock_ticks.max(1) as f64;
        let mut busy = vec![0.0f64; topology.cpus().len()];
        let mut now = HashMap::with_capacity(s.tasks.len());
        for t in &s.tasks {
            let ns = match s
                .counters
                .get(&t.tid)
                .and_then(|c| c.values.get(&Counter::TaskClock))
            {
                // The task clock is per interval already.
                Some(&d) => d as f64,
                None => {
                    let total = ((t.utime + t.stime) as f64 * ticks_ns) as u64;
                    let before = self.cpu_ns.get(&t.id()).copied();
                    now.insert(t.id(), total);
                    match before {
                        Some(b) => total.saturating_sub(b) as f64,
                        // First seen: no interval yet.
                        None => continue,
                    }
                }
            };
            let Some(cpu) = t
                .last_cpu
                .and_then(|c| topology.cpu_by_os_id(c))
                .map(|c| c.id)
            else {
                continue;
            };
            busy[cpu] += ns / s.interval_ns.max(1) as f64;
        }
        self.cpu_ns = now;
        let Some(w) = watts(s) else {
            return;
        };
        self.rounds += 1;
        let (mut p, mut l) = (0.0, 0.0);
        for core in topology.cores() {
            let mut u: Vec<f64> = core.cpus.iter().map(|&c| busy[c].min(1.0)).collect();
            u.sort_by(|a, b| b.total_cmp(a));
            p += u.first().copied().unwrap_or(0.0);
            l += u.get(1).copied().unwrap_or(0.0);
        }
        if self.rows.len() == WINDOW {
            self.rows.pop_front();
        }
        self.rows.push_back([p, l, w]);
        self.refit();
    }

    fn refit(&mut self) {
        self.fitted = None;
        if self.rows.len() < MIN_ROUNDS {
            return;
        }
        let spread = |i: usize| {
            let (lo, hi) = self.rows.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| {
                (lo.min(r[i]), hi.max(r[i]))
            });
            hi - lo
        };
        if spread(0) < MIN_SPREAD || spread(1) < MIN_SPREAD {
            return;
        }
        let xs: Vec<Vec<f64>> = self.rows.iter().map(|r| vec![r[0], r[1]]).collect();
        let ys: Vec<f64> = self.rows.iter().map(|r| r[2]).collect();
        let Ok(f) = least_squares(&xs, &ys) else {
            return;
        };
        let (a, b) = (f.coefficients[0], f.coefficients[1]);
        if f.r2 >= MIN_R2 && a > 0.0 && b >= 0.0 && f.intercept >= 0.0 {
            self.fitted = Some(PowerModel {
                idle_w: f.intercept,
                per_core_w: a,
                per_smt_w: b,
                r2: Some(f.r2),
                source: Some("fitted to the machine's energy readings".into()),
            });
        }
    }

    /// The fitted model, once trustworthy.
    pub fn model(&self) -> Option<&PowerModel> {
        self.fitted.as_ref()
    }

    /// Rows in the window.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numaplace_model::{CounterDeltas, CpuSet, EnergyDelta, Task};

    const SEC: u64 = 1_000_000_000;

    /// A round on 2 packages x 2 cores x 2 threads (CPUs 0-7, siblings
    /// 0-1, 2-3, ...): one busy thread on each CPU of `busy`, and the
    /// machine drawing `watts` split over two package zones, with a
    /// sub-zone (part of package 0) that must not be counted twice.
    fn round(seq: u64, busy: &[u32], watts: f64) -> Snapshot {
        let mut s = Snapshot {
            seq,
            interval_ns: SEC,
            ..Snapshot::default()
        };
        for (i, &cpu) in busy.iter().enumerate() {
            let tid = 100 + i as i32;
            s.tasks.push(Task {
                tid,
                tgid: 100,
                start_time: 1,
                comm: "busy".into(),
                state: 'R',
                last_cpu: Some(cpu),
                allowed_cpus: CpuSet::parse_list("0-7").unwrap(),
                allowed_mems: CpuSet::parse_list("0").unwrap(),
                confined_cpus: None,
                manager: None,
                utime: 0,
                stime: 0,
                vcpu: None,
            });
            s.counters.insert(
                tid,
                CounterDeltas {
                    values: [(Counter::TaskClock, SEC)].into(),
                    enabled_ns: SEC,
                    running_ns: SEC,
                },
            );
        }
        let uj = (watts * 1e6) as u64;
        let zone = |zone: &str, microjoules| EnergyDelta {
            zone: zone.into(),
            name: "package".into(),
            microjoules: Some(microjoules),
        };
        s.machine.energy = vec![
            zone("intel-rapl:0", uj / 2),
            zone("intel-rapl:0:0", uj / 3),
            zone("intel-rapl:1", uj - uj / 2),
            zone("intel-rapl-mmio:0", uj / 2),
        ];
        s
    }

    #[test]
    fn the_platform_zone_stands_for_the_others() {
        let mut s = round(1, &[0], 100.0);
        assert!((super::watts(&s).unwrap() - 100.0).abs() < 1e-6);
        s.machine.energy.push(EnergyDelta {
            zone: "intel-rapl:2".into(),
            name: "psys".into(),
            microjoules: Some(130_000_000),
        });
        assert!((super::watts(&s).unwrap() - 130.0).abs() < 1e-6);
        // A zone without a reading this round: no row.
        s.machine.energy[4].microjoules = None;
        assert_eq!(super::watts(&s), None);
    }

    fn watts(p: f64, l: f64) -> f64 {
        50.0 + 10.0 * p + 2.0 * l
    }

    #[test]
    fn finds_the_coefficients_of_the_machines_energy() {
        let t = Topology::synthetic("pack:2 core:2 pu:2").unwrap();
        let mut f = PowerFit::default();
        // (busy CPUs, p, l): idle, one thread, two cores, two siblings, all.
        let shapes: [(&[u32], f64, f64); 5] = [
            (&[], 0.0, 0.0),
            (&[0], 1.0, 0.0),
            (&[0, 2], 2.0, 0.0),
            (&[0, 1], 1.0, 1.0),
            (&[0, 1, 2, 3, 4, 5, 6, 7], 4.0, 4.0),
        ];
        for seq in 0..MIN_ROUNDS as u64 + 5 {
            let (busy, p, l) = shapes[seq as usize % shapes.len()];
            f.observe(&round(seq, busy, watts(p, l)), &t);
            if (seq as usize) < MIN_ROUNDS - 1 {
                assert!(f.model().is_none(), "round {seq}: too few rounds");
            }
        }
        let m = f.model().expect("fitted");
        assert!((m.idle_w - 50.0).abs() < 0.01, "{m:?}");
        assert!((m.per_core_w - 10.0).abs() < 0.01, "{m:?}");
        assert!((m.per_smt_w - 2.0).abs() < 0.01, "{m:?}");
        assert!(m.r2.unwrap() > 0.999);
        assert_eq!(f.rows(), MIN_ROUNDS + 5);
    }

    #[test]
    fn no_fit_without_energy_or_without_spread() {
        let t = Topology::synthetic("pack:2 core:2 pu:2").unwrap();
        // The same load every round: l never varies, nothing to fit.
        let mut f = PowerFit::default();
        for seq in 0..100 {
            f.observe(&round(seq, &[0, 2, 4], watts(3.0, 0.0)), &t);
        }
        assert!(f.model().is_none());
        // No energy readings: no rows at all.
        let mut f = PowerFit::default();
        for seq in 0..100 {
            let mut s = round(seq, &[0, 1][..(seq % 2) as usize + 1], 100.0);
            s.machine.energy.clear();
            f.observe(&s, &t);
        }
        assert_eq!((f.rows(), f.rounds), (0, 0));
        assert!(f.model().is_none());
        // Energy that does not follow p and l (noise): R² too low.
        let mut f = PowerFit::default();
        let mut x = 12345u64;
        for seq in 0..200 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let busy: &[u32] = [&[0u32][..], &[0, 1], &[0, 2, 3]][seq as usize % 3];
            f.observe(&round(seq, busy, 50.0 + (x >> 58) as f64 * 10.0), &t);
        }
        assert!(f.model().is_none(), "{:?}", f.model());
    }
}
