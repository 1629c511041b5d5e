//! The machine-file parser (what `numaplace calibrate` writes) on
//! arbitrary text: must never panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use numaplace_sim::machine::Machine;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = Machine::parse(&text, Path::new("fuzz.json"));
});
