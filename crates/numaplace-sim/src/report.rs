//! What `numaplace compare` prints and writes: a terminal table of the
//! policies, and a self-contained HTML page (inline CSS and SVG, no
//! scripts) with the table and plots of each policy's example run;
//! `numaplace simulate --report` writes the same plots for one run.

mod svg;

use std::fmt::Write;

use numaplace_model::task::printable;

use crate::outcome::{Comparison, PolicySummary, RunResult, Trace};
use svg::{CHAR_W, Plot, Svg, clip, color, esc, max_finite, sample_indices};

/// At most this many points per plotted series; longer traces are thinned.
const MAX_POINTS: usize = 400;
/// Width of every plot, pixels.
const WIDTH: f64 = 880.0;
/// More threads than this are coloured (and listed) by application.
const MAX_THREAD_COLOURS: usize = 12;

const HEADERS: [&str; 11] = [
    "policy",
    "autonuma",
    "mean s",
    "vs default %",
    "vs oracle %",
    "worst s",
    "RSD %",
    "thread migr/h",
    "pages migr/h",
    "energy kJ",
    "power W",
];

const FOOTER: &str = "mean: mean application run time over the seeds; autonuma: whether the \
simulated kernel under the policy ran its automatic NUMA balancing (`default` is Linux with it \
off, as the seeds measured; `autonuma` with it on, as distributions ship; `off, set in N: M \
on`: it started off, and the policy switched it itself in N runs, M of which ended with it on); \
vs default / vs \
oracle: change of the mean against `default` and the oracle's static placement (negative % = \
faster); worst: slowest seed; RSD: relative standard deviation over the seeds; migr/h: per \
simulated hour; energy, power: from the machine's power model; -: not available.";

fn fixed(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".into(),
    }
}

fn signed(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:+.1}"),
        _ => "-".into(),
    }
}

/// The kernel a policy ran on: `on` / `off`, and where it changed the
/// setting itself, in how many runs and how many ended with it on
/// (`off, 2/3 runs to on`).
fn kernel_cell(p: &PolicySummary) -> String {
    let start = if p.numa_balancing { "on" } else { "off" };
    if p.numa_balancing_changed_runs == 0 {
        return start.into();
    }
    format!(
        "{start}, set in {}: {} on",
        p.numa_balancing_changed_runs, p.numa_balancing_on_at_end_runs
    )
}

/// What the `vs oracle %` column says where the oracle is not a bound
/// (a policy beat it by more than 1 %, [`Comparison::oracle_short`]).
pub const NOT_A_BOUND: &str = "not a bound";

/// A policy's row: the cells under [`HEADERS`] (the policy name raw).
/// Where the oracle is not a bound, no row gets a number against it.
fn cells(p: &PolicySummary, c: &Comparison) -> [String; 11] {
    let vs_oracle = match (&c.oracle_short, p.vs_oracle_percent) {
        (Some(_), Some(_)) if p.policy != "oracle" => NOT_A_BOUND.to_string(),
        (_, v) => signed(v),
    };
    [
        p.policy.clone(),
        kernel_cell(p),
        fixed(Some(p.mean_runtime_s), 2),
        signed(p.vs_default_percent),
        vs_oracle,
        fixed(Some(p.worst_runtime_s), 2),
        fixed(Some(p.rsd_percent), 1),
        fixed(Some(p.thread_migrations_per_hour), 0),
        fixed(Some(p.pages_migrated_per_hour), 0),
        fixed(p.energy_j.map(|j| j / 1000.0), 1),
        fixed(p.mean_power_w, 1),
    ]
}

