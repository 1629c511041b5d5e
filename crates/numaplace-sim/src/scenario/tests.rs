//! Tests of `scenario`.

use super::*;

const BASE: &str = r#"
machine = "westmere-2s"

[[app]]
name = "a"
instructions = 1e10
uncore_pki = 20
llc_mpki = 10
working_set = "64MiB"
"#;

fn err(text: &str) -> String {
    parse(text, "t.toml").unwrap_err().to_string()
}

/// `text` fails with a message starting with `prefix`.
fn fails(text: &str, prefix: &str) -> String {
    let e = err(text);
    assert!(e.starts_with(prefix), "want {prefix:?}..., got {e:?}");
    e
}

#[test]
fn sharers_default_to_every_thread_and_cannot_exceed_them() {
    let text = BASE.replace(
        "name = \"a\"",
        "name = \"a\"\nthreads = 4\nshared = \"4KiB\"",
    );
    assert_eq!(parse(&text, "t.toml").unwrap().apps[0].sharers, 4);
    let two = text.replace("threads = 4", "threads = 4\nsharers = 2");
    assert_eq!(parse(&two, "t.toml").unwrap().apps[0].sharers, 2);
    let e = fails(
        &text.replace("threads = 4", "threads = 4\nsharers = 5"),
        "t.toml:7:11: field `app[0].sharers`: 5 sharers but the application has 4 threads",
    );
    assert!(e.contains("at most 4"), "{e}");
}

#[test]
fn a_minimal_file_takes_the_defaults() {
    let w = parse(BASE, "dir/mix.toml").unwrap();
    assert_eq!(w.name, "mix");
    assert_eq!(w.description, "");
    assert_eq!(w.machine, "westmere-2s");
    assert_eq!((w.step_ms, w.max_seconds), (10.0, 3600.0));
    assert_eq!(w.linux, LinuxModel::default());
    let a = &w.apps[0];
    assert_eq!(a.name, "a");
    assert_eq!(a.kind, AppKind::Process);
    assert_eq!((a.threads, a.runs, a.shared_bytes), (1, 1, 0));
    assert_eq!(a.memory, MemoryPlacement::FirstTouch);
    assert_eq!((a.cpus.clone(), a.start_s), (None, 0.0));
    assert_eq!(
        a.phases,
        vec![Phase {
            instructions: 1e10,
            model: ThreadModel {
                cpi_core: 1.0,
                uncore_pki: 20.0,
                working_set: 64 << 20,
                pattern: Pattern::PowerLaw {
                    llc_mpki: 10.0,
                    alpha: 0.5
                },
                mlp: 1.0,
                shared_writes_pki: 0.0,
            },
        }]
    );
}

