//! The daemon's config file (`numaplace::config::Config`, as `run`,
//! `advise`, `doctor` and `tasks` read it) from arbitrary TOML: must never
//! panic, and what parses has been validated and builds its policy.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace::config::Config;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(config) = Config::parse(&text) {
        let _ = config.policy.build();
    }
});
