//! Every change `auto` makes is an experiment: the progress of the group
//! it moved and of every other group in scope is measured before the
//! change and again after it has settled, and the change is kept only if
//! the groups, taken together, went faster by more than a noise margin.
//! Otherwise it is rolled back, and that kind of change is not tried on
//! that group again for a while (doubling with every rollback).
//!
//! Progress is a group's instructions retired per second (its threads'
//! summed counters over the round's interval); "together" is the mean of
//! the logarithms of each group's after / before ratio, so a group that
//! gained 10 % and one that lost 10 % cancel out whatever their sizes,
//! and a change that speeds one group up by slowing its neighbours down is
//! not kept.

use std::collections::{BTreeMap, HashMap, VecDeque};

/// How changes are judged.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeParams {
    /// Rounds of a group's progress that make its baseline, and that are
    /// measured after a change.
    pub measure_rounds: usize,
    /// Rounds after a change that are not measured: pages and caches
    /// moving, the scheduler settling.
    pub settle_rounds: usize,
    /// A change is kept only if the groups' mean progress rose by more
    /// than this fraction: noise within it keeps nothing.
    pub margin: f64,
    /// Rounds a kind of change waits on a group after its first rollback;
    /// doubled after each further one.
    pub backoff_rounds: u64,
    /// The longest back-off, rounds.
    pub max_backoff_rounds: u64,
}

impl Default for JudgeParams {
    fn default() -> Self {
        JudgeParams {
            measure_rounds: 2,
            settle_rounds: 1,
            margin: 0.02,
            backoff_rounds: 30,
            max_backoff_rounds: 480,
        }
    }
}

impl JudgeParams {
    /// The rounds a change waits after its `rollbacks`-th rollback (at
    /// least 1): `backoff_rounds` doubled after each rollback but the
    /// first, at most `max_backoff_rounds`.
    pub fn backoff_after(&self, rollbacks: u32) -> u64 {
        self.backoff_rounds
            .saturating_mul(1 << (rollbacks.max(1) - 1).min(20))
            .min(self.max_backoff_rounds)
    }
}

/// exp(mean of ln(ratio)) - 1 over `ratios` (after / before, each
/// positive): groups' changes taken together so that +10 % and -10 %
/// cancel whatever the groups' sizes; 0 if there are none.
fn together(ratios: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for r in ratios {
        sum += r.ln();
        n += 1;
    }
    if n == 0 {
        return 0.0;
    }
    (sum / n as f64).exp() - 1.0
}

/// The last rounds' progress of every group, the baseline of the next
/// experiment.
#[derive(Debug, Default)]
pub struct History {
    rounds: HashMap<i32, VecDeque<f64>>,
}

impl History {
    /// Adds a round's progress per group (pid -> instructions per second).
    /// When a group came or went, every past round is forgotten: the
    /// others' progress before that was measured on another machine load.
    pub fn push(&mut self, progress: &BTreeMap<i32, f64>, keep: usize) {
        let same = self.rounds.len() == progress.len()
            && progress.keys().all(|pid| self.rounds.contains_key(pid));
        if !same {
            self.rounds.clear();
        }
        for (&pid, &p) in progress {
            let h = self.rounds.entry(pid).or_default();
            h.push_back(p);
            while h.len() > keep {
                h.pop_front();
            }
        }
    }

    /// The mean of the last `n` rounds of `pid`, once there are `n`.
    pub fn mean(&self, pid: i32, n: usize) -> Option<f64> {
        let h = self.rounds.get(&pid)?;
        (h.len() >= n && n > 0).then(|| h.iter().rev().take(n).sum::<f64>() / n as f64)
    }

    /// Forgets every group's past: after a change, the rounds before it no
    /// longer describe the machine.
    pub fn clear(&mut self) {
        self.rounds.clear();
    }
}

/// What the judge says of changes under trial.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Still settling or measuring.
    Wait,
    /// Measured: see [`Judgement::keeps`].
    Judged(Judgement),
    /// A group came or went during the trial and no group left unmoved
    /// was measured throughout to tell the machine's change from the
    /// moves': undo them, as nothing shows they helped.
    Unjudged,
}