#[test]
fn every_key_is_read() {
    let text = r#"
name = "full"
description = "all keys"
machine = "barcelona-4s"
step_ms = 5
max_seconds = 100

[linux]
balance_interval_ms = 50
migrate_probability = 0.5
numa_balancing = true
numa_balancing_scan_delay_ms = 500
numa_balancing_scan_period_min_ms = 2000
numa_balancing_scan_period_max_ms = 30000
numa_balancing_scan_size_mb = 64

[[app]]
name = "vm1"
kind = "vm"
threads = 2
copies = 2
memory = "node:3"
cpus = "4-7"
start_s = 1.5
runs = 3
shared = "1.5MiB"
cpi = 0.8
uncore_pki = 30
working_set = 1048576
pattern = "power-law"
llc_mpki = 12
alpha = 0.7
mlp = 2
shared_writes_pki = 1

[[app.phase]]
instructions = 5e9

[[app.phase]]
instructions = 2_000_000_000
uncore_pki = 5
pattern = "uniform"
working_set = "8MiB"

[[app.phase]]
instructions = 1e9
uncore_pki = 4
"#;
    let w = parse(text, "f.toml").unwrap();
    assert_eq!(w.name, "full");
    assert_eq!(w.description, "all keys");
    assert_eq!((w.step_ms, w.max_seconds), (5.0, 100.0));
    assert_eq!(
        w.linux,
        LinuxModel {
            balance_interval_ms: 50.0,
            migrate_probability: 0.5,
            numa_balancing: true,
            numa_balancing_scan_delay_ms: 500.0,
            numa_balancing_scan_period_min_ms: 2000.0,
            numa_balancing_scan_period_max_ms: 30000.0,
            numa_balancing_scan_size_mb: 64.0,
        }
    );
    let names: Vec<_> = w.apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["vm1.0", "vm1.1"]);
    assert_eq!(w.apps[0].phases, w.apps[1].phases);
    let a = &w.apps[1];
    assert_eq!((a.kind, a.threads, a.runs), (AppKind::Vm, 2, 3));
    assert_eq!(a.memory, MemoryPlacement::Node(3));
    assert_eq!(a.cpus, Some("4-7".parse().unwrap()));
    assert_eq!((a.start_s, a.shared_bytes), (1.5, 3 << 19));
    assert_eq!(a.instructions(), 8e9);
    let [p0, p1, p2] = &a.phases[..] else {
        panic!("{:?}", a.phases)
    };
    // Phase 0 is the app's model.
    assert_eq!(
        p0.model,
        ThreadModel {
            cpi_core: 0.8,
            uncore_pki: 30.0,
            working_set: 1 << 20,
            pattern: Pattern::PowerLaw {
                llc_mpki: 12.0,
                alpha: 0.7
            },
            mlp: 2.0,
            shared_writes_pki: 1.0,
        }
    );
    // Phase 1 changes the pattern: llc_mpki and alpha are not inherited.
    assert_eq!(p1.instructions, 2e9);
    assert_eq!(p1.model.pattern, Pattern::Uniform);
    assert_eq!((p1.model.uncore_pki, p1.model.working_set), (5.0, 8 << 20));
    assert_eq!((p1.model.cpi_core, p1.model.mlp), (0.8, 2.0));
    // Phase 2: the inherited llc_mpki is capped at its uncore requests.
    assert_eq!(
        p2.model.pattern,
        Pattern::PowerLaw {
            llc_mpki: 4.0,
            alpha: 0.7
        }
    );
}

