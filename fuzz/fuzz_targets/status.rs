//! `parse_status`, `parse_cgroup`, `parse_cmdline` and `parse_sched_numa` on
//! arbitrary input: must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_parse::procfs::{parse_cgroup, parse_cmdline, parse_sched_numa, parse_status};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(s) = parse_status(&text) {
        let _ = s.cpus_allowed.len() + s.mems_allowed.len();
    }
    let _ = parse_cgroup(&text);
    let _ = parse_cmdline(data);
    if let Ok(Some(n)) = parse_sched_numa(&text) {
        let _ = n.faults.values().map(|f| f.task()).sum::<u64>();
    }
});
