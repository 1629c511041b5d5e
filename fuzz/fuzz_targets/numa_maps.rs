//! `parse_numa_maps` on arbitrary text: must never panic, and every
//! non-blank line is either a mapping or a skipped line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_parse::procfs::{parse_numa_maps, parse_numa_maps_line};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let maps = parse_numa_maps(&text);
    let lines = text.split('\n').filter(|l| !l.trim().is_empty()).count();
    assert_eq!(maps.mappings + maps.skipped_lines, lines);
    let _ = maps.total();
    for line in text.split('\n') {
        if let Ok(m) = parse_numa_maps_line(line) {
            assert!(!m.policy.is_empty());
            let _ = m.node_bytes().count();
        }
    }
});
