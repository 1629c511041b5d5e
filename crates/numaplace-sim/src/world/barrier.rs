//! The barriers of parallel (MPI) jobs (`Barrier::Phase`;
//! `docs/simulator.md`, "MPI jobs"): the ranks of a job wait for each
//! other at the end of every phase, so the job advances at its slowest
//! rank's pace. A rank that has finished a phase spins in MPI's progress
//! loop (`ThreadModel::spin`): it stays on its CPU, busy, and retires
//! instructions that make no progress and send nothing to the uncore, so
//! its measured LLC miss rate falls while it waits, as a PMU would count
//! it. `step.rs` stops a rank at the barrier and counts its spinning;
//! here the job goes on once every rank is there.

use super::*;
use crate::workload::Barrier;

/// The applications of each job with `Barrier::Phase`, grouped by job
/// name in the order the jobs first appear.
pub(super) fn jobs(w: &Workload) -> Vec<Vec<usize>> {
    let mut jobs: Vec<(&str, Vec<usize>)> = Vec::new();
    for (ai, a) in w.apps.iter().enumerate() {
        let Some(job) = a.job.as_ref().filter(|j| j.barrier == Barrier::Phase) else {
            continue;
        };
        match jobs.iter_mut().find(|(n, _)| *n == job.name) {
            Some((_, apps)) => apps.push(ai),
            None => jobs.push((&job.name, vec![ai])),
        }
    }
    jobs.into_iter().map(|(_, apps)| apps).collect()
}

impl World {
    /// Lets every job whose ranks have all reached the barrier go on: to
    /// the next phase from the next step (a rank loses at most the rest
    /// of the step it arrived in), or, after the last phase, to the end
    /// of the run, every rank finishing when the last one arrived.
    pub(super) fn release_barriers(&mut self) {
        for j in 0..self.barrier_jobs.len() {
            let apps = &self.barrier_jobs[j];
            let all_there = apps.iter().all(|&ai| {
                self.apps[ai].status == AppStatus::Running
                    && self.apps[ai]
                        .threads
                        .iter()
                        .all(|&t| self.threads[t].waiting)
            });
            if !all_there {
                continue;
            }
            let threads: Vec<usize> = apps
                .iter()
                .flat_map(|&ai| self.apps[ai].threads.iter().copied())
                .collect();
            let last = threads
                .iter()
                .map(|&t| self.threads[t].arrived_at)
                .fold(f64::MIN, f64::max);
            for t in threads {
                let phases = self.workload.apps[self.threads[t].app].phases.len();
                let th = &mut self.threads[t];
                th.waiting = false;
                if th.phase + 1 == phases {
                    th.done = true;
                    th.finished_at = Some(last);
                } else {
                    th.phase += 1;
                    th.phase_done = 0.0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use numaplace_model::metrics::mpki;

    use super::*;
    use crate::scenario;

    /// Two ranks of one job, the second with three times the first's work
    /// (rank_skew 0.5), two phases, bound to CPUs 0 and 4 (two nodes of
    /// barcelona-4s, so they do not contend).
    fn job(barrier: &str) -> World {
        let text = format!(
            r#"
machine = "barcelona-4s"
max_seconds = 100
[linux]
migrate_probability = 0
[[app]]
name = "solver"
copies = 2
rank_skew = 0.5
barrier = "{barrier}"
cpi = 1.0
working_set = "1MiB"
uncore_pki = 10
llc_mpki = 10
[[app.phase]]
instructions = 2.3e9
[[app.phase]]
instructions = 2.3e9
"#
        );
        let w = scenario::parse(&text, "t.toml").unwrap();
        let m = Machine::preset(&w.machine).unwrap();
        let mut world = World::new(m, w, 1);
        world.bind(vec![vec![0], vec![4]]);
        world
    }

    fn until(w: &mut World, secs: f64) {
        w.start_due();
        while w.time() + 1e-9 < secs && !w.finished() {
            w.advance();
        }
    }

    fn end_s(w: &World, app: &str) -> f64 {
        w.app_runs()
            .iter()
            .find(|r| r.app == app)
            .and_then(|r| r.end_s)
            .unwrap()
    }

    /// Without a barrier each rank ends at its own pace; with one, both
    /// end when the slower would have alone (within a step per barrier).
    #[test]
    fn a_job_ends_with_its_slowest_rank() {
        let mut free = job("none");
        until(&mut free, 100.0);
        let (fast, slow) = (end_s(&free, "solver.0"), end_s(&free, "solver.1"));
        assert!((slow / fast - 3.0).abs() < 0.05, "{fast} {slow}");

        let mut synced = job("phase");
        until(&mut synced, 100.0);
        let (a, b) = (end_s(&synced, "solver.0"), end_s(&synced, "solver.1"));
        assert_eq!(a, b);
        assert!(a >= slow - 1e-9 && a <= slow + 0.02 + 1e-9, "{a} vs {slow}");
    }

    /// The fast rank waits at the barrier from about 1.7 s to 5 s: it
    /// stays busy on its CPU, retires about one instruction per cycle
    /// (`spin_cpi`) and misses nothing, so its measured LLC miss rate,
    /// about 10 per 1000 instructions while it works, falls to 0 while it
    /// waits, and part way in the interval it arrives.
    #[test]
    fn a_rank_at_the_barrier_spins_busy_without_misses() {
        let mut w = job("phase");
        until(&mut w, 1.0);
        let s = w.snapshot();
        let (fast, slow) = (s.tasks[0].tid, s.tasks[1].tid);
        let working = mpki(&s.counters[&fast]).unwrap();
        assert!((working - 10.0).abs() < 0.5, "{working}");
        until(&mut w, 2.5);
        let s = w.snapshot();
        let arriving = mpki(&s.counters[&fast]).unwrap();
        assert!(arriving > 0.5 && arriving < working * 0.7, "{arriving}");
        until(&mut w, 4.5);
        let s = w.snapshot();
        let c = &s.counters[&fast];
        assert_eq!(c.get(Counter::LlcMisses), Some(0));
        let cycles = c.get(Counter::Cycles).unwrap() as f64;
        let instructions = c.get(Counter::Instructions).unwrap() as f64;
        assert!((cycles / (2.0 * 2.3e9) - 1.0).abs() < 0.01, "{cycles}");
        assert!((instructions / cycles - 1.0).abs() < 0.01, "{instructions}");
        let slow = mpki(&s.counters[&slow]).unwrap();
        assert!((slow - 10.0).abs() < 0.5, "{slow}");
        assert!(w.threads[0].waiting && !w.threads[1].waiting);
    }
}
