//! Scenario files: what the simulator runs, in TOML, parsed into a
//! validated [`Workload`]. `docs/scenarios.md` is the user's reference with
//! a worked example; this is the complete format.
//!
//! ```toml
//! name = "spec-mix"            # optional; default: the file stem (built-ins: their name)
//! description = "..."          # optional
//! machine = "westmere-2s"      # required: a preset of machine::PRESETS
//! step_ms = 10                 # optional, default 10, > 0 (simulated ms per model step)
//! max_seconds = 3600           # optional, default 3600, > 0 (a run stops here)
//!
//! [linux]                      # optional, every key optional, defaults = LinuxModel::default()
//! balance_interval_ms = 100    # > 0
//! migrate_probability = 0.002  # 0..=1
//! numa_balancing = false
//! numa_balancing_mib_per_s = 256   # > 0
//!
//! [[app]]                      # at least one
//! name = "mcf"                 # required, printable, unique (after copies)
//! kind = "process"             # "process" (default) or "vm"
//! threads = 1                  # >= 1, default 1
//! copies = 1                   # >= 1, default 1: that many identical apps named mcf.0, mcf.1, ... when > 1
//! memory = "first-touch"       # "first-touch" (default) | "interleave" | "node:N" (dense node id)
//! cpus = "0-3"                 # optional cpuset, kernel list syntax, dense CPU ids; threads <= its CPUs
//! start_s = 0.0                # >= 0, default 0, below max_seconds
//! runs = 1                     # >= 1, default 1: runs back to back
//! shared = "128KiB"            # bytes shared by the app's threads, default 0
//! sharers = 4                  # how many of its threads (the first) use it, default all
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

use crate::machine::{Machine, PRESETS};
use crate::workload::{
    AppKind, AppSpec, LinuxModel, MemoryPlacement, Pattern, Phase, ThreadModel, Workload,
};

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
    let text = numaplace_model::bounded::read_to_string(
        path,
        numaplace_model::bounded::SCENARIO_MAX_BYTES,
    )
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
            "no built-in scenario of that name and no such file: give one of {} or a path to a .toml file",
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
    pub column: Option<usize>,
    /// Path of the field: `machine`, `linux.migrate_probability`,
    /// `app[2].working_set`, `app[0].phase[1].uncore_pki`.
    pub field: Option<String>,
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

// ---------------------------------------------------------------------------
// Raw form: what serde reads. Every value is kept as a spanned TOML value
// and checked below, so that each error can say where it is and what is
// allowed.

type Raw = Option<Spanned<Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Raw,
    description: Raw,
    machine: Raw,
    step_ms: Raw,
    max_seconds: Raw,
    linux: Option<Spanned<RawLinux>>,
    #[serde(default)]
    app: Vec<Spanned<RawApp>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLinux {
    balance_interval_ms: Raw,
    migrate_probability: Raw,
    numa_balancing: Raw,
    numa_balancing_mib_per_s: Raw,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApp {
    name: Raw,
    kind: Raw,
    threads: Raw,
    copies: Raw,
    memory: Raw,
    cpus: Raw,
    start_s: Raw,
    runs: Raw,
    shared: Raw,
    sharers: Raw,
    instructions: Raw,
    cpi: Raw,
    uncore_pki: Raw,
    working_set: Raw,
    pattern: Raw,
    llc_mpki: Raw,
    alpha: Raw,
    mlp: Raw,
    shared_writes_pki: Raw,
    #[serde(default)]
    phase: Vec<Spanned<RawPhase>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    instructions: Raw,
    cpi: Raw,
    uncore_pki: Raw,
    working_set: Raw,
    pattern: Raw,
    llc_mpki: Raw,
    alpha: Raw,
    mlp: Raw,
    shared_writes_pki: Raw,
}

/// The thread-model keys of an `[[app]]` or `[[app.phase]]` table.
struct ModelKeys<'a> {
    cpi: &'a Raw,
    uncore_pki: &'a Raw,
    working_set: &'a Raw,
    pattern: &'a Raw,
    llc_mpki: &'a Raw,
    alpha: &'a Raw,
    mlp: &'a Raw,
    shared_writes_pki: &'a Raw,
}

impl RawApp {
    fn model_keys(&self) -> ModelKeys<'_> {
        ModelKeys {
            cpi: &self.cpi,
            uncore_pki: &self.uncore_pki,
            working_set: &self.working_set,
            pattern: &self.pattern,
            llc_mpki: &self.llc_mpki,
            alpha: &self.alpha,
            mlp: &self.mlp,
            shared_writes_pki: &self.shared_writes_pki,
        }
    }
}

impl RawPhase {
    fn model_keys(&self) -> ModelKeys<'_> {
        ModelKeys {
            cpi: &self.cpi,
            uncore_pki: &self.uncore_pki,
            working_set: &self.working_set,
            pattern: &self.pattern,
            llc_mpki: &self.llc_mpki,
            alpha: &self.alpha,
            mlp: &self.mlp,
            shared_writes_pki: &self.shared_writes_pki,
        }
    }
}