/// The measured changes of a trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    /// Each moved group's own change (a fraction, e.g. 0.07).
    pub own: BTreeMap<i32, f64>,
    /// The groups in scope together, the moved ones included.
    pub all: f64,
    /// When groups came or went during the trial: the change of the groups
    /// left unmoved that were measured throughout (the machine's own
    /// change, which the moved groups' changes are judged against).
    pub control: Option<f64>,
    /// A group measured in the baseline went during the trial (its CPUs
    /// and memory bandwidth freed for the others): the others' gains are
    /// then partly its going.
    pub departed: bool,
}

impl Judgement {
    /// A moved group's change is kept when the group went faster by more
    /// than the margin and the groups together did not go slower: judged
    /// over all groups alone, one group's gain among many would drown in
    /// the mean; judged alone, a gain its neighbours paid for would be
    /// kept.
    ///
    /// When groups came or went, every group's progress changed with the
    /// machine's load: a moved group is then judged against the unmoved
    /// ones (its change over theirs must exceed the margin), and the
    /// neighbours' change cannot be told from the load's. It must still
    /// have gone faster itself: the unmoved groups' progress is a poor
    /// control when one of them changed phase (a compute phase turning
    /// into a memory-bound one makes a moved group's loss look like a
    /// gain beside it), and a change that left its own group slower is
    /// no gain whatever the others did.
    pub fn keeps(&self, pid: i32, margin: f64) -> bool {
        let Some(&own) = self.own.get(&pid) else {
            return false;
        };
        match self.control {
            None => own > margin && self.all > 0.0,
            Some(c) => own > margin && (1.0 + own) / (1.0 + c) - 1.0 > margin,
        }
    }
}

impl Judgement {
    /// The moved groups' change taken together (the same mean of
    /// logarithms as [`Judgement::all`]); 0 if none was measured.
    pub fn moved(&self) -> f64 {
        together(self.own.values().map(|g| (1.0 + g).max(1e-9)))
    }

    /// Moves made as one layout of several groups are kept or rolled back
    /// together: a layout's gain is the machine's (each group's
    /// contention eased a little by where the others went), so judged one
    /// by one most of its groups would show gains within the noise and be
    /// rolled back, taking the layout apart. Kept when the groups in scope
    /// together went faster by more than the margin; when groups came or
    /// went, when the moved ones together did, and by more than the
    /// unmoved ones (the control). Groups that only came during the trial
    /// added load, so the groups' own gain over their baseline understates
    /// the layout's, and is what is judged: the unmoved groups gain from a
    /// layout too (the contention it eased was theirs as well), so judged
    /// against them a layout would be rolled back whenever a group came.
    pub fn keeps_jointly(&self, margin: f64) -> bool {
        match self.control {
            None => self.all > margin,
            Some(_) if !self.departed => self.all > margin,
            Some(c) => {
                let moved = self.moved();
                moved > margin && (1.0 + moved) / (1.0 + c) - 1.0 > margin
            }
        }
    }
}

/// A loss beyond which one measured round is enough to roll a move back:
/// several times the noise margin and the round-to-round noise of a
/// group's progress.
const CLEARLY_WORSE: f64 = 0.10;

/// Changes under trial: every group's baseline, and its progress since.
#[derive(Debug, Clone)]
pub struct Trial {
    /// The groups changed.
    moved: Vec<i32>,
    baseline: BTreeMap<i32, f64>,
    rounds: usize,
    after: BTreeMap<i32, Vec<f64>>,
    /// Rounds measured so far.
    measured: usize,
    /// A group came or went since the baseline.
    changed: bool,
    /// A group of the baseline went (ended or left scope) since.
    departed: bool,
}

impl Trial {
    /// A trial of changes to the groups `moved` against `baseline` (pid
    /// -> mean instructions per second before the change), which names
    /// every group it judges.
    pub fn new(moved: Vec<i32>, baseline: BTreeMap<i32, f64>) -> Trial {
        Trial {
            moved,
            baseline,
            rounds: 0,
            after: BTreeMap::new(),
            measured: 0,
            changed: false,
            departed: false,
        }
    }

