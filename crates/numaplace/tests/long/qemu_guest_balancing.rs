//! numaplace and the kernel's automatic NUMA balancing on one real 2-node
//! kernel (a QEMU guest, tests/vm/guest-balancing-test.sh, with
//! `kernel.numa_balancing=1` and transparent huge pages off): numaplace
//! pins a memory hog's threads to node 1 and, with the default
//! `memory_mover = "where-kernel-cannot"`, leaves its memory to the kernel
//! (journalled as such) while it moves itself the memory the kernel never
//! will (a process under `mbind(MPOL_BIND)`). The hog's pages must follow
//! its threads and then stay: after placement the pages moved per minute
//! fall to near zero (no ping-pong). Then `auto` (counters made up from
//! CPU time) turns `kernel.numa_balancing` off as an experiment, after
//! recording the value it found in its state file; killed with SIGKILL
//! mid-trial, the next start puts the value back. Boots QEMU, so it is
//! ignored by default; `.ci/run` runs it with `--ignored`.
//!
//! Thresholds, with margin for TCG emulation on a loaded 2-core host (the
//! kernel moved 256 MiB after its threads within 5 s there):
//! * placed: >= 90% of the hog's pages on node 1 within [`PLACE_WITHIN_S`]
//!   of the daemon's start, and in every sample after;
//! * settled: from the sample after placement to the end (at least
//!   [`MIN_SETTLED_S`]), pages moved per minute (`/proc/vmstat`
//!   `pgmigrate_success`, which counts the kernel's moves and numaplace's)
//!   at most [`SETTLED_SHARE`] of the hog's pages per minute, and at most
//!   a tenth of the rate while it was being placed.

use crate::common;

use common::run_guest_script;
use serde_json::Value;

/// Seconds after the daemon's start by which the hog's pages must be on
/// its threads' node.
const PLACE_WITHIN_S: f64 = 20.0;
/// The shortest settled window the rate is measured over, seconds.
const MIN_SETTLED_S: f64 = 6.0;
/// Pages moved per minute once settled, as a share of the hog's pages.
const SETTLED_SHARE: f64 = 0.05;

struct Sample {
    secs: f64,
    hog: [u64; 2],
    alloc: [u64; 2],
    numa_pages_migrated: u64,
    pgmigrate_success: u64,
}

impl Sample {
    fn from(v: &Value) -> Sample {
        let pages = |k: &str| {
            let p = &v[k];
            [
                p["0"].as_u64().unwrap_or_else(|| panic!("{k}: {v}")),
                p["1"].as_u64().unwrap_or_else(|| panic!("{k}: {v}")),
            ]
        };
        let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
        Sample {
            secs: n("centis") as f64 / 100.0,
            hog: pages("hog"),
            alloc: pages("alloc"),
            numa_pages_migrated: n("numa_pages_migrated"),
            pgmigrate_success: n("pgmigrate_success"),
        }
    }

    fn hog_on_1(&self) -> f64 {
        self.hog[1] as f64 / (self.hog[0] + self.hog[1]).max(1) as f64
    }
}

