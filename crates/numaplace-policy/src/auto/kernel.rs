//! `auto`'s trial of the kernel's automatic NUMA balancing turned the
//! other way ([`KERNEL`]): started once every group in scope has a
//! baseline, judged over every group together once the kernel has settled,
//! kept or put back, and tried again after a doubling wait.

use std::collections::{BTreeMap, BTreeSet};

use numaplace_model::{Action, Plan, Snapshot};

use super::experiment::Verdict;
use super::{
    ARRIVAL, Auto, Experiment, KERNEL, KERNEL_FOUND_WORK, KERNEL_MAX_SETTLE_ROUNDS,
    KERNEL_OFF_SETTLE_ROUNDS, KERNEL_ON_SETTLE_ROUNDS, KERNEL_STILL, KernelTrial, Move,
    SETTLED_AGE, percent,
};
use crate::View;

impl Auto {
    /// One round of a trial of the kernel's balancing turned from
    /// `before` to the other way: it waits out its settling
    /// ([`KERNEL_ON_SETTLE_ROUNDS`]), then is kept if the groups together
    /// went faster by more than the margin (turned off) or slower by no
    /// more than it (turned on), else the setting goes back.
    /// Kept or not, the other setting is tried again after a doubling
    /// wait. If the setting did not change (the engine did not carry the
    /// action out: the scope is not the whole machine, or it may not
    /// manage it), it is not tried again.
    pub(super) fn go_on_kernel(
        &mut self,
        s: &Snapshot,
        mut e: Experiment,
        mut k: KernelTrial,
        progress: &BTreeMap<i32, f64>,
        plan: &mut Plan,
    ) {
        let before = k.before;
        let word = |on: bool| if on { "on" } else { "off" };
        if s.machine.numa_balancing != Some(!before) {
            // Not carried out (the engine's journal says why), or changed
            // back by someone else: nothing to judge, and not auto's to
            // manage.
            self.kernel_held.1 = u64::MAX;
            self.history.clear();
            return;
        }
        if !e.moves.is_empty() && !e.trial.started() && !k.settled(s, &e) {
            e.kernel = Some(k);
            self.trial = Some(e);
            return;
        }
        let verdict = if e.moves.is_empty() {
            Verdict::Unjudged
        } else {
            e.trial.observe(&self.judge, progress)
        };
        if verdict == Verdict::Wait {
            e.kernel = Some(k);
            self.trial = Some(e);
            return;
        }
        // Turned on, it is kept unless the groups went slower by more than
        // the margin, if it moved memory while it settled; turned off,
        // only if they went faster by more than it. What the kernel's
        // balancing costs shows at once (a hinting fault on every page it
        // scans) and what it gains mostly later (the pages of a thread the
        // load balancer moves follow it, which a trial of a few rounds
        // rarely sees), so a trial that shows no loss says its cost is
        // small, and one that shows a gain of turning it off says nothing
        // of what is lost later. That holds only where the kernel found
        // memory to move while it settled: where it moved none, its faults
        // are all it brought (mix-186: 10 s, +1.7 % under `autonuma`, no
        // page moved), and it must pay like any move.
        let found_work = k.moved_share >= KERNEL_FOUND_WORK;
        let bar = if before || !found_work {
            self.judge.margin
        } else {
            -self.judge.margin
        };
        let retry = !self.retried_after_arrival.1
            && matches!(&verdict, Verdict::Judged(j)
                if !j.keeps_jointly(bar) && j.control.is_none() && e.trial.groups_came());
        let again = self.hold_kernel(s.seq, retry, word(!before));
        let undo = |why: String, plan: &mut Plan| {
            plan.push(
                Action::KernelBalancing { on: before },
                format!(
                    "auto: experiment {} ({KERNEL} {}) rolled back: {why}; it goes back {}, and \
                     {again}",
                    e.number,
                    word(!before),
                    word(before),
                ),
            );
        };
        let wait = self.kernel_held.1.saturating_sub(s.seq);
        match verdict {
            Verdict::Wait => {}
            Verdict::Judged(j) => {
                let numbers = format!(
                    "the groups in scope together went {}{}, over {} rounds",
                    percent(j.all),
                    j.control
                        .map(|c| format!(" (those measured throughout {})", percent(c)))
                        .unwrap_or_default(),
                    self.judge.measure_rounds
                );
                if j.keeps_jointly(bar) {
                    self.verdicts.push(format!(
                        "experiment {} ({KERNEL} {}) kept: {numbers}; {} is tried again in \
                         {wait} rounds",
                        e.number,
                        word(!before),
                        word(before)
                    ));
                    self.history = e.trial.measured_history();
                } else {
                    undo(
                        format!(
                            "{numbers} (kept when the groups together {} {}{})",
                            if bar > 0.0 {
                                "gain more than"
                            } else {
                                "lose no more than"
                            },
                            percent(self.judge.margin),
                            if !before && !found_work {
                                ": it moved no memory while it settled, so its hinting faults are \
                                 all it brought"
                            } else {
                                ""
                            }
                        ),
                        plan,
                    );
                    self.history.clear();
                }
            }
            Verdict::Unjudged if !before => {
                // Turned on, and no group was measured throughout to judge
                // it: it stays, and off is tried again after the wait,
                // judged. On is Linux's own default, and where it cannot
                // be judged it is the safer guess: over generated mixes the
                // kernel's balancing made runs up to 15 % faster (mix:14011,
                // mix:15009) and at most 3.5 % slower (mix:12001), and
                // much of what it gains is threads placed near their
                // memory, which the memory it moves does not show
                // (mix:14000: 6 % faster under `autonuma`, 0.1 % of its
                // pages moved).
                self.verdicts.push(format!(
                    "experiment {} ({KERNEL} on) kept unjudged: a group came or went while it \
                     was measured and none was measured throughout; it moved {:.1} % of the \
                     groups' memory while it settled; on is Linux's default and, unjudged, the \
                     safer guess; off is tried again in {wait} rounds",
                    e.number,
                    100.0 * k.moved_share
                ));
                self.history.clear();
            }
            Verdict::Unjudged => {
                undo(
                    "a group came or went while it was measured and none was measured \
                     throughout to judge it against"
                        .into(),
                    plan,
                );
                self.history.clear();
            }
        }
    }