/// Seeds as ranges: `1-5, 9`.
fn seed_list(seeds: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seeds.len() {
        let mut j = i;
        while j + 1 < seeds.len() && seeds[j + 1] == seeds[j].wrapping_add(1) {
            j += 1;
        }
        parts.push(match j - i {
            0 => seeds[i].to_string(),
            1 => format!("{}, {}", seeds[i], seeds[j]),
            _ => format!("{}-{}", seeds[i], seeds[j]),
        });
        i = j + 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn unfinished_notes(c: &Comparison) -> Vec<String> {
    c.policies
        .iter()
        .filter(|p| p.unfinished > 0)
        .map(|p| {
            let s = if p.unfinished == 1 { "" } else { "s" };
            format!(
                "{}: {} seed{s} did not finish in the time limit",
                p.policy, p.unfinished
            )
        })
        .collect()
}

/// The terminal table: one row per policy; `-` where a value is missing.
pub fn table(c: &Comparison) -> String {
    let rows: Vec<[String; 11]> = c
        .policies
        .iter()
        .map(|p| {
            let mut r = cells(p, c);
            r[0] = printable(&r[0]);
            r
        })
        .collect();
    let mut widths = HEADERS.map(|h| h.chars().count());
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            match i {
                0 => s.push_str(&format!("{cell}{pad}")),
                _ => s.push_str(&format!("  {pad}{cell}")),
            }
        }
        s.trim_end().to_string()
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Scenario {} on {}, seeds {}",
        printable(&c.scenario),
        printable(&c.machine),
        seed_list(&c.seeds)
    );
    if let Some(p) = c.mismatch_percent {
        let _ = writeln!(
            out,
            "World: each machine parameter drawn within ±{p} % of the machine the policies see \
             (a world per seed)"
        );
    }
    if let Some(o) = &c.oracle {
        let _ = writeln!(out, "Oracle: {}", printable(o));
    }
    let _ = writeln!(out, "{}", line(&HEADERS.map(String::from)));
    for r in &rows {
        let _ = writeln!(out, "{}", line(r));
    }
    for n in unfinished_notes(c) {
        let _ = writeln!(out, "! {}", printable(&n));
    }
    if let Some(n) = &c.oracle_short {
        let _ = writeln!(out, "! {}", printable(n));
    }
    let _ = writeln!(out, "{FOOTER}");
    out
}

/// Per application (copies of a job as one), a cell per policy: mean run
/// time s / moves to another node per thread and hour, or `-`.
fn per_app_cells(c: &Comparison) -> Vec<(String, Vec<String>)> {
    let mut apps: Vec<&str> = c
        .policies
        .iter()
        .flat_map(|p| p.per_app.iter().map(|a| a.app.as_str()))
        .collect();
    apps.sort_unstable();
    apps.dedup();
    apps.into_iter()
        .map(|app| {
            let cells = c
                .policies
                .iter()
                .map(|p| {
                    p.per_app.iter().find(|a| a.app == app).map_or_else(
                        || "-".to_string(),
                        |a| {
                            format!(
                                "{:.1} / {:.1}",
                                a.mean_runtime_s, a.node_migrations_per_hour
                            )
                        },
                    )
                })
                .collect();
            (app.to_string(), cells)
        })
        .collect()
}

const PER_APP_TITLE: &str =
    "Per application: mean run time s / moves to another node per thread and hour";
const PER_APP_NOTE: &str = "Copies of a job (NAME.0, NAME.1, ...) are one row. Under DI-Migrate \
     and DINO each move to another node takes the thread's memory along: [Blagodurov11] Table 1's memory \
     migrations per hour (per process; its processes are single-threaded).";

/// `per_app_cells` as text (`compare --per-app`; \[Blagodurov11\] Table 1
/// reads off the `di-migrate` and `dino` columns).
pub fn per_app_table(c: &Comparison) -> String {
    let rows = per_app_cells(c);
    let cols: Vec<String> = c.policies.iter().map(|p| printable(&p.policy)).collect();
    let name_w = rows
        .iter()
        .map(|(a, _)| printable(a).chars().count())
        .chain([11])
        .max()
        .unwrap_or(11);
    let col_w = cols
        .iter()
        .map(|p| p.chars().count())
        .chain(
            rows.iter()
                .flat_map(|(_, r)| r.iter().map(|x| x.chars().count())),
        )
        .max()
        .unwrap_or(1);
    let mut out = String::new();
    let _ = writeln!(out, "\n{PER_APP_TITLE}");
    let mut head = format!("{:<name_w$}", "application");
    for p in &cols {
        head.push_str(&format!("  {p:>col_w$}"));
    }
    let _ = writeln!(out, "{}", head.trim_end());
    for (app, cells) in &rows {
        let mut line = format!("{:<name_w$}", printable(app));
        for cell in cells {
            line.push_str(&format!("  {cell:>col_w$}"));
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(out, "{PER_APP_NOTE}");
    out
}

/// [`per_app_cells`] as the report's table.
fn per_app_html(c: &Comparison) -> String {
    let rows = per_app_cells(c);
    if rows.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "<h2>{}</h2>\n<table>\n<tr><th>application</th>",
        esc(PER_APP_TITLE)
    );
    for p in &c.policies {
        let _ = write!(s, "<th class=\"n\">{}</th>", esc(&p.policy));
    }
    s.push_str("</tr>\n");
    for (app, cells) in &rows {
        let _ = write!(s, "<tr><td>{}</td>", esc(app));
        for cell in cells {
            let _ = write!(s, "<td class=\"n\">{}</td>", esc(cell));
        }
        s.push_str("</tr>\n");
    }
    let _ = writeln!(s, "</table>\n<p class=\"note\">{}</p>", esc(PER_APP_NOTE));
    s
}

const CSS: &str = "body{font-family:sans-serif;max-width:920px;margin:1.5em auto;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}h3{font-size:1.05em}\
.desc{white-space:pre-wrap}table{border-collapse:collapse;margin:.5em 0}\
th,td{padding:.2em .6em;border-bottom:1px solid #ddd}th{background:#f3f3f3}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.note{color:#555;font-size:.9em}\
svg{display:block;margin:.5em 0 1.2em}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        esc(title)
    )
}