/// Pages moved per minute between two samples.
fn per_minute(a: &Sample, b: &Sample, count: fn(&Sample) -> u64) -> f64 {
    (count(b) - count(a)) as f64 * 60.0 / (b.secs - a.secs).max(0.01)
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn with_the_kernels_balancing_on_pages_settle_after_numaplace_pins_a_hog() {
    let text = run_guest_script("guest-balancing-test.sh", &[]);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the guest's JSON does not parse: {e}\n{text}"));
    assert!(
        v.get("error").is_none(),
        "the guest reported an error: {text}"
    );
    assert_eq!(v["node_cpus"], serde_json::json!({"0": "0-1", "1": "2-3"}));
    assert_eq!(
        v["numa_balancing"], "1",
        "balancing must be on in the guest"
    );
    let thp = v["thp"].as_str().unwrap_or_default();
    assert!(thp.is_empty() || thp.contains("[never]"), "THP: {thp}");
    let hog_pid = v["hog_pid"].as_i64().expect("hog_pid");
    let alloc_pid = v["alloc_pid"].as_i64().expect("alloc_pid");
    let alloc_pages = v["alloc_mib"].as_u64().expect("alloc_mib") * 256;

    // The start report: the mode, and what numaplace does about it.
    let err = v["daemon_stderr"].as_str().expect("daemon_stderr");
    assert!(
        err.contains("kernel.numa_balancing=1 (normal)")
            && err.contains("memory_mover = \"where-kernel-cannot\": numaplace pins threads"),
        "the daemon did not report the balancing mode and the memory mover:\n{err}"
    );
    assert_eq!(v["daemon_status"], 0, "{err}");

    // Pages per node over time.
    let samples: Vec<Sample> = v["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(Sample::from)
        .collect();
    assert!(samples.len() >= 5, "too few samples: {}", samples.len());
    let t0 = samples[0].secs;
    eprintln!("  t(s)  hog N0  hog N1  alloc N0 alloc N1  numa_pages_migrated  pgmigrate_success");
    for s in &samples {
        eprintln!(
            "{:6.1} {:7} {:7} {:8} {:8} {:20} {:18}",
            s.secs - t0,
            s.hog[0],
            s.hog[1],
            s.alloc[0],
            s.alloc[1],
            s.numa_pages_migrated,
            s.pgmigrate_success
        );
    }
    let first = &samples[0];
    // First touched on node 0; in the 3 s the hog runs alone the kernel's
    // balancing may already move the pages of a hog thread that Linux ran
    // on node 1 (seen: 8,192 of 16,903 pages, in 2 of 3 runs on an idle
    // host). What must not be is the hog placed before numaplace starts.
    assert!(
        first.hog_on_1() < 0.6,
        "the hog's pages start mostly on node 0 (first touch there), not already placed: {:?}",
        first.hog
    );
    assert!(
        first.alloc[0] * 10 >= alloc_pages * 9,
        "alloc_on_node's pages start bound to node 0: {:?}",
        first.alloc
    );

    // a. Placed: the hog's pages follow its pinned threads (the kernel
    // moves them), within PLACE_WITHIN_S, and stay.
    let k = samples
        .iter()
        .position(|s| s.hog_on_1() >= 0.9)
        .unwrap_or_else(|| panic!("the hog's pages never reached node 1 (table above)"));
    let placed_after = samples[k].secs - t0;
    assert!(
        placed_after <= PLACE_WITHIN_S,
        "placed only after {placed_after:.1} s"
    );
    for s in &samples[k..] {
        assert!(
            s.hog_on_1() >= 0.9,
            "the hog's pages left node 1 again at {:.1} s: {:?} (ping-pong)",
            s.secs - t0,
            s.hog
        );
    }

    // b. Settled: pages moved per minute after placement near zero.
    let settled = &samples[(k + 1).min(samples.len() - 1)..];
    let (a, b) = (&settled[0], &settled[settled.len() - 1]);
    assert!(
        b.secs - a.secs >= MIN_SETTLED_S,
        "only {:.1} s after placement to measure (placed at {placed_after:.1} s): sample longer",
        b.secs - a.secs
    );
    let hog_pages = (b.hog[0] + b.hog[1]) as f64;
    let during = per_minute(first, &samples[k], |s| s.pgmigrate_success);
    let after = per_minute(a, b, |s| s.pgmigrate_success);
    let kernel_during = per_minute(first, &samples[k], |s| s.numa_pages_migrated);
    let kernel_after = per_minute(a, b, |s| s.numa_pages_migrated);
    eprintln!(
        "placed after {placed_after:.1} s; pages moved per minute: {during:.0} while placing \
         ({kernel_during:.0} by the kernel's balancing), {after:.0} after ({kernel_after:.0} by \
         the kernel) over {:.1} s; the hog has {hog_pages} pages",
        b.secs - a.secs
    );
    assert!(
        after <= SETTLED_SHARE * hog_pages,
        "{after:.0} pages moved per minute after placement: more than {} of the hog's {hog_pages}",
        SETTLED_SHARE
    );
    assert!(
        after * 10.0 <= during,
        "{after:.0} pages per minute after placement against {during:.0} while placing"
    );

    // c. The journal: every hog thread pinned to node 1 once; its memory
    // moves left to the kernel, none carried out by numaplace;
    // alloc_on_node's memory (under bind:0) moved by numaplace, once.
    let journal = v["journal"].as_array().expect("journal");
    let hog_threads: Vec<i64> = v["hog_threads"]
        .as_array()
        .expect("hog_threads")
        .iter()
        .map(|t| t.as_i64().expect("tid"))
        .collect();
    for tid in &hog_threads {
        let pins: Vec<&Value> = journal
            .iter()
            .filter(|e| e["action"] == "pin" && e["task"]["tid"] == *tid && e["outcome"] == "done")
            .collect();
        assert_eq!(pins.len(), 1, "thread {tid} pinned once: {pins:?}");
        assert_eq!(pins[0]["cpus"], "2-3", "{}", pins[0]);
    }
    let hog_moves: Vec<&Value> = journal
        .iter()
        .filter(|e| e["action"] == "move_memory" && e["pid"] == hog_pid)
        .collect();
    assert!(
        !hog_moves.is_empty(),
        "the policy's memory moves of the hog are journalled"
    );
    for e in &hog_moves {
        assert_eq!(e["outcome"], "skipped", "{e}");
        let why = e["why"].as_str().unwrap_or_default();
        assert!(
            why.starts_with(
                "left to the kernel's automatic NUMA balancing (memory_mover = \
                 \"where-kernel-cannot\")"
            ),
            "{e}"
        );
    }
    let alloc_moved: u64 = journal
        .iter()
        .filter(|e| e["action"] == "move_memory" && e["pid"] == alloc_pid)
        .inspect(|e| assert_ne!(e["outcome"], "skipped", "{e}"))
        .map(|e| e["moved"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        alloc_moved * 10 >= alloc_pages * 9 && alloc_moved <= alloc_pages * 11 / 10,
        "numaplace moved {alloc_moved} pages of alloc_on_node's {alloc_pages} bound ones: \
         once, all of them"
    );
    let last = &samples[samples.len() - 1];
    assert!(
        last.alloc[1] * 10 >= alloc_pages * 9,
        "alloc_on_node's pages stay on node 1 where numaplace put them: {:?}",
        last.alloc
    );
    eprintln!(
        "journal: {} entries; {} memory moves of the hog left to the kernel; {alloc_moved} pages \
         of alloc_on_node moved by numaplace",
        journal.len(),
        hog_moves.len()
    );

    // d. The signal: each hog thread that took hinting faults has most of
    // them on node 1, where its memory now is.
    let recorded = v["recorded"].as_array().expect("recorded");
    let snapshots: Vec<&Value> = recorded.iter().filter(|l| l["seq"].is_u64()).collect();
    assert!(!snapshots.is_empty(), "no recorded snapshots: {recorded:?}");
    let s = snapshots[snapshots.len() - 1];
    let faults = s["numa_faults"]
        .as_object()
        .unwrap_or_else(|| panic!("no numa_faults in the recorded snapshot"));
    let mut workers = 0;
    for tid in &hog_threads {
        let Some(f) = faults.get(&tid.to_string()) else {
            continue;
        };
        let on = |n: &str| f["memory"][n].as_u64().unwrap_or(0);
        let (n0, n1) = (on("0"), on("1"));
        eprintln!("hinting faults of hog thread {tid}: node 0 {n0}, node 1 {n1}, {f}");
        if n0 + n1 > 0 {
            workers += 1;
            assert!(n1 * 10 >= (n0 + n1) * 8, "thread {tid}: {f}");
        }
    }
    assert!(
        workers >= 1,
        "no hog thread with hinting faults in the recording: {faults:?}"
    );

    // e'. `numaplace doctor` in the guest: 2 nodes, hinting faults read
    // (balancing on), pinning and page moves work, no PMU.
    let doctor = v["doctor"].as_array().expect("doctor's JSON");
    let check = |name: &str| {
        doctor
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in doctor: {doctor:?}"))
    };
    assert!(
        check("topology")["source"]
            .as_str()
            .is_some_and(|s| s.contains("2 NUMA nodes")),
        "{doctor:?}"
    );
    for name in [
        "NUMA hinting faults",
        "pinning threads",
        "moving memory",
        "memory per node",
    ] {
        assert_eq!(check(name)["status"], "ok", "{name}: {doctor:?}");
    }
    assert_eq!(
        check("sampled data addresses")["status"],
        "missing",
        "{doctor:?}"
    );
    assert!(
        check("sampled data addresses")["fix"].is_string(),
        "{doctor:?}"
    );

    // e. SIGTERM put the affinities back.
    assert_eq!(v["hog_allowed_after"], "0-3");

    // g. auto turned the kernel's balancing off as an experiment, after
    // recording the value it found; killed mid-trial, the next start put
    // it back.
    let auto_err = v["auto_stderr"].as_str().unwrap_or("");
    assert_eq!(
        v["auto_turned_off"], true,
        "auto never turned kernel.numa_balancing off; its stderr:\n{auto_err}"
    );
    let state = &v["auto_state_during"];
    assert_eq!(state["version"], 2, "{state}");
    assert_eq!(state["kernel_balancing"]["original"], 1, "{state}");
    assert_eq!(state["kernel_balancing"]["applied"], 0, "{state}");
    let trial = v["auto_journal"]
        .as_array()
        .expect("auto_journal")
        .iter()
        .find(|e| e["action"] == "kernel_balancing")
        .unwrap_or_else(|| panic!("no kernel_balancing entry in auto's journal"));
    assert_eq!(trial["on"], false, "{trial}");
    assert_eq!(trial["outcome"], "done", "{trial}");
    assert!(
        trial["reason"]
            .as_str()
            .is_some_and(|r| r.contains("experiment") && r.contains("trying the kernel")),
        "{trial}"
    );
    assert_eq!(v["after_crash"], "0", "SIGKILL left it as auto set it");
    let restart = v["restart_stderr"].as_str().unwrap_or("");
    assert_eq!(
        v["restart_status"], 0,
        "the restarted daemon stops on SIGTERM with status 0; its stderr:\n{restart}"
    );
    assert_eq!(
        v["after_restart"], "1",
        "the next start put it back; its stderr:\n{restart}"
    );
    assert!(
        restart.contains("kernel.numa_balancing back to 1"),
        "{restart}"
    );
}