/// Only the table spans, to say where a serde error is
/// (`app[1].phase[0]`): read without refusing unknown keys.
#[derive(Deserialize)]
struct Outline {
    #[serde(default)]
    linux: Option<Spanned<IgnoredAny>>,
    #[serde(default)]
    app: Vec<Spanned<OutlineApp>>,
}

#[derive(Deserialize)]
struct OutlineApp {
    #[serde(default)]
    phase: Vec<Spanned<IgnoredAny>>,
}

// ---------------------------------------------------------------------------

/// Where an error points: a span of the text and a field path.
struct Ctx<'a> {
    text: &'a str,
    origin: &'a str,
}

/// 1-based line and character column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..offset].chars().count() + 1;
    (line, column)
}

impl Ctx<'_> {
    fn err(
        &self,
        span: Option<Range<usize>>,
        field: Option<String>,
        message: String,
    ) -> ScenarioError {
        let (line, column) = match span {
            Some(s) => {
                let (l, c) = line_col(self.text, s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        ScenarioError {
            origin: self.origin.to_string(),
            line,
            column,
            field,
            message,
        }
    }

    /// An error about value `v` of field `path`.
    fn bad(&self, v: &Spanned<Value>, path: &str, message: String) -> ScenarioError {
        self.err(Some(v.span()), Some(path.to_string()), message)
    }

    /// A required key missing from the table at `table_span`.
    fn missing(&self, table_span: Range<usize>, path: &str, message: String) -> ScenarioError {
        self.err(Some(table_span), Some(path.to_string()), message)
    }

    /// A serde (syntax or structure) error, located with the outline.
    fn toml_error(&self, e: &toml::de::Error) -> ScenarioError {
        let span = e.span();
        let (field, table) = span
            .clone()
            .map_or((None, Table::Top), |s| self.field_at(s));
        let message = rewrite_unknown_field(e.message(), table).unwrap_or_else(|| {
            let m = e
                .message()
                .trim_end()
                .replace("struct RawLinux", "a table ([linux])")
                .replace("struct RawApp", "a table ([[app]])")
                .replace("struct RawPhase", "a table ([[app.phase]])")
                .replace("a sequence", "an array of tables ([[...]])")
                .replace("invalid type: map", "invalid type: a table");
            if let Some(rest) = m.strip_prefix("invalid length ") {
                // `[[linux]]`: "invalid length 1, expected struct RawLinux
                // with 4 elements"
                let expected = rest.split_once(", expected ").map_or("", |(_, e)| e);
                let expected = expected.split(" with ").next().unwrap_or(expected);
                return format!("wrong type: an array of tables, expected {expected}");
            }
            match m.strip_prefix("invalid type: ") {
                Some(rest) => format!("wrong type: {rest}"),
                None => m,
            }
        });
        self.err(span, field, message)
    }

    /// The table path (`app[1].phase[0]`, `linux`, empty at the top) and
    /// kind holding byte `at`.
    fn table_at(&self, at: usize) -> (String, Table) {
        let Ok(outline) = toml::from_str::<Outline>(self.text) else {
            return self.table_by_headers(at);
        };
        for (i, app) in outline.app.iter().enumerate() {
            for (j, p) in app.get_ref().phase.iter().enumerate() {
                if p.span().contains(&at) {
                    return (format!("app[{i}].phase[{j}]"), Table::Phase);
                }
            }
            if app.span().contains(&at) {
                return (format!("app[{i}]"), Table::App);
            }
        }
        if let Some(l) = &outline.linux
            && l.span().contains(&at)
        {
            return ("linux".to_string(), Table::Linux);
        }
        (String::new(), Table::Top)
    }

    /// [`Self::table_at`] for a text that does not parse: the last table
    /// header before byte `at`, counting `[[app]]` and `[[app.phase]]`.
    fn table_by_headers(&self, at: usize) -> (String, Table) {
        let before = &self.text[..at.min(self.text.len())];
        let (mut app, mut phase) = (None::<usize>, 0usize);
        let mut table = Table::Top;
        for line in before.lines() {
            let header: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            match header.split('#').next().unwrap_or("") {
                "[[app]]" => {
                    app = Some(app.map_or(0, |i| i + 1));
                    phase = 0;
                    table = Table::App;
                }
                "[[app.phase]]" => {
                    if table == Table::Phase {
                        phase += 1;
                    }
                    table = Table::Phase;
                }
                "[linux]" => table = Table::Linux,
                h if h.starts_with('[') => table = Table::Top,
                _ => {}
            }
        }
        let i = app.unwrap_or(0);
        match table {
            Table::Top => (String::new(), Table::Top),
            Table::Linux => ("linux".into(), Table::Linux),
            Table::App => (format!("app[{i}]"), Table::App),
            Table::Phase => (format!("app[{i}].phase[{phase}]"), Table::Phase),
        }
    }

    /// The field path of a serde error at `span` and the kind of table
    /// it is in: the key (the text of the span when it is a key, else the
    /// key of its line, else the table header of its line) prefixed by the
    /// table holding that key.
    fn field_at(&self, span: Range<usize>) -> (Option<String>, Table) {
        let is_key_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        let start = span.start.min(self.text.len());
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line = self.text[line_start..].lines().next().unwrap_or("");
        // The key starting at the span and followed by `=` (an unknown or
        // duplicate key, also inside an inline table) ...
        let rest = &self.text[start..];
        let run = rest.find(|c: char| !is_key_char(c)).unwrap_or(rest.len());
        let (key, key_at) =
            if run > 0 && rest[run..].trim_start_matches([' ', '\t']).starts_with('=') {
                (Some(rest[..run].to_string()), start)
            } else if line.trim_start().starts_with('[') {
                // ... or the header of a table that has the wrong form
                // (`[app]` for `[[app]]`): named from the table above it ...
                let name = line.trim().trim_matches(['[', ']', ' ']).to_string();
                let (parent, table) = self.table_by_headers(line_start);
                let field = match name.strip_prefix("app.") {
                    Some(sub) if !parent.is_empty() && table != Table::Linux => {
                        let app = parent.split('.').next().unwrap_or("");
                        format!("{app}.{sub}")
                    }
                    _ => name,
                };
                return (Some(field), Table::Top);
            } else {
                // ... or the key of the line the span is on.
                let key = line
                    .split_once('=')
                    .map(|(k, _)| k.trim().trim_matches('"').to_string())
                    .filter(|k| !k.is_empty() && k.chars().all(is_key_char));
                let indent = line.len() - line.trim_start().len();
                (key, line_start + indent)
            };
        let (table, kind) = self.table_at(key_at);
        let field = match (table.is_empty(), key) {
            (true, Some(k)) => Some(k),
            (false, Some(k)) => Some(format!("{table}.{k}")),
            (false, None) => Some(table),
            (true, None) => None,
        };
        (field, kind)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Top,
    Linux,
    App,
    Phase,
}

impl Table {
    fn describe(self) -> &'static str {
        match self {
            Table::Top => "at the top level",
            Table::Linux => "in [linux]",
            Table::App => "in [[app]]",
            Table::Phase => "in [[app.phase]]",
        }
    }
}

/// serde's "unknown field `x`, expected one of `a`, `b`" as "unknown key
/// `x` in [[app]]; allowed keys: a, b".
fn rewrite_unknown_field(message: &str, table: Table) -> Option<String> {
    let rest = message.strip_prefix("unknown field ")?;
    let names: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let (key, allowed) = names.split_first()?;
    Some(format!(
        "unknown key `{key}` {}; allowed keys: {}",
        table.describe(),
        allowed.join(", ")
    ))
}

/// A TOML value as the message shows it: its type and, for scalars, the
/// value.
fn shown(v: &Value) -> String {
    match v {
        Value::Array(_) | Value::Table(_) => format!("an {}", v.type_str()),
        _ => format!("{} {v}", v.type_str()),
    }
}

impl Ctx<'_> {
    fn string<'v>(
        &self,
        v: &'v Spanned<Value>,
        path: &str,
        what: &str,
    ) -> Result<&'v str, ScenarioError> {
        match v.get_ref() {
            Value::String(s) => Ok(s),
            other => Err(self.bad(
                v,
                path,
                format!("expected a string ({what}), got {}", shown(other)),
            )),
        }
    }

    fn number(&self, v: &Spanned<Value>, path: &str) -> Result<f64, ScenarioError> {
        let x = match v.get_ref() {
            Value::Integer(i) => *i as f64,
            Value::Float(f) => *f,
            other => {
                return Err(self.bad(v, path, format!("expected a number, got {}", shown(other))));
            }
        };
        if !x.is_finite() {
            return Err(self.bad(v, path, format!("expected a finite number, got {x}")));
        }
        Ok(x)
    }

    /// A number with `min < x` (strict) or `min <= x`, and `x <= max`.
    fn bounded(
        &self,
        v: &Spanned<Value>,
        path: &str,
        min: f64,
        strict_min: bool,
        max: Option<f64>,
    ) -> Result<f64, ScenarioError> {
        let x = self.number(v, path)?;
        let low_ok = if strict_min { x > min } else { x >= min };
        let high_ok = max.is_none_or(|m| x <= m);
        if !(low_ok && high_ok) {
            let rule = match (strict_min, max) {
                (true, None) => format!("greater than {min}"),
                (false, None) => format!("at least {min}"),
                (true, Some(m)) => format!("greater than {min} and at most {m}"),
                (false, Some(m)) => format!("between {min} and {m}"),
            };
            // 1e-300 is shown as such, not as 300 digits.
            let shown = if x != 0.0 && !(1e-4..1e15).contains(&x.abs()) {
                format!("{x:e}")
            } else {
                format!("{x}")
            };
            return Err(self.bad(v, path, format!("must be {rule}, got {shown}")));
        }
        Ok(x)
    }

    fn positive(&self, v: &Spanned<Value>, path: &str) -> Result<f64, ScenarioError> {
        self.bounded(v, path, 0.0, true, None)
    }

    fn non_negative(&self, v: &Spanned<Value>, path: &str) -> Result<f64, ScenarioError> {
        self.bounded(v, path, 0.0, false, None)
    }

    /// A whole number in `1..=max`.
    fn count(
        &self,
        v: &Spanned<Value>,
        path: &str,
        what: &str,
        max: u32,
    ) -> Result<u32, ScenarioError> {
        match v.get_ref() {
            Value::Integer(i) if *i >= 1 && *i <= max as i64 => Ok(*i as u32),
            Value::Integer(i) => {
                Err(self.bad(v, path, format!("must be 1..={max} ({what}), got {i}")))
            }
            other => Err(self.bad(
                v,
                path,
                format!(
                    "expected a whole number 1..={max} ({what}), got {}",
                    shown(other)
                ),
            )),
        }
    }

    fn boolean(&self, v: &Spanned<Value>, path: &str) -> Result<bool, ScenarioError> {
        match v.get_ref() {
            Value::Boolean(b) => Ok(*b),
            other => Err(self.bad(
                v,
                path,
                format!("expected true or false, got {}", shown(other)),
            )),
        }
    }

    /// A size in bytes; `positive`: it must be more than 0.
    fn size(&self, v: &Spanned<Value>, path: &str, positive: bool) -> Result<u64, ScenarioError> {
        let bytes = match v.get_ref() {
            Value::Integer(i) if *i < 0 => {
                return Err(self.bad(
                    v,
                    path,
                    format!(
                        "size {i} is negative: give a size in bytes or with a unit, like \"64MiB\""
                    ),
                ));
            }
            Value::Integer(i) => *i as u64,
            Value::String(s) => parse_size(s).map_err(|m| self.bad(v, path, m))?,
            other => {
                return Err(self.bad(
                    v,
                    path,
                    format!(
                        "expected a size: a whole number of bytes or a string like \"64MiB\", got {}",
                        shown(other)
                    ),
                ));
            }
        };
        if positive && bytes == 0 {
            return Err(self.bad(
                v,
                path,
                "size must be greater than 0, like \"64MiB\"".into(),
            ));
        }
        Ok(bytes)
    }

    /// A name: non-empty, no control characters.
    fn name(&self, v: &Spanned<Value>, path: &str) -> Result<String, ScenarioError> {
        let s = self.string(v, path, "a name")?;
        if s.trim().is_empty() {
            return Err(self.bad(
                v,
                path,
                "the name is empty: give a name like \"mcf\"".into(),
            ));
        }
        if let Some(c) = s.chars().find(|c| c.is_control()) {
            return Err(self.bad(
                v,
                path,
                format!("the name has the control character {c:?}: use printable characters only"),
            ));
        }
        Ok(s.to_string())
    }
}

