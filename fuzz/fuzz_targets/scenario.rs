//! The scenario parser on arbitrary text: must never panic, and every
//! count it accepts is within its stated range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_sim::scenario;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(w) = scenario::parse(&text, "fuzz.toml") {
        assert!(w.apps.len() <= scenario::MAX_APPS);
        assert!(w.step_ms >= scenario::MIN_STEP_MS && w.step_ms.is_finite());
    }
});
