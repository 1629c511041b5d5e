//! The oracle's search where threads outnumber the CPUs at once: a CPU
//! set per application ([`search_sets`]) against a CPU per thread
//! ([`search_shared`]), the better kept ([`search_oversubscribed`]).

use numaplace_model::CpuSet;

use super::judge::{Best, Judge, per_app, start_memory, with_memory};
use crate::machine::Machine;
use crate::run::{Driver, parallel};
use crate::workload::Workload;

/// The oracle where threads outnumber CPUs at once: the better of two
/// searches. First CPU sets, with three quarters of the budget
/// ([`search_sets`]): each application's threads time-share a set of
/// CPUs (a node, a package, the machine) and the simulated Linux places
/// them within it, as a cpuset does. Then a CPU per thread
/// ([`search_shared`]) with the rest, whose candidates are stopped as
/// soon as they cannot beat the best CPU-set placement. The CPU sets get
/// the larger share because they are the better yardstick where threads
/// come and go (a pinned thread stays on its shared CPU while others
/// idle) and because each of their candidates costs the model less: with
/// every CPU time-shared for the whole run, M2's co-runner combinations
/// and M8's refills made one simulation of mix:364 about ten times as
/// long as the simulated Linux's (2.9 s against 0.27 s).
pub(super) fn search_oversubscribed(
    judge: &Judge,
    workload: &Workload,
    budget: usize,
    workers: usize,
    free_memory: bool,
) -> Result<Best, String> {
    let sets = search_sets(judge, workload, budget - budget / 4, workers, free_memory);
    let incumbent = sets.as_ref().map_or(f64::INFINITY, |b| b.runtime_s);
    let left = budget.saturating_sub(judge.spent());
    let shared = search_shared(judge, workload, left, workers, free_memory, incumbent);
    let best = match (sets, shared) {
        (Ok(a), Ok(b)) => {
            let (mut win, lose) = if b.runtime_s < a.runtime_s {
                (b, a)
            } else {
                (a, b)
            };
            win.method = format!("{}; better than {}", win.method, lose.method);
            win
        }
        (Ok(a), Err(e)) => Best {
            method: format!("{}; no CPU per thread: {e}", a.method),
            ..a
        },
        (Err(e), Ok(b)) => Best {
            method: format!("{}; no CPU sets: {e}", b.method),
            ..b
        },
        (Err(a), Err(b)) => return Err(format!("{a}; {b}")),
    };
    Ok(Best {
        evaluations: judge.spent(),
        ..best
    })
}

/// The CPU sets an application may be given: each node with CPUs, each
/// package of several nodes, and the whole machine (dense CPU ids).
fn set_options(machine: &Machine) -> Vec<(String, CpuSet)> {
    let t = &machine.topology;
    let of = |keep: &dyn Fn(usize) -> bool| -> CpuSet {
        (t.cpus().iter())
            .filter(|c| keep(c.id))
            .map(|c| c.id as u32)
            .collect()
    };
    let mut out = Vec::new();
    for n in t.nodes() {
        let set = of(&|c| t.cpus()[c].node == n.id);
        if !set.is_empty() {
            out.push((format!("node {}", n.id), set));
        }
    }
    for p in t.packages() {
        let nodes = (p.nodes.iter())
            .filter(|&&n| t.cpus().iter().any(|c| c.node == n))
            .count();
        if nodes > 1 {
            out.push((
                format!("package {}", p.id),
                of(&|c| t.cpus()[c].package == p.id),
            ));
        }
    }
    if out.len() > 1 {
        out.push(("the machine".into(), of(&|_| true)));
    }
    out
}

