//! Tests of `report`.

use super::*;
use crate::outcome::{AppRun, MemoryTrace, ThreadTrace};

const EVIL: &str = "<script>&\"";

/// A run whose trace has `threads` threads of two applications (the
/// second named [`EVIL`]) over `samples` samples of one second.
fn run(policy: &str, samples: usize, threads: usize, nodes: usize, cpus: usize) -> RunResult {
    let apps = ["db", EVIL];
    let end = samples.saturating_sub(1) as f64;
    let threads: Vec<ThreadTrace> = (0..threads)
        .map(|i| {
            let app = apps[i % 2];
            // The second application starts late and runs twice.
            let progress = (0..samples)
                .map(|k| {
                    let f = k as f32 / end.max(1.0) as f32;
                    match app {
                        "db" => Some(f),
                        _ if f < 0.2 => None,
                        _ => Some(((f - 0.2) * 2.5) % 1.0),
                    }
                })
                .collect::<Vec<_>>();
            let cpu = progress
                .iter()
                .enumerate()
                .map(|(k, p)| p.map(|_| ((i + k / 3) % cpus) as u32))
                .collect();
            ThreadTrace {
                label: format!("{app}/{i}"),
                app: app.into(),
                progress,
                cpu,
            }
        })
        .collect();
    let memory = apps
        .iter()
        .enumerate()
        .map(|(a, app)| MemoryTrace {
            app: app.to_string(),
            mib: (0..samples)
                .map(|k| {
                    (0..nodes)
                        .map(|n| ((k + 1) * (a + 1) * (n + 1)) as f64 * 10.0)
                        .collect()
                })
                .collect(),
        })
        .collect();
    let trace = Trace {
        times: (0..samples).map(|k| k as f64).collect(),
        threads,
        memory,
        nodes,
        cpus,
    };
    RunResult {
        scenario: "two-apps".into(),
        machine: "westmere-2s".into(),
        policy: policy.into(),
        seed: 1,
        makespan_s: end,
        finished: true,
        numa_balancing: false,
        numa_balancing_end: false,
        numa_balancing_changes: 0,
        hinting_faults: 0,
        numa_task_moves: 0,
        uncore_penalty_cycles: 120.0,
        llc_mpki: 9.5,
        warnings: Vec::new(),
        runs: vec![
            AppRun {
                app: "db".into(),
                run: 0,
                start_s: 0.0,
                end_s: Some(end),
                thread_s: vec![Some(end)],
                node_migrations: 0,
            },
            AppRun {
                app: EVIL.into(),
                run: 0,
                start_s: 2.0,
                end_s: Some(6.0),
                thread_s: vec![Some(4.0)],
                node_migrations: 3,
            },
        ],
        thread_migrations: 12,
        node_migrations: 3,
        pages_migrated: 4096,
        energy_j: Some(12_345.0),
        mean_power_w: Some(151.25),
        trace: Some(trace),
    }
}

fn summary(policy: &str, mean: f64, vs_default: Option<f64>, energy: Option<f64>) -> PolicySummary {
    PolicySummary {
        numa_balancing: false,
        numa_balancing_changed_runs: 0,
        numa_balancing_on_at_end_runs: 0,
        policy: policy.into(),
        mean_runtime_s: mean,
        worst_runtime_s: mean * 1.1,
        rsd_percent: 3.25,
        vs_default_percent: vs_default,
        vs_oracle_percent: Some(12.5),
        thread_migrations_per_hour: 1234.4,
        pages_migrated_per_hour: 98765.6,
        energy_j: energy,
        mean_power_w: energy.map(|_| 150.0),
        unfinished: 0,
        per_app: Vec::new(),
    }
}

fn comparison(samples: usize) -> Comparison {
    let mut policies = vec![
        summary("default", 10.0, Some(0.0), Some(12_345.0)),
        summary("numad", 9.5, Some(-5.0), Some(11_000.0)),
        summary("no-power", 11.0, None, None),
    ];
    policies[2].unfinished = 2;
    Comparison {
        scenario: "two-apps".into(),
        description: "Two applications <b>compete</b> & share.".into(),
        machine: "westmere-2s".into(),
        seeds: vec![1, 2, 3, 7],
        policies,
        oracle: Some("exhaustive".into()),
        oracle_short: None,
        mismatch_percent: None,
        examples: vec![
            run("default", samples, 3, 2, 4),
            run("numad", samples, 3, 2, 4),
        ],
    }
}

