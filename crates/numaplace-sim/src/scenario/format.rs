//! The scenario file's raw form: what serde reads. Every value is kept as a
//! spanned TOML value and checked in `values` and `resolve`, so that each error
//! can say where it is and what is allowed.

use super::*;

pub(super) type Raw = Option<Spanned<Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: Raw,
    pub(super) description: Raw,
    pub(super) machine: Raw,
    pub(super) step_ms: Raw,
    pub(super) max_seconds: Raw,
    pub(super) mismatch_percent: Raw,
    pub(super) linux: Option<Spanned<RawLinux>>,
    #[serde(default)]
    pub(super) app: Vec<Spanned<RawApp>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLinux {
    pub(super) balance_interval_ms: Raw,
    pub(super) migrate_probability: Raw,
    pub(super) numa_balancing: Raw,
    pub(super) numa_balancing_mib_per_s: Raw,
    pub(super) numa_balancing_scan_delay_ms: Raw,
    pub(super) numa_balancing_scan_period_min_ms: Raw,
    pub(super) numa_balancing_scan_period_max_ms: Raw,
    pub(super) numa_balancing_scan_size_mb: Raw,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApp {
    pub(super) name: Raw,
    pub(super) kind: Raw,
    pub(super) threads: Raw,
    pub(super) copies: Raw,
    pub(super) memory: Raw,
    pub(super) cpus: Raw,
    pub(super) cpus_by: Raw,
    pub(super) start_s: Raw,
    pub(super) runs: Raw,
    pub(super) shared: Raw,
    pub(super) sharers: Raw,
    pub(super) rank_skew: Raw,
    pub(super) barrier: Raw,
    pub(super) instructions: Raw,
    pub(super) cpi: Raw,
    pub(super) uncore_pki: Raw,
    pub(super) working_set: Raw,
    pub(super) pattern: Raw,
    pub(super) llc_mpki: Raw,
    pub(super) alpha: Raw,
    pub(super) mlp: Raw,
    pub(super) shared_writes_pki: Raw,
    #[serde(default)]
    pub(super) phase: Vec<Spanned<RawPhase>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPhase {
    pub(super) instructions: Raw,
    pub(super) cpi: Raw,
    pub(super) uncore_pki: Raw,
    pub(super) working_set: Raw,
    pub(super) pattern: Raw,
    pub(super) llc_mpki: Raw,
    pub(super) alpha: Raw,
    pub(super) mlp: Raw,
    pub(super) shared_writes_pki: Raw,
}

/// The thread-model keys of an `[[app]]` or `[[app.phase]]` table.
pub(super) struct ModelKeys<'a> {
    pub(super) cpi: &'a Raw,
    pub(super) uncore_pki: &'a Raw,
    pub(super) working_set: &'a Raw,
    pub(super) pattern: &'a Raw,
    pub(super) llc_mpki: &'a Raw,
    pub(super) alpha: &'a Raw,
    pub(super) mlp: &'a Raw,
    pub(super) shared_writes_pki: &'a Raw,
}

impl RawApp {
    pub(super) fn model_keys(&self) -> ModelKeys<'_> {
        ModelKeys {
            cpi: &self.cpi,
            uncore_pki: &self.uncore_pki,
            working_set: &self.working_set,
            pattern: &self.pattern,
            llc_mpki: &self.llc_mpki,
            alpha: &self.alpha,
            mlp: &self.mlp,
            shared_writes_pki: &self.shared_writes_pki,
        }
    }
}

impl RawPhase {
    pub(super) fn model_keys(&self) -> ModelKeys<'_> {
        ModelKeys {
            cpi: &self.cpi,
            uncore_pki: &self.uncore_pki,
            working_set: &self.working_set,
            pattern: &self.pattern,
            llc_mpki: &self.llc_mpki,
            alpha: &self.alpha,
            mlp: &self.mlp,
            shared_writes_pki: &self.shared_writes_pki,
        }
    }
}

/// Only the table spans, to say where a serde error is
/// (`app[1].phase[0]`): read without refusing unknown keys.
#[derive(Deserialize)]
pub(super) struct Outline {
    #[serde(default)]
    pub(super) linux: Option<Spanned<IgnoredAny>>,
    #[serde(default)]
    pub(super) app: Vec<Spanned<OutlineApp>>,
}

#[derive(Deserialize)]
pub(super) struct OutlineApp {
    #[serde(default)]
    pub(super) phase: Vec<Spanned<IgnoredAny>>,
}
