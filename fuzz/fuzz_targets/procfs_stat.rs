//! `parse_stat` on arbitrary bytes: must never panic; what it accepts must
//! be consistent with the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_parse::procfs::parse_stat;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = parse_stat(data) {
        assert!(data.ends_with(b"\n"));
        // A byte that is not UTF-8 is kept as a 4-byte private-use
        // character (numaplace_model::task::name_from_bytes).
        assert!(s.comm.len() <= 4 * data.len());
        assert!(s.state.is_ascii_alphabetic());
    }
});
