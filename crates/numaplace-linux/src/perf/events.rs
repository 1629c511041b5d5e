//! Events by name, from the kernel's own descriptions in sysfs:
//! `sys/bus/event_source/devices/<pmu>/type` (the `perf_event_attr.type`),
//! `.../events/<name>` (terms such as `event=0x60,umask=0x08,cmask=1`) and
//! `.../format/<field>` (where a term's bits go: `config:0-7`,
//! `config1:0-15`, or split as `config:0-7,32-35`); and, for the events
//! Linux does not describe there, from libpfm4 ([`super::libpfm`]).
//!
//! Parsing and encoding are pure functions on `&str`; [`EventResolver`]
//! binds them to a [`SysRoot`].
//!
//! ## Where an event comes from, in order
//!
//! 1. The user's raw encoding ([`UncoreEncodings`], from the
//!    configuration), checked against the PMU's format files.
//! 2. A name in sysfs, in the core PMUs [`CORE_PMUS`].
//! 3. libpfm4, through an [`EventEncoder`]: the event that
//!    [`super::libpfm_events`] lists for the core PMU libpfm4 detects
//!    (`skx`, `amd64_fam19h_zen3`, ...), which says why where a CPU has
//!    none. libpfm4 is loaded at run time; without it this step says
//!    "libpfm4 not found: install Debian's libpfm4 for model-specific
//!    events". It is not asked where sysfs shows no core PMU (a VM
//!    without a virtual PMU): nothing could open its encoding.
//!
//! Every [`RawEvent`] keeps its [`EventOrigin`]; [`RawEvent::source`] says
//! it in one line (`libpfm4 skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1
//! = config 0x1000160`). The generic counters (instructions, cycles, LLC
//! references and misses) are the kernel's generic events first; the
//! monitor tries libpfm4's model-specific event only where the generic one
//! does not open ([`super::monitor`]).
//!
//! ## The uncore-penalty events (\[Rao13\] §3.1)
//!
//! The uncore penalty `P = t' / λ` needs, per thread, the cycles with at
//! least one outstanding demand request (`t'`, [`Counter::UncoreOccupancy`])
//! and the number of such requests (`λ`, [`Counter::UncoreRequests`]). In
//! sysfs they are looked up under these names, first hit wins:
//!
//! - occupancy: Intel `offcore_requests_outstanding.cycles_with_demand_data_rd`,
//!   else Intel `offcore_requests_outstanding.demand_data_rd` with `cmask=1`;
//! - requests: Intel `offcore_requests.demand_data_rd`, else AMD Zen
//!   `ls_mab_alloc.all_allocations` (Zen 3/4/5) or `ls_mab_alloc.loads`
//!   (Zen 2/3).
//!
//! AMD has no occupancy candidate: Zen's `ls_alloc_mab_count` (PMCx05F)
//! counts the L1D misses in flight divided by 4 unless a second counter is
//! merged with it (perf's `amdzen3/memory.json`, after AMD's PPR), so with
//! `cmask=1` it counts cycles with at least 4 misses in flight, not `t'`.
//! The AMD requests count L1D misses, not L2 misses: a superset of the
//! uncore requests (as \[Rao13\]'s super queue is). AMD's L3-miss latency
//! events (`l3_xi_sampled_latency*`, Zen 4) live in the `amd_l3` uncore
//! PMU, which counts per CPU only and cannot be attached to a thread.
//!
//! Linux puts only generic events (`cpu-cycles`, `cache-misses`, ...) in
//! sysfs; the model-specific names above live in perf's pmu-events tables.
//! So on most kernels sysfs has none, and libpfm4 gives them
//! ([`super::libpfm_events`] lists, per CPU, which events and why not);
//! where neither does, the counter is unavailable with both reasons, and
//! the user can give the encoding.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::PathBuf;

use numaplace_model::Counter;
use thiserror::Error;

use super::libpfm::EventEncoder;
use super::libpfm_events::libpfm_event;
use super::raw_event::{EventOrigin, RawEvent};
use crate::sysroot::{ReadError, SysRoot};

/// Where the kernel lists its PMUs, relative to the root.
pub const EVENT_SOURCE_DIR: &str = "sys/bus/event_source/devices";

/// PMUs that count per thread on the core: `cpu` (Intel, AMD), `cpu_core`
/// and `cpu_atom` (Intel hybrid parts).
pub const CORE_PMUS: [&str; 3] = ["cpu", "cpu_core", "cpu_atom"];

