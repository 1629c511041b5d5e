//! Which event samples data addresses on this machine (PEBS `mem-loads`,
//! IBS op, or page faults), resolved from sysfs, and what to say where
//! there is none.

use super::*;
use crate::perf::libpfm::EventEncoder;
use crate::perf::libpfm_events::libpfm_load_latency;
use crate::perf::raw_event::EventOrigin;

/// The load-latency threshold the kernel's `mem-loads` descriptions give
/// (`ldlat=3`, linux `arch/x86/events/intel/core.c`), used for libpfm4's
/// event too when none is configured.
pub(super) const SYSFS_LDLAT: u64 = 3;

/// Whether the PMUs include a core PMU (Intel, AMD or ARM).
pub(super) fn has_core_pmu(host: &HostFacts) -> bool {
    host.pmus
        .iter()
        .any(|p| CORE_PMUS.contains(&p.as_str()) || p.starts_with("armv"))
}

/// Why the CPU's PMU cannot be seen, with what to do about it.
pub(super) fn pmu_not_exposed(host: &HostFacts, what: &str) -> String {
    let only = if host.pmus.is_empty() {
        String::new()
    } else {
        format!(" (the kernel lists only {})", host.pmus.join(", "))
    };
    let hint = if host.hypervisor {
        ": a VM without a virtual PMU; give the guest one (QEMU/KVM `-cpu host,pmu=on`, with \
         PEBS or IBS passed through) or run on bare metal"
    } else {
        ": the kernel's perf driver does not drive this CPU's PMU"
    };
    format!("no {what} here: this CPU's PMU is not exposed{only}{hint}")
}

pub(super) fn via_vm(host: &HostFacts) -> &'static str {
    if host.hypervisor {
        ", or the hypervisor does not pass them through"
    } else {
        ""
    }
}

/// The `mem-loads` event of the first core PMU that describes it, with
/// `mem-loads-aux` where listed; else libpfm4's load-latency event for this
/// CPU (at `ldlat`, or sysfs' usual threshold of 3 cycles).
pub(super) fn resolve_pebs(
    root: &SysRoot,
    ldlat: Option<u64>,
    host: &HostFacts,
    encoder: &dyn EventEncoder,
) -> Result<SampleEvent, String> {
    let resolver = EventResolver::new(root);
    let overrides: Vec<(&str, u64)> = ldlat.map(|l| ("ldlat", l)).into_iter().collect();
    let mut looked = Vec::new();
    let mut problems = Vec::new();
    for name in CORE_PMUS {
        let Ok(pmu) = resolver.pmu(name) else {
            continue;
        };
        looked.push(format!("{EVENT_SOURCE_DIR}/{name}/events/mem-loads"));
        match resolver.named_event(&pmu, "mem-loads", &overrides) {
            Ok(Some(ev)) => {
                let aux = match resolver.named_event(&pmu, "mem-loads-aux", &[]) {
                    Ok(aux) => aux,
                    Err(e) => return Err(format!("no PEBS here: mem-loads-aux: {e}")),
                };
                return Ok(SampleEvent {
                    source: SampleSource::PebsLoads,
                    what: ev.what.clone(),
                    event: Some(ev),
                    aux,
                });
            }
            Ok(None) => {}
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "no PEBS here: the kernel's mem-loads description is unusable: {}",
            problems.join("; ")
        ));
    }
    if looked.is_empty() {
        return Err(pmu_not_exposed(host, "PEBS"));
    }
    let pfm = match libpfm_load_latency(encoder, ldlat.unwrap_or(SYSFS_LDLAT)) {
        Ok((ev, aux)) => {
            return Ok(SampleEvent {
                source: SampleSource::PebsLoads,
                what: ev.what.clone(),
                event: Some(ev),
                aux,
            });
        }
        Err(why) => why,
    };
    Err(format!(
        "no PEBS here: {} does not exist and {pfm} (no PEBS load-latency sampling on this \
         CPU{})",
        looked.join(" or "),
        via_vm(host)
    ))
}

/// The `ibs_op` PMU, config 0.
pub(super) fn resolve_ibs(root: &SysRoot, host: &HostFacts) -> Result<SampleEvent, String> {
    match EventResolver::new(root).pmu("ibs_op") {
        Ok(pmu) => {
            let origin = EventOrigin::Sysfs {
                path: root.join(&format!("{EVENT_SOURCE_DIR}/ibs_op/type")),
            };
            let ev = pmu
                .event(&[], "ibs_op//".into(), origin)
                .map_err(|e| format!("no IBS here: {e}"))?;
            Ok(SampleEvent {
                source: SampleSource::IbsOp,
                what: ev.what.clone(),
                event: Some(ev),
                aux: None,
            })
        }
        Err(EventError::NoSuchPmu { .. }) if !has_core_pmu(host) => {
            Err(pmu_not_exposed(host, "IBS"))
        }
        Err(EventError::NoSuchPmu { .. }) => Err(format!(
            "no IBS here: there is no {EVENT_SOURCE_DIR}/ibs_op (not an AMD CPU with IBS{})",
            via_vm(host)
        )),
        Err(e) => Err(format!("no IBS here: {e}")),
    }
}

/// Resolves `source` from the sysfs under `root`, or says why it is not
/// there. Opens nothing.
pub fn resolve_event(
    root: &SysRoot,
    source: SampleSource,
    ldlat: Option<u64>,
    host: &HostFacts,
    encoder: &dyn EventEncoder,
) -> Result<SampleEvent, String> {
    match source {
        SampleSource::PebsLoads => resolve_pebs(root, ldlat, host, encoder),
        SampleSource::IbsOp => resolve_ibs(root, host),
        SampleSource::PageFaults => Ok(SampleEvent {
            source,
            what: "page-faults".into(),
            event: None,
            aux: None,
        }),
    }
}

/// The event to sample with: the configured one, or PEBS where described,
/// else IBS; why neither where neither.
pub fn choose_event(
    root: &SysRoot,
    source: Option<SampleSource>,
    ldlat: Option<u64>,
    host: &HostFacts,
    encoder: &dyn EventEncoder,
) -> Result<SampleEvent, String> {
    if let Some(s) = source {
        return resolve_event(root, s, ldlat, host, encoder);
    }
    let pebs = resolve_pebs(root, ldlat, host, encoder);
    if pebs.is_ok() {
        return pebs;
    }
    let ibs = resolve_ibs(root, host);
    if ibs.is_ok() {
        return ibs;
    }
    if !has_core_pmu(host) {
        return Err(pmu_not_exposed(host, "PEBS/IBS"));
    }
    let pmus: Vec<&str> = host
        .pmus
        .iter()
        .map(String::as_str)
        .filter(|p| CORE_PMUS.contains(p))
        .collect();
    match pebs {
        // A broken description is worth more than "absent".
        Err(e) if e.contains("unusable") => Err(e),
        _ => Err(format!(
            "no PEBS/IBS here: the {} PMU describes no mem-loads event and there is no ibs_op \
             PMU (this CPU has neither PEBS load latency nor IBS{})",
            pmus.join("/"),
            via_vm(host)
        )),
    }
}