#[test]
fn every_builtin_parses_and_validates() {
    assert_eq!(BUILTIN[0], DEFAULT);
    for &name in BUILTIN {
        let w = builtin(name)
            .unwrap_or_else(|| panic!("{name} is listed but not built in"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.name, name);
        assert!(!w.description.is_empty(), "{name} has no description");
        assert!(!w.apps.is_empty(), "{name}");
        // The description cites its paper by its short name
        // (docs/references.md).
        assert!(
            ["[Rao13]", "[Bae12]", "[Symbiosis-Bloom]", "[Blagodurov11]"]
                .iter()
                .any(|r| w.description.contains(r)),
            "{name}: {}",
            w.description
        );
    }
    assert!(builtin("nope").is_none());
    let d = builtin(DEFAULT).unwrap().unwrap();
    assert!(
        d.threads() <= 16,
        "the default stays small: {}",
        d.threads()
    );
    assert_eq!(d.machine, "westmere-2s");
}

/// A rough solo time of one run of an app, seconds: instructions x CPI
/// / clock, CPI = cpi_core + stall cycles per instruction from the
/// uncore requests (LLC hits at the LLC latency, misses at the local
/// memory latency, divided by the MLP) and shared writes (one
/// same-socket HITM per line). The contention model is finer; this only
/// keeps the shipped instruction counts in the intended range.
fn rough_solo_seconds(m: &Machine, a: &AppSpec) -> f64 {
    let t = &m.topology;
    let llc = t.llc_size(0).unwrap_or(0) as f64;
    let private = t
        .caches()
        .iter()
        .filter(|c| c.span.len() <= t.smt_width())
        .map(|c| c.size)
        .max()
        .unwrap_or(0) as f64;
    let ghz = m.params.ghz.value;
    let mut seconds = 0.0;
    for p in &a.phases {
        let tm = &p.model;
        let w = tm.working_set as f64;
        let (uncore, misses) = match tm.pattern {
            Pattern::Uniform => {
                let u = tm.uncore_pki * (1.0 - private / w).max(0.0);
                (u, u * (1.0 - llc / w).max(0.0))
            }
            Pattern::PowerLaw { llc_mpki, .. } => (tm.uncore_pki, llc_mpki),
        };
        let stall_ns = ((uncore - misses) * m.params.llc_hit_ns.value
            + misses * m.params.local_latency_ns.value)
            / 1000.0
            / tm.mlp;
        let share_ns = if a.shared_bytes > 0 {
            let per_line = (a.shared_bytes as f64 / 8.0).clamp(1.0, 8.0);
            tm.shared_writes_pki / 1000.0 * m.params.hitm_same_socket_ns.value / per_line
        } else {
            0.0
        };
        let cpi = tm.cpi_core + (stall_ns + share_ns) * ghz;
        seconds += p.instructions * cpi / (ghz * 1e9);
    }
    seconds
}

#[test]
fn builtin_solo_runs_last_10_to_120_seconds() {
    for &name in BUILTIN {
        let w = builtin(name).unwrap().unwrap();
        let m = Machine::preset(&w.machine).unwrap();
        for a in &w.apps {
            let s = rough_solo_seconds(&m, a);
            assert!(
                (10.0..=120.0).contains(&s),
                "{name}/{}: a solo run takes about {s:.1} s",
                a.name
            );
            // Every run starts in time to end before max_seconds
            // even twice as slow as solo.
            let end = a.start_s + 2.0 * s * a.runs as f64;
            assert!(
                end < w.max_seconds,
                "{name}/{}: ends about {end:.0} s",
                a.name
            );
        }
    }
}

#[test]
fn sizes() {
    let table: &[(&str, u64)] = &[
        ("0", 0),
        ("4096", 4096),
        ("12B", 12),
        ("1KiB", 1024),
        ("1K", 1024),
        ("1KB", 1024),
        ("128KiB", 128 << 10),
        ("64MiB", 64 << 20),
        ("12MB", 12 << 20),
        ("12M", 12 << 20),
        ("12 mb", 12 << 20),
        ("1.5MiB", 3 << 19),
        ("1.6GiB", (1.6 * (1u64 << 30) as f64).round() as u64),
        ("2GB", 2 << 30),
        ("2G", 2 << 30),
        ("1TiB", 1 << 40),
        ("1TB", 1 << 40),
        ("1_024KiB", 1 << 20),
        (" 8MiB ", 8 << 20),
    ];
    for &(text, want) in table {
        assert_eq!(parse_size(text), Ok(want), "{text:?}");
    }
    for bad in ["", "MiB", "-1MiB", "1.2.3MiB", "12 parsecs", "1PiB", "1e3"] {
        assert!(parse_size(bad).is_err(), "{bad:?} was accepted");
    }
    let e = parse_size("8XB").unwrap_err();
    assert!(
        e.contains("unknown size unit \"XB\"") && e.contains("MiB"),
        "{e}"
    );
    // Integers in the file are bytes.
    let w = parse(&BASE.replace("\"64MiB\"", "4096"), "t.toml").unwrap();
    assert_eq!(w.apps[0].phases[0].model.working_set, 4096);
}

#[test]
fn unknown_keys_name_the_key_line_and_what_is_allowed() {
    let e = fails(
        &format!("colour = \"red\"\n{BASE}"),
        "t.toml:1:1: field `colour`: unknown key `colour` at the top level; allowed keys: name, description, machine,",
    );
    assert!(e.contains("app"), "{e}");
    let e = fails(
        &BASE.replace("uncore_pki = 20\n", "uncore_pki = 20\nworkingset = 3\n"),
        "t.toml:8:1: field `app[0].workingset`: unknown key `workingset` in [[app]]; allowed keys:",
    );
    assert!(e.contains("working_set") && e.contains("phase"), "{e}");
    fails(
        &format!("{BASE}\n[linux]\nbalance_ms = 3\n"),
        "t.toml:12:1: field `linux.balance_ms`: unknown key `balance_ms` in [linux]; allowed keys: balance_interval_ms,",
    );
    let two_apps =
        format!("{BASE}\n[[app]]\nname = \"b\"\n[[app.phase]]\ninstructions = 1\nmlpp = 2\n");
    fails(
        &two_apps,
        "t.toml:15:1: field `app[1].phase[0].mlpp`: unknown key `mlpp` in [[app.phase]]; allowed keys: instructions,",
    );
}

#[test]
fn values_out_of_range_name_the_field() {
    // Negative and zero sizes.
    fails(
        &BASE.replace("\"64MiB\"", "\"-64MiB\""),
        "t.toml:9:15: field `app[0].working_set`: \"-64MiB\" is negative",
    );
    fails(
        &BASE.replace("\"64MiB\"", "-5"),
        "t.toml:9:15: field `app[0].working_set`: size -5 is negative",
    );
    fails(
        &BASE.replace("\"64MiB\"", "0"),
        "t.toml:9:15: field `app[0].working_set`: size must be greater than 0",
    );
    // A bad unit.
    let e = fails(
        &BASE.replace("\"64MiB\"", "\"64MiBs\""),
        "t.toml:9:15: field `app[0].working_set`: unknown size unit \"MiBs\"",
    );
    assert!(e.contains("KiB, MiB, GiB"), "{e}");
    // Zero threads.
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\nthreads = 0\n"),
        "t.toml:6:11: field `app[0].threads`: must be 1..=4096 (threads of the application), got 0",
    );
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\nthreads = \"4\"\n"),
        "t.toml:6:11: field `app[0].threads`: expected a whole number 1..=4096 (threads of the application), got string \"4\"",
    );
    // More threads than the cpuset.
    fails(
        &BASE.replace(
            "name = \"a\"\n",
            "name = \"a\"\nthreads = 4\ncpus = \"0-1\"\n",
        ),
        "t.toml:7:8: field `app[0].cpus`: more threads than a cpuset can hold: 4 threads on cpus \"0-1\" (2 CPUs)",
    );
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\ncpus = \"15-16\"\n"),
        "t.toml:6:8: field `app[0].cpus`: CPU 16 does not exist: westmere-2s has CPUs 0-15",
    );
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\ncpus = \"zero\"\n"),
        "t.toml:6:8: field `app[0].cpus`: invalid cpuset \"zero\"",
    );
    // Who set the CPUs: a cgroup needs them, and nothing else is known.
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\ncpus_by = \"cgroup\"\n"),
        "t.toml:6:11: field `app[0].cpus_by`: a cgroup confines an application to CPUs: give them with cpus",
    );
    fails(
        &BASE.replace(
            "name = \"a\"\n",
            "name = \"a\"\ncpus = \"0-1\"\ncpus_by = \"kubelet\"\n",
        ),
        "t.toml:7:11: field `app[0].cpus_by`: unknown cpus_by \"kubelet\": use \"taskset\"",
    );
    let by = |how: &str| {
        parse(
            &BASE.replace(
                "name = \"a\"\n",
                &format!("name = \"a\"\ncpus = \"0-1\"\n{how}"),
            ),
            "t.toml",
        )
        .unwrap()
        .apps[0]
            .cpus_by_cgroup
    };
    assert!(by("cpus_by = \"cgroup\"\n"));
    assert!(!by("cpus_by = \"taskset\"\n"));
    assert!(!by(""));
    // A node the machine does not have.
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\nmemory = \"node:7\"\n"),
        "t.toml:6:10: field `app[0].memory`: node 7 does not exist: westmere-2s has nodes 0-1",
    );
    let e = fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\nmemory = \"local\"\n"),
        "t.toml:6:10: field `app[0].memory`: unknown memory placement \"local\"",
    );
    assert!(
        e.contains("\"first-touch\", \"interleave\", \"interleave:LIST\" or \"node:N\""),
        "{e}"
    );
    fails(
        &BASE.replace(
            "name = \"a\"\n",
            "name = \"a\"\nmemory = \"interleave:1-2\"\n",
        ),
        "t.toml:6:10: field `app[0].memory`: node 2 does not exist: westmere-2s has nodes 0-1",
    );
    fails(
        &BASE.replace(
            "name = \"a\"\n",
            "name = \"a\"\nmemory = \"interleave:x\"\n",
        ),
        "t.toml:6:10: field `app[0].memory`: \"interleave:x\": LIST of interleave:LIST must be node numbers",
    );
    let w = parse(
        &BASE.replace(
            "name = \"a\"\n",
            "name = \"a\"\nmemory = \"interleave:0-1\"\n",
        ),
        "t.toml",
    )
    .unwrap();
    assert_eq!(w.apps[0].memory, MemoryPlacement::InterleaveNodes(0b11));
    assert_eq!(w.apps[0].memory.interleave_nodes(2), Some(vec![0, 1]));
    fails(
        &format!("{BASE}\n[linux]\nmigrate_probability = 1.5\n"),
        "t.toml:12:23: field `linux.migrate_probability`: must be between 0 and 1, got 1.5",
    );
    fails(
        &BASE.replace("machine", "step_ms = 0\nmachine"),
        "t.toml:2:11: field `step_ms`: must be between 0.01 and 10000, got 0",
    );
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\nstart_s = 4000\n"),
        "t.toml:6:11: field `app[0].start_s`: starts at 4000 s, not before max_seconds = 3600",
    );
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\nkind = \"container\"\n"),
        "t.toml:6:8: field `app[0].kind`: unknown kind \"container\": use \"process\" or \"vm\"",
    );
    fails(
        &BASE.replace("name = \"a\"", "name = \"\""),
        "t.toml:5:8: field `app[0].name`: the name is empty",
    );
    fails(
        &BASE.replace("uncore_pki = 20", "uncore_pki = nan"),
        "t.toml:7:14: field `app[0].uncore_pki`: expected a finite number, got NaN",
    );
    fails(
        &BASE.replace("uncore_pki = 20", "uncore_pki = 20\nalpha = 3"),
        "t.toml:8:9: field `app[0].alpha`: must be greater than 0 and at most 2, got 3",
    );
}