fn table_html(c: &Comparison) -> String {
    let mut s = String::from("<table>\n<tr>");
    for (i, h) in HEADERS.iter().enumerate() {
        let class = if i == 0 { "" } else { " class=\"n\"" };
        let _ = write!(s, "<th{class}>{}</th>", esc(h));
    }
    s.push_str("</tr>\n");
    for p in &c.policies {
        s.push_str("<tr>");
        for (i, cell) in cells(p, c).iter().enumerate() {
            let class = if i == 0 { "" } else { " class=\"n\"" };
            let _ = write!(s, "<td{class}>{}</td>", esc(cell));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
    for n in unfinished_notes(c).iter().chain(&c.oracle_short) {
        let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(n));
    }
    let _ = writeln!(s, "<p class=\"note\">{}</p>", esc(FOOTER));
    s
}

/// The comparison's page: description, table, runtime bars and the plots
/// of each policy's example run.
pub fn html(c: &Comparison) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "<h1>{} on {}</h1>", esc(&c.scenario), esc(&c.machine));
    let _ = writeln!(b, "<p class=\"desc\">{}</p>", esc(c.description.trim()));
    let _ = writeln!(b, "<p>Seeds: {}.", esc(&seed_list(&c.seeds)));
    if let Some(p) = c.mismatch_percent {
        let _ = write!(
            b,
            " World: each machine parameter drawn within ±{p} % of the machine the policies see \
             (a world per seed)."
        );
    }
    if let Some(o) = &c.oracle {
        let _ = write!(b, " Oracle: {}.", esc(o));
    }
    b.push_str("</p>\n<h2>Policies</h2>\n");
    b.push_str(&table_html(c));
    b.push_str(&runtime_bars(c));
    b.push_str(&per_app_html(c));
    for r in &c.examples {
        let _ = writeln!(
            b,
            "<h2>Example run: {} (seed {})</h2>",
            esc(&r.policy),
            r.seed
        );
        b.push_str(&run_section(r));
    }
    page(
        &format!("numaplace compare: {} on {}", c.scenario, c.machine),
        &b,
    )
}

/// The page of one run (`numaplace simulate --report`).
pub fn run_html(r: &RunResult, description: &str) -> String {
    let mut b = String::new();
    let _ = writeln!(
        b,
        "<h1>{} on {}: {} (seed {})</h1>",
        esc(&r.scenario),
        esc(&r.machine),
        esc(&r.policy),
        r.seed
    );
    let _ = writeln!(b, "<p class=\"desc\">{}</p>", esc(description.trim()));
    b.push_str(&run_section(r));
    page(
        &format!("numaplace simulate: {} / {}", r.scenario, r.policy),
        &b,
    )
}

