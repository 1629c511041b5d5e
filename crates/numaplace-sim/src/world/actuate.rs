//! The world as an actuator: pins and memory moves land on the model's
//! placement and page state.

use super::*;

impl World {
    pub(super) fn find_thread(&self, id: TaskId) -> Option<usize> {
        self.threads
            .iter()
            .position(|t| t.alive && !t.done && t.tid == id.tid && t.start_ticks == id.start_time)
    }

    pub(super) fn find_app(&self, id: TaskId) -> Option<usize> {
        self.apps.iter().position(|a| {
            a.status == AppStatus::Running && a.pid == id.tid && a.start_ticks == id.start_time
        })
    }

    /// The application and the dense node a memory move names, or what
    /// to answer: the process is gone, or the node does not exist.
    pub(super) fn memory_target(
        &self,
        process: TaskId,
        to_node: u32,
    ) -> Result<(usize, usize), Outcome> {
        let ai = self.find_app(process).ok_or(Outcome::Gone)?;
        let node = self.dense_node(to_node).ok_or_else(|| Outcome::Refused {
            errno: "ENODEV".into(),
            why: format!("node {to_node} does not exist"),
        })?;
        Ok((ai, node))
    }

    pub(super) fn dense_node(&self, os: u32) -> Option<usize> {
        self.machine.topology.node_by_os_id(os).map(|n| n.id)
    }

    pub(super) fn move_memory(
        &mut self,
        ai: usize,
        node: usize,
        max_pages: Option<u64>,
    ) -> PageCounts {
        let mut budget = max_pages.map_or(f64::INFINITY, |m| m as f64);
        let mut counts = PageCounts::default();
        let ids = self.apps[ai].threads.clone();
        for t in ids {
            counts.already += self.threads[t].pages[node] as u64;
            let moved = self.move_pages_of(t, node, budget);
            counts.moved += moved as u64;
            budget -= moved;
        }
        // The shared area.
        let nodes = self.apps[ai].shared_pages.len();
        counts.already += self.apps[ai].shared_pages[node] as u64;
        for n in 0..nodes {
            if n == node || budget <= 0.0 {
                continue;
            }
            let take = self.apps[ai].shared_pages[n].min(budget).floor();
            self.apps[ai].shared_pages[n] -= take;
            self.apps[ai].shared_pages[node] += take;
            self.charge_copy(n, node, take);
            counts.moved += take as u64;
            budget -= take;
        }
        self.totals.pages_migrated += counts.moved;
        counts
    }

    pub(super) fn move_window(
        &mut self,
        ai: usize,
        address: u64,
        before: u64,
        after: u64,
        node: usize,
    ) -> Outcome {
        let spec = &self.workload.apps[ai];
        let page = address / PAGE as u64;
        let window = |start: u64, len_pages: u64| -> f64 {
            let lo = page.saturating_sub(before).max(start / PAGE as u64);
            let hi = (page + after).min(start / PAGE as u64 + len_pages.max(1) - 1);
            (hi + 1).saturating_sub(lo) as f64
        };
        if address >= SHARED_BASE && address < SHARED_BASE + spec.shared_bytes.max(1) {
            let total: f64 = self.apps[ai].shared_pages.iter().sum();
            let w = window(SHARED_BASE, (spec.shared_bytes as f64 / PAGE).ceil() as u64);
            let mut counts = PageCounts::default();
            if total > 0.0 {
                let frac = w / total;
                for n in 0..self.apps[ai].shared_pages.len() {
                    let part = self.apps[ai].shared_pages[n] * frac;
                    if n == node {
                        counts.already += part as u64;
                    } else {
                        self.apps[ai].shared_pages[n] -= part;
                        self.apps[ai].shared_pages[node] += part;
                        self.charge_copy(n, node, part);
                        counts.moved += part.round() as u64;
                    }
                }
            }
            self.totals.pages_migrated += counts.moved;
            return Outcome::Pages(counts);
        }
        if address >= PRIVATE_BASE {
            let k = ((address - PRIVATE_BASE) / PRIVATE_STRIDE) as usize;
            let base = PRIVATE_BASE + k as u64 * PRIVATE_STRIDE;
            if let Some(&t) = self.apps[ai].threads.get(k) {
                let total: f64 = self.threads[t].pages.iter().sum();
                if address < base + (total * PAGE) as u64 && total > 0.0 {
                    let w = window(base, total as u64);
                    let already = self.threads[t].pages[node] * w / total;
                    let want = w - already;
                    let moved = self.move_pages_of(t, node, want);
                    self.totals.pages_migrated += moved as u64;
                    return Outcome::Pages(PageCounts {
                        moved: moved as u64,
                        already: already as u64,
                        ..PageCounts::default()
                    });
                }
            }
        }
        Outcome::Pages(PageCounts {
            failed: before + after + 1,
            ..PageCounts::default()
        })
    }
}

