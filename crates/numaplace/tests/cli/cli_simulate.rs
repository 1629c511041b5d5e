//! `numaplace scenarios`, `simulate` and `compare` as a user runs them:
//! tables, JSON, the HTML report, and bad input (exit status 2 and a
//! message naming the problem, never a panic).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{numaplace, text};
use serde_json::Value;

fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// Runs the binary in `dir` (`compare` writes its report to the current
/// directory by default).
fn numaplace_in(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .output()
        .expect("run numaplace")
}

#[track_caller]
fn ok(args: &[&str]) -> Output {
    let o = numaplace(args);
    assert!(
        o.status.success(),
        "numaplace {args:?}: {}\n{}",
        o.status,
        stderr(&o)
    );
    o
}

/// A small valid scenario: one short app on westmere-2s, with `extra`
/// (line 10) appended to its `[[app]]` table.
fn scenario_text(extra: &str) -> String {
    format!(
        "machine = \"westmere-2s\"\n\
         max_seconds = 20\n\
         \n\
         [[app]]\n\
         name = \"a\"\n\
         instructions = 2e9\n\
         uncore_pki = 10\n\
         llc_mpki = 5\n\
         working_set = \"32MiB\"\n\
         {extra}"
    )
}

/// Writes `body` to `DIR/NAME.toml`.
fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, body).unwrap();
    path
}

/// The policy names starting the rows of `compare`'s table.
fn table_rows(out: &str) -> Vec<String> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with("policy "));
    assert!(lines.next().is_some(), "no table header:\n{out}");
    lines
        .take_while(|l| !l.is_empty() && !l.starts_with("mean:") && !l.starts_with('!'))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn scenarios_lists_every_builtin() {
    let o = ok(&["scenarios"]);
    let out = stdout(&o);
    for name in numaplace_sim::scenario::BUILTIN {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} missing:\n{out}"
        );
    }
    assert!(out.contains("default (default)"), "{out}");
    assert!(out.contains("westmere-2s"), "{out}");
}

#[test]
fn simulate_default_scenario() {
    let o = ok(&["simulate"]);
    let out = stdout(&o);
    assert!(
        out.starts_with("default on westmere-2s, policy default, seed 0: finished"),
        "{out}"
    );
    assert!(
        out.contains("application") && out.contains("runtime s"),
        "{out}"
    );
    for app in ["mcf", "milc", "soplex", "lbm", "lu", "povray", "h264ref"] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(app)),
            "{app} missing:\n{out}"
        );
    }
    assert!(out.contains("mean runtime "), "{out}");

    let o = ok(&[
        "simulate",
        "--json",
        "--policy",
        "numad-like",
        "--seed",
        "3",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("simulate --json is JSON");
    for key in [
        "scenario",
        "machine",
        "policy",
        "seed",
        "makespan_s",
        "finished",
        "runs",
        "thread_migrations",
        "node_migrations",
        "pages_migrated",
        "uncore_penalty_cycles",
        "llc_mpki",
        "energy_j",
        "mean_power_w",
    ] {
        assert!(v.get(key).is_some(), "key {key} missing: {v}");
    }
    assert!(v.get("trace").is_none(), "the JSON leaves the trace out");
    assert_eq!(v["scenario"], "default");
    assert_eq!(v["machine"], "westmere-2s");
    assert_eq!(v["policy"], "numad-like");
    assert_eq!(v["seed"], 3);
    assert_eq!(v["finished"], true);
    assert_eq!(v["runs"].as_array().unwrap().len(), 7);
}

#[test]
fn simulate_a_scenario_file() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "small", &scenario_text(""));
    let o = ok(&["simulate", "--scenario", f.to_str().unwrap()]);
    let out = stdout(&o);
    assert!(out.starts_with("small on westmere-2s"), "{out}");

    // The same file fits the small synthetic machine.
    let o = ok(&[
        "simulate",
        "--scenario",
        f.to_str().unwrap(),
        "--synthetic",
        "pack:1 numa:1 core:2 pu:1",
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["finished"], true, "{v}");
}