    /// Notes a trial of the kernel's balancing ended at round `seq` and
    /// when the `other` setting is tried again: at once where the trial is
    /// to be `retried` ([`ARRIVAL`], once), else after a doubling wait;
    /// returns those words for the reason.
    fn hold_kernel(&mut self, seq: u64, retried: bool, other: &str) -> String {
        if retried {
            self.retried_after_arrival.1 = true;
            self.kernel_held.1 = seq;
            return ARRIVAL.to_string();
        }
        self.kernel_held.0 += 1;
        let wait = self.judge.backoff_after(self.kernel_held.0);
        self.kernel_held.1 = seq + wait;
        format!("{other} is tried again in {wait} rounds")
    }

    /// Starts a trial of the kernel's balancing the other way where the
    /// kernel has the setting and its wait is over. It comes after every
    /// other move: it is the slowest to settle and to judge, and a short
    /// run would spend its time on it before the moves that pay at once.
    pub(super) fn maybe_try_kernel(&mut self, view: &View<'_>, plan: &mut Plan) {
        let s = view.snapshot;
        let due = s.seq >= self.kernel_held.1;
        if let Some(now) = s.machine.numa_balancing.filter(|_| due) {
            self.try_kernel(view, now, plan);
        }
    }

    /// Starts a trial of the kernel's balancing turned the other way from
    /// `now`, once every group in scope past its start has a baseline:
    /// every group judged as one.
    fn try_kernel(&mut self, view: &View<'_>, now: bool, plan: &mut Plan) {
        let s = view.snapshot;
        let n = self.judge.measure_rounds;
        let Some(baseline) = self.baseline(view, SETTLED_AGE * n as u64) else {
            return;
        };
        if baseline.is_empty() {
            return;
        }
        if !now {
            // On brings threads and pages together: nothing to gain where
            // no group waits on memory.
            let none: BTreeMap<i32, f64> = baseline.keys().map(|&pid| (pid, 0.0)).collect();
            let idle = self.cannot_pay(view, &none);
            // Nor where each thread's memory is on its own node already
            // (first touch left it there and Linux kept the thread near):
            // the kernel would find nothing to move and charge a hinting
            // fault on every page it scans (mix:44016, two memory-bound
            // programs on nodes of their own: +3.7 % with it on).
            let local = self.local_memory_gains(view);
            let margin = self.judge.margin;
            let nothing =
                |pid: &i32| idle.contains_key(pid) || local.get(pid).is_some_and(|&g| g < margin);
            if baseline.keys().all(nothing) {
                self.kernel_held.1 = s.seq + self.judge.backoff_rounds;
                return;
            }
        }
        let number = self.experiments + 1;
        self.experiments = number;
        let earlier: String = self.verdicts.drain(..).map(|v| v + "; ").collect();
        let moves: Vec<Move> = s
            .groups
            .iter()
            .filter(|g| view.managed.contains(&g.pid))
            .map(|g| Move {
                pid: g.pid,
                label: String::new(),
                kind: KERNEL,
                moved_memory: false,
                undo_home: Vec::new(),
                undo: Vec::new(),
                memory_to: None,
                memory_before: BTreeMap::new(),
            })
            .collect();
        let on = !now;
        plan.push(
            Action::KernelBalancing { on },
            format!(
                "auto: {earlier}experiment {number}: trying the {KERNEL} {} (it is {} now), judged \
                 over the {} groups in scope together over {n} rounds once {}, kept above {}: {}",
                if on { "on" } else { "off" },
                if now { "on" } else { "off" },
                baseline.len(),
                if on {
                    "the kernel stops moving their memory"
                } else {
                    "a round has passed"
                },
                if on {
                    format!(
                        "{} if it moves memory meanwhile, else {}",
                        percent(-self.judge.margin),
                        percent(self.judge.margin)
                    )
                } else {
                    percent(self.judge.margin)
                },
                if on {
                    "the kernel moves pages toward the threads that touch them and threads toward \
                     their memory, at the cost of a hinting fault on each page it scans"
                } else {
                    "no more hinting faults, and pages and threads stay where they are"
                }
            ),
        );
        self.trial = Some(Experiment {
            kernel: Some(KernelTrial {
                before: now,
                memory_seen: BTreeMap::new(),
                still_rounds: 0,
                moved_share: 0.0,
            }),
            ..Experiment::new(number, moves, baseline)
        });
    }
}

