//! The oracle for a scenario: the best launch-time binding of its threads
//! to CPUs and of their memory, judged by simulating each candidate (seed
//! 000's "hand-optimized" binding, seed 004's best static placement).
//!
//! Memory is part of the placement, or policies that move it would beat
//! the yardstick: each application's memory goes on its threads' nodes
//! (first touch under the binding: each thread's private memory on its
//! node, the shared area on the first thread's), or, where its threads
//! span several nodes and that is faster, interleaved over those nodes.

use crate::machine::Machine;
use crate::oracle::{OracleProblem, search};
use crate::run::{Driver, RunOptions, parallel, run};
use crate::workload::{MemoryPlacement, Workload};

/// The best binding found, and how.
#[derive(Debug, Clone)]
pub struct Best {
    /// `cpus[app][thread]`: dense CPU ids.
    pub cpus: Vec<Vec<usize>>,
    /// Per application: where its memory goes (first touch under the
    /// binding, or interleaved over its threads' nodes).
    pub memory: Vec<MemoryPlacement>,
    /// Mean run time it gives, seconds.
    pub runtime_s: f64,
    pub method: String,
}

/// Searches the static placements of `workload` on `machine`.
///
/// Threads of one application are interchangeable except its first, which
/// allocates the shared area. Packages count as interchangeable only when
/// no application has a cpuset and every pair of distinct nodes is as far
/// as every other (a 2-socket machine): then swapping sockets changes
/// nothing, since the memory follows the threads.
///
/// A workload with more threads than CPUs that run at the same time
/// (seed 003's pairs and pools) time-shares CPUs under any placement: its
/// oracle is the best balanced assignment of threads to CPUs
/// ([`search_shared`]).
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
    workers: usize,
) -> Result<Best, String> {
    search_placements(machine, workload, budget, workers, true)
}

/// The best launch-time binding of the threads alone, their memory where
/// the scenario puts it: seed 000's "hand-optimized" binding, which kept
/// everything on node 0 as its experiments did. A yardstick for a policy
/// that moves threads only (BRM); [`best_static`] bounds every policy.
pub fn best_binding(
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    workers: usize,
) -> Result<Best, String> {
    search_placements(machine, workload, budget, workers, false)
}