#[test]
fn compare_with_report() {
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("r.html");
    // A small oracle budget: each evaluation is a simulation, and this is
    // a debug build.
    let o = ok(&[
        "compare",
        "--seeds",
        "2",
        "--oracle-budget",
        "20",
        "--report",
        report.to_str().unwrap(),
    ]);
    let out = stdout(&o);
    assert!(
        out.starts_with("Scenario default on westmere-2s, seeds 0, 1"),
        "{out}"
    );
    assert!(out.contains("\nOracle: "), "{out}");
    assert_eq!(
        table_rows(&out),
        [
            "default",
            "autonuma",
            "numad-like",
            "di-plain",
            "di-migrate",
            "dino",
            "brm",
            "symbiosis",
            "adaptive-mapping",
            "auto",
            "oracle"
        ],
        "{out}"
    );
    assert!(stderr(&o).contains("report: "), "{}", stderr(&o));

    let html = std::fs::read_to_string(&report).expect("the report was written");
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..80]);
    assert!(html.trim_end().ends_with("</html>"));
    assert!(html.contains("<svg"), "no plot in the report");
    for p in ["default", "numad-like", "oracle"] {
        assert!(html.contains(p), "{p} missing from the report");
    }
    // No temporary file left next to it.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("r.html")]);
}

