//! What the world shows: the snapshot the live collector would take, and
//! the trace behind the report's plots.

use super::*;

use std::collections::BTreeSet;

use numaplace_model::{NumaFaults, Topology};

impl World {
    pub(super) fn sample_trace(&mut self) {
        let Some(trace) = self.trace.as_mut() else {
            return;
        };
        let every = (self.workload.max_seconds / 2000.0).max(self.step);
        if let Some(&last) = trace.times.last() {
            if self.time - last < every - 1e-9 {
                return;
            }
        }
        let n = trace.times.len();
        trace.times.push(self.time);
        let labels: Vec<(String, String)> = self
            .workload
            .apps
            .iter()
            .flat_map(|a| (0..a.threads).map(move |k| (a.name.clone(), format!("{}/{k}", a.name))))
            .collect();
        if trace.threads.is_empty() {
            trace.threads = labels
                .iter()
                .map(|(app, label)| ThreadTrace {
                    label: label.clone(),
                    app: app.clone(),
                    progress: Vec::new(),
                    cpu: Vec::new(),
                })
                .collect();
            trace.memory = self
                .workload
                .apps
                .iter()
                .map(|a| MemoryTrace {
                    app: a.name.clone(),
                    mib: Vec::new(),
                })
                .collect();
        }
        let mut slot = 0;
        for (ai, a) in self.apps.iter().enumerate() {
            let spec = &self.workload.apps[ai];
            let total = spec.instructions();
            let nodes = self.machine.topology.nodes().len();
            let mut mib = vec![0.0; nodes];
            for k in 0..spec.threads as usize {
                let tt = &mut trace.threads[slot + k];
                let th = (a.status == AppStatus::Running).then(|| &self.threads[a.threads[k]]);
                match th {
                    Some(th) if !th.done => {
                        tt.progress.push(Some((th.run_done / total) as f32));
                        tt.cpu.push(th.cpu.map(|c| c as u32));
                        for (m, p) in mib.iter_mut().zip(&th.pages) {
                            *m += p * PAGE / 1048576.0;
                        }
                    }
                    Some(th) => {
                        tt.progress.push(Some(1.0));
                        tt.cpu.push(None);
                        for (m, p) in mib.iter_mut().zip(&th.pages) {
                            *m += p * PAGE / 1048576.0;
                        }
                    }
                    None => {
                        tt.progress.push(None);
                        tt.cpu.push(None);
                    }
                }
                debug_assert_eq!(tt.progress.len(), n + 1);
            }
            if a.status == AppStatus::Running {
                for (m, p) in mib.iter_mut().zip(&a.shared_pages) {
                    *m += p * PAGE / 1048576.0;
                }
            }
            trace.memory[ai].mib.push(mib);
            slot += spec.threads as usize;
        }
    }

    pub(super) fn kernel_cpus(&self, dense: &CpuSet) -> CpuSet {
        let cpus = self.machine.topology.cpus();
        dense.iter().map(|c| cpus[c as usize].os_id).collect()
    }

