//! Durations on the command line: `500ms`, `1s`, `2m`, `1h`, `1.5s`.

use std::time::Duration;

/// Parses a duration; `what` names the option in the error.
pub fn parse_duration(text: &str, what: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| {
        format!("{what} {text:?}: expected a number with a unit, like 500ms, 1s or 2m")
    })?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "" if value == 0.0 => 1.0,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "" => {
            return Err(format!(
                "{what} {text:?}: give a unit, like 500ms, 1s or 2m"
            ));
        }
        u => {
            return Err(format!(
                "{what} {text:?}: unknown unit {u:?} (use ms, s, m or h)"
            ));
        }
    };
    let secs = value * scale;
    if !secs.is_finite() || secs > 86_400.0 * 365.0 {
        return Err(format!("{what} {text:?}: too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("500ms", "--interval"),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(
            parse_duration("1.5s", "--interval"),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_duration("2m", "--interval"),
            Ok(Duration::from_secs(120))
        );
        assert_eq!(parse_duration("0", "--interval"), Ok(Duration::ZERO));
        for bad in ["", "s", "10", "5x", "1e400s", "-1s"] {
            let e = parse_duration(bad, "--interval").unwrap_err();
            assert!(e.starts_with("--interval"), "{bad}: {e}");
        }
    }
}