// ---------------------------------------------------------------------------

/// Ranges of a scenario's counts and times, checked before anything is
/// allocated for them.
pub const MAX_THREADS: u32 = 4096;
pub const MAX_COPIES: u32 = 1024;
pub const MAX_APPS: usize = 4096;
pub const MAX_RUNS: u32 = 10_000;
pub const MIN_STEP_MS: f64 = 0.01;
pub const MAX_STEP_MS: f64 = 10_000.0;
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;
pub const MAX_STEPS: f64 = 1e7;

fn parse_named(text: &str, origin: &str, default_name: &str) -> Result<Workload, ScenarioError> {
    let cx = Ctx { text, origin };
    let raw: RawScenario = toml::from_str(text).map_err(|e| cx.toml_error(&e))?;

    let name = match &raw.name {
        Some(v) => cx.name(v, "name")?,
        None => default_name.to_string(),
    };
    let description = match &raw.description {
        Some(v) => cx.string(v, "description", "a description")?.to_string(),
        None => String::new(),
    };
    let machine_hint = format!("one of {}", PRESETS.join(", "));
    let Some(mv) = &raw.machine else {
        return Err(cx.err(
            None,
            Some("machine".into()),
            format!("missing: give the machine preset to simulate, {machine_hint}"),
        ));
    };
    let machine_name = cx.string(mv, "machine", "a machine preset")?;
    let machine = Machine::preset(machine_name).map_err(|_| {
        cx.bad(
            mv,
            "machine",
            format!("unknown machine preset {machine_name:?}: use {machine_hint}"),
        )
    })?;
    let step_ms = match &raw.step_ms {
        Some(v) => cx.bounded(v, "step_ms", MIN_STEP_MS, false, Some(MAX_STEP_MS))?,
        None => 10.0,
    };
    let max_seconds = match &raw.max_seconds {
        Some(v) => cx.bounded(v, "max_seconds", 0.0, true, Some(MAX_SECONDS))?,
        None => 3600.0,
    };
    // Each step costs the model a pass over every thread: bounded, so a
    // scenario cannot make the simulator run for ever.
    let steps = max_seconds * 1000.0 / step_ms;
    if steps > MAX_STEPS {
        let v = raw.step_ms.as_ref().or(raw.max_seconds.as_ref());
        return Err(cx.err(
            v.map(|v| v.span()),
            Some("step_ms".into()),
            format!(
                "step_ms = {step_ms} with max_seconds = {max_seconds} makes {steps:.0} model steps: must be at most {MAX_STEPS:.0} (raise step_ms or lower max_seconds)"
            ),
        ));
    }
    let linux = match &raw.linux {
        Some(l) => linux(&cx, l.get_ref())?,
        None => LinuxModel::default(),
    };
    if raw.app.is_empty() {
        return Err(cx.err(
            None,
            Some("app".into()),
            "no [[app]] table: a scenario runs at least one application".into(),
        ));
    }

    let mut apps = Vec::new();
    // Expanded names, with where they come from, for the uniqueness check.
    let mut names: Vec<(String, usize)> = Vec::new();
    for (i, a) in raw.app.iter().enumerate() {
        let expanded = app(&cx, i, a, &machine, max_seconds)?;
        if apps.len() + expanded.len() > MAX_APPS {
            return Err(cx.err(
                Some(a.span()),
                Some(format!("app[{i}]")),
                format!(
                    "the scenario has more than {MAX_APPS} applications (copies counted): must be 1..={MAX_APPS}"
                ),
            ));
        }
        let name_v = a.get_ref().name.as_ref().expect("checked in app()");
        for spec in &expanded {
            if let Some((_, j)) = names.iter().find(|(n, _)| *n == spec.name) {
                return Err(cx.bad(
                    name_v,
                    &format!("app[{i}].name"),
                    format!(
                        "app name {:?} is already used by app[{j}] (copies > 1 are named NAME.0, NAME.1, ...): give each app a unique name",
                        spec.name
                    ),
                ));
            }
            names.push((spec.name.clone(), i));
        }
        apps.extend(expanded);
    }

    Ok(Workload {
        name,
        description,
        machine: machine.name.clone(),
        apps,
        step_ms,
        max_seconds,
        linux,
    })
}

