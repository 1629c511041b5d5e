//! `numaplace calibrate`: a few micro-benchmark measurements on this
//! machine, written as a machine file the simulator loads (`numaplace
//! simulate --machine FILE`). The machine starts as `Machine::generic` (the
//! stated defaults, `assumed`); what was measured replaces its default and
//! says how (`measured`):
//!
//! - the latency matrix and the local latency: a 1-thread pointer chase
//!   (\[Rao13\]'s list, `numaplace_linux::microbench`) over a working set far
//!   beyond the LLC, thread on a node's CPU, memory bound to a node, ns per
//!   dependent hop with nothing subtracted (a loaded-TLB latency);
//! - the LLC hit latency: the same chase over half the LLC;
//! - HITM within and across sockets: two threads adding atomically to one
//!   shared word, time per add.
//!
//! Cache sizes come from the topology.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use numaplace_linux::microbench::{self, Config, ENTRY_BYTES, Length, MemoryPolicy};
use numaplace_model::Topology;
use numaplace_sim::Machine;
use numaplace_sim::machine::{Param, Source};

use numaplace::cli::{CalibrateArgs, MachineArgs};
use numaplace::error::InputError;
use numaplace::machine::{Usable, core_order};
use numaplace::report::topology::bytes;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The smallest DRAM working set of a full run.
const MIN_DRAM_SET: u64 = 256 * MIB;
/// Lists of all (CPU node, memory node) pairs together, at most, in a full
/// run: about a minute of building and walking.
const DRAM_TOTAL: u64 = 16 * GIB;
/// The DRAM working set with --quick.
const QUICK_DRAM_SET: u64 = 64 * MIB;
/// The LLC working set with --quick, at most.
const QUICK_LLC_SET: u64 = 8 * MIB;
/// List hops per DRAM measurement, at least (full, quick).
const DRAM_HOPS: [u64; 2] = [1 << 22, 1 << 20];
/// Seconds of the LLC chase (full, quick).
const LLC_SECONDS: [f64; 2] = [1.0, 0.25];
/// Atomic adds per thread per HITM measurement (full, quick).
const HITM_ADDS: [u64; 2] = [5_000_000, 1_000_000];
const SEED: u64 = 1;

/// One measured entry of the latency matrix (dense node ids of the
/// machine's topology).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cell {
    pub cpu_node: usize,
    pub memory_node: usize,
    pub ns: f64,
}

/// A value and what was run to get it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Value {
    pub ns: f64,
    /// For the file's source: what was run.
    pub how: String,
    /// For the table: a few words.
    pub short: String,
}

