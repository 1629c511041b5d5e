//! Any scenario text either parses, with every count and time inside its
//! stated range, or is refused with a located error: never a panic, and
//! never a workload too large to allocate or too long to simulate.

use numaplace_sim::scenario::{self, MAX_APPS, MAX_STEPS, MIN_STEP_MS};
use proptest::prelude::*;

/// Values a hostile user would try.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1".to_string()),
        Just("4".to_string()),
        Just("4294967296".to_string()),
        Just("9223372036854775807".to_string()),
        Just("-9223372036854775808".to_string()),
        Just("1e-300".to_string()),
        Just("1e300".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("0.5".to_string()),
        Just("\"64MiB\"".to_string()),
        Just("\"1e30GiB\"".to_string()),
        Just("\"first-touch\"".to_string()),
        Just("\"node:4294967295\"".to_string()),
        Just("\"0-8191\"".to_string()),
        Just("\"\\u202e\"".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| format!("{f:e}")),
    ]
}

const TOP: [&str; 5] = ["step_ms", "max_seconds", "name", "description", "machine"];
const APP: [&str; 14] = [
    "threads",
    "copies",
    "runs",
    "start_s",
    "shared",
    "sharers",
    "instructions",
    "cpi",
    "working_set",
    "llc_mpki",
    "uncore_pki",
    "mlp",
    "memory",
    "cpus",
];

fn scenario_text() -> impl Strategy<Value = String> {
    (
        proptest::collection::vec((0..TOP.len(), value()), 0..4),
        proptest::collection::vec(
            proptest::collection::vec((0..APP.len(), value()), 0..6),
            0..4,
        ),
    )
        .prop_map(|(top, apps)| {
            let mut t = String::from("machine = \"westmere-2s\"\n");
            for (k, v) in top {
                if TOP[k] != "machine" {
                    t.push_str(&format!("{} = {v}\n", TOP[k]));
                }
            }
            for (i, app) in apps.iter().enumerate() {
                t.push_str(&format!("[[app]]\nname = \"a{i}\"\n"));
                let mut seen = Vec::new();
                for (k, v) in app {
                    if !seen.contains(k) {
                        seen.push(*k);
                        t.push_str(&format!("{} = {v}\n", APP[*k]));
                    }
                }
            }
            t
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_scenario_parses_within_its_ranges_or_is_refused(text in scenario_text()) {
        match scenario::parse(&text, "prop.toml") {
            Ok(w) => {
                prop_assert!(w.apps.len() <= MAX_APPS);
                prop_assert!(w.step_ms.is_finite() && w.step_ms >= MIN_STEP_MS);
                prop_assert!(w.max_seconds.is_finite());
                prop_assert!(w.max_seconds * 1000.0 / w.step_ms <= MAX_STEPS);
            }
            Err(e) => {
                let m = e.to_string();
                prop_assert!(!m.is_empty() && !m.contains('\n'), "{m}");
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_scenario_parser(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = scenario::parse(&String::from_utf8_lossy(&bytes), "prop.toml");
    }
}