fn linux(cx: &Ctx<'_>, l: &RawLinux) -> Result<LinuxModel, ScenarioError> {
    let mut m = LinuxModel::default();
    if let Some(v) = &l.balance_interval_ms {
        m.balance_interval_ms = cx.positive(v, "linux.balance_interval_ms")?;
    }
    if let Some(v) = &l.migrate_probability {
        m.migrate_probability =
            cx.bounded(v, "linux.migrate_probability", 0.0, false, Some(1.0))?;
    }
    if let Some(v) = &l.numa_balancing {
        m.numa_balancing = cx.boolean(v, "linux.numa_balancing")?;
    }
    if let Some(v) = &l.numa_balancing_mib_per_s {
        m.numa_balancing_mib_per_s = cx.positive(v, "linux.numa_balancing_mib_per_s")?;
    }
    Ok(m)
}

/// `0-3` or `5` for `0..n`.
fn id_range(n: usize) -> String {
    match n {
        0 => "none".into(),
        1 => "0".into(),
        _ => format!("0-{}", n - 1),
    }
}

/// A checked value and where it came from, for checks between keys.
#[derive(Clone)]
struct Given<'a, T> {
    value: T,
    raw: &'a Spanned<Value>,
    path: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PatternKind {
    Uniform,
    PowerLaw,
}

