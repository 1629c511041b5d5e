//! The machine's power as \[Bae12\] Fig. 7 models it: a line in the number
//! of busy cores and of cores running two hardware threads. One type for
//! the simulator's machines, the adaptive-mapping policy's votes and the
//! fit to RAPL readings.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// \[Bae12\] Fig. 7's linear model: P = idle + per_core · p + per_smt · l
/// watts, p the cores with at least one busy thread, l those with two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerModel {
    /// Watts with every core idle (`idle` above).
    pub idle_w: f64,
    /// Watts each core with a busy thread adds (`per_core`).
    pub per_core_w: f64,
    /// Watts each core with two busy threads adds on top (`per_smt`).
    pub per_smt_w: f64,
    /// R² of the fit, where the coefficients were fitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r2: Option<f64>,
    /// Where the coefficients come from (a paper's figure, a fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Cow<'static, str>>,
}

impl PowerModel {
    /// Fig. 7's coefficients for the Xeon E5620 testbed (\[Bae12\] §2.1).
    pub const FIG7: PowerModel = PowerModel {
        idle_w: 104.63,
        per_core_w: 8.69,
        per_smt_w: 1.62,
        r2: None,
        source: Some(Cow::Borrowed("[Bae12] Fig. 7")),
    };

    /// Watts with `p` busy cores, `l` of them running two threads.
    pub fn watts(&self, p: f64, l: f64) -> f64 {
        self.idle_w + self.per_core_w * p + self.per_smt_w * l
    }

    /// \[Bae12\] §5.2 Eq. 1-2 and §5.3's PowerModel: the machine's power
    /// while vcores run with utilisations `cores[i]`, grouped per physical
    /// core as a mapping puts them. A core with one vcore draws
    /// P1 = per_core for its utilisation (Eq. 2); a core with two draws
    /// P2 = per_core + per_smt while they overlap and P1 for the rest
    /// (Eq. 1). The idle term is included (the paper's ratio leaves it
    /// out; a meter, §2.1, and RAPL see it), so the ratio is that of the
    /// machine's power.
    pub fn mapping_watts(&self, cores: &[Vec<f64>]) -> f64 {
        let p1 = self.per_core_w;
        let p2 = self.per_core_w + self.per_smt_w;
        let mut w = self.idle_w;
        for core in cores {
            let mut u: Vec<f64> = core.iter().map(|u| u.clamp(0.0, 1.0)).collect();
            u.sort_by(|a, b| b.total_cmp(a));
            match u.as_slice() {
                [] => {}
                [a] => w += p1 * a,
                [a, b, ..] => w += p1 * (a - b) + p2 * b,
            }
        }
        w
    }
}
