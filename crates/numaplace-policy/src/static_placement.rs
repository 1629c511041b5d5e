//! `static`: a fixed placement, written down once (by hand, or from the
//! simulator's oracle) and held every round.
//!
//! Each pin names a process by its `comm` (or a VM by its label,
//! `vm:NAME`), one of its threads by index in tid order, and the CPUs it
//! goes to; each memory entry names a process and the node its memory goes
//! to. The policy keeps no state: every round it looks again at what runs,
//! so a process that restarts (new pid, new threads) is pinned again as
//! soon as it is seen, and a thread that drifted is put back.
//!
//! Entries that cannot apply are skipped silently, every round, since a
//! policy has no log of its own (the config loader is the place to warn):
//! a pin whose CPUs are empty or not all on the machine, a memory entry
//! for a node the machine does not have, a thread index past the process's
//! last thread.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use numaplace_model::task::printable;
use numaplace_model::{Action, CpuSet, Plan, TaskGroup};

use crate::{Needs, Policy, View};

/// The `static` policy's parameters: `[[policy.pins]]` and
/// `[[policy.memory]]` tables in the config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct StaticParams {
    /// Threads to pin. When several pins name the same thread of the same
    /// process, the first wins.
    pub pins: Vec<StaticPin>,
    /// Processes whose memory goes to one node. When several entries name
    /// the same process, the first naming a node of the machine wins.
    pub memory: Vec<StaticMemory>,
}

/// One thread on fixed CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StaticPin {
    /// The process: its `comm` (the kernel's 15-byte name, as `ps -o comm`
    /// shows it) or, for a virtual machine, its label `vm:NAME`. Every
    /// managed process of that name gets the pin.
    pub process: String,
    /// Which thread: its index among the process's threads in increasing
    /// tid order (0 is usually the main thread).
    pub thread: usize,
    /// The CPUs, kernel ids in list syntax (`"4"`, `"0-3,8"`). A pin naming
    /// a CPU the machine does not have is ignored.
    pub cpus: CpuSet,
}

/// One process's memory on a fixed node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StaticMemory {
    /// The process, as in a pin: `comm` or VM label.
    pub process: String,
    /// The node its memory goes to, kernel id. A node the machine does not
    /// have is ignored.
    pub node: u32,
}

/// The `static` policy. See the module documentation.
pub struct StaticPlacement {
    params: StaticParams,
}

impl StaticPlacement {
    /// The policy with `params`.
    pub fn new(params: StaticParams) -> Self {
        StaticPlacement { params }
    }
}

fn names(g: &TaskGroup, process: &str) -> bool {
    g.comm == process || g.label() == process
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

impl Policy for StaticPlacement {
    fn name(&self) -> &'static str {
        "static"
    }

    /// Once a second: a restarted process is pinned again within a second.
    fn default_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }

    /// No counters ever; memory per node only to know whether memory
    /// entries still have pages to move.
    fn needs(&self) -> Needs {
        Needs {
            counters: false,
            memory: !self.params.memory.is_empty(),
            samples: false,
            page_sets: false,
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let (t, s) = (view.topology, view.snapshot);
        let mut plan = Plan::default();
        for g in s.groups.iter().filter(|g| view.managed.contains(&g.pid)) {
            let mut pinned: HashSet<usize> = HashSet::new();
            for pin in self.params.pins.iter().filter(|p| names(g, &p.process)) {
                if pin.cpus.is_empty() || !pin.cpus.is_subset(t.span()) {
                    continue; // not on this machine: skipped (see the module docs)
                }
                if !pinned.insert(pin.thread) {
                    continue; // an earlier pin named this thread
                }
                let Some(task) = g.threads.get(pin.thread).and_then(|&tid| s.task(tid)) else {
                    continue;
                };
                if task.allowed_cpus == pin.cpus {
                    continue;
                }
                plan.push(
                    Action::Pin {
                        task: task.id(),
                        tgid: g.pid,
                        cpus: pin.cpus.clone(),
                    },
                    format!(
                        "static placement: thread {} of {} on CPUs {}",
                        pin.thread,
                        printable(&pin.process),
                        pin.cpus
                    ),
                );
            }
            // The first entry naming the process and a node of this machine.
            let entry = (self.params.memory.iter())
                .find(|m| names(g, &m.process) && t.node_by_os_id(m.node).is_some());
            // Memory per node unknown: nothing to compare, nothing asked.
            if let Some((m, mem)) = entry.and_then(|m| Some((m, g.memory_total()?))) {
                let total: u64 = mem.values().sum();
                let elsewhere: u64 = (mem.iter())
                    .filter(|&(&n, _)| n != m.node)
                    .map(|(_, &b)| b)
                    .sum();
                if elsewhere > 0 {
                    plan.push(
                        Action::MoveMemory {
                            process: g.id(),
                            to_node: m.node,
                            max_pages: None,
                        },
                        format!(
                            "static placement: memory of {} on node {} ({} of its {} \
                             is on other nodes)",
                            printable(&m.process),
                            m.node,
                            mib(elsewhere),
                            mib(total)
                        ),
                    );
                }
            }
        }
        plan
    }
}