#[test]
fn compare_json_without_oracle() {
    // Without --report, the report goes to numaplace-report.html in the
    // current directory; --no-report writes none.
    let tmp = tempfile::tempdir().unwrap();
    let o = numaplace_in(
        tmp.path(),
        &["compare", "--json", "--seeds", "2", "--no-oracle"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(tmp.path().join("numaplace-report.html"))
        .expect("the default report");
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    let json_default_report = o.stdout;

    let none = tempfile::tempdir().unwrap();
    let o = numaplace_in(
        none.path(),
        &[
            "compare",
            "--json",
            "--seeds",
            "2",
            "--no-oracle",
            "--no-report",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(none.path()).unwrap().count(),
        0,
        "--no-report wrote a file"
    );
    assert_eq!(o.stdout, json_default_report, "same seeds, same JSON");
    let v: Value = serde_json::from_slice(&o.stdout).expect("compare --json is JSON");
    for key in [
        "scenario",
        "description",
        "machine",
        "seeds",
        "policies",
        "oracle",
        "examples",
    ] {
        assert!(v.get(key).is_some(), "key {key} missing: {v}");
    }
    assert_eq!(v["scenario"], "default");
    assert_eq!(v["seeds"], serde_json::json!([0, 1]));
    assert!(v["oracle"].is_null(), "{}", v["oracle"]);
    let names: Vec<&str> = v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "default",
            "autonuma",
            "numad-like",
            "di-plain",
            "di-migrate",
            "dino",
            "brm",
            "symbiosis",
            "adaptive-mapping",
            "auto"
        ]
    );
    for p in v["policies"].as_array().unwrap() {
        assert!(p["mean_runtime_s"].as_f64().unwrap() > 0.0, "{p}");
        assert_eq!(p["unfinished"], 0, "{p}");
        // Per application: run time and node migrations per hour
        // ([Blagodurov11] Table 1).
        let apps = p["per_app"].as_array().expect("per_app");
        assert!(!apps.is_empty(), "{p}");
        for a in apps {
            assert!(a["mean_runtime_s"].as_f64().unwrap() > 0.0, "{a}");
            assert!(
                a["node_migrations_per_hour"].as_f64().unwrap() >= 0.0,
                "{a}"
            );
        }
    }
    assert_eq!(v["policies"][0]["vs_default_percent"], 0.0);
    let examples = v["examples"].as_array().unwrap();
    assert_eq!(examples.len(), names.len(), "one example run per policy");
    assert!(examples.iter().all(|e| e.get("trace").is_none()));
}

/// `compare --per-app`: the table, then a row per application with a
/// cell per policy (\[Blagodurov11\] Table 1 reads off it).
#[test]
fn compare_per_app() {
    let o = ok(&[
        "compare",
        "--scenario",
        "mpi-barcelona",
        "--seeds",
        "1",
        "--policies",
        "default,dino",
        "--no-oracle",
        "--no-report",
        "--per-app",
    ]);
    let out = stdout(&o);
    let at = out.find("Per application").expect("the per-app table");
    let rows: Vec<&str> = out[at..].lines().skip(2).take(5).collect();
    for (row, job) in rows
        .iter()
        .zip(["GAPgeofem", "lammps", "leslie3d", "lu", "socorro"])
    {
        assert!(row.starts_with(job), "{out}");
        assert_eq!(row.matches(" / ").count(), 2, "{row}");
    }
}

/// Bad input: exit status 2 and a message naming the problem.
#[test]
fn bad_input_exits_2_naming_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let unknown_key = write(dir, "unknown-key", &scenario_text("colour = \"red\"\n"));
    let negative = write(dir, "negative", &scenario_text("shared = -4096\n"));
    let negative_str = write(
        dir,
        "negative-str",
        &scenario_text("").replace("\"32MiB\"", "\"-32MiB\""),
    );
    let node7 = write(dir, "node7", &scenario_text("memory = \"node:7\"\n"));
    let node1 = write(dir, "node1", &scenario_text("memory = \"node:1\"\n"));
    let mismatch = write(
        dir,
        "mismatch",
        &format!("mismatch_percent = 120\n{}", scenario_text("")),
    );
    let p = |p: &Path| p.to_str().unwrap().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let unknown_key_at = format!("{}:10:", p(&unknown_key));

    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            s(&["simulate", "--policy", "dino2"]),
            vec!["unknown policy", "dino2"],
        ),
        (
            s(&["compare", "--policies", "default,dino2", "--no-oracle"]),
            vec!["unknown policy", "dino2"],
        ),
        (
            s(&["simulate", "--scenario", "no-such-scenario"]),
            vec!["no-such-scenario", "no built-in scenario"],
        ),
        (
            s(&["simulate", "--scenario", &p(&dir.join("missing.toml"))]),
            vec!["missing.toml", "cannot read"],
        ),
        (
            vec!["simulate".into(), "--scenario".into(), p(&unknown_key)],
            vec![&unknown_key_at, "colour", "unknown key"],
        ),
        (
            vec!["simulate".into(), "--scenario".into(), p(&negative)],
            vec!["negative.toml:10:", "shared", "negative"],
        ),
        (
            vec!["simulate".into(), "--scenario".into(), p(&negative_str)],
            vec!["negative-str.toml:9:", "working_set", "negative"],
        ),
        (
            vec!["simulate".into(), "--scenario".into(), p(&node7)],
            vec!["node7.toml:10:", "memory", "node 7"],
        ),
        (
            s(&["simulate", "--machine", "pentium"]),
            vec!["--machine", "pentium"],
        ),
        (
            s(&["compare", "--machine", "pentium", "--no-oracle"]),
            vec!["--machine", "pentium"],
        ),
        (
            s(&["compare", "--report", "r.html", "--no-report"]),
            vec!["--no-report", "--report"],
        ),
        (
            s(&["compare", "--seeds", "0", "--no-oracle"]),
            vec!["--seeds", "0 is not in 1..=10000"],
        ),
        (
            s(&["compare", "--seeds", "4294967296", "--no-oracle"]),
            vec!["--seeds", "4294967296 is not in 1..=10000"],
        ),
        (
            s(&["compare", "--jobs", "0", "--seeds", "1", "--no-oracle"]),
            vec!["--jobs", "at least 1"],
        ),
        (s(&["simulate", "--interval", "soon"]), vec!["--interval"]),
        (
            s(&["simulate", "--mismatch", "100"]),
            vec!["--mismatch", "from 0 to below 100"],
        ),
        (
            s(&["compare", "--mismatch=-5", "--no-oracle", "--seeds", "1"]),
            vec!["--mismatch", "from 0 to below 100"],
        ),
        (
            s(&["compare", "--random", "1", "--mismatch", "lots"]),
            vec!["--mismatch", "not a number"],
        ),
        (
            vec!["simulate".into(), "--scenario".into(), p(&mismatch)],
            vec![
                "mismatch.toml:1:",
                "mismatch_percent",
                "from 0 to below 100",
            ],
        ),
        (
            vec![
                "simulate".into(),
                "--scenario".into(),
                p(&node1),
                "--synthetic".into(),
                "pack:1 numa:1 core:2 pu:1".into(),
            ],
            vec!["does not fit", "node 1"],
        ),
        (
            vec![
                "compare".into(),
                "--scenario".into(),
                p(&node1),
                "--synthetic".into(),
                "pack:1 numa:1 core:2 pu:1".into(),
                "--seeds".into(),
                "1".into(),
            ],
            vec!["does not fit", "node 1"],
        ),
    ];
    for (args, wants) in &cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        // In the temporary directory: a compare that got this far would
        // write its default report there, not into the source tree.
        let o = numaplace_in(dir, &a);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "numaplace {a:?}: {err}");
        assert!(
            o.stdout.is_empty(),
            "numaplace {a:?} printed {}",
            stdout(&o)
        );
        assert!(!err.contains("panicked"), "numaplace {a:?}: {err}");
        for want in wants {
            assert!(err.contains(want), "numaplace {a:?}: no {want:?} in {err}");
        }
    }
}

