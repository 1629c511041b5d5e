//! One time step: the contention model's speeds turned into progress,
//! counters, energy; automatic NUMA balancing's scans; runs that end and
//! restart.

use super::*;
use crate::workload::Barrier;

impl World {
    /// Runs the world for one step of the workload's length.
    pub fn advance(&mut self) {
        let dt = self.step;
        if self.time + 1e-12 >= self.next_balance {
            self.balance();
            self.next_balance = self.time + self.workload.linux.balance_interval_ms / 1000.0;
        }
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if th.alive && !th.done && th.cpu.is_none_or(|c| !th.allowed.contains(c as u32)) {
                self.place(t);
            }
        }
        self.first_touch();
        let load = self.cpu_load();
        let (active, speeds, refill) = self.solve_step(&load);
        self.background
            .node_bytes_per_s
            .iter_mut()
            .for_each(|x| *x = 0.0);
        self.background
            .link_bytes_per_s
            .iter_mut()
            .for_each(|x| *x = 0.0);
        let mut arrived = false;
        for ((&t, s), refill_ns_per_s) in active.iter().zip(&speeds).zip(refill) {
            arrived |= self.progress(t, s, refill_ns_per_s, &load);
        }
        if arrived {
            self.release_barriers();
        }
        self.feed_signatures(&active, &speeds, &load);
        self.speeds = speeds;
        // Energy ([Bae12] Fig. 7): cores with a busy thread, cores with two.
        self.count_energy(&load, dt);
        if self.workload.linux.numa_balancing {
            self.numa_balancing();
        }
        self.time += dt;
        self.finish_runs();
        self.sample_trace();
    }

    /// The contention model's speeds this step for the threads running
    /// (`load`: threads per CPU), with what M8's switch-ins cost each.
    /// Returns the running threads, their speeds and their refill stalls
    /// (ns per s).
    fn solve_step(&mut self, load: &[u32]) -> (Vec<usize>, Vec<Speed>, Vec<f64>) {
        // Page fractions per running thread.
        let active: Vec<usize> = (0..self.threads.len())
            .filter(|&t| {
                self.threads[t].alive && !self.threads[t].done && self.threads[t].cpu.is_some()
            })
            .collect();
        let fractions: Vec<Vec<f64>> = active
            .iter()
            .map(|&t| {
                let p = &self.threads[t].pages;
                let s: f64 = p.iter().sum();
                if s > 0.0 {
                    p.iter().map(|x| x / s).collect()
                } else {
                    let mut v = vec![0.0; p.len()];
                    v[self.solver.cpu_node(self.threads[t].cpu.unwrap_or(0))] = 1.0;
                    v
                }
            })
            .collect();
        let runners: Vec<Runner<'_>> = active
            .iter()
            .zip(&fractions)
            .map(|(&t, f)| {
                let th = &self.threads[t];
                let spec = &self.workload.apps[th.app];
                let cpu = th.cpu.unwrap_or(0);
                Runner {
                    cpu,
                    share: 1.0 / load[cpu].max(1) as f64,
                    // A rank at its job's barrier runs MPI's progress loop.
                    model: th.model(spec, &self.spin),
                    pages: f,
                    group: th.app,
                    shared_bytes: spec.shared_bytes,
                    shares: th.index < spec.sharers,
                    prev_ips: th.prev_ips,
                }
            })
            .collect();
        let mut speeds = std::mem::take(&mut self.speeds);
        self.solver.solve(&runners, &self.background, &mut speeds);
        // M8: what the step's switch-ins cost the threads that time-share
        // a CPU, stalled like a migration's refill (M7).
        let mut refill = Vec::new();
        self.solver.slice_refill(&runners, &speeds, &mut refill);
        drop(runners);
        (active, speeds, refill)
    }

    /// Thread `t`'s progress over the step at speed `s`: its migration
    /// and refill stalls, its instructions through its phases (to the
    /// barrier, or to its end), its spinning and its counters. Returns
    /// whether it arrived at its job's barrier.
    fn progress(&mut self, t: usize, s: &Speed, refill_ns_per_s: f64, load: &[u32]) -> bool {
        let dt = self.step;
        let ghz = self.solver.ghz();
        let spin_cpi = self.spin.cpi_core;
        let mut arrived = false;
        let th = &mut self.threads[t];
        th.stall_ns += refill_ns_per_s * dt;
        let spec = &self.workload.apps[th.app];
        let barrier = spec
            .job
            .as_ref()
            .is_some_and(|j| j.barrier == Barrier::Phase);
        let share = 1.0 / load[th.cpu.unwrap_or(0)].max(1) as f64;
        th.prev_ips = s.ips;
        th.last_speed = *s;
        th.cpu_seconds += dt * share;
        // Migration stalls first.
        let stall = (th.stall_ns * 1e-9).min(dt * share);
        th.stall_ns -= stall * 1e9;
        let run = dt - stall / share.max(1e-9);
        // A rank already at the barrier ran the progress loop all step.
        let waited = th.waiting;
        let mut instr = if waited { 0.0 } else { s.ips * run.max(0.0) };
        let mut used = 0.0;
        while instr > 0.0 && !th.done && !th.waiting {
            let phase = &spec.phases[th.phase];
            let left = phase.instructions - th.phase_done;
            if instr >= left {
                used += left / s.ips.max(1e-9);
                th.run_done += left;
                instr -= left;
                if barrier {
                    // Phase done: wait for the job's other ranks
                    // (`release_barriers`), spinning the rest of the step.
                    th.phase_done = phase.instructions;
                    th.waiting = true;
                    th.arrived_at = self.time + stall / share.max(1e-9) + used;
                    arrived = true;
                    break;
                }
                th.phase_done = 0.0;
                th.phase += 1;
                if th.phase == spec.phases.len() {
                    th.done = true;
                    th.finished_at = Some(self.time + stall / share.max(1e-9) + used);
                    th.phase = spec.phases.len() - 1;
                }
            } else {
                th.phase_done += instr;
                th.run_done += instr;
                used += instr / s.ips.max(1e-9);
                instr = 0.0;
            }
        }
        let done_instr = s.ips * used;
        // Spinning at the barrier (busy, no progress, nothing to the
        // uncore): the step's speed is the progress loop's when it
        // waited from the start, else the rest of the step runs at
        // `spin_cpi` on its share of the CPU.
        let spun = if th.waiting {
            (run.max(0.0) - used).max(0.0)
        } else {
            0.0
        };
        let spin_instr = if waited {
            s.ips * spun
        } else {
            spun * share * ghz * 1e9 / spin_cpi
        };
        let a = &mut th.acc;
        a.instructions += done_instr + spin_instr;
        a.cycles += (used + spun + stall) * share * ghz * 1e9;
        a.llc_refs += done_instr * s.uncore_per_instr;
        a.llc_misses += done_instr * s.llc_miss_per_instr;
        let reqs = done_instr * (s.uncore_per_instr + s.transfers_per_instr);
        a.uncore_requests += reqs;
        a.uncore_occupancy += reqs * s.uncore_penalty_cycles;
        a.run_ns += (used + spun + stall) * share * 1e9;
        let t = &mut self.totals;
        t.instructions += done_instr + spin_instr;
        t.llc_misses += done_instr * s.llc_miss_per_instr;
        t.uncore_requests += reqs;
        t.uncore_occupancy += reqs * s.uncore_penalty_cycles;
        arrived
    }

    /// The step's energy, from the cores with a busy thread and those
    /// with two.
    fn count_energy(&mut self, load: &[u32], dt: f64) {
        if let Some(pm) = &self.machine.params.power {
            let topo = &self.machine.topology;
            let (mut p, mut l) = (0usize, 0usize);
            for core in topo.cores() {
                let busy = core.cpus.iter().filter(|&&c| load[c] > 0).count();
                if busy > 0 {
                    p += 1;
                }
                if busy > 1 {
                    l += 1;
                }
            }
            self.totals.energy_j += pm.watts(p as f64, l as f64) * dt;
        }
    }

    /// Moves up to `max` of a thread's private pages to `node`; returns how
    /// many moved. Charges the copy to the nodes and the thread.
    pub(super) fn move_pages_of(&mut self, t: usize, node: usize, max: f64) -> f64 {
        let nodes = self.threads[t].pages.len();
        let off: f64 = (0..nodes)
            .filter(|&n| n != node)
            .map(|n| self.threads[t].pages[n])
            .sum();
        let take = off.min(max).floor();
        if take <= 0.0 {
            return 0.0;
        }
        for n in 0..nodes {
            if n == node {
                continue;
            }
            let part = take * self.threads[t].pages[n] / off;
            self.threads[t].pages[n] -= part;
            self.charge_copy(n, node, part);
        }
        self.threads[t].pages[node] += take;
        self.threads[t].stall_ns += take * self.solver.constants.page_migration_us.value * 1e3;
        take
    }

    pub(super) fn charge_copy(&mut self, from: usize, to: usize, pages: f64) {
        let bytes = pages * PAGE / self.step;
        self.background.node_bytes_per_s[from] += bytes;
        self.background.node_bytes_per_s[to] += bytes;
        let topo = &self.machine.topology;
        let (a, b) = (
            topo.nodes()[from].package.unwrap_or(0),
            topo.nodes()[to].package.unwrap_or(0),
        );
        if a != b {
            let np = topo.packages().len();
            self.background.link_bytes_per_s[a * np + b] += bytes;
        }
    }

    pub(super) fn finish_runs(&mut self) {
        for ai in 0..self.apps.len() {
            let a = &self.apps[ai];
            if a.status != AppStatus::Running || !a.threads.iter().all(|&t| self.threads[t].done) {
                continue;
            }
            let end = a
                .threads
                .iter()
                .filter_map(|&t| self.threads[t].finished_at)
                .fold(a.started_at, f64::max);
            self.runs.push(AppRun {
                app: self.workload.apps[ai].name.clone(),
                run: a.run,
                start_s: a.started_at,
                end_s: Some(end),
                thread_s: a
                    .threads
                    .iter()
                    .map(|&t| self.threads[t].finished_at.map(|f| f - a.started_at))
                    .collect(),
                node_migrations: self.node_migrations_of(&a.threads),
            });
            for &t in &self.apps[ai].threads {
                self.threads[t].alive = false;
                self.threads[t].cpu = None;
            }
            let runs = self.workload.apps[ai].runs;
            let a = &mut self.apps[ai];
            a.run += 1;
            if a.run >= runs {
                a.status = AppStatus::Done;
            } else {
                self.launch(ai);
                self.apps[ai].run = self.apps[ai].run.max(1);
            }
        }
    }
}