    /// Whether groups came since the change and none went: what was
    /// measured after it carries their load, which the baseline did not.
    pub fn groups_came(&self) -> bool {
        self.changed && !self.departed
    }

    /// Whether a round after the change was observed.
    pub fn started(&self) -> bool {
        self.rounds > 0
    }

    /// One more round after the change.
    pub fn observe(&mut self, params: &JudgeParams, progress: &BTreeMap<i32, f64>) -> Verdict {
        self.rounds += 1;
        let same = self.baseline.len() == progress.len()
            && progress.keys().all(|pid| self.baseline.contains_key(pid));
        self.changed |= !same;
        self.departed |= self.baseline.keys().any(|pid| !progress.contains_key(pid));
        if self.rounds <= params.settle_rounds {
            return Verdict::Wait;
        }
        self.measured += 1;
        for (pid, p) in progress {
            if self.baseline.contains_key(pid) {
                self.after.entry(*pid).or_default().push(*p);
            }
        }
        // Every moved group clearly slower after its first measured round:
        // judged at once, as the remaining rounds would only cost more (a
        // gain hides behind no such loss: the move is in place, its pages
        // moved, before a round is measured).
        let clearly_worse = self.moved.iter().all(|&pid| {
            self.after.contains_key(&pid) && self.gain_of(|p| p == pid) < -CLEARLY_WORSE
        });
        if self.rounds < params.settle_rounds + params.measure_rounds && !clearly_worse {
            return Verdict::Wait;
        }
        let own = self
            .moved
            .iter()
            .filter(|pid| self.after.contains_key(*pid))
            .map(|&pid| (pid, self.gain_of(|p| p == pid)))
            .collect();
        let control = if self.changed {
            // Unmoved groups measured in every round since the change.
            let steady = |p: i32| {
                !self.moved.contains(&p)
                    && self.after.get(&p).is_some_and(|a| a.len() == self.measured)
            };
            if !self.baseline.keys().any(|&p| steady(p)) {
                if self.departed {
                    return Verdict::Unjudged;
                }
                // Groups only came: they added load, so the groups'
                // gain over their baseline understates the moves'; it is
                // judged as it is.
                None
            } else {
                Some(self.gain_of(steady))
            }
        } else {
            None
        };
        Verdict::Judged(Judgement {
            own,
            all: self.gain_of(|_| true),
            control,
            departed: self.departed,
        })
    }

    /// The rounds measured since the change, as a history: the baseline
    /// of the next trial when every change is kept (the machine measured
    /// is then the one the next change starts from). Groups not measured
    /// in every round are left out.
    pub fn measured_history(&self) -> History {
        let mut h = History::default();
        for (&pid, rounds) in &self.after {
            if rounds.len() == self.measured {
                h.rounds.insert(pid, rounds.iter().copied().collect());
            }
        }
        h
    }

    /// exp(mean of ln(after / before)) - 1 over the groups measured both
    /// before and after that `which` takes; 0 if none.
    pub fn gain_of(&self, which: impl Fn(i32) -> bool) -> f64 {
        together(
            self.baseline
                .iter()
                .filter(|(pid, b)| **b > 0.0 && which(**pid))
                .filter_map(|(pid, b)| {
                    let a = self.after.get(pid)?;
                    let mean = a.iter().sum::<f64>() / a.len().max(1) as f64;
                    (mean > 0.0).then(|| mean / b)
                }),
        )
    }
}

/// Rollbacks per group and kind of change, and when that kind may be
/// tried on that group again.
#[derive(Debug, Default)]
pub struct Backoff {
    held: HashMap<(i32, &'static str), (u32, u64)>,
}

impl Backoff {
    /// Notes a rollback at `round`: the next try waits backoff_rounds ·
    /// 2^(n-1) rounds (at most max_backoff_rounds) after n rollbacks.
    /// Returns the wait.
    pub fn rolled_back(
        &mut self,
        params: &JudgeParams,
        pid: i32,
        kind: &'static str,
        round: u64,
    ) -> u64 {
        let e = self.held.entry((pid, kind)).or_insert((0, 0));
        e.0 += 1;
        let wait = params.backoff_after(e.0);
        e.1 = round + wait;
        wait
    }

