//! A recording (header line, then one snapshot per line) read back from
//! arbitrary bytes: must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_linux::Replay;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("numaplace-fuzz-rec-{}", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(replay) = Replay::open(&path) {
        for s in replay.take(1000) {
            let _ = s.map(|s| s.tasks.len());
        }
    }
    let _ = std::fs::remove_file(&path);
});
