//! `--counters-from FILE`: hardware counters made up per thread from its
//! CPU time, for testing counter-driven policies (dino, di-plain,
//! di-migrate) where the machine cannot count (a VM without a virtual PMU,
//! such as the QEMU test bed).
//!
//! The file holds rules:
//!
//! ```toml
//! [[thread]]
//! comm = "numa_hog*"   # glob on the thread's comm (untrusted: a test aid)
//! llc_mpki = 40.0      # LLC misses per 1000 instructions
//! ipc = 1.0            # instructions per cycle
//! ghz = 2.0            # cycles per nanosecond of CPU time (default 2.0)
//! ```
//!
//! Each round, every user thread whose comm matches a rule (the first that
//! matches) gets, over the interval,
//! `cycles = cpu_ns × ghz`, `instructions = cycles × ipc` and
//! `llc_misses = instructions × llc_mpki / 1000`, replacing whatever was
//! measured for those three; its other counters, and every counter of the
//! threads no rule matches, are left as measured. `cpu_ns` is the thread's
//! task clock when the software counters have it, else its `utime + stime`
//! since the previous round in clock ticks. A thread seen for the first
//! time has no CPU time over an interval yet, so it gets nothing that
//! round.
//!
//! Names are what threads call themselves: any program can match a rule by
//! renaming itself. That is acceptable for a test aid and never for
//! production, where the counters must be measured.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Deserializer};

use numaplace_model::scope::glob;
use numaplace_model::task::printable;
use numaplace_model::world::Telemetry;
use numaplace_model::{Counter, CounterDeltas, Snapshot, TaskId};

use crate::error::InputError;

/// The default clock of a rule: cycles per nanosecond of CPU time.
const DEFAULT_GHZ: f64 = 2.0;

/// One `[[thread]]` rule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Rule {
    /// Glob (`*`, `?`) on the thread's comm.
    #[serde(deserialize_with = "pattern")]
    pub comm: String,
    /// LLC misses per 1000 instructions.
    #[serde(deserialize_with = "mpki")]
    pub llc_mpki: f64,
    /// Instructions per cycle.
    #[serde(deserialize_with = "ipc")]
    pub ipc: f64,
    /// Cycles per nanosecond of CPU time.
    #[serde(default = "default_ghz", deserialize_with = "ghz")]
    pub ghz: f64,
}

fn default_ghz() -> f64 {
    DEFAULT_GHZ
}

/// The file: rules only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    thread: Vec<Rule>,
}

fn pattern<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Err(serde::de::Error::custom(
            "comm is empty: give a pattern such as \"numa_hog*\"",
        ));
    }
    Ok(s)
}

/// A number in `lo..=hi` (`lo` itself excluded unless `lo_ok`).
fn number<'de, D: Deserializer<'de>>(
    d: D,
    what: &str,
    lo: f64,
    lo_ok: bool,
    hi: f64,
) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    let above = if lo_ok { v >= lo } else { v > lo };
    if !(v.is_finite() && above && v <= hi) {
        let low = if lo_ok { "from" } else { "above" };
        return Err(serde::de::Error::custom(format!(
            "{what} {v}: give a number {low} {lo} up to {hi}"
        )));
    }
    Ok(v)
}

fn mpki<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    number(
        d,
        "llc_mpki (LLC misses per 1000 instructions)",
        0.0,
        true,
        1000.0,
    )
}

fn ipc<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    number(d, "ipc (instructions per cycle)", 0.0, false, 64.0)
}

fn ghz<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    number(d, "ghz (cycles per nanosecond)", 0.0, false, 100.0)
}

/// toml's error on one line: `TOML parse error at line L, column C: what`
/// (the excerpt of the file it draws between them is left out).
fn one_line(e: &toml::de::Error) -> String {
    let text = e.to_string();
    let lines: Vec<&str> = text.trim_end().lines().map(str::trim_end).collect();
    // The excerpt: lines of `  |` or `12 | ...`.
    let excerpt = |l: &str| {
        l.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ')
            .starts_with('|')
    };
    match lines.iter().rposition(|l| excerpt(l)) {
        Some(last) if last > 0 && last + 1 < lines.len() => {
            format!("{}: {}", lines[0], lines[last + 1..].join(" "))
        }
        _ => lines.join(" "),
    }
}

/// Parses the rules; the message is toml's, with the line and column.
pub(crate) fn parse(text: &str) -> Result<Vec<Rule>, String> {
    let f: RulesFile = toml::from_str(text).map_err(|e| one_line(&e))?;
    if f.thread.is_empty() {
        return Err("no [[thread]] rule: give at least one, with comm, llc_mpki and ipc".into());
    }
    Ok(f.thread)
}