/// What calibrate measured, and what it could not with why.
#[derive(Debug, Clone, Default)]
pub(crate) struct Measurements {
    pub latency: Vec<Cell>,
    /// How the latency cells were measured.
    pub latency_how: String,
    pub llc_hit: Option<Value>,
    pub hitm_same: Option<Value>,
    pub hitm_cross: Option<Value>,
    /// Parameter name, why it was not measured.
    pub missing: Vec<(&'static str, String)>,
    /// Things the reader of the table should know.
    pub notes: Vec<String>,
}

fn measured(how: &str) -> Source {
    Source::Measured(Cow::Owned(format!("numaplace calibrate: {how}")))
}

/// The generic machine with the measurements in place of its defaults.
/// Matrix entries not measured keep the generic rule, scaled to the
/// measured local latency.
pub(crate) fn build_machine(name: &str, topology: Topology, m: &Measurements) -> Machine {
    let mut machine = Machine::generic(name, topology);
    let p = &mut machine.params;
    let n = machine.topology.nodes().len();
    let diagonal: Vec<f64> = (m.latency.iter())
        .filter(|c| c.cpu_node == c.memory_node)
        .map(|c| c.ns)
        .collect();
    if !diagonal.is_empty() {
        let local = diagonal.iter().sum::<f64>() / diagonal.len() as f64;
        let scale = local / p.local_latency_ns.value;
        for v in &mut p.latency_ns {
            *v *= scale;
        }
        let nodes = if diagonal.len() == 1 {
            String::new()
        } else {
            format!(" (mean of {} nodes)", diagonal.len())
        };
        p.local_latency_ns = Param {
            value: local,
            source: measured(&format!(
                "{}, memory on the thread's node{nodes}",
                m.latency_how
            )),
        };
    }
    for c in &m.latency {
        p.latency_ns[c.cpu_node * n + c.memory_node] = c.ns;
    }
    if !m.latency.is_empty() {
        let rest = if m.latency.len() == n * n {
            String::new()
        } else {
            format!(
                "; {} of {} entries measured, the rest (rows of nodes without CPUs this process \
                 may use, columns of nodes without memory) the generic default local × (1 + 0.64 \
                 (d/10 - 1)) for SLIT distance d, with the measured local latency",
                m.latency.len(),
                n * n
            )
        };
        p.latency_source = measured(&format!(
            "{}, for each node with CPUs (row) and each node with memory (column){rest}",
            m.latency_how
        ));
    }
    let set = |param: &mut Param, v: &Option<Value>| {
        if let Some(v) = v {
            *param = Param {
                value: v.ns,
                source: measured(&v.how),
            };
        }
    };
    set(&mut p.llc_hit_ns, &m.llc_hit);
    set(&mut p.hitm_same_socket_ns, &m.hitm_same);
    set(&mut p.hitm_cross_socket_ns, &m.hitm_cross);
    machine
}

/// Refuses to overwrite `path` unless `force`.
pub(crate) fn check_output(path: &Path, force: bool) -> Result<(), InputError> {
    if path.exists() && !force {
        return Err(InputError(format!(
            "{} exists: give --force to overwrite it, or -o another file",
            path.display()
        )));
    }
    if path.is_dir() {
        return Err(InputError(format!(
            "-o {}: a directory, not a file",
            path.display()
        )));
    }
    numaplace::files::check_output(path, "-o").map_err(|e| InputError(format!("{e:#}")))
}

/// The DRAM chase's working set: 8 × the largest LLC, at least 256 MiB
/// (64 MiB with --quick), less when `pairs` lists would pass
/// [`DRAM_TOTAL`] (not under 2 × the LLC), and at most a quarter of the
/// smallest memory node measured (`node_memory`, 0 when unknown); with a
/// note when it was reduced.
pub(crate) fn dram_working_set(
    llc: u64,
    pairs: usize,
    node_memory: u64,
    quick: bool,
) -> (u64, Option<String>) {
    let mut ws = if quick {
        QUICK_DRAM_SET
    } else {
        (8 * llc).max(MIN_DRAM_SET)
    };
    let mut note = None;
    if !quick && pairs as u64 * ws > DRAM_TOTAL {
        ws = (DRAM_TOTAL / pairs.max(1) as u64)
            .max(2 * llc)
            .max(MIN_DRAM_SET);
        note = Some(format!(
            "{pairs} node pairs: working set {} per pair to stay near a minute",
            bytes(ws / MIB * MIB)
        ));
    }
    if node_memory > 0 && ws > node_memory / 4 {
        ws = node_memory / 4;
        note = Some(format!(
            "working set capped at a quarter of the smallest memory node ({})",
            bytes(node_memory)
        ));
    }
    let ws = (ws / MIB * MIB).max(ENTRY_BYTES);
    if llc > 0 && ws < 4 * llc {
        let why = if quick {
            "--quick".to_string()
        } else {
            note.unwrap_or_default()
        };
        note = Some(format!(
            "the DRAM working set {} is not far beyond the LLC ({}): {why}; part of the chase \
             may hit the LLC, so the latencies read low",
            bytes(ws),
            bytes(llc)
        ));
    }
    (ws, note)
}

/// The LLC chase's working set: half the LLC (at most 8 MiB with --quick).
pub(crate) fn llc_working_set(llc: u64, quick: bool) -> u64 {
    let half = llc / 2;
    let ws = if quick { half.min(QUICK_LLC_SET) } else { half };
    ws / ENTRY_BYTES * ENTRY_BYTES
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "host".into())
}

pub(crate) fn run(args: &CalibrateArgs) -> Result<()> {
    check_output(&args.output, args.force)?;
    let full = numaplace::machine::load(&MachineArgs::default())?;
    let host = Usable::host()?;
    let name = host_name();
    let q = if args.quick { " (--quick)" } else { "" };
    println!(
        "numaplace calibrate{q}: {name}, {} package(s), {} node(s), {} CPUs this process may use",
        full.packages().len(),
        full.nodes().len(),
        host.topo.span().len()
    );
    let m = measure(&full, &host.topo, args.quick)?;
    let machine = build_machine(&name, full, &m);
    print!("{}", render(&machine, &m));
    numaplace::files::write_atomically(&args.output, &machine.to_file_text(), 0o644)
        .context("writing the machine file")?;
    let shown = args.output.display().to_string();
    let arg = if shown.ends_with(".json") || shown.contains('/') {
        shown.clone()
    } else {
        format!("./{shown}")
    };
    println!("wrote {shown}; simulate it with: numaplace simulate --machine {arg}");
    Ok(())
}

