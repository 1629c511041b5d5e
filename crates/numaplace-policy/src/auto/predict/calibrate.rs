//! Fitting the model to what was measured: each thread's miss curve,
//! memory-level parallelism and core CPI refitted until the model gives
//! the measured point at the measured placement, and from the fit the
//! most any placement could gain a group.

use super::{ALPHA, Fit, LINE, Predictor};
use numaplace_machine::Pattern;

impl Fit {
    /// The most any placement of group `pid`'s threads and memory could
    /// speed it up by, as a fraction: were every wait on memory and on
    /// other caches' lines gone, its threads' cycles (weighted by their
    /// instructions) would shrink by their stalled share `s`, a speed-up
    /// of `s / (1 - s)`. Where the uncore penalty is not counted, each
    /// miss is taken as waited for alone (no overlap), so this stays a
    /// bound. `None` for a group the fit has no thread of, or one with a
    /// thread whose LLC misses are not counted.
    pub fn stall_bound(&self, pid: i32) -> Option<f64> {
        let (mut stalled, mut weight) = (0.0, 0.0);
        for t in self.threads.iter().filter(|t| t.pid == pid) {
            stalled += t.stalled? * t.ips;
            weight += t.ips;
        }
        (weight > 0.0).then(|| {
            let s = (stalled / weight).min(0.99);
            s / (1.0 - s)
        })
    }
}

impl Predictor {
    /// Three passes of the model at the measured placement, each refitting
    /// every thread's miss curve, memory-level parallelism and core CPI to
    /// its measured point against what the others cause.
    pub(super) fn calibrate(&mut self, fit: &mut Fit) {
        let targets = std::mem::take(&mut fit.targets);
        let cpus: Vec<usize> = fit.threads.iter().map(|t| t.cpu).collect();
        for _ in 0..3 {
            let speeds = self.solve(fit, &cpus, None, &[]);
            for (i, t) in fit.threads.iter_mut().enumerate() {
                let (mu, cpi, penalty) = targets[i];
                let s = speeds[i];
                let a = t.model.uncore_pki / 1000.0;
                let ws = t.model.working_set as f64;
                // The miss curve through the measured point at the share
                // the model gives it (M2's power law inverted).
                let llc = self.llc_bytes[self.llc_of_cpu[t.cpu]];
                if llc >= LINE {
                    let full = llc.min(ws).max(LINE);
                    let c = s.llc_share.min(ws).max(LINE);
                    let mpki = (1000.0 * mu * (c / full).powf(ALPHA)).min(t.model.uncore_pki);
                    t.model.pattern = Pattern::PowerLaw {
                        llc_mpki: mpki,
                        alpha: ALPHA,
                    };
                }
                // Memory stalls per instruction, ns, before the MLP
                // overlaps them (M5).
                let serial = (a - mu).max(0.0) * self.llc_hit_ns + mu * s.memory_ns;
                if let Some(p) = penalty.filter(|&p| p > 0.0 && a > 0.0 && serial > 0.0) {
                    let stall = p * a / self.ghz;
                    t.model.mlp = (serial / stall).clamp(1.0, 16.0);
                }
                let mut stall_cycles = serial / t.model.mlp * self.ghz;
                if stall_cycles > 0.9 * cpi {
                    // The model's stalls alone exceed what was measured:
                    // more overlap than assumed.
                    t.model.mlp = (t.model.mlp * stall_cycles / (0.9 * cpi)).min(64.0);
                    stall_cycles = serial / t.model.mlp * self.ghz;
                }
                // The model's CPI less its memory and coherence stalls is
                // the core part with its SMT factor (M4-M6: the penalty is
                // both stalls over the uncore requests and transfers).
                let stalls = s.uncore_penalty_cycles * (a + s.transfers_per_instr);
                let model_serial = (a - s.llc_miss_per_instr).max(0.0) * self.llc_hit_ns
                    + s.llc_miss_per_instr * s.memory_ns;
                let share_cycles = (stalls - model_serial / t.model.mlp * self.ghz).max(0.0);
                let model_core = (s.cpi - stalls).max(1e-3);
                let smt = (model_core / t.model.cpi_core.max(1e-3)).max(1.0);
                // Stalls that leave the core less than a fifth of what was
                // measured overstate something: the shared writes (a
                // sampled estimate) are scaled down first.
                let excess = stall_cycles + share_cycles - 0.8 * cpi;
                if excess > 0.0 && share_cycles > 0.0 {
                    let keep = ((share_cycles - excess) / share_cycles).clamp(0.1, 1.0);
                    t.model.shared_writes_pki *= keep;
                }
                let left = (cpi - stall_cycles - share_cycles).max(0.2 * cpi);
                t.model.cpi_core = (left / smt).max(0.1);
                // Without a measured penalty the overlap is assumed: the
                // bound takes none (every miss waited for alone).
                // Of the stalls, those on memory: the LLC's hits stay
                // wherever the thread runs.
                let memory_part = if serial > 0.0 {
                    mu * s.memory_ns / serial
                } else {
                    0.0
                };
                let bound = memory_part
                    * if penalty.is_some_and(|p| p > 0.0) {
                        stall_cycles
                    } else {
                        serial * self.ghz
                    };
                if t.stalled.is_some() {
                    t.stalled = Some(((bound + share_cycles) / cpi.max(1e-3)).clamp(0.0, 1.0));
                }
            }
        }
        fit.targets = targets;
    }
}