impl World {
    /// Whether the simulated kernel balances between nodes now.
    pub fn balancing_on(&self) -> bool {
        self.workload.linux.numa_balancing
    }

    /// Turns the simulated kernel's automatic NUMA balancing on or off
    /// (`sysctl kernel.numa_balancing`). As in the kernel, each process's
    /// scanner keeps its state while it is off: its next scan was due
    /// `numa_balancing_scan_delay_ms` after it started, so a process older
    /// than that is scanned at the next step once it is on
    /// (`task_numa_work` compares `mm->numa_next_scan` with now), and the
    /// threads' fault statistics and preferred nodes are those of when it
    /// was last on.
    pub fn set_numa_balancing(&mut self, on: bool) {
        if self.workload.linux.numa_balancing != on {
            self.workload.linux.numa_balancing = on;
            self.totals.numa_balancing_changes += 1;
        }
    }
}

impl Actuator for World {
    fn affinity(&self, task: TaskId, _tgid: i32) -> Result<CpuSet, AffinityError> {
        let t = self.find_thread(task).ok_or(AffinityError::Gone)?;
        Ok(self.kernel_cpus(&self.threads[t].allowed))
    }

    fn apply(&mut self, action: &Action) -> Outcome {
        match action {
            Action::Pin { task, cpus, .. } => {
                let Some(t) = self.find_thread(*task) else {
                    return Outcome::Gone;
                };
                let topo = &self.machine.topology;
                let dense: CpuSet = cpus
                    .iter()
                    .filter_map(|c| topo.cpu_by_os_id(c).map(|c| c.id as u32))
                    .collect();
                let allowed = dense.intersection(&self.apps[self.threads[t].app].cpuset);
                if allowed.is_empty() {
                    return Outcome::Refused {
                        errno: "EINVAL".into(),
                        why: format!("none of CPUs {cpus} is in the task's cpuset"),
                    };
                }
                self.threads[t].allowed = allowed;
                let th = &self.threads[t];
                if th.cpu.is_none_or(|c| !th.allowed.contains(c as u32)) {
                    self.place(t);
                }
                Outcome::Done
            }
            Action::MoveMemory {
                process,
                to_node,
                max_pages,
            } => match self.memory_target(*process, *to_node) {
                Ok((ai, node)) => Outcome::Pages(self.move_memory(ai, node, *max_pages)),
                Err(o) => o,
            },
            Action::MoveWindow {
                process,
                address,
                pages_before,
                pages_after,
                to_node,
            } => match self.memory_target(*process, *to_node) {
                Ok((ai, node)) => self.move_window(ai, *address, *pages_before, *pages_after, node),
                Err(o) => o,
            },
            Action::KernelBalancing { on } => {
                self.set_numa_balancing(*on);
                Outcome::Done
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{AppSpec, LinuxModel, Phase, ThreadModel};

    fn world(cpus: Option<&str>) -> World {
        let w = Workload {
            name: "t".into(),
            description: String::new(),
            machine: "westmere-2s".into(),
            apps: vec![AppSpec {
                name: "app".into(),
                kind: AppKind::Process,
                threads: 2,
                phases: vec![Phase {
                    instructions: 1e12,
                    model: ThreadModel::microbench(64 << 20, 4096),
                }],
                shared_bytes: 4096,
                sharers: 2,
                memory: MemoryPlacement::Node(0),
                cpus: cpus.map(|c| c.parse().unwrap()),
                cpus_by_cgroup: false,
                start_s: 0.0,
                runs: 1,
                job: None,
            }],
            step_ms: 10.0,
            max_seconds: 1000.0,
            mismatch_percent: None,
            linux: LinuxModel::default(),
        };
        let mut world = World::new(Machine::preset("westmere-2s").unwrap(), w, 3);
        world.start_due();
        world.advance();
        world
    }

    fn on_node(w: &mut World, node: u32) -> u64 {
        let s = w.snapshot();
        s.groups[0].memory.as_ref().unwrap()[&node].total() / 4096
    }

    #[test]
    fn a_reused_tid_is_gone_and_a_pin_outside_the_cpuset_is_refused() {
        let mut w = world(Some("0-3"));
        let s = w.snapshot();
        let t = &s.tasks[0];
        let stale = TaskId {
            tid: t.tid,
            start_time: t.start_time + 1,
        };
        let pin = |task, cpus: &str| Action::Pin {
            task,
            tgid: t.tgid,
            cpus: cpus.parse().unwrap(),
        };
        assert_eq!(w.apply(&pin(stale, "1")), Outcome::Gone);
        assert!(matches!(
            w.apply(&pin(t.id(), "8-9")),
            Outcome::Refused { .. }
        ));
        assert_eq!(w.apply(&pin(t.id(), "1")), Outcome::Done);
        let s = w.snapshot();
        assert_eq!(s.tasks[0].allowed_cpus.to_list_string(), "1");
        assert_eq!(s.tasks[0].last_cpu, Some(1));
    }

    #[test]
    fn a_run_counts_its_moves_to_another_node_across_snapshots() {
        let mut w = world(None);
        let s = w.snapshot();
        let t = &s.tasks[0];
        let topo = w.machine.topology.clone();
        let node_of = |c: u32| topo.cpu_by_os_id(c).unwrap().node;
        let here = node_of(t.last_cpu.unwrap());
        let away = topo
            .cpus()
            .iter()
            .map(|c| c.os_id)
            .find(|&c| node_of(c) != here)
            .unwrap();
        let pin = |cpu: u32| Action::Pin {
            task: t.id(),
            tgid: t.tgid,
            cpus: [cpu].into_iter().collect(),
        };
        assert_eq!(w.apply(&pin(away)), Outcome::Done);
        // A snapshot takes the per-interval counters; the run's count stays.
        w.advance();
        let _ = w.snapshot();
        assert_eq!(w.apply(&pin(t.last_cpu.unwrap())), Outcome::Done);
        w.advance();
        let _ = w.snapshot();
        assert_eq!(w.app_runs()[0].node_migrations, 2);
        assert_eq!(w.totals().node_migrations, 2);
    }

    #[test]
    fn memory_moves_respect_their_limit_and_windows_their_region() {
        let mut w = world(None);
        let s = w.snapshot();
        let process = s.groups[0].id();
        // 2 x 64 MiB private + one shared page.
        assert_eq!(on_node(&mut w, 0), 2 * 16384 + 1);
        let o = w.apply(&Action::MoveMemory {
            process,
            to_node: 1,
            max_pages: Some(1000),
        });
        let Outcome::Pages(p) = o else {
            panic!("{o:?}")
        };
        assert_eq!((p.moved, p.already), (1000, 0));
        assert_eq!(on_node(&mut w, 1), 1000);
        // A window of 10 + 1 + 10 pages in thread 1's region.
        let address = PRIVATE_BASE + PRIVATE_STRIDE + 100 * 4096;
        let o = w.apply(&Action::MoveWindow {
            process,
            address,
            pages_before: 10,
            pages_after: 10,
            to_node: 1,
        });
        let Outcome::Pages(p) = o else {
            panic!("{o:?}")
        };
        assert!(p.moved + p.already <= 21 && p.moved > 0, "{p:?}");
        // An address in no region moves nothing.
        let o = w.apply(&Action::MoveWindow {
            process,
            address: 0x42,
            pages_before: 0,
            pages_after: 0,
            to_node: 1,
        });
        assert_eq!(
            o,
            Outcome::Pages(PageCounts {
                failed: 1,
                ..PageCounts::default()
            })
        );
        // The rest, and a node that does not exist.
        let o = w.apply(&Action::MoveMemory {
            process,
            to_node: 1,
            max_pages: None,
        });
        assert!(matches!(o, Outcome::Pages(_)));
        assert_eq!(on_node(&mut w, 0), 0);
        let o = w.apply(&Action::MoveMemory {
            process,
            to_node: 7,
            max_pages: None,
        });
        assert!(matches!(o, Outcome::Refused { .. }));
        assert_eq!(w.totals().pages_migrated, 2 * 16384 + 1);
    }
}
