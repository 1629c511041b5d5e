//! `auto` predicts before it tries (issue 31): before a layout of the whole
//! machine is tried, the machine model ([`super::predict`]) fitted to the
//! round's measurements says what DI-Migrate's layout and the best layout
//! its own search finds would each bring; the better one is tried, as an
//! experiment judged like any layout, only when the model says it pays
//! more than [`MODEL_MARGINS`] judging margins. A kept model layout keeps its pins;
//! threads that come later are placed where the model predicts best,
//! without an experiment (as `numad -w` places a VM that starts), and the
//! model is asked again every `backoff-rounds`.

use std::collections::{BTreeMap, BTreeSet};

use numaplace_model::{Action, CpuSet, Decision, Plan, Snapshot, Task};

use super::experiment::Judgement;
use super::predict::{Fit, Layout, Memory, Predictor};
use super::rollback::{in_serve_order, layout_before, share_on};
use super::{Auto, Experiment, MODEL_LAYOUT, Move, SETTLED_AGE, percent};
use crate::View;

/// The gain the model must predict for a layout to be tried, in judging
/// margins. Over 53 model layouts tried at half a margin (24 mixes of
/// seeds 5000 and 6000, docs/policies.md), those predicted to bring
/// 1-6 % measured -3.8 % on average (9 of 11 slower), those predicted
/// above 10 % +13.6 %.
const MODEL_MARGINS: f64 = 1.5;

/// Evaluations the search may make per decision.
const BUDGET: usize = 400;

/// The shortest and longest a group is expected to run on, seconds: the
/// horizon over which moving its memory must repay itself. A group's age
/// is the best guess of its remaining run there is.
const HORIZON_S: (f64, f64) = (3.0, 600.0);

/// What the kernel's automatic NUMA balancing moves after the threads, at
/// most, bytes a second: its default scan window, 256 MiB per scan period
/// (`numa_balancing_scan_size_mb`), a period taken as 4 s (its default
/// period grows from `scan_period_min_ms` = 1000 toward 60000 ms as it
/// finds little to move; docs/policies.md measured 256 MiB within 5 s on
/// the 2-node guest). While it is on, numaplace leaves that memory to it.
const KERNEL_BYTES_PER_S: f64 = 64.0 * 1024.0 * 1024.0;

/// How far the bound on what a placement could gain a group
/// ([`Fit::stall_bound`]) may understate it: the machine the policy is
/// told may be a quarter off the real one (`--mismatch 25`), and a
/// group's next phase may wait on memory more than the one measured.
const IDLE_SLACK: f64 = 1.5;

/// Per group of a round's fit: the bound on what a placement could gain it
/// ([`Fit::stall_bound`]), its threads fitted and the seconds it is
/// expected to run on.
pub(super) type Bounds = BTreeMap<i32, (f64, usize, f64)>;

/// What the model says to try.
pub(super) enum Choice {
    /// No layout: nothing the model finds pays enough.
    Nothing,
    /// DI-Migrate's layout.
    Di,
    /// The model's own layout.
    Model(Box<(Fit, Layout)>),
}

impl Auto {
    /// The predictor, built for `view`'s topology with the machine it was
    /// told.
    pub(super) fn predictor(&mut self, view: &View<'_>) -> &mut Predictor {
        let topology = view.topology;
        let machine = self.machine.as_ref();
        let p = self
            .predictor
            .get_or_insert_with(|| Predictor::new(topology, machine));
        // While the kernel balances, it moves the memory after the threads
        // (numaplace's memory mover leaves it that), at its own pace.
        if view.snapshot.machine.numa_balancing == Some(true) {
            p.set_migration_rate(KERNEL_BYTES_PER_S, false);
        } else {
            let engine = crate::engine::EngineConfig::default().migrate_mib_per_sec << 20;
            p.set_migration_rate(engine as f64, true);
        }
        p
    }

    /// Whether thread `x` may be placed by the model: its process in
    /// scope, and its affinity every CPU numaplace may use or what auto
    /// set itself. A thread its cgroup confines (affinity narrower than
    /// the machine) is not: the model's search puts threads on any CPU of
    /// the machine, so such a thread is left to numad's placement and the
    /// seed policies' layouts, which keep it within its cgroup's CPUs
    /// ([`crate::View::confine`]), and counts in the model where it runs.
    fn model_movable(&self, view: &View<'_>, x: &Task) -> bool {
        view.managed.contains(&x.tgid)
            && !matches!(x.state, 'Z' | 'X')
            && (view.topology.span().is_subset(&x.allowed_cpus) || self.model_kept_pin(x))
    }