/// Runs the measurements: `full` is the machine's topology (dense ids of
/// the model), `allowed` the same restricted to this process's CPUs.
fn measure(full: &Topology, allowed: &Topology, quick: bool) -> Result<Measurements> {
    let mut m = Measurements::default();
    let k = usize::from(quick);
    let dense = |os: u32| full.node_by_os_id(os).map(|n| n.id);
    let rows: Vec<(usize, u32, u32)> = (allowed.cpu_nodes())
        .filter_map(|n| Some((dense(n.os_id)?, n.os_id, core_order(allowed, &n.span)[0])))
        .collect();
    let cols: Vec<(usize, u32, u64)> = (allowed.nodes().iter())
        .filter(|n| n.memory > 0)
        .filter_map(|n| Some((dense(n.os_id)?, n.os_id, n.memory)))
        .collect();
    let llc_max = (0..full.llcs().len())
        .filter_map(|i| full.llc_size(i))
        .max()
        .unwrap_or(0);
    let smallest = cols.iter().map(|c| c.2).min().unwrap_or(0);
    let (ws, note) = dram_working_set(llc_max, rows.len() * cols.len(), smallest, quick);
    let entries = ws / ENTRY_BYTES;
    let loops = (DRAM_HOPS[k] / entries).max(1);
    let on: Vec<String> = (rows.iter())
        .map(|(_, node, cpu)| format!("CPU {cpu} for node {node}"))
        .collect();
    m.latency_how = format!(
        "loaded-TLB pointer-chase latency: ns per dependent hop of 1 thread walking a random \
         cycle of 64-byte entries over {} ({loops} walk(s)), pinned to a CPU of the row's node \
         ({}), the list bound (mbind) to the column's node; nothing subtracted (it includes \
         address translation, as the simulator's M5 does for such walks){}",
        bytes(ws),
        on.join(", "),
        note.as_ref().map_or(String::new(), |n| format!("; {n}"))
    );
    m.notes.extend(note);
    if rows.is_empty() || cols.is_empty() {
        m.missing.push((
            "latency_ns",
            "no node with CPUs this process may use and one with memory".into(),
        ));
    }
    for &(row, row_os, cpu) in &rows {
        for &(col, col_os, _) in &cols {
            let r = chase(cpu, ws, col_os, Length::Loops(loops))?;
            let off = pages_elsewhere(&r, col_os);
            println!(
                "  DRAM chase: CPU {cpu} (node {row_os}) -> memory on node {col_os}, {}: {:.1} ns{off}",
                bytes(ws),
                r.1
            );
            m.latency.push(Cell {
                cpu_node: row,
                memory_node: col,
                ns: r.1,
            });
        }
    }
    if let Some(&(_, row_os, cpu)) = rows.first() {
        let llc = allowed
            .cpu_by_os_id(cpu)
            .and_then(|c| allowed.llc_size(c.llc));
        let home = cols
            .iter()
            .find(|c| c.1 == row_os)
            .or(cols.first())
            .map(|c| c.1);
        match (llc, home) {
            (Some(size), Some(node)) if llc_working_set(size, quick) > 0 => {
                let ws = llc_working_set(size, quick);
                let r = chase(cpu, ws, node, Length::Seconds(LLC_SECONDS[k]))?;
                println!(
                    "  LLC chase: CPU {cpu}, {} (LLC {}): {:.1} ns",
                    bytes(ws),
                    bytes(size),
                    r.1
                );
                let part = if ws == llc_working_set(size, false) {
                    "half the LLC".to_string()
                } else {
                    format!("--quick: less than half the LLC of {}", bytes(size))
                };
                m.llc_hit = Some(Value {
                    ns: r.1,
                    how: format!(
                        "loaded-TLB pointer-chase latency: ns per dependent hop of 1 thread on \
                         CPU {cpu} walking a random cycle of 64-byte entries over {} ({part}) \
                         on node {node}, for {} s; nothing subtracted",
                        bytes(ws),
                        LLC_SECONDS[k]
                    ),
                    short: format!("pointer chase over {} ({part})", bytes(ws)),
                });
            }
            (None, _) => m
                .missing
                .push(("llc_hit_ns", "the topology gives no LLC size".into())),
            _ => m
                .missing
                .push(("llc_hit_ns", "no node with memory to chase in".into())),
        }
    }
    let adds = HITM_ADDS[k];
    match same_socket_pair(allowed) {
        Ok((a, b)) => {
            let ns = hitm(a, b, adds)?;
            println!("  HITM: CPUs {a},{b} (one socket): {ns:.1} ns per add");
            m.hitm_same = Some(hitm_value(a, b, "one socket", adds, ns));
        }
        Err(why) => m.missing.push(("hitm_same_socket_ns", why)),
    }
    match cross_socket_pair(full, allowed) {
        Ok((a, b)) => {
            let ns = hitm(a, b, adds)?;
            println!("  HITM: CPUs {a},{b} (two sockets): {ns:.1} ns per add");
            m.hitm_cross = Some(hitm_value(a, b, "two sockets", adds, ns));
        }
        Err(why) => m.missing.push(("hitm_cross_socket_ns", why)),
    }
    if full.cpu_nodes().count() < 2 {
        m.notes.push(format!(
            "remote latencies need two NUMA nodes with CPUs; this machine has {}",
            full.cpu_nodes().count()
        ));
    }
    Ok(m)
}

