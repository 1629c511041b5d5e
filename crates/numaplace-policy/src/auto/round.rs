//! The steps of one of `auto`'s rounds, in the order [`Auto`]'s `decide`
//! takes them: the groups noted, the seed policies asked, what is kept
//! carried on, the premises of single-group moves, then the experiment
//! under way or the next one (the layout, moves of single groups, the
//! kernel's balancing).

use std::collections::{BTreeMap, BTreeSet};

use numaplace_model::{Action, Decision, Plan};

use super::premise::{Premise, worth_bringing_together};
use super::rollback::away_from;
use super::{
    Auto, DINO_LAYOUT, GATHER, LAYOUT, MEMORY_HOME, SETTLED_AGE, SPECULATIVE_AGE, model_layout,
};
use crate::{Policy, View};

/// What the seed policies `auto` runs proposed this round.
pub(super) struct Asked {
    /// DI-Migrate's plan of the whole machine.
    pub(super) layout: Vec<Decision>,
    /// DI-Migrate's layout was under trial when the round began.
    pub(super) layout_trial: bool,
    /// DINO's plan, per group not already left to it.
    pub(super) dino: BTreeMap<i32, Vec<Decision>>,
    /// numad's placements, per group.
    pub(super) proposals: BTreeMap<i32, Vec<Decision>>,
}

