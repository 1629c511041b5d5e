//! M8: what time slices cost a thread that shares its CPU. CFS runs the
//! threads of a CPU in turn, one slice each per period; while a thread is
//! switched out, the threads that run meanwhile on the caches it shares
//! insert lines and evict some of its own, and at its next switch-in it
//! re-fetches what it lost, charged as M7 charges a migration's refill.
//! A thread alone on its CPU is never switched out and pays nothing.

use super::*;

/// Where one CPU's runners stand in M8: how many time-share it, and the
/// lines per wall-clock second they insert into the LLC and into the
/// core's private L2 (their LLC misses and their uncore requests).
#[derive(Debug, Clone, Copy, Default)]
struct CpuInserts {
    runnable: u32,
    llc_lines_per_s: f64,
    l2_lines_per_s: f64,
}

/// Points of the midpoint rule over a refill (M8).
const REFILL_POINTS: usize = 16;

/// Misses, in bytes of lines, that a thread makes beyond its steady state
/// while its content of a cache grows back from `from` to `to` bytes
/// (M8), `curve(c)` being its misses per access or instruction with `c`
/// bytes of that cache. Each miss while refilling inserts a line; at
/// content `c` a fraction `curve(to) / curve(c)` of its misses it would
/// make anyway at `to`, which the steady state (M2) already charges, so
/// growing by `dc` costs `(1 − curve(to) / curve(c)) dc` extra misses:
/// `∫ from..to (1 − curve(to) / curve(c)) dc`. Under the power law
/// `c^−α` from an empty cache that is `α / (1 + α)` of `to` (a streaming
/// program with a flat curve loses little by losing its lines); a thread
/// that misses nothing once refilled (`curve(to) = 0`) refills whole.
pub(super) fn excess_misses(curve: impl Fn(f64) -> f64, from: f64, to: f64) -> f64 {
    if to <= from {
        return 0.0;
    }
    let steady = curve(to);
    let dc = (to - from) / REFILL_POINTS as f64;
    (0..REFILL_POINTS)
        .map(|k| {
            let mu = curve(from + (k as f64 + 0.5) * dc);
            if mu > 0.0 {
                1.0 - (steady / mu).min(1.0)
            } else {
                1.0
            }
        })
        .sum::<f64>()
        * dc
}

impl Solver {
    /// The L2 misses of `r` per access with `c` bytes of a private L2
    /// (M8): the uniform pattern's `1 − c/W` as M2 has it; the power-law
    /// pattern's uncore requests do not depend on the L2 in M2, so its
    /// LLC exponent is assumed for the L2 too, `c^−α`.
    fn private_curve(r: &Runner<'_>, c: f64) -> f64 {
        let ws = (r.model.working_set as f64).max(LINE);
        match r.model.pattern {
            Pattern::Uniform => 1.0 - (c / ws).min(1.0),
            Pattern::PowerLaw { alpha, .. } => c.max(LINE).powf(-alpha),
        }
    }

    /// CFS's slice, seconds, of each of `runnable` equal-weight threads of
    /// one CPU (M8): the period `sched_latency`, stretched to `runnable ×
    /// min_granularity` beyond `sched_nr_latency` threads (`__sched_period`),
    /// shared equally (`sched_slice`); both tunables scaled by
    /// `1 + ilog2(min(CPUs, 8))` (`get_update_sysctl_factor`).
    pub fn slice_s(&self, runnable: u32) -> f64 {
        let cpus = self.cpu_core.len().clamp(1, 8);
        let factor = 1.0 + cpus.ilog2() as f64;
        let c = &self.constants;
        let latency = c.sched_latency_ms.value * factor / 1000.0;
        let granularity = c.sched_min_granularity_ms.value * factor / 1000.0;
        (latency / runnable.max(1) as f64).max(granularity)
    }