/// A thread's CPU time so far, clock ticks (`utime + stime`).
fn ticks(t: &numaplace_model::Task) -> u64 {
    t.utime.saturating_add(t.stime)
}

/// The CPU time of every thread of `s`, clock ticks, for the next round.
pub(crate) fn cpu_ticks(s: &Snapshot) -> HashMap<TaskId, u64> {
    s.tasks.iter().map(|t| (t.id(), ticks(t))).collect()
}

/// The counters of the threads of `s` that a rule matches, made up from
/// their CPU time over the interval: the task clock where `s.counters` has
/// it, else `utime + stime` against `previous` (ticks of the previous
/// round, [`cpu_ticks`]). Each comes with whatever else was measured for
/// the thread. Threads with neither (first seen this round), and threads of
/// kernel processes, are left out. A pure function: `s` is not changed.
pub(crate) fn synthesize(
    rules: &[Rule],
    s: &Snapshot,
    previous: &HashMap<TaskId, u64>,
) -> BTreeMap<i32, CounterDeltas> {
    let mut out = BTreeMap::new();
    let hz = s.machine.clock_ticks.max(1) as f64;
    for t in &s.tasks {
        let Some(rule) = rules.iter().find(|r| glob(&r.comm, &t.comm)) else {
            continue;
        };
        if s.group(t.tgid).is_some_and(|g| g.is_kernel()) {
            continue;
        }
        let measured = s.counters.get(&t.tid);
        let cpu_ns = match measured.and_then(|c| c.get(Counter::TaskClock)) {
            Some(ns) => ns as f64,
            None => match previous.get(&t.id()) {
                Some(&before) => ticks(t).saturating_sub(before) as f64 * 1e9 / hz,
                None => continue,
            },
        };
        let cycles = cpu_ns * rule.ghz;
        let instructions = (cycles * rule.ipc).round();
        let misses = (instructions * rule.llc_mpki / 1000.0).round();
        let mut c = measured.cloned().unwrap_or_else(|| CounterDeltas {
            values: BTreeMap::new(),
            enabled_ns: s.interval_ns,
            running_ns: s.interval_ns,
        });
        c.values.insert(Counter::Cycles, cycles.round() as u64);
        c.values.insert(Counter::Instructions, instructions as u64);
        c.values.insert(Counter::LlcMisses, misses as u64);
        out.insert(t.tid, c);
    }
    out
}

/// The rules of one file and what the last round's CPU times were.
#[derive(Debug)]
pub struct SyntheticCounters {
    path: PathBuf,
    rules: Vec<Rule>,
    previous: HashMap<TaskId, u64>,
}

impl SyntheticCounters {
    /// `--counters-from`'s file, where one is given ([`SyntheticCounters::load`]).
    pub fn load_given(path: Option<&Path>) -> Result<Option<SyntheticCounters>> {
        path.map(SyntheticCounters::load).transpose()
    }

    /// Reads and checks `path`; every error names it (exit 2).
    pub fn load(path: &Path) -> Result<SyntheticCounters> {
        let text =
            numaplace_io::bounded::read_to_string(path, numaplace_io::bounded::CONFIG_MAX_BYTES)
                .map_err(|e| {
                    InputError(format!(
                        "--counters-from {}: cannot read it: {e}",
                        path.display()
                    ))
                })?;
        let rules = parse(&text)
            .map_err(|e| InputError(format!("--counters-from {}: {e}", path.display())))?;
        Ok(SyntheticCounters {
            path: path.to_path_buf(),
            rules,
            previous: HashMap::new(),
        })
    }

    /// Replaces the counters of matching threads in `s` with synthetic
    /// ones (see `synthesize`) and remembers its CPU times for the next
    /// round. Returns how many threads got synthetic counters.
    pub fn apply(&mut self, s: &mut Snapshot) -> usize {
        let made = synthesize(&self.rules, s, &self.previous);
        let n = made.len();
        s.counters.extend(made);
        self.previous = cpu_ticks(s);
        n
    }

    /// What the daemon says at start: that these counters are made up.
    pub fn describe(&self) -> String {
        let mut rules = String::new();
        for (i, r) in self.rules.iter().enumerate() {
            if i > 0 {
                rules.push_str("; ");
            }
            let _ = write!(
                rules,
                "comm {:?}: {} LLC misses per 1000 instructions, IPC {}, {} GHz",
                printable(&r.comm),
                r.llc_mpki,
                r.ipc,
                r.ghz
            );
        }
        format!(
            "SYNTHETIC counters from {}: instructions, cycles and LLC misses of threads whose comm \
             matches a rule there are made up from their CPU time, not measured ({rules}); thread \
             names are untrusted, so this is for testing policies where there is no PMU, never \
             for production",
            self.path.display()
        )
    }
}