/// A seed range past the last u64 is bad input, like `--seeds 0`.
#[test]

fn seed_range_overflow_is_bad_input() {
    let o = numaplace(&[
        "compare",
        "--first-seed",
        "18446744073709551615",
        "--seeds",
        "2",
        "--no-oracle",
        "--no-report",
    ]);
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("seed"), "{err}");
}

/// An output file in a directory that does not exist is a path the user
/// gave: exit 2 (commands::exit_code; `run --state` in a missing directory
/// exits 2 too), and `compare` says so before simulating.
#[test]

fn output_in_a_missing_directory_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let report = missing.join("r.html");
    let journal = missing.join("j.jsonl");
    for args in [
        vec!["simulate", "--report", report.to_str().unwrap()],
        vec!["simulate", "--journal", journal.to_str().unwrap()],
        vec![
            "compare",
            "--seeds",
            "1",
            "--no-oracle",
            "--report",
            report.to_str().unwrap(),
        ],
    ] {
        let o = numaplace(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("missing"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} printed {}", stdout(&o));
    }
}

/// A machine whose topology reports no cache sizes (a `--synthetic`
/// description without a cache level, or a sysfs tree without cache
/// information) has, for the model, an LLC of 0 bytes: every uncore
/// request should then miss, so the LLC misses cannot be fewer than on
/// the same machine with an L3.
#[test]

fn no_llc_size_does_not_mean_fewer_misses() {
    let mpki = |synthetic: &str| {
        let o = ok(&["simulate", "--json", "--synthetic", synthetic]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["llc_mpki"].as_f64().unwrap()
    };
    let without = mpki("pack:2 numa:1 core:4 pu:2");
    let with_l3 = mpki("pack:2 numa:1 l3:1 core:4 pu:2");
    assert!(
        without >= with_l3,
        "LLC MPKI {without:.1} without an LLC size, {with_l3:.1} with a 16 MiB L3"
    );
}

/// `--mismatch P`: each seed's world drawn within ±P % of the machine the
/// policies see. It changes the times, the table says so, the scenario's
/// key does the same and `--mismatch 0` overrides it.
#[test]
fn compare_with_a_mismatched_world() {
    let tmp = tempfile::tempdir().unwrap();
    let mean = |extra: &[&str]| -> f64 {
        let mut args = vec![
            "compare",
            "--json",
            "--policies",
            "default",
            "--seeds",
            "1",
            "--no-oracle",
            "--no-report",
        ];
        args.extend_from_slice(extra);
        let o = numaplace_in(tmp.path(), &args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["policies"][0]["mean_runtime_s"].as_f64().unwrap()
    };
    let nominal = mean(&[]);
    let drawn = mean(&["--mismatch", "25"]);
    assert!((drawn / nominal - 1.0).abs() > 1e-3, "{drawn} vs {nominal}");
    assert_eq!(
        mean(&["--mismatch", "25"]),
        drawn,
        "a seed's world is the same"
    );
    assert_eq!(mean(&["--mismatch", "0"]), nominal);
    let keyed = write(
        tmp.path(),
        "keyed",
        &format!("mismatch_percent = 25\n{}", crate_default_scenario()),
    );
    let keyed = keyed.to_str().unwrap();
    assert_eq!(mean(&["--scenario", keyed]), drawn, "the scenario's key");
    assert_eq!(mean(&["--scenario", keyed, "--mismatch", "0"]), nominal);
    let o = numaplace_in(
        tmp.path(),
        &[
            "compare",
            "--policies",
            "default",
            "--seeds",
            "1",
            "--oracle-budget",
            "4",
            "--no-report",
            "--mismatch",
            "25",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(
            "World: each machine parameter drawn within ±25 % of the machine the policies see"
        ),
        "{out}"
    );
    assert!(out.contains("searched in the world of seed 0"), "{out}");
}

/// The built-in default scenario's text, without its name.
fn crate_default_scenario() -> String {
    include_str!("../../../numaplace-sim/scenarios/default.toml").replacen(
        "name = \"default\"\n",
        "",
        1,
    )
}
