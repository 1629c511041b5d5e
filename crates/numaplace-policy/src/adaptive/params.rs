//! `adaptive-mapping`'s parameters, checked when they are read: a bad
//! objective, a missing or corrupt coefficient file or an overhead ceiling
//! out of range is an error at configuration time, saying what to do.
//!
//! The coefficient file a config names is read by the config's reader,
//! not here (the policy crate does no I/O): it hands the text over with
//! [`crate::PolicyKind::read_files`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::models::Models;

/// What the user optimises for (\[Bae12\] §5.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Shortest run time.
    #[default]
    Performance,
    /// Lowest average power.
    Power,
    /// Least energy (power × time).
    Energy,
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Objective::Performance => "performance",
            Objective::Power => "power",
            Objective::Energy => "energy",
        })
    }
}

/// The parameters as written in the config file's `[policy]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AdaptiveConfig {
    /// performance, power or energy.
    pub objective: Objective,
    /// The coefficient file `numaplace train` wrote; the built-in
    /// westmere-2s models when left out.
    pub coefficients: Option<PathBuf>,
    /// The user's overhead ceiling, threshold_ovrhd of §5.3: probing and
    /// remapping time over elapsed time, a fraction in (0, 0.1]. Default
    /// 0.0005, the "< 0.05 %" of §6.3.
    pub overhead_ceiling: f64,
    /// A predicted ratio within 1 ± this is "within unconfident
    /// intervals" (§5.3): probe the other mapping before committing.
    pub unconfident_band: f64,
    /// Cost of scanning one page-table entry, ns: a probe scans each
    /// vcore's accessed pages twice per window, two windows (§4.3). 10 ns
    /// makes a 8 x 16384-page probe cost about 5 ms, near the 4.6 ms
    /// worst scan of §6.3.
    pub scan_ns_per_page: f64,
    /// Cost of one remapping of a VM's vcores, ms (5.3 ms, the highest
    /// remapping cost of §6.3).
    pub remap_cost_ms: f64,
    /// Groups with fewer threads are left alone (one vcore has nothing to
    /// interleave).
    pub min_threads: usize,
    /// Fit the power model to the machine's energy readings (RAPL) as the
    /// policy runs, and use the fit instead of the coefficient file's once
    /// it is trustworthy ([`super::power_fit`]).
    pub fit_power: bool,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            objective: Objective::Performance,
            coefficients: None,
            overhead_ceiling: 0.0005,
            unconfident_band: 0.05,
            scan_ns_per_page: 10.0,
            remap_cost_ms: 5.3,
            min_threads: 2,
            fit_power: true,
        }
    }
}

/// The parameters with the models loaded and every value checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "AdaptiveConfig", into = "AdaptiveConfig")]
pub struct AdaptiveParams {
    /// The parameters as written.
    pub config: AdaptiveConfig,
    /// The models they name, loaded (or the built-in ones).
    pub models: Models,
    /// Whether `models` are the ones the config says: the built-in ones,
    /// or the coefficient file's once its text was handed over
    /// ([`AdaptiveParams::read_coefficients`]).
    models_read: bool,
}

impl Default for AdaptiveParams {
    fn default() -> Self {
        AdaptiveParams {
            config: AdaptiveConfig::default(),
            models: Models::builtin(),
            models_read: true,
        }
    }
}

impl AdaptiveParams {
    /// Built-in models with this objective.
    pub fn with_objective(objective: Objective) -> AdaptiveParams {
        let mut p = AdaptiveParams::default();
        p.config.objective = objective;
        p
    }

    /// The coefficient file the config names and whose models are not
    /// read yet.
    pub fn unread_coefficients(&self) -> Option<&Path> {
        self.config
            .coefficients
            .as_deref()
            .filter(|_| !self.models_read)
    }

    /// Takes the models from the coefficient file's text, or says why
    /// the file cannot be used: `text` is what reading
    /// [`AdaptiveParams::unread_coefficients`] gave. Without a file to
    /// read, nothing changes.
    pub fn read_coefficients(&mut self, text: std::io::Result<String>) -> Result<(), String> {
        let Some(path) = self.unread_coefficients() else {
            return Ok(());
        };
        let text = text.map_err(|e| {
            format!(
                "adaptive-mapping: cannot read the coefficient file {}: {e}; write it \
                 with `numaplace train --out {}` or leave `coefficients` out to use \
                 the built-in westmere-2s models",
                path.display(),
                path.display()
            )
        })?;
        self.models = Models::parse(&text)
            .map_err(|e| format!("adaptive-mapping: coefficient file {}: {e}", path.display()))?;
        self.models_read = true;
        Ok(())
    }
}

impl From<AdaptiveParams> for AdaptiveConfig {
    fn from(p: AdaptiveParams) -> Self {
        p.config
    }
}

impl TryFrom<AdaptiveConfig> for AdaptiveParams {
    type Error = String;

    fn try_from(config: AdaptiveConfig) -> Result<Self, String> {
        let c = &config;
        if !(c.overhead_ceiling > 0.0 && c.overhead_ceiling <= 0.1) {
            return Err(format!(
                "adaptive-mapping: overhead-ceiling {} is out of range: give a fraction \
                 above 0 and at most 0.1 (0.0005 is 0.05 %)",
                c.overhead_ceiling
            ));
        }
        if !(c.unconfident_band >= 0.0 && c.unconfident_band < 1.0) {
            return Err(format!(
                "adaptive-mapping: unconfident-band {} must be in [0, 1) (e.g. 0.05)",
                c.unconfident_band
            ));
        }
        for (name, v) in [
            ("scan-ns-per-page", c.scan_ns_per_page),
            ("remap-cost-ms", c.remap_cost_ms),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "adaptive-mapping: {name} {v} must be a number not below 0"
                ));
            }
        }
        // A coefficient file's models come with its text, which the
        // config's reader hands over (`read_coefficients`).
        let models_read = c.coefficients.is_none();
        Ok(AdaptiveParams {
            config,
            models: Models::builtin(),
            models_read,
        })
    }
}

/// The values are checked as they are read; here only that a coefficient
/// file named was handed over.
impl crate::Params for AdaptiveParams {
    fn validate(&self) -> Result<(), String> {
        match self.unread_coefficients() {
            Some(path) => Err(format!(
                "adaptive-mapping: the coefficient file {} was not read (its reader hands it \
                 over with PolicyKind::read_files)",
                path.display()
            )),
            None => Ok(()),
        }
    }
}