/// One pointer chase: the report and ns per hop.
fn chase(cpu: u32, ws: u64, node: u32, length: Length) -> Result<(microbench::Report, f64)> {
    let r = microbench::run(&Config {
        cpus: vec![cpu],
        working_set: ws,
        shared: 0,
        memory: MemoryPolicy::Node(node),
        length,
        seed: SEED,
    })?;
    let t = &r.threads[0];
    let ns = 1e9 * t.seconds / t.hops.max(1) as f64;
    Ok((r, ns))
}

/// " (N% of the list's pages elsewhere)" when the binding did not hold.
fn pages_elsewhere(r: &(microbench::Report, f64), node: u32) -> String {
    let pages = &r.0.threads[0].private_pages;
    let total: u64 = pages.values().sum();
    let off: u64 = pages
        .iter()
        .filter(|(n, _)| **n != node)
        .map(|(_, c)| c)
        .sum();
    if off == 0 || total == 0 {
        String::new()
    } else {
        format!(
            " (warning: {:.0}% of the list's pages are not on node {node})",
            100.0 * off as f64 / total as f64
        )
    }
}

/// Two threads on CPUs `a` and `b` adding atomically to one shared word:
/// ns per add, the run time over the adds of both (a contended add moves
/// the line once).
fn hitm(a: u32, b: u32, adds: u64) -> Result<f64> {
    let r = microbench::run(&Config {
        cpus: vec![a, b],
        working_set: 0,
        shared: microbench::WORD_BYTES,
        memory: MemoryPolicy::Local,
        length: Length::Loops(adds),
        seed: SEED,
    })?;
    let seconds = r.threads.iter().map(|t| t.seconds).fold(0.0, f64::max);
    let total: u64 = r.threads.iter().map(|t| t.shared_adds).sum();
    Ok(1e9 * seconds / total.max(1) as f64)
}

fn hitm_value(a: u32, b: u32, where_: &str, adds: u64, ns: f64) -> Value {
    Value {
        ns,
        how: format!(
            "2 threads on CPUs {a} and {b} ({where_}, separate cores) each adding 1 atomically \
             {adds} times to one shared 8-byte word (no private data); ns = run time / adds of \
             both threads, each contended add moving the line once"
        ),
        short: format!("atomic adds to one line, CPUs {a},{b}"),
    }
}

/// Two CPUs on separate cores of one package, this process may use.
fn same_socket_pair(t: &Topology) -> Result<(u32, u32), String> {
    for p in t.packages() {
        let cpus = core_order(t, &p.span);
        let core = |c: u32| t.cpu_by_os_id(c).map(|c| c.core);
        if let [a, b, ..] = cpus[..] {
            if core(a) != core(b) {
                return Ok((a, b));
            }
        }
    }
    Err("needs two cores of one socket this process may use".into())
}