/// Any world's telemetry with counters made up for the threads the rules
/// match (`--counters-from` over the live host or a recording); with no
/// rules, the telemetry as it is.
pub struct Synthesized<T> {
    /// The world's own telemetry.
    pub inner: T,
    /// The rules; `None`: none.
    pub synthetic: Option<SyntheticCounters>,
}

impl<T: Telemetry> Telemetry for Synthesized<T> {
    type Error = T::Error;

    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, T::Error> {
        let mut snapshot = self.inner.next_snapshot()?;
        if let (Some(s), Some(synth)) = (snapshot.as_mut(), self.synthetic.as_mut()) {
            let n = synth.apply(s);
            tracing::debug!("round {}: synthetic counters for {n} threads", s.seq);
        }
        Ok(snapshot)
    }

    fn after_round(&mut self, managed: &BTreeSet<i32>, acted_on: &BTreeSet<i32>) {
        self.inner.after_round(managed, acted_on);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numaplace_model::{CpuSet, MachineReadings, Task};

    fn task(tid: i32, tgid: i32, comm: &str, utime: u64, stime: u64) -> Task {
        Task {
            tid,
            tgid,
            start_time: 1000 + tid as u64,
            comm: comm.into(),
            state: 'R',
            last_cpu: Some(0),
            allowed_cpus: "0-3".parse::<CpuSet>().unwrap(),
            allowed_mems: "0-1".parse::<CpuSet>().unwrap(),
            confined_cpus: None,
            manager: None,
            utime,
            stime,
            vcpu: None,
        }
    }

    fn snapshot(tasks: Vec<Task>) -> Snapshot {
        Snapshot {
            seq: 1,
            interval_ns: 1_000_000_000,
            tasks,
            machine: MachineReadings {
                clock_ticks: 100,
                ..MachineReadings::default()
            },
            ..Snapshot::default()
        }
    }

    fn rules(text: &str) -> Vec<Rule> {
        parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    const HOG: &str = r#"
        [[thread]]
        comm = "hog-*"
        llc_mpki = 40.0
        ipc = 1.0
        ghz = 2.0

        [[thread]]
        comm = "*"
        llc_mpki = 0.5
        ipc = 2.0
    "#;

    #[test]
    fn counters_from_cpu_ticks() {
        let r = rules(HOG);
        assert_eq!(r[1].ghz, DEFAULT_GHZ);
        let before = snapshot(vec![task(10, 10, "hog-0", 100, 5)]);
        // 50 + 10 ticks of 10 ms later: 0.6 s of CPU.
        let now = snapshot(vec![task(10, 10, "hog-0", 150, 15)]);
        let c = synthesize(&r, &now, &cpu_ticks(&before));
        let d = &c[&10];
        assert_eq!(d.get(Counter::Cycles), Some(1_200_000_000));
        assert_eq!(d.get(Counter::Instructions), Some(1_200_000_000));
        assert_eq!(d.get(Counter::LlcMisses), Some(48_000_000));
        assert_eq!(d.enabled_ns, 1_000_000_000);
        let m = numaplace_model::metrics::mpki(d).unwrap();
        assert!((m - 40.0).abs() < 1e-9, "{m}");
    }

    #[test]
    fn the_task_clock_wins_and_other_counters_stay() {
        let r = rules(HOG);
        let mut now = snapshot(vec![task(10, 10, "other", 150, 15)]);
        now.counters.insert(
            10,
            CounterDeltas {
                values: [(Counter::TaskClock, 250_000_000), (Counter::PageFaults, 7)]
                    .into_iter()
                    .collect(),
                enabled_ns: 900,
                running_ns: 800,
            },
        );
        // No previous ticks needed: the task clock says 0.25 s.
        let c = synthesize(&r, &now, &HashMap::new());
        let d = &c[&10];
        // The second rule: 2 GHz, IPC 2, 0.5 MPKI.
        assert_eq!(d.get(Counter::Cycles), Some(500_000_000));
        assert_eq!(d.get(Counter::Instructions), Some(1_000_000_000));
        assert_eq!(d.get(Counter::LlcMisses), Some(500_000));
        assert_eq!(d.get(Counter::PageFaults), Some(7));
        assert_eq!(d.get(Counter::TaskClock), Some(250_000_000));
        assert_eq!((d.enabled_ns, d.running_ns), (900, 800));
    }

    #[test]
    fn first_match_wins_and_unmatched_threads_keep_their_counters() {
        let r = rules(
            r#"
            [[thread]]
            comm = "hog-?"
            llc_mpki = 40
            ipc = 1
            [[thread]]
            comm = "hog-*"
            llc_mpki = 1
            ipc = 1
            "#,
        );
        let before = snapshot(vec![
            task(10, 10, "hog-1", 0, 0),
            task(11, 10, "hog-12", 0, 0),
            task(12, 12, "bash", 0, 0),
        ]);
        let mut now = snapshot(vec![
            task(10, 10, "hog-1", 100, 0),
            task(11, 10, "hog-12", 100, 0),
            task(12, 12, "bash", 100, 0),
        ]);
        let measured = CounterDeltas {
            values: [(Counter::Instructions, 5), (Counter::LlcMisses, 1)]
                .into_iter()
                .collect(),
            enabled_ns: 1,
            running_ns: 1,
        };
        now.counters.insert(12, measured.clone());
        let mut synth = SyntheticCounters {
            path: "rules.toml".into(),
            rules: r,
            previous: HashMap::new(),
        };
        // The first round has nothing to go by.
        let mut first = before.clone();
        assert_eq!(synth.apply(&mut first), 0);
        assert!(first.counters.is_empty());
        assert_eq!(synth.apply(&mut now), 2);
        let mpki = |tid| numaplace_model::metrics::mpki(&now.counters[&tid]).unwrap();
        assert!((mpki(10) - 40.0).abs() < 1e-9);
        assert!((mpki(11) - 1.0).abs() < 1e-9);
        assert_eq!(now.counters[&12], measured);
    }

    #[test]
    fn idle_reused_and_kernel_threads() {
        let r = rules(HOG);
        let mut old = task(10, 10, "hog-0", 500, 0);
        let before = snapshot(vec![old.clone(), task(20, 20, "hog-k", 0, 0)]);
        // Idle over the interval: zero counts, so no MPKI (not a turtle).
        let mut now = snapshot(vec![old.clone()]);
        let c = synthesize(&r, &now, &cpu_ticks(&before));
        assert_eq!(c[&10].get(Counter::Instructions), Some(0));
        assert_eq!(numaplace_model::metrics::mpki(&c[&10]), None);
        // A reused tid (another start time) has no previous CPU time.
        old.start_time += 1;
        now.tasks = vec![old];
        assert!(synthesize(&r, &now, &cpu_ticks(&before)).is_empty());
        // Kernel threads (no command line) get nothing.
        let mut k = snapshot(vec![task(20, 20, "hog-k", 100, 0)]);
        k.groups.push(numaplace_model::TaskGroup {
            pid: 20,
            start_time: 1020,
            comm: "hog-k".into(),
            cmdline: vec![],
            cgroup: None,
            kind: numaplace_model::GroupKind::Process,
            threads: vec![20],
            memory: None,
        });
        assert!(synthesize(&r, &k, &cpu_ticks(&before)).is_empty());
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("[[thread]]\ncomm = \"a\"\nllc_mpki = 1\nipc = 1\nghzz = 2\n").unwrap_err();
        assert!(
            e.contains("line 5") && e.contains("unknown field `ghzz`"),
            "{e}"
        );
        let e = parse("[[thread]]\ncomm = \"a\"\nllc_mpki = -1\nipc = 1\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("llc_mpki"), "{e}");
        let e = parse("[[thread]]\ncomm = \"a\"\nllc_mpki = 1\nipc = 0\n").unwrap_err();
        assert!(e.contains("line 4") && e.contains("ipc"), "{e}");
        let e = parse("[[thread]]\ncomm = \"\"\nllc_mpki = 1\nipc = 1\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("comm is empty"), "{e}");
        let e = parse("[[thread]]\ncomm = \"a\"\nipc = 1\n").unwrap_err();
        assert!(e.contains("llc_mpki"), "{e}");
        let e = parse("[[threads]]\ncomm = \"a\"\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("threads"), "{e}");
        assert!(parse("# nothing\n").unwrap_err().contains("no [[thread]]"));
        assert!(parse("[[thread]]\ncomm = \"a\"\nllc_mpki = 1\nipc = 1\nghz = inf\n").is_err());
    }

    #[test]
    fn load_errors_name_the_file_and_exit_2() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.toml");
        std::fs::write(&path, "[[thread]]\ncomm = 3\n").unwrap();
        let e = SyntheticCounters::load(&path).unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("rules.toml") && text.contains("line 2"),
            "{text}"
        );
        assert_eq!(crate::error::exit_code(&e), 2);
        let e = SyntheticCounters::load(&dir.path().join("absent.toml")).unwrap_err();
        assert!(format!("{e:#}").contains("absent.toml"));
        assert_eq!(crate::error::exit_code(&e), 2);

        std::fs::write(&path, HOG).unwrap();
        let s = SyntheticCounters::load(&path).unwrap();
        let d = s.describe();
        assert!(
            d.contains("SYNTHETIC") && d.contains("rules.toml") && d.contains("\"hog-*\""),
            "{d}"
        );
        assert!(d.contains("not for production") || d.contains("never for production"));
    }
}
