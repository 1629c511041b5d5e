//! Test helper: allocate anonymous memory under the memory policy the
//! process was started with, and hold it.
//!
//! Usage: `touch_memory MIB`
//!
//! Maps MIB MiB of private anonymous memory, touches every page (so the
//! kernel allocates them where the process's memory policy says: the one
//! `numaplace exec` or `numactl` set before executing it; no policy of its
//! own), prints `ready <pid>` on stdout and sleeps until killed. Used by
//! the QEMU exec test (tests/vm/guest-exec-test.sh), which then reads the
//! policy and the pages per node from `/proc/<pid>/numa_maps`.
//!
//! Exit status 2 on bad arguments, 1 when the mapping fails.

use std::process::ExitCode;

#[path = "support/mod.rs"]
mod support;

const USAGE: &str = "usage: touch_memory MIB\n  \
    MIB   MiB of anonymous memory to allocate and touch (> 0)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib = match args.as_slice() {
        [mib] if mib != "-h" && mib != "--help" => match support::parse_mib(mib) {
            Ok(m) => m,
            Err(msg) => {
                eprintln!("touch_memory: error: {msg}\n{USAGE}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (addr, len) = match support::map_mib("touch_memory", mib) {
        Ok(mapped) => mapped,
        Err(status) => return status,
    };
    support::touch_pages(addr, len);
    support::announce_ready_and_wait()
}
