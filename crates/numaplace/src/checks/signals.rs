//! The rows of the signals the policies read: libpfm4's model-specific
//! events, the per-thread counters, sampled addresses, resctrl's LLC
//! occupancy and RAPL's energy, each from the collector's own verdict.

use numaplace_linux::Collector;
use numaplace_policy::Signal;

use super::{Check, Status, readers};

/// libpfm4, which names the model-specific events (the uncore pair, and
/// load-latency sampling where sysfs does not) for this CPU.
pub(super) fn libpfm() -> Check {
    let forced = std::env::var("LIBPFM_FORCE_PMU").ok();
    let forced_note = forced
        .as_deref()
        .map(|p| {
            format!(
                "; LIBPFM_FORCE_PMU={p} is set, so it encodes for that CPU, whatever this one is"
            )
        })
        .unwrap_or_default();
    let used_by = readers(Signal::UncorePenalty);
    match numaplace_linux::perf::host_encoder().core_pmu() {
        Ok(pmu) => Check {
            id: "libpfm4".into(),
            name: "model-specific events (libpfm4)".into(),
            status: Status::Ok,
            source: format!(
                "libpfm4 ({}) encodes for core PMU {pmu}{forced_note}",
                numaplace_linux::perf::libpfm::LIBPFM_SONAME
            ),
            fix: forced.map(|_| "unset LIBPFM_FORCE_PMU in numaplace's environment".into()),
            used_by,
        },
        Err(why) => {
            let fix = if why.starts_with(numaplace_linux::perf::LIBPFM_MISSING) {
                "apt-get install libpfm4 (Debian; libpfm on Fedora)"
            } else {
                "on a VM give it a virtual PMU; on a CPU newer than this libpfm4, a newer libpfm4"
            };
            Check {
                id: "libpfm4".into(),
                name: "model-specific events (libpfm4)".into(),
                status: Status::Missing,
                source: format!("{why}{forced_note}"),
                fix: Some(fix.into()),
                used_by,
            }
        }
    }
}

/// What to do about a missing counter, from the reason the monitor gave.
fn counter_fix(reason: &str) -> String {
    if reason.contains("virtual PMU") || reason.contains("no hardware PMU") {
        "give the VM a virtual PMU (QEMU/KVM `-cpu host,pmu=on`; libvirt `<cpu mode='host-passthrough'/>` \
         and `<pmu state='on'/>`), or run on the host"
            .into()
    } else if reason.contains("paranoid") {
        "run numaplace as root, or lower kernel.perf_event_paranoid (sysctl kernel.perf_event_paranoid=1)"
            .into()
    } else if reason.contains("no core PMU") {
        "the kernel lists no core PMU: on a VM give it a virtual PMU; on bare metal load the CPU's perf driver".into()
    } else {
        "no event of that meaning is known for this CPU: a newer libpfm4 may know it, or give the \
         uncore pair's raw encodings in the config's [perf] table (examples/numaplace.toml)"
            .into()
    }
}

