//! \[Bae12\] §5.3's Probing, Voting and
//! finalVoting for one group of vcores.

use numaplace_model::{Counter, PageSets, Snapshot, Task};

use super::classify::Class;
use super::mapping::Layout;
use super::metrics::{PageMetrics, page_metrics, page_sets_from_samples};
use super::models::{Mapping, PowerModel};
use super::params::{AdaptiveConfig, AdaptiveParams, Objective};

/// One probe of a group: §4.1's metrics, its CPI, each vcore's
/// utilisation (vcoreUtil), and what the probe cost.
#[derive(Debug, Clone)]
pub(super) struct Probe {
    pub metrics: PageMetrics,
    pub cpi: Option<f64>,
    pub util: Vec<f64>,
    /// Modelled page-table scanning time, seconds (ovrhd_probe).
    pub cost_s: f64,
    /// Where the page sets came from.
    pub source: &'static str,
}

/// Probing: page sets from the snapshot's page model where it has one for
/// every vcore, else from sampled addresses; nothing if neither.
pub(super) fn probe(
    s: &Snapshot,
    tasks: &[&Task],
    params: &AdaptiveParams,
    cfg: &AdaptiveConfig,
) -> Option<Probe> {
    let page = params.models.classifier.page_size;
    let (sets, source): (Vec<PageSets>, _) =
        if tasks.iter().all(|t| s.page_sets.contains_key(&t.tid)) {
            let v = tasks.iter().map(|t| s.page_sets[&t.tid].clone()).collect();
            (v, "page model")
        } else if tasks.iter().all(|t| s.samples.contains_key(&t.tid)) {
            let v = tasks
                .iter()
                .map(|t| page_sets_from_samples(&s.samples[&t.tid], page))
                .collect();
            (v, "sampled addresses")
        } else {
            return None;
        };
    let refs: Vec<&PageSets> = sets.iter().collect();
    let metrics = page_metrics(&refs);
    let scanned: usize = sets
        .iter()
        .map(|p| p.per_mem.accessed.len() + p.per_store.accessed.len())
        .sum();
    // Each window is scanned at least twice (§4.3 Scan).
    let cost_s = 2.0 * scanned as f64 * cfg.scan_ns_per_page / 1e9;
    let (mut cycles, mut instr) = (0u64, 0u64);
    let mut util = Vec::with_capacity(tasks.len());
    for t in tasks {
        let c = s.counters.get(&t.tid);
        let get = |k: Counter| c.and_then(|c| c.values.get(&k).copied());
        cycles += get(Counter::Cycles).unwrap_or(0);
        instr += get(Counter::Instructions).unwrap_or(0);
        let u = match (get(Counter::TaskClock), s.interval_ns) {
            (Some(ns), i) if i > 0 => ns as f64 / i as f64,
            _ => 1.0,
        };
        util.push(u.clamp(0.0, 1.0));
    }
    Some(Probe {
        metrics,
        cpi: (instr > 0).then(|| cycles as f64 / instr as f64),
        util,
        cost_s,
        source,
    })
}

/// A vote (§5.3 Voting): the predicted interleaved / local ratio for the
/// objective and the mapping it favours.
#[derive(Debug, Clone, PartialEq)]
pub struct Vote {
    /// What it optimises: run time, power or energy.
    pub objective: Objective,
    /// The group's class.
    pub class: Class,
    /// The mapping its metrics were measured in.
    pub measured_in: Mapping,
    /// Predicted interleaved / local run-time ratio.
    pub perf_ratio: f64,
    /// Modelled interleaved / local machine power.
    pub power_ratio: f64,
    /// The objective's ratio.
    pub ratio: f64,
    /// The mapping it favours.
    pub mapping: Mapping,
    /// Whether the ratio is farther from 1 than the unconfident band.
    pub confident: bool,
    /// The group's cycles per instruction, where counted.
    pub cpi: Option<f64>,
    /// Modelled watts in the mapping measured in.
    pub watts: f64,
    /// Where the performance model came from.
    pub source: &'static str,
    /// Where the power model came from.
    pub power_from: &'static str,
}