#[test]
fn thread_model_rules() {
    // llc_mpki with the uniform pattern.
    fails(
        &BASE.replace("uncore_pki = 20", "uncore_pki = 20\npattern = \"uniform\""),
        "t.toml:9:12: field `app[0].llc_mpki`: applies to pattern = \"power-law\" only, and app[0].pattern sets pattern = \"uniform\"",
    );
    // llc_mpki missing with the power law.
    fails(
        &BASE.replace("llc_mpki = 10\n", ""),
        "t.toml:4:1: field `app[0].llc_mpki`: missing: pattern \"power-law\" needs llc_mpki",
    );
    fails(
        &BASE.replace("llc_mpki = 10", "llc_mpki = 30"),
        "t.toml:8:12: field `app[0].llc_mpki`: llc_mpki 30 is more than uncore_pki 20 (app[0].uncore_pki)",
    );
    fails(
        &BASE.replace("working_set = \"64MiB\"\n", ""),
        "t.toml:4:1: field `app[0].working_set`: missing: give working_set in this [[app]]",
    );
    fails(
        &BASE.replace("instructions = 1e10\n", ""),
        "t.toml:4:1: field `app[0].instructions`: missing: give instructions per thread and run",
    );
    // Instructions both in the app and in its phases.
    fails(
        &format!("{BASE}\n[[app.phase]]\ninstructions = 5e9\n"),
        "t.toml:6:16: field `app[0].instructions`: instructions is given both here and in [[app.phase]]",
    );
    let phased = BASE.replace("instructions = 1e10\n", "");
    fails(
        &format!("{phased}\n[[app.phase]]\nuncore_pki = 2\n"),
        "t.toml:10:1: field `app[0].phase[0].instructions`: missing: every [[app.phase]] needs its instructions",
    );
    fails(
        &format!(
            "{phased}\n[[app.phase]]\ninstructions = 1\n\n[[app.phase]]\ninstructions = 1\nllc_mpki = 25\n"
        ),
        "t.toml:15:12: field `app[0].phase[1].llc_mpki`: llc_mpki 25 is more than uncore_pki 20 (app[0].uncore_pki)",
    );
    fails(
        &format!("{phased}\n[[app.phase]]\ninstructions = 1\nuncore_pki = -2\n"),
        "t.toml:12:14: field `app[0].phase[0].uncore_pki`: must be between 0 and 1000, got -2",
    );
    let no_uncore = phased.replace("uncore_pki = 20\nllc_mpki = 10\n", "llc_mpki = 1\n");
    fails(
        &format!(
            "{no_uncore}\n[[app.phase]]\ninstructions = 1\nuncore_pki = 3\n[[app.phase]]\ninstructions = 1\n"
        ),
        "t.toml:12:1: field `app[0].phase[1].uncore_pki`: missing: give uncore_pki in this [[app.phase]] or in its [[app]]",
    );
    // Shared writes need a shared area.
    fails(
        &BASE.replace("uncore_pki = 20", "uncore_pki = 20\nshared_writes_pki = 1"),
        "t.toml:8:21: field `app[0].shared_writes_pki`: writes to the shared area need one: set app[0].shared",
    );
}