fn svgs(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("unclosed svg") + start + "</svg>".len();
        out.push(&rest[start..end]);
        rest = &rest[end..];
    }
    out
}

fn count(svg: &str, tag: &str) -> usize {
    let doc = roxmltree::Document::parse(svg).expect("svg parses");
    doc.descendants().filter(|n| n.has_tag_name(tag)).count()
}

#[test]
fn report_table_has_every_policy_and_dashes() {
    let t = table(&comparison(10));
    assert!(
        t.contains("Scenario two-apps on westmere-2s, seeds 1-3, 7"),
        "{t}"
    );
    assert!(t.contains("negative % = faster"), "{t}");
    let row = |name: &str| {
        t.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {t}"))
    };
    let cells: Vec<&str> = row("default ").split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "default", "off", "10.00", "+0.0", "+12.5", "11.00", "3.2", "1234", "98766", "12.3",
            "150.0"
        ]
    );
    let cells: Vec<&str> = row("numad ").split_whitespace().collect();
    assert_eq!(cells[..5], ["numad", "off", "9.50", "-5.0", "+12.5"]);
    let cells: Vec<&str> = row("no-power ").split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "no-power", "off", "11.00", "-", "+12.5", "12.10", "3.2", "1234", "98766", "-", "-"
        ]
    );
    assert!(t.contains("no-power: 2 seeds did not finish"), "{t}");
    // Right-aligned: every row ends its power column at the same place.
    let header = t.lines().find(|l| l.starts_with("policy")).unwrap();
    assert_eq!(row("default ").len(), header.len());
    assert_eq!(row("no-power ").len(), header.len());
}

#[test]
fn report_table_escapes_control_characters() {
    let mut c = comparison(10);
    c.policies[0].policy = "bad\x1b[2Jname".into();
    let t = table(&c);
    assert!(!t.contains('\x1b'));
    assert!(t.contains("bad\\x1b[2Jname"), "{t}");
}

#[test]
fn report_html_svgs_parse_and_progress_has_a_line_per_thread() {
    let c = comparison(10);
    let h = html(&c);
    assert!(h.starts_with("<!DOCTYPE html>") && h.trim_end().ends_with("</html>"));
    // No scripts, no external resources.
    assert!(!h.contains("<script") && !h.contains("src=") && !h.contains("href"));
    let all = svgs(&h);
    // Runtime bars, then three plots per example.
    assert_eq!(all.len(), 1 + 3 * c.examples.len());
    for s in &all {
        roxmltree::Document::parse(s).unwrap_or_else(|e| panic!("{e}: {s}"));
        assert!(!s.contains("NaN") && !s.contains("inf"), "{s}");
    }
    assert_eq!(count(all[1], "polyline"), 3, "{}", all[1]);
    assert_eq!(count(all[4], "polyline"), 3);
    // Placement: a segment per run of samples; memory: two apps on two nodes.
    assert!(count(all[2], "rect") > 4);
    assert_eq!(count(all[3], "polygon"), 4);
    // Every policy in table and bar chart.
    for p in &c.policies {
        assert!(h.contains(&format!("<td>{}</td>", p.policy)));
        assert!(all[0].contains(&format!(">{}</text>", p.policy)));
    }
    assert!(h.contains("<td class=\"n\">-</td>"));
}

#[test]
fn report_html_escapes_names_from_the_data() {
    let mut c = comparison(10);
    c.policies[1].policy = EVIL.into();
    c.examples[1].policy = EVIL.into();
    c.scenario = EVIL.into();
    let h = html(&c);
    assert!(!h.contains(EVIL));
    assert!(!h.contains("<script"));
    assert!(!h.contains("<b>"));
    assert!(h.contains("&lt;script&gt;&amp;&quot;"));
    let r = run_html(&c.examples[0], EVIL);
    assert!(!r.contains(EVIL) && !r.contains("<script"));
    for s in svgs(&r) {
        roxmltree::Document::parse(s).unwrap();
    }
}

#[test]
fn report_long_traces_are_downsampled() {
    let r = run("default", 20_000, 3, 2, 4);
    let h = run_html(&r, "long");
    let all = svgs(&h);
    assert_eq!(all.len(), 3);
    let doc = roxmltree::Document::parse(all[0]).unwrap();
    for line in doc.descendants().filter(|n| n.has_tag_name("polyline")) {
        let n = line.attribute("points").unwrap().split(' ').count();
        assert!(n > 100 && n <= 2 * MAX_POINTS, "{n} points");
    }
    let doc = roxmltree::Document::parse(all[2]).unwrap();
    for area in doc.descendants().filter(|n| n.has_tag_name("polygon")) {
        assert!(area.attribute("points").unwrap().split(' ').count() <= 2 * MAX_POINTS);
    }
    assert!(count(all[1], "rect") <= 4 * MAX_POINTS + 10);
    assert!(h.len() < 400_000, "{} bytes", h.len());
}