    /// Whether `x`'s affinity is one CPU auto pinned it to under a kept
    /// model layout.
    pub(super) fn model_kept_pin(&self, x: &Task) -> bool {
        self.model_pins
            .get(&x.tid)
            .is_some_and(|(id, cpus)| *id == x.id() && *cpus == x.allowed_cpus)
    }

    /// Notes the pins of a model layout, and pushes them with `why`.
    fn push_model_pins(&mut self, pins: Vec<(Action, u32)>, why: &str, plan: &mut Plan) {
        for (action, cpu) in pins {
            if let Action::Pin { task, cpus, .. } = &action {
                self.model_pins.insert(task.tid, (*task, cpus.clone()));
            }
            plan.push(action, format!("{why}, on CPU {cpu}"));
        }
    }

    /// Per group of `fit`, the seconds it is expected to run on (its age).
    fn horizons(&self, view: &View<'_>, fit: &Fit) -> Vec<f64> {
        let secs = view.snapshot.interval_ns as f64 / 1e9;
        fit.groups
            .iter()
            .map(|pid| {
                let age = self
                    .first_seen
                    .get(pid)
                    .map_or(0, |&f| view.snapshot.seq.saturating_sub(f));
                (age as f64 * secs).clamp(HORIZON_S.0, HORIZON_S.1)
            })
            .collect()
    }

    /// The gain (mean ln over the groups) the model must predict before a
    /// layout is tried: [`MODEL_MARGINS`] judging margins, doubled for each model
    /// layout rolled back since the last one kept (a model that was wrong
    /// here is trusted less).
    pub(super) fn model_threshold(&self) -> f64 {
        (self.judge.margin * MODEL_MARGINS).ln_1p() * f64::from(1u32 << self.model_misses)
    }

    /// Keeps the model's layout of experiment `e`: its pins stay, the
    /// memory it moves follows, threads that come are placed by the model.
    pub(super) fn keep_model_layout(&mut self, s: &Snapshot, e: &Experiment, numbers: String) {
        self.model_kept = true;
        self.model_misses = 0;
        self.model_next = s.seq + self.judge.backoff_rounds;
        for m in &e.moves {
            if let Some((process, node)) = m.memory_to {
                self.following
                    .push((process, node, e.number, self.params.max_settle_rounds));
            }
        }
        self.verdicts.push(format!(
            "experiment {} ({MODEL_LAYOUT}) kept: {numbers}; its pins stay, threads that come \
             are placed by the model",
            e.number
        ));
    }

    /// The model fitted to this round, asked how the groups would run with
    /// the threads back where they were before the layout (`from`, by tid:
    /// dense CPU and pages per node), the others where they are: the mean
    /// over the groups of ln(now / then); `None` where it cannot say.
    pub(super) fn counterfactual(
        &mut self,
        view: &View<'_>,
        from: &BTreeMap<i32, (usize, Vec<f64>)>,
    ) -> Option<f64> {
        let (t, s) = (view.topology, view.snapshot);
        let fit = self.predictor(view).fit(t, s, &|_: &Task| false)?;
        let mut cpus: Vec<usize> = fit.threads.iter().map(|x| x.cpu).collect();
        let mut pages: Vec<Vec<f64>> = fit.threads.iter().map(|x| x.pages.clone()).collect();
        let mut back = 0;
        for (i, x) in fit.threads.iter().enumerate() {
            let had = from.get(&x.task.tid);
            if let Some((c, p)) = had.filter(|(_, p)| p.len() == pages[i].len()) {
                cpus[i] = *c;
                pages[i] = p.clone();
                back += 1;
            }
        }
        if back == 0 {
            return None;
        }
        let then = self.predictor.as_mut()?.predict(&fit, &cpus, &pages);
        let n = fit.groups.len().max(1) as f64;
        Some(
            fit.now
                .iter()
                .zip(&then)
                .map(|(now, then)| (now.max(1.0) / then.max(1.0)).ln())
                .sum::<f64>()
                / n,
        )
    }