#[test]
fn machines_and_names() {
    let e = fails(
        &BASE.replace("westmere-2s", "pentium-4"),
        "t.toml:2:11: field `machine`: unknown machine preset \"pentium-4\": use one of westmere-2s, barcelona-4s,",
    );
    assert!(e.contains("sapphirerapids-2s-snc4"), "{e}");
    fails(
        &BASE.replace("machine = \"westmere-2s\"\n", ""),
        "t.toml: field `machine`: missing: give the machine preset",
    );
    fails(
        "machine = \"core2duo\"\n",
        "t.toml: field `app`: no [[app]] table",
    );
    // Names are unique after copies.
    let dup = format!(
        "{}{}",
        BASE.replace("name = \"a\"", "name = \"a\"\ncopies = 2"),
        BASE.replace("machine = \"westmere-2s\"", "")
            .replace("name = \"a\"", "name = \"a.1\"")
    );
    fails(
        &dup,
        "t.toml:15:8: field `app[1].name`: app name \"a.1\" is already used by app[0]",
    );
    // Syntax errors carry their place.
    fails("machine = \n", "t.toml:1:");
    fails(
        &BASE
            .replace("threads", "x")
            .replace("name = \"a\"\n", "name = \"a\"\nname = \"b\"\n"),
        "t.toml:6:1: field `app[0].name`: duplicate key",
    );
    fails(
        "machine = \"westmere-2s\"\napp = 3\n",
        "t.toml:2:7: field `app`: wrong type: integer `3`, expected an array of tables ([[...]])",
    );
    // Tables of the wrong form.
    fails(
        "machine = \"westmere-2s\"\nlinux = 3\n",
        "t.toml:2:9: field `linux`: wrong type: integer `3`, expected a table ([linux])",
    );
    fails(
        "machine = \"westmere-2s\"\n[[linux]]\nnuma_balancing = true\n",
        "t.toml:2:1: field `linux`: wrong type: an array of tables, expected a table ([linux])",
    );
    fails(
        "machine = \"westmere-2s\"\n[app]\nname = \"a\"\n",
        "t.toml:2:1: field `app`: wrong type: a table, expected an array of tables ([[...]])",
    );
    fails(
        &format!("{BASE}[app.phase]\ninstructions = 1\n"),
        "t.toml:10:1: field `app[0].phase`: wrong type: a table, expected an array of tables",
    );
}