#[test]
fn report_survives_nan_and_empty_traces() {
    let mut c = comparison(10);
    c.policies[0].mean_runtime_s = f64::NAN;
    c.policies[1].worst_runtime_s = f64::INFINITY;
    c.examples[0].trace = Some(Trace::default());
    c.examples[1].trace.as_mut().unwrap().times[3] = f64::NAN;
    let h = html(&c);
    for s in svgs(&h) {
        roxmltree::Document::parse(s).unwrap();
        assert!(!s.contains("NaN") && !s.contains("inf"), "{s}");
    }
    assert!(
        table(&c)
            .lines()
            .any(|l| l.starts_with("default ") && l.contains(" - "))
    );
}

/// Writes `/tmp/report-example.html` to look at:
/// `cargo test -p numaplace-sim --lib report_write_example -- --ignored`.
#[test]
#[ignore]
fn report_write_example() {
    let mut c = comparison(10);
    c.examples = vec![
        run("default", 10, 3, 2, 4),
        run("numad-with-a-long-name", 1200, 16, 4, 32),
    ];
    std::fs::write("/tmp/report-example.html", html(&c)).unwrap();
}

#[test]
fn per_app_table_has_a_row_per_application_and_a_column_per_policy() {
    let mut c = comparison(10);
    let app = |name: &str, t: f64, m: f64| crate::outcome::AppSummary {
        app: name.into(),
        runs: 4,
        mean_runtime_s: t,
        node_migrations_per_hour: m,
    };
    c.policies[0].per_app = vec![app("leslie3d", 46.3, 0.0), app("lu", 49.4, 0.0)];
    c.policies[1].per_app = vec![app("leslie3d", 40.0, 381.0)];
    let t = per_app_table(&c);
    let lines: Vec<&str> = t.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        lines[0].contains("moves to another node per thread and hour"),
        "{t}"
    );
    assert!(lines[1].starts_with("application"), "{t}");
    assert!(
        lines[1].contains("default") && lines[1].contains("no-power"),
        "{t}"
    );
    assert!(lines[2].starts_with("leslie3d"), "{t}");
    assert!(
        lines[2].contains("46.3 / 0.0") && lines[2].contains("40.0 / 381.0"),
        "{t}"
    );
    // An application a policy has no row for is a dash.
    assert!(
        lines[3].starts_with("lu") && lines[3].trim_end().ends_with('-'),
        "{t}"
    );
    assert_eq!(lines.len(), 5, "{t}");
    assert!(lines[4].contains("Table 1"), "{t}");
    let h = html(&c);
    assert!(
        h.contains("<td>leslie3d</td>"),
        "per-app section in the report"
    );
    assert!(
        !html(&comparison(10)).contains("Per application"),
        "none without per-app rows"
    );
}

#[test]
fn report_table_says_where_the_oracle_is_not_a_bound_and_what_the_world_was() {
    let mut c = comparison(10);
    let t = table(&c);
    assert!(t.contains("+12.5") && !t.contains(NOT_A_BOUND), "{t}");
    assert!(!t.contains("World:"), "{t}");
    c.policies[1].vs_oracle_percent = Some(-7.5);
    c.policies.push(summary("oracle", 10.3, Some(3.0), None));
    c.policies[3].vs_oracle_percent = Some(0.0);
    c.oracle_short = crate::compare::oracle_shortfall(&c.policies);
    c.mismatch_percent = Some(25.0);
    let t = table(&c);
    let row = |name: &str| t.lines().find(|l| l.starts_with(name)).unwrap().to_string();
    for p in ["default ", "numad ", "no-power "] {
        assert!(row(p).contains(NOT_A_BOUND), "{p}: {t}");
        assert!(!row(p).contains("+12.5") && !row(p).contains("-7.5"), "{t}");
    }
    assert!(row("oracle ").contains("+0.0"), "{t}");
    assert!(
        t.contains(
            "! the oracle is not a bound here: faster than its placement are numad by 7.5 %"
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "World: each machine parameter drawn within ±25 % of the machine the policies see"
        ),
        "{t}"
    );
    let h = html(&c);
    assert!(h.contains(NOT_A_BOUND) && h.contains("within ±25 %"));
}
