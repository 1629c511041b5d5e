//! The oracle's search for a scenario: the best launch-time binding of its threads
//! to CPUs and of their memory, judged by simulating each candidate
//! (\[Rao13\]'s "hand-optimized" binding, \[Blagodurov11\]'s best static placement).
//!
//! Memory is part of the placement, or policies that move it would beat
//! the yardstick: each application's memory goes on its threads' nodes
//! (first touch under the binding: each thread's private memory on its
//! node, the shared area on the first thread's), or, where its threads
//! span several nodes and that is faster, interleaved over those nodes.
//!
//! [`crate::oracle`] searches placements for a cost it is given; here the
//! cost is a simulation of the scenario (`judge.rs`), and where threads
//! outnumber CPUs the search is over CPU sets and balanced assignments
//! instead (`oversubscribed.rs`).

mod judge;
mod oversubscribed;

use std::sync::atomic::Ordering;

use crate::machine::Machine;
use crate::oracle::{OracleProblem, search_bounded};
use crate::outcome::RunResult;
use crate::run::{Driver, RunOptions, run};
use crate::workload::{MemoryPlacement, Workload};
pub use judge::{Best, with_memory};
use judge::{Judge, per_app, start_memory};
use oversubscribed::search_oversubscribed;

/// Searches the static placements of `workload` on `machine`.
///
/// Threads of one application are interchangeable except its first, which
/// allocates the shared area. Packages count as interchangeable only when
/// no application has a cpuset and every pair of distinct nodes is as far
/// as every other (a 2-socket machine): then swapping sockets changes
/// nothing, since the memory follows the threads.
///
/// A workload with more threads than CPUs that run at the same time
/// (\[Symbiosis-Bloom\]'s pairs and pools) time-shares CPUs under any placement: its
/// oracle is the best balanced assignment of threads to CPUs
/// (`oversubscribed::search_shared`).
///
/// A workload with more threads than CPUs whose applications run one
/// after the other (\[Rao13\]'s NPB and SPEC sequences) is split into
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
    workers: usize,
) -> Result<Best, String> {
    best_static_in(machine, workload, budget, workers, &RunOptions::default())
}

/// [`best_static`] judged in the world `world`'s seed and mismatch give
/// (`RunOptions::seed`, `RunOptions::mismatch`): under a mismatch the
/// oracle searches on the world's truth, not on the machine the policies
/// are told.
pub fn best_static_in(
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    workers: usize,
    world: &RunOptions,
) -> Result<Best, String> {
    let judge = Judge::new(machine, world);
    search_placements(&judge, workload, budget, workers, true)
}

/// The best launch-time binding of the threads alone, their memory where
/// the scenario puts it: \[Rao13\]'s "hand-optimized" binding, which kept
/// everything on node 0 as its experiments did. A yardstick for a policy
/// that moves threads only (BRM); [`best_static`] bounds every policy.
pub fn best_binding(
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    workers: usize,
) -> Result<Best, String> {
    let judge = Judge::new(machine, &RunOptions::default());
    search_placements(&judge, workload, budget, workers, false)
}

/// `free_memory`: memory is part of the placement (local or interleaved
/// over the threads' nodes); otherwise it stays as the scenario says.
///
/// Every simulation counts against `budget`: the search's candidates,
/// the interleaving trials, the run that finds the time groups and the
/// one that judges their joined binding. `Best::evaluations` says how
/// many ran.
fn search_placements(
    judge: &Judge,
    workload: &Workload,
    budget: usize,
    workers: usize,
    free_memory: bool,
) -> Result<Best, String> {
    let machine = judge.machine;
    let cpus = machine.topology.cpus().len();
    let threads = workload.threads();
    let budget = budget.max(1);
    if threads <= cpus {
        return search_together(judge, workload, budget, free_memory);
    }
    // Finding the time groups costs a simulation; with a budget of one
    // the whole workload is one group.
    let groups = if budget > 1 {
        time_groups(judge, workload)
    } else {
        vec![(0..workload.apps.len()).collect()]
    };
    let widest = groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|&a| workload.apps[a].threads as usize)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    let left = budget.saturating_sub(judge.spent());
    // Each group needs a simulation at least, and the joined binding one.
    if groups.len() < 2 || widest > cpus || left < groups.len() + 1 {
        return search_oversubscribed(judge, workload, left, workers, free_memory);
    }
    let mut binding = vec![Vec::new(); workload.apps.len()];
    let mut memory: Vec<MemoryPlacement> = workload.apps.iter().map(|a| a.memory).collect();
    let mut methods = Vec::new();
    // One simulation kept for judging the joined binding.
    let share = (left.saturating_sub(1) / groups.len()).max(1);
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
        let best = search_together(judge, &sub, share, free_memory)?;
        for ((&a, c), m) in g.iter().zip(best.cpus).zip(best.memory) {
            binding[a] = c;
            memory[a] = m;
        }
        methods.push(best.method);
    }
    methods.dedup();
    let runtime = judge.binding(
        &with_memory(workload, &memory),
        binding.clone(),
        f64::INFINITY,
    );
    Ok(Best {
        cpus: binding,
        memory,
        sets: None,
        runtime_s: runtime,
        method: format!(
            "{} groups of applications that run at different times, each searched alone ({})",
            groups.len(),
            methods.join("; ")
        ),
        evaluations: judge.spent(),
    })
}

