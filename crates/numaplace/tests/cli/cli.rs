//! The `numaplace` binary as a user runs it.

use crate::lstopo;

use std::process::{Command, Output};

use numaplace_model::Topology;

fn numaplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run numaplace")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn topology_of_this_machine() {
    let o = numaplace(&["topology"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("Machine (host): "), "{out}");
    assert!(out.contains("Package "), "{out}");
    assert!(out.contains("  Node "), "{out}");

    let o = numaplace(&["topology", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t: Topology = serde_json::from_slice(&o.stdout).expect("topology JSON");
    assert_eq!(t.source(), "host");
    assert_eq!(
        t.cpus().len(),
        std::thread::available_parallelism().unwrap().get()
    );
}

#[test]
fn topology_of_every_fixture_as_json() {
    let mut all = lstopo::all_fixture_tarballs();
    all.extend(lstopo::tarballs_in(&lstopo::own_fixtures_dir()));
    assert!(all.len() >= 37, "only {} fixtures found", all.len());
    for path in all {
        let name = path.to_string_lossy().into_owned();
        let tmp = tempfile::tempdir().unwrap();
        let root = lstopo::extract_fixture(&path, tmp.path());
        let o = numaplace(&["topology", "--sysfs-root", root.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let t: Topology = serde_json::from_slice(&o.stdout).expect("topology JSON");
        assert!(!t.cpus().is_empty(), "{name}");
        let o = numaplace(&["topology", "--sysfs-root", root.to_str().unwrap()]);
        assert!(stdout(&o).contains("Machine (sysfs:"), "{name}");
    }
}

/// A snapshot whose files contradict each other is read as hwloc reads
/// it, and each repair is one warning line on stderr; a consistent one
/// prints nothing there.
#[test]
fn topology_reports_each_repair_once_on_stderr() {
    let cases = [
        (
            "hwloc-linux/16ia64-8n2s.tar.bz2",
            Some("packages whose kernel id"),
        ),
        (
            "hwloc-linux/40intel64-4n10c+pci-conflicts.tar.bz2",
            Some("CPUs 3,7,11,15,19,23,27,31,35,39 are in no package"),
        ),
        ("16em64t-4s2c2t.tar.bz2", None),
    ];
    for (name, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let root = lstopo::extract_fixture(&lstopo::fixtures_dir().join(name), tmp.path());
        let o = numaplace(&["topology", "--sysfs-root", root.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let err = stderr(&o);
        let lines: Vec<&str> = err.lines().collect();
        match want {
            Some(text) => {
                assert_eq!(lines.len(), 1, "{name}: {err}");
                assert!(
                    lines[0].starts_with("numaplace: warning: sysfs:"),
                    "{name}: {err}"
                );
                assert!(lines[0].contains(text), "{name}: {err}");
            }
            None => assert!(lines.is_empty(), "{name}: {err}"),
        }
        assert!(stdout(&o).contains("Machine (sysfs:"), "{name}");
    }
    let o = numaplace(&["topology", "--synthetic", "pack:1 core:2 l1d:2 pu:1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("counting one L1 per core, of all its threads"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn synthetic_and_xml_machines() {
    let o = numaplace(&["topology", "--synthetic", "pack:2 numa:2 l3:1 core:4 pu:2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("2 packages, 4 NUMA nodes, 4 LLC domains, 16 cores, 32 CPUs"),
        "{out}"
    );

    // An XML export of a fixture reads back as the same machine.
    let tmp = tempfile::tempdir().unwrap();
    let root = lstopo::extract_fixture(
        &lstopo::fixtures_dir().join("16em64t-4s2c2t.tar.bz2"),
        tmp.path(),
    );
    let xml = tmp.path().join("m.xml");
    std::fs::write(&xml, lstopo::lstopo_xml(&root)).unwrap();
    let from_xml = numaplace(&["topology", "--xml", xml.to_str().unwrap(), "--json"]);
    let from_root = numaplace(&["topology", "--sysfs-root", root.to_str().unwrap(), "--json"]);
    assert!(from_xml.status.success(), "{}", stderr(&from_xml));
    let a: Topology = serde_json::from_slice(&from_xml.stdout).unwrap();
    let b: Topology = serde_json::from_slice(&from_root.stdout).unwrap();
    assert_eq!(a.cpus(), b.cpus());
    assert_eq!(a.nodes().len(), b.nodes().len());
    assert_eq!(a.llcs(), b.llcs());
}

/// Bad input: exit status 2 and one line naming the input, never a panic.
#[test]
fn bad_input_is_one_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let not_sysfs = tmp.path().join("etc");
    std::fs::create_dir(&not_sysfs).unwrap();
    let empty_sysfs = tmp.path().join("empty");
    std::fs::create_dir_all(empty_sysfs.join("sys/devices/system/cpu")).unwrap();
    let garbage_xml = tmp.path().join("garbage.xml");
    std::fs::write(&garbage_xml, "<topology><object type=\"Blob\"/>").unwrap();
    // Well-formed, so it reaches hwloc, which has no type Blob.
    let blob_xml = tmp.path().join("blob.xml");
    std::fs::write(&blob_xml, "<topology><object type=\"Blob\"/></topology>").unwrap();
    let missing = tmp.path().join("missing");
    let p = |p: &std::path::Path| p.to_str().unwrap().to_string();

    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--sysfs-root".into(), p(&missing)],
            "cannot read the root directory",
        ),
        (
            vec!["--sysfs-root".into(), p(&not_sysfs)],
            "not a Linux sysfs tree",
        ),
        (
            vec!["--sysfs-root".into(), p(&empty_sysfs)],
            "found no CPU topology",
        ),
        (
            vec!["--xml".into(), p(&garbage_xml)],
            "not well-formed XML: the root node was opened but never closed",
        ),
        (
            vec!["--xml".into(), p(&blob_xml)],
            "hwloc rejected this XML file",
        ),
        (vec!["--xml".into(), p(&missing)], "cannot read"),
        (
            vec!["--synthetic".into(), "pack:2 l3:x pu:2".into()],
            "count must be a positive number",
        ),
        (
            vec!["--synthetic".into(), "pack:2 core:4".into()],
            "last level must be pu",
        ),
        (vec!["--cpus".into(), "".into()], "names no CPU"),
        (vec!["--cpus".into(), "3-1".into()], "runs backwards"),
        (
            vec!["--cpus".into(), "4000".into()],
            "none of CPUs 4000 is on this machine",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["topology".to_string()];
        all.extend(args.iter().cloned());
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let o = numaplace(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        assert!(!err.contains("panicked"), "{all:?}: {err}");
        let ours: Vec<&str> = err.lines().filter(|l| !l.starts_with("[hwloc")).collect();
        assert_eq!(ours.len(), 1, "{all:?}: one line wanted, got {err}");
        assert!(ours[0].starts_with("numaplace: error: "), "{err}");
        assert!(ours[0].contains(want), "{all:?}: wanted {want:?} in {err}");
        if let Some(input) = args.get(1) {
            assert!(
                ours[0].contains(input.as_str()),
                "{all:?}: the error must name the input: {err}"
            );
        }
        assert!(o.stdout.is_empty(), "{all:?}: nothing on stdout");
    }

    // Two machines at once is a usage error.
    let o = numaplace(&["topology", "--xml", "a", "--synthetic", "pu:1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

#[test]
fn restricted_view_and_hybrid_machine() {
    let o = numaplace(&[
        "topology",
        "--synthetic",
        "pack:2 numa:1 l3:1 core:4 pu:2",
        "--cpus",
        "0-2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("2 packages, 2 NUMA nodes (1 without CPUs), 1 LLC domain, 2 cores, 3 CPUs"),
        "{out}"
    );

    let xml = lstopo::own_fixtures_dir().join("hybrid-2p4e.xml");
    let o = numaplace(&["topology", "--xml", xml.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("CPU kinds (hybrid machine, most power-efficient first):\n  IntelAtom: CPUs 2-5\n  IntelCore: CPUs 0-1"), "{out}");
}

#[test]
fn help_reads_well() {
    let o = numaplace(&["--help"]);
    assert!(o.status.success());
    let h = stdout(&o);
    assert!(h.contains("multi-socket"), "{h}");
    assert!(h.contains("topology"), "{h}");
    let o = numaplace(&["topology", "--help"]);
    let h = stdout(&o);
    for want in [
        "--sysfs-root <DIR>",
        "--xml <FILE>",
        "--synthetic <LEVELS>",
        "--cpus <LIST>",
        "--json",
        "Examples:",
    ] {
        assert!(h.contains(want), "topology --help lacks {want}: {h}");
    }
}

/// `numaplace guest` writes the hints protocol (here to stdout): a full
/// `set` every round; bad options are input errors naming what to give.
#[test]
fn guest_agent_prints_one_set_per_round_and_refuses_bad_options() {
    let o = numaplace(&[
        "guest",
        "--device",
        "-",
        "--rounds",
        "2",
        "--interval",
        "100ms",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let sets: Vec<&str> = out.lines().filter(|l| l.contains(" set ")).collect();
    assert_eq!(sets.len(), 2, "{out}");
    for (i, l) in sets.iter().enumerate() {
        assert!(
            l.starts_with(&format!(
                "numaplace-hints 1 set seq={} interval-ms=100 online=",
                i + 1
            )),
            "{l}"
        );
    }
    for (args, want) in [
        (
            vec!["guest", "--device", "-", "--interval", "10ms"],
            "--interval 10ms",
        ),
        (
            vec!["guest", "--device", "-", "--rounds", "0"],
            "--rounds 0",
        ),
        (
            vec!["guest", "--port", "no.such.port"],
            "no virtio-serial port named \"no.such.port\"",
        ),
    ] {
        let o = numaplace(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    let o = numaplace(&["tasks", "--guest-hints", "relative/*.sock"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--guest-hints: \"relative/*.sock\" not an absolute path"),
        "{}",
        stderr(&o)
    );
}

/// `doctor --json` carries each node's numastat with the numastat row:
/// counters since boot and, sampled over `--interval`, rates; on a kernel
/// without per-node counters the row says why and what to do.
#[test]
fn doctor_json_includes_each_nodes_numastat() {
    let o = numaplace(&["doctor", "--json", "--interval", "200ms"]);
    // 3: something the configured policy reads does not work here (a VM
    // without a PMU); the report is whole either way.
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("doctor's JSON");
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "numastat")
        .expect("a numastat row");
    if row["status"] != "ok" {
        assert!(row["fix"].is_string(), "{row}");
        return;
    }
    let nodes = row["numastat"]["nodes"].as_object().expect("nodes: {row}");
    assert!(!nodes.is_empty(), "{row}");
    for (n, c) in nodes {
        assert!(
            c["since_boot"]["numa_hit"].as_u64().is_some(),
            "node {n}: {row}"
        );
        assert!(
            c["per_second"]["numa_hit"].as_f64().is_some(),
            "node {n}: {row}"
        );
    }
    assert!(row["numastat"]["interval_s"].as_f64().unwrap() >= 0.2);

    let o = numaplace(&["doctor", "--interval", "5m"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--interval \"5m\": at most 60s"),
        "{}",
        stderr(&o)
    );
}

/// The words of a list "a, b, c, or d" in `text` (whitespace already
/// collapsed): every run of three or more comma-separated single words,
/// the first taken from the end of the text before it and the last from
/// the start of the text after it ("or"/"and" dropped). Prose between
/// commas ("auto, each move kept") is not a list.
fn listed_words(text: &str) -> Vec<Vec<String>> {
    fn word(s: &str) -> Option<String> {
        let s = s.trim();
        let s = s
            .strip_prefix("or ")
            .or_else(|| s.strip_prefix("and "))
            .unwrap_or(s);
        let ok = !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        ok.then(|| s.to_string())
    }
    let pieces: Vec<&str> = text.split(',').collect();
    let mut lists = Vec::new();
    let mut i = 1;
    while i + 1 < pieces.len() {
        if word(pieces[i]).is_none() {
            i += 1;
            continue;
        }
        let start = i;
        while i + 1 < pieces.len() && word(pieces[i]).is_some() {
            i += 1;
        }
        let mut items: Vec<String> = Vec::new();
        items.extend(pieces[start - 1].split_whitespace().last().and_then(word));
        items.extend(pieces[start..i].iter().filter_map(|p| word(p)));
        let after = pieces[i].trim();
        let after = after
            .strip_prefix("or ")
            .or_else(|| after.strip_prefix("and "))
            .unwrap_or(after);
        items.extend(after.split_whitespace().next().and_then(word));
        if items.len() >= 3 {
            lists.push(items);
        }
    }
    lists
}

/// Checks one place a user reads the policy list: every registry name is
/// in it as a word, and every list of names in it names only registry
/// policies.
fn policy_list_agrees(place: &str, text: &str) {
    use numaplace_policy::PolicyKind;
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let words: std::collections::BTreeSet<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .collect();
    for name in PolicyKind::NAMES {
        assert!(
            words.contains(name),
            "{place} does not name policy {name}: {text}"
        );
    }
    let lists = listed_words(&text);
    assert!(!lists.is_empty(), "{place} lists no policies: {text}");
    for item in lists.iter().flatten() {
        assert!(
            PolicyKind::NAMES.contains(&item.as_str()),
            "{place} names {item:?}, which is no policy: {text}"
        );
    }
}

/// The policy list agrees everywhere a user reads it: `run --help`'s
/// `--policy`, the man page of `run` and the README's list of policies
/// name every policy of the registry (`PolicyKind::NAMES`), and no other.
/// The help, and the man page made from it, are written by hand in
/// crates/numaplace/src/cli.rs (`PolicyArgs::policy`): they omitted
/// `autonuma` until the change that splits cli.rs, so on a tree without
/// that change this test fails on `autonuma` in `run --help`.
#[test]
fn policy_list_agrees_with_the_registry() {
    // `run --help`: the --policy option's text, from its line (after
    // `<NAME>`) up to the next option.
    let o = numaplace(&["run", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let help = stdout(&o);
    let option = |l: &str| l.trim_start().starts_with('-') && l.len() - l.trim_start().len() < 10;
    let mut lines = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--policy <"));
    let first = lines.next().expect("run --help has no --policy");
    let first = first.split_once('>').map_or("", |(_, rest)| rest);
    let text: Vec<&str> = std::iter::once(first)
        .chain(lines.take_while(|l| !option(l)))
        .collect();
    policy_list_agrees("run --help's --policy", &text.join("\n"));

    // The man page of `run` (`numaplace manpages`): the same paragraph in
    // roff, up to the next `.TP`.
    let dir = tempfile::tempdir().unwrap();
    let o = numaplace(&["manpages", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("numaplace-run.1")).unwrap();
    let page = page
        .replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "")
        .replace("\\fI", "");
    let mut lines = page.lines().skip_while(|l| !l.starts_with("--policy"));
    assert!(
        lines.next().is_some(),
        "numaplace-run.1 has no --policy: {page}"
    );
    let paragraph: Vec<&str> = lines.take_while(|l| !l.starts_with(".TP")).collect();
    policy_list_agrees("numaplace-run(1)'s --policy", &paragraph.join("\n"));

    // The README: its list of policies, a bullet per policy (or per
    // family), from "Policies (" to the paragraph after the list.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let list: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("Policies ("))
        .skip_while(|l| !l.starts_with("- "))
        .take_while(|l| !l.is_empty())
        .collect();
    let named: std::collections::BTreeSet<&str> = list
        .iter()
        .filter_map(|l| l.strip_prefix("- "))
        .flat_map(|l| {
            // The names before the first word outside backticks.
            let head = l.split(" (").next().unwrap_or(l);
            let head = head.split(':').next().unwrap_or(head);
            head.split([',', ' '])
                .filter_map(|w| w.strip_prefix('`')?.strip_suffix('`'))
                .collect::<Vec<_>>()
        })
        .collect();
    let registry: std::collections::BTreeSet<&str> =
        numaplace_policy::PolicyKind::NAMES.into_iter().collect();
    assert_eq!(
        named, registry,
        "README.md's list of policies (\"Policies (...\") against the registry"
    );
}
