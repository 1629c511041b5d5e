//! Scenario files: what the simulator runs, in TOML, parsed into a
//! validated [`Workload`]. `docs/scenarios.md` is the user's reference with
//! a worked example; this is the complete format.
//!
//! ```toml
//! name = "spec-mix"            # optional; default: the file stem (built-ins: their name)
//! description = "..."          # optional
//! machine = "westmere-2s"      # required: a preset of machine::PRESETS, or
//!                              # "synthetic:LEVELS [memory-only:N]" (Machine::synthetic)
//! step_ms = 10                 # optional, default 10, 0.01..=10000 (simulated ms per model step)
//! max_seconds = 3600           # optional, default 3600, > 0 and <= 30 days (a run stops here);
//!                              # at most 10^7 model steps (max_seconds / step_ms)
//! mismatch_percent = 25        # optional, 0 <= P < 100: the world's machine parameters drawn within
//!                              # ±P % of the machine the policies are told, per run seed
//!                              # (Machine::perturbed); `--mismatch` overrides it
//!
//! [linux]                      # optional, every key optional, defaults = LinuxModel::default()
//! balance_interval_ms = 100    # > 0
//! migrate_probability = 0.002  # 0..=1
//! numa_balancing = false      # the kernel the policies run on (default / autonuma are fixed)
//! numa_balancing_scan_delay_ms = 1000        # > 0, the kernel's sysctls and defaults
//! numa_balancing_scan_period_min_ms = 1000   # > 0
//! numa_balancing_scan_period_max_ms = 60000  # >= the minimum
//! numa_balancing_scan_size_mb = 256          # > 0
//!
//! [[app]]                      # at least one
//! name = "mcf"                 # required, printable, unique (after copies)
//! kind = "process"             # "process" (default) or "vm"
//! threads = 1                  # 1..=4096, default 1
//! copies = 1                   # 1..=1024, default 1: that many identical apps named mcf.0, mcf.1, ... when > 1
//! memory = "first-touch"       # "first-touch" (default) | "interleave" | "interleave:LIST" | "node:N" (dense node ids)
//! cpus = "0-3"                 # optional cpuset, kernel list syntax, dense CPU ids; threads <= its CPUs
//! cpus_by = "taskset"          # "taskset" (default: the app chose its cpus, policies leave it alone)
//!                              # | "cgroup" (its cgroup's cpuset: policies place it within them)
//! start_s = 0.0                # >= 0, default 0, below max_seconds
//! runs = 1                     # 1..=10000, default 1: runs back to back
//! shared = "128KiB"            # bytes shared by the app's threads, default 0
//! sharers = 4                  # how many of its threads (the first) use it, default all
//! # an MPI job's structure (docs/simulator.md, "MPI jobs"): its copies are its ranks
//! rank_skew = 0.1              # 0 <= rank_skew < 1, default 0; > 0 needs copies > 1: copy r of n
//!                              # runs (1 + rank_skew (2r/(n-1) - 1)) x every phase's instructions
//! barrier = "phase"            # "none" (default) | "phase": the ranks (every thread of every copy)
//!                              # wait for each other, spinning, at the end of each phase and run
//! # the thread model; a phase inherits every key it does not set
//! instructions = 1e11          # > 0 per thread and run; required here unless [[app.phase]] is
//!                              # given, and then forbidden here
//! cpi = 1.0                    # core CPI, > 0, default 1.0
//! uncore_pki = 20              # L2 misses (uncore requests) per 1000 instructions, >= 0, required
//! working_set = "64MiB"        # private working set per thread, > 0, required
//! pattern = "power-law"        # "power-law" (default) | "uniform"
//! llc_mpki = 15                # power-law only, required there: LLC misses per 1000 instructions
//!                              # with the whole LLC; 0 <= llc_mpki <= uncore_pki
//! alpha = 0.5                  # power-law only, in (0, 2], default 0.5
//! mlp = 1.0                    # memory-level parallelism, >= 1, default 1
//! shared_writes_pki = 0        # writes to the shared area per 1000 instructions, >= 0,
//!                              # default 0; > 0 needs shared > 0
//!
//! [[app.phase]]                # optional, in order; belongs to the [[app]] above it
//! instructions = 5e10          # required in every phase
//! uncore_pki = 2               # any thread-model key overrides the app's
//! ```
//!
//! Sizes are an integer number of bytes or a string with a unit: `B`,
//! `KiB`, `MiB`, `GiB`, `TiB`, or `K`/`KB`, `M`/`MB`, `G`/`GB`, `T`/`TB` as
//! the same binary units (the papers write "12MB" for 12 MiB); the number
//! may have decimals (`"1.5MiB"`) and the unit is case-insensitive.
//!
//! Inheritance rules of phases: a phase that sets `pattern` to something
//! other than the app's pattern does not inherit the app's `llc_mpki` and
//! `alpha`; an `llc_mpki` inherited from the app and above the phase's own
//! `uncore_pki` is capped at it (the model never has more LLC misses than
//! uncore requests), while an `llc_mpki` the phase sets itself above its
//! `uncore_pki` is an error.
//!
//! At most 4096 applications (copies counted) and 100,000 threads in all.
//!
//! Validation against the machine: `node:N` must name a node of the
//! preset, `cpus` only its CPUs, and an app with `cpus` may not have more
//! threads than the set has CPUs. Apps together may have more threads than
//! the machine has CPUs: the simulated Linux time-shares them.
//!
//! Every error names the file, the line and column, and the field path
//! (`app[2].working_set`, `app[0].phase[1].uncore_pki`, indexes counting
//! `[[app]]` tables of the file from 0), and says what is allowed:
//!
//! ```text
//! my.toml:14:15: field `app[1].memory`: node 3 does not exist: westmere-2s has nodes 0-1
//! ```

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::str::FromStr;

