//! The oracle for a scenario: the best launch-time binding of its threads
//! to CPUs, judged by simulating each candidate (seed 000's
//! "hand-optimized" binding, seed 004's best static placement).

use crate::machine::Machine;
use crate::oracle::{OracleProblem, search};
use crate::run::{Driver, RunOptions, run};
use crate::workload::{MemoryPlacement, Workload};

/// The best binding found, and how.
#[derive(Debug, Clone)]
pub struct Best {
    /// `cpus[app][thread]`: dense CPU ids.
    pub cpus: Vec<Vec<usize>>,
    /// Mean run time it gives, seconds.
    pub runtime_s: f64,
    pub method: String,
}

/// Searches the static placements of `workload` on `machine`.
///
/// Threads of one application are interchangeable except its first, which
/// allocates the shared area. Packages count as interchangeable only when
/// no memory is bound to a node and every pair of distinct nodes is as
/// far as every other (a 2-socket machine): then swapping sockets changes
/// nothing.
pub fn best_static(
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    _workers: usize,
) -> Result<Best, String> {
    let t = &machine.topology;
    let threads = workload.threads();
    if threads > t.cpus().len() {
        return Err(format!(
            "{threads} threads do not fit {} CPUs one per CPU",
            t.cpus().len()
        ));
    }
    let mut classes = Vec::new();
    let mut allowed = Vec::new();
    for (ai, a) in workload.apps.iter().enumerate() {
        for k in 0..a.threads {
            classes.push(2 * ai as u32 + u32::from(k > 0));
            allowed.push(a.cpus.clone());
        }
    }
    let nn = t.nodes().len();
    let off: Vec<u32> = (0..nn)
        .flat_map(|a| (0..nn).filter(move |&b| b != a).map(move |b| (a, b)))
        .map(|(a, b)| t.distance(a, b))
        .collect();
    let uniform = off.windows(2).all(|w| w[0] == w[1]);
    let unbound = workload
        .apps
        .iter()
        .all(|a| !matches!(a.memory, MemoryPlacement::Node(_)) && a.cpus.is_none());
    let problem = OracleProblem {
        topology: t,
        classes,
        allowed,
        packages_symmetric: uniform && unbound,
        one_per_core: threads <= t.cores().len(),
    };
    let split = |placement: &[u32]| -> Vec<Vec<usize>> {
        let mut it = placement.iter();
        workload
            .apps
            .iter()
            .map(|a| {
                (0..a.threads)
                    .map(|_| *it.next().expect("one CPU per thread") as usize)
                    .collect()
            })
            .collect()
    };
    let mut cost = |placement: &[u32]| -> f64 {
        let r = run(
            machine,
            workload,
            Driver::Binding {
                name: "oracle",
                cpus: split(placement),
            },
            &RunOptions::default(),
            &mut |_| {},
        );
        r.mean_runtime_s().unwrap_or(f64::MAX)
    };
    let found = search(&problem, &mut cost, budget, 0).map_err(|e| e.to_string())?;
    Ok(Best {
        cpus: split(&found.placement),
        runtime_s: found.cost,
        method: found.method,
    })
}

/// The `static` policy's parameters that hold `best`'s placement: each
/// application's threads pinned to their CPUs (kernel ids), named by the
/// application's `comm` as the simulated processes carry it.
pub fn static_params(
    machine: &Machine,
    workload: &Workload,
    best: &Best,
) -> numaplace_policy::static_placement::StaticParams {
    use numaplace_policy::static_placement::{StaticParams, StaticPin};
    let cpus = machine.topology.cpus();
    let mut pins = Vec::new();
    for (a, app) in workload.apps.iter().enumerate() {
        for (k, &cpu) in best.cpus[a].iter().enumerate() {
            pins.push(StaticPin {
                process: crate::world::comm(&app.name),
                thread: k,
                cpus: std::iter::once(cpus[cpu].os_id).collect(),
            });
        }
    }
    StaticParams {
        pins,
        memory: Vec::new(),
    }
}