    /// M8: per runner, the stall its switch-ins cost it, nanoseconds per
    /// second of wall-clock time, from the step's `speeds` (what
    /// [`Solver::solve`] gave for `runners`). For a thread on a CPU that
    /// `k ≥ 2` threads time-share, each switch-in (one per period of `k`
    /// slices) finds what survived its absence of `(k − 1)` slices: each
    /// line inserted into a cache it shares evicts one of its lines with
    /// the probability of its occupancy (the insertion-and-eviction
    /// equilibrium that M2's split by rates stands for), so of its LLC
    /// share `C` a part `exp(−X / L)` survives `X` insertions into an LLC
    /// of `L` lines; inserting are the other threads of its CPU (a slice
    /// each, at their running rate) and the threads of the LLC's other
    /// CPUs (the whole absence, at their wall-clock rate). Growing back to
    /// its share costs the misses `excess_misses` counts beyond its steady
    /// state on M2's miss curve, each at its memory latency over its MLP.
    /// A private L2 below the LLC loses lines alike to the uncore requests
    /// of its CPU's and its SMT siblings' threads; their excess misses
    /// whose LLC copy survived come back at the LLC hit latency. A refill
    /// never takes longer than the slice it starts (a thread that cannot
    /// refill within its slice spends the slice refilling). Zero for every
    /// thread alone on its CPU, and with `cache_sharing` off (no thread
    /// then evicts another's lines).
    pub fn slice_refill(&self, runners: &[Runner<'_>], speeds: &[Speed], out: &mut Vec<f64>) {
        out.clear();
        out.resize(runners.len(), 0.0);
        let mech = &self.constants.mechanisms;
        if !mech.slice_refill || !mech.cache_sharing {
            return;
        }
        let mut per_cpu = vec![CpuInserts::default(); self.cpu_core.len()];
        for (r, s) in runners.iter().zip(speeds) {
            let c = &mut per_cpu[r.cpu];
            c.runnable += 1;
            c.llc_lines_per_s += s.ips * s.llc_miss_per_instr;
            c.l2_lines_per_s += s.ips * s.uncore_per_instr;
        }
        if per_cpu.iter().all(|c| c.runnable < 2) {
            return;
        }
        for (i, r) in runners.iter().enumerate() {
            let k = per_cpu[r.cpu].runnable;
            if k < 2 {
                continue;
            }
            let s = &speeds[i];
            let slice = self.slice_s(k);
            let period = slice * k as f64;
            let away = period - slice;
            // The others of its CPU run a slice each at their running
            // rate, wall-clock rate × k; the other CPUs' threads run on
            // through the whole absence.
            let own = &per_cpu[r.cpu];
            let (mut llc_in, mut l2_in) = (
                (own.llc_lines_per_s - s.ips * s.llc_miss_per_instr) * period,
                (own.l2_lines_per_s - s.ips * s.uncore_per_instr) * period,
            );
            let (llc, core) = (self.cpu_llc[r.cpu], self.cpu_core[r.cpu]);
            for (c, other) in per_cpu.iter().enumerate() {
                if c == r.cpu || other.runnable == 0 || self.cpu_llc[c] != llc {
                    continue;
                }
                llc_in += other.llc_lines_per_s * away;
                if self.cpu_core[c] == core {
                    l2_in += other.l2_lines_per_s * away;
                }
            }
            let llc_lines = self.llc_bytes[llc] / LINE;
            let survives_llc = if llc_lines >= 1.0 {
                (-llc_in.max(0.0) / llc_lines).exp()
            } else {
                0.0
            };
            let share = s.llc_share;
            let from_memory =
                excess_misses(|c| self.misses(r, c).1, share * survives_llc, share) / LINE;
            // Lines of the private L2 lost while their LLC copy survived
            // come back from the LLC (the others are counted above).
            let l2 = self.private_l2_bytes[core];
            let from_llc = if l2 >= LINE {
                let footprint = (r.model.working_set as f64).min(l2);
                let survives_l2 = (-l2_in.max(0.0) / (l2 / LINE)).exp();
                let lost = excess_misses(
                    |c| Self::private_curve(r, c),
                    footprint * survives_l2,
                    footprint,
                );
                lost / LINE * survives_llc
            } else {
                0.0
            };
            let node = self.cpu_node[r.cpu];
            let memory_ns = s.memory_ns.max(self.latency[node * self.nodes + node]);
            let refill_ns =
                (from_memory * memory_ns + from_llc * self.llc_hit_ns) / r.model.mlp.max(1.0);
            out[i] = refill_ns.min(slice * 1e9) / period;
        }
    }
}