/// A CPU in each of two packages, this process may use.
fn cross_socket_pair(full: &Topology, t: &Topology) -> Result<(u32, u32), String> {
    let firsts: Vec<u32> = (t.packages().iter())
        .filter(|p| !p.span.is_empty())
        .map(|p| core_order(t, &p.span)[0])
        .collect();
    match firsts[..] {
        [a, b, ..] => Ok((a, b)),
        _ if full.packages().len() < 2 => Err(format!(
            "needs two sockets (packages); this machine has {}",
            full.packages().len()
        )),
        _ => Err("needs CPUs of two sockets this process may use".into()),
    }
}

/// The table: parameter, value, measured or default and why; the latency
/// matrix; cache sizes; notes.
pub(crate) fn render(machine: &Machine, m: &Measurements) -> String {
    let p = &machine.params;
    let mut out = String::new();
    let why_default = |name: &str, src: &Source| -> String {
        let why = match src {
            Source::Assumed(s) | Source::Published(s) | Source::Derived(s) => s.to_string(),
            Source::Measured(s) => s.to_string(),
        };
        match m.missing.iter().find(|(n, _)| *n == name) {
            Some((_, reason)) => format!("default ({why}): could not measure, {reason}"),
            None => format!("default ({why}): calibrate does not measure it"),
        }
    };
    let status = |name: &str, param: &Param, short: Option<&str>| match (&param.source, short) {
        (Source::Measured(_), Some(s)) => format!("measured: {s}"),
        (Source::Measured(_), None) => "measured".to_string(),
        (src, _) => why_default(name, src),
    };
    let short = |v: &Option<Value>| v.as_ref().map(|v| v.short.clone());
    let local_short = (!m.latency.is_empty()).then(|| "pointer chase, memory local".to_string());
    let rows = p.named().map(|(name, param)| {
        let s = match name {
            "local_latency_ns" => local_short.clone(),
            "llc_hit_ns" => short(&m.llc_hit),
            "hitm_same_socket_ns" => short(&m.hitm_same),
            "hitm_cross_socket_ns" => short(&m.hitm_cross),
            _ => None,
        };
        (name, param, s)
    });
    let _ = writeln!(out, "{:<22} {:>9}  source", "parameter", "value");
    for (name, param, s) in &rows {
        let _ = writeln!(
            out,
            "{name:<22} {:>9.1}  {}",
            param.value,
            status(name, param, s.as_deref())
        );
    }
    let n = machine.topology.nodes().len();
    let is_measured = |a: usize, b: usize| {
        m.latency
            .iter()
            .any(|c| c.cpu_node == a && c.memory_node == b)
    };
    let _ = writeln!(
        out,
        "latency_ns (row: CPU node, column: memory node; * default{}):",
        if m.latency.is_empty() {
            ""
        } else {
            ", scaled to the measured local latency"
        }
    );
    let os = |i: usize| machine.topology.nodes()[i].os_id;
    let _ = write!(out, "{:>6}", "");
    for b in 0..n {
        let _ = write!(out, " {:>9}", format!("N{}", os(b)));
    }
    out.push('\n');
    for a in 0..n {
        let _ = write!(out, "{:>6}", format!("N{}", os(a)));
        for b in 0..n {
            let mark = if is_measured(a, b) { " " } else { "*" };
            let _ = write!(out, " {:>8.1}{mark}", p.latency_ns[a * n + b]);
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "cache sizes: from the topology, not measured: {}",
        caches(&machine.topology)
    );
    for (name, why) in &m.missing {
        let _ = writeln!(out, "could not measure {name}: {why}");
    }
    for note in &m.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

/// "L3 480 MiB (1 domain); L2 2 MiB; L1d 48 KiB" from the topology.
fn caches(t: &Topology) -> String {
    use numaplace_model::CacheKind;
    let mut by_level: std::collections::BTreeMap<(u8, &str), (Vec<u64>, usize)> =
        Default::default();
    for c in t.caches() {
        let kind = match c.kind {
            CacheKind::Data => "d",
            CacheKind::Instruction => "i",
            CacheKind::Unified => "",
        };
        let e = by_level.entry((c.level, kind)).or_default();
        if c.size > 0 && !e.0.contains(&c.size) {
            e.0.push(c.size);
        }
        e.1 += 1;
    }
    if by_level.is_empty() {
        return "none reported".into();
    }
    let parts: Vec<String> = (by_level.iter().rev())
        .filter(|(_, (sizes, _))| !sizes.is_empty())
        .map(|((level, kind), (sizes, count))| {
            let s: Vec<String> = sizes.iter().map(|&s| bytes(s)).collect();
            format!("L{level}{kind} {} (x{count})", s.join("/"))
        })
        .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests;
