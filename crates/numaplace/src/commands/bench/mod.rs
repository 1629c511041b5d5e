//! `numaplace bench`: \[Rao13\]'s micro-benchmark (§2.2, Fig. 3) on this
//! machine, one run as the arguments say or one of the paper's experiments
//! (Fig. 4a-c, 5a-c): a pair of placements compared over a sweep, the
//! second's run time normalised to the first's, as the paper plots them.
//! The benchmark itself is `numaplace_linux::microbench`.

use std::collections::BTreeMap;

use anyhow::Result;
use numaplace_linux::microbench::{self, Config, ENTRY_BYTES, Length, MemoryPolicy, WORD_BYTES};
use numaplace_model::{CpuSet, Node, Topology};
use serde::Serialize;

use numaplace::cli::BenchArgs;
use numaplace::error::InputError;
use numaplace::machine::{Usable, core_order};
use numaplace::report::topology::bytes;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// Loops per thread when neither --loops nor --seconds is given.
const DEFAULT_LOOPS: u64 = 100;

pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    let machine = Usable::host()?;
    match &args.experiment {
        Some(name) => experiment::run(name, args, &machine.topo),
        None => single(args, &machine),
    }
}

/// The JSON of one run: what was asked, then the report.
#[derive(Serialize)]
struct SingleJson<'a> {
    working_set_bytes: u64,
    shared_bytes: u64,
    memory: String,
    #[serde(flatten)]
    report: &'a microbench::Report,
}

fn single(args: &BenchArgs, m: &Usable) -> Result<()> {
    let cfg = config(args, m)?;
    let report = microbench::run(&cfg)?;
    if args.json {
        let out = SingleJson {
            working_set_bytes: cfg.working_set,
            shared_bytes: cfg.shared,
            memory: describe_memory(&cfg.memory),
            report: &report,
        };
        println!("{}", numaplace::output::json::pretty(&out)?);
    } else {
        print!("{}", render_single(&cfg, &report));
    }
    Ok(())
}

/// Checks the arguments against the machine and makes the run's config.
fn config(args: &BenchArgs, m: &Usable) -> Result<Config, InputError> {
    let working_set = size_arg("--working-set", &args.working_set, ENTRY_BYTES)?;
    let shared = size_arg("--shared", &args.shared, WORD_BYTES)?;
    let memory = memory_arg(&args.memory_node, &m.topo)?;
    let cpus = thread_cpus(args, m)?;
    let length = length_arg(args.loops, args.seconds)?;
    let need = working_set.saturating_mul(cpus.len() as u64) + shared;
    check_fits(&m.topo, &memory, need)?;
    Ok(Config {
        cpus,
        working_set,
        shared,
        memory,
        length,
        seed: args.seed,
    })
}

/// A size argument, which must be a whole number of `unit`-byte pieces.
fn size_arg(flag: &str, text: &str, unit: u64) -> Result<u64, InputError> {
    let n = numaplace_sim::scenario::parse_size(text)
        .map_err(|e| InputError(format!("{flag} {text}: {e}")))?;
    if n % unit != 0 {
        let what = if unit == ENTRY_BYTES {
            "the list's entries are 64-byte cache lines"
        } else {
            "the shared area is 8-byte words"
        };
        return Err(InputError(format!(
            "{flag} {text}: {n} bytes is not a multiple of {unit} ({what})"
        )));
    }
    Ok(n)
}

/// `--memory-node`: a node that exists and has memory, `local` or
/// `interleave` (over every node with memory).
fn memory_arg(text: &str, topo: &Topology) -> Result<MemoryPolicy, InputError> {
    match text.trim() {
        "local" => return Ok(MemoryPolicy::Local),
        "interleave" => {
            let nodes = topo.nodes().iter().filter(|n| n.memory > 0);
            return Ok(MemoryPolicy::Interleave(nodes.map(|n| n.os_id).collect()));
        }
        _ => {}
    }
    let id: u32 = text.trim().parse().map_err(|_| {
        InputError(format!(
            "--memory-node {text:?}: give a node number, `local` or `interleave`"
        ))
    })?;
    let node = node_arg("--memory-node", id, topo)?;
    if node.memory == 0 {
        return Err(InputError(format!(
            "--memory-node {id}: node {id} has no memory"
        )));
    }
    Ok(MemoryPolicy::Node(id))
}

fn node_arg<'t>(flag: &str, id: u32, topo: &'t Topology) -> Result<&'t Node, InputError> {
    topo.node_by_os_id(id).ok_or_else(|| {
        let ids: CpuSet = topo.nodes().iter().map(|n| n.os_id).collect();
        InputError(format!(
            "{flag}: node {id} does not exist; this machine has nodes {ids}"
        ))
    })
}

fn length_arg(loops: Option<u64>, seconds: Option<f64>) -> Result<Length, InputError> {
    match (loops, seconds) {
        (Some(0), _) => Err(InputError("--loops 0: at least one loop".into())),
        (Some(n), _) => Ok(Length::Loops(n)),
        (None, Some(s)) if !(s.is_finite() && s > 0.0) => Err(InputError(format!(
            "--seconds {s}: give a positive number of seconds"
        ))),
        (None, Some(s)) => Ok(Length::Seconds(s)),
        (None, None) => Ok(Length::Loops(DEFAULT_LOOPS)),
    }
}