    /// Where groups came during a model layout's trial (`e`, judged `j`)
    /// and none was left unmoved to measure their load by, the loss
    /// measured is theirs as much as the layout's (mix:20023: a 3-program
    /// layout, then an 11-thread memory-bound job, -46 % measured): the
    /// model, fitted to the rounds since (newcomers included), says how
    /// much slower the placement before would run the groups now, if by
    /// more than the threshold a model layout must pass.
    pub(super) fn judged_by_model_as_groups_came(
        &mut self,
        view: &View<'_>,
        e: &Experiment,
        j: &Judgement,
    ) -> Option<f64> {
        if !(e.model && j.control.is_none() && e.trial.groups_came()) {
            return None;
        }
        let threshold = self.model_threshold();
        self.counterfactual(view, &e.model_from)
            .filter(|&g| g > threshold)
    }

    /// Asks the model which layout to try, if any: DI-Migrate's
    /// (`di`: its plan this round) or the best its search finds.
    pub(super) fn choose_layout(&mut self, view: &View<'_>, di: &[Decision]) -> Choice {
        let threshold = self.model_threshold();
        let t = view.topology;
        let Some(fit) = self.fit_movable(view) else {
            return Choice::Nothing;
        };
        let horizon = self.horizons(view, &fit);
        let allowed: Vec<bool> = t
            .cpus()
            .iter()
            .map(|c| t.span().contains(c.os_id))
            .collect();
        let predictor = self.predictor.as_mut().expect("built by the fit");
        // DI-Migrate pins a thread to a node's CPUs and leaves it to Linux
        // within them: Linux puts the threads of a node on CPUs of their
        // own where there are enough, so does the model's placement of
        // its plan (before, every thread went to the node's first CPU,
        // and the model saw them time-share one: DI's layout of mix:40001
        // predicted -117 %, measured -10 %).
        let di_cpus =
            plan_cpus(t, &fit, di).map(|c| predictor.one_per_cpu(&fit, &c, &allowed, false));
        let di_gain = match &di_cpus {
            Some(cpus) => follow_score(predictor, &fit, cpus, &horizon),
            None => f64::NEG_INFINITY,
        };
        let starts: Vec<Vec<usize>> = di_cpus.into_iter().collect();
        let found = predictor.search(&fit, &starts, &allowed, &horizon, BUDGET);
        match found {
            // The better of the two, where it pays; DI-Migrate's where the
            // two tie (it goes on dealing the threads as groups come and
            // go, while the model's layout is held).
            Some(l) if l.score > threshold && l.score > di_gain => {
                Choice::Model(Box::new((fit, l)))
            }
            _ if di_gain > threshold => Choice::Di,
            _ => Choice::Nothing,
        }
    }