use numaplace_model::CpuSet;
use serde::Deserialize;
use serde::de::IgnoredAny;
use toml::{Spanned, Value};

mod diagnostics;
pub use diagnostics::line_col;
mod format;
mod resolve;
mod thread_model;
mod values;

use diagnostics::*;
use format::*;
use resolve::parse_named;
use thread_model::*;

use crate::machine::{Machine, PRESETS};
use crate::workload::{
    AppKind, AppSpec, Barrier, Job, LinuxModel, MemoryPlacement, Pattern, Phase, ThreadModel,
    Workload,
};

/// Ranges of a scenario's counts and times, checked before anything is
/// allocated or stepped: far beyond any scenario the papers describe (at most
/// 64 threads on 16-core machines, runs of minutes), small enough that a
/// hostile file can neither exhaust memory nor run for ever.
pub const MAX_THREADS: u32 = 4096;
/// Copies of an application at most.
pub const MAX_COPIES: u32 = 1024;
/// Applications at most, copies counted.
pub const MAX_APPS: usize = 4096;
/// Runs of one application at most.
pub const MAX_RUNS: u32 = 10_000;
/// The shortest simulation step, ms.
pub const MIN_STEP_MS: f64 = 0.01;
/// The longest simulation step, ms.
pub const MAX_STEP_MS: f64 = 10_000.0;
/// The longest simulated time, seconds (30 days).
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;
/// Simulation steps at most (time over step).
pub const MAX_STEPS: f64 = 1e7;

/// The built-in scenario a run uses when none is named.
pub const DEFAULT: &str = "default";

/// Every shipped scenario (`crates/numaplace-sim/scenarios/NAME.toml`).
pub const BUILTIN: &[&str] = &[
    "default",
    "microbench-westmere",
    "npb-westmere",
    "spec-westmere",
    "spec-barcelona",
    "mpi-barcelona",
    "devils-barcelona",
    "pairs-core2duo",
    "classes-westmere",
    "pool-core2duo",
];

/// The text of a built-in scenario.
pub fn builtin_text(name: &str) -> Option<&'static str> {
    Some(match name {
        "default" => include_str!("../scenarios/default.toml"),
        "microbench-westmere" => include_str!("../scenarios/microbench-westmere.toml"),
        "npb-westmere" => include_str!("../scenarios/npb-westmere.toml"),
        "spec-westmere" => include_str!("../scenarios/spec-westmere.toml"),
        "spec-barcelona" => include_str!("../scenarios/spec-barcelona.toml"),
        "mpi-barcelona" => include_str!("../scenarios/mpi-barcelona.toml"),
        "devils-barcelona" => include_str!("../scenarios/devils-barcelona.toml"),
        "pairs-core2duo" => include_str!("../scenarios/pairs-core2duo.toml"),
        "classes-westmere" => include_str!("../scenarios/classes-westmere.toml"),
        "pool-core2duo" => include_str!("../scenarios/pool-core2duo.toml"),
        _ => return None,
    })
}