/// Refuses a run that needs more memory than where it is to go.
fn check_fits(topo: &Topology, memory: &MemoryPolicy, need: u64) -> Result<(), InputError> {
    let (have, place) = match memory {
        MemoryPolicy::Node(n) => (
            topo.node_by_os_id(*n).map_or(0, |n| n.memory),
            format!("node {n}"),
        ),
        _ => (topo.total_memory(), "this machine".to_string()),
    };
    if have > 0 && need > have {
        return Err(InputError(format!(
            "the run needs {} (threads x working set + shared area) but {place} has {}",
            bytes(need),
            bytes(have)
        )));
    }
    Ok(())
}

/// One CPU per thread: from --cpus, --nodes, or the first allowed CPUs.
fn thread_cpus(args: &BenchArgs, m: &Usable) -> Result<Vec<u32>, InputError> {
    if args.threads == Some(0) {
        return Err(InputError("--threads 0: at least one thread".into()));
    }
    let n = args.threads.unwrap_or(1);
    let (cpus, from) = match (&args.cpus, &args.nodes) {
        (Some(list), _) => return listed_cpus(list, args.threads, m),
        (None, Some(list)) => (
            node_cpus(list, args.pack, &m.topo)?,
            format!("--nodes {list}"),
        ),
        (None, None) => (core_order(&m.topo, m.topo.span()), "this process".into()),
    };
    if cpus.len() < n {
        return Err(InputError(format!(
            "--threads {n}: one CPU per thread, and {from} may use {} CPUs",
            cpus.len()
        )));
    }
    Ok(cpus[..n].to_vec())
}

/// `--cpus`: CPUs of the machine this process may run on, one per thread.
fn listed_cpus(list: &str, threads: Option<usize>, m: &Usable) -> Result<Vec<u32>, InputError> {
    let set: CpuSet = list
        .parse()
        .map_err(|e| InputError(format!("--cpus: {e}")))?;
    for c in set.iter() {
        if !m.all.contains(c) {
            return Err(InputError(format!(
                "--cpus {list}: CPU {c} is not one of this machine's CPUs ({})",
                m.all
            )));
        }
        if !m.topo.span().contains(c) {
            return Err(InputError(format!(
                "--cpus {list}: CPU {c} is not allowed to this process (it may use {})",
                m.topo.span()
            )));
        }
    }
    match threads {
        Some(n) if n != set.len() => Err(InputError(format!(
            "--cpus {list} names {} CPUs for --threads {n}: give one CPU per thread",
            set.len()
        ))),
        _ => Ok(set.iter().collect()),
    }
}

/// `--nodes`: the nodes' allowed CPUs, round-robin over the nodes
/// (spread) or node after node (pack).
fn node_cpus(list: &str, pack: bool, topo: &Topology) -> Result<Vec<u32>, InputError> {
    let ids: CpuSet = list
        .parse()
        .map_err(|e| InputError(format!("--nodes: {e}")))?;
    let mut per_node = Vec::new();
    for id in ids.iter() {
        let node = node_arg("--nodes", id, topo)?;
        if node.span.is_empty() {
            return Err(InputError(format!(
                "--nodes {list}: node {id} has no CPU this process may use"
            )));
        }
        per_node.push(core_order(topo, &node.span));
    }
    if pack {
        return Ok(per_node.concat());
    }
    let longest = per_node.iter().map(Vec::len).max().unwrap_or(0);
    Ok((0..longest)
        .flat_map(|i| per_node.iter().filter_map(move |cpus| cpus.get(i).copied()))
        .collect())
}

pub(crate) fn describe_memory(m: &MemoryPolicy) -> String {
    match m {
        MemoryPolicy::Node(n) => format!("node {n}"),
        MemoryPolicy::Local => "local".into(),
        MemoryPolicy::Interleave(set) => format!("interleave {set}"),
    }
}

/// Pages per node as `N0 1024 N1 12` (or `-`).
fn pages(p: &BTreeMap<u32, u64>) -> String {
    if p.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> = p.iter().map(|(n, c)| format!("N{n} {c}")).collect();
    parts.join(" ")
}

fn render_single(cfg: &Config, r: &microbench::Report) -> String {
    use std::fmt::Write;
    let length = match cfg.length {
        Length::Loops(n) => format!("{n} loops"),
        Length::Seconds(s) => format!("{s} s"),
    };
    let mut out = format!(
        "[Rao13] micro-benchmark (Fig. 3): {} thread(s), {} list each ({} entries), \
         {} shared ({} words), memory {}, {length}\n",
        cfg.cpus.len(),
        bytes(cfg.working_set),
        r.entries_per_thread,
        bytes(cfg.shared),
        r.shared_words,
        describe_memory(&cfg.memory),
    );
    out.push_str("thread  CPU  ran on (node)    seconds   loops      hops/s  list pages by node\n");
    for t in &r.threads {
        let seen: Vec<String> = t
            .ran_on
            .iter()
            .map(|s| format!("{} ({})", s.cpu, s.node))
            .collect();
        let _ = writeln!(
            out,
            "{:>6}  {:>3}  {:<14} {:>9.4}  {:>6}  {:>10.3e}  {}",
            t.thread,
            t.cpu,
            seen.join(","),
            t.seconds,
            t.loops,
            t.hops_per_second,
            pages(&t.private_pages)
        );
    }
    let _ = writeln!(
        out,
        "mean thread run time {:.4} s; {:.3e} hops/s over all threads; shared area pages by node: {}",
        r.mean_seconds,
        r.hops_per_second,
        pages(&r.shared_pages)
    );
    out
}

mod experiment;

#[cfg(test)]
mod tests;
