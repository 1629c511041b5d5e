//! A placement policy written outside numaplace, tried against the known
//! ones in the simulator: the worked example of docs/writing-a-policy.md.
//!
//! `memory-home` runs each process on the node that holds most of its
//! memory, a process at a time, biggest first, as long as that node has a
//! CPU left per thread; the others stay where Linux puts them. It reads
//! only memory per node (no counters), so it also runs unchanged on a live
//! host.
//!
//! ```sh
//! cargo run --release -p numaplace-sim --example custom_policy            # default scenario, 5 seeds
//! cargo run --release -p numaplace-sim --example custom_policy -- npb-westmere 3
//! ```

use std::collections::HashMap;

use numaplace_model::task::printable;
use numaplace_model::{Action, CpuSet, Plan, TaskId};
use numaplace_policy::{Needs, Policy, PolicyKind, View};
use numaplace_sim::Machine;
use numaplace_sim::run::{Driver, RunOptions, mean_rsd, run};

/// The policy's state: what it pinned, so that it knows its own pins
/// from a thread's own choice ([`View::placeable`]).
#[derive(Default)]
pub(crate) struct MemoryHome {
    ours: HashMap<TaskId, CpuSet>,
}

impl Policy for MemoryHome {
    fn name(&self) -> &'static str {
        "memory-home"
    }

    fn needs(&self) -> Needs {
        Needs {
            counters: false,
            memory: true,
            samples: false,
            page_sets: false,
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let (topology, s) = (view.topology, view.snapshot);
        let mut plan = Plan::default();
        // Free CPUs per node (kernel node id), taken as processes are placed.
        let mut room: HashMap<u32, usize> = topology
            .nodes()
            .iter()
            .map(|n| (n.os_id, n.span.len()))
            .collect();
        // Processes with their memory per node, the biggest first.
        let mut groups: Vec<_> = s
            .groups
            .iter()
            .filter(|g| view.managed.contains(&g.pid))
            .filter_map(|g| Some((g, g.memory_total()?)))
            .collect();
        groups.sort_by_key(|(g, m)| (std::cmp::Reverse(m.values().sum::<u64>()), g.pid));
        for (g, memory) in groups {
            let Some((&home, &bytes)) = memory
                .iter()
                .max_by_key(|&(n, b)| (*b, std::cmp::Reverse(*n)))
            else {
                continue;
            };
            let threads: Vec<_> = g
                .threads
                .iter()
                .filter_map(|&tid| s.task(tid))
                .filter(|t| view.placeable(t, &self.ours))
                .collect();
            let (Some(node), Some(free)) = (topology.node_by_os_id(home), room.get_mut(&home))
            else {
                continue;
            };
            if threads.is_empty() || threads.len() > *free {
                continue;
            }
            *free -= threads.len();
            for t in threads {
                self.ours.insert(t.id(), node.span.clone());
                if t.allowed_cpus != node.span {
                    plan.push(
                        Action::Pin {
                            task: t.id(),
                            tgid: g.pid,
                            cpus: node.span.clone(),
                        },
                        // Names come from /proc: printable() escapes them.
                        format!(
                            "memory-home: {} (pid {}) has {} MiB of its memory on node {home}",
                            printable(&g.label()),
                            g.pid,
                            bytes >> 20
                        ),
                    );
                }
            }
        }
        plan
    }
}

/// Mean application run time of `policy` on `scenario` over `seeds`.
pub(crate) fn mean_runtime(
    machine: &Machine,
    scenario: &numaplace_sim::workload::Workload,
    policy: &dyn Fn() -> Driver<'static>,
    seeds: u64,
) -> (f64, f64) {
    let times: Vec<f64> = (0..seeds)
        .map(|seed| {
            let opts = RunOptions {
                seed,
                ..RunOptions::default()
            };
            let r = run(machine, scenario, policy(), &opts, &mut |_| {});
            r.mean_runtime_s().unwrap_or(r.makespan_s)
        })
        .collect();
    mean_rsd(&times)
}

#[allow(dead_code)] // the test that includes this file has its own entry
fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "default".into());
    let seeds: u64 = args
        .next()
        .map_or(5, |s| s.parse().expect("seeds: a number"));
    let scenario = numaplace_sim::scenario::builtin(&name)
        .unwrap_or_else(|| panic!("no built-in scenario {name:?}: see `numaplace scenarios`"))
        .expect("the built-in scenarios parse");
    let machine = Machine::preset(&scenario.machine).expect("a built-in scenario names a preset");
    static DINO: std::sync::LazyLock<PolicyKind> =
        std::sync::LazyLock::new(|| PolicyKind::from_name("dino").unwrap());
    static DEFAULT: std::sync::LazyLock<PolicyKind> =
        std::sync::LazyLock::new(|| PolicyKind::from_name("default").unwrap());
    let drivers: [(&str, &dyn Fn() -> Driver<'static>); 3] = [
        ("default", &|| Driver::Policy(&DEFAULT)),
        ("dino", &|| Driver::Policy(&DINO)),
        ("memory-home", &|| Driver::Built {
            name: "memory-home",
            policy: Box::new(MemoryHome::default()),
        }),
    ];
    println!(
        "scenario {name} on {}, {seeds} seeds: mean application run time",
        scenario.machine
    );
    let mut base = None;
    for (label, driver) in drivers {
        let (mean, rsd) = mean_runtime(&machine, &scenario, driver, seeds);
        let base = *base.get_or_insert(mean);
        println!(
            "  {label:<12} {mean:>8.2} s  {:>+6.1} % vs default  (RSD {rsd:.1} %)",
            100.0 * (mean / base - 1.0)
        );
    }
}
