//! A thread model from a scenario's keys: each `[[app]]` or
//! `[[app.phase]]` table's model keys checked on their own, then a phase's
//! merged over its app's (a phase that changes the pattern does not take
//! the app's pattern-specific keys) and checked together.

use super::*;

/// A checked value and where it came from, for checks between keys.
#[derive(Clone)]
pub(super) struct Given<'a, T> {
    pub(super) value: T,
    pub(super) raw: &'a Spanned<Value>,
    pub(super) path: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PatternKind {
    Uniform,
    PowerLaw,
}

/// The thread-model keys one table gives, each checked on its own.
#[derive(Clone, Default)]
pub(super) struct PartialModel<'a> {
    pub(super) cpi: Option<Given<'a, f64>>,
    pub(super) uncore_pki: Option<Given<'a, f64>>,
    pub(super) working_set: Option<Given<'a, u64>>,
    pub(super) pattern: Option<Given<'a, PatternKind>>,
    pub(super) llc_mpki: Option<Given<'a, f64>>,
    pub(super) alpha: Option<Given<'a, f64>>,
    pub(super) mlp: Option<Given<'a, f64>>,
    pub(super) shared_writes_pki: Option<Given<'a, f64>>,
}

pub(super) fn partial_model<'a>(
    cx: &Ctx<'_>,
    keys: ModelKeys<'a>,
    prefix: &str,
) -> Result<PartialModel<'a>, ScenarioError> {
    let path = |k: &str| format!("{prefix}.{k}");
    // A number in (min, ..] (strict) or [min, ..], at most max.
    let given = |raw: &'a Raw, key: &str, min: f64, strict: bool, max: Option<f64>| {
        raw.as_ref()
            .map(|v| {
                let p = path(key);
                cx.bounded(v, &p, min, strict, max).map(|value| Given {
                    value,
                    raw: v,
                    path: p,
                })
            })
            .transpose()
    };
    let mut m = PartialModel {
        // Physical bounds (a CPI of 0.05 is a 20-wide core; a core's miss
        // buffers hold tens): no product of the model overflows or vanishes.
        cpi: given(keys.cpi, "cpi", 0.05, false, Some(1000.0))?,
        uncore_pki: given(keys.uncore_pki, "uncore_pki", 0.0, false, Some(1000.0))?,
        llc_mpki: given(keys.llc_mpki, "llc_mpki", 0.0, false, Some(1000.0))?,
        alpha: given(keys.alpha, "alpha", 0.0, true, Some(2.0))?,
        mlp: given(keys.mlp, "mlp", 1.0, false, Some(256.0))?,
        shared_writes_pki: given(
            keys.shared_writes_pki,
            "shared_writes_pki",
            0.0,
            false,
            Some(1000.0),
        )?,
        ..PartialModel::default()
    };
    if let Some(v) = keys.working_set {
        let p = path("working_set");
        m.working_set = Some(Given {
            value: cx.size(v, &p, true)?,
            raw: v,
            path: p,
        });
    }
    if let Some(v) = keys.pattern {
        let p = path("pattern");
        let kind = match cx.string(v, &p, "\"power-law\" or \"uniform\"")? {
            "uniform" => PatternKind::Uniform,
            "power-law" => PatternKind::PowerLaw,
            other => {
                return Err(cx.bad(
                    v,
                    &p,
                    format!("unknown pattern {other:?}: use \"power-law\" or \"uniform\""),
                ));
            }
        };
        m.pattern = Some(Given {
            value: kind,
            raw: v,
            path: p,
        });
    }
    // Checks between keys of the same table.
    if let Some(pat) = &m.pattern {
        if pat.value == PatternKind::Uniform {
            if let Some(g) = m.llc_mpki.as_ref().or(m.alpha.as_ref()) {
                return Err(cx.bad(
                g.raw,
                &g.path,
                format!(
                    "applies to pattern = \"power-law\" only, and {} sets pattern = \"uniform\": remove it or use the power law",
                    pat.path
                ),
            ));
            }
        }
    }
    if let (Some(l), Some(u)) = (&m.llc_mpki, &m.uncore_pki) {
        if l.value > u.value {
            return Err(too_many_llc_misses(cx, l, u));
        }
    }
    Ok(m)
}

pub(super) fn too_many_llc_misses(
    cx: &Ctx<'_>,
    l: &Given<'_, f64>,
    u: &Given<'_, f64>,
) -> ScenarioError {
    cx.bad(
        l.raw,
        &l.path,
        format!(
            "llc_mpki {} is more than uncore_pki {} ({}): LLC misses are a part of the uncore requests, lower llc_mpki or raise uncore_pki",
            l.value, u.value, u.path
        ),
    )
}