/// The thread-model keys one table gives, each checked on its own.
#[derive(Clone, Default)]
struct PartialModel<'a> {
    cpi: Option<Given<'a, f64>>,
    uncore_pki: Option<Given<'a, f64>>,
    working_set: Option<Given<'a, u64>>,
    pattern: Option<Given<'a, PatternKind>>,
    llc_mpki: Option<Given<'a, f64>>,
    alpha: Option<Given<'a, f64>>,
    mlp: Option<Given<'a, f64>>,
    shared_writes_pki: Option<Given<'a, f64>>,
}

fn partial_model<'a>(
    cx: &Ctx<'_>,
    keys: ModelKeys<'a>,
    prefix: &str,
) -> Result<PartialModel<'a>, ScenarioError> {
    let path = |k: &str| format!("{prefix}.{k}");
    // A number in (min, ..] (strict) or [min, ..], at most max.
    let given = |raw: &'a Raw, key: &str, min: f64, strict: bool, max: Option<f64>| {
        raw.as_ref()
            .map(|v| {
                let p = path(key);
                cx.bounded(v, &p, min, strict, max).map(|value| Given {
                    value,
                    raw: v,
                    path: p,
                })
            })
            .transpose()
    };
    let mut m = PartialModel {
        cpi: given(keys.cpi, "cpi", 0.0, true, None)?,
        uncore_pki: given(keys.uncore_pki, "uncore_pki", 0.0, false, None)?,
        llc_mpki: given(keys.llc_mpki, "llc_mpki", 0.0, false, None)?,
        alpha: given(keys.alpha, "alpha", 0.0, true, Some(2.0))?,
        mlp: given(keys.mlp, "mlp", 1.0, false, None)?,
        shared_writes_pki: given(
            keys.shared_writes_pki,
            "shared_writes_pki",
            0.0,
            false,
            None,
        )?,
        ..PartialModel::default()
    };
    if let Some(v) = keys.working_set {
        let p = path("working_set");
        m.working_set = Some(Given {
            value: cx.size(v, &p, true)?,
            raw: v,
            path: p,
        });
    }
    if let Some(v) = keys.pattern {
        let p = path("pattern");
        let kind = match cx.string(v, &p, "\"power-law\" or \"uniform\"")? {
            "uniform" => PatternKind::Uniform,
            "power-law" => PatternKind::PowerLaw,
            other => {
                return Err(cx.bad(
                    v,
                    &p,
                    format!("unknown pattern {other:?}: use \"power-law\" or \"uniform\""),
                ));
            }
        };
        m.pattern = Some(Given {
            value: kind,
            raw: v,
            path: p,
        });
    }
    // Checks between keys of the same table.
    if let Some(pat) = &m.pattern
        && pat.value == PatternKind::Uniform
    {
        if let Some(g) = m.llc_mpki.as_ref().or(m.alpha.as_ref()) {
            return Err(cx.bad(
                g.raw,
                &g.path,
                format!(
                    "applies to pattern = \"power-law\" only, and {} sets pattern = \"uniform\": remove it or use the power law",
                    pat.path
                ),
            ));
        }
    }
    if let (Some(l), Some(u)) = (&m.llc_mpki, &m.uncore_pki)
        && l.value > u.value
    {
        return Err(too_many_llc_misses(cx, l, u));
    }
    Ok(m)
}