    /// The groups among `moves` (pid -> bytes of its memory the move
    /// copies to another node) whose move cannot pay, by the model fitted
    /// to the round, each with the most it could gain: no placement could
    /// make the group faster by the judging margin over the seconds it is
    /// expected to run on, its age (at least 3 s) as the model's search
    /// takes it, once the copy's stalls are paid ([`Fit::stall_bound`]
    /// with [`IDLE_SLACK`], less [`Predictor::copy_stall_s`] over those
    /// seconds). Such a move could be kept only by noise or a change of
    /// phase, and costs what it moves: mix:30024, a program of 1.5 GiB
    /// whose threads then missed the LLC 0.02 times per 1000 instructions
    /// (at most 2.3 % to gain), moved to another node, read -11.1 % as its
    /// phase changed and was moved back, both ways at the copy's cost.
    /// Empty where nothing is counted.
    pub(super) fn cannot_pay(
        &mut self,
        view: &View<'_>,
        moves: &BTreeMap<i32, f64>,
    ) -> BTreeMap<i32, f64> {
        let s = view.snapshot;
        // One fit a round: numad's moves and the kernel's trial may both ask.
        if self.bounds.as_ref().is_none_or(|(seq, _)| *seq != s.seq) {
            let fitted = match self.predictor(view).fit(view.topology, s, &|_| false) {
                Some(fit) => {
                    let horizon = self.horizons(view, &fit);
                    (fit.groups.iter().enumerate())
                        .filter_map(|(g, &pid)| {
                            let threads = fit.threads.iter().filter(|t| t.pid == pid).count();
                            Some((pid, (fit.stall_bound(pid)?, threads, horizon[g])))
                        })
                        .collect()
                }
                None => BTreeMap::new(),
            };
            self.bounds = Some((s.seq, fitted));
        }
        let margin = self.judge.margin;
        let (Some((_, bounds)), Some(predictor)) = (&self.bounds, &self.predictor) else {
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for (&pid, &bytes) in moves {
            let Some(&(bound, threads, horizon)) = bounds.get(&pid) else {
                continue;
            };
            let copy = predictor.copy_stall_s(bytes, threads) / horizon.max(1.0);
            if bound * IDLE_SLACK - copy < margin {
                out.insert(pid, bound);
            }
        }
        out
    }

    /// Per group the model fitted to the round counts, the gain it
    /// predicts if each thread's pages were all on its own node, the
    /// threads where they run: the most the kernel's balancing could bring
    /// it (it moves pages toward the threads that touch them; moving the
    /// threads instead brings no more than their pages coming to them).
    /// Only groups of one running thread whose LLC misses are counted:
    /// without the misses the model cannot tell what waiting on memory
    /// costs, and threads of one group that share data gain from the
    /// kernel bringing them together onto their memory's node (its NUMA
    /// groups), which the model sees only as far as their stores are
    /// sampled (mix:45024, one process of 8 threads sharing 1.3 MiB:
    /// balancing on +4.9 %, left off +6 % slower than Linux).
    pub(super) fn local_memory_gains(&mut self, view: &View<'_>) -> BTreeMap<i32, f64> {
        let (t, s) = (view.topology, view.snapshot);
        let Some(fit) = self.predictor(view).fit(t, s, &|_| false) else {
            return BTreeMap::new();
        };
        let predictor = self.predictor.as_mut().expect("built by the fit");
        let cpus: Vec<usize> = fit.threads.iter().map(|x| x.cpu).collect();
        let pages: Vec<Vec<f64>> = (fit.threads.iter())
            .map(|x| {
                let mut p = vec![0.0; x.pages.len()];
                if let Some(own) = p.get_mut(predictor.node_of(x.cpu)) {
                    *own = 1.0;
                }
                p
            })
            .collect();
        let local = predictor.predict(&fit, &cpus, &pages);
        let counted = |pid: i32| {
            let mut threads = fit.threads.iter().filter(|x| x.pid == pid);
            threads.next().is_some_and(|x| x.stalled.is_some()) && threads.next().is_none()
        };
        (fit.groups.iter().zip(fit.now.iter().zip(&local)))
            .filter(|(pid, _)| counted(**pid))
            .map(|(&pid, (now, local))| (pid, local.max(1.0) / now.max(1.0) - 1.0))
            .collect()
    }

    /// The groups among `moves` (pid -> the move's plan) whose move the
    /// model, fitted to the round, predicts would make the groups together
    /// slower by more than the gain a model layout must show (its threads
    /// placed as Linux would within the node they are pinned to, their
    /// memory following): numad's placement of a group by the CPU time it
    /// used, onto a node with fewer CPUs than its threads want to run on
    /// (mix:45042, a lone VM of 12 memory-bound threads onto a node of 6
    /// CPUs, while the kernel's balancing it had kept was placing its
    /// memory). The model is trusted here only where it predicts a clear
    /// loss; a gain it predicts is left to the experiment.
    pub(super) fn predicted_to_lose(
        &mut self,
        view: &View<'_>,
        moves: &BTreeMap<i32, Vec<Decision>>,
    ) -> BTreeSet<i32> {
        let threshold = self.model_threshold();
        let t = view.topology;
        let Some(fit) = self.fit_movable(view) else {
            return BTreeSet::new();
        };
        let horizon = self.horizons(view, &fit);
        let allowed: Vec<bool> = (t.cpus().iter())
            .map(|c| t.span().contains(c.os_id))
            .collect();
        let predictor = self.predictor.as_mut().expect("built by the fit");
        let mut out = BTreeSet::new();
        for (&pid, plan) in moves {
            let Some(cpus) = plan_cpus(t, &fit, plan) else {
                continue;
            };
            let cpus = predictor.one_per_cpu(&fit, &cpus, &allowed, true);
            if follow_score(predictor, &fit, &cpus, &horizon) < -threshold {
                out.insert(pid);
            }
        }
        out
    }

    /// The model fitted to the round's threads that it may place.
    fn fit_movable(&mut self, view: &View<'_>) -> Option<Fit> {
        let s = view.snapshot;
        let movable: BTreeSet<i32> = s
            .tasks
            .iter()
            .filter(|x| self.model_movable(view, x))
            .map(|x| x.tid)
            .collect();
        self.predictor(view)
            .fit(view.topology, s, &|x: &Task| movable.contains(&x.tid))
    }

    /// Whether the model predicts that `plan`'s pins, each thread's memory
    /// following it (DINO's layout of a lone group, \[Blagodurov11\] §3.3), pay
    /// more than the threshold a model layout must pass: tried then as soon
    /// as the group is past its start, not after it has run long.
    pub(super) fn predicts_it_pays(&mut self, view: &View<'_>, plan: &[Decision]) -> bool {
        let threshold = self.model_threshold();
        self.plan_score(view, plan).is_some_and(|x| x > threshold)
    }

    /// The model's score of `plan`'s pins, each thread on a CPU of its own
    /// within its pin and its memory following it, net of moving over the
    /// groups' horizons; `None` where the round cannot be fitted or the
    /// plan pins nothing the model places.
    pub(super) fn plan_score(&mut self, view: &View<'_>, plan: &[Decision]) -> Option<f64> {
        let fit = self.fit_movable(view)?;
        self.plan_score_in(view, &fit, plan)
    }

    /// [`Auto::plan_score`] with the round's fit made already.
    fn plan_score_in(&mut self, view: &View<'_>, fit: &Fit, plan: &[Decision]) -> Option<f64> {
        let t = view.topology;
        let cpus = plan_cpus(t, fit, plan)?;
        let horizon = self.horizons(view, fit);
        let allowed: Vec<bool> = (t.cpus().iter())
            .map(|c| t.span().contains(c.os_id))
            .collect();
        let predictor = self.predictor.as_mut().expect("built by the fit");
        // DINO pins a thread to a core's CPUs, two threads of a pair to
        // the same two: each runs on a CPU of its own there, as Linux puts
        // them (before, both went to the core's first CPU and the model saw
        // them time-share it while its sibling idled: DINO's layout of
        // mix:46009, 12 threads on 8 two-way cores, scored -0.16 in round
        // 4, where DINO gains 8 %).
        let cpus = predictor.one_per_cpu(fit, &cpus, &allowed, true);
        Some(follow_score(predictor, fit, &cpus, &horizon))
    }

    /// Whether the model predicts DINO's layout of a lone group (`dino`'s
    /// pins, each thread's memory following it) pays more than the
    /// threshold a model layout must pass, and more than numad's placement
    /// of it (`numad`'s pins, its memory after them) by half again and the
    /// threshold: numad's is the cheaper move to try and to undo (it moves
    /// no page where the memory is on its node already), and the model's
    /// error grows with what it predicts, so DINO's takes its place only
    /// where the model sees it clearly better. With `numad` `None` (its
    /// placement had a premise and was left out: it cannot pay, or the
    /// model predicts it loses), DINO's must pass the threshold alone.
    ///
    /// mix:50058, a lone 8-thread program on westmere-2s with its memory on
    /// node 1: numad's placement (its threads onto node 1's four two-way
    /// cores) gains 3.8 %, DINO's (one thread a core over both nodes, memory
    /// following) 20.9 %; the model scored them 0.12 and 0.25 in the round
    /// numad's was tried. mix:50092, two threads sharing written data on a
    /// machine of two 3-core nodes: the model scored numad's 0.36 and
    /// DINO's 0.46 (it sees shared data only as far as stores are
    /// sampled); DINO's, tried first, lost 2.4 % and was rolled back, and
    /// numad's, kept 4 rounds later, gained 34 %. On two other seeds the
    /// model scored them -0.02 and 0.14, and only the sharing seen keeps
    /// DINO's from numad's place (DINO's was kept there at +2.5 %).
    pub(super) fn predicts_better(
        &mut self,
        view: &View<'_>,
        pid: i32,
        dino: &[Decision],
        numad: Option<&[Decision]>,
    ) -> bool {
        let threshold = self.model_threshold();
        // Threads seen storing to data they share: DINO's layout would put
        // them in different domains, every line they write crossing
        // between them, and the model sees those transfers only as far as
        // stores are sampled (mix:50092 as above: 7 shared stores per 1000
        // instructions, fitted at 0.5 to 0.8).
        let Some(fit) = self.fit_movable(view) else {
            return false;
        };
        if (fit.threads.iter()).any(|x| x.pid == pid && x.shared_bytes > 0) {
            return false;
        }
        let Some(d) = self.plan_score_in(view, &fit, dino) else {
            return false;
        };
        let n = numad
            .and_then(|p| self.plan_score_in(view, &fit, p))
            .unwrap_or(0.0);
        d > threshold && d > 1.5 * n.max(0.0) + threshold
    }

    /// Starts a trial of the model's layout: every movable thread pinned
    /// to its CPU, a group gathered on one node with its memory moved
    /// there; judged together as a layout.
    pub(super) fn try_model_layout(
        &mut self,
        view: &View<'_>,
        fit: &Fit,
        layout: &Layout,
        plan: &mut Plan,
    ) {
        let (t, s) = (view.topology, view.snapshot);
        let n = self.judge.measure_rounds;
        let Some(baseline) = self.baseline(view, SETTLED_AGE * n as u64) else {
            return;
        };
        if baseline.is_empty() {
            return;
        }
        let pins = pins_of(t, s, fit, layout);
        if pins.is_empty() {
            return;
        }
        let number = self.experiments + 1;
        self.experiments = number;
        let earlier: String = self.verdicts.drain(..).map(|v| v + "; ").collect();
        let lacking = if self.lacking_said || fit.lacking.is_empty() {
            String::new()
        } else {
            self.lacking_said = true;
            format!("; the model lacked {}", fit.lacking.join(", "))
        };
        let why = format!(
            "auto: {earlier}experiment {number}: trying the {MODEL_LAYOUT} of the {} groups in \
             scope (the machine model predicts {} for them together, {} net of moving their \
             memory; {} placements evaluated{lacking}), judged together over {n} rounds, kept \
             above {}",
            baseline.len(),
            percent(layout.gain.exp_m1()),
            percent(layout.score.exp_m1()),
            layout.evaluations,
            percent(self.judge.margin),
        );
        let before = layout_before(view);
        let mut moves = Vec::new();
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            let to = fit
                .groups
                .iter()
                .position(|&p| p == g.pid)
                .and_then(|gi| match layout.memory[gi] {
                    Memory::To(n) => Some(t.nodes()[n].os_id),
                    _ => None,
                })
                .filter(|&node| share_on(s, g.pid, node).is_some_and(|x| x < 0.9));
            moves.push(Move {
                pid: g.pid,
                label: g.label(),
                kind: MODEL_LAYOUT,
                moved_memory: to.is_some(),
                undo_home: Vec::new(),
                undo: Vec::new(),
                memory_to: to.map(|node| (g.id(), node)),
                memory_before: g.memory_total().unwrap_or_default(),
            });
        }
        self.push_model_pins(pins, &why, plan);
        for m in in_serve_order(s, &moves) {
            if let Some((process, node)) = m.memory_to {
                plan.push(
                    Action::MoveMemory {
                        process,
                        to_node: node,
                        max_pages: None,
                    },
                    format!("{why}: memory of {} to node {node}", m.label),
                );
            }
        }
        self.trial = Some(Experiment {
            layout: Some(before),
            model: true,
            model_from: fit
                .threads
                .iter()
                .map(|x| (x.task.tid, (x.cpu, x.pages.clone())))
                .collect(),
            ..Experiment::new(number, moves, baseline)
        });
    }

