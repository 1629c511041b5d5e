//! The simulated Linux: where threads nobody pinned go, its periodic
//! balancing, and first-touch memory placement (automatic NUMA balancing
//! is `autonuma.rs`).

use super::*;

impl World {
    /// Threads on each CPU now.
    pub(super) fn cpu_load(&self) -> Vec<u32> {
        let mut load = vec![0u32; self.machine.topology.cpus().len()];
        for t in &self.threads {
            if t.alive && !t.done {
                if let Some(c) = t.cpu {
                    load[c] += 1;
                }
            }
        }
        load
    }

    /// The simulated Linux puts a thread on the least loaded CPU of its
    /// allowed set, preferring CPUs whose whole core is idle, at random
    /// among equals.
    pub(super) fn place(&mut self, t: usize) {
        let load = self.cpu_load();
        let topo = &self.machine.topology;
        let core_load = |c: usize| -> u32 {
            topo.cores()[topo.cpus()[c].core]
                .cpus
                .iter()
                .map(|&x| load[x])
                .sum()
        };
        let allowed: Vec<usize> = self.threads[t].allowed.iter().map(|c| c as usize).collect();
        let Some(best) = allowed.iter().map(|&c| (load[c], core_load(c))).min() else {
            return;
        };
        let candidates: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|&c| (load[c], core_load(c)) == best)
            .collect();
        let cpu = self.rng.pick(&candidates);
        self.move_thread(t, cpu);
    }

    /// Moves a thread to a CPU, charging what the move costs (M7): a new
    /// LLC refills the thread's share of it, a new core its L2.
    pub(super) fn move_thread(&mut self, t: usize, cpu: usize) {
        let topo = &self.machine.topology;
        let th = &mut self.threads[t];
        if let Some(old) = th.cpu {
            if old == cpu {
                return;
            }
            let (o, n) = (&topo.cpus()[old], &topo.cpus()[cpu]);
            let mlp = self.workload.apps[th.app].phases
                [th.phase.min(self.workload.apps[th.app].phases.len() - 1)]
            .model
            .mlp
            .max(1.0);
            if o.llc != n.llc {
                let lines = th.last_speed.llc_share / crate::model::LINE;
                th.stall_ns += lines
                    * th.last_speed
                        .memory_ns
                        .max(self.machine.params.local_latency_ns.value)
                    / mlp;
            } else if o.core != n.core {
                let l2 = topo.core_cache(n.core, 2).map_or(0.0, |c| c.size as f64);
                th.stall_ns += l2 / crate::model::LINE * self.machine.params.llc_hit_ns.value / mlp;
            }
            self.totals.thread_migrations += 1;
            th.acc.migrations += 1;
            if o.node != n.node {
                self.totals.node_migrations += 1;
                th.node_migrations += 1;
            }
        }
        th.cpu = Some(cpu);
    }

    /// The simulated Linux's periodic balancing.
    pub(super) fn balance(&mut self) {
        let p = self.workload.linux.migrate_probability;
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if !th.alive || th.done {
                continue;
            }
            let Some(cpu) = th.cpu else { continue };
            let load = self.cpu_load();
            let topo = &self.machine.topology;
            let busy_siblings = |c: usize| -> u32 {
                topo.cores()[topo.cpus()[c].core]
                    .cpus
                    .iter()
                    .filter(|&&x| x != c)
                    .map(|&x| load[x])
                    .sum()
            };
            let idle: Vec<usize> = th
                .allowed
                .iter()
                .map(|c| c as usize)
                .filter(|&c| load[c] == 0)
                .collect();
            let idle_cores: Vec<usize> = idle
                .iter()
                .copied()
                .filter(|&c| busy_siblings(c) == 0)
                .collect();
            // With automatic NUMA balancing, only an overloaded CPU moves a
            // thread off the node it prefers (`migrate_degrades_locality`).
            let home = th
                .numa
                .preferred
                .filter(|&n| self.workload.linux.numa_balancing && n == self.solver.cpu_node(cpu));
            let (idle, idle_cores) = match home {
                Some(n) if load[cpu] <= 1 => {
                    let keep = |v: Vec<usize>| -> Vec<usize> {
                        v.into_iter()
                            .filter(|&c| self.solver.cpu_node(c) == n)
                            .collect()
                    };
                    (keep(idle), keep(idle_cores))
                }
                _ => (idle, idle_cores),
            };
            let overloaded = load[cpu] > 1;
            let smt_shared = busy_siblings(cpu) > 0 && !idle_cores.is_empty();
            let unpinned = th.allowed == self.all_cpus;
            // Whole idle cores first, as Linux's idle-sibling search does.
            let pool = if idle_cores.is_empty() {
                &idle
            } else {
                &idle_cores
            };
            let moves = (overloaded && !pool.is_empty())
                || smt_shared
                || (unpinned && !pool.is_empty() && self.rng.unit() < p);
            if moves {
                let c = self.rng.pick(pool);
                self.move_thread(t, c);
            }
        }
    }

    pub(super) fn first_touch(&mut self) {
        let nodes = self.machine.topology.nodes().len();
        for ai in 0..self.apps.len() {
            if self.apps[ai].status != AppStatus::Running {
                continue;
            }
            let spec = &self.workload.apps[ai];
            let node_of = |cpu: Option<usize>| cpu.map_or(0, |c| self.solver.cpu_node(c));
            let place = |pages: f64, home: usize| -> Vec<f64> {
                let mut v = vec![0.0; nodes];
                match spec.memory {
                    MemoryPlacement::FirstTouch => v[home] = pages,
                    MemoryPlacement::Node(n) => v[n as usize] = pages,
                    MemoryPlacement::Interleave | MemoryPlacement::InterleaveNodes(_) => {
                        let over = spec.memory.interleave_nodes(nodes).unwrap_or_default();
                        for &n in &over {
                            v[n] = pages / over.len() as f64;
                        }
                    }
                }
                v
            };
            let pid = self.apps[ai].pid;
            let interleaved = matches!(
                spec.memory,
                MemoryPlacement::Interleave | MemoryPlacement::InterleaveNodes(_)
            );
            if !self.apps[ai].allocated {
                let main = self.apps[ai].threads.first().copied();
                let home = node_of(main.and_then(|t| self.threads[t].cpu));
                let pages = (spec.shared_bytes as f64 / PAGE).ceil();
                self.apps[ai].shared_pages = place(pages, home);
                self.apps[ai].allocated = true;
                self.events
                    .touched(pid, &self.apps[ai].shared_pages, home, interleaved);
            }
            for k in 0..self.apps[ai].threads.len() {
                let t = self.apps[ai].threads[k];
                if self.threads[t].allocated || self.threads[t].cpu.is_none() {
                    continue;
                }
                let ws = spec
                    .phases
                    .iter()
                    .map(|p| p.model.working_set)
                    .max()
                    .unwrap_or(0);
                let home = node_of(self.threads[t].cpu);
                self.threads[t].pages = place((ws as f64 / PAGE).ceil(), home);
                self.threads[t].allocated = true;
                self.events
                    .touched(pid, &self.threads[t].pages, home, interleaved);
            }
        }
    }
}