/// Which `perf_event_attr` word a format field lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigWord {
    /// `perf_event_attr.config`.
    Config,
    /// `perf_event_attr.config1`.
    Config1,
    /// `perf_event_attr.config2`.
    Config2,
    /// Newer kernels' fourth word; not supported by our encoder.
    Config3,
}

/// A PMU format field: which word, and which bits (inclusive ranges, the
/// value's low bits going to the first range).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatField {
    /// The word its bits are in.
    pub word: ConfigWord,
    /// Its bit ranges, low to high (`0-7`, `32-35`).
    pub ranges: Vec<(u8, u8)>,
}

impl FormatField {
    /// Total width in bits.
    pub fn width(&self) -> u32 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u32::from(hi - lo) + 1)
            .sum()
    }

    /// `value` spread over the field's bits, or `None` if it is too wide.
    pub fn place(&self, value: u64) -> Option<u64> {
        let width = self.width();
        if width < 64 && value >> width != 0 {
            return None;
        }
        let mut out = 0u64;
        let mut rest = value;
        for &(lo, hi) in &self.ranges {
            let n = u32::from(hi - lo) + 1;
            let mask = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
            out |= (rest & mask) << lo;
            rest = rest.checked_shr(n).unwrap_or(0);
        }
        Some(out)
    }
}

/// One `name=value` term of an event description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The field's name (`event`, `umask`, `cmask`).
    pub name: String,
    /// Its value.
    pub value: u64,
}

/// What was wrong with a format or event text.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ParseError {
    /// A format file's text that is not `configN:BITS`.
    #[error("format {text:?}: {why}")]
    Format {
        /// The text.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A term that is not `name` or `name=value`.
    #[error("event term {term:?}: {why}")]
    Term {
        /// The term.
        term: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A term naming a field the PMU does not have.
    #[error("field {field:?} is not in this PMU's format/ directory (it has: {known})")]
    UnknownField {
        /// The field.
        field: String,
        /// The fields it has.
        known: String,
    },
    /// A field whose format file did not parse.
    #[error("field {field:?} has an unreadable format file: {why}")]
    BadField {
        /// The field.
        field: String,
        /// What is wrong with it.
        why: String,
    },
    /// A value wider than its field.
    #[error("value {value:#x} does not fit field {field:?} ({width} bits)")]
    TooWide {
        /// The field.
        field: String,
        /// The value.
        value: u64,
        /// The field's width, bits.
        width: u32,
    },
    /// A field in the fourth config word.
    #[error("field {field:?} lives in config3, which numaplace cannot set")]
    Config3 {
        /// The field.
        field: String,
    },
}

/// Parses a format file: `config:0-7`, `config1:0-15`, `config:21`,
/// `config:0-7,32-35`.
pub fn parse_format(text: &str) -> Result<FormatField, ParseError> {
    let text = text.trim();
    let bad = |why| ParseError::Format {
        text: text.to_owned(),
        why,
    };
    let (word, bits) = text
        .split_once(':')
        .ok_or(bad("no ':' between word and bits"))?;
    let word = match word.trim() {
        "config" => ConfigWord::Config,
        "config1" => ConfigWord::Config1,
        "config2" => ConfigWord::Config2,
        "config3" => ConfigWord::Config3,
        _ => return Err(bad("word is not config, config1, config2 or config3")),
    };
    let mut ranges = Vec::new();
    for part in bits.split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim(), hi.trim()),
            None => (part, part),
        };
        let lo: u8 = lo.parse().map_err(|_| bad("bit is not a number"))?;
        let hi: u8 = hi.parse().map_err(|_| bad("bit is not a number"))?;
        if lo > hi || hi > 63 {
            return Err(bad("bit range is reversed or beyond bit 63"));
        }
        ranges.push((lo, hi));
    }
    Ok(FormatField { word, ranges })
}

fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses event terms: `event=0x60,umask=0x08,cmask=1`; a bare `edge`
/// means `edge=1`. Terms with a `?` (a parameter perf asks the user for)
/// are refused.
pub fn parse_terms(text: &str) -> Result<Vec<Term>, ParseError> {
    let mut terms: Vec<Term> = Vec::new();
    for raw in text.trim().split(',') {
        let raw = raw.trim();
        let bad = |why| ParseError::Term {
            term: raw.to_owned(),
            why,
        };
        if raw.is_empty() {
            return Err(bad("empty term"));
        }
        let (name, value) = match raw.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (raw, "1"),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad("not a field name"));
        }
        if value.contains('?') {
            return Err(bad("needs a parameter ('?'); give the value"));
        }
        let value = parse_number(value).ok_or(bad("value is not a number"))?;
        if terms.iter().any(|t| t.name == name) {
            return Err(bad("given twice"));
        }
        terms.push(Term {
            name: name.to_owned(),
            value,
        });
    }
    Ok(terms)
}