#[test]
fn the_example_of_the_user_docs_parses() {
    let doc = include_str!("../../../../docs/scenarios.md");
    let example = doc
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/scenarios.md has a toml example");
    let w = parse(example, "two-mixes.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w.name, "two-mixes");
    assert!(w.linux.numa_balancing);
    let names: Vec<_> = w.apps.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["mcf.0", "mcf.1", "team"]);
    let team = &w.apps[2];
    assert_eq!(team.phases.len(), 2);
    assert_eq!(team.phases[1].model.uncore_pki, 12.0);
    assert_eq!(
        team.phases[0].model.pattern,
        Pattern::PowerLaw {
            llc_mpki: 10.0,
            alpha: 0.5
        }
    );
}

#[test]
fn error_display() {
    let mut e = ScenarioError {
        origin: "f.toml".into(),
        line: Some(3),
        column: Some(7),
        field: Some("app[2].working_set".into()),
        message: "too big".into(),
    };
    assert_eq!(
        e.to_string(),
        "f.toml:3:7: field `app[2].working_set`: too big"
    );
    e.column = None;
    assert_eq!(
        e.to_string(),
        "f.toml:3: field `app[2].working_set`: too big"
    );
    e.line = None;
    e.field = None;
    assert_eq!(e.to_string(), "f.toml: too big");
    let _: &dyn std::error::Error = &e;
    // Columns count characters, not bytes.
    assert_eq!(line_col("a\né = x", 5), (2, 3));
}

