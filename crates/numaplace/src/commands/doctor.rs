//! `numaplace doctor`: every signal the policies read and every interface
//! numaplace acts through, where each comes from on this machine, whether
//! it works, who needs it, and the one thing to do where it does not.
//!
//! It asks the same readers the daemon uses (the collector with every
//! option on, the kernel's files, one harmless call of each syscall the
//! engine makes), so what it says is what `run` would meet.

use std::fmt::Write as _;

use anyhow::Result;
use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::{CollectOptions, Collector, SysRoot, TopologySource, discover_repaired};
use numaplace_policy::Signal;
use numaplace_policy::registry::PolicyKind;
use serde::Serialize;

use crate::cli::DoctorArgs;

/// Whether something works here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Works.
    Ok,
    /// Works in part (some of its events, only one's own tasks).
    Partial,
    /// Could work, but is switched off.
    Off,
    /// Not here.
    Missing,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Partial => "partial",
            Status::Off => "off",
            Status::Missing => "MISSING",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// A short stable name for programs and the one-line form
    /// (`llc-miss-rate`, `samples`, `pinning`).
    pub id: String,
    /// What: a signal a policy reads, or an interface the engine uses.
    pub name: String,
    pub status: Status,
    /// Where it comes from here: events and their encodings, files,
    /// syscalls; or why it is not there.
    pub source: String,
    /// The one thing to do where it does not work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The policies that read it (empty: the engine itself, or every one).
    pub used_by: Vec<String>,
}

/// `numaplace doctor`.
pub fn run(args: &DoctorArgs) -> Result<()> {
    let checks = checks(&SysRoot::host());
    if args.json {
        println!("{}", crate::output::json::pretty(&checks)?);
    } else {
        print!("{}", render(&checks));
    }
    Ok(())
}

/// The table: one block per check.
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let _ = writeln!(out, "{:<8} {}", c.status.word(), c.name);
        let _ = writeln!(out, "         from: {}", c.source);
        if !c.used_by.is_empty() {
            let _ = writeln!(out, "         read by: {}", c.used_by.join(", "));
        }
        if let Some(fix) = &c.fix {
            let _ = writeln!(out, "         to do: {fix}");
        }
    }
    let missing = checks.iter().filter(|c| c.status != Status::Ok).count();
    let _ = writeln!(
        out,
        "{} of {} work here{}",
        checks.len() - missing,
        checks.len(),
        if missing == 0 {
            String::new()
        } else {
            format!("; {missing} do not, or only in part (see `to do`)")
        }
    );
    out
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

/// Every check, on the machine under `root`.
pub fn checks(root: &SysRoot) -> Vec<Check> {
    let mut out = vec![topology(root)];
    let collector = Collector::new(
        root.clone(),
        CollectOptions {
            memory: true,
            counters: true,
            machine: true,
            samples: true,
        },
    );
    // What can be counted, sampled and read is decided when the collector
    // is made (on numaplace's own thread); nothing is collected, so no
    // thread of the machine gets a counter for this.
    out.push(libpfm());
    for signal in Signal::ALL {
        out.push(signal_check(&collector, signal));
    }
    out.push(memory_per_node(root));
    out.push(reading_threads(root));
    out.push(hinting_faults(root));
    out.extend(actuation(root));
    out
}

/// The policies that say what they do without `signal`: those that read it.
fn readers(signal: Signal) -> Vec<String> {
    PolicyKind::NAMES
        .iter()
        .filter(|name| {
            PolicyKind::from_name(name)
                .map(|k| k.build().without(signal).is_some())
                .unwrap_or(false)
        })
        .map(|n| n.to_string())
        .collect()
}