    /// The snapshot the live collector would have taken now.
    pub fn snapshot(&mut self) -> Snapshot {
        let accs: Vec<Acc> = self
            .threads
            .iter_mut()
            .map(|t| std::mem::take(&mut t.acc))
            .collect();
        let samples = self.address_samples(self.samples_per_interval);
        let signatures = self.signature_records();
        let page_sets = self.page_set_records();
        let topo = &self.machine.topology;
        let interval = self.time - self.last_snapshot;
        let mut tasks = Vec::new();
        let mut groups = Vec::new();
        let mut counters = BTreeMap::new();
        let mut used = vec![0.0; topo.nodes().len()];
        let mut numa_faults = BTreeMap::new();
        let mut explicit_mempolicy = BTreeSet::new();
        // The simulated kernel keeps hinting-fault statistics only while its
        // automatic NUMA balancing runs, and only on machines of several
        // nodes (`numa_balancing`).
        let balancing = self.workload.linux.numa_balancing && topo.nodes().len() > 1;
        for (ai, a) in self.apps.iter().enumerate() {
            if a.status != AppStatus::Running {
                continue;
            }
            let spec = &self.workload.apps[ai];
            if spec.memory != MemoryPlacement::FirstTouch {
                explicit_mempolicy.insert(a.pid);
            }
            let mut mem = a.shared_pages.clone();
            let mut tids = Vec::new();
            for &t in &a.threads {
                let th = &self.threads[t];
                for (m, p) in mem.iter_mut().zip(&th.pages) {
                    *m += p;
                }
                if th.done {
                    continue;
                }
                tids.push(th.tid);
                tasks.push(Task {
                    tid: th.tid,
                    tgid: a.pid,
                    start_time: th.start_ticks,
                    comm: match spec.kind {
                        AppKind::Process => comm(&spec.name),
                        AppKind::Vm => format!("CPU {}/KVM", th.index),
                    },
                    state: 'R',
                    last_cpu: th.cpu.map(|c| topo.cpus()[c].os_id),
                    allowed_cpus: self.kernel_cpus(&th.allowed),
                    allowed_mems: topo.nodes().iter().map(|n| n.os_id).collect(),
                    confined_cpus: spec.cpus_by_cgroup.then(|| self.kernel_cpus(&a.cpuset)),
                    manager: None,
                    utime: (th.cpu_seconds * TICKS) as u64,
                    stime: 0,
                    vcpu: (spec.kind == AppKind::Vm).then_some(th.index),
                });
                counters.insert(th.tid, deltas(&accs[t], interval));
                if balancing {
                    numa_faults.insert(th.tid, task_faults(topo, &th.numa));
                }
            }
            for (u, m) in used.iter_mut().zip(&mem) {
                *u += m * PAGE;
            }
            groups.push(TaskGroup {
                pid: a.pid,
                start_time: a.start_ticks,
                comm: comm(&spec.name),
                cmdline: vec![spec.name.clone()],
                cgroup: Some(format!("/numaplace-sim/{}", spec.name)),
                kind: match spec.kind {
                    AppKind::Process => GroupKind::Process,
                    AppKind::Vm => GroupKind::Vm {
                        name: Some(spec.name.clone()),
                        accel: "KVM".into(),
                        evidence: "simulated".into(),
                    },
                },
                threads: tids,
                memory: Some(
                    mem.iter()
                        .enumerate()
                        .map(|(n, p)| {
                            (
                                topo.nodes()[n].os_id,
                                NodeMemory {
                                    anon: (p * PAGE) as u64,
                                    file: 0,
                                    huge: 0,
                                },
                            )
                        })
                        .collect(),
                ),
            });
        }
        let nodes = topo
            .nodes()
            .iter()
            .zip(&used)
            .map(|(n, u)| {
                (
                    n.os_id,
                    NodeMeminfo {
                        total: n.memory,
                        free: n.memory.saturating_sub(*u as u64),
                    },
                )
            })
            .collect();
        let energy = self.energy_since_snapshot();
        let running: Vec<i32> = groups.iter().map(|g: &TaskGroup| g.pid).collect();
        let (numastat, vmstat_numa, page_faults) = self.events.take(
            &self.machine.topology,
            &self.totals,
            &running,
            self.seq == 0,
        );
        let s = Snapshot {
            seq: self.seq,
            time_unix_ns: EPOCH_NS + (self.time * 1e9) as u64,
            interval_ns: (interval * 1e9) as u64,
            tasks,
            groups,
            counters,
            machine: MachineReadings {
                nodes,
                energy,
                resctrl: Vec::new(),
                clock_ticks: TICKS as u64,
                numa_balancing: Some(self.workload.linux.numa_balancing),
                uptime_ticks: Some((self.time * TICKS) as u64),
                numastat,
                vmstat_numa,
            },
            samples,
            signatures,
            page_sets,
            numa_faults,
            explicit_mempolicy,
            guest_hints: BTreeMap::new(),
            page_faults,
        };
        self.seq += 1;
        self.last_snapshot = self.time;
        s
    }
}

impl World {
    /// The machine's energy since the last snapshot, as a live host's RAPL
    /// deltas: none in the first round (nothing to take a difference
    /// from), no zone where the machine has no power model.
    fn energy_since_snapshot(&mut self) -> Vec<EnergyDelta> {
        if self.machine.params.power.is_none() {
            return Vec::new();
        }
        let joules = self.totals.energy_j - self.energy_at_snapshot_j;
        self.energy_at_snapshot_j = self.totals.energy_j;
        vec![EnergyDelta {
            zone: "sim".into(),
            name: "machine".into(),
            microjoules: (self.seq > 0).then(|| (joules * 1e6).round() as u64),
        }]
    }
}

/// A thread's hinting faults as a live host reads them from its `sched`:
/// whole counts per node (kernel id) and its preferred node.
fn task_faults(topo: &Topology, f: &autonuma::TaskFaults) -> NumaFaults {
    NumaFaults {
        memory: topo
            .nodes()
            .iter()
            .zip(f.memory())
            .map(|(n, &x)| (n.os_id, x.max(0.0).round() as u64))
            .collect(),
        preferred_node: f.preferred.map(|n| topo.nodes()[n].os_id),
    }
}

fn deltas(a: &Acc, interval: f64) -> CounterDeltas {
    let mut values = BTreeMap::new();
    values.insert(Counter::Instructions, a.instructions as u64);
    values.insert(Counter::Cycles, a.cycles as u64);
    values.insert(Counter::LlcReferences, a.llc_refs as u64);
    values.insert(Counter::LlcMisses, a.llc_misses as u64);
    values.insert(Counter::UncoreRequests, a.uncore_requests as u64);
    values.insert(Counter::UncoreOccupancy, a.uncore_occupancy as u64);
    values.insert(Counter::TaskClock, a.run_ns as u64);
    values.insert(Counter::CpuMigrations, a.migrations);
    let ns = (interval * 1e9) as u64;
    CounterDeltas {
        values,
        enabled_ns: ns,
        running_ns: ns,
    }
}