/// Splits `cpu/event=0x60,umask=1/` into `("cpu", "event=0x60,umask=1")`;
/// bare terms go to `default_pmu`.
pub fn split_pmu<'a>(text: &'a str, default_pmu: &'a str) -> (&'a str, &'a str) {
    let t = text.trim();
    match t.split_once('/') {
        Some((pmu, rest)) if !pmu.is_empty() => (pmu, rest.trim_end_matches('/')),
        _ => (default_pmu, t),
    }
}

/// Replaces or adds a term (e.g. `cmask=1` to turn an occupancy count
/// into "cycles with at least one").
pub fn with_term(mut terms: Vec<Term>, name: &str, value: u64) -> Vec<Term> {
    match terms.iter_mut().find(|t| t.name == name) {
        Some(t) => t.value = value,
        None => terms.push(Term {
            name: name.to_owned(),
            value,
        }),
    }
    terms
}

/// A PMU as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pmu {
    /// Its name under `event_source/devices` (`cpu`, `uncore_imc_0`).
    pub name: String,
    /// `perf_event_attr.type` for its events.
    pub pmu_type: u32,
    /// Its format fields by name, from `format/`.
    pub formats: BTreeMap<String, FormatField>,
    /// Format files that did not parse: an error only if an event uses them.
    pub bad_formats: BTreeMap<String, ParseError>,
}

impl Pmu {
    /// Encodes terms into `(config, config1, config2)`. Terms named
    /// `config`, `config1`, `config2` without a format file set the word
    /// directly, as perf does.
    pub fn encode(&self, terms: &[Term]) -> Result<[u64; 3], ParseError> {
        let mut words = [0u64; 3];
        for t in terms {
            let Some(field) = self.formats.get(&t.name) else {
                if let Some(why) = self.bad_formats.get(&t.name) {
                    return Err(ParseError::BadField {
                        field: t.name.clone(),
                        why: why.to_string(),
                    });
                }
                match t.name.as_str() {
                    "config" => words[0] |= t.value,
                    "config1" => words[1] |= t.value,
                    "config2" => words[2] |= t.value,
                    _ => {
                        let known = self.formats.keys().cloned().collect::<Vec<_>>().join(", ");
                        return Err(ParseError::UnknownField {
                            field: t.name.clone(),
                            known,
                        });
                    }
                }
                continue;
            };
            let bits = field.place(t.value).ok_or_else(|| ParseError::TooWide {
                field: t.name.clone(),
                value: t.value,
                width: field.width(),
            })?;
            let i = match field.word {
                ConfigWord::Config => 0,
                ConfigWord::Config1 => 1,
                ConfigWord::Config2 => 2,
                ConfigWord::Config3 => {
                    return Err(ParseError::Config3 {
                        field: t.name.clone(),
                    });
                }
            };
            words[i] |= bits;
        }
        Ok(words)
    }

    /// Encodes terms into an event of this PMU; `what` names it perf-style
    /// (for messages), `origin` says where the terms came from.
    pub fn event(
        &self,
        terms: &[Term],
        what: String,
        origin: EventOrigin,
    ) -> Result<RawEvent, ParseError> {
        let [config, config1, config2] = self.encode(terms)?;
        Ok(RawEvent {
            what,
            pmu_type: self.pmu_type,
            config,
            config1,
            config2,
            origin,
        })
    }
}

/// Reading or encoding an event under a root failed.
#[derive(Debug, Error)]
pub enum EventError {
    /// A file could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A format file did not parse.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why it did not parse.
        source: ParseError,
    },
    /// A `type` file that is not a number.
    #[error("{path}: not a PMU type number: {text:?}")]
    BadType {
        /// The file.
        path: PathBuf,
        /// The text.
        text: String,
    },
    /// No PMU of that name.
    #[error("no PMU {pmu:?} under {dir} (there are: {known})")]
    NoSuchPmu {
        /// The name asked for.
        pmu: String,
        /// Where PMUs were looked for.
        dir: PathBuf,
        /// The PMUs there are.
        known: String,
    },
    /// An event description did not encode.
    #[error("{what}: {source}")]
    Encoding {
        /// The event, as given.
        what: String,
        /// Why it did not parse.
        source: ParseError,
    },
}