    /// A round under a kept model layout: every `backoff-rounds` the model
    /// is asked again, and a layout it predicts pays is tried against the
    /// kept one, when no memory is still moving (`quiet`); otherwise the
    /// threads that came since are placed ([`Auto::place_newcomers`]).
    pub(super) fn model_kept_round(&mut self, view: &View<'_>, quiet: bool, plan: &mut Plan) {
        let s = view.snapshot;
        if let Some((runnable, cpus)) = crate::dino::aside::crowded(s, view.topology) {
            let why = format!("{runnable} runnable threads on {cpus} CPUs");
            self.widen_model_pins(view, &why, plan);
            return;
        }
        // Asked again every `backoff-rounds` (asked also whenever the
        // groups it laid out changed, mixes did worse: -4.71 against
        // -4.97 % mean on seed 5000's 24 mixes, a new layout re-pinning
        // the groups of churning mixes).
        if quiet && s.seq >= self.model_next {
            self.model_next = s.seq + self.judge.backoff_rounds;
            if let Choice::Model(b) = self.choose_layout(view, &[]) {
                let (fit, layout) = *b;
                self.try_model_layout(view, &fit, &layout, plan);
                if self.trial.is_some() {
                    return;
                }
            }
        }
        self.place_newcomers(view, plan);
    }