/// Moves with a premise this round: per group, the kind of move and its
/// plan.
pub(super) type Kinds = BTreeMap<i32, (&'static str, Vec<Decision>)>;

impl Auto {
    /// Rounds a group must have run before it is moved
    /// ([`SETTLED_AGE`] measured rounds).
    pub(super) fn settled_after(&self) -> u64 {
        SETTLED_AGE * self.judge.measure_rounds as u64
    }

    /// Rounds since group `pid` was first seen (0 if never).
    pub(super) fn age(&self, seq: u64, pid: i32) -> u64 {
        self.first_seen
            .get(&pid)
            .map_or(0, |&f| seq.saturating_sub(f))
    }

    /// Notes the groups in scope this round: when each was first seen, each
    /// thread's first affinity, and the predictor's view of the round.
    pub(super) fn note_groups(&mut self, view: &View<'_>) {
        let s = view.snapshot;
        self.backoff.retain(|pid| s.group(pid).is_some());
        self.first_seen.retain(|pid, _| s.group(*pid).is_some());
        for &pid in view.managed {
            self.first_seen.entry(pid).or_insert(s.seq);
        }
        self.first_affinity
            .retain(|tid, (id, ..)| s.task(*tid).is_some_and(|x| x.id() == *id));
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            for x in g.threads.iter().filter_map(|&tid| s.task(tid)) {
                self.first_affinity
                    .entry(x.tid)
                    .or_insert_with(|| (x.id(), g.pid, x.allowed_cpus.clone()));
            }
        }
        self.predictor(view).observe(s);
    }

    /// Asks DI-Migrate, DINO and numad, every round (each keeps state that
    /// needs every round); the plans of a kept DI-Migrate layout and of
    /// groups left to DINO go into `plan` at once.
    pub(super) fn ask(&mut self, view: &View<'_>, plan: &mut Plan) -> Asked {
        let s = view.snapshot;
        // DI-Migrate is asked every round; its plan is acted on while its
        // layout is under trial or kept.
        let layout = self.layout.decide(view).decisions;
        let layout_trial = self
            .trial
            .as_ref()
            .is_some_and(|e| e.layout.is_some() && !e.model);
        if self.layout_kept {
            for d in &layout {
                plan.push(
                    d.action.clone(),
                    format!("auto ({LAYOUT} kept): {}", d.reason),
                );
            }
        }
        self.dino_kept.retain(|&pid| s.group(pid).is_some());
        let mut dino: BTreeMap<i32, Vec<Decision>> = BTreeMap::new();
        for d in self.dino.decide(view).decisions {
            let pid = d.action.pid();
            if self.dino_kept.contains(&pid) {
                // Its layout was kept: DINO goes on managing the group,
                // its pages following its threads.
                plan.push(
                    d.action,
                    format!("auto ({DINO_LAYOUT} kept for this group): {}", d.reason),
                );
            } else {
                dino.entry(pid).or_default().push(d);
            }
        }
        // numad is asked every round, about every group in scope.
        let mut proposals: BTreeMap<i32, Vec<Decision>> = BTreeMap::new();
        for d in self.numad.decide(view).decisions {
            proposals.entry(d.action.pid()).or_default().push(d);
        }
        Asked {
            layout,
            layout_trial,
            dino,
            proposals,
        }
    }

    /// A round under a kept layout, the model's or DI-Migrate's: the
    /// experiment under way goes on, or, the round measured, the model's
    /// layout is asked again now and then (threads that come are placed by
    /// it) and the kernel's balancing is tried the other way on the layout
    /// kept.
    pub(super) fn kept_round(
        &mut self,
        view: &View<'_>,
        following: &BTreeSet<i32>,
        plan: &mut Plan,
    ) {
        let Some(progress) = super::progress(view) else {
            return;
        };
        if self.trial.is_some() {
            self.go_on(view, &progress, plan);
            return;
        }
        self.history.push(&progress, self.judge.measure_rounds);
        let quiet = self.undoing.is_empty() && following.is_empty();
        if !self.layout_kept {
            self.model_kept_round(view, quiet, plan);
        }
        if quiet && self.trial.is_none() {
            self.maybe_try_kernel(view, plan);
        }
    }

    /// numad's proposals that have a premise ([`worth_bringing_together`]):
    /// its whole placement ([`MEMORY_HOME`]) or the threads first
    /// ([`GATHER`], only for groups that have run long). The move under
    /// trial goes on whatever it shows now; groups still starting up, or
    /// whose memory is still following a kept move, are left out.
    pub(super) fn premises(
        &self,
        view: &View<'_>,
        proposals: BTreeMap<i32, Vec<Decision>>,
        following: &BTreeSet<i32>,
    ) -> Kinds {
        let s = view.snapshot;
        let settled_after = self.settled_after();
        let long_lived = SPECULATIVE_AGE * self.judge.measure_rounds as u64;
        let under_trial: Vec<i32> = self
            .trial
            .as_ref()
            .filter(|e| e.layout.is_none())
            .map(|e| e.moves.iter().map(|m| m.pid).collect())
            .unwrap_or_default();
        let mut kinds = Kinds::new();
        for (pid, mut ds) in proposals {
            if under_trial.contains(&pid) {
                kinds.insert(pid, (MEMORY_HOME, ds));
                continue;
            }
            if following.contains(&pid)
                || self.dino_kept.contains(&pid)
                || self
                    .first_seen
                    .get(&pid)
                    .is_none_or(|&f| s.seq < f + settled_after)
            {
                continue; // its memory still following, or starting up
            }
            let (kind, why) = match worth_bringing_together(view, pid) {
                Ok(Premise::Whole(why)) => (MEMORY_HOME, why),
                Ok(Premise::ThreadsFirst(_)) if self.age(s.seq, pid) < long_lived => continue,
                Ok(Premise::ThreadsFirst(why)) => {
                    ds.retain(|d| matches!(d.action, Action::Pin { .. }));
                    (GATHER, why)
                }
                Err(_) => continue,
            };
            for d in &mut ds {
                d.reason = match kind {
                    GATHER => format!(
                        "the threads only, not yet the memory, of {}; {why}",
                        d.reason
                    ),
                    _ => format!("{} ({why})", d.reason),
                };
            }
            kinds.insert(pid, (kind, ds));
        }
        kinds
    }

    /// Nothing counted, nothing judged: numad's moves as they are, where
    /// their whole premise holds (a gathering is only worth it if
    /// measured).
    pub(super) fn without_counters(kinds: Kinds, mut plan: Plan) -> Plan {
        for d in kinds
            .into_values()
            .filter(|(k, _)| *k == MEMORY_HOME)
            .flat_map(|(_, ds)| ds)
        {
            plan.push(
                d.action,
                format!(
                    "auto ({MEMORY_HOME}, no experiment: instructions are not counted here): {}",
                    d.reason
                ),
            );
        }
        plan
    }

    /// DI-Migrate's plan `layout` while its layout, `under_trial` when the
    /// round began, is still under trial or kept now (not in the round it
    /// is rolled back in, whose pins undo it).
    pub(super) fn layout_goes_on(&self, layout: Vec<Decision>, under_trial: bool, plan: &mut Plan) {
        let how = if self.layout_kept {
            "kept"
        } else {
            "under trial"
        };
        if under_trial && (self.layout_kept || self.trial.is_some()) {
            for d in layout {
                plan.push(d.action, format!("auto ({LAYOUT} {how}): {}", d.reason));
            }
        }
    }

    /// The layout first, once there is a baseline of the groups past
    /// their start, with at least two groups and none left to DINO: the
    /// model's, or DI-Migrate's where the model says it pays; returns
    /// whether a trial started.
    ///
    /// It is where most is to gain (DI-Migrate's mean over generated mixes
    /// is the best of the seeds'), and the sooner it is in place the more
    /// of each group's memory is first touched where its threads run. With
    /// at least two groups: one group's threads alone are already spread
    /// by Linux's balancing, and a layout tried on a lone VM left its
    /// memory moved for numad's premise to hold late in its run (mix:1028,
    /// +9 % on one seed).
    pub(super) fn layout_step(
        &mut self,
        view: &View<'_>,
        layout: Vec<Decision>,
        plan: &mut Plan,
    ) -> bool {
        let s = view.snapshot;
        let held = s.seq < self.layout_held.1;
        let new_mix = held && self.came_since_held(s.seq);
        if (held && !new_mix) || self.first_seen.len() < 2 || !self.dino_kept.is_empty() {
            return false;
        }
        let ready = self
            .baseline(view, self.settled_after())
            .is_some_and(|b| !b.is_empty());
        match ready.then(|| self.choose_layout(view, &layout)) {
            Some(model_layout::Choice::Model(b)) => {
                let (fit, found) = *b;
                self.try_model_layout(view, &fit, &found, plan);
            }
            // During a hold only the model's layout is tried, once per mix.
            Some(_) if new_mix => {}
            Some(model_layout::Choice::Di) => self.try_layout(view, layout, plan),
            Some(model_layout::Choice::Nothing) => {
                // Asked again after the first back-off.
                self.hold_layout_until(s.seq + self.judge.backoff_rounds);
            }
            None => {}
        }
        if new_mix && ready {
            self.layout_held_for = self.first_seen.keys().copied().collect();
        }
        self.trial.is_some()
    }

    /// Whether groups came since the layout was held, every one of them
    /// past its start: what the trial that held it measured, or the model
    /// found, was another mix, so the model is asked about this one though
    /// the hold is not over (once per mix: [`Auto::layout_step`] notes the
    /// groups it asked about). mix:52027 (barcelona-4s): DI-Migrate's
    /// layout of 2 groups, rolled back in round 6 at +2.0 %, held every
    /// layout 30 rounds while three groups came in rounds 8 to 14; the
    /// model's layout of the 4 groups, predicted +52 % when the hold was
    /// over in round 36, came 5 s before the end of the run.
    fn came_since_held(&self, seq: u64) -> bool {
        let mut came = (self.first_seen.iter())
            .filter(|(pid, _)| !self.layout_held_for.contains(pid))
            .peekable();
        came.peek().is_some() && came.all(|(_, &f)| seq >= f + self.settled_after())
    }

    /// Moves of single groups: numad's placement or a gathering where its
    /// premise holds and its wait is over, DINO's layout of a lone group;
    /// each only where it can pay for what it copies and the model does not
    /// predict a clear loss.
    pub(super) fn moves_step(
        &mut self,
        view: &View<'_>,
        kinds: Kinds,
        dino: BTreeMap<i32, Vec<Decision>>,
        busy: &BTreeSet<i32>,
        following: &BTreeSet<i32>,
        plan: &mut Plan,
    ) {
        let s = view.snapshot;
        let settled_after = self.settled_after();
        let long_lived = SPECULATIVE_AGE * self.judge.measure_rounds as u64;
        let ready = |pid: &i32, kind: &'static str| {
            !busy.contains(pid)
                && !following.contains(pid)
                && self.backoff.allows(*pid, kind, s.seq)
        };
        let mut kinds: Kinds = kinds
            .into_iter()
            .filter(|(pid, (kind, _))| ready(pid, kind))
            .collect();
        let mut lone: Vec<(i32, Vec<Decision>)> = Vec::new();
        if self.first_seen.len() == 1 {
            // A lone group: DINO's layout of its threads, where numad's
            // placement has nothing to try once it has run long, or once
            // past its start where the model predicts it pays (a short run
            // is over before it has run long); where numad's placement has
            // a premise too, only where the model predicts DINO's clearly
            // better ([`Auto::predicts_better`]).
            lone = dino
                .into_iter()
                .filter(|(pid, ds)| {
                    ready(pid, DINO_LAYOUT)
                        && ds.iter().any(|d| matches!(d.action, Action::Pin { .. }))
                        && self.age(s.seq, *pid) >= settled_after
                        && kinds.get(pid).is_none_or(|(kind, _)| *kind == MEMORY_HOME)
                })
                .collect();
        }
        let had_premise: BTreeSet<i32> = kinds.keys().copied().collect();
        if !kinds.is_empty() || !lone.is_empty() {
            self.gate_moves(view, &mut kinds, &mut lone);
        }
        for (pid, ds) in lone {
            let dino_pays = match kinds.get(&pid) {
                Some((_, numad)) => {
                    let numad = numad.clone();
                    self.predicts_better(view, pid, &ds, Some(&numad))
                }
                // numad's placement had a premise and was left out.
                None if had_premise.contains(&pid) => self.predicts_better(view, pid, &ds, None),
                None => self.age(s.seq, pid) >= long_lived || self.predicts_it_pays(view, &ds),
            };
            if dino_pays {
                kinds.insert(pid, (DINO_LAYOUT, ds));
            }
        }
        self.try_moves(view, kinds, plan);
    }

    /// Leaves out the moves that cannot pay for what they copy, and
    /// numad's whole placements the model predicts a clear loss for.
    fn gate_moves(
        &mut self,
        view: &View<'_>,
        kinds: &mut Kinds,
        lone: &mut Vec<(i32, Vec<Decision>)>,
    ) {
        let s = view.snapshot;
        // Each of these moves is made for memory or a cache: not
        // tried where it cannot pay for what it copies.
        let mut copies: BTreeMap<i32, f64> = BTreeMap::new();
        for (pid, (kind, ds)) in kinds.iter() {
            let to = ds.iter().find_map(|d| match d.action {
                Action::MoveMemory { to_node, .. } if *kind == MEMORY_HOME => Some(to_node),
                _ => None,
            });
            copies.insert(*pid, to.map_or(0.0, |n| away_from(s, *pid, n)));
        }
        for (pid, _) in lone.iter() {
            copies.insert(*pid, 0.0);
        }
        let idle = self.cannot_pay(view, &copies);
        kinds.retain(|pid, _| !idle.contains_key(pid));
        lone.retain(|(pid, _)| !idle.contains_key(pid));
        // numad's whole placement only: a gathering of threads alone is
        // made for data they share, whose cache-line transfers the model
        // sees only as far as stores are sampled (mix:45037, 4 threads
        // sharing 206 KiB: gathered +36.6 %, where the model saw the
        // cores they would share).
        let plans = (kinds.iter())
            .filter(|(_, (kind, _))| *kind == MEMORY_HOME)
            .map(|(&pid, (_, ds))| (pid, ds.clone()))
            .collect();
        let losing = self.predicted_to_lose(view, &plans);
        kinds.retain(|pid, _| !losing.contains(pid));
    }
}
