//! Draws one frame: a header, the nodes, then the groups or the decisions,
//! and the keys.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Wrap};

use super::input::{App, KEYS, Pane};
use numaplace::top_state::{DecisionRow, GroupRow, TopState};

/// The smallest terminal the view fits in.
pub(crate) const MIN_WIDTH: u16 = 60;
pub(crate) const MIN_HEIGHT: u16 = 14;

/// What the view shows besides the frame.
pub(crate) struct Status<'a> {
    /// Where the frames come from (`daemon unix:/run/...`, `this machine`).
    pub source: &'a str,
    /// Why the latest try failed (`daemon not answering: ...`).
    pub problem: Option<String>,
}

pub(crate) fn draw(f: &mut Frame, app: &App, state: Option<&TopState>, status: &Status) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "terminal too small: {}x{}, numaplace top needs at least {MIN_WIDTH}x{MIN_HEIGHT} (q quits)",
            area.width, area.height
        );
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let nodes = state.map_or(1, |s| s.nodes.len()) as u16;
    let [head, node_area, pane, foot] = Layout::vertical([
        // A problem may take two lines of its own.
        Constraint::Length(if status.problem.is_some() { 3 } else { 2 }),
        Constraint::Length((nodes + 3).min(area.height / 3).max(4)),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(header(app, state, status), head);
    let Some(state) = state else {
        f.render_widget(
            Paragraph::new("waiting for the first round...").block(Block::bordered()),
            node_area,
        );
        f.render_widget(Paragraph::new(KEYS), foot);
        return;
    };
    draw_nodes(f, state, node_area);
    match app.pane {
        Pane::Groups => draw_groups(f, app, state, pane),
        Pane::Decisions => draw_decisions(f, app, state, pane),
    }
    f.render_widget(
        Paragraph::new(KEYS).style(Style::new().add_modifier(Modifier::DIM)),
        foot,
    );
}

fn header<'a>(app: &App, state: Option<&TopState>, status: &Status) -> Paragraph<'a> {
    let mut first = vec![Span::styled(
        "numaplace top",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    first.push(Span::raw(format!(" | {}", status.source)));
    if let Some(s) = state {
        first.push(Span::raw(format!(
            " | policy {} | round {} | {}",
            s.policy,
            s.round,
            if s.applies {
                "applies its decisions"
            } else {
                "applies nothing"
            }
        )));
    }
    let second = match (&status.problem, &app.frozen) {
        (Some(p), _) => Line::styled(p.clone(), Style::new().fg(Color::Red)),
        (None, Some(_)) => Line::styled(
            "paused (space resumes)",
            Style::new().add_modifier(Modifier::REVERSED),
        ),
        (None, None) => Line::raw(""),
    };
    Paragraph::new(Text::from(vec![Line::from(first), second])).wrap(Wrap { trim: false })
}

/// Bytes as the topology report writes them, without its space, to fit
/// a column: `15.6GiB`, `300MiB`.
pub(crate) fn bytes(b: u64) -> String {
    numaplace::report::topology::bytes(b).replace(' ', "")
}

fn opt_bytes(b: Option<u64>) -> String {
    b.map_or_else(|| "-".into(), bytes)
}

fn draw_nodes(f: &mut Frame, s: &TopState, area: Rect) {
    let rows = s.nodes.iter().map(|n| {
        let used = n
            .mem_total
            .zip(n.mem_free)
            .map(|(t, fr)| t.saturating_sub(fr));
        Row::new(vec![
            Cell::from(n.id.to_string()),
            Cell::from(n.cpus.clone()),
            Cell::from(
                n.busy_cpus
                    .map_or_else(|| "-".into(), |b| format!("{b:.2} of {}", n.cpu_count)),
            ),
            Cell::from(opt_bytes(used)),
            Cell::from(opt_bytes(n.mem_free)),
            Cell::from(opt_bytes(n.mem_total)),
            Cell::from(allocation_cell(n.allocations.map(|a| a.local_per_s))),
            Cell::from(allocation_cell(n.allocations.map(|a| a.remote_per_s))),
        ])
    });
    let bandwidth = if s.bandwidth.is_empty() {
        "memory bandwidth: not measured (no resctrl memory bandwidth monitoring)".to_string()
    } else {
        let per: Vec<String> = s
            .bandwidth
            .iter()
            .map(|b| format!("L3 domain {}: {}/s", b.domain, bytes(b.bytes_per_s as u64)))
            .collect();
        format!("memory bandwidth: {}", per.join(", "))
    };
    let bandwidth = turned_away(s) + &bandwidth;
    let cpus_width = s
        .nodes
        .iter()
        .map(|n| n.cpus.len())
        .max()
        .unwrap_or(0)
        .max(4) as u16;
    let table = Table::new(
        rows,
        [
            Constraint::Length(5),
            Constraint::Length(cpus_width),
            Constraint::Length(14),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Min(9),
        ],
    )
    .header(
        Row::new([
            "NODE",
            "CPUS",
            "CPUS BUSY",
            "MEM USED",
            "MEM FREE",
            "MEM TOTAL",
            "LOCAL/S",
            "REMOTE/S",
        ])
        .style(Style::new().add_modifier(Modifier::BOLD)),
    )
    .block(
        Block::bordered()
            .title(" nodes | LOCAL/S, REMOTE/S: page allocations for tasks on, off the node (numastat) ")
            .title_bottom(bandwidth),
    );
    f.render_widget(table, area);
}

/// Allocations per second, whole (`-` where not measured).
fn allocation_cell(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".into(), |r| format!("{r:.0}"))
}

/// The nodes that turned away allocations meant for them over the round
/// (short of free memory), first on the line under the table; empty if
/// none.
fn turned_away(s: &TopState) -> String {
    let away: Vec<String> = (s.nodes.iter())
        .filter_map(|n| {
            n.allocations
                .filter(|a| a.turned_away_per_s > 0.0)
                .map(|a| (n.id, a))
        })
        .map(|(id, a)| format!("node {id} {:.0}/s", a.turned_away_per_s))
        .collect();
    if away.is_empty() {
        return String::new();
    }
    format!(
        "allocations turned away (short of memory): {} | ",
        away.join(", ")
    )
}

fn per_node<T>(m: &std::collections::BTreeMap<u32, T>, show: impl Fn(&T) -> String) -> String {
    m.iter()
        .map(|(n, v)| format!("{n}:{}", show(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn group_row(g: &GroupRow) -> Row<'static> {
    let style = if g.in_scope {
        Style::new()
    } else {
        Style::new().add_modifier(Modifier::DIM)
    };
    Row::new(vec![
        Cell::from(format!("{}{}", if g.in_scope { "*" } else { " " }, g.pid)),
        Cell::from(g.label.clone()),
        Cell::from(g.kind.clone()),
        Cell::from(g.threads.to_string()),
        Cell::from(
            g.busy_cpus
                .map_or_else(|| "-".into(), |b| format!("{b:.2}")),
        ),
        // Threads that ran on CPUs outside the machine numaplace places
        // onto (`--cpus`) are on none of its nodes.
        Cell::from(if g.running.is_empty() {
            "-".to_string()
        } else {
            per_node(&g.running, |n| n.to_string())
        }),
        Cell::from(g.cpus.clone()),
        Cell::from(
            g.memory
                .as_ref()
                .map_or_else(|| "not read".into(), |m| per_node(m, |b| bytes(*b))),
        ),
        Cell::from(g.class.clone().unwrap_or_else(|| "-".into())),
        Cell::from({
            let mut said = if g.signals.is_empty() {
                "none".to_string()
            } else {
                g.signals.join(", ")
            };
            // First: what an operator looks for when a process is not placed.
            if !g.left_alone.is_empty() {
                said = format!("left alone: {}; {said}", g.left_alone.join(", "));
            }
            said
        }),
    ])
    .style(style)
}

fn draw_groups(f: &mut Frame, app: &App, s: &TopState, area: Rect) {
    let groups = app.sorted(&s.groups);
    let shown = (area.height as usize).saturating_sub(3);
    let first = app.scroll.min(groups.len().saturating_sub(1));
    let rows = groups.iter().skip(first).take(shown).map(|g| group_row(g));
    let left_out = if s.groups_left_out > 0 {
        format!(" ({} more not sent)", s.groups_left_out)
    } else {
        String::new()
    };
    let title = format!(
        " groups: {} (* in scope), by {}{}{left_out} | Tab: decisions ",
        s.groups.len(),
        app.sort.name(),
        if app.reverse { " reversed" } else { "" },
    );
    let table = Table::new(
        rows,
        [
            Constraint::Length(8),
            Constraint::Length(16),
            Constraint::Length(7),
            Constraint::Length(4),
            Constraint::Length(5),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(16),
            Constraint::Fill(2),
            Constraint::Fill(3),
        ],
    )
    .header(
        Row::new([
            "PID", "NAME", "KIND", "THR", "CPU", "RUN ON", "CPUS", "MEM/NODE", "CLASS", "SIGNALS",
        ])
        .style(Style::new().add_modifier(Modifier::BOLD)),
    )
    .block(Block::bordered().title(title));
    f.render_widget(table, area);
}

fn decision_lines(d: &DecisionRow) -> Vec<Line<'static>> {
    vec![
        Line::from(vec![
            Span::styled(
                format!("round {} ", d.round),
                Style::new().add_modifier(Modifier::DIM),
            ),
            Span::styled(
                format!("{} (pid {})", d.label, d.pid),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!(": {} -> {}", d.action, d.outcome)),
        ]),
        Line::raw(format!("    because {}", d.reason)),
    ]
}

fn draw_decisions(f: &mut Frame, app: &App, s: &TopState, area: Rect) {
    let title = format!(
        " decisions: last {} with their reasons, newest first | Tab: groups ",
        s.decisions.len()
    );
    let lines: Vec<Line> = if s.decisions.is_empty() {
        vec![Line::raw(format!(
            "{} has decided nothing yet",
            if s.policy.is_empty() {
                "the policy"
            } else {
                &s.policy
            }
        ))]
    } else {
        s.decisions.iter().rev().flat_map(decision_lines).collect()
    };
    let first = app.scroll.min(lines.len().saturating_sub(1));
    let text: Vec<Line> = lines.into_iter().skip(first).collect();
    f.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(title)),
        area,
    );
}
