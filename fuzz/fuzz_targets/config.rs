//! The config file's library-typed tables (`[policy]` with every policy's
//! parameters, `[scope]`, `[engine]`) from arbitrary TOML: must never
//! panic, and what parses must validate or be refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_policy::engine::EngineConfig;
use numaplace_policy::{PolicyKind, Scope};

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Tables {
    #[serde(default)]
    policy: Option<PolicyKind>,
    #[serde(default)]
    scope: Option<Scope>,
    #[serde(default)]
    engine: Option<EngineConfig>,
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(t) = toml::from_str::<Tables>(&text) {
        if let Some(s) = &t.scope {
            let _ = s.validate();
        }
        if let Some(p) = &t.policy {
            let _ = p.build();
        }
    }
});
