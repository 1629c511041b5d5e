//! Test helper: move a process's pages to a node with numaplace's actuator.
//!
//! Usage: `move_memory PID NODE`
//!
//! Reads the process's start time (`/proc/PID/stat` field 22), calls
//! `HostActuator::move_memory` (the same call `numaplace run` makes for a
//! `MoveMemory` action, without a page limit) and prints one JSON object on
//! stdout: `{"pid":..,"node":..,"outcome":{..},"elapsed_ns":..}`, where
//! `outcome` is the actuator's `Outcome` and `elapsed_ns` the time the call
//! took. Used by the QEMU daemon test (tests/vm/guest-daemon-test.sh) to
//! compare numaplace's page-moving throughput with numactl's
//! `migratepages`.
//!
//! Exit status 2 on bad arguments or when the process does not exist, 1 when
//! the outcome is not a page count (gone, refused).

use std::process::ExitCode;
use std::time::Instant;

use numaplace_linux::SysRoot;
use numaplace_linux::actuate::HostActuator;
use numaplace_linux::procfs::ProcReader;
use numaplace_model::{Outcome, TaskId};

const USAGE: &str = "usage: move_memory PID NODE\n  \
    PID   the process whose pages to move\n  \
    NODE  the NUMA node to move them to";

fn parse_args() -> Result<(i32, u32), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 1 && (args[0] == "-h" || args[0] == "--help") {
        return Err(String::new());
    }
    let [pid, node] = args.as_slice() else {
        return Err(format!(
            "expected 2 arguments (PID NODE), got {}",
            args.len()
        ));
    };
    let pid: i32 = pid
        .parse()
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| format!("PID '{pid}' is not a process id (a whole number > 0)"))?;
    let node: u32 = node
        .parse()
        .map_err(|_| format!("NODE '{node}' is not a node id (a whole number)"))?;
    Ok((pid, node))
}

fn main() -> ExitCode {
    let (pid, node) = match parse_args() {
        Ok(v) => v,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("move_memory: error: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let procfs = ProcReader::new(SysRoot::host());
    let start_time = match procfs.stat(pid, pid) {
        Ok(s) => s.start_time,
        Err(e) => {
            eprintln!("move_memory: error: process {pid}: {e}");
            return ExitCode::from(2);
        }
    };
    let act = HostActuator::new();
    let t = Instant::now();
    let outcome = act.move_memory(
        TaskId {
            tid: pid,
            start_time,
        },
        node,
        None,
    );
    let elapsed_ns = t.elapsed().as_nanos() as u64;
    let out = serde_json::json!({
        "pid": pid,
        "node": node,
        "outcome": outcome,
        "elapsed_ns": elapsed_ns,
    });
    println!("{out}");
    match outcome {
        Outcome::Pages(_) => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}