fn too_many_llc_misses(cx: &Ctx<'_>, l: &Given<'_, f64>, u: &Given<'_, f64>) -> ScenarioError {
    cx.bad(
        l.raw,
        &l.path,
        format!(
            "llc_mpki {} is more than uncore_pki {} ({}): LLC misses are a part of the uncore requests, lower llc_mpki or raise uncore_pki",
            l.value, u.value, u.path
        ),
    )
}

/// Where a thread model is written, for its errors.
struct ModelAt<'a> {
    /// The `[[app]]` or `[[app.phase]]` table.
    table_span: Range<usize>,
    /// `app[0]` or `app[0].phase[1]`.
    prefix: &'a str,
    in_phase: bool,
    /// The app's shared area and the path of its `shared` key.
    shared_bytes: u64,
    shared_path: &'a str,
}

/// Merges a phase's keys over the app's and checks the result.
fn thread_model(
    cx: &Ctx<'_>,
    app: &PartialModel<'_>,
    phase: &PartialModel<'_>,
    at: &ModelAt<'_>,
) -> Result<ThreadModel, ScenarioError> {
    let ModelAt {
        table_span,
        prefix,
        in_phase,
        shared_bytes,
        shared_path,
    } = at;
    let (prefix, in_phase, shared_bytes) = (*prefix, *in_phase, *shared_bytes);
    let missing = |key: &str, example: &str| {
        let where_ = if in_phase {
            "in this [[app.phase]] or in its [[app]]"
        } else {
            "in this [[app]]"
        };
        cx.missing(
            table_span.clone(),
            &format!("{prefix}.{key}"),
            format!("missing: give {key} {where_}, like {key} = {example}"),
        )
    };
    let pick = |p: &Option<Given<'_, f64>>, a: &Option<Given<'_, f64>>| {
        p.clone().or_else(|| a.clone()).map(|g| g.value)
    };
    let app_pattern = app
        .pattern
        .as_ref()
        .map_or(PatternKind::PowerLaw, |g| g.value);
    let pattern = phase.pattern.as_ref().map_or(app_pattern, |g| g.value);
    // A phase that changes the pattern does not take the app's
    // pattern-specific keys.
    let inherit_pattern_keys = pattern == app_pattern;
    let uncore = phase
        .uncore_pki
        .clone()
        .or_else(|| app.uncore_pki.clone())
        .ok_or_else(|| missing("uncore_pki", "20"))?;
    let working_set = phase
        .working_set
        .clone()
        .or_else(|| app.working_set.clone())
        .ok_or_else(|| missing("working_set", "\"64MiB\""))?
        .value;
    let pattern = match pattern {
        PatternKind::Uniform => {
            if let Some(g) = phase.llc_mpki.as_ref().or(phase.alpha.as_ref()) {
                return Err(cx.bad(
                    g.raw,
                    &g.path,
                    "applies to pattern = \"power-law\" only, and this phase's pattern is \"uniform\": remove it or set pattern = \"power-law\"".into(),
                ));
            }
            Pattern::Uniform
        }
        PatternKind::PowerLaw => {
            let (app_llc, app_alpha) = if inherit_pattern_keys {
                (app.llc_mpki.clone(), app.alpha.clone())
            } else {
                (None, None)
            };
            let llc = phase.llc_mpki.clone();
            let llc_mpki = match llc {
                Some(l) => {
                    if l.value > uncore.value {
                        return Err(too_many_llc_misses(cx, &l, &uncore));
                    }
                    l.value
                }
                None => match app_llc {
                    // Inherited: capped at this phase's uncore requests.
                    Some(l) => l.value.min(uncore.value),
                    None => {
                        return Err(cx.missing(
                            table_span.clone(),
                            &format!("{prefix}.llc_mpki"),
                            format!(
                                "missing: pattern \"power-law\" needs llc_mpki (LLC misses per 1000 instructions with the whole LLC), like llc_mpki = 15; or set pattern = \"uniform\"{}",
                                if in_phase { " (in this phase or its app)" } else { "" }
                            ),
                        ));
                    }
                },
            };
            let alpha = phase.alpha.clone().or(app_alpha).map_or(0.5, |g| g.value);
            Pattern::PowerLaw { llc_mpki, alpha }
        }
    };
    let shared_writes_pki = phase
        .shared_writes_pki
        .clone()
        .or_else(|| app.shared_writes_pki.clone());
    if let Some(g) = &shared_writes_pki
        && g.value > 0.0
        && shared_bytes == 0
    {
        return Err(cx.bad(
            g.raw,
            &g.path,
            format!(
                "writes to the shared area need one: set {shared_path} to its size (like shared = \"128KiB\") or shared_writes_pki = 0"
            ),
        ));
    }
    Ok(ThreadModel {
        cpi_core: pick(&phase.cpi, &app.cpi).unwrap_or(1.0),
        uncore_pki: uncore.value,
        working_set,
        pattern,
        mlp: pick(&phase.mlp, &app.mlp).unwrap_or(1.0),
        shared_writes_pki: shared_writes_pki.map_or(0.0, |g| g.value),
    })
}

