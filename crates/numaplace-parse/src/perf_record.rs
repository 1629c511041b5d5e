//! The byte layout of a perf sample record (`PERF_RECORD_SAMPLE` with
//! `PERF_SAMPLE_TID | PERF_SAMPLE_ADDR`, optionally `DATA_SRC`), parsed
//! from the bytes the ring buffer holds.

/// `perf_event_header.type` of a record saying samples were lost (the ring
/// buffer was full).
pub const PERF_RECORD_LOST: u32 = 2;
/// `perf_event_header.type` of a record saying the kernel throttled the
/// event (too many samples a second).
pub const PERF_RECORD_THROTTLE: u32 = 5;
/// `perf_event_header.type` of a sample.
pub const PERF_RECORD_SAMPLE: u32 = 9;

/// `PERF_SAMPLE_*` bits, as the kernel's `perf_event_sample_format`.
pub mod bits {
    /// The record holds the instruction pointer.
    pub const IP: u64 = 1 << 0;
    /// The record holds the process and thread ids.
    pub const TID: u64 = 1 << 1;
    /// The record holds the timestamp.
    pub const TIME: u64 = 1 << 2;
    /// The record holds the data address.
    pub const ADDR: u64 = 1 << 3;
    /// The record holds the counter values (variable length).
    pub const READ: u64 = 1 << 4;
    /// The record holds the call chain (variable length).
    pub const CALLCHAIN: u64 = 1 << 5;
    /// The record holds the event id.
    pub const ID: u64 = 1 << 6;
    /// The record holds the CPU and a reserved word.
    pub const CPU: u64 = 1 << 7;
    /// The record holds the sample period.
    pub const PERIOD: u64 = 1 << 8;
    /// The record holds the stream id.
    pub const STREAM_ID: u64 = 1 << 9;
    /// The record holds raw tracepoint data (variable length).
    pub const RAW: u64 = 1 << 10;
    /// The record holds the last branch records (variable length).
    pub const BRANCH_STACK: u64 = 1 << 11;
    /// The record holds the user registers (variable length).
    pub const REGS_USER: u64 = 1 << 12;
    /// The record holds a copy of the user stack (variable length).
    pub const STACK_USER: u64 = 1 << 13;
    /// The record holds the access's weight (its latency, in cycles).
    pub const WEIGHT: u64 = 1 << 14;
    /// The record holds where the data came from (`perf_mem_data_src`).
    pub const DATA_SRC: u64 = 1 << 15;
    /// The record holds the event id, first in the record.
    pub const IDENTIFIER: u64 = 1 << 16;
    /// The record holds the weight as a structure of 3 parts.
    pub const WEIGHT_STRUCT: u64 = 1 << 24;
    /// Variable-length fields before `DATA_SRC`, which [`super::parse_sample`]
    /// does not walk.
    pub const UNSUPPORTED: u64 = READ | CALLCHAIN | RAW | BRANCH_STACK | REGS_USER | STACK_USER;
}

/// `perf_mem_data_src.mem_op` (bits 0-4): `PERF_MEM_OP_STORE`.
pub const PERF_MEM_OP_STORE: u64 = 0x04;

/// The fields of a `PERF_RECORD_SAMPLE` the sampler uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedSample {
    /// Process (tgid) and thread, if `PERF_SAMPLE_TID`.
    pub pid: u32,
    /// The thread that took the sample, if `PERF_SAMPLE_TID`.
    pub tid: u32,
    /// The data address (0: none recorded).
    pub addr: u64,
    /// `perf_mem_data_src`, if `PERF_SAMPLE_DATA_SRC`.
    pub data_src: Option<u64>,
}

impl ParsedSample {
    /// Whether the access was a store, as far as `data_src` says.
    pub fn write(&self) -> bool {
        self.data_src
            .is_some_and(|d| d & 0x1f & PERF_MEM_OP_STORE != 0)
    }
}

/// The native-endian `u64` at byte `at` of `b`; `None` past its end.
pub fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The native-endian `u32` at byte `at` of `b`; `None` past its end.
pub fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Parses the body (after `perf_event_header`) of a `PERF_RECORD_SAMPLE`
/// written with `sample_type` = `flags`, in the order perf_event_open(2)
/// gives: identifier, ip, pid/tid, time, addr, id, stream_id, cpu, period,
/// (read, callchain, raw, branch stack, user regs and stack: not
/// supported), weight, data_src. `None` if the body is too short or the
/// flags hold an unsupported variable-length field.
pub fn parse_sample(flags: u64, body: &[u8]) -> Option<ParsedSample> {
    use bits::*;
    if flags & UNSUPPORTED != 0 {
        return None;
    }
    let mut at = 0usize;
    let skip = |flag: u64, at: &mut usize| {
        if flags & flag != 0 {
            *at += 8;
        }
    };
    skip(IDENTIFIER, &mut at);
    skip(IP, &mut at);
    let (mut pid, mut tid) = (0, 0);
    if flags & TID != 0 {
        pid = read_u32(body, at)?;
        tid = read_u32(body, at + 4)?;
        at += 8;
    }
    skip(TIME, &mut at);
    let mut addr = 0;
    if flags & ADDR != 0 {
        addr = read_u64(body, at)?;
        at += 8;
    }
    skip(ID, &mut at);
    skip(STREAM_ID, &mut at);
    skip(CPU, &mut at);
    skip(PERIOD, &mut at);
    if flags & (WEIGHT | WEIGHT_STRUCT) != 0 {
        at += 8;
    }
    let data_src = if flags & DATA_SRC != 0 {
        Some(read_u64(body, at)?)
    } else {
        None
    };
    // Everything asked for must be there.
    if body.len() < at {
        return None;
    }
    Some(ParsedSample {
        pid,
        tid,
        addr,
        data_src,
    })
}