impl crate::Params for StaticParams {}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use numaplace_model::{
        GroupKind, MachineReadings, NodeMemory, Snapshot, Task, TaskId, Topology,
    };

    use super::*;

    const MIB: u64 = 1 << 20;

    fn topo() -> Topology {
        // Node 0 = CPUs 0-3, node 1 = CPUs 4-7.
        Topology::synthetic("pack:2 numa:1 core:4 pu:1").unwrap()
    }

    fn task(tid: i32, tgid: i32, start: u64, allowed: &str) -> Task {
        Task {
            tid,
            tgid,
            start_time: start,
            comm: "mcf".into(),
            state: 'R',
            last_cpu: Some(0),
            allowed_cpus: CpuSet::parse_list(allowed).unwrap(),
            allowed_mems: CpuSet::parse_list("0-1").unwrap(),
            confined_cpus: None,
            manager: None,
            utime: 0,
            stime: 0,
            vcpu: None,
        }
    }

    fn group(pid: i32, comm: &str, threads: Vec<i32>, memory: &[(u32, u64)]) -> TaskGroup {
        TaskGroup {
            pid,
            start_time: 1000 + pid as u64,
            comm: comm.into(),
            cmdline: vec![comm.into()],
            cgroup: None,
            kind: GroupKind::Process,
            threads,
            memory: Some(
                memory
                    .iter()
                    .map(|&(n, b)| {
                        (
                            n,
                            NodeMemory {
                                anon: b,
                                file: 0,
                                huge: 0,
                            },
                        )
                    })
                    .collect(),
            ),
        }
    }

    /// mcf (pid 100): threads 100, 101, 102 on every CPU, memory split
    /// between the nodes.
    fn snapshot(pid: i32) -> Snapshot {
        let tids = vec![pid, pid + 1, pid + 2];
        Snapshot {
            seq: 1,
            time_unix_ns: 1_000_000_000,
            interval_ns: 1_000_000_000,
            tasks: tids
                .iter()
                .map(|&t| task(t, pid, 5000 + t as u64, "0-7"))
                .collect(),
            groups: vec![group(pid, "mcf", tids, &[(0, 100 * MIB), (1, 28 * MIB)])],
            counters: BTreeMap::new(),
            machine: MachineReadings::default(),
            ..Snapshot::default()
        }
    }

    fn decide(p: &mut StaticPlacement, s: &Snapshot) -> Plan {
        let managed: BTreeSet<i32> = s.groups.iter().map(|g| g.pid).collect();
        p.decide(&View {
            topology: &topo(),
            snapshot: s,
            managed: &managed,
        })
    }

    fn pin(process: &str, thread: usize, cpus: &str) -> StaticPin {
        StaticPin {
            process: process.into(),
            thread,
            cpus: CpuSet::parse_list(cpus).unwrap(),
        }
    }

    fn pins_of(plan: &Plan) -> Vec<(TaskId, String)> {
        (plan.decisions.iter())
            .filter_map(|d| match &d.action {
                Action::Pin { task, cpus, .. } => Some((*task, cpus.to_string())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn pins_threads_by_index_and_says_why() {
        let mut p = StaticPlacement::new(StaticParams {
            pins: vec![
                pin("mcf", 2, "4"),
                pin("mcf", 0, "0-1"),
                pin("other", 0, "3"),
            ],
            memory: vec![],
        });
        let s = snapshot(100);
        let plan = decide(&mut p, &s);
        let pins = pins_of(&plan);
        assert_eq!(
            pins,
            vec![
                (s.tasks[2].id(), "4".to_string()),
                (s.tasks[0].id(), "0-1".to_string())
            ]
        );
        assert_eq!(
            plan.decisions[0].reason,
            "static placement: thread 2 of mcf on CPUs 4"
        );
        for d in &plan.decisions {
            assert_eq!(d.action.pid(), 100);
        }
    }

    #[test]
    fn threads_already_in_place_are_left_alone() {
        let mut p = StaticPlacement::new(StaticParams {
            pins: vec![pin("mcf", 1, "5"), pin("mcf", 2, "6")],
            memory: vec![],
        });
        let mut s = snapshot(100);
        s.tasks[1].allowed_cpus = CpuSet::parse_list("5").unwrap();
        let pins = pins_of(&decide(&mut p, &s));
        assert_eq!(pins, vec![(s.tasks[2].id(), "6".to_string())]);
    }

    #[test]
    fn a_restarted_process_is_pinned_again() {
        let mut p = StaticPlacement::new(StaticParams {
            pins: vec![pin("mcf", 0, "4")],
            memory: vec![],
        });
        let mut s = snapshot(100);
        s.tasks[0].allowed_cpus = CpuSet::parse_list("4").unwrap();
        assert!(decide(&mut p, &s).is_empty(), "in place");
        let s2 = snapshot(300); // restarted: new pid, new threads
        let pins = pins_of(&decide(&mut p, &s2));
        assert_eq!(pins, vec![(s2.tasks[0].id(), "4".to_string())]);
        assert_eq!(pins[0].0.tid, 300);
    }

    #[test]
    fn pins_off_the_machine_and_missing_threads_are_skipped() {
        let mut p = StaticPlacement::new(StaticParams {
            pins: vec![
                pin("mcf", 0, "7-8"), // CPU 8 is not on the machine
                pin("mcf", 1, ""),    // no CPU at all
                pin("mcf", 9, "1"),   // no thread 9
                pin("mcf", 2, "2"),
                pin("mcf", 2, "3"), // the first pin for thread 2 wins
            ],
            memory: vec![],
        });
        let s = snapshot(100);
        let pins = pins_of(&decide(&mut p, &s));
        assert_eq!(pins, vec![(s.tasks[2].id(), "2".to_string())]);
    }

    #[test]
    fn unmanaged_processes_are_not_touched() {
        let mut p = StaticPlacement::new(StaticParams {
            pins: vec![pin("mcf", 0, "4")],
            memory: vec![StaticMemory {
                process: "mcf".into(),
                node: 1,
            }],
        });
        let s = snapshot(100);
        let plan = p.decide(&View {
            topology: &topo(),
            snapshot: &s,
            managed: &BTreeSet::new(),
        });
        assert!(plan.is_empty());
    }

    #[test]
    fn memory_moves_while_pages_are_off_the_node() {
        let mut p = StaticPlacement::new(StaticParams {
            pins: vec![],
            memory: vec![
                StaticMemory {
                    process: "mcf".into(),
                    node: 1,
                },
                StaticMemory {
                    process: "mcf".into(),
                    node: 0, // a second entry for mcf: the first wins
                },
                StaticMemory {
                    process: "mcf".into(),
                    node: 7, // no such node
                },
            ],
        });
        assert!(p.needs().memory && !p.needs().counters);
        let s = snapshot(100);
        let plan = decide(&mut p, &s);
        assert_eq!(plan.decisions.len(), 1, "{plan:#?}");
        assert_eq!(
            plan.decisions[0].action,
            Action::MoveMemory {
                process: s.groups[0].id(),
                to_node: 1,
                max_pages: None
            }
        );
        assert_eq!(
            plan.decisions[0].reason,
            "static placement: memory of mcf on node 1 (100 MiB of its 128 MiB is on other nodes)"
        );

        // All on node 1 now: nothing to do.
        let mut s = snapshot(100);
        s.groups[0] = group(100, "mcf", vec![100, 101, 102], &[(1, 128 * MIB)]);
        assert!(decide(&mut p, &s).is_empty());
        // Memory unknown: nothing to compare.
        s.groups[0].memory = None;
        assert!(decide(&mut p, &s).is_empty());
    }

    #[test]
    fn vms_are_named_by_label() {
        let mut p = StaticPlacement::new(StaticParams {
            pins: vec![pin("vm:web1", 1, "6-7")],
            memory: vec![],
        });
        let mut s = snapshot(100);
        s.groups[0].comm = "qemu-system-x86".into();
        s.groups[0].kind = GroupKind::Vm {
            name: Some("web1".into()),
            accel: "KVM".into(),
            evidence: "kvm-vcpu fds".into(),
        };
        let pins = pins_of(&decide(&mut p, &s));
        assert_eq!(pins, vec![(s.tasks[1].id(), "6-7".to_string())]);
        // ... and by comm too.
        let mut p = StaticPlacement::new(StaticParams {
            pins: vec![pin("qemu-system-x86", 0, "0")],
            memory: vec![],
        });
        assert_eq!(pins_of(&decide(&mut p, &s)).len(), 1);
    }

    #[test]
    fn needs_and_interval() {
        let p = StaticPlacement::new(StaticParams::default());
        assert_eq!(
            p.needs(),
            Needs {
                counters: false,
                memory: false,
                samples: false,
                page_sets: false
            }
        );
        assert_eq!(p.default_interval(), std::time::Duration::from_secs(1));
        assert_eq!(p.name(), "static");
    }
}
