//! The oracle for a scenario: the best launch-time binding of its threads
//! to CPUs and of their memory, judged by simulating each candidate
//! (\[Rao13\]'s "hand-optimized" binding, \[Blagodurov11\]'s best static placement).
//!
//! Memory is part of the placement, or policies that move it would beat
//! the yardstick: each application's memory goes on its threads' nodes
//! (first touch under the binding: each thread's private memory on its
//! node, the shared area on the first thread's), or, where its threads
//! span several nodes and that is faster, interleaved over those nodes.

use std::sync::atomic::{AtomicUsize, Ordering};

use numaplace_model::CpuSet;

use crate::machine::Machine;
use crate::oracle::{OracleProblem, search_bounded};
use crate::outcome::RunResult;
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
    /// Per application, where the placement is a CPU set per application
    /// whose threads time-share it (the simulated Linux placing them
    /// within it) rather than a CPU per thread: then `cpus` is empty.
    pub sets: Option<Vec<CpuSet>>,
    /// Mean run time it gives, seconds.
    pub runtime_s: f64,
    pub method: String,
    /// Simulations the search ran, at most its budget.
    pub evaluations: usize,
}

/// The world the oracle judges candidates in, and what it has spent.
struct Judge<'a> {
    machine: &'a Machine,
    /// The run seed and mismatch of the world (the rest is the default).
    seed: u64,
    mismatch: Option<f64>,
    spent: AtomicUsize,
}