/// `free_memory`: memory is part of the placement (local or interleaved
/// over the threads' nodes); otherwise it stays as the scenario says.
fn search_placements(
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    workers: usize,
    free_memory: bool,
) -> Result<Best, String> {
    let cpus = machine.topology.cpus().len();
    let threads = workload.threads();
    if threads <= cpus {
        return search_together(machine, workload, budget, free_memory);
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
        return search_shared(machine, workload, budget, workers, free_memory);
    }
    let mut binding = vec![Vec::new(); workload.apps.len()];
    let mut memory: Vec<MemoryPlacement> = workload.apps.iter().map(|a| a.memory).collect();
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
        let best = search_together(machine, &sub, share, free_memory)?;
        for ((&a, c), m) in g.iter().zip(best.cpus).zip(best.memory) {
            binding[a] = c;
            memory[a] = m;
        }
        methods.push(best.method);
    }
    methods.dedup();
    let r = run(
        machine,
        &with_memory(workload, &memory),
        Driver::Binding {
            name: "oracle",
            cpus: binding.clone(),
        },
        &RunOptions::default(),
        &mut |_| {},
    );
    Ok(Best {
        cpus: binding,
        memory,
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
fn search_together(
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    free_memory: bool,
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
    let judge = |cpus: Vec<Vec<usize>>, memory: &[MemoryPlacement]| -> f64 {
        let r = run(
            machine,
            &with_memory(workload, memory),
            Driver::Binding {
                name: "oracle",
                cpus,
            },
            &RunOptions::default(),
            &mut |_| {},
        );
        r.mean_runtime_s().unwrap_or(f64::MAX)
    };
    // The binding is searched with every application's memory local (or
    // where the scenario puts it).
    let local = start_memory(workload, free_memory);
    let mut cost = |placement: &[u32]| judge(split(placement), &local);
    let found = search(&problem, &mut cost, budget, 0).map_err(|e| e.to_string())?;
    let cpus = split(&found.placement);
    // Then each application spread over several nodes tries its memory
    // interleaved over them, kept where that is faster.
    let mut memory = local;
    let mut runtime = found.cost;
    let mut interleaved = 0;
    for (a, app_cpus) in cpus.iter().enumerate().filter(|_| free_memory) {
        let nodes = app_cpus.iter().fold(0u64, |m, &c| {
            m | 1 << machine.topology.cpus()[c].node.min(63)
        });
        if nodes.count_ones() < 2 {
            continue;
        }
        let mut trial = memory.clone();
        trial[a] = MemoryPlacement::InterleaveNodes(nodes);
        let t = judge(cpus.clone(), &trial);
        if t < runtime {
            memory = trial;
            runtime = t;
            interleaved += 1;
        }
    }
    let method = match interleaved {
        _ if !free_memory => format!("{}; memory where the scenario puts it", found.method),
        0 => format!("{}; memory on its threads' nodes", found.method),
        n => format!(
            "{}; memory on its threads' nodes, interleaved over them for {n} application{}",
            found.method,
            if n == 1 { "" } else { "s" }
        ),
    };
    Ok(Best {
        cpus,
        memory,
        runtime_s: runtime,
        method,
    })
}

/// A placement of every thread in order, as `cpus[app][thread]`.
fn per_app(workload: &Workload, mut cpus: impl Iterator<Item = usize>) -> Vec<Vec<usize>> {
    workload
        .apps
        .iter()
        .map(|a| {
            (0..a.threads)
                .map(|_| cpus.next().expect("one CPU per thread"))
                .collect()
        })
        .collect()
}

/// Where the search starts each application's memory: first touch under
/// the binding (on its threads' nodes), or the scenario's placement.
fn start_memory(workload: &Workload, free_memory: bool) -> Vec<MemoryPlacement> {
    workload
        .apps
        .iter()
        .map(|a| {
            if free_memory {
                MemoryPlacement::FirstTouch
            } else {
                a.memory
            }
        })
        .collect()
}

/// `workload` with each application's memory placed as `memory` says.
pub fn with_memory(workload: &Workload, memory: &[MemoryPlacement]) -> Workload {
    let mut w = workload.clone();
    for (a, m) in w.apps.iter_mut().zip(memory) {
        a.memory = *m;
    }
    w
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

/// The oracle where threads outnumber CPUs at once: each thread bound to
/// one CPU, the CPUs holding as equal a number of threads as can be (the
/// floor or the ceiling of threads / CPUs), memory on first touch. The
/// search is best-improvement hill climbing over swaps of two threads on
/// different CPUs (which keeps the balance; the swaps of a step are judged
/// in parallel on `workers` threads), from a round-robin start and random
/// balanced ones, within `budget` simulations. Threads of an
/// application other than its first are interchangeable, so swapping two
/// of them is not tried.
fn search_shared(
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    workers: usize,
    free_memory: bool,
) -> Result<Best, String> {
    let ncpu = machine.topology.cpus().len();
    let mut class = Vec::new();
    let mut allowed = Vec::new();
    for (ai, a) in workload.apps.iter().enumerate() {
        for k in 0..a.threads {
            class.push((ai, k == 0));
            allowed.push(a.cpus.clone());
        }
    }
    let n = class.len();
    if allowed.iter().any(Option::is_some) {
        return Err(format!(
            "{n} threads share {ncpu} CPUs and some applications have cpusets: the \
             time-shared oracle searches whole-machine placements only"
        ));
    }
    let local = start_memory(workload, free_memory);
    let split = |placement: &[usize]| per_app(workload, placement.iter().copied());
    // Assignments already judged are not run again; a start that judges
    // nothing new ends the search (small problems are then exhausted).
    let mut seen = std::collections::HashMap::<Vec<usize>, f64>::new();
    let mut spent = 0usize;
    let budget = budget.max(1);
    // Judges the assignments not judged yet (in parallel, within the
    // budget left); returns each one's cost, `None` where the budget ran
    // out first.
    let mut judge = |batch: Vec<Vec<usize>>, spent: &mut usize| -> Vec<Option<f64>> {
        let mut fresh: Vec<Vec<usize>> = Vec::new();
        for p in &batch {
            if !seen.contains_key(p) && !fresh.contains(p) && *spent + fresh.len() < budget {
                fresh.push(p.clone());
            }
        }
        *spent += fresh.len();
        let costs = parallel(fresh.clone(), workers, |p| {
            run(
                machine,
                &with_memory(workload, &local),
                Driver::Binding {
                    name: "oracle",
                    cpus: split(&p),
                },
                &RunOptions::default(),
                &mut |_| {},
            )
            .mean_runtime_s()
            .unwrap_or(f64::MAX)
        });
        seen.extend(fresh.into_iter().zip(costs));
        batch.iter().map(|p| seen.get(p).copied()).collect()
    };
    let mut rng = crate::rng::Rng::new(0x0ac1e);
    let mut best: Option<(f64, Vec<usize>)> = None;
    let mut starts = 0;
    while spent < budget {
        // Round robin first (thread i on CPU i mod CPUs), then shuffled.
        let mut p: Vec<usize> = (0..n).map(|i| i % ncpu).collect();
        if starts > 0 {
            rng.shuffle(&mut p);
        }
        starts += 1;
        let before = spent;
        let Some(mut here) = judge(vec![p.clone()], &mut spent)[0] else {
            break;
        };
        // Best improvement: every swap of two threads on different CPUs
        // judged together, the best taken while it is faster.
        loop {
            let swaps: Vec<Vec<usize>> = (0..n)
                .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                .filter(|&(i, j)| p[i] != p[j] && (class[i] != class[j] || class[i].1))
                .map(|(i, j)| {
                    let mut q = p.clone();
                    q.swap(i, j);
                    q
                })
                .collect();
            let costs = judge(swaps.clone(), &mut spent);
            let Some((c, q)) = costs
                .into_iter()
                .zip(swaps)
                .filter_map(|(c, q)| c.map(|c| (c, q)))
                .min_by(|a, b| a.0.total_cmp(&b.0))
            else {
                break;
            };
            if c >= here {
                break;
            }
            here = c;
            p = q;
        }
        if best.as_ref().is_none_or(|b| here < b.0) {
            best = Some((here, p));
        }
        if spent == before {
            break;
        }
    }
    let (runtime, p) = best.expect("at least one start");
    Ok(Best {
        cpus: split(&p),
        memory: local,
        runtime_s: runtime,
        method: format!(
            "{n} threads time-share {ncpu} CPUs: balanced assignments, best-improvement hill \
             climbing over swaps from {starts} start{} (round robin, then random), {spent} \
             evaluations; memory {}",
            if starts == 1 { "" } else { "s" },
            if free_memory {
                "on its threads' nodes"
            } else {
                "where the scenario puts it"
            },
        ),
    })
}