/// Resolves events by name through a [`SysRoot`].
#[derive(Debug, Clone, Copy)]
pub struct EventResolver<'a> {
    root: &'a SysRoot,
}

impl<'a> EventResolver<'a> {
    /// A resolver reading under `root`.
    pub fn new(root: &'a SysRoot) -> Self {
        EventResolver { root }
    }

    /// The PMUs the kernel lists, sorted (empty if the directory is absent).
    pub fn pmus(&self) -> Result<Vec<String>, EventError> {
        list_dir(self.root, EVENT_SOURCE_DIR)
    }

    /// Reads one PMU's type and format files.
    pub fn pmu(&self, name: &str) -> Result<Pmu, EventError> {
        let dir = format!("{EVENT_SOURCE_DIR}/{name}");
        let type_rel = format!("{dir}/type");
        let Some(text) = self.root.read_optional(&type_rel)? else {
            return Err(EventError::NoSuchPmu {
                pmu: name.to_owned(),
                dir: self.root.join(EVENT_SOURCE_DIR),
                known: self.pmus()?.join(", "),
            });
        };
        let pmu_type = text.trim().parse().map_err(|_| EventError::BadType {
            path: self.root.join(&type_rel),
            text: text.trim().to_owned(),
        })?;
        let mut formats = BTreeMap::new();
        let mut bad_formats = BTreeMap::new();
        let format_dir = format!("{dir}/format");
        for field in list_dir(self.root, &format_dir)? {
            let text = self.root.read(&format!("{format_dir}/{field}"))?;
            match parse_format(&text) {
                Ok(f) => {
                    formats.insert(field, f);
                }
                Err(e) => {
                    bad_formats.insert(field, e);
                }
            }
        }
        Ok(Pmu {
            name: name.to_owned(),
            pmu_type,
            formats,
            bad_formats,
        })
    }

    /// The event `name` of `pmu` as sysfs describes it, with `overrides`
    /// applied; `Ok(None)` if the PMU has no such event.
    pub fn named_event(
        &self,
        pmu: &Pmu,
        name: &str,
        overrides: &[(&str, u64)],
    ) -> Result<Option<RawEvent>, EventError> {
        let rel = format!("{EVENT_SOURCE_DIR}/{}/events/{name}", pmu.name);
        let Some(text) = self.root.read_optional(&rel)? else {
            return Ok(None);
        };
        let path = self.root.join(&rel);
        let origin = EventOrigin::Sysfs { path: path.clone() };
        let mut terms = parse_terms(&text).map_err(|source| EventError::Parse {
            path: path.clone(),
            source,
        })?;
        let mut what = format!("{}/{name}", pmu.name);
        for &(field, value) in overrides {
            terms = with_term(terms, field, value);
            let _ = write!(what, ",{field}={value}");
        }
        what.push('/');
        pmu.event(&terms, what, origin)
            .map(Some)
            .map_err(|source| EventError::Parse { path, source })
    }

    /// A user-given encoding, `event=0x60,umask=0x01,cmask=1` (for
    /// `default_pmu`) or `cpu/event=0x60,umask=0x01/`, checked against the
    /// PMU's format files.
    pub fn encoding(&self, text: &str, default_pmu: &str) -> Result<RawEvent, EventError> {
        let (pmu_name, terms_text) = split_pmu(text, default_pmu);
        let pmu = self.pmu(pmu_name)?;
        let what = format!("{pmu_name}/{terms_text}/");
        let terms = parse_terms(terms_text).map_err(|source| EventError::Encoding {
            what: what.clone(),
            source,
        })?;
        let origin = EventOrigin::User {
            text: text.trim().to_owned(),
        };
        pmu.event(&terms, what.clone(), origin)
            .map_err(|source| EventError::Encoding { what, source })
    }
}

fn list_dir(root: &SysRoot, rel: &str) -> Result<Vec<String>, EventError> {
    let path = root.join(rel);
    let entries = match fs::read_dir(&path) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ReadError { path, source }.into()),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ReadError {
            path: path.clone(),
            source,
        })?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// A name to look for, with terms to override (`cmask=1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The event's name in the PMU's `events/`.
    pub name: &'static str,
    /// Terms set on top of its own.
    pub overrides: &'static [(&'static str, u64)],
}