/// The applications in groups that overlap in time when Linux's default
/// runs them (the judge's world), in order of start: an application joins
/// the group before it if it starts before that group's last run has
/// ended. One simulation.
fn time_groups(judge: &Judge, workload: &Workload) -> Vec<Vec<usize>> {
    judge.spent.fetch_add(1, Ordering::Relaxed);
    let r = run(
        judge.machine,
        workload,
        Driver::Policy(&numaplace_policy::PolicyKind::Default),
        &RunOptions {
            seed: judge.seed,
            mismatch: judge.mismatch,
            ..RunOptions::default()
        },
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

/// The search over placements of all the workload's threads at once,
/// within `budget` simulations (interleaving trials included).
fn search_together(
    judge: &Judge,
    workload: &Workload,
    budget: usize,
    free_memory: bool,
) -> Result<Best, String> {
    let machine = judge.machine;
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
    // With the memory free it follows the binding (first touch), so only
    // cpusets tie an application to a package; else bound memory does too.
    let unbound = workload.apps.iter().all(|a| {
        a.cpus.is_none() && (free_memory || !matches!(a.memory, MemoryPlacement::Node(_)))
    });
    let problem = OracleProblem {
        topology: t,
        classes,
        allowed,
        packages_symmetric: uniform && unbound,
        one_per_core: threads <= t.cores().len(),
    };
    let split = |placement: &[u32]| per_app(workload, placement.iter().map(|&c| c as usize));
    // The binding is searched with every application's memory local (or
    // where the scenario puts it); some of the budget is kept for the
    // interleaving trials after it, at most one per application.
    let local = start_memory(workload, free_memory);
    let trials = if free_memory {
        workload.apps.len().min(budget / 4)
    } else {
        0
    };
    let placed = with_memory(workload, &local);
    let mut cost = |placement: &[u32], bound: f64| judge.binding(&placed, split(placement), bound);
    let before = judge.spent();
    let found = search_bounded(&problem, &mut cost, (budget - trials).max(1), 0)
        .map_err(|e| e.to_string())?;
    let cpus = split(&found.placement);
    // Then each application spread over several nodes tries its memory
    // interleaved over them, kept where that is faster, while the budget
    // lasts.
    let mut memory = local;
    let mut runtime = found.cost;
    let mut interleaved = 0;
    let mut untried = 0;
    for (a, app_cpus) in cpus.iter().enumerate().filter(|_| free_memory) {
        let nodes = app_cpus.iter().fold(0u64, |m, &c| {
            m | 1 << machine.topology.cpus()[c].node.min(63)
        });
        if nodes.count_ones() < 2 {
            continue;
        }
        if judge.spent() - before >= budget {
            untried += 1;
            continue;
        }
        let mut trial = memory.clone();
        trial[a] = MemoryPlacement::InterleaveNodes(nodes);
        let t = judge.binding(&with_memory(workload, &trial), cpus.clone(), runtime);
        if t < runtime {
            memory = trial;
            runtime = t;
            interleaved += 1;
        }
    }
    let untried = match untried {
        0 => String::new(),
        n => format!(" ({n} not tried: the budget was spent)"),
    };
    let method = match interleaved {
        _ if !free_memory => format!("{}; memory where the scenario puts it", found.method),
        0 => format!("{}; memory on its threads' nodes{untried}", found.method),
        n => format!(
            "{}; memory on its threads' nodes, interleaved over them for {n} application{}{untried}",
            found.method,
            if n == 1 { "" } else { "s" }
        ),
    };
    Ok(Best {
        cpus,
        memory,
        sets: None,
        runtime_s: runtime,
        method,
        evaluations: judge.spent(),
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
        let each: Vec<numaplace_model::CpuSet> = match &best.sets {
            // A CPU set per application: every thread may use all of it.
            Some(sets) => {
                let set: numaplace_model::CpuSet =
                    sets[a].iter().map(|c| cpus[c as usize].os_id).collect();
                vec![set; app.threads as usize]
            }
            None => (best.cpus[a].iter())
                .map(|&cpu| std::iter::once(cpus[cpu].os_id).collect())
                .collect(),
        };
        for (k, set) in each.into_iter().enumerate() {
            pins.push(StaticPin {
                process: crate::world::comm(&app.name),
                thread: k,
                cpus: set,
            });
        }
    }
    StaticParams {
        pins,
        memory: Vec::new(),
    }
}

/// The oracle's placement run once in the world of `opts`: its binding,
/// or its CPU sets.
pub fn run_best(
    machine: &Machine,
    workload: &Workload,
    best: &Best,
    opts: &RunOptions,
) -> RunResult {
    let mut w = with_memory(workload, &best.memory);
    let driver = match &best.sets {
        Some(sets) => {
            for (a, s) in w.apps.iter_mut().zip(sets) {
                a.cpus = Some(s.clone());
            }
            Driver::Confined { name: "oracle" }
        }
        None => Driver::Binding {
            name: "oracle",
            cpus: best.cpus.clone(),
        },
    };
    run(machine, &w, driver, opts, &mut |_| {})
}

#[cfg(test)]
mod tests;
