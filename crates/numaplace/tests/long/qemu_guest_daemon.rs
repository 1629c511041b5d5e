//! The daemon on a real 2-node kernel (a QEMU guest): `numaplace run
//! --policy numad-like` moves a program whose pages start on node 0
//! (`numa_hog 200 2`) to node 1, threads and pages; SIGTERM puts the
//! original affinities back; `kill -9` then a restart puts them back too;
//! `numaplace run` with no --policy runs `auto`, which, with no PMU in the
//! guest, says so at start and makes numad's placement, and SIGTERM
//! restores that too; and numaplace's page-moving throughput is measured
//! against numactl's `migratepages` on the same 256 MiB. Boots QEMU
//! (tests/vm/guest-daemon-test.sh), so it is ignored by default; `.ci/run`
//! runs it with `--ignored`.

use crate::common;

use common::run_guest_script;
use std::collections::BTreeMap;

use serde_json::Value;

/// Every thread's `Cpus_allowed_list`, by tid.
fn affinity(v: &Value, phase: &str) -> BTreeMap<String, String> {
    let a = v[phase]["affinity"]
        .as_object()
        .unwrap_or_else(|| panic!("no {phase}.affinity in the guest's results"));
    assert!(!a.is_empty(), "{phase}: no threads listed");
    a.iter()
        .map(|(tid, cpus)| {
            let cpus = cpus
                .as_str()
                .unwrap_or_else(|| panic!("{phase}.affinity.{tid}: {cpus}"));
            (tid.clone(), cpus.to_string())
        })
        .collect()
}

/// Pages on node 0 and node 1.
fn pages(v: &Value) -> (u64, u64) {
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("pages: {v}"));
    (n("0"), n("1"))
}