/// A run's numbers, its applications' run times and its plots.
fn run_section(r: &RunResult) -> String {
    let mut s = String::new();
    let secs = |v: Option<f64>| fixed(v, 2);
    let _ = write!(
        s,
        "<p>Makespan {} s{}; mean run time {} s; {} thread migrations ({} across nodes), {} pages migrated",
        secs(Some(r.makespan_s)),
        if r.finished {
            ""
        } else {
            " (time limit reached, not all runs finished)"
        },
        secs(r.mean_runtime_s()),
        r.thread_migrations,
        r.node_migrations,
        r.pages_migrated
    );
    if let Some(e) = r.energy_j {
        let _ = write!(
            s,
            "; {} kJ, {} W",
            fixed(Some(e / 1000.0), 1),
            fixed(r.mean_power_w, 1)
        );
    }
    s.push_str(".</p>\n<table>\n<tr><th>application</th><th class=\"n\">runs</th><th class=\"n\">mean run time s</th></tr>\n");
    let mut apps: Vec<&str> = Vec::new();
    for run in &r.runs {
        if !apps.contains(&run.app.as_str()) {
            apps.push(&run.app);
        }
    }
    for a in apps {
        let n = r.runs.iter().filter(|x| x.app == a).count();
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"n\">{n}</td><td class=\"n\">{}</td></tr>",
            esc(a),
            secs(r.app_runtime_s(a))
        );
    }
    s.push_str("</table>\n");
    match &r.trace {
        Some(t) if !t.times.is_empty() => {
            s.push_str("<h3>Progress of each thread</h3>\n");
            s.push_str(&progress_svg(t));
            s.push_str("<h3>Placement: which application ran on each CPU</h3>\n");
            s.push_str(&placement_svg(t));
            s.push_str("<h3>Memory on each node</h3>\n");
            s.push_str(&memory_svg(t));
        }
        _ => s.push_str("<p class=\"note\">No trace was recorded for this run.</p>\n"),
    }
    s
}

/// Applications in order of first appearance in the trace.
fn apps(t: &Trace) -> Vec<&str> {
    let mut v: Vec<&str> = Vec::new();
    let names = t.threads.iter().map(|x| x.app.as_str());
    for a in names.chain(t.memory.iter().map(|m| m.app.as_str())) {
        if !v.contains(&a) {
            v.push(a);
        }
    }
    v
}

fn app_legend<'a>(apps: &[&str]) -> Vec<(String, &'a str)> {
    apps.iter()
        .enumerate()
        .map(|(i, a)| (a.to_string(), color(i)))
        .collect()
}

/// The samples to plot: at most [`MAX_POINTS`], only those with a finite time.
fn samples(t: &Trace) -> Vec<usize> {
    let idx = sample_indices(t.times.len(), MAX_POINTS);
    idx.into_iter()
        .filter(|&k| t.times[k].is_finite())
        .collect()
}

fn time_range(t: &Trace) -> (f64, f64) {
    let lo = t
        .times
        .iter()
        .copied()
        .find(|v| v.is_finite())
        .unwrap_or(0.0)
        .min(0.0);
    let hi = max_finite(t.times.iter().copied(), lo);
    (lo, if hi > lo { hi } else { lo + 1.0 })
}

/// A plot area of the standard width with room for axes.
fn plot_area(t: &Trace, top: f64, h: f64, left: f64, y0: f64, y1: f64) -> Plot {
    let (x0, x1) = time_range(t);
    Plot {
        left,
        top,
        w: WIDTH - left - 20.0,
        h,
        x0,
        x1,
        y0,
        y1,
    }
}

/// One polyline per thread: progress in percent over time. While a thread
/// is not running its line holds its last value.
fn progress_svg(t: &Trace) -> String {
    let idx = samples(t);
    let apps = apps(t);
    let by_thread = t.threads.len() <= MAX_THREAD_COLOURS;
    let items: Vec<(String, &str)> = if by_thread {
        t.threads
            .iter()
            .enumerate()
            .map(|(i, th)| (th.label.clone(), color(i)))
            .collect()
    } else {
        app_legend(&apps)
    };
    let p = plot_area(t, 10.0, 220.0, 56.0, 0.0, 100.0);
    let mut svg = Svg::new(
        WIDTH,
        "Progress of each thread, percent of its current run, over time",
    );
    svg.axes(&p, "time (s)", "progress (%)", true);
    for (i, th) in t.threads.iter().enumerate() {
        let colour = if by_thread {
            color(i)
        } else {
            color(apps.iter().position(|a| *a == th.app).unwrap_or(0))
        };
        let mut pts: Vec<(f64, f64)> = Vec::new();
        // The last value, and whether the thread stopped running since.
        let (mut last, mut gap) = (None, false);
        for &k in &idx {
            let Some(Some(v)) = th.progress.get(k) else {
                gap = true;
                continue;
            };
            let v = (f64::from(*v) * 100.0).clamp(0.0, 100.0);
            let v = if v.is_finite() { v } else { 0.0 };
            let x = p.x(t.times[k]);
            if let Some(prev) = last {
                if gap {
                    pts.push((x, p.y(prev)));
                }
            }
            pts.push((x, p.y(v)));
            (last, gap) = (Some(v), false);
        }
        svg.polyline(&pts, colour, &th.label);
    }
    let bottom = svg.legend(p.left, p.bottom() + 44.0, p.w, &items);
    svg.finish(bottom)
}

