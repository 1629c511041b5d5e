//! DI-Migrate's layout of the whole machine ([`super::LAYOUT`]) tried as
//! one experiment over every group.

use numaplace_model::{Action, Decision, Plan};

use super::rollback::layout_before;
use super::{Auto, Experiment, LAYOUT, Move, SETTLED_AGE, percent};
use crate::View;

impl Auto {
    /// Starts a trial of DI-Migrate's layout of the whole machine, once
    /// every group in scope has a baseline: its plan this round, for every
    /// group, judged as one.
    pub(super) fn try_layout(
        &mut self,
        view: &View<'_>,
        decisions: Vec<Decision>,
        plan: &mut Plan,
    ) {
        let s = view.snapshot;
        let n = self.judge.measure_rounds;
        // Judged by the groups past their start (a group starting up runs
        // slower than it will, so its baseline would make any layout look
        // good: one kept so on mix:1030 went on costing 4 %); the younger
        // ones are laid out too, and judged by no one.
        let Some(baseline) = self.baseline(view, SETTLED_AGE * n as u64) else {
            return;
        };
        if baseline.is_empty()
            || !decisions
                .iter()
                .any(|d| matches!(d.action, Action::Pin { .. }))
        {
            return;
        }
        let number = self.experiments + 1;
        self.experiments = number;
        let earlier: String = self.verdicts.drain(..).map(|v| v + "; ").collect();
        let before = layout_before(view);
        let mut moves = Vec::new();
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            moves.push(Move {
                pid: g.pid,
                label: String::new(),
                kind: LAYOUT,
                moved_memory: true,
                undo_home: Vec::new(),
                undo: Vec::new(),
                memory_to: None,
                memory_before: g.memory_total().unwrap_or_default(),
            });
        }
        let groups = baseline.len();
        for d in decisions {
            plan.push(
                d.action,
                format!(
                    "auto: {earlier}experiment {number}: trying {LAYOUT} of the {groups} groups in \
                     scope, judged together over {n} rounds, kept above {}: {}",
                    percent(self.judge.margin),
                    d.reason
                ),
            );
        }
        self.trial = Some(Experiment {
            layout: Some(before),
            ..Experiment::new(number, moves, baseline)
        });
    }
}