/// One `[[app]]` table, expanded to its copies.
fn app(
    cx: &Ctx<'_>,
    i: usize,
    raw: &Spanned<RawApp>,
    machine: &Machine,
    max_seconds: f64,
) -> Result<Vec<AppSpec>, ScenarioError> {
    let a = raw.get_ref();
    let prefix = format!("app[{i}]");
    let path = |k: &str| format!("{prefix}.{k}");
    let span = raw.span();

    let Some(name_v) = &a.name else {
        return Err(cx.missing(
            span,
            &path("name"),
            "missing: every [[app]] needs a name, like name = \"mcf\"".into(),
        ));
    };
    let name = cx.name(name_v, &path("name"))?;
    let kind = match &a.kind {
        None => AppKind::Process,
        Some(v) => match cx.string(v, &path("kind"), "\"process\" or \"vm\"")? {
            "process" => AppKind::Process,
            "vm" => AppKind::Vm,
            other => {
                return Err(cx.bad(
                    v,
                    &path("kind"),
                    format!("unknown kind {other:?}: use \"process\" or \"vm\""),
                ));
            }
        },
    };
    let threads = match &a.threads {
        Some(v) => cx.count(
            v,
            &path("threads"),
            "threads of the application",
            MAX_THREADS,
        )?,
        None => 1,
    };
    let copies = match &a.copies {
        Some(v) => cx.count(
            v,
            &path("copies"),
            "identical copies of the application",
            MAX_COPIES,
        )?,
        None => 1,
    };
    let nodes = machine.topology.nodes().len();
    let memory = match &a.memory {
        None => MemoryPlacement::FirstTouch,
        Some(v) => {
            let p = path("memory");
            let allowed = "use \"first-touch\", \"interleave\" or \"node:N\"";
            match cx.string(v, &p, "a memory placement")? {
                "first-touch" => MemoryPlacement::FirstTouch,
                "interleave" => MemoryPlacement::Interleave,
                s => {
                    let Some(n) = s.strip_prefix("node:") else {
                        return Err(cx.bad(
                            v,
                            &p,
                            format!("unknown memory placement {s:?}: {allowed}"),
                        ));
                    };
                    let n: u32 = n.trim().parse().map_err(|_| {
                        cx.bad(
                            v,
                            &p,
                            format!("{s:?}: N of node:N must be a node number, like node:0"),
                        )
                    })?;
                    if n as usize >= nodes {
                        return Err(cx.bad(
                            v,
                            &p,
                            format!(
                                "node {n} does not exist: {} has nodes {}",
                                machine.name,
                                id_range(nodes)
                            ),
                        ));
                    }
                    MemoryPlacement::Node(n)
                }
            }
        }
    };
    let ncpus = machine.topology.cpus().len();
    let cpus = match &a.cpus {
        None => None,
        Some(v) => {
            let p = path("cpus");
            let text = cx.string(v, &p, "a CPU list like \"0-3\"")?;
            let set = CpuSet::from_str(text).map_err(|e| cx.bad(v, &p, e.to_string()))?;
            if let Some(bad) = set.iter().find(|&c| c as usize >= ncpus) {
                return Err(cx.bad(
                    v,
                    &p,
                    format!(
                        "CPU {bad} does not exist: {} has CPUs {} (dense ids)",
                        machine.name,
                        id_range(ncpus)
                    ),
                ));
            }
            if threads as usize > set.len() {
                return Err(cx.bad(
                    v,
                    &p,
                    format!(
                        "more threads than a cpuset can hold: {threads} threads on cpus {text:?} ({} CPUs); widen cpus or lower threads",
                        set.len()
                    ),
                ));
            }
            Some(set)
        }
    };
    let start_s = match &a.start_s {
        Some(v) => {
            let s = cx.non_negative(v, &path("start_s"))?;
            if s >= max_seconds {
                return Err(cx.bad(
                    v,
                    &path("start_s"),
                    format!(
                        "starts at {s} s, not before max_seconds = {max_seconds}: it would never run; start it earlier or raise max_seconds"
                    ),
                ));
            }
            s
        }
        None => 0.0,
    };
    let runs = match &a.runs {
        Some(v) => cx.count(v, &path("runs"), "runs back to back", MAX_RUNS)?,
        None => 1,
    };
    let shared_bytes = match &a.shared {
        Some(v) => cx.size(v, &path("shared"), false)?,
        None => 0,
    };
    let sharers = match &a.sharers {
        Some(v) => {
            let n = cx.count(
                v,
                &path("sharers"),
                "threads that use the shared area",
                MAX_THREADS,
            )?;
            if n > threads {
                return Err(cx.bad(
                    v,
                    &path("sharers"),
                    format!(
                        "{n} sharers but the application has {threads} threads: give at most {threads}"
                    ),
                ));
            }
            n
        }
        None => threads,
    };

    let app_model = partial_model(cx, a.model_keys(), &prefix)?;
    let mut phases = Vec::new();
    if a.phase.is_empty() {
        let Some(iv) = &a.instructions else {
            return Err(cx.missing(
                span,
                &path("instructions"),
                "missing: give instructions per thread and run (like instructions = 1e11) or [[app.phase]] tables".into(),
            ));
        };
        let instructions = cx.positive(iv, &path("instructions"))?;
        let at = ModelAt {
            table_span: span.clone(),
            prefix: &prefix,
            in_phase: false,
            shared_bytes,
            shared_path: &path("shared"),
        };
        let model = thread_model(cx, &app_model, &PartialModel::default(), &at)?;
        phases.push(Phase {
            instructions,
            model,
        });
    } else {
        if let Some(iv) = &a.instructions {
            return Err(cx.bad(
                iv,
                &path("instructions"),
                "instructions is given both here and in [[app.phase]]: with phases, give instructions in each phase only".into(),
            ));
        }
        for (j, ph) in a.phase.iter().enumerate() {
            let pprefix = format!("{prefix}.phase[{j}]");
            let p = ph.get_ref();
            let Some(iv) = &p.instructions else {
                return Err(cx.missing(
                    ph.span(),
                    &format!("{pprefix}.instructions"),
                    "missing: every [[app.phase]] needs its instructions per thread, like instructions = 5e10".into(),
                ));
            };
            let instructions = cx.positive(iv, &format!("{pprefix}.instructions"))?;
            let phase_model = partial_model(cx, p.model_keys(), &pprefix)?;
            let at = ModelAt {
                table_span: ph.span(),
                prefix: &pprefix,
                in_phase: true,
                shared_bytes,
                shared_path: &path("shared"),
            };
            let model = thread_model(cx, &app_model, &phase_model, &at)?;
            phases.push(Phase {
                instructions,
                model,
            });
        }
    }

    let spec = |name: String| AppSpec {
        name,
        kind,
        threads,
        phases: phases.clone(),
        shared_bytes,
        sharers,
        memory,
        cpus: cpus.clone(),
        start_s,
        runs,
    };
    Ok(if copies == 1 {
        vec![spec(name)]
    } else {
        (0..copies).map(|c| spec(format!("{name}.{c}"))).collect()
    })
}

#[cfg(test)]
mod tests;
