//! \[Bae12\] §5.2-5.3's models and the file
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
    /// The fewest sockets: memory and threads together.
    Local,
    /// The most sockets: memory interleaved over them.
    Interleaved,
}

impl Mapping {
    /// The other mapping.
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

pub use numaplace_model::PowerModel;

/// One performance model: a class, the mapping its metrics were measured
/// in, and the linear model of the interleaved / local run-time ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerformanceModel {
    /// The class (\[Bae12\] Fig. 4), 0 to 2.
    pub class: u8,
    /// The mapping its metrics were measured in.
    pub measured_in: Mapping,
    /// The ratio's linear model.
    #[serde(flatten)]
    pub model: LinearModel,
}

/// The coefficient file `numaplace train` writes (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Models {
    /// Always [`Models::FORMAT`].
    pub format: String,
    /// [`Models::VERSION`] when written by this numaplace.
    pub version: u32,
    /// The machine the models were trained on.
    pub machine: String,
    /// How they were made (scenarios, seeds).
    pub source: String,
    /// The classifier's thresholds.
    pub classifier: Classifier,
    /// One model per class and mapping measured in.
    pub performance: Vec<PerformanceModel>,
    /// The machine's power model.
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
    /// What the file says it is.
    pub const FORMAT: &'static str = "numaplace-adaptive-models";
    /// The layout version this numaplace writes and reads.
    pub const VERSION: u32 = 1;

    /// The models trained on the simulator's `westmere-2s` with the
    /// \[Bae12\] Fig. 4 suite (`numaplace train`), shipped with numaplace.
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

    /// The file's text, as `numaplace train` writes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("models serialise") + "\n"
    }

    /// `Ok` where every model is one the policy can use.
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

    /// The performance model of `class` measured in `measured_in`, if the
    /// file has one.
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
