//! Seed 002 (002_9193a93568156dac.txt) §5.2-5.3's models and the file
//! that holds them: the classifier's constants, per-class performance
//! models for the interleaved / local run-time ratio measured in either
//! mapping, the Fig. 7 power model, and the energy model (their product).

use serde::{Deserialize, Serialize};

use super::classify::{Class, Classifier};
use super::fit::LinearModel;
use super::metrics::PageMetrics;

/// The two mappings of §1: local uses the fewest sockets, interleaved the
/// most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    Local,
    Interleaved,
}

impl Mapping {
    pub fn other(self) -> Mapping {
        match self {
            Mapping::Local => Mapping::Interleaved,
            Mapping::Interleaved => Mapping::Local,
        }
    }
}

impl std::fmt::Display for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mapping::Local => "local",
            Mapping::Interleaved => "interleaved",
        })
    }
}

/// Fig. 7's linear model: P = idle + per_core · p + per_smt · l watts,
/// p the cores with at least one busy thread, l those with two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerModel {
    pub idle_w: f64,
    pub per_core_w: f64,
    pub per_smt_w: f64,
    /// R² of the fit, where fitted.
    #[serde(default)]
    pub r2: Option<f64>,
}

impl PowerModel {
    /// Fig. 7's coefficients for the Xeon E5620 testbed (§2.1).
    pub const FIG7: PowerModel = PowerModel {
        idle_w: 104.63,
        per_core_w: 8.69,
        per_smt_w: 1.62,
        r2: None,
    };

    pub fn watts(&self, p: f64, l: f64) -> f64 {
        self.idle_w + self.per_core_w * p + self.per_smt_w * l
    }

    /// §5.2 Eq. 1-2 and §5.3's PowerModel: the machine's power while the
    /// vcores run with utilisations `util`, grouped per physical core as
    /// the mapping puts them. A core with one vcore draws P1 = per_core
    /// for its utilisation (Eq. 2); a core with two draws P2 = per_core +
    /// per_smt while they overlap and P1 for the rest (Eq. 1). The idle
    /// term is included (the paper's ratio leaves it out; a meter, §2.1,
    /// and RAPL see it), so the ratio is that of the machine's power.
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

/// One performance model: a class, the mapping its metrics were measured
/// in, and the linear model of the interleaved / local run-time ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerformanceModel {
    pub class: u8,
    pub measured_in: Mapping,
    #[serde(flatten)]
    pub model: LinearModel,
}

/// The coefficient file `numaplace train` writes (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Models {
    /// Always [`Models::FORMAT`].
    pub format: String,
    pub version: u32,
    /// The machine the models were trained on.
    pub machine: String,
    /// How they were made (scenarios, seeds).
    pub source: String,
    pub classifier: Classifier,
    pub performance: Vec<PerformanceModel>,
    pub power: PowerModel,
}

/// A coefficient file numaplace cannot use.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelsError(pub String);

impl std::fmt::Display for ModelsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ModelsError {}

const FIX: &str = "write a new one with `numaplace train --out FILE`, \
                   or leave `coefficients` out to use the built-in westmere-2s models";

impl Models {
    pub const FORMAT: &'static str = "numaplace-adaptive-models";
    pub const VERSION: u32 = 1;

    /// The models trained on the simulator's `westmere-2s` with the
    /// seed 002 Fig. 4 suite (`numaplace train`), shipped with numaplace.
    pub fn builtin() -> Models {
        Models::parse(include_str!("westmere-2s.json"))
            .expect("the built-in coefficient file is valid")
    }

    /// Parses and checks a coefficient file's text.
    pub fn parse(text: &str) -> Result<Models, ModelsError> {
        let m: Models = serde_json::from_str(text)
            .map_err(|e| ModelsError(format!("not a coefficient file ({e}); {FIX}")))?;
        m.validate()?;
        Ok(m)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("models serialise") + "\n"
    }

    pub fn validate(&self) -> Result<(), ModelsError> {
        let bad = |what: String| Err(ModelsError(format!("{what}; {FIX}")));
        if self.format != Models::FORMAT || self.version != Models::VERSION {
            return bad(format!(
                "format {:?} version {} is not {} version {}",
                self.format,
                self.version,
                Models::FORMAT,
                Models::VERSION
            ));
        }
        if let Err(e) = self.classifier.validate() {
            return bad(e);
        }
        for c in Class::ALL {
            for m in [Mapping::Local, Mapping::Interleaved] {
                match self.performance(c, m) {
                    None => return bad(format!("no performance model for {c} measured {m}")),
                    Some(p) if p.coefficients.len() != 8 => {
                        return bad(format!(
                            "the model for {c} measured {m} has {} coefficients, not 8",
                            p.coefficients.len()
                        ));
                    }
                    Some(p)
                        if !p.intercept.is_finite()
                            || p.coefficients.iter().any(|c| !c.is_finite()) =>
                    {
                        return bad(format!("the model for {c} measured {m} is not finite"));
                    }
                    Some(_) => {}
                }
            }
        }
        let p = &self.power;
        if ![p.idle_w, p.per_core_w, p.per_smt_w]
            .iter()
            .all(|w| w.is_finite() && *w >= 0.0)
        {
            return bad("power model coefficients must be finite and not negative".into());
        }
        Ok(())
    }

    pub fn performance(&self, class: Class, measured_in: Mapping) -> Option<&LinearModel> {
        self.performance
            .iter()
            .find(|p| p.class == class.number() && p.measured_in == measured_in)
            .map(|p| &p.model)
    }

    /// §5.3 PerformanceModel: classify, then the class's model for the
    /// mapping the metrics were measured in; the predicted interleaved /
    /// local run-time ratio (above 1: local is faster).
    pub fn performance_ratio(
        &self,
        metrics: &PageMetrics,
        threads: usize,
        measured_in: Mapping,
    ) -> (Class, f64) {
        let class = self.classifier.classify(metrics, threads);
        let ratio = self
            .performance(class, measured_in)
            .map_or(1.0, |m| m.predict(&metrics.features()));
        (class, ratio)
    }
}