/// One row per CPU; a segment, coloured by application, where a thread ran.
fn placement_svg(t: &Trace) -> String {
    let idx = samples(t);
    let apps = apps(t);
    let cpus = t.cpus.max(1);
    let row = (320.0 / cpus as f64).clamp(2.0, 20.0);
    let p = plot_area(t, 10.0, row * cpus as f64, 56.0, 0.0, cpus as f64);
    let mut svg = Svg::new(
        WIDTH,
        "Placement over time: the application running on each CPU",
    );
    svg.axes(&p, "time (s)", "CPU", false);
    // grid[cpu][sampled index]: the application running there.
    let mut grid: Vec<Vec<Option<usize>>> = vec![vec![None; idx.len()]; cpus];
    for th in &t.threads {
        let a = apps.iter().position(|x| *x == th.app).unwrap_or(0);
        for (j, &k) in idx.iter().enumerate() {
            if let Some(Some(cpu)) = th.cpu.get(k) {
                if let Some(cell) = grid.get_mut(*cpu as usize) {
                    cell[j].get_or_insert(a);
                }
            }
        }
    }
    // Sample j covers the time between the midpoints to its neighbours.
    let time = |j: usize| t.times[idx[j]];
    let edge = |j: usize| match j {
        0 => p.x0,
        j if j >= idx.len() => p.x1,
        j => (time(j - 1) + time(j)) / 2.0,
    };
    for (cpu, cells) in grid.iter().enumerate() {
        let y = p.top + cpu as f64 * row;
        let mut j = 0;
        while j < cells.len() {
            let Some(a) = cells[j] else {
                j += 1;
                continue;
            };
            let start = j;
            while j < cells.len() && cells[j] == Some(a) {
                j += 1;
            }
            let (x0, x1) = (p.x(edge(start)), p.x(edge(j)));
            let tip = format!(
                "CPU {cpu}: {} {}-{} s",
                apps[a],
                svg::num(edge(start)),
                svg::num(edge(j))
            );
            let gap = if row >= 6.0 { 1.0 } else { 0.0 };
            svg.rect(x0, y + gap / 2.0, x1 - x0, row - gap, color(a), Some(&tip));
        }
    }
    let every = (14.0 / row).ceil().max(1.0) as usize;
    for cpu in (0..cpus).step_by(every) {
        let y = p.top + (cpu as f64 + 0.5) * row;
        svg.text(p.left - 6.0, y + 4.0, "end", "", &cpu.to_string());
    }
    let bottom = svg.legend(p.left, p.bottom() + 44.0, p.w, &app_legend(&apps));
    svg.finish(bottom)
}

/// One panel per node: each application's MiB there, stacked.
fn memory_svg(t: &Trace) -> String {
    let idx = samples(t);
    let apps = apps(t);
    let nodes = t.nodes.max(1);
    let mib = |m: usize, k: usize, n: usize| -> f64 {
        let v = t.memory[m]
            .mib
            .get(k)
            .and_then(|s| s.get(n))
            .copied()
            .unwrap_or(0.0);
        if v.is_finite() { v.max(0.0) } else { 0.0 }
    };
    let total = |k: usize, n: usize| (0..t.memory.len()).map(|m| mib(m, k, n)).sum::<f64>();
    let peak = max_finite(
        idx.iter()
            .flat_map(|&k| (0..nodes).map(move |n| total(k, n))),
        1.0,
    );
    let (unit, scale) = if peak >= 10_240.0 {
        ("GiB", 1024.0)
    } else {
        ("MiB", 1.0)
    };
    let ymax = peak / scale * 1.05;
    let cols = nodes.min(2);
    let (panel_w, panel_h, left) = (WIDTH / cols as f64, 150.0, 64.0);
    let mut svg = Svg::new(
        WIDTH,
        &format!("Memory on each node over time, {unit}, stacked by application"),
    );
    let rows = nodes.div_ceil(cols);
    for n in 0..nodes {
        let (c, r) = ((n % cols) as f64, (n / cols) as f64);
        let mut p = plot_area(t, 24.0 + r * (panel_h + 70.0), panel_h, 0.0, 0.0, ymax);
        p.left = c * panel_w + left;
        p.w = panel_w - left - 20.0;
        svg.text(
            p.left + p.w / 2.0,
            p.top - 8.0,
            "middle",
            "font-weight=\"bold\"",
            &format!("node {n}"),
        );
        svg.axes(&p, "time (s)", if c == 0.0 { unit } else { "" }, true);
        let mut lower: Vec<f64> = vec![0.0; idx.len()];
        for (m, mt) in t.memory.iter().enumerate() {
            let upper: Vec<f64> = idx
                .iter()
                .zip(&lower)
                .map(|(&k, lo)| lo + mib(m, k, n) / scale)
                .collect();
            let mut pts: Vec<(f64, f64)> = idx
                .iter()
                .zip(&upper)
                .map(|(&k, v)| (p.x(t.times[k]), p.y(*v)))
                .collect();
            pts.extend(
                idx.iter()
                    .zip(&lower)
                    .rev()
                    .map(|(&k, v)| (p.x(t.times[k]), p.y(*v))),
            );
            let a = apps.iter().position(|x| *x == mt.app).unwrap_or(0);
            svg.polygon(&pts, color(a), &format!("{} on node {n}", mt.app));
            lower = upper;
        }
    }
    let top = 24.0 + rows as f64 * (panel_h + 70.0) - 26.0;
    let bottom = svg.legend(left, top, WIDTH - left - 20.0, &app_legend(&apps));
    svg.finish(bottom)
}

