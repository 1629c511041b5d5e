//! Reading one TOML value of a scenario file as what its field wants (a
//! string, a bounded number, a count, a size, a name), or an error saying
//! where it is and what is allowed.

use super::*;

impl Ctx<'_> {
    pub(super) fn string<'v>(
        &self,
        v: &'v Spanned<Value>,
        path: &str,
        what: &str,
    ) -> Result<&'v str, ScenarioError> {
        match v.get_ref() {
            Value::String(s) => Ok(s),
            other => Err(self.bad(
                v,
                path,
                format!("expected a string ({what}), got {}", shown(other)),
            )),
        }
    }

    pub(super) fn number(&self, v: &Spanned<Value>, path: &str) -> Result<f64, ScenarioError> {
        let x = match v.get_ref() {
            Value::Integer(i) => *i as f64,
            Value::Float(f) => *f,
            other => {
                return Err(self.bad(v, path, format!("expected a number, got {}", shown(other))));
            }
        };
        if !x.is_finite() {
            return Err(self.bad(v, path, format!("expected a finite number, got {x}")));
        }
        Ok(x)
    }

    /// A number with `min < x` (strict) or `min <= x`, and `x <= max`.
    pub(super) fn bounded(
        &self,
        v: &Spanned<Value>,
        path: &str,
        min: f64,
        strict_min: bool,
        max: Option<f64>,
    ) -> Result<f64, ScenarioError> {
        let x = self.number(v, path)?;
        let low_ok = if strict_min { x > min } else { x >= min };
        let high_ok = max.is_none_or(|m| x <= m);
        if !(low_ok && high_ok) {
            let rule = match (strict_min, max) {
                (true, None) => format!("greater than {min}"),
                (false, None) => format!("at least {min}"),
                (true, Some(m)) => format!("greater than {min} and at most {m}"),
                (false, Some(m)) => format!("between {min} and {m}"),
            };
            return Err(self.bad(v, path, format!("must be {rule}, got {}", readable(x))));
        }
        Ok(x)
    }

    pub(super) fn positive(&self, v: &Spanned<Value>, path: &str) -> Result<f64, ScenarioError> {
        self.bounded(v, path, 0.0, true, None)
    }

    pub(super) fn non_negative(
        &self,
        v: &Spanned<Value>,
        path: &str,
    ) -> Result<f64, ScenarioError> {
        self.bounded(v, path, 0.0, false, None)
    }

    /// A whole number from 1 to `max`.
    pub(super) fn count(
        &self,
        v: &Spanned<Value>,
        path: &str,
        what: &str,
        max: u32,
    ) -> Result<u32, ScenarioError> {
        match v.get_ref() {
            Value::Integer(i) if *i >= 1 && *i <= i64::from(max) => Ok(*i as u32),
            Value::Integer(i) => {
                Err(self.bad(v, path, format!("must be 1..={max} ({what}), got {i}")))
            }
            other => Err(self.bad(
                v,
                path,
                format!(
                    "expected a whole number 1..={max} ({what}), got {}",
                    shown(other)
                ),
            )),
        }
    }

    pub(super) fn boolean(&self, v: &Spanned<Value>, path: &str) -> Result<bool, ScenarioError> {
        match v.get_ref() {
            Value::Boolean(b) => Ok(*b),
            other => Err(self.bad(
                v,
                path,
                format!("expected true or false, got {}", shown(other)),
            )),
        }
    }

    /// A size in bytes; `positive`: it must be more than 0.
    pub(super) fn size(
        &self,
        v: &Spanned<Value>,
        path: &str,
        positive: bool,
    ) -> Result<u64, ScenarioError> {
        let bytes = match v.get_ref() {
            Value::Integer(i) if *i < 0 => {
                return Err(self.bad(
                    v,
                    path,
                    format!(
                        "size {i} is negative: give a size in bytes or with a unit, like \"64MiB\""
                    ),
                ));
            }
            Value::Integer(i) => *i as u64,
            Value::String(s) => parse_size(s).map_err(|m| self.bad(v, path, m))?,
            other => {
                return Err(self.bad(
                    v,
                    path,
                    format!(
                        "expected a size: a whole number of bytes or a string like \"64MiB\", got {}",
                        shown(other)
                    ),
                ));
            }
        };
        if positive && bytes == 0 {
            return Err(self.bad(
                v,
                path,
                "size must be greater than 0, like \"64MiB\"".into(),
            ));
        }
        Ok(bytes)
    }

    /// A name: non-empty, no control characters.
    pub(super) fn name(&self, v: &Spanned<Value>, path: &str) -> Result<String, ScenarioError> {
        let s = self.string(v, path, "a name")?;
        if s.trim().is_empty() {
            return Err(self.bad(
                v,
                path,
                "the name is empty: give a name like \"mcf\"".into(),
            ));
        }
        if let Some(c) = s.chars().find(|c| c.is_control()) {
            return Err(self.bad(
                v,
                path,
                format!("the name has the control character {c:?}: use printable characters only"),
            ));
        }
        Ok(s.to_string())
    }
}

/// A number as an error message shows it: plain where that is short,
/// in exponent form for the very small and very large (1e-300, not three
/// hundred zeros).
fn readable(x: f64) -> String {
    if x != 0.0 && !(1e-4..1e9).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}