/// Where a thread model is written, for its errors.
pub(super) struct ModelAt<'a> {
    /// The `[[app]]` or `[[app.phase]]` table.
    pub(super) table_span: Range<usize>,
    /// `app[0]` or `app[0].phase[1]`.
    pub(super) prefix: &'a str,
    pub(super) in_phase: bool,
    /// The app's shared area and the path of its `shared` key.
    pub(super) shared_bytes: u64,
    pub(super) shared_path: &'a str,
}

/// Merges a phase's keys over the app's and checks the result.
pub(super) fn thread_model(
    cx: &Ctx<'_>,
    app: &PartialModel<'_>,
    phase: &PartialModel<'_>,
    at: &ModelAt<'_>,
) -> Result<ThreadModel, ScenarioError> {
    let ModelAt {
        table_span,
        prefix,
        in_phase,
        shared_bytes,
        shared_path,
    } = at;
    let (prefix, in_phase, shared_bytes) = (*prefix, *in_phase, *shared_bytes);
    let missing = |key: &str, example: &str| {
        let where_ = if in_phase {
            "in this [[app.phase]] or in its [[app]]"
        } else {
            "in this [[app]]"
        };
        cx.missing(
            table_span.clone(),
            &format!("{prefix}.{key}"),
            format!("missing: give {key} {where_}, like {key} = {example}"),
        )
    };
    let pick = |p: &Option<Given<'_, f64>>, a: &Option<Given<'_, f64>>| {
        p.clone().or_else(|| a.clone()).map(|g| g.value)
    };
    let app_pattern = app
        .pattern
        .as_ref()
        .map_or(PatternKind::PowerLaw, |g| g.value);
    let pattern = phase.pattern.as_ref().map_or(app_pattern, |g| g.value);
    // A phase that changes the pattern does not take the app's
    // pattern-specific keys.
    let inherit_pattern_keys = pattern == app_pattern;
    let uncore = phase
        .uncore_pki
        .clone()
        .or_else(|| app.uncore_pki.clone())
        .ok_or_else(|| missing("uncore_pki", "20"))?;
    let working_set = phase
        .working_set
        .clone()
        .or_else(|| app.working_set.clone())
        .ok_or_else(|| missing("working_set", "\"64MiB\""))?
        .value;
    let pattern = match pattern {
        PatternKind::Uniform => {
            if let Some(g) = phase.llc_mpki.as_ref().or(phase.alpha.as_ref()) {
                return Err(cx.bad(
                    g.raw,
                    &g.path,
                    "applies to pattern = \"power-law\" only, and this phase's pattern is \"uniform\": remove it or set pattern = \"power-law\"".into(),
                ));
            }
            Pattern::Uniform
        }
        PatternKind::PowerLaw => {
            let (app_llc, app_alpha) = if inherit_pattern_keys {
                (app.llc_mpki.clone(), app.alpha.clone())
            } else {
                (None, None)
            };
            let llc = phase.llc_mpki.clone();
            let llc_mpki = match llc {
                Some(l) => {
                    if l.value > uncore.value {
                        return Err(too_many_llc_misses(cx, &l, &uncore));
                    }
                    l.value
                }
                None => match app_llc {
                    // Inherited: capped at this phase's uncore requests.
                    Some(l) => l.value.min(uncore.value),
                    None => {
                        return Err(cx.missing(
                            table_span.clone(),
                            &format!("{prefix}.llc_mpki"),
                            format!(
                                "missing: pattern \"power-law\" needs llc_mpki (LLC misses per 1000 instructions with the whole LLC), like llc_mpki = 15; or set pattern = \"uniform\"{}",
                                if in_phase { " (in this phase or its app)" } else { "" }
                            ),
                        ));
                    }
                },
            };
            let alpha = phase.alpha.clone().or(app_alpha).map_or(0.5, |g| g.value);
            Pattern::PowerLaw { llc_mpki, alpha }
        }
    };
    let shared_writes_pki = phase
        .shared_writes_pki
        .clone()
        .or_else(|| app.shared_writes_pki.clone());
    if let Some(g) = &shared_writes_pki {
        if g.value > 0.0 && shared_bytes == 0 {
            return Err(cx.bad(
            g.raw,
            &g.path,
            format!(
                "writes to the shared area need one: set {shared_path} to its size (like shared = \"128KiB\") or shared_writes_pki = 0"
            ),
        ));
        }
    }
    Ok(ThreadModel {
        cpi_core: pick(&phase.cpi, &app.cpi).unwrap_or(1.0),
        uncore_pki: uncore.value,
        working_set,
        pattern,
        mlp: pick(&phase.mlp, &app.mlp).unwrap_or(1.0),
        shared_writes_pki: shared_writes_pki.map_or(0.0, |g| g.value),
    })
}
