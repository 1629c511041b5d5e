//! Generated mixes: random scenarios from a seed, to judge policies on
//! machines and workloads they were not built or tuned on.
//!
//! A mix is written as scenario text (the format of [`crate::scenario`])
//! and parsed like any file, so every generated mix can be written out,
//! read back and kept as a regression scenario: `mix:SEED` names it
//! wherever a scenario is asked for, and `numaplace generate SEED` prints
//! its file.
//!
//! What varies, each draw from the seed alone:
//! - the machine: a preset (westmere-2s, barcelona-4s, cascadelake-2s,
//!   sapphirerapids-2s-snc4, core2duo) or a synthetic one of 1-8
//!   packages, 1, 2 or 4 nodes per package (sub-NUMA clustering), SMT on
//!   or off, 2-16 cores per node, sometimes with memory-only nodes;
//! - the load: from a quarter of the CPUs busy to half again as many
//!   threads as CPUs (time-shared);
//! - the applications: single-thread programs over \[Blagodurov11\]'s classes
//!   (turtle, soft devil, devil, and a "super devil" beyond them),
//!   multithreaded processes with and without shared written data, VMs of
//!   2-16 vCPUs; memory first-touch, bound to a node, or interleaved;
//!   arrivals over the first seconds; some with phases that change class.
//!
//! The parameter ranges are the ones the shipped scenarios cite (their
//! files say where each number comes from): uncore requests and LLC
//! misses per 1000 instructions of \[Blagodurov11\] Table 1 and \[Rao13\] §6 (mcf
//! 45 / 25, milc 28 / 20, lbm 30 / 22, povray 1 / 0.05), working sets
//! from 4 MiB to \[Blagodurov11\]'s 1.6 GB of mcf, memory-level parallelism 1-4,
//! shared areas of \[Rao13\] Fig. 3 (128 KiB) up to a few MiB written
//! 1-10 times per 1000 instructions. Each application runs 5-20
//! simulated seconds alone, so that a sweep of hundreds of mixes takes
//! minutes.

use std::fmt::Write as _;

use crate::machine::{Machine, SYNTHETIC_PREFIX};
use crate::rng::Rng;

/// The prefix that names a generated mix where a scenario is asked for.
pub const MIX_PREFIX: &str = "mix:";

/// Threads of a mix at most, whatever the machine: larger mixes cost the
/// sweep time without trying anything smaller ones do not.
const MAX_THREADS: usize = 96;

/// One generated mix: its name (`mix:SEED`) and scenario text.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    /// The seed it was generated from.
    pub seed: u64,
    /// Its name: `mix:SEED`.
    pub name: String,
    /// The scenario file, as TOML.
    pub text: String,
}

/// The intensity classes of a single-thread program (\[Blagodurov11\] §3.3.2:
/// turtles below 2 LLC misses per 1000 instructions, devils above, with
/// "soft devils" between; the super devils of \[Rao13\] §6's memory-bound
/// set miss more than mcf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Turtle,
    SoftDevil,
    Devil,
    SuperDevil,
}

impl Class {
    fn draw(r: &mut Rng) -> Class {
        match r.below(20) {
            0..=4 => Class::Turtle,
            5..=9 => Class::SoftDevil,
            10..=16 => Class::Devil,
            _ => Class::SuperDevil,
        }
    }
}

/// Uniform in [lo, hi).
fn uniform(r: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * r.unit()
}

/// Log-uniform in [lo, hi): sizes and rates spread over decades.
fn log_uniform(r: &mut Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + (hi.ln() - lo.ln()) * r.unit()).exp()
}

/// A thread model, as the keys of an `[[app]]` or `[[app.phase]]` table,
/// and its estimated cycles per instruction on `m` alone.
struct Model {
    keys: String,
    cpi: f64,
}