/// Horizontal bars: mean run time per policy, the worst seed as a marker.
fn runtime_bars(c: &Comparison) -> String {
    let longest = c
        .policies
        .iter()
        .map(|p| clip(&p.policy, 30).chars().count())
        .max()
        .unwrap_or(0);
    let left = (longest as f64 * CHAR_W + 16.0).clamp(60.0, 230.0);
    let (bar, gap) = (18.0, 8.0);
    let n = c.policies.len().max(1) as f64;
    let xmax = max_finite(
        c.policies
            .iter()
            .flat_map(|p| [p.mean_runtime_s, p.worst_runtime_s]),
        1e-9,
    ) * 1.05;
    let p = Plot {
        left,
        top: 10.0,
        w: WIDTH - left - 190.0,
        h: n * (bar + gap) + gap,
        x0: 0.0,
        x1: xmax,
        y0: 0.0,
        y1: 1.0,
    };
    let mut svg = Svg::new(
        WIDTH,
        "Mean run time per policy; the marker is the worst seed",
    );
    svg.axes(&p, "mean application run time (s)", "", false);
    for (i, ps) in c.policies.iter().enumerate() {
        let y = p.top + gap + i as f64 * (bar + gap);
        let name = clip(&ps.policy, 30);
        svg.text(left - 8.0, y + bar / 2.0 + 4.0, "end", "", &name);
        let mean = ps.mean_runtime_s;
        if mean.is_finite() {
            let tip = format!("{}: mean {} s", ps.policy, fixed(Some(mean), 2));
            svg.rect(
                p.x(0.0),
                y,
                p.x(mean.max(0.0)) - p.x(0.0),
                bar,
                color(i),
                Some(&tip),
            );
        }
        let worst = ps.worst_runtime_s;
        let mut end = p.x(mean.max(0.0));
        if worst.is_finite() {
            let (x, cy) = (p.x(worst.max(0.0)), y + bar / 2.0);
            svg.raw(&format!(
                "<path d=\"M{} {}l6 {}l-6 {}l-6 {}z\" fill=\"#222\"><title>{}</title></path>\n",
                svg::num(x),
                svg::num(cy - 8.0),
                svg::num(8.0),
                svg::num(8.0),
                svg::num(-8.0),
                esc(&format!(
                    "{}: worst seed {} s",
                    ps.policy,
                    fixed(Some(worst), 2)
                ))
            ));
            end = end.max(x);
        }
        let label = format!(
            "{} s (worst {})",
            fixed(Some(mean), 2),
            fixed(Some(worst), 2)
        );
        svg.text(end + 10.0, y + bar / 2.0 + 4.0, "start", "", &label);
    }
    let note = "bar: mean over the seeds; ◆: the worst seed";
    svg.text(left, p.bottom() + 52.0, "start", "fill=\"#555\"", note);
    format!(
        "<h3>Mean run time per policy</h3>\n{}",
        svg.finish(p.bottom() + 62.0)
    )
}

#[cfg(test)]
mod tests;