/// Candidates for [`Counter::UncoreOccupancy`] (`t'`), best first. None
/// for AMD: see the module docs.
pub const OCCUPANCY_CANDIDATES: [Candidate; 2] = [
    Candidate {
        name: "offcore_requests_outstanding.cycles_with_demand_data_rd",
        overrides: &[],
    },
    Candidate {
        name: "offcore_requests_outstanding.demand_data_rd",
        overrides: &[("cmask", 1)],
    },
];

/// Candidates for [`Counter::UncoreRequests`] (`λ`), best first.
pub const REQUEST_CANDIDATES: [Candidate; 3] = [
    Candidate {
        name: "offcore_requests.demand_data_rd",
        overrides: &[],
    },
    Candidate {
        name: "ls_mab_alloc.all_allocations",
        overrides: &[],
    },
    Candidate {
        name: "ls_mab_alloc.loads",
        overrides: &[],
    },
];

/// Encodings the user gives for the uncore pair where sysfs has no names
/// (e.g. `event=0x60,umask=0x01,cmask=1` and `event=0xb0,umask=0x01` on
/// Intel Nehalem to Skylake; perf's pmu-events JSON has the others).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UncoreEncodings {
    /// The raw encoding of `t'` (the config's `uncore_occupancy`).
    pub occupancy: Option<String>,
    /// The raw encoding of `λ` (the config's `uncore_requests`).
    pub requests: Option<String>,
}

/// The uncore pair: each an event, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UncoreEvents {
    /// `t'`, or why it is not there.
    pub occupancy: Result<RawEvent, String>,
    /// `λ`, or why it is not there.
    pub requests: Result<RawEvent, String>,
}

impl UncoreEvents {
    /// The event of counter `c`; `None` for a counter not of the pair.
    pub fn get(&self, c: Counter) -> Option<&Result<RawEvent, String>> {
        match c {
            Counter::UncoreOccupancy => Some(&self.occupancy),
            Counter::UncoreRequests => Some(&self.requests),
            _ => None,
        }
    }
}

/// Resolves the uncore pair: the user's encodings where given, else the
/// candidate names in the core PMUs present, else libpfm4's events for
/// this CPU (through `encoder`, [`host_encoder`](super::libpfm::host_encoder)
/// on a live host).
pub fn resolve_uncore(
    root: &SysRoot,
    user: &UncoreEncodings,
    encoder: &dyn EventEncoder,
) -> UncoreEvents {
    let resolver = EventResolver::new(root);
    let pmus: Vec<Pmu> = CORE_PMUS
        .iter()
        .filter_map(|name| resolver.pmu(name).ok())
        .collect();
    let one = |given: &Option<String>,
               candidates: &[Candidate],
               counter: Counter|
     -> Result<RawEvent, String> {
        if let Some(text) = given {
            return resolver
                .encoding(text, "cpu")
                .map_err(|e| format!("the encoding given in [perf] is unusable: {e}"));
        }
        if pmus.is_empty() {
            // libpfm4 would encode for a CPU whose PMU the kernel does not
            // drive: nothing could open it.
            let known = resolver.pmus().map(|p| p.join(", ")).unwrap_or_default();
            return Err(format!(
                "no core PMU: {} has none of {} (only: {known})",
                root.join(EVENT_SOURCE_DIR).display(),
                CORE_PMUS.join(", ")
            ));
        }
        let mut problems = Vec::new();
        for pmu in &pmus {
            for c in candidates {
                match resolver.named_event(pmu, c.name, c.overrides) {
                    Ok(Some(ev)) => return Ok(ev),
                    Ok(None) => {}
                    Err(e) => problems.push(e.to_string()),
                }
            }
        }
        let names: Vec<&str> = candidates.iter().map(|c| c.name).collect();
        let pmu_names: Vec<&str> = pmus.iter().map(|p| p.name.as_str()).collect();
        let pfm = match libpfm_event(encoder, counter) {
            Ok(ev) => return Ok(ev),
            Err(why) => why,
        };
        let mut why = format!(
            "none of {} is described under {}/{{{}}}/events (kernels list only generic \
             events there), and {pfm}: give the encoding for this CPU",
            names.join(", "),
            root.join(EVENT_SOURCE_DIR).display(),
            pmu_names.join(",")
        );
        if !problems.is_empty() {
            let _ = write!(why, "; unusable descriptions: {}", problems.join("; "));
        }
        Err(why)
    };
    UncoreEvents {
        occupancy: one(
            &user.occupancy,
            &OCCUPANCY_CANDIDATES,
            Counter::UncoreOccupancy,
        ),
        requests: one(&user.requests, &REQUEST_CANDIDATES, Counter::UncoreRequests),
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