/// The best CPU set per application, within `budget` simulations: each
/// application's threads may run anywhere in its set and the simulated
/// Linux places and balances them there (a cpuset, or `taskset` on the
/// process), its memory first-touch on the set's nodes (or where the
/// scenario puts it). Starts from every application on the whole
/// machine (Linux alone) and from a balanced start (largest application
/// first, each to the node that stays least loaded per CPU); then, an
/// application at a time, every other set of [`set_options`] is judged
/// (in parallel on `workers`) and the best taken while it is faster,
/// until a round over the applications changes nothing or the budget is
/// spent. Applications with a cpuset of their own keep it.
fn search_sets(
    judge: &Judge,
    workload: &Workload,
    budget: usize,
    workers: usize,
    free_memory: bool,
) -> Result<Best, String> {
    let machine = judge.machine;
    let options = set_options(machine);
    if options.len() < 2 {
        return Err("one node and one package: no CPU set to choose".into());
    }
    let whole = options.len() - 1;
    let memory = start_memory(workload, free_memory);
    let placed = with_memory(workload, &memory);
    let napps = workload.apps.len();
    let free: Vec<usize> = (0..napps)
        .filter(|&a| workload.apps[a].cpus.is_none())
        .collect();
    let confined = |choice: &[usize]| -> Workload {
        let mut w = placed.clone();
        for &a in &free {
            w.apps[a].cpus = Some(options[choice[a]].1.clone());
        }
        w
    };
    let cost = |choice: &[usize], bound: f64| {
        judge.judge(
            &confined(choice),
            Driver::Confined { name: "oracle" },
            bound,
        )
    };
    let start_spent = judge.spent();
    let left = |judge: &Judge| budget.saturating_sub(judge.spent() - start_spent);
    // The starts: the whole machine, and the balanced one.
    let mut balanced = vec![whole; napps];
    let nodes: Vec<usize> = (0..options.len())
        .filter(|&o| options[o].0.starts_with("node "))
        .collect();
    let mut load = vec![0.0; options.len()];
    let mut order = free.clone();
    order.sort_by_key(|&a| std::cmp::Reverse(workload.apps[a].threads));
    for &a in &order {
        let k = f64::from(workload.apps[a].threads);
        let o = nodes
            .iter()
            .copied()
            .min_by(|&x, &y| {
                let f = |o: usize| (load[o] + k) / options[o].1.len() as f64;
                f(x).total_cmp(&f(y))
            })
            .unwrap_or(whole);
        load[o] += k;
        balanced[a] = o;
    }
    let mut best: Option<(f64, Vec<usize>)> = None;
    let mut starts = 0;
    for start in [vec![whole; napps], balanced] {
        if left(judge) == 0 || best.as_ref().is_some_and(|b| b.1 == start) {
            break;
        }
        starts += 1;
        let mut here = cost(&start, f64::INFINITY);
        let mut choice = start;
        // Rounds over the applications, each trying its other sets.
        loop {
            let mut changed = false;
            for &a in &free {
                let n = left(judge);
                if n == 0 {
                    break;
                }
                let tries: Vec<Vec<usize>> = (0..options.len())
                    .filter(|&o| o != choice[a])
                    .take(n)
                    .map(|o| {
                        let mut c = choice.clone();
                        c[a] = o;
                        c
                    })
                    .collect();
                let bound = here;
                let costs = parallel(tries.clone(), workers, |c| cost(&c, bound));
                if let Some((c, q)) = costs
                    .into_iter()
                    .zip(tries)
                    .min_by(|x, y| x.0.total_cmp(&y.0))
                {
                    if c < here {
                        here = c;
                        choice = q;
                        changed = true;
                    }
                }
            }
            if !changed || left(judge) == 0 {
                break;
            }
        }
        if best.as_ref().is_none_or(|b| here < b.0) {
            best = Some((here, choice));
        }
    }
    let (runtime, choice) = best.ok_or("no budget for a CPU-set placement")?;
    let mut named: Vec<String> = Vec::new();
    for &a in &free {
        named.push(format!(
            "{} on {}",
            workload.apps[a].name, options[choice[a]].0
        ));
    }
    let sets: Vec<CpuSet> = (0..napps)
        .map(|a| match &workload.apps[a].cpus {
            Some(own) => own.clone(),
            None => options[choice[a]].1.clone(),
        })
        .collect();
    Ok(Best {
        cpus: Vec::new(),
        memory,
        sets: Some(sets),
        runtime_s: runtime,
        method: format!(
            "{} threads time-share {} CPUs: a CPU set per application (a node, a package or the \
             machine; the simulated Linux places its threads within it), best-improvement over \
             each application's sets from {starts} start{} (the whole machine, balanced over \
             nodes), {} evaluations: {}",
            workload.threads(),
            machine.topology.cpus().len(),
            if starts == 1 { "" } else { "s" },
            judge.spent() - start_spent,
            named.join(", ")
        ),
        evaluations: judge.spent(),
    })
}

/// Starts in a row of [`search_shared`] that cannot beat the other
/// search's placement after which it gives up: its round-robin start and
/// one random one. Each start time-shares every CPU it doubles up for the
/// whole run, the dearest simulation there is, and on mix:364 73 of them
/// (a quarter of the budget) found none faster than the CPU sets.
const HOPELESS_STARTS: usize = 2;