pub(super) fn signal_check(collector: &Collector, signal: Signal) -> Check {
    let id = match signal {
        Signal::LlcMissRate => "llc-miss-rate",
        Signal::Cpi => "cpi",
        Signal::UncorePenalty => "uncore-penalty",
        Signal::Samples => "samples",
        Signal::LlcOccupancy => "llc-occupancy",
        Signal::Energy => "energy",
    };
    let missing = |source: String, fix: &str| (Status::Missing, source, Some(fix.to_string()));
    let (status, source, fix) = match signal {
        Signal::LlcMissRate | Signal::Cpi | Signal::UncorePenalty => match collector.perf() {
            None => missing(
                "perf_event is not open here".into(),
                "run as root on a kernel with perf_event",
            ),
            Some(perf) => {
                let a = perf.availability();
                let mut parts = Vec::new();
                let mut fix = None;
                let mut counted = 0;
                for &c in signal.counters() {
                    match a.counters.get(&c) {
                        Some(numaplace_linux::perf::CounterStatus::Counted { event, source }) => {
                            counted += 1;
                            parts.push(format!("{}: {event} ({source})", c.name()));
                        }
                        _ => {
                            let reason = a.reason(c).unwrap_or("not counted");
                            fix.get_or_insert_with(|| counter_fix(reason));
                            parts.push(format!("{}: not counted: {reason}", c.name()));
                        }
                    }
                }
                let status = match counted {
                    0 => Status::Missing,
                    n if n == signal.counters().len() => Status::Ok,
                    _ => Status::Partial,
                };
                let source = format!("perf_event per thread: {}", dedup_reasons(&parts));
                (status, source, fix)
            }
        },
        Signal::Samples => match collector.sampler().map(|s| s.availability()) {
            Some(a) if a.is_available() => {
                let source = format!(
                    "perf_event sampling: {}{}",
                    a.event.as_deref().unwrap_or("?"),
                    a.event_source
                        .as_deref()
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default()
                );
                (Status::Ok, source, None)
            }
            a => {
                let reason = a
                    .and_then(|a| a.reason())
                    .unwrap_or("the address sampler did not start");
                missing(reason.to_string(), &counter_fix(reason))
            }
        },
        Signal::Energy => match collector.rapl() {
            Some(r) => {
                let zones: Vec<String> = r
                    .zones()
                    .iter()
                    .map(|z| format!("{} ({})", z.zone, z.name))
                    .collect();
                let source = format!("powercap RAPL zones: {}", zones.join(", "));
                (Status::Ok, source, None)
            }
            None => missing(
                missing_reason(collector, "energy")
                    .unwrap_or_else(|| "no RAPL energy counters".into()),
                "load the RAPL driver (`modprobe intel_rapl_msr`: Intel, or AMD Zen on Linux \
                 5.11+); a VM has none",
            ),
        },
        Signal::LlcOccupancy => match collector.resctrl() {
            Some(r) => {
                let features = r.mon_features().join(", ");
                if r.mon_features().iter().any(|f| f == "llc_occupancy") {
                    let source = format!("resctrl at {}: monitors {features}", r.dir().display());
                    (Status::Ok, source, None)
                } else {
                    missing(
                        format!(
                            "resctrl at {} monitors no llc_occupancy ({features})",
                            r.dir().display()
                        ),
                        "this CPU has no cache occupancy monitoring (Intel RDT CMT, AMD PQoS)",
                    )
                }
            }
            None => missing(
                missing_reason(collector, "LLC occupancy")
                    .unwrap_or_else(|| "resctrl is not mounted".into()),
                "mount resctrl (`mount -t resctrl resctrl /sys/fs/resctrl`) on a CPU with cache \
                 monitoring (Intel RDT CMT, AMD PQoS)",
            ),
        },
    };
    Check {
        id: id.into(),
        name: signal.name().into(),
        status,
        source,
        fix,
        used_by: readers(signal),
    }
}

/// The counters of one signal usually share one reason: say it once.
pub(super) fn dedup_reasons(parts: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    for p in parts {
        let (name, rest) = p.split_once(": ").unwrap_or((p, ""));
        match out.iter_mut().find(|o| o.ends_with(&format!(": {rest}"))) {
            Some(o) if !rest.is_empty() => {
                let at = o.len() - rest.len() - 2;
                o.insert_str(at, &format!(", {name}"));
            }
            _ => out.push(p.clone()),
        }
    }
    out.join("; ")
}

/// The collector's own words for a machine reading it lacks.
fn missing_reason(collector: &Collector, what: &str) -> Option<String> {
    collector
        .missing_signals()
        .iter()
        .find(|m| m.contains(what))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_shared_by_counters_are_said_once() {
        let parts = vec![
            "instructions: not counted: no PMU".to_string(),
            "cycles: not counted: no PMU".to_string(),
            "llc_misses: cache-misses".to_string(),
        ];
        assert_eq!(
            dedup_reasons(&parts),
            "instructions, cycles: not counted: no PMU; llc_misses: cache-misses"
        );
    }
}
