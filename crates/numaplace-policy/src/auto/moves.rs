//! Moves of one group at a time, tried as experiments: numad's placement
//! ([`super::MEMORY_HOME`]), a gathering of threads ([`super::GATHER`]) and
//! DINO's layout of a lone group ([`super::DINO_LAYOUT`]); each round of a
//! trial under way ([`Auto::go_on`]) and the memory of kept moves still
//! following their threads ([`Auto::follow`]).

use std::collections::{BTreeMap, BTreeSet};

use numaplace_model::{Action, Decision, Plan, Snapshot};

use super::experiment::{Judgement, Verdict};
use super::rollback::{in_serve_order, share_on, undo_of};
use super::{ARRIVAL, Auto, DINO_LAYOUT, Experiment, LAYOUT, Move, percent};
use crate::View;

impl Auto {
    /// Once every group in scope has a baseline, starts an experiment of
    /// every move numad proposes that is not held back: tried together
    /// (numad would make them all at once), judged one by one.
    pub(super) fn try_moves(
        &mut self,
        view: &View<'_>,
        proposals: BTreeMap<i32, (&'static str, Vec<Decision>)>,
        plan: &mut Plan,
    ) {
        let s = view.snapshot;
        let n = self.judge.measure_rounds;
        let Some(baseline) = self.baseline(view, 0) else {
            return; // some group's baseline is not measured yet
        };
        let labels = view.labels();
        let mut moves = Vec::new();
        let number = self.experiments + 1;
        let earlier: String = self.verdicts.drain(..).map(|v| v + "; ").collect();
        for (pid, (kind, decisions)) in proposals {
            if !self.backoff.allows(pid, kind, s.seq) || decisions.is_empty() {
                continue;
            }
            let label = labels.get(&pid).cloned().unwrap_or_default();
            let before = baseline.get(&pid).copied().unwrap_or(0.0);
            for d in &decisions {
                plan.push(
                    d.action.clone(),
                    format!(
                        "auto: {earlier}experiment {number}: trying {kind} of {label} \
                         (now {before:.3e} instructions/s a thread, {} groups in scope judged over {n} \
                         rounds, kept above {}): {}",
                        baseline.len(),
                        percent(self.judge.margin),
                        d.reason
                    ),
                );
            }
            let (undo_home, undo) = undo_of(view.topology, s, &decisions);
            moves.push(Move {
                pid,
                kind,
                moved_memory: decisions.iter().any(|d| d.action.moves_memory()),
                undo_home,
                undo,
                memory_before: s
                    .group(pid)
                    .and_then(|g| g.memory_total())
                    .unwrap_or_default(),
                memory_to: decisions.iter().find_map(|d| match d.action {
                    Action::MoveMemory {
                        process, to_node, ..
                    } => Some((process, to_node)),
                    _ => None,
                }),
                label,
            });
        }
        if moves.is_empty() {
            if !earlier.is_empty() {
                // Kept verdicts wait for the next experiment's reasons.
                self.verdicts
                    .push(earlier.trim_end_matches("; ").to_string());
            }
            return;
        }
        self.experiments = number;
        self.trial = Some(Experiment::new(number, moves, baseline));
    }

    /// The rest of the memory of kept moves that had not all arrived when
    /// they were judged, moved while the threads stay on its node (at most
    /// `max_settle_rounds` rounds more); returns the processes whose
    /// memory is still following, not to be moved otherwise meanwhile.
    pub(super) fn follow(&mut self, view: &View<'_>, plan: &mut Plan) -> BTreeSet<i32> {
        let (t, s) = (view.topology, view.snapshot);
        let mut still = BTreeSet::new();
        self.following.retain_mut(|(process, node, number, left)| {
            let Some(g) = s.group(process.tid) else {
                return false;
            };
            let stays = t.node_by_os_id(*node).is_some_and(|n| {
                g.threads
                    .iter()
                    .filter_map(|&tid| s.task(tid))
                    .all(|x| x.allowed_cpus.is_subset(&n.span))
            });
            let there = share_on(s, process.tid, *node).unwrap_or(1.0);
            if !stays || there >= 0.9 || *left == 0 {
                return false;
            }
            *left -= 1;
            still.insert(process.tid);
            plan.push(
                Action::MoveMemory {
                    process: *process,
                    to_node: *node,
                    max_pages: None,
                },
                format!(
                    "auto: experiment {number} kept; the rest of its memory follows its threads \
                     to node {node} ({:.0} % there)",
                    100.0 * there
                ),
            );
            true
        });
        still
    }

    /// One round of the experiment under way: the moves' memory carried
    /// on while it settles, then the verdict on each move.
    pub(super) fn go_on(
        &mut self,
        view: &View<'_>,
        progress: &BTreeMap<i32, f64>,
        plan: &mut Plan,
    ) {
        let s = view.snapshot;
        let Some(mut e) = self.trial.take() else {
            return;
        };
        e.rounds += 1;
        e.moves.retain(|m| s.group(m.pid).is_some()); // exited: nothing to undo
        if let Some(k) = e.kernel.take() {
            self.go_on_kernel(s, e, k, progress, plan);
            return;
        }
        if e.moves.is_empty() {
            if e.layout.is_some() {
                // Every group it moved is gone: nothing judged, nothing to
                // undo but the pins of groups that came meanwhile.
                self.roll_back_layout(
                    view,
                    e,
                    "every group it moved ended before it was judged",
                    plan,
                );
            }
            return;
        }
        if self.carry_memory(s, &e, plan) {
            self.trial = Some(e);
            return;
        }
        match e.trial.observe(&self.judge, progress) {
            Verdict::Wait => self.trial = Some(e),
            Verdict::Judged(j) if e.layout.is_some() => self.judge_layout(view, e, &j, plan),
            Verdict::Judged(j) => self.judge_moves(s, e, &j, plan),
            Verdict::Unjudged => self.unjudged(view, e, plan),
        }
    }

    /// While a trial is young (at most `max_settle_rounds`), each move's
    /// memory still short of its node (the engine's rate limit spreads it
    /// over rounds) is moved on; returns whether any was: that is still
    /// settling, not yet the moved state.
    fn carry_memory(&self, s: &Snapshot, e: &Experiment, plan: &mut Plan) -> bool {
        // Still carrying a move out (memory at the rate limit): that is
        // settling, not yet the moved state. Its own move, to the node it
        // chose, whatever numad would choose now.
        let mut moving = false;
        if e.rounds <= self.params.max_settle_rounds {
            for m in in_serve_order(s, &e.moves) {
                let Some((process, node)) = m.memory_to else {
                    continue;
                };
                let there = share_on(s, process.tid, node).unwrap_or(1.0);
                if there < 0.9 {
                    moving = true;
                    plan.push(
                        Action::MoveMemory {
                            process,
                            to_node: node,
                            max_pages: None,
                        },
                        format!(
                            "auto: experiment {} ({} of {}), still moving its memory to node \
                             {node} ({:.0} % there)",
                            e.number,
                            m.kind,
                            m.label,
                            100.0 * there
                        ),
                    );
                }
            }
        }
        moving
    }

    /// The verdict on a layout's trial (DI-Migrate's or the model's):
    /// kept, kept on the model's word where groups came while it was
    /// measured, or rolled back.
    fn judge_layout(&mut self, view: &View<'_>, e: Experiment, j: &Judgement, plan: &mut Plan) {
        let s = view.snapshot;
        let margin = self.judge.margin;
        let numbers = format!(
            "the groups in scope together went {}, the {} moved {}{}, over {} rounds",
            percent(j.all),
            j.own.len(),
            percent(j.moved()),
            j.control
                .map(|c| format!(", those left alone {}", percent(c)))
                .unwrap_or_default(),
            self.judge.measure_rounds
        );
        if j.keeps_jointly(margin) && e.model {
            self.keep_model_layout(s, &e, numbers);
            self.history = e.trial.measured_history();
        } else if let Some(g) = self.judged_by_model_as_groups_came(view, &e, j) {
            // (A model layout that keeps went above: this one
            // would be undone.)
            let numbers = format!(
                "{numbers}, but groups came while it was measured and none was left \
                 unmoved to measure their load by, so the machine model, fitted to the \
                 rounds since, judged it: the placement before it would run the groups \
                 {} slower now (kept above {})",
                percent(g.exp_m1()),
                percent(self.model_threshold().exp_m1())
            );
            self.keep_model_layout(s, &e, numbers);
            self.history = e.trial.measured_history();
        } else if j.keeps_jointly(margin) {
            self.layout_kept = true;
            self.verdicts.push(format!(
                "experiment {} ({LAYOUT}) kept: {numbers}; DI-Migrate manages the \
                 machine from now on",
                e.number
            ));
            self.history = e.trial.measured_history();
        } else {
            if e.model {
                self.model_misses = (self.model_misses + 1).min(3);
            }
            let again =
                if j.control.is_none() && e.trial.groups_came() && !self.retried_after_arrival.0 {
                    self.retried_after_arrival.0 = true;
                    ARRIVAL.to_string()
                } else {
                    let wait = self.hold_layout(s.seq);
                    format!("not tried again for {wait} rounds")
                };
            let why = format!(
                "{numbers} (a layout is kept when the groups together gain more than \
                 {}); {again}",
                percent(margin)
            );
            self.roll_back_layout(view, e, &why, plan);
            self.history.clear();
        }
    }

    /// The verdict on moves of single groups: each kept or rolled back by
    /// its own group's change ([`Judgement::keeps`]).
    fn judge_moves(&mut self, s: &Snapshot, e: Experiment, j: &Judgement, plan: &mut Plan) {
        let number = e.number;
        let all_kept = e.moves.iter().all(|m| j.keeps(m.pid, self.judge.margin));
        for m in e.moves {
            let own = j.own.get(&m.pid).copied().unwrap_or(0.0);
            if j.keeps(m.pid, self.judge.margin) {
                // The move stays, and the group is not moved again
                // for a while; the next baseline starts from the
                // moved state. Said in the next experiment's
                // reasons.
                self.backoff
                    .hold(m.pid, m.kind, s.seq + self.judge.backoff_rounds);
                if m.kind == DINO_LAYOUT {
                    self.dino_kept.insert(m.pid);
                }
                if let Some((process, node)) = m.memory_to {
                    self.following
                        .push((process, node, number, self.params.max_settle_rounds));
                }
                self.verdicts.push(format!(
                    "experiment {number} ({} of {}) kept: it went {}, the groups in \
                     scope together {}, over {} rounds",
                    m.kind,
                    m.label,
                    percent(own),
                    percent(j.all),
                    self.judge.measure_rounds
                ));
            } else {
                let wait = self.backoff.rolled_back(&self.judge, m.pid, m.kind, s.seq);
                let why = format!(
                    "it went {}, the groups in scope together {}, over {} rounds (a move \
                     is kept when its group gains more than {} and the groups together \
                     do not lose); not tried on it again for {wait} rounds",
                    percent(own),
                    percent(j.all),
                    self.judge.measure_rounds,
                    percent(self.judge.margin)
                );
                self.roll_back(s, number, m, &why, plan);
            }
        }
        if all_kept {
            // Nothing undone: the rounds just measured are the
            // next experiment's baseline.
            self.history = e.trial.measured_history();
        } else {
            self.history.clear();
        }
    }

    /// A trial nothing judged (a group came or went and none was measured
    /// throughout): a model layout the model, fitted since, predicts
    /// better than the placement before it stays; anything else is undone
    /// as unproven and held back for the first back-off only.
    fn unjudged(&mut self, view: &View<'_>, e: Experiment, plan: &mut Plan) {
        let s = view.snapshot;
        // Nothing learnt about the moves themselves: held back for
        // the first back-off only, not counted as failures.
        let wait = self.judge.backoff_rounds;
        let why = format!(
            "a group came or went while it was measured and no group left unmoved was \
             measured throughout to judge the moves against; undone as unproven, tried \
             again after {wait} rounds"
        );
        let predicted = if e.model {
            self.counterfactual(view, &e.model_from)
        } else {
            None
        };
        if let Some(g) = predicted.filter(|&g| g > self.model_threshold()) {
            // No group was measured throughout, but the model,
            // fitted to the moved state, predicts the placement
            // before it slower: kept.
            let margin = self.model_threshold();
            self.keep_model_layout(
                s,
                &e,
                format!(
                    "a group came or went while it was measured and none was measured \
                     throughout, so the machine model, fitted to the rounds since, \
                     judged it: the placement before it would run the groups {} \
                     slower (kept above {})",
                    percent(g.exp_m1()),
                    percent(margin.exp_m1())
                ),
            );
            self.history = e.trial.measured_history();
            return;
        }
        if e.layout.is_some() {
            self.hold_layout_until(s.seq + wait);
            self.roll_back_layout(view, e, &why, plan);
            self.history.clear();
            return;
        }
        for m in e.moves {
            self.backoff.hold(m.pid, m.kind, s.seq + wait);
            self.roll_back(s, e.number, m, &why, plan);
        }
        self.history.clear();
    }
}
