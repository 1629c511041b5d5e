//! The view's state and what each key does to it.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use numaplace::top_state::{GroupRow, TopState};

/// The pane under the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pane {
    Groups,
    Decisions,
}

/// What the groups are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SortKey {
    Cpu,
    Memory,
    Threads,
    Pid,
    Name,
}

impl SortKey {
    pub(crate) fn name(self) -> &'static str {
        match self {
            SortKey::Cpu => "CPU",
            SortKey::Memory => "memory",
            SortKey::Threads => "threads",
            SortKey::Pid => "pid",
            SortKey::Name => "name",
        }
    }

    fn next(self) -> SortKey {
        match self {
            SortKey::Cpu => SortKey::Memory,
            SortKey::Memory => SortKey::Threads,
            SortKey::Threads => SortKey::Pid,
            SortKey::Pid => SortKey::Name,
            SortKey::Name => SortKey::Cpu,
        }
    }
}

/// What the operator chose: pane, order, pause, scroll.
#[derive(Debug, Clone)]
pub(crate) struct App {
    pub pane: Pane,
    pub sort: SortKey,
    /// Smallest first instead of largest first.
    pub reverse: bool,
    /// The frame frozen by a pause (`None`: live).
    pub frozen: Option<Option<TopState>>,
    /// First row shown of the pane.
    pub scroll: usize,
    pub quit: bool,
}

impl Default for App {
    fn default() -> Self {
        App {
            pane: Pane::Groups,
            sort: SortKey::Cpu,
            reverse: false,
            frozen: None,
            scroll: 0,
            quit: false,
        }
    }
}

/// The keys, for the footer and `--help`.
pub(crate) const KEYS: &str =
    "q quit  Tab/g/d pane  s sort  c m t p n sort by  r reverse  space pause  ↑↓ scroll";

impl App {
    /// What a key does; `live` is the latest frame (what a pause freezes).
    pub(crate) fn on_key(&mut self, key: KeyEvent, live: Option<&TopState>) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if ctrl => self.quit = true,
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Tab | KeyCode::BackTab => {
                self.pane = match self.pane {
                    Pane::Groups => Pane::Decisions,
                    Pane::Decisions => Pane::Groups,
                };
                self.scroll = 0;
            }
            KeyCode::Char('g') => self.show(Pane::Groups),
            KeyCode::Char('d') => self.show(Pane::Decisions),
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('c') => self.sort = SortKey::Cpu,
            KeyCode::Char('m') => self.sort = SortKey::Memory,
            KeyCode::Char('t') => self.sort = SortKey::Threads,
            KeyCode::Char('p') => self.sort = SortKey::Pid,
            KeyCode::Char('n') => self.sort = SortKey::Name,
            KeyCode::Char('r') => self.reverse = !self.reverse,
            KeyCode::Char(' ') => {
                self.frozen = match self.frozen {
                    Some(_) => None,
                    None => Some(live.cloned()),
                }
            }
            KeyCode::Down | KeyCode::Char('j') => self.scroll = self.scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_add(10),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Home => self.scroll = 0,
            _ => {}
        }
    }

    fn show(&mut self, pane: Pane) {
        if self.pane != pane {
            self.pane = pane;
            self.scroll = 0;
        }
    }

    /// The groups in the chosen order: largest first unless reversed; in
    /// scope before the others.
    pub(crate) fn sorted<'a>(&self, groups: &'a [GroupRow]) -> Vec<&'a GroupRow> {
        let mut v: Vec<&GroupRow> = groups.iter().collect();
        let mem = |g: &GroupRow| g.memory.as_ref().map_or(0, |m| m.values().sum::<u64>());
        v.sort_by(|a, b| {
            let largest_first = match self.sort {
                SortKey::Cpu => b
                    .busy_cpus
                    .unwrap_or(0.0)
                    .total_cmp(&a.busy_cpus.unwrap_or(0.0)),
                SortKey::Memory => mem(b).cmp(&mem(a)),
                SortKey::Threads => b.threads.cmp(&a.threads),
                // Pids and names read smallest first.
                SortKey::Pid => a.pid.cmp(&b.pid),
                SortKey::Name => a.label.cmp(&b.label),
            };
            let order = if self.reverse {
                largest_first.reverse()
            } else {
                largest_first
            };
            b.in_scope
                .cmp(&a.in_scope)
                .then(order)
                .then(a.pid.cmp(&b.pid))
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEventState;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent {
            code,
            modifiers: KeyModifiers::NONE,
            kind: KeyEventKind::Press,
            state: KeyEventState::NONE,
        }
    }

    fn group(pid: i32, label: &str, busy: f64, in_scope: bool) -> GroupRow {
        GroupRow {
            pid,
            label: label.into(),
            busy_cpus: Some(busy),
            in_scope,
            threads: pid as usize,
            ..GroupRow::default()
        }
    }

    #[test]
    fn keys_switch_panes_sort_pause_and_quit() {
        let mut app = App::default();
        let frame = TopState {
            round: 3,
            ..TopState::default()
        };
        app.on_key(key(KeyCode::Tab), Some(&frame));
        assert_eq!(app.pane, Pane::Decisions);
        app.on_key(key(KeyCode::Char('g')), Some(&frame));
        assert_eq!(app.pane, Pane::Groups);
        app.on_key(key(KeyCode::Char('s')), None);
        assert_eq!(app.sort, SortKey::Memory);
        app.on_key(key(KeyCode::Char('n')), None);
        assert_eq!(app.sort, SortKey::Name);
        app.on_key(key(KeyCode::Char(' ')), Some(&frame));
        assert_eq!(app.frozen.as_ref().unwrap().as_ref().unwrap().round, 3);
        app.on_key(key(KeyCode::Char(' ')), None);
        assert!(app.frozen.is_none());
        app.on_key(key(KeyCode::Up), None);
        assert_eq!(app.scroll, 0, "no scrolling above the top");
        assert!(!app.quit);
        let mut ctrl_c = key(KeyCode::Char('c'));
        ctrl_c.modifiers = KeyModifiers::CONTROL;
        app.on_key(ctrl_c, None);
        assert!(app.quit);
        let mut app = App::default();
        app.on_key(key(KeyCode::Char('q')), None);
        assert!(app.quit);
    }

    #[test]
    fn groups_in_scope_come_first_then_by_the_chosen_key() {
        let groups = [
            group(1, "b", 0.5, false),
            group(2, "a", 0.1, true),
            group(3, "c", 0.9, true),
        ];
        let mut app = App::default();
        let pids = |app: &App| {
            app.sorted(&groups)
                .iter()
                .map(|g| g.pid)
                .collect::<Vec<_>>()
        };
        assert_eq!(pids(&app), [3, 2, 1]);
        app.reverse = true;
        assert_eq!(pids(&app), [2, 3, 1]);
        app.reverse = false;
        app.sort = SortKey::Name;
        assert_eq!(pids(&app), [2, 3, 1]);
        app.sort = SortKey::Threads;
        assert_eq!(pids(&app), [3, 2, 1]);
    }
}