fn model(r: &mut Rng, class: Class, m: &Machine, shared_writes: f64) -> Model {
    // (uncore_pki, llc_mpki, working set MiB, alpha, mlp) ranges per class.
    let (unc, llc, ws, alpha, mlp) = match class {
        Class::Turtle => ((0.5, 5.0), (0.02, 1.0), (1.0, 32.0), (0.3, 0.8), (1.0, 2.0)),
        Class::SoftDevil => (
            (8.0, 25.0),
            (2.0, 8.0),
            (16.0, 256.0),
            (0.3, 0.9),
            (1.0, 3.0),
        ),
        Class::Devil => (
            (20.0, 50.0),
            (8.0, 30.0),
            (64.0, 1600.0),
            (0.1, 0.6),
            (1.0, 4.0),
        ),
        Class::SuperDevil => (
            (40.0, 70.0),
            (25.0, 50.0),
            (256.0, 2048.0),
            (0.05, 0.3),
            (2.0, 6.0),
        ),
    };
    let cpi_core = uniform(r, 0.5, 1.2);
    // Rounded as written, so that llc_mpki <= uncore_pki holds in the file.
    let uncore = (log_uniform(r, unc.0, unc.1) * 100.0).round() / 100.0;
    let llc_mpki = ((log_uniform(r, llc.0, llc.1) * 1000.0).floor() / 1000.0).min(uncore);
    let working_set = log_uniform(r, ws.0, ws.1);
    let alpha = uniform(r, alpha.0, alpha.1);
    let mlp = uniform(r, mlp.0, mlp.1);
    let mut keys = String::new();
    let _ = writeln!(keys, "cpi = {cpi_core:.2}");
    let _ = writeln!(keys, "uncore_pki = {uncore:.2}");
    let _ = writeln!(keys, "llc_mpki = {llc_mpki:.3}");
    let _ = writeln!(keys, "alpha = {alpha:.2}");
    let _ = writeln!(keys, "working_set = \"{working_set:.0}MiB\"");
    let _ = writeln!(keys, "mlp = {mlp:.1}");
    if shared_writes > 0.0 {
        let _ = writeln!(keys, "shared_writes_pki = {shared_writes:.1}");
    }
    // Cycles per instruction alone: the core's, the LLC misses at the
    // local latency and the LLC hits, overlapped by mlp.
    let ghz = m.params.ghz.value;
    let stall_ns = (llc_mpki * m.params.local_latency_ns.value
        + (uncore - llc_mpki) * m.params.llc_hit_ns.value)
        / 1000.0
        / mlp;
    Model {
        keys,
        cpi: cpi_core + stall_ns * ghz,
    }
}

/// The machine line of a mix: a preset, or a synthetic machine.
fn machine_spec(r: &mut Rng) -> String {
    const PRESETS: [&str; 5] = [
        "westmere-2s",
        "barcelona-4s",
        "cascadelake-2s",
        "sapphirerapids-2s-snc4",
        "core2duo",
    ];
    // Half presets (core2duo, single-node, rarely), half synthetic.
    match r.below(20) {
        0 => return PRESETS[4].into(),
        1..=9 => return PRESETS[r.below(4)].into(),
        _ => {}
    }
    let packages = [1, 2, 2, 2, 4, 4, 8][r.below(7)];
    let nodes_per_pkg = [1, 1, 1, 2, 4][r.below(5)];
    let smt = 1 + r.below(2);
    // At most 64 cores in all.
    let max_cores = (64 / (packages * nodes_per_pkg)).clamp(2, 16);
    let cores = 2 + r.below(max_cores - 1);
    // An L3 per node, 1.25-2.5 MiB per core.
    let l3_mib = (cores as f64 * uniform(r, 1.25, 2.5)).round().max(2.0);
    let mut s = format!(
        "{SYNTHETIC_PREFIX}pack:{packages} numa:{nodes_per_pkg}(memory=64GiB) l3:1(size={l3_mib}MiB) \
         l2:{cores}(size=1MiB) core:1 pu:{smt}"
    );
    if packages * nodes_per_pkg > 1 && r.below(6) == 0 {
        let _ = write!(s, " memory-only:{}", 1 + r.below(2));
    }
    s
}