    /// A kept model layout on a machine that became crowded (more
    /// runnable threads than CPUs, `why`): each thread it pinned to one
    /// CPU is given that CPU's node, so the kernel time-shares the node's
    /// CPUs among whoever comes; its memory stays. Pinned to one CPU, a
    /// thread kept it while every newcomer Linux put there shared it
    /// (mix:18002: a memory-bound program pinned before two VMs and a
    /// 14-thread job came, 21.2 s under Linux, 31.6 s). Neither newcomers
    /// nor new layouts are placed by the model while the machine is
    /// crowded: its layouts put each thread on a CPU of its own.
    fn widen_model_pins(&mut self, view: &View<'_>, why: &str, plan: &mut Plan) {
        let (t, s) = (view.topology, view.snapshot);
        let mut widened = Vec::new();
        for x in &s.tasks {
            if !self.model_kept_pin(x) || x.allowed_cpus.len() != 1 {
                continue;
            }
            let Some(cpu) = x.allowed_cpus.first().and_then(|c| t.cpu_by_os_id(c)) else {
                continue;
            };
            let within = self
                .first_affinity
                .get(&x.tid)
                .filter(|f| f.0 == x.id())
                .map_or_else(|| t.span().clone(), |f| f.2.clone());
            let cpus = t.nodes()[cpu.node].span.intersection(&within);
            if cpus.is_empty() || cpus == x.allowed_cpus {
                continue;
            }
            widened.push((x.id(), x.tgid, cpus, t.nodes()[cpu.node].os_id));
        }
        for (task, tgid, cpus, node) in widened {
            self.model_pins.insert(task.tid, (task, cpus.clone()));
            plan.push(
                Action::Pin { task, tgid, cpus },
                format!(
                    "auto ({MODEL_LAYOUT} kept): {why}; a thread it pinned to one CPU is given \
                     that CPU's node ({node}), for the kernel to time-share"
                ),
            );
        }
    }