impl KernelTrial {
    /// Whether the trial `e` has settled, this round's memory noted:
    /// turned off, after one round; turned on, once the kernel has placed
    /// the memory it is going to (it hardly moved for two rounds), or
    /// after [`KERNEL_MAX_SETTLE_ROUNDS`].
    fn settled(&mut self, s: &Snapshot, e: &Experiment) -> bool {
        self.note_memory(s, &e.moves);
        if self.before {
            e.rounds > KERNEL_OFF_SETTLE_ROUNDS
        } else {
            e.rounds > KERNEL_ON_SETTLE_ROUNDS && self.still_rounds >= 2
                || e.rounds > KERNEL_MAX_SETTLE_ROUNDS
        }
    }

    /// Notes the moved groups' memory per node this round: the share of
    /// it that changed node since the last round (added to
    /// [`KernelTrial::moved_share`]) and whether it hardly moved
    /// ([`KERNEL_STILL`], counted in [`KernelTrial::still_rounds`]).
    fn note_memory(&mut self, s: &Snapshot, moves: &[Move]) {
        let memory: BTreeMap<i32, BTreeMap<u32, u64>> = moves
            .iter()
            .filter_map(|m| Some((m.pid, s.group(m.pid)?.memory_total()?)))
            .collect();
        let (mut moved, mut total) = (0u64, 0u64);
        for (pid, now) in &memory {
            total += now.values().sum::<u64>();
            let was = self.memory_seen.get(pid);
            let nodes: BTreeSet<u32> = now
                .keys()
                .chain(was.into_iter().flat_map(|w| w.keys()))
                .copied()
                .collect();
            // Pages that changed node: what some nodes gained and
            // others lost (a process that only grew or shrank moved
            // nothing).
            let (mut gained, mut lost) = (0u64, 0u64);
            for n in &nodes {
                let a = now.get(n).copied().unwrap_or(0);
                let b = was.and_then(|w| w.get(n)).copied().unwrap_or(0);
                gained += a.saturating_sub(b);
                lost += b.saturating_sub(a);
            }
            moved += gained.min(lost);
        }
        let still = total > 0 && (moved as f64) < KERNEL_STILL * total as f64;
        if !self.memory_seen.is_empty() && total > 0 {
            self.moved_share += moved as f64 / total as f64;
        }
        self.still_rounds = if still && !self.memory_seen.is_empty() {
            self.still_rounds + 1
        } else {
            0
        };
        self.memory_seen = memory;
    }
}
