//! doctor's table for people, and the one-line form `run` and `advise`
//! print at start. A long reason shared by several rows (a VM without a
//! PMU fails every hardware counter the same way) is said once, as a
//! numbered note the rows refer to; a row whose `to do` is another's says
//! so instead of repeating it. The JSON keeps every row whole.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::readiness::{Reads, verdict};
use super::{Check, Row, Status};

/// A clause shorter than this is said again where it recurs: a note would
/// cost the reader more than it saves.
const NOTE_MIN_CHARS: usize = 100;

/// The table: one block per row, the shared reasons as notes, then
/// `details` (numastat's counts), the count and, last, the verdict on the
/// configured policy (the line a readiness probe's log ends with).
pub fn render(rows: &[Row], reads: &Reads, details: &str) -> String {
    let (sources, notes) = say_once(rows.iter().map(|r| r.check.source.clone()).collect());
    let mut out = String::new();
    // The first row (by name) to say each `to do`.
    let mut said: HashMap<String, &str> = HashMap::new();
    for (r, source) in rows.iter().zip(&sources) {
        let c = &r.check;
        let _ = writeln!(out, "{:<8} {}", c.status.word(), c.name);
        let _ = writeln!(out, "         from: {source}");
        if !c.used_by.is_empty() {
            let _ = writeln!(out, "         read by: {}", c.used_by.join(", "));
        }
        if let Some(caps) = &r.caps {
            let _ = writeln!(out, "         caps: {}", caps.line());
        }
        // A missing capability comes first: without it nothing else helps.
        for fix in r.caps.as_ref().and_then(|c| c.fix()).iter().chain(&c.fix) {
            match said.get(fix) {
                Some(first) => {
                    let _ = writeln!(out, "         to do: as for `{first}` above");
                }
                None => {
                    said.insert(fix.clone(), &c.name);
                    let _ = writeln!(out, "         to do: {fix}");
                }
            }
        }
    }
    for (i, note) in notes.iter().enumerate() {
        let _ = writeln!(out, "[{}] {note}", i + 1);
    }
    out.push_str(details);
    let missing = rows.iter().filter(|r| r.check.status != Status::Ok).count();
    let _ = writeln!(
        out,
        "{} of {} work here{}",
        rows.len() - missing,
        rows.len(),
        if missing == 0 {
            String::new()
        } else {
            format!("; {missing} do not, or only in part (see `to do`)")
        }
    );
    let _ = writeln!(out, "{}", verdict(rows, reads));
    out
}

/// `texts` with every clause (text between `; `) of at least
/// [`NOTE_MIN_CHARS`] that occurs more than once replaced by a reference
/// ` [N]` to the N-th of the notes returned. Longest first.
pub(crate) fn say_once(mut texts: Vec<String>) -> (Vec<String>, Vec<String>) {
    let mut notes: Vec<String> = Vec::new();
    loop {
        let mut best: Option<&str> = None;
        for t in &texts {
            for clause in t.split("; ") {
                if clause.chars().count() < NOTE_MIN_CHARS
                    || best.is_some_and(|b| b.len() >= clause.len())
                {
                    continue;
                }
                let times: usize = texts.iter().map(|t| t.matches(clause).count()).sum();
                if times > 1 {
                    best = Some(clause);
                }
            }
        }
        let Some(clause) = best.map(str::to_string) else {
            break;
        };
        notes.push(clause.clone());
        let mark = format!("[{}]", notes.len());
        for t in &mut texts {
            // Joined to the clause before it, or standing for the text.
            *t = t
                .replace(&format!("; {clause}"), &format!(" {mark}"))
                .replace(&clause, &mark);
        }
    }
    (texts, notes)
}

/// The short form `run` and `advise` print at start: what does not work,
/// in a line; `None` if everything does.
pub fn short(checks: &[Check]) -> Option<String> {
    let not: Vec<String> = checks
        .iter()
        .filter(|c| c.status != Status::Ok)
        .map(|c| format!("{} {}", c.id, c.status.word().to_lowercase()))
        .collect();
    (!not.is_empty()).then(|| {
        format!(
            "doctor: {} (`numaplace doctor` says where each comes from and what to do)",
            not.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PMU: &str = "the kernel lists only these PMUs: breakpoint, msr, power, software, \
        tracepoint, uprobe (this is a VM without a virtual PMU: give the guest one, e.g. \
        QEMU/KVM `-cpu host,pmu=on`, or run on bare metal)";

    #[test]
    fn a_long_reason_in_four_places_is_said_once() {
        let counter = |c: &str, e: &str| {
            format!("{c}: not counted: no hardware PMU: perf_event_open({e}) says ENOENT; {PMU}")
        };
        let texts = vec![
            format!(
                "perf_event per thread: {}; {}",
                counter("llc_misses", "cache-misses"),
                counter("instructions", "instructions")
            ),
            format!(
                "perf_event per thread: {}; {}",
                counter("cycles", "cycles"),
                counter("instructions", "instructions")
            ),
            "hwloc over /sys: 1 packages".to_string(),
        ];
        let (out, notes) = say_once(texts);
        assert_eq!(notes, vec![PMU.to_string()]);
        assert_eq!(
            out[0],
            "perf_event per thread: llc_misses: not counted: no hardware PMU: \
             perf_event_open(cache-misses) says ENOENT [1]; instructions: not counted: no \
             hardware PMU: perf_event_open(instructions) says ENOENT [1]"
        );
        assert!(out[1].ends_with("perf_event_open(instructions) says ENOENT [1]"));
        assert_eq!(out[2], "hwloc over /sys: 1 packages");
        assert!(out.iter().all(|t| !t.contains("bare metal")), "{out:?}");
    }

    #[test]
    fn a_reason_said_once_or_short_stays_where_it_is() {
        let texts = vec![
            format!("a: {PMU}"),
            "b; short and said twice".into(),
            "c; short and said twice".into(),
        ];
        let (out, notes) = say_once(texts.clone());
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(out, texts);
    }

    #[test]
    fn the_same_to_do_is_said_once() {
        let reads = Reads {
            policy: "auto",
            places: true,
            switches_kernel_balancing: false,
        };
        let row = |id: &str, fix: &str| Row {
            check: Check {
                id: id.into(),
                name: format!("the {id}"),
                status: Status::Missing,
                source: "s".into(),
                fix: Some(fix.into()),
                used_by: vec!["auto".into()],
            },
            caps: None,
            needed: true,
        };
        let text = render(
            &[row("cpi", "give it a PMU"), row("samples", "give it a PMU")],
            &reads,
            "numastat: node 0\n",
        );
        assert_eq!(text.matches("give it a PMU").count(), 1, "{text}");
        assert!(text.contains("to do: as for `the cpi` above"), "{text}");
        assert!(
            text.contains("numastat: node 0\n2 of 2") || text.contains("numastat: node 0\n0 of 2"),
            "details before the count: {text}"
        );
        assert!(
            text.ends_with(
                "auto reads what does not fully work here: cpi, samples (exit status 3)\n"
            ),
            "{text}"
        );
    }
}