#[test]
fn resolve_load_and_builtin_names() {
    let dir = std::env::temp_dir().join(format!("numaplace-scenario-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mine.toml");
    std::fs::write(&path, BASE).unwrap();
    let w = resolve(path.to_str().unwrap()).unwrap();
    assert_eq!(w.name, "mine");
    assert_eq!(load(&path).unwrap(), w);
    let w = resolve("spec-westmere").unwrap();
    assert_eq!(w.name, "spec-westmere");
    assert_eq!(w.apps.len(), 20);
    // Errors in a loaded file name the file.
    std::fs::write(&path, BASE.replace("uncore_pki = 20", "uncore_pki = -1")).unwrap();
    let e = load(&path).unwrap_err();
    assert_eq!(e.origin, path.display().to_string());
    assert_eq!((e.line, e.column), (Some(7), Some(14)));
    let missing = dir.join("missing.toml");
    let e = resolve(missing.to_str().unwrap()).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}: cannot read the scenario file",
            missing.display()
        )),
        "{e}"
    );
    let e = resolve("no-such-scenario").unwrap_err().to_string();
    assert!(e.contains("default, microbench-westmere"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Counts and times a hostile file could use to exhaust memory or run
/// forever are refused with their range before anything is allocated or
/// stepped.
#[test]
fn counts_and_times_have_stated_ranges() {
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\ncopies = 1000000000\n"),
        "t.toml:6:10: field `app[0].copies`: must be 1..=1024 (identical copies of the application), got 1000000000",
    );
    fails(
        &BASE.replace(
            "name = \"a\"\n",
            "name = \"a\"\nthreads = 9223372036854775807\n",
        ),
        "t.toml:6:11: field `app[0].threads`: must be 1..=4096",
    );
    fails(
        &BASE.replace("name = \"a\"\n", "name = \"a\"\nruns = 4294967296\n"),
        "t.toml:6:8: field `app[0].runs`: must be 1..=10000",
    );
    fails(
        &format!("step_ms = 1e-300\n{BASE}"),
        "t.toml:1:11: field `step_ms`: must be between 0.01 and 10000, got 1e-300",
    );
    fails(
        &format!("max_seconds = 1e300\n{BASE}"),
        "t.toml:1:15: field `max_seconds`: must be greater than 0 and at most 2592000, got 1e300",
    );
    // Within each app's range, but too many threads together.
    let e = fails(
        &BASE.replace(
            "name = \"a\"\n",
            "name = \"a\"\nthreads = 4096\ncopies = 25\n",
        ),
        "t.toml:4:1: field `app[0]`: the applications up to here have 102400 threads",
    );
    assert!(e.contains("at most 100000"), "{e}");
}

#[test]
fn copies_are_independent_unless_the_job_asks_for_a_structure() {
    let copies = BASE.replace("name = \"a\"", "name = \"a\"\ncopies = 3");
    let w = parse(&copies, "t.toml").unwrap();
    assert!(w.apps.iter().all(|a| a.job.is_none()));
    assert!(w.apps.iter().all(|a| a.instructions() == 1e10));

    let job = copies.replace(
        "copies = 3",
        "copies = 3\nrank_skew = 0.1\nbarrier = \"phase\"",
    );
    let w = parse(&job, "t.toml").unwrap();
    let work: Vec<f64> = w.apps.iter().map(|a| a.instructions()).collect();
    assert_eq!(work, [0.9e10, 1e10, 1.1e10]);
    for (r, a) in w.apps.iter().enumerate() {
        let j = a.job.as_ref().unwrap();
        assert_eq!((j.name.as_str(), j.rank, j.ranks), ("a", r as u32, 3));
        assert_eq!((j.rank_skew, j.barrier), (0.1, Barrier::Phase));
    }
    // A barrier alone: equal work, ranks that wait for each other.
    let w = parse(
        &copies.replace("copies = 3", "copies = 3\nbarrier = \"phase\""),
        "t.toml",
    )
    .unwrap();
    assert!(w.apps.iter().all(|a| a.instructions() == 1e10));
    assert!(
        w.apps
            .iter()
            .all(|a| a.job.as_ref().unwrap().barrier == Barrier::Phase)
    );

    fails(
        &copies.replace("copies = 3", "copies = 3\nrank_skew = 1"),
        "t.toml:7:13: field `app[0].rank_skew`: 1 would leave rank 0 no work",
    );
    fails(
        &copies.replace("copies = 3", "copies = 3\nrank_skew = -0.1"),
        "t.toml:7:13: field `app[0].rank_skew`: must be between 0 and 1",
    );
    fails(
        &BASE.replace("name = \"a\"", "name = \"a\"\nrank_skew = 0.1"),
        "t.toml:6:13: field `app[0].rank_skew`: spreads work over the ranks of a job, its copies",
    );
    fails(
        &copies.replace("copies = 3", "copies = 3\nbarrier = \"collective\""),
        "t.toml:7:11: field `app[0].barrier`: unknown barrier \"collective\": use \"none\" or \"phase\"",
    );
}

#[test]
fn a_mismatch_is_a_percentage_below_100() {
    assert_eq!(parse(BASE, "t.toml").unwrap().mismatch_percent, None);
    let w = parse(&format!("mismatch_percent = 25\n{BASE}"), "t.toml").unwrap();
    assert_eq!(w.mismatch_percent, Some(25.0));
    for bad in ["100", "-5", "250.5"] {
        let e = fails(
            &format!("mismatch_percent = {bad}\n{BASE}"),
            "t.toml:1:20: field `mismatch_percent`: ",
        );
        assert!(e.contains("from 0 to below 100"), "{e}");
    }
    fails(
        &format!("mismatch_percent = \"25%\"\n{BASE}"),
        "t.toml:1:20: field `mismatch_percent`: ",
    );
}