    /// Threads that came under a kept model layout (their affinity every
    /// CPU) placed where the model predicts best among the CPUs no placed
    /// thread holds, without an experiment. Not while a trial runs (placed
    /// then too, while the kernel's balancing was under trial, 24 mixes of
    /// seed 16000 went -5.60 % against -6.00 % mean).
    pub(super) fn place_newcomers(&mut self, view: &View<'_>, plan: &mut Plan) {
        let (t, s) = (view.topology, view.snapshot);
        let new: Vec<&Task> = s
            .tasks
            .iter()
            .filter(|x| view.managed.contains(&x.tgid) && t.span().is_subset(&x.allowed_cpus))
            .filter(|x| !matches!(x.state, 'Z' | 'X'))
            .collect();
        if new.is_empty() {
            return;
        }
        let movable: BTreeSet<i32> = new.iter().map(|x| x.tid).collect();
        let Some(fit) = self
            .predictor(view)
            .fit(t, s, &|x: &Task| movable.contains(&x.tid))
        else {
            return;
        };
        let horizon = self.horizons(view, &fit);
        let allowed: Vec<bool> = t
            .cpus()
            .iter()
            .map(|c| t.span().contains(c.os_id))
            .collect();
        let predictor = self.predictor.as_mut().expect("built above");
        // The others stay: only the newcomers are searched, from where
        // Linux put them.
        let Some(layout) = predictor.search(&fit, &[], &allowed, &horizon, BUDGET / 4) else {
            return;
        };
        let split = split_young(t, &fit, &layout.cpus, |pid| {
            self.age(s.seq, pid) < self.settled_after()
        });
        let pins: Vec<(Action, u32)> = pins_of(t, s, &fit, &layout)
            .into_iter()
            .filter(|(a, _)| !split.contains(&a.pid()))
            .collect();
        if !pins.is_empty() {
            // The others stayed where the kept layout put them, so the
            // newcomers took what was left: on a full machine, the CPUs of
            // one node, its controller shared by whichever came
            // (mix:16016: four memory-bound programs on one node of
            // barcelona-4s, +11.6 % against Linux). The model is asked
            // about the whole machine again once they are past their
            // start, not after the usual wait; it tries a layout only if
            // it predicts that pays.
            let settled = SETTLED_AGE * self.judge.measure_rounds as u64;
            self.model_next = self.model_next.min(s.seq + settled);
        }
        self.push_model_pins(
            pins,
            &format!(
                "auto ({MODEL_LAYOUT} kept): a thread that came placed where the model predicts \
                 best"
            ),
            plan,
        );
    }
}