/// Pages a throughput run moved to node 1 and the seconds it took.
fn run_rate(r: &Value) -> (u64, f64) {
    assert!(r.get("error").is_none(), "throughput run failed: {r}");
    assert_eq!(r["status"], 0, "the move exited non-zero: {r}");
    let (_, before) = pages(&r["before"]);
    let (left, after) = pages(&r["after"]);
    let moved = after.saturating_sub(before);
    let centis = r["centis"].as_u64().unwrap_or(0);
    assert!(centis > 0, "the move took under 10 ms by /proc/uptime: {r}");
    assert!(
        moved >= 60_000,
        "fewer than 60000 of 65536 pages went to node 1 ({left} left on node 0): {r}"
    );
    (moved, centis as f64 / 100.0)
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn numad_like_and_auto_place_restore_and_move_pages_in_a_2_node_guest() {
    let text = run_guest_script("guest-daemon-test.sh", &[]);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the guest's JSON does not parse: {e}\n{text}"));
    eprintln!(
        "guest results:\n{}",
        serde_json::to_string_pretty(&v).unwrap_or_default()
    );
    assert!(
        v.get("error").is_none(),
        "the guest reported an error: {text}"
    );
    let node1 = v["node_cpus"]["1"].as_str().expect("node 1's CPUs");
    let all = v["all_cpus"].as_str().expect("the guest's CPUs");
    assert_eq!(
        (v["node_cpus"]["0"].as_str(), node1, all),
        (Some("0-1"), "2-3", "0-3")
    );
    let hog = v["hog_pid"].as_i64().expect("numa_hog's pid");

    // a. The hog starts with its pages on node 0 and every thread on every
    // CPU (the full set: numaplace would leave a narrower one alone).
    let original = affinity(&v, "initial");
    assert_eq!(
        original.len(),
        3,
        "numa_hog 200 2: main thread + 2: {original:?}"
    );
    for (tid, cpus) in &original {
        assert_eq!(cpus, all, "thread {tid} starts narrowed: {original:?}");
    }
    let (n0, n1) = pages(&v["initial"]["pages"]);
    assert!(
        n0 >= 51_200 * 9 / 10 && n1 < n0 / 10,
        "numa_hog's 200 MiB should start on node 0: {n0} pages on node 0, {n1} on node 1"
    );

    // b. numad-like moves threads and pages to node 1.
    let placed = &v["after_place"];
    let (p0, p1) = pages(&placed["pages"]);
    let placed_aff = affinity(&v, "after_place");
    assert_eq!(
        placed_aff.keys().collect::<Vec<_>>(),
        original.keys().collect::<Vec<_>>(),
        "the hog's threads changed"
    );
    for (tid, cpus) in &placed_aff {
        assert_eq!(
            cpus, node1,
            "after numaplace run, thread {tid} is on CPUs {cpus}, want node 1's {node1} \
             (waited {} hundredths; pages {p0} on node 0, {p1} on node 1)",
            placed["waited_centis"]
        );
    }
    assert!(
        p1 as f64 >= 0.9 * (p0 + p1) as f64,
        "after numaplace run only {p1} of {} pages are on node 1 (< 90%), waited {} hundredths",
        p0 + p1,
        placed["waited_centis"]
    );
    assert_eq!(placed["ok"], true, "{placed}");
    eprintln!(
        "placement: threads on node 1 and {:.1}% of the pages after {:.1} s",
        100.0 * p1 as f64 / (p0 + p1) as f64,
        placed["waited_centis"].as_f64().unwrap_or(0.0) / 100.0
    );

    // c. SIGTERM: a clean exit, originals back.
    assert_eq!(
        v["after_sigterm"]["daemon_status"], 0,
        "{}",
        v["after_sigterm"]
    );
    assert_eq!(
        affinity(&v, "after_sigterm"),
        original,
        "SIGTERM did not restore the original affinities"
    );

    // d. kill -9 leaves them pinned; the next start restores them.
    assert_eq!(v["after_repin"]["ok"], true, "{}", v["after_repin"]);
    assert_eq!(
        v["after_kill9"]["daemon_status"],
        128 + 9,
        "{}",
        v["after_kill9"]
    );
    for (tid, cpus) in affinity(&v, "after_kill9") {
        assert_eq!(
            cpus, node1,
            "after kill -9, thread {tid} should still be on node 1"
        );
    }
    let entries = v["after_kill9"]["state"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no state file entries after kill -9: {}", v["after_kill9"]));
    assert_eq!(entries.len(), original.len(), "{entries:?}");
    let restart = &v["after_restart"];
    assert_eq!(restart["daemon_status"], 0, "{restart}");
    assert_eq!(
        affinity(&v, "after_restart"),
        original,
        "the restart after kill -9 did not restore the original affinities: {restart}"
    );

    // The journal: pins and memory moves of the hog, each with its reason.
    let journal = v["journal"].as_array().expect("the journal");
    let of_hog = |action: &str| -> Vec<&Value> {
        journal
            .iter()
            .filter(|e| e["pid"] == hog && e["action"] == action)
            .collect()
    };
    let pins = of_hog("pin");
    let moves = of_hog("move_memory");
    // Both runs pinned every thread (the second was then killed with
    // kill -9): every entry is flushed as it is written, so all are there.
    assert!(
        pins.len() >= 2 * original.len(),
        "want every thread's pin of both runs in the journal: {pins:?}"
    );
    assert!(
        !moves.is_empty(),
        "no move_memory in the journal: {journal:?}"
    );
    for e in pins.iter().chain(&moves) {
        let reason = e["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("numad-like:") && reason.contains("node 1"),
            "journal entry without its reason: {e}"
        );
        assert_eq!(e["policy"], "numad-like", "{e}");
    }
    for e in &pins {
        assert_eq!(e["outcome"], "done", "{e}");
    }
    let moved: u64 = moves
        .iter()
        .filter(|e| e["outcome"] == "pages")
        .map(|e| e["moved"].as_u64().unwrap_or(0))
        .sum();
    assert!(moved > 0, "the journal shows no page moved: {moves:?}");

    // e. auto, the default: numad's placement in its counter-free
    // fallback, to the node holding the memory, said once at start,
    // journalled, restored on SIGTERM.
    let node0 = v["node_cpus"]["0"].as_str().expect("node 0's CPUs");
    check_auto(&v, all, node0);
    check_cgroup(&v, node1);

    // f. Throughput, side by side.
    let runs = v["throughput"]["runs"].as_array().expect("throughput runs");
    let mut rates: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in runs {
        let tool = r["tool"].as_str().expect("tool");
        let (moved, secs) = run_rate(r);
        let rate = moved as f64 / secs;
        assert!(rate > 0.0, "{r}");
        eprintln!(
            "throughput: {tool} run {}: {moved} pages in {secs:.2} s = {rate:.0} pages/s",
            r["rep"]
        );
        if tool == "numaplace" {
            let counts = &r["detail"]["outcome"];
            assert_eq!(counts["outcome"], "pages", "{r}");
            let ns = r["detail"]["elapsed_ns"].as_u64().unwrap_or(0);
            eprintln!(
                "throughput: numaplace run {}: actuator's own clock: {} pages moved in {:.3} s = {:.0} pages/s ({counts})",
                r["rep"],
                counts["moved"],
                ns as f64 / 1e9,
                counts["moved"].as_u64().unwrap_or(0) as f64 / (ns as f64 / 1e9)
            );
        }
        rates.entry(tool).or_default().push(rate);
    }
    let mean = |t: &str| {
        let r = rates
            .get(t)
            .unwrap_or_else(|| panic!("no {t} run: {runs:?}"));
        r.iter().sum::<f64>() / r.len() as f64
    };
    let (np, mp) = (mean("numaplace"), mean("migratepages"));
    eprintln!(
        "throughput (256 MiB, node 0 -> 1, mean of {} runs each): numaplace {np:.0} pages/s, \
         migratepages {mp:.0} pages/s, ratio numaplace/migratepages = {:.2}",
        rates["numaplace"].len(),
        np / mp
    );
    assert!(np > 0.0 && mp > 0.0);
}

/// Step h.: a `numa_hog 120 2` in a cgroup v2 cpuset of node 1's CPUs and
/// both nodes' memory, its pages first touched on node 0, one of its
/// threads narrowed by `taskset` to one CPU of the cgroup. Confinement is
/// not a choice: numad-like places the process within its cgroup's CPUs
/// (its memory moves to node 1, no thread leaves them); the narrowed
/// thread chose its CPU and is left alone, `advise` naming it and why; and
/// SIGTERM leaves every affinity as it found it.
fn check_cgroup(v: &Value, node1: &str) {
    let start = &v["cgroup_initial"];
    assert_eq!(start["cpus"], node1, "the cgroup's CPUs: {start}");
    let hog = start["hog_pid"].as_i64().expect("the confined hog's pid");
    let narrowed = start["narrowed_tid"].as_i64().expect("the narrowed thread");
    let last = node1.rsplit(['-', ',']).next().unwrap();
    let original = affinity(v, "cgroup_initial");
    assert_eq!(original.len(), 3, "numa_hog 120 2: {original:?}");
    for (tid, cpus) in &original {
        let want = if *tid == narrowed.to_string() {
            last
        } else {
            node1
        };
        assert_eq!(cpus, want, "thread {tid} in the cgroup: {original:?}");
    }
    let (n0, n1) = pages(&start["pages"]);
    assert!(
        n0 >= 30_720 * 9 / 10 && n1 < n0 / 10,
        "the confined hog should start with its pages on node 0: {n0} on node 0, {n1} on node 1"
    );

    let advise = &v["cgroup_advise"];
    assert_eq!(advise["status"], 0, "{advise}");
    let out = advise["stdout"].as_str().expect("advise's output");
    assert!(
        out.contains(&format!(
            "numa_hog (pid {hog}), thread {narrowed}: chose its own CPUs: its affinity is \
             {last}, narrower than the CPUs {node1} its cgroup confines it to"
        )),
        "advise should name the narrowed thread and why:\n{out}"
    );
    assert!(
        out.contains(&format!("numa_hog (pid {hog}): move memory to node 1")),
        "advise should plan the memory's move to node 1:\n{out}"
    );

    let placed = &v["cgroup_place"];
    let (p0, p1) = pages(&placed["pages"]);
    assert_eq!(placed["ok"], true, "{placed}");
    assert!(
        p1 as f64 >= 0.9 * (p0 + p1) as f64,
        "within its cgroup's CPUs the hog's memory should move to node 1: {p0} pages on node \
         0, {p1} on node 1"
    );
    assert_eq!(
        affinity(v, "cgroup_place"),
        original,
        "no thread may leave its cgroup's CPUs, and the narrowed one stays where it chose"
    );
    let journal = v["cgroup_journal"]
        .as_array()
        .expect("the cgroup run's journal");
    let text = serde_json::to_string(journal).unwrap();
    assert!(
        journal
            .iter()
            .any(|e| e["action"] == "move_memory" && e["to_node"] == 1),
        "no memory move to node 1 journalled: {text}"
    );
    assert!(
        journal
            .iter()
            .all(|e| e["action"] != "pin" || e["outcome"] != "done"),
        "a pin was carried out, but every thread already had its place: {text}"
    );
    let stopped = &v["cgroup_sigterm"];
    assert_eq!(stopped["daemon_status"], 0, "{stopped}");
    assert_eq!(affinity(v, "cgroup_sigterm"), original, "{stopped}");
    eprintln!(
        "cgroup: the confined hog's memory on node 1 ({:.1}%) after {:.1} s, its threads within \
         CPUs {node1}, thread {narrowed} left on CPU {last}",
        100.0 * p1 as f64 / (p0 + p1) as f64,
        placed["waited_centis"].as_f64().unwrap_or(0.0) / 100.0
    );
}

/// Step e.: `numaplace run` with no --policy on a fresh `numa_hog 200 2`
/// whose pages are on node 0 and whose threads were moved to node 1 and
/// then allowed every CPU: auto, the default, without instruction counts
/// (no PMU in the guest) makes numad's placement without experiments, to
/// the node that already holds the memory (its threads back to node 0,
/// nothing to move), says so once at start, journals every action as
/// auto's, and SIGTERM restores every thread's affinity.
fn check_auto(v: &Value, all: &str, node0: &str) {
    let hog = v["auto_hog_pid"].as_i64().expect("auto's numa_hog pid");
    let original = affinity(v, "auto_initial");
    assert_eq!(original.len(), 3, "numa_hog 200 2: {original:?}");
    for (tid, cpus) in &original {
        assert_eq!(cpus, all, "thread {tid} starts narrowed: {original:?}");
    }
    let (n0, n1) = pages(&v["auto_initial"]["pages"]);
    assert!(
        n0 >= 51_200 * 9 / 10 && n1 < n0 / 10,
        "auto's hog should start with its pages on node 0: {n0} pages on node 0, {n1} on node 1"
    );

    let placed = &v["auto_place"];
    let (p0, p1) = pages(&placed["pages"]);
    for (tid, cpus) in affinity(v, "auto_place") {
        assert_eq!(
            cpus, node0,
            "after auto, thread {tid} is on CPUs {cpus}, want node 0's {node0}, beside its \
             memory (waited {} hundredths; pages {p0} on node 0, {p1} on node 1)",
            placed["waited_centis"]
        );
    }
    assert!(
        p0 as f64 >= 0.9 * (p0 + p1) as f64,
        "after auto only {p0} of {} pages are on node 0 (< 90%)",
        p0 + p1
    );
    assert_eq!(placed["ok"], true, "{placed}");
    let entries = placed["state"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no state file entries while auto held the pins: {placed}"));
    assert_eq!(entries.len(), original.len(), "{entries:?}");
    eprintln!(
        "auto: threads on node 0 beside {:.1}% of the pages after {:.1} s",
        100.0 * p0 as f64 / (p0 + p1) as f64,
        placed["waited_centis"].as_f64().unwrap_or(0.0) / 100.0
    );

    let stopped = &v["auto_sigterm"];
    assert_eq!(stopped["daemon_status"], 0, "{stopped}");
    assert_eq!(
        affinity(v, "auto_sigterm"),
        original,
        "SIGTERM did not restore what auto pinned"
    );
    assert!(
        stopped["state"].is_null() || stopped["state"]["entries"] == serde_json::json!([]),
        "the state file still holds pins after SIGTERM: {stopped}"
    );

    // The log: auto chosen as the default, and its fallback said once.
    let log = stopped["stderr"].as_str().expect("auto's stderr");
    assert!(
        log.contains("running: policy auto (the default"),
        "auto's start line: {log}"
    );
    // One note for what auto does without instructions counted, one for
    // DI-Migrate's layout without sampled addresses: each said once.
    let fallback: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("policy auto without") && !l.contains("sampled"))
        .collect();
    assert_eq!(fallback.len(), 1, "the fallback, said once: {log}");
    let samples = log
        .lines()
        .filter(|l| l.contains("policy auto without") && l.contains("sampled"))
        .count();
    assert_eq!(
        samples, 1,
        "the note on sampled addresses, said once: {log}"
    );
    assert!(
        fallback[0].contains("instructions") && fallback[0].contains("numad"),
        "{}",
        fallback[0]
    );
    for l in &fallback {
        eprintln!("auto's log: {}", l.trim());
    }
    let restored = format!("; {} restored, 0 left alone", original.len());
    assert!(log.contains(&restored), "wanted {restored:?} in {log}");

    // The journal: auto's pins of the hog, done, each saying it is numad's
    // move made without an experiment.
    let journal = v["auto_journal"].as_array().expect("auto's journal");
    let of_hog: Vec<&Value> = journal.iter().filter(|e| e["pid"] == hog).collect();
    assert!(!of_hog.is_empty(), "auto journalled nothing: {journal:?}");
    for e in &of_hog {
        assert_eq!(e["policy"], "auto", "{e}");
        let reason = e["reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("auto")
                && reason.contains("numad-like")
                && reason.contains("node 0"),
            "journal entry without auto's reason: {e}"
        );
        eprintln!("auto's journal: {} {}: {reason}", e["action"], e["outcome"]);
    }
    let pins = of_hog
        .iter()
        .filter(|e| e["action"] == "pin" && e["outcome"] == "done")
        .count();
    assert!(
        pins >= original.len(),
        "want every thread pinned: {of_hog:?}"
    );
    assert!(
        journal.iter().all(|e| e["pid"] == hog),
        "auto acted outside its scope: {journal:?}"
    );
}