impl Vote {
    /// The vote in words, for a decision's reason.
    pub fn describe(&self, cfg: &AdaptiveConfig) -> String {
        format!(
            "objective {}: {} from {} measured {}, predicted interleaved/local run time {:.3}, \
             power {:.3} (model {}), {} ratio {:.3} votes {} with {} confidence (band 1 ± {})",
            self.objective,
            self.class,
            self.source,
            self.measured_in,
            self.perf_ratio,
            self.power_ratio,
            self.power_from,
            self.objective,
            self.ratio,
            self.mapping,
            if self.confident { "high" } else { "low" },
            cfg.unconfident_band
        )
    }
}

/// Watts of the machine with the group in `layout` (§5.3 PowerModel).
fn layout_watts(power: &PowerModel, layout: &Layout, util: &[f64]) -> f64 {
    let cores: Vec<Vec<f64>> = layout
        .cores
        .iter()
        .map(|c| {
            c.iter()
                .map(|&v| util.get(v).copied().unwrap_or(1.0))
                .collect()
        })
        .collect();
    power.mapping_watts(&cores)
}

/// §5.3 Voting.
pub(super) fn vote(
    p: &Probe,
    current: Mapping,
    local: &Layout,
    inter: &Layout,
    params: &AdaptiveParams,
    (power, power_from): (&PowerModel, &'static str),
) -> Vote {
    let cfg = &params.config;
    let (class, perf_ratio) = params
        .models
        .performance_ratio(&p.metrics, p.util.len(), current);
    let (wl, wi) = (
        layout_watts(power, local, &p.util),
        layout_watts(power, inter, &p.util),
    );
    let power_ratio = wi / wl.max(1e-9);
    let ratio = match cfg.objective {
        Objective::Performance => perf_ratio,
        Objective::Power => power_ratio,
        // EnergyModel: ratio_power · ratio_perf.
        Objective::Energy => power_ratio * perf_ratio,
    };
    Vote {
        objective: cfg.objective,
        class,
        measured_in: current,
        perf_ratio,
        power_ratio,
        ratio,
        mapping: if ratio > 1.0 {
            Mapping::Local
        } else {
            Mapping::Interleaved
        },
        confident: (ratio - 1.0).abs() > cfg.unconfident_band,
        cpi: p.cpi,
        watts: if current == Mapping::Local { wl } else { wi },
        source: p.source,
        power_from,
    }
}

/// After the trial: agreeing votes are committed; otherwise finalVoting
/// (§5.3) keeps the mapping with the lower CPI. For the energy objective
/// the CPI is weighted by the modelled power of its mapping (energy per
/// instruction ∝ CPI · watts), for power the modelled watts alone decide:
/// CPI says nothing about power (our extension; the paper uses CPI only).
pub(super) fn settle(
    first: &Vote,
    from: Mapping,
    second: &Vote,
    now: Mapping,
    cfg: &AdaptiveConfig,
) -> (Mapping, String) {
    if first.mapping == second.mapping {
        let why = format!(
            "votes agree: in {from} {}; in {now} {}",
            first.describe(cfg),
            second.describe(cfg)
        );
        return (first.mapping, why);
    }
    let cost = |v: &Vote| match (cfg.objective, v.cpi) {
        (Objective::Power, _) => Some(v.watts),
        (Objective::Energy, Some(c)) => Some(c * v.watts),
        (Objective::Performance, Some(c)) => Some(c),
        (_, None) => None,
    };
    let (to, tie) = match (cost(first), cost(second)) {
        (Some(a), Some(b)) if a < b => (from, format!("{a:.3} in {from} < {b:.3} in {now}")),
        (Some(a), Some(b)) => (now, format!("{b:.3} in {now} <= {a:.3} in {from}")),
        _ => (now, "no CPI measured; staying".to_string()),
    };
    let measure = match cfg.objective {
        Objective::Performance => "CPI",
        Objective::Energy => "CPI x modelled watts",
        Objective::Power => "modelled watts",
    };
    let why = format!(
        "votes disagree ({} in {from}, {} in {now}); tie-break on {measure}: {tie} (§5.3 finalVoting)",
        first.mapping, second.mapping
    );
    (to, why)
}