impl<'a> Judge<'a> {
    fn new(machine: &'a Machine, world: &RunOptions) -> Judge<'a> {
        Judge {
            machine,
            seed: world.seed,
            mismatch: world.mismatch,
            spent: AtomicUsize::new(0),
        }
    }

    fn spent(&self) -> usize {
        self.spent.load(Ordering::Relaxed)
    }

    /// One simulation of `workload` driven by `driver`, stopped as soon as
    /// it cannot beat `bound`; its mean run time, or `f64::MAX` when it
    /// did not finish (or was stopped).
    fn judge(&self, workload: &Workload, driver: Driver<'_>, bound: f64) -> f64 {
        self.spent.fetch_add(1, Ordering::Relaxed);
        let opts = RunOptions {
            seed: self.seed,
            mismatch: self.mismatch,
            stop_at_or_above: bound.is_finite().then_some(bound),
            ..RunOptions::default()
        };
        score(&run(self.machine, workload, driver, &opts, &mut |_| {}))
    }

    fn binding(&self, workload: &Workload, cpus: Vec<Vec<usize>>, bound: f64) -> f64 {
        let driver = Driver::Binding {
            name: "oracle",
            cpus,
        };
        self.judge(workload, driver, bound)
    }
}

/// A candidate's score: its mean run time if every run finished.
fn score(r: &RunResult) -> f64 {
    match r.mean_runtime_s() {
        Some(m) if r.finished => m,
        _ => f64::MAX,
    }
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
/// (\[Symbiosis-Bloom\]'s pairs and pools) time-shares CPUs under any placement: its
/// oracle is the best balanced assignment of threads to CPUs
/// ([`search_shared`]).
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
fn search_oversubscribed(
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
                    && c < here
                {
                    here = c;
                    choice = q;
                    changed = true;
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
fn search_shared(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Six threads on four CPUs: a short application of three threads and
    /// a long one of three. With a CPU per thread (balanced: two CPUs
    /// doubled) either a long thread shares a CPU with a short one or two
    /// short ones share, and a short thread alone finishes early and
    /// leaves its CPU idle while the doubled ones go on at half speed; the
    /// simulated Linux within a CPU set moves a doubled thread there.
    fn oversubscribed() -> (Machine, Workload) {
        let text = r#"
machine = "synthetic:pack:2 numa:1 l3:1(size=4MiB) core:2 pu:1"
max_seconds = 60
[[app]]
name = "long"
threads = 3
instructions = 6e9
uncore_pki = 1
llc_mpki = 0.1
working_set = "1MiB"
[[app]]
name = "short"
threads = 3
instructions = 1.5e9
uncore_pki = 1
llc_mpki = 0.1
working_set = "1MiB"
"#;
        let w = crate::scenario::parse(text, "oversubscribed.toml").unwrap();
        (Machine::preset(&w.machine).unwrap(), w)
    }

    #[test]
    fn cpu_sets_beat_a_cpu_per_thread_on_an_oversubscribed_mix() {
        let (m, w) = oversubscribed();
        let judge = Judge::new(&m, &RunOptions::default());
        let shared = search_shared(&judge, &w, 60, 2, true, f64::INFINITY).unwrap();
        let best = best_static(&m, &w, 60, 2).unwrap();
        assert!(best.sets.is_some(), "{}", best.method);
        assert!(
            best.runtime_s < 0.97 * shared.runtime_s,
            "CPU sets {} s, a CPU per thread {} s: {}",
            best.runtime_s,
            shared.runtime_s,
            best.method
        );
        // The oracle's placement run again gives its score, and bounds
        // Linux's default on the same world.
        let again = run_best(&m, &w, &best, &RunOptions::default());
        assert_eq!(score(&again), best.runtime_s);
        let linux = run(
            &m,
            &w,
            Driver::Policy(&numaplace_policy::PolicyKind::Default),
            &RunOptions::default(),
            &mut |_| {},
        );
        assert!(best.runtime_s <= score(&linux) * 1.001, "{}", best.method);
        // static holds it: every thread of an application on its set.
        let pins = static_params(&m, &w, &best).pins;
        assert_eq!(pins.len(), 6);
        assert!(pins.iter().all(|p| p.cpus.len() >= 2), "{pins:?}");
    }

    #[test]
    fn the_budget_bounds_every_simulation_of_the_search() {
        let (m, over) = oversubscribed();
        let fits = crate::scenario::builtin("default").unwrap().unwrap();
        let westmere = Machine::preset(&fits.machine).unwrap();
        // A sequence of applications: time groups, searched alone.
        let mut seq = over.clone();
        seq.apps[1].start_s = 30.0;
        for (machine, w) in [(&m, &over), (&westmere, &fits), (&m, &seq)] {
            let mut last = 0;
            for budget in [1, 3, 8, 30] {
                let b = best_static(machine, w, budget, 2).unwrap();
                assert!(
                    b.evaluations <= budget.max(1),
                    "{}: budget {budget}, {} simulations: {}",
                    w.name,
                    b.evaluations,
                    b.method
                );
                assert!(b.evaluations >= last, "{}", b.method);
                last = b.evaluations;
            }
            assert!(last >= 3, "{}: the budget is used: {last}", w.name);
        }
    }

    #[test]
    fn a_candidate_that_cannot_win_is_stopped_early() {
        let (m, w) = oversubscribed();
        let judge = Judge::new(&m, &RunOptions::default());
        let cpus = vec![vec![0, 0, 1], vec![1, 2, 3]];
        let full = judge.binding(&w, cpus.clone(), f64::INFINITY);
        assert!(full < f64::MAX);
        let opts = RunOptions {
            stop_at_or_above: Some(full / 2.0),
            ..RunOptions::default()
        };
        let driver = || Driver::Binding {
            name: "oracle",
            cpus: cpus.clone(),
        };
        let stopped = run(&m, &w, driver(), &opts, &mut |_| {});
        let whole = run(&m, &w, driver(), &RunOptions::default(), &mut |_| {});
        assert!(!stopped.finished && whole.finished);
        assert!(
            stopped.makespan_s < whole.makespan_s,
            "{} {}",
            stopped.makespan_s,
            whole.makespan_s
        );
        assert_eq!(score(&stopped), f64::MAX);
        // A bound above the result changes nothing.
        assert_eq!(judge.binding(&w, cpus, full * 1.01), full);
    }
}