/// The groups of several movable threads, `young` by pid, that `cpus`
/// (per thread of `fit`, dense) puts in more than one last-level-cache
/// domain: such a group is left to Linux until it is past its start. The
/// stores its threads share show only over rounds of sampling, and the
/// model, seeing none yet, may split threads that write the same lines
/// across packages (mix:52074: two threads sharing 515 KiB, 8.4 shared
/// stores per 1000 instructions, placed on the two packages of
/// westmere-2s the round they came, ran 51.2 s, 24.9 s where Linux placed
/// them).
fn split_young(
    t: &numaplace_model::Topology,
    fit: &Fit,
    cpus: &[usize],
    young: impl Fn(i32) -> bool,
) -> BTreeSet<i32> {
    let mut llcs: BTreeMap<i32, BTreeSet<usize>> = BTreeMap::new();
    for (x, &c) in fit.threads.iter().zip(cpus).filter(|(x, _)| x.movable) {
        llcs.entry(x.pid).or_default().insert(t.cpus()[c].llc);
    }
    (llcs.into_iter())
        .filter(|(pid, l)| l.len() > 1 && young(*pid))
        .map(|(pid, _)| pid)
        .collect()
}

/// The pins that make `layout`: every movable thread of `fit` to its one
/// CPU (kernel id), unless already pinned there.
fn pins_of(
    t: &numaplace_model::Topology,
    s: &Snapshot,
    fit: &Fit,
    layout: &Layout,
) -> Vec<(Action, u32)> {
    let mut out = Vec::new();
    for (x, &c) in fit.threads.iter().zip(&layout.cpus) {
        if !x.movable {
            continue;
        }
        let os = t.cpus()[c].os_id;
        let cpus: CpuSet = [os].into_iter().collect();
        if s.task(x.task.tid)
            .is_some_and(|task| task.allowed_cpus == cpus)
        {
            continue;
        }
        out.push((
            Action::Pin {
                task: x.task,
                tgid: x.pid,
                cpus,
            },
            os,
        ));
    }
    out
}

/// A plan's pins as a placement of the fit's threads: each pinned thread
/// on the first CPU of its pin, the others where they are; `None` if it
/// pins none of them.
fn plan_cpus(t: &numaplace_model::Topology, fit: &Fit, plan: &[Decision]) -> Option<Vec<usize>> {
    let mut cpus: Vec<usize> = fit.threads.iter().map(|x| x.cpu).collect();
    let mut pinned = false;
    for d in plan {
        let Action::Pin { task, cpus: to, .. } = &d.action else {
            continue;
        };
        let i = fit.threads.iter().position(|x| x.task == *task);
        let c = to.first().and_then(|c| t.cpu_by_os_id(c));
        if let (Some(i), Some(c)) = (i, c) {
            cpus[i] = c.id;
            pinned = true;
        }
    }
    pinned.then_some(cpus)
}

/// The model's score of `cpus` with every group's memory following its
/// threads (DI-Migrate's and DINO's memory, by sampled addresses).
fn follow_score(predictor: &mut Predictor, fit: &Fit, cpus: &[usize], horizon: &[f64]) -> f64 {
    let follow = vec![Memory::Follow; fit.groups.len()];
    let mut pages = Vec::new();
    predictor.score(fit, cpus, &follow, horizon, &mut pages).0
}
