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
///
/// A workload with more threads than CPUs whose applications run one
/// after the other (seed 000's NPB and SPEC sequences) is split into
/// groups of applications that overlap in time (as Linux's default runs
/// them); each group that fits the CPUs one thread per CPU is searched
/// alone with its share of the budget, and the bindings together are
/// judged by simulating the whole workload. Groups are found on the
/// default's timeline: a binding that made an application so much slower
/// that it met the next group would time-share CPUs, and the score would
/// show it.
pub fn best_static(
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    _workers: usize,
) -> Result<Best, String> {
    let cpus = machine.topology.cpus().len();
    let threads = workload.threads();
    if threads <= cpus {
        return search_together(machine, workload, budget);
    }
    let groups = time_groups(machine, workload);
    let widest = groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|&a| workload.apps[a].threads as usize)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    if groups.len() < 2 || widest > cpus {
        return Err(format!(
            "{threads} threads do not fit {cpus} CPUs one per CPU, and {widest} of them run \
             at the same time"
        ));
    }
    let mut binding = vec![Vec::new(); workload.apps.len()];
    let mut methods = Vec::new();
    let share = (budget / groups.len()).max(1);
    for g in &groups {
        let first = g
            .iter()
            .map(|&a| workload.apps[a].start_s)
            .fold(f64::MAX, f64::min);
        let sub = Workload {
            apps: g
                .iter()
                .map(|&a| {
                    let mut app = workload.apps[a].clone();
                    app.start_s -= first;
                    app
                })
                .collect(),
            ..workload.clone()
        };
        let best = search_together(machine, &sub, share)?;
        for (&a, c) in g.iter().zip(best.cpus) {
            binding[a] = c;
        }
        methods.push(best.method);
    }
    methods.dedup();
    let r = run(
        machine,
        workload,
        Driver::Binding {
            name: "oracle",
            cpus: binding.clone(),
        },
        &RunOptions::default(),
        &mut |_| {},
    );
    Ok(Best {
        cpus: binding,
        runtime_s: r.mean_runtime_s().unwrap_or(f64::MAX),
        method: format!(
            "{} groups of applications that run at different times, each searched alone ({})",
            groups.len(),
            methods.join("; ")
        ),
    })
}

/// The applications in groups that overlap in time when Linux's default
/// runs them (seed 0), in order of start: an application joins the group
/// before it if it starts before that group's last run has ended.
fn time_groups(machine: &Machine, workload: &Workload) -> Vec<Vec<usize>> {
    let r = run(
        machine,
        workload,
        Driver::Policy(&numaplace_policy::PolicyKind::Default),
        &RunOptions::default(),
        &mut |_| {},
    );
    let mut spans: Vec<(f64, f64, usize)> = workload
        .apps
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let end = r
                .runs
                .iter()
                .filter(|run| run.app == a.name)
                .map(|run| run.end_s.unwrap_or(f64::INFINITY))
                .fold(a.start_s, f64::max);
            (a.start_s, end, i)
        })
        .collect();
    spans.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.2.cmp(&y.2)));
    let mut groups: Vec<(f64, Vec<usize>)> = Vec::new();
    for (start, end, i) in spans {
        match groups.last_mut() {
            Some((until, g)) if start < *until => {
                g.push(i);
                *until = until.max(end);
            }
            _ => groups.push((end, vec![i])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// The search over placements of all the workload's threads at once.
fn search_together(machine: &Machine, workload: &Workload, budget: usize) -> Result<Best, String> {
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