/// The scenario text of mix `seed`.
pub fn mix(seed: u64) -> Mix {
    let mut r = Rng::new(seed ^ 0x6d69_785f_6765_6e31); // "mix_gen1"
    let spec = machine_spec(&mut r);
    let machine = Machine::preset(&spec).expect("the generator names valid machines");
    let t = &machine.topology;
    let cpus = t.cpus().len();
    let cpu_nodes: Vec<usize> = t
        .nodes()
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.span.is_empty())
        .map(|(i, _)| i)
        .collect();
    let nodes = t.nodes().len();
    // Threads to place: a quarter of the CPUs to half again as many.
    let load = [0.25, 0.5, 0.75, 0.9, 1.0, 1.25, 1.5][r.below(7)];
    let budget = ((cpus as f64 * load).round() as usize).clamp(2, MAX_THREADS);

    let mut apps = String::new();
    let mut threads = 0;
    let mut longest: f64 = 0.0;
    let mut i = 0;
    while threads < budget {
        let left = budget - threads;
        let kind = r.below(10);
        let (kind_key, n, shared) = if kind < 5 || left < 2 {
            ("process", 1, None)
        } else if kind < 8 {
            let n = (2 + r.below(15)).min(left);
            // Half share written data: [Rao13] Fig. 3's 128 KiB to 8 MiB.
            let shared = (r.below(2) == 0)
                .then(|| (log_uniform(&mut r, 0.125, 8.0), uniform(&mut r, 0.5, 10.0)));
            ("process", n, shared)
        } else {
            let n = [2, 2, 4, 4, 8, 16][r.below(6)].min(left);
            ("vm", n, None)
        };
        let name = match (kind_key, n) {
            ("vm", _) => format!("vm{i}"),
            (_, 1) => format!("p{i}"),
            _ => format!("mt{i}"),
        };
        let _ = writeln!(apps, "[[app]]\nname = \"{name}\"");
        if kind_key == "vm" {
            let _ = writeln!(apps, "kind = \"vm\"");
        }
        if n > 1 {
            let _ = writeln!(apps, "threads = {n}");
        }
        match r.below(20) {
            0..=13 => {}
            14..=16 => {
                let node = if r.below(4) == 0 {
                    r.below(nodes)
                } else {
                    cpu_nodes[r.below(cpu_nodes.len())]
                };
                let _ = writeln!(apps, "memory = \"node:{node}\"");
            }
            _ => {
                let _ = writeln!(apps, "memory = \"interleave\"");
            }
        }
        let start = if r.below(5) < 3 {
            0.0
        } else {
            uniform(&mut r, 0.0, 15.0).round()
        };
        if start > 0.0 {
            let _ = writeln!(apps, "start_s = {start}");
        }
        if let Some((mib, _)) = shared {
            let _ = writeln!(apps, "shared = \"{:.0}KiB\"", mib * 1024.0);
        }
        let writes = shared.map_or(0.0, |(_, w)| w);
        // Solo seconds of the whole run.
        let solo = uniform(&mut r, 5.0, 20.0);
        let ghz = machine.params.ghz.value * 1e9;
        let phases = if r.below(4) == 0 { 2 + r.below(3) } else { 1 };
        if phases == 1 {
            let class = Class::draw(&mut r);
            let m = model(&mut r, class, &machine, writes);
            let _ = writeln!(apps, "instructions = {:.3e}", solo * ghz / m.cpi);
            apps.push_str(&m.keys);
        } else {
            let mut body = String::new();
            for _ in 0..phases {
                let class = Class::draw(&mut r);
                let m = model(&mut r, class, &machine, writes);
                let secs = solo / phases as f64;
                let _ = writeln!(
                    body,
                    "[[app.phase]]\ninstructions = {:.3e}\n{}",
                    secs * ghz / m.cpi,
                    m.keys
                );
            }
            apps.push('\n');
            apps.push_str(&body);
        }
        apps.push('\n');
        longest = longest.max(start + solo);
        threads += n;
        i += 1;
    }
    // Time enough to finish on a crowded machine; a run that is cut off
    // counts as slow, it is not dropped.
    let crowding = (threads as f64 / cpus as f64).max(1.0);
    let max_seconds = (longest * 20.0 * crowding).ceil();
    let name = format!("{MIX_PREFIX}{seed}");
    let text = format!(
        "# A generated mix (crates/numaplace-sim/src/generate.rs): `numaplace generate {seed}`\n\
         # writes this file again; `--scenario {name}` runs it without the file.\n\
         name = \"mix-{seed}\"\n\
         description = \"generated mix {seed}: {threads} threads in {i} applications on {cpus} CPUs\"\n\
         machine = \"{spec}\"\n\
         max_seconds = {max_seconds}\n\n{apps}"
    );
    Mix { seed, name, text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario;

    #[test]
    fn every_mix_is_a_valid_scenario_that_fits_its_machine() {
        for seed in 0..300 {
            let m = mix(seed);
            let w = scenario::parse(&m.text, "mix.toml")
                .unwrap_or_else(|e| panic!("mix {seed}: {e}\n{}", m.text));
            let machine = Machine::preset(&w.machine).unwrap();
            w.check_machine(&machine).unwrap();
            assert!(w.threads() >= 2 && w.threads() <= MAX_THREADS, "mix {seed}");
        }
    }

    #[test]
    fn a_mix_is_the_same_for_its_seed_and_differs_between_seeds() {
        assert_eq!(mix(7), mix(7));
        assert_ne!(mix(7).text, mix(8).text);
    }

    /// The generator reaches every kind of machine, application and
    /// memory placement the issue names, over a few hundred seeds.
    #[test]
    fn the_mixes_cover_machines_apps_and_placements() {
        let texts: Vec<String> = (0..300).map(|s| mix(s).text).collect();
        let any = |needle: &str| texts.iter().any(|t| t.contains(needle));
        for needle in [
            "machine = \"westmere-2s\"",
            "machine = \"barcelona-4s\"",
            "machine = \"cascadelake-2s\"",
            "machine = \"sapphirerapids-2s-snc4\"",
            "machine = \"core2duo\"",
            "pack:1 ",
            "pack:8 ",
            "numa:4(",
            "pu:1",
            "pu:2",
            "memory-only:",
            "kind = \"vm\"",
            "shared_writes_pki",
            "memory = \"interleave\"",
            "memory = \"node:",
            "start_s",
            "[[app.phase]]",
        ] {
            assert!(any(needle), "no mix has {needle:?}");
        }
        // Both under- and over-subscribed machines.
        let ratio = |seed: u64| {
            let w = scenario::parse(&mix(seed).text, "m.toml").unwrap();
            let m = Machine::preset(&w.machine).unwrap();
            w.threads() as f64 / m.topology.cpus().len() as f64
        };
        let ratios: Vec<f64> = (0..300).map(ratio).collect();
        assert!(ratios.iter().any(|&x| x < 0.5));
        assert!(ratios.iter().any(|&x| x > 1.2));
    }
}
