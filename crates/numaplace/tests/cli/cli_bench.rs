//! `numaplace bench` on this machine as a user runs it: a tiny run that
//! reports where its pages are, an experiment this machine may not fully
//! host, and bad input (exit status 2 and a message naming the problem).

use crate::common;

use std::os::unix::process::CommandExt;
use std::process::Command;

use common::{ok, refused, text};
use numaplace_linux::actuate::thread_affinity;
use numaplace_model::CpuSet;
use serde_json::Value;

/// The CPUs this test may run on, the first two at most.
fn some_cpus() -> Vec<u32> {
    let allowed = thread_affinity(0, 1024).expect("sched_getaffinity");
    allowed.iter().take(2).collect()
}

fn nodes_with_cpus() -> usize {
    let online = std::fs::read_to_string("/sys/devices/system/node/online").unwrap_or("0".into());
    let nodes: CpuSet = CpuSet::parse_list(&online).unwrap();
    nodes
        .iter()
        .filter(|n| {
            std::fs::read_to_string(format!("/sys/devices/system/node/node{n}/cpulist"))
                .is_ok_and(|l| !l.trim().is_empty())
        })
        .count()
}

#[test]
fn a_tiny_run_reports_its_pages_on_node_0() {
    let cpus = some_cpus();
    let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
    let (n, list) = (cpus.len().to_string(), list.join(","));
    let args = [
        "bench",
        "--threads",
        &n,
        "--cpus",
        &list,
        "--working-set",
        "1MiB",
        "--shared",
        "64",
        "--memory-node",
        "0",
        "--loops",
        "3",
        "--json",
    ];
    let o = ok(&args);
    let v: Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    assert_eq!(v["memory"], "node 0");
    assert_eq!(v["entries_per_thread"], 16384);
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len(), cpus.len());
    let page = v["page_size"].as_u64().unwrap();
    for (t, &cpu) in threads.iter().zip(&cpus) {
        assert_eq!(t["cpu"].as_u64(), Some(cpu as u64), "{t}");
        assert_eq!(t["loops"], 3, "{t}");
        assert_eq!(t["hops"], 3 * 16384, "{t}");
        assert_eq!(t["shared_adds"], 3 * 8, "{t}");
        assert!(t["seconds"].as_f64().unwrap() > 0.0, "{t}");
        for seen in t["ran_on"].as_array().unwrap() {
            assert_eq!(seen["cpu"].as_u64(), Some(cpu as u64), "{t}");
        }
        let pages = t["private_pages"].as_object().unwrap();
        assert_eq!(pages.len(), 1, "{t}");
        assert_eq!(pages["0"].as_u64(), Some((1 << 20) / page), "{t}");
    }
    assert_eq!(v["shared_pages"]["0"], 1, "{v}");

    // The table says the same.
    let o = ok(&args[..args.len() - 1]);
    let out = text(&o.stdout);
    assert!(out.contains("memory node 0, 3 loops"), "{out}");
    assert!(out.contains(&format!("N0 {}", (1 << 20) / page)), "{out}");
    assert!(out.contains("mean thread run time"), "{out}");
}

#[test]
fn seconds_run_for_about_that_long() {
    let o = ok(&[
        "bench",
        "--working-set",
        "64KiB",
        "--seconds",
        "0.2",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let t = &v["threads"][0];
    let s = t["seconds"].as_f64().unwrap();
    assert!((0.2..5.0).contains(&s), "{t}");
    assert!(t["loops"].as_u64().unwrap() >= 1, "{t}");
}

#[test]
fn fig4a_quick_says_what_this_machine_can_run() {
    let o = ok(&["bench", "--experiment", "fig4a", "--quick"]);
    let out = text(&o.stdout);
    let rows: Vec<&str> = out.lines().filter(|l| l.contains(" MiB ")).collect();
    assert_eq!(rows.len(), 3, "{out}");
    if nodes_with_cpus() == 1 {
        assert!(
            out.contains(
                "fig4a needs two NUMA nodes; this machine has 1: running the local case only"
            ),
            "{out}"
        );
        assert!(rows.iter().all(|r| r.contains(" - ")), "{out}");
    } else {
        assert!(out.contains("Remote = CPU"), "{out}");
    }
    assert!(rows.iter().all(|r| r.contains("N0")), "{out}");
}

#[test]
fn experiments_print_json() {
    let o = ok(&[
        "bench",
        "--experiment",
        "fig5b",
        "--quick",
        "--scale",
        "0.002",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(v["experiment"], "fig5b");
    assert_eq!(v["labels"][0], "Intra-S");
    let points = v["points"].as_array().unwrap();
    let shared: Vec<u64> = points
        .iter()
        .map(|p| p["shared_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(shared, [0, 32 << 10, 256 << 10]);
    for p in points {
        assert!(p["first"]["mean_seconds"].as_f64().unwrap() > 0.0, "{p}");
    }
}

#[test]
fn bad_input_exits_2_with_a_message() {
    refused(
        &["bench", "--cpus", "4000"],
        "CPU 4000 is not one of this machine's CPUs",
    );
    refused(
        &["bench", "--memory-node", "77"],
        "node 77 does not exist; this machine has nodes",
    );
    refused(
        &["bench", "--memory-node", "far"],
        "give a node number, `local` or `interleave`",
    );
    refused(&["bench", "--working-set", "100"], "not a multiple of 64");
    refused(&["bench", "--working-set", "lots"], "--working-set lots");
    refused(&["bench", "--shared", "12"], "8-byte words");
    refused(&["bench", "--threads", "0"], "at least one thread");
    refused(&["bench", "--threads", "5000"], "one CPU per thread");
    refused(
        &["bench", "--threads", "2", "--cpus", "0"],
        "give one CPU per thread",
    );
    refused(&["bench", "--loops", "0"], "at least one loop");
    refused(&["bench", "--seconds", "-1"], "positive number of seconds");
    refused(&["bench", "--nodes", "77"], "node 77 does not exist");
    refused(
        &["bench", "--working-set", "100TiB"],
        "the run needs 100 TiB",
    );
    refused(&["bench", "--experiment", "fig9"], "one of fig4a, fig4b");
    refused(
        &["bench", "--experiment", "fig4a", "--scale", "0"],
        "--scale 0",
    );
    // clap's own refusals: conflicting or dependent flags.
    refused(
        &["bench", "--experiment", "fig4a", "--threads", "2"],
        "cannot be used with",
    );
    refused(&["bench", "--quick"], "--experiment");
    refused(
        &["bench", "--loops", "2", "--seconds", "1"],
        "cannot be used with",
    );
}

/// A CPU of the machine outside this process's affinity is refused.
#[test]
fn a_cpu_this_process_may_not_use_is_refused() {
    let cpus = some_cpus();
    if cpus.len() < 2 {
        eprintln!("one CPU here: nothing to leave out");
        return;
    }
    let (keep, other) = (cpus[0], cpus[1]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_numaplace"));
    cmd.args(["bench", "--cpus", &other.to_string()])
        .env_remove("RUST_LOG");
    // SAFETY: only sched_setaffinity (async-signal-safe) runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(keep as usize, &mut set);
            if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "CPU {other} is not allowed to this process (it may use {keep})"
        )),
        "{err}"
    );
}