fn topology(root: &SysRoot) -> Check {
    match discover_repaired(&TopologySource::Sysfs(root.clone())) {
        Ok(found) => {
            let t = &found.topology;
            let llcs = t.llcs().len();
            let repaired = if found.repairs.is_empty() {
                String::new()
            } else {
                format!(
                    "; repaired where the kernel's files contradict each other: {}",
                    found
                        .repairs
                        .iter()
                        .map(|r| r.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            };
            Check {
                id: "topology".into(),
                name: "topology".into(),
                status: Status::Ok,
                source: format!(
                    "hwloc over {}: {} packages, {} NUMA nodes, {llcs} LLC domains, {} cores, {} CPUs",
                    root.path().join("sys").display(),
                    t.packages().len(),
                    t.nodes().len(),
                    t.cores().len(),
                    t.cpus().len()
                ) + &repaired,
                fix: None,
                used_by: Vec::new(),
            }
        }
        Err(e) => Check {
            id: "topology".into(),
            name: "topology".into(),
            status: Status::Missing,
            source: format!("{e}"),
            fix: Some("numaplace cannot place anything without it: report this machine's /sys/devices/system tree".into()),
            used_by: Vec::new(),
        },
    }
}

/// libpfm4, which names the model-specific events (the uncore pair, and
/// load-latency sampling where sysfs does not) for this CPU.
fn libpfm() -> Check {
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

fn signal_check(collector: &Collector, signal: Signal) -> Check {
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
fn dedup_reasons(parts: &[String]) -> String {
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

fn memory_per_node(root: &SysRoot) -> Check {
    let maps = root
        .read("proc/self/numa_maps")
        .ok()
        .map(|text| numaplace_linux::procfs::parse_numa_maps(&text));
    match maps {
        Some(m) if m.mappings > 0 => Check {
            id: "memory-per-node".into(),
            name: "memory per node".into(),
            status: Status::Ok,
            source: format!(
                "/proc/PID/numa_maps (numaplace's own: {} mappings on {} node{})",
                m.mappings,
                m.nodes.len(),
                if m.nodes.len() == 1 { "" } else { "s" }
            ),
            fix: None,
            used_by: Vec::new(),
        },
        _ => Check {
            id: "memory-per-node".into(),
            name: "memory per node".into(),
            status: Status::Missing,
            source: "/proc/self/numa_maps could not be read or lists nothing".into(),
            fix: Some(
                "a kernel built with CONFIG_NUMA shows numa_maps; in a container, mount /proc"
                    .into(),
            ),
            used_by: Vec::new(),
        },
    }
}

/// How the daemon's rounds read every thread: the BPF task iterator (one
/// pass per round, `collect/iterated.rs`), or `/proc` (a `stat` per
/// thread). Loads the iterator and drops it.
fn reading_threads(root: &SysRoot) -> Check {
    let check = |status, source: String, fix: Option<&str>| Check {
        id: "task-iterator".into(),
        name: "reading threads".into(),
        status,
        source,
        fix: fix.map(str::to_string),
        used_by: Vec::new(),
    };
    if !root.is_host() {
        return check(
            Status::Partial,
            "/proc/PID/task/TID/stat under the snapshot (the task iterator reads only the live host)".into(),
            None,
        );
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    match numaplace_linux::taskiter::TaskIterator::open(hz) {
        Ok(_) => check(
            Status::Ok,
            "BPF task iterator (bpf_iter_task; task_struct offsets from /sys/kernel/btf/vmlinux): \
             every thread in one pass per round"
                .into(),
            None,
        ),
        Err(e) => {
            let why = e.to_string();
            let fix = if why.contains("CAP_BPF") {
                "run the daemon as root (loading BPF needs CAP_BPF and CAP_PERFMON)"
            } else if why.contains("pid namespace") {
                "run in the host's pid namespace (Kubernetes: hostPID: true)"
            } else if why.contains("BTF") {
                "a kernel built with CONFIG_DEBUG_INFO_BTF (Debian's is) and Linux 5.8 or later"
            } else {
                "nothing needed: /proc works, at a few microseconds per thread per round"
            };
            check(
                Status::Partial,
                format!(
                    "from /proc, a stat per thread per round: the BPF task iterator cannot be used: {why}"
                ),
                Some(fix),
            )
        }
    }
}

fn hinting_faults(root: &SysRoot) -> Check {
    let b = NumaBalancing::read(root);
    let name = "NUMA hinting faults".to_string();
    let id = "hinting-faults";
    let used_by = vec![
        "di-plain".into(),
        "di-migrate".into(),
        "dino".into(),
        "symbiosis".into(),
    ];
    // The per-thread lines exist only with CONFIG_SCHED_DEBUG.
    let sched = root.read("proc/self/sched");
    let shows = sched
        .as_deref()
        .is_ok_and(|t| t.contains("numa_faults") || t.contains("total_numa_faults"));
    match b {
        NumaBalancing::Absent => Check {
            id: id.into(),
            name,
            status: Status::Missing,
            source: "kernel.numa_balancing is not in this kernel (no CONFIG_NUMA_BALANCING)".into(),
            fix: Some("a kernel built with CONFIG_NUMA_BALANCING (every major distribution's is)".into()),
            used_by,
        },
        b if !b.balances_between_nodes() => Check {
            id: id.into(),
            name,
            status: Status::Off,
            source: format!(
                "{}; the kernel takes hinting faults only while it balances",
                b.describe()
            ),
            fix: Some(
                "where there are no sampled addresses: `sysctl kernel.numa_balancing=1`, or let auto try \
                 it (`[engine] manage_kernel_balancing`, with `[scope] all = true`)"
                    .into(),
            ),
            used_by,
        },
        b if sched.is_err() => Check {
            id: id.into(),
            name,
            status: Status::Missing,
            source: format!(
                "{}, but /proc/PID/sched does not exist (a kernel without CONFIG_SCHED_DEBUG)",
                b.describe()
            ),
            fix: Some("a kernel built with CONFIG_SCHED_DEBUG".into()),
            used_by,
        },
        b => Check {
            id: id.into(),
            name,
            status: Status::Ok,
            source: format!(
                "/proc/PID/task/TID/sched numa_faults lines{}; {}",
                if shows { "" } else { " (none yet for numaplace itself)" },
                b.describe()
            ),
            fix: None,
            used_by,
        },
    }
}

/// Whether this process may act on other users' tasks: root, or
/// CAP_SYS_NICE (bit 23) in its effective set.
fn may_act_on_others(root: &SysRoot) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    root.read("proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 23) != 0)
}

fn actuation(root: &SysRoot) -> Vec<Check> {
    let others = may_act_on_others(root);
    let scope_note = if others {
        "any user's tasks (root or CAP_SYS_NICE)"
    } else {
        "only numaplace's own user's tasks"
    };
    let partial_fix = (!others).then(|| "run numaplace as root (or with CAP_SYS_NICE)".to_string());
    let mut out = Vec::new();
    // Pinning: set this thread's affinity to what it is.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes; pid 0 is this thread.
    let got = unsafe { libc::sched_getaffinity(0, size, &mut set) };
    // SAFETY: as above; the mask is the one just read, so nothing changes.
    let put = (got == 0).then(|| unsafe { libc::sched_setaffinity(0, size, &set) });
    out.push(match put {
        Some(0) => Check {
            id: "pinning".into(),
            name: "pinning threads".into(),
            status: if others { Status::Ok } else { Status::Partial },
            source: format!("sched_setaffinity(2): {scope_note}"),
            fix: partial_fix.clone(),
            used_by: Vec::new(),
        },
        _ => Check {
            id: "pinning".into(),
            name: "pinning threads".into(),
            status: Status::Missing,
            source: format!(
                "sched_setaffinity(2) on numaplace's own thread failed: {}",
                std::io::Error::last_os_error()
            ),
            fix: Some(
                "a seccomp profile or container runtime forbids it: allow sched_setaffinity".into(),
            ),
            used_by: Vec::new(),
        },
    });
    // Moving memory: ask move_pages(2) where one of our pages is.
    let probe = Box::new(0u64);
    let mut pages = [(&*probe as *const u64).cast::<libc::c_void>().cast_mut()];
    let mut status = [-1i32];
    // SAFETY: one page pointer (a live heap address of ours), no target
    // nodes (a query), one status slot; pid 0 is this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            1usize,
            pages.as_mut_ptr(),
            std::ptr::null::<i32>(),
            status.as_mut_ptr(),
            0,
        )
    };
    out.push(if rc == 0 {
        Check {
            id: "moving-memory".into(),
            name: "moving memory".into(),
            status: if others { Status::Ok } else { Status::Partial },
            source: format!(
                "move_pages(2) (numaplace's own page is on node {}): {scope_note}",
                status[0]
            ),
            fix: partial_fix,
            used_by: Vec::new(),
        }
    } else {
        Check {
            id: "moving-memory".into(),
            name: "moving memory".into(),
            status: Status::Missing,
            source: format!("move_pages(2) failed: {}", std::io::Error::last_os_error()),
            fix: Some("a kernel built with CONFIG_NUMA and CONFIG_MIGRATION; in a container, allow move_pages".into()),
            used_by: Vec::new(),
        }
    });
    // Switching the kernel's balancing: the sysctl must be writable.
    let path = root.path().join(numaplace_linux::balancing::SYSCTL);
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok();
    // SAFETY: a NUL-terminated path; access(2) only checks.
    let writable = c_path.is_some_and(|p| unsafe { libc::access(p.as_ptr(), libc::W_OK) } == 0);
    out.push(Check {
        id: "kernel-balancing-switch".into(),
        name: "switching kernel.numa_balancing".into(),
        status: if writable {
            Status::Ok
        } else {
            Status::Missing
        },
        source: if writable {
            format!("{} is writable", path.display())
        } else {
            format!("{} is absent or not writable by numaplace", path.display())
        },
        fix: (!writable).then(|| {
            "run numaplace as root on a kernel with CONFIG_NUMA_BALANCING (only `auto` with \
             `[scope] all = true` uses it)"
                .into()
        }),
        used_by: vec!["auto".into()],
    });
    out
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

    #[test]
    fn the_short_form_names_what_does_not_work() {
        let c = |id: &str, status| Check {
            id: id.into(),
            name: format!("the {id}"),
            status,
            source: String::new(),
            fix: None,
            used_by: Vec::new(),
        };
        assert_eq!(short(&[c("topology", Status::Ok)]), None);
        let s = short(&[c("topology", Status::Ok), c("samples", Status::Missing)]).unwrap();
        assert!(s.starts_with("doctor: samples missing ("), "{s}");
    }

    /// On this machine: every check has a source, the topology and the
    /// actuation syscalls work, and whatever does not work says what to do.
    #[test]
    fn every_check_on_this_machine_says_where_it_comes_from() {
        let checks = checks(&SysRoot::host());
        assert!(checks.len() >= 13, "{checks:?}");
        let ids: std::collections::BTreeSet<&str> = checks.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), checks.len(), "one id each: {checks:?}");
        for c in &checks {
            assert!(!c.source.is_empty(), "{c:?}");
            if c.status != Status::Ok && c.status != Status::Partial {
                assert!(c.fix.is_some(), "{c:?}");
            }
        }
        let by = |n: &str| checks.iter().find(|c| c.name == n).unwrap();
        assert_eq!(by("topology").status, Status::Ok);
        assert_ne!(by("pinning threads").status, Status::Missing);
        assert_ne!(by("moving memory").status, Status::Missing);
        assert!(
            by(Signal::UncorePenalty.name())
                .used_by
                .contains(&"brm".to_string())
        );
    }
}
