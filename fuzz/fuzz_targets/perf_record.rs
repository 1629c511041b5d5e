//! `parse_sample` on arbitrary bytes under every combination of the
//! fixed-size sample-format fields: it must never panic, and what it
//! returns must be the bytes at the offsets perf_event_open(2) gives.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_parse::perf_record::{bits, parse_sample, read_u32, read_u64};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    // The first byte chooses which optional fields the body claims to
    // carry; TID and ADDR are always asked for, as numaplace does.
    let optional = [
        bits::IDENTIFIER,
        bits::IP,
        bits::TIME,
        bits::ID,
        bits::STREAM_ID,
        bits::CPU,
        bits::PERIOD,
        bits::DATA_SRC,
    ];
    let mut flags = bits::TID | bits::ADDR;
    for (i, b) in optional.iter().enumerate() {
        if selector & (1 << i) != 0 {
            flags |= b;
        }
    }
    let Some(s) = parse_sample(flags, body) else {
        return;
    };
    let words = |fs: &[u64]| fs.iter().filter(|&&f| flags & f != 0).count() * 8;
    let tid_at = words(&[bits::IDENTIFIER, bits::IP]);
    let addr_at = tid_at + 8 + words(&[bits::TIME]);
    assert_eq!(Some(s.pid), read_u32(body, tid_at));
    assert_eq!(Some(s.tid), read_u32(body, tid_at + 4));
    assert_eq!(Some(s.addr), read_u64(body, addr_at));
    if flags & bits::DATA_SRC != 0 {
        let src_at = addr_at + 8 + words(&[bits::ID, bits::STREAM_ID, bits::CPU, bits::PERIOD]);
        assert_eq!(s.data_src, read_u64(body, src_at));
    } else {
        assert_eq!(s.data_src, None);
    }
});
