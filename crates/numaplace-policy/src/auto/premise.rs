//! Whether a group's move has a premise: its threads reach far for their
//! memory ([`reach`]), or lie spread as its memory does
//! ([`spread_like_threads`]); [`worth_bringing_together`] says which move
//! (numad's whole placement, or the threads first) and why.

use std::collections::BTreeSet;

use crate::View;

/// What a group's move would be, if it has a premise.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Premise {
    /// numad's whole placement: threads and memory. Why.
    Whole(String),
    /// Only the threads first ([`GATHER`]). Why.
    ThreadsFirst(String),
}

/// The nodes (dense ids) of the CPUs a group's threads last ran on, one
/// entry per thread: those running or runnable when any is (a sleeping
/// thread's last CPU says where it was, not where the work is), else all.
pub(super) fn thread_nodes(view: &View<'_>, g: &numaplace_model::TaskGroup) -> Vec<usize> {
    let (t, s) = (view.topology, view.snapshot);
    let tasks: Vec<&numaplace_model::Task> =
        g.threads.iter().filter_map(|&tid| s.task(tid)).collect();
    let busy = |x: &&numaplace_model::Task| matches!(x.state, 'R' | 'D');
    let any_busy = tasks.iter().any(busy);
    tasks
        .iter()
        .filter(|x| !any_busy || busy(x))
        .filter_map(|x| x.last_cpu)
        .filter_map(|c| t.cpu_by_os_id(c))
        .map(|c| c.node)
        .collect()
}

/// How far a group's threads reach for their memory: the mean over its
/// threads of the distance to each byte of the group's memory, in units
/// of the local distance, less one (the machine's SLIT distances: 0 when
/// every access is local, 1.1 when all cross a link of distance 21, 0.2
/// between the nodes of one package at distance 12); `None` when its
/// memory or its threads' CPUs are not known.
pub(crate) fn reach(view: &View<'_>, pid: i32) -> Option<f64> {
    let (t, s) = (view.topology, view.snapshot);
    let g = s.group(pid)?;
    let mem = g.memory_total()?;
    let total: u64 = mem.values().sum();
    if total == 0 {
        return None;
    }
    let n = t.nodes().len();
    let per_thread: Vec<f64> = thread_nodes(view, g)
        .into_iter()
        .map(|from| {
            mem.iter()
                .filter_map(|(&os, &b)| {
                    let to = t.node_by_os_id(os)?.id;
                    let d = f64::from(t.distances()[from * n + to]) / 10.0;
                    Some(b as f64 / total as f64 * (d - 1.0).max(0.0))
                })
                .sum()
        })
        .collect();
    (!per_thread.is_empty()).then(|| per_thread.iter().sum::<f64>() / per_thread.len() as f64)
}

/// How differently a group's memory and its threads are spread over the
/// nodes: half the sum over nodes of |share of its threads there - share
/// of its memory there| (0: alike, 1: apart); `None` when not known. The
/// process's memory per node does not say which thread uses which page:
/// spread like the threads, it is most likely each thread's own, first
/// touched where it runs.
pub(super) fn spread_like_threads(view: &View<'_>, pid: i32) -> Option<f64> {
    let (t, s) = (view.topology, view.snapshot);
    let g = s.group(pid)?;
    let mem = g.memory_total()?;
    let total: u64 = mem.values().sum();
    let nodes: Vec<u32> = thread_nodes(view, g)
        .into_iter()
        .map(|n| t.nodes()[n].os_id)
        .collect();
    if total == 0 || nodes.is_empty() {
        return None;
    }
    let mut all: std::collections::BTreeSet<u32> = mem.keys().copied().collect();
    all.extend(nodes.iter().copied());
    let d: f64 = all
        .iter()
        .map(|n| {
            let threads = nodes.iter().filter(|&&x| x == *n).count() as f64 / nodes.len() as f64;
            let memory = *mem.get(n).unwrap_or(&0) as f64 / total as f64;
            (threads - memory).abs()
        })
        .sum();
    Some(d / 2.0)
}

/// Below this difference ([`spread_like_threads`]) a multithreaded
/// group's memory is taken as its threads' own, local to each.
const LIKE_THREADS: f64 = 0.25;

/// Reach below which bringing a group and its memory together has too
/// little to gain to pay for the move and the pin (a fifth of all
/// accesses crossing a socket link, or every access crossing to the
/// other node of its own package, is just at it).
const FAR_ENOUGH: f64 = 0.2;

/// Whether numad's placement of `pid` has a premise here: memory larger
/// than the machine's largest last-level cache (a working set that fits
/// the cache hardly goes to memory, wherever it lies) and threads that
/// reach far for it ([`reach`] at least [`FAR_ENOUGH`]). A group whose
/// threads run on several nodes with its memory spread as they are may
/// be using memory local to each thread already, or sharing it all: its
/// threads alone are brought together first ([`Premise::ThreadsFirst`]).
/// `Err` says why neither.
pub(super) fn worth_bringing_together(view: &View<'_>, pid: i32) -> Result<Premise, String> {
    let t = view.topology;
    let g = view.snapshot.group(pid).ok_or("gone")?;
    let total: u64 = g.memory_total().map_or(0, |m| m.values().sum());
    let llc = t
        .llcs()
        .iter()
        .filter_map(|l| l.cache.map(|c| t.caches()[c].size))
        .max()
        .unwrap_or(0);
    if total <= llc {
        // Its memory hardly matters; threads that share written data
        // still pay for every line that crosses between caches.
        let on: BTreeSet<usize> = thread_nodes(view, g).into_iter().collect();
        if on.len() >= 2 {
            return Ok(Premise::ThreadsFirst(format!(
                "its {} MiB fit the {} MiB last-level cache, so where they lie hardly \
                 matters, but its threads run on {} nodes: if they share written data, every \
                 line they write crosses between caches; its threads alone are brought \
                 together, kept only if that is faster",
                total >> 20,
                llc >> 20,
                on.len()
            )));
        }
        return Err(format!(
            "its {} MiB fit the {} MiB last-level cache",
            total >> 20,
            llc >> 20
        ));
    }
    if let Some(d) = spread_like_threads(view, pid).filter(|&d| d < LIKE_THREADS) {
        let on: BTreeSet<usize> = thread_nodes(view, g).into_iter().collect();
        if on.len() < 2 {
            return Err(format!(
                "its memory is where its threads run (they differ by {:.0} %)",
                100.0 * d
            ));
        }
        return Ok(Premise::ThreadsFirst(format!(
            "its memory lies over the {} nodes its threads run on as they are spread there \
             (they differ by {:.0} %): each thread's memory may be its own, local already, or \
             shared by all of them; its threads alone are brought together first, kept only \
             if that is faster by itself, and the memory may follow after",
            on.len(),
            100.0 * d
        )));
    }
    match reach(view, pid) {
        Some(r) if r >= FAR_ENOUGH => Ok(Premise::Whole(format!(
            "its threads reach {r:.2} local distances beyond their own node for its memory"
        ))),
        Some(r) => Err(format!(
            "its threads reach only {r:.2} local distances beyond their own node for its memory"
        )),
        None => Err("where its memory or threads are is not known".into()),
    }
}