/// A built-in scenario by name, parsed; `None` if there is no such
/// built-in.
pub fn builtin(name: &str) -> Option<Result<Workload, ScenarioError>> {
    let text = builtin_text(name)?;
    Some(parse_named(text, &format!("builtin:{name}.toml"), name))
}

/// Parses a scenario. `origin` names the text in errors (a file name) and
/// its stem is the scenario's name when the file gives none.
pub fn parse(text: &str, origin: &str) -> Result<Workload, ScenarioError> {
    let stem = Path::new(origin)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| origin.to_string());
    parse_named(text, origin, &stem)
}

/// Reads and parses a scenario file.
pub fn load(path: &Path) -> Result<Workload, ScenarioError> {
    let origin = path.display().to_string();
    let text =
        numaplace_io::bounded::read_to_string(path, numaplace_io::bounded::SCENARIO_MAX_BYTES)
            .map_err(|e| ScenarioError {
                origin: origin.clone(),
                line: None,
                column: None,
                field: None,
                message: format!("cannot read the scenario file: {e}"),
            })?;
    parse(&text, &origin)
}

/// `s` may be a built-in name or a path to a .toml file.
pub fn resolve(s: &str) -> Result<Workload, ScenarioError> {
    if let Some(w) = builtin(s) {
        return w;
    }
    if let Some(seed) = s.strip_prefix(crate::generate::MIX_PREFIX) {
        let seed: u64 = seed.parse().map_err(|_| ScenarioError {
            origin: s.to_string(),
            line: None,
            column: None,
            field: None,
            message: "a generated mix is named mix:SEED, SEED a whole number from 0 to 2^64 - 1"
                .into(),
        })?;
        let m = crate::generate::mix(seed);
        return parse_named(&m.text, &m.name, &format!("mix-{seed}"));
    }
    let path = Path::new(s);
    let looks_like_path = s.contains('/')
        || s.contains(std::path::MAIN_SEPARATOR)
        || path.extension().is_some_and(|e| e == "toml");
    if looks_like_path || path.exists() {
        return load(path);
    }
    Err(ScenarioError {
        origin: s.to_string(),
        line: None,
        column: None,
        field: None,
        message: format!(
            "no built-in scenario of that name and no such file: give one of {}, a generated mix (mix:SEED) or a path to a .toml file",
            BUILTIN.join(", ")
        ),
    })
}

/// What is wrong with a scenario, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError {
    /// The file (or `builtin:NAME.toml`).
    pub origin: String,
    /// 1-based line and column (in characters) of the offending text.
    pub line: Option<usize>,
    /// See `line`.
    pub column: Option<usize>,
    /// Path of the field: `machine`, `linux.migrate_probability`,
    /// `app[2].working_set`, `app[0].phase[1].uncore_pki`.
    pub field: Option<String>,
    /// What is wrong, and the range or form wanted.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// Parses a size: an integer number of bytes, or a number with a unit `B`,
/// `KiB`, `MiB`, `GiB`, `TiB` (`K`, `KB`, `M`, `MB`, ... mean the same
/// binary units), decimals allowed (`1.5MiB`), unit case-insensitive. The
/// result is rounded to a whole byte.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let hint = "give a number with a unit B, KiB, MiB, GiB or TiB, like \"64MiB\" or \"1.5GiB\"";
    if num.is_empty() {
        return Err(format!("{text:?} is not a size: {hint}"));
    }
    let value: f64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("{num:?} is not a number: {hint}"))?;
    let scale: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("unknown size unit {unit:?}: {hint}")),
    };
    if value < 0.0 {
        return Err(format!("{text:?} is negative: a size is at least 0"));
    }
    let bytes = (value * scale).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("{text:?} is too large"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests;
