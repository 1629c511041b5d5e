//! `guest_hints::parse_line` on arbitrary input (what a guest may write on
//! its port): never a panic, and what is accepted is written back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_parse::guest_hints::parse_line;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.split('\n') {
        if let Ok(m) = parse_line(line) {
            assert_eq!(parse_line(&m.to_string()), Ok(m));
        }
    }
});