    /// Holds `kind` on `pid` until `until` without counting a rollback
    /// (a move just kept is not tried again at once).
    pub fn hold(&mut self, pid: i32, kind: &'static str, until: u64) {
        let e = self.held.entry((pid, kind)).or_insert((0, 0));
        e.1 = e.1.max(until);
    }

    /// The round until which `kind` is held on `pid`, if ever it was.
    pub fn until(&self, pid: i32, kind: &'static str) -> Option<u64> {
        self.held.get(&(pid, kind)).map(|&(_, until)| until)
    }

    /// Whether `kind` may be tried on `pid` at `round`.
    pub fn allows(&self, pid: i32, kind: &'static str, round: u64) -> bool {
        self.held
            .get(&(pid, kind))
            .is_none_or(|&(_, until)| round >= until)
    }

    /// Forgets groups that are gone.
    pub fn retain(&mut self, alive: impl Fn(i32) -> bool) {
        self.held.retain(|(pid, _), _| alive(*pid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(v: &[(i32, f64)]) -> BTreeMap<i32, f64> {
        v.iter().copied().collect()
    }

    /// What the tests check of a verdict on group 1's change.
    #[derive(Debug, PartialEq)]
    enum Verdict1 {
        Keep { own: f64, all: f64 },
        RollBack { own: f64, all: f64 },
        Unjudged,
    }

    /// Runs a trial of a change to group 1 whose rounds give the groups
    /// these rates, until it decides; returns the verdict and the rounds
    /// it took.
    fn judge(baseline: &[(i32, f64)], after: &[(i32, f64)]) -> (Verdict1, usize) {
        let p = JudgeParams::default();
        let mut t = Trial::new(vec![1], progress(baseline));
        for round in 1..=100 {
            match t.observe(&p, &progress(after)) {
                Verdict::Wait => {}
                Verdict::Unjudged => return (Verdict1::Unjudged, round),
                Verdict::Judged(j) => {
                    let (own, all) = (j.own[&1], j.all);
                    let v = if j.keeps(1, p.margin) {
                        Verdict1::Keep { own, all }
                    } else {
                        Verdict1::RollBack { own, all }
                    };
                    return (v, round);
                }
            }
        }
        panic!("no verdict in 100 rounds");
    }

    #[test]
    fn a_change_that_slows_the_group_is_rolled_back_within_settle_plus_measure_rounds() {
        let p = JudgeParams::default();
        let (v, rounds) = judge(&[(1, 1e9), (2, 2e9)], &[(1, 0.95e9), (2, 2e9)]);
        assert!(
            matches!(v, Verdict1::RollBack { own, .. } if own < -0.04),
            "{v:?}"
        );
        assert_eq!(rounds, p.settle_rounds + p.measure_rounds);
        // A clear loss is rolled back after its first measured round.
        let (v, rounds) = judge(&[(1, 1e9), (2, 2e9)], &[(1, 0.8e9), (2, 2e9)]);
        assert!(
            matches!(v, Verdict1::RollBack { own, .. } if own < -0.15),
            "{v:?}"
        );
        assert_eq!(rounds, p.settle_rounds + 1);
    }

    #[test]
    fn a_change_that_helps_is_kept() {
        let (v, _) = judge(&[(1, 1e9), (2, 2e9)], &[(1, 1.3e9), (2, 2e9)]);
        match v {
            Verdict1::Keep { own, all } => {
                assert!((own - 0.3).abs() < 1e-9);
                assert!((all - (1.3f64.sqrt() - 1.0)).abs() < 1e-9);
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn noise_within_the_margin_keeps_nothing() {
        let (v, _) = judge(&[(1, 1e9), (2, 2e9)], &[(1, 1.015e9), (2, 2.01e9)]);
        assert!(matches!(v, Verdict1::RollBack { .. }), "{v:?}");
    }

    /// Among many groups, one group's gain is judged as that group's:
    /// +10 % for the moved one of ten is kept while the others hold.
    #[test]
    fn one_group_gaining_among_many_is_kept() {
        let before: Vec<(i32, f64)> = (1..=10).map(|p| (p, 1e9)).collect();
        let mut after = before.clone();
        after[0].1 = 1.1e9;
        after[5].1 = 0.995e9;
        let (v, _) = judge(&before, &after);
        assert!(
            matches!(v, Verdict1::Keep { own, .. } if (own - 0.1).abs() < 1e-9),
            "{v:?}"
        );
    }

    /// Two groups moved at once are judged each by its own change: the
    /// one that gained is kept, the one that lost is not.
    #[test]
    fn moves_tried_together_are_judged_one_by_one() {
        let p = JudgeParams::default();
        let before = progress(&[(1, 1e9), (2, 1e9), (3, 1e9)]);
        let mut t = Trial::new(vec![1, 2], before);
        let after = progress(&[(1, 1.2e9), (2, 0.97e9), (3, 1e9)]);
        let mut v = Verdict::Wait;
        while v == Verdict::Wait {
            v = t.observe(&p, &after);
        }
        let Verdict::Judged(j) = v else {
            panic!("{v:?}")
        };
        assert!(j.keeps(1, p.margin) && !j.keeps(2, p.margin), "{j:?}");
    }

    #[test]
    fn a_gain_paid_for_by_the_neighbours_is_not_kept() {
        // The moved group +20 %, its neighbour -20 %: no better overall.
        let (v, _) = judge(&[(1, 1e9), (2, 1e9)], &[(1, 1.2e9), (2, 0.8e9)]);
        assert!(matches!(v, Verdict1::RollBack { .. }), "{v:?}");
    }

    #[test]
    fn settling_rounds_are_not_measured() {
        let p = JudgeParams::default();
        let mut t = Trial::new(vec![1], progress(&[(1, 1e9)]));
        // The round right after the move is slow (pages moving): ignored.
        assert_eq!(t.observe(&p, &progress(&[(1, 0.1e9)])), Verdict::Wait);
        let mut v = Verdict::Wait;
        for _ in 0..p.measure_rounds {
            v = t.observe(&p, &progress(&[(1, 1.1e9)]));
        }
        assert!(
            matches!(&v, Verdict::Judged(j) if j.keeps(1, p.margin)),
            "{v:?}"
        );
    }

    #[test]
    fn when_a_group_exits_the_moved_one_is_judged_against_the_unmoved() {
        // Group 3 exits: the machine is freer, so group 2 (unmoved) goes
        // 20 % faster, and group 1 as much: the move did nothing.
        let (v, _) = judge(&[(1, 1e9), (2, 1e9), (3, 1e9)], &[(1, 1.2e9), (2, 1.2e9)]);
        assert!(matches!(v, Verdict1::RollBack { .. }), "{v:?}");
        // Group 1 went 50 % faster, the unmoved one 20 %: the move helped.
        let (v, _) = judge(&[(1, 1e9), (2, 1e9), (3, 1e9)], &[(1, 1.5e9), (2, 1.2e9)]);
        assert!(matches!(v, Verdict1::Keep { .. }), "{v:?}");
        // Group 1 went 60 % slower, while the unmoved group 2 (a new,
        // memory-bound phase) went 70 % slower: a loss, not a gain.
        let (v, _) = judge(&[(1, 1e9), (2, 1e9), (3, 1e9)], &[(1, 0.4e9), (2, 0.3e9)]);
        assert!(matches!(v, Verdict1::RollBack { .. }), "{v:?}");
        // No unmoved group measured throughout: nothing to judge against.
        let (v, _) = judge(&[(1, 1e9), (2, 1e9)], &[(1, 1.3e9)]);
        assert_eq!(v, Verdict1::Unjudged);
        // A group only came (group 3): it added load, so group 1's gain
        // over its own baseline is judged as it is.
        let (v, _) = judge(&[(1, 1e9)], &[(1, 1.3e9), (3, 1e9)]);
        assert!(matches!(v, Verdict1::Keep { .. }), "{v:?}");
        let (v, _) = judge(&[(1, 1e9)], &[(1, 0.9e9), (3, 1e9)]);
        assert!(matches!(v, Verdict1::RollBack { .. }), "{v:?}");
    }

    #[test]
    fn a_trial_says_when_groups_only_came() {
        let p = JudgeParams::default();
        let base = BTreeMap::from([(1, 1e9)]);
        let mut t = Trial::new(vec![1], base.clone());
        t.observe(&p, &BTreeMap::from([(1, 1e9)]));
        assert!(!t.groups_came());
        t.observe(&p, &BTreeMap::from([(1, 0.5e9), (3, 1e9)]));
        assert!(t.groups_came(), "group 3 came");
        // One that went as well: not only came.
        let mut t = Trial::new(vec![1], BTreeMap::from([(1, 1e9), (2, 1e9)]));
        t.observe(&p, &BTreeMap::from([(1, 1e9), (3, 1e9)]));
        assert!(!t.groups_came(), "group 2 went");
    }

    fn judgement(own: &[(i32, f64)], all: f64, control: Option<f64>, departed: bool) -> Judgement {
        Judgement {
            own: own.iter().copied().collect(),
            all,
            control,
            departed,
        }
    }

    #[test]
    fn a_layout_is_judged_as_one_by_the_groups_together() {
        let m = JudgeParams::default().margin;
        // Most groups within the noise, one much faster: the machine
        // gained, so the layout stays, though one by one most would go.
        let j = judgement(&[(1, 0.01), (2, -0.01), (3, 0.30)], 0.09, None, false);
        assert!(j.keeps_jointly(m));
        assert!(!j.keeps(1, m) && !j.keeps(2, m));
        // Together within the margin: not kept.
        let j = judgement(&[(1, 0.03), (2, -0.02)], 0.005, None, false);
        assert!(!j.keeps_jointly(m));
        // Groups only came: the gain over the baseline is judged as it is,
        // not against unmoved groups that gained from the layout too.
        let j = judgement(&[(1, 0.06), (2, 0.05)], 0.05, Some(0.05), false);
        assert!(j.keeps_jointly(m));
        // A group went: the moved ones must beat the unmoved ones.
        let j = judgement(&[(1, 0.06), (2, 0.05)], 0.05, Some(0.05), true);
        assert!(!j.keeps_jointly(m));
        let j = judgement(&[(1, 0.20), (2, 0.15)], 0.12, Some(0.02), true);
        assert!(j.keeps_jointly(m));
    }

    #[test]
    fn backoff_doubles_per_rollback_up_to_its_ceiling() {
        let p = JudgeParams::default();
        let mut b = Backoff::default();
        assert!(b.allows(7, "memory-home", 0));
        let waits: Vec<u64> = (0..6)
            .map(|_| b.rolled_back(&p, 7, "memory-home", 100))
            .collect();
        assert_eq!(waits, vec![30, 60, 120, 240, 480, 480]);
        assert!(!b.allows(7, "memory-home", 579));
        assert!(b.allows(7, "memory-home", 580));
        assert!(
            b.allows(7, "spread", 101),
            "another kind of change is not held"
        );
        assert!(b.allows(8, "memory-home", 101), "nor another group");
    }

    #[test]
    fn history_gives_a_baseline_once_it_has_enough_rounds() {
        let mut h = History::default();
        h.push(&progress(&[(1, 1.0), (2, 5.0)]), 3);
        assert_eq!(h.mean(1, 2), None);
        h.push(&progress(&[(1, 3.0), (2, 5.0)]), 3);
        assert_eq!(h.mean(1, 2), Some(2.0));
        h.push(&progress(&[(1, 4.0)]), 3);
        assert_eq!(
            h.mean(2, 1),
            None,
            "a group missing from a round is forgotten"
        );
        assert_eq!(
            (h.mean(1, 1), h.mean(1, 2)),
            (Some(4.0), None),
            "and the rounds before it, measured with another load, too"
        );
        for x in [5.0, 7.0, 9.0] {
            h.push(&progress(&[(1, x)]), 3);
        }
        assert_eq!(h.mean(1, 3), Some(7.0), "only the last rounds count");
    }
}