/// A CPU per thread where threads outnumber CPUs at once: each thread
/// bound to one CPU, the CPUs holding as equal a number of threads as can
/// be (the floor or the ceiling of threads / CPUs), memory on first
/// touch. The search is best-improvement hill climbing over swaps of two
/// threads on different CPUs (which keeps the balance; the swaps of a
/// step are judged in parallel on `workers` threads), from a round-robin
/// start and random balanced ones, within `budget` simulations. Threads
/// of an application other than its first are interchangeable, so
/// swapping two of them is not tried. Every candidate is stopped as soon
/// as it cannot beat `incumbent` (the best placement of another search),
/// a start that cannot is not climbed from, and after
/// [`HOPELESS_STARTS`] such starts in a row the search ends: it only
/// looks where it can win.
pub(super) fn search_shared(
    judge: &Judge,
    workload: &Workload,
    budget: usize,
    workers: usize,
    free_memory: bool,
    incumbent: f64,
) -> Result<Best, String> {
    let machine = judge.machine;
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
    if budget == 0 {
        return Err("no budget left for a CPU per thread".into());
    }
    let local = start_memory(workload, free_memory);
    let placed = with_memory(workload, &local);
    let split = |placement: &[usize]| per_app(workload, placement.iter().copied());
    // Assignments already judged are not run again; a start that judges
    // nothing new ends the search (small problems are then exhausted).
    let mut seen = std::collections::HashMap::new();
    let mut spent = 0usize;
    // Judges the assignments not judged yet (in parallel, within the
    // budget left), each stopped once it cannot beat `bound`; returns each
    // one's cost, `None` where the budget ran out first.
    type Seen = std::collections::HashMap<Vec<usize>, f64>;
    let judge_all = |seen: &mut Seen, batch: Vec<Vec<usize>>, bound: f64, spent: &mut usize| {
        let mut fresh: Vec<Vec<usize>> = Vec::new();
        for p in &batch {
            if !seen.contains_key(p) && !fresh.contains(p) && *spent + fresh.len() < budget {
                fresh.push(p.clone());
            }
        }
        *spent += fresh.len();
        let costs = parallel(fresh.clone(), workers, |p| {
            judge.binding(&placed, split(&p), bound)
        });
        seen.extend(fresh.into_iter().zip(costs));
        batch
            .iter()
            .map(|p| seen.get(p).copied())
            .collect::<Vec<_>>()
    };
    let mut rng = crate::rng::Rng::new(0x0ac1e);
    let mut best: Option<(f64, Vec<usize>)> = None;
    let mut starts = 0;
    // Starts in a row that could not beat the incumbent.
    let mut hopeless = 0;
    while spent < budget {
        // Round robin first (thread i on CPU i mod CPUs), then shuffled.
        let mut p: Vec<usize> = (0..n).map(|i| i % ncpu).collect();
        if starts > 0 {
            rng.shuffle(&mut p);
        }
        starts += 1;
        let before = spent;
        let Some(mut here) = judge_all(&mut seen, vec![p.clone()], incumbent, &mut spent)[0] else {
            break;
        };
        // Best improvement: swaps of two threads on different CPUs
        // (as many as the budget has left) judged together, the best
        // taken while it is faster. A start that cannot beat the
        // incumbent is not climbed from.
        while here < incumbent {
            let swaps: Vec<Vec<usize>> = (0..n)
                .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                .filter(|&(i, j)| p[i] != p[j] && (class[i] != class[j] || class[i].1))
                .map(|(i, j)| {
                    let mut q = p.clone();
                    q.swap(i, j);
                    q
                })
                .filter(|q| !seen.contains_key(q))
                .take(budget - spent)
                .collect();
            let costs = judge_all(&mut seen, swaps.clone(), here, &mut spent);
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
        if here < incumbent {
            hopeless = 0;
            if best.as_ref().is_none_or(|b| here < b.0) {
                best = Some((here, p));
            }
        } else {
            hopeless += 1;
        }
        if spent == before || hopeless == HOPELESS_STARTS {
            break;
        }
    }
    let Some((runtime, p)) = best else {
        return Err(format!(
            "{starts} start{} of a CPU per thread ({spent} evaluations), none faster than the \
             CPU sets",
            if starts == 1 { "" } else { "s" }
        ));
    };
    Ok(Best {
        cpus: split(&p),
        memory: local,
        sets: None,
        runtime_s: runtime,
        method: format!(
            "{n} threads time-share {ncpu} CPUs: a CPU per thread, balanced, best-improvement \
             hill climbing over swaps from {starts} start{} (round robin, then random), {spent} \
             evaluations; memory {}",
            if starts == 1 { "" } else { "s" },
            if free_memory {
                "on its threads' nodes"
            } else {
                "where the scenario puts it"
            },
        ),
        evaluations: judge.spent(),
    })
}
