//! Which libpfm4 event stands for each counter on each CPU, or why none
//! does. Pure data, keyed by libpfm4's PMU names (libpfm 4.13,
//! `lib/pfmlib_intel_*.c`, `lib/pfmlib_amd64_*.c`); the event strings are
//! those of its tables (`lib/events/*.h`). The encodings they give are
//! checked against the vendors' published values by
//! `tests/it/libpfm_cpus.rs`, one forced PMU per process.
//!
//! The uncore-penalty pair (\[Rao13\] §3.1): `t'` is the cycles with at
//! least one outstanding offcore demand data read, `λ` the number of such
//! reads. On Intel from Westmere on they are the super queue's
//! `OFFCORE_REQUESTS_OUTSTANDING` with `cmask=1` and `OFFCORE_REQUESTS`
//! (\[Rao13\]'s own machine is a Westmere-EP, `wsm_dp`). Where a CPU lacks
//! them the entry says why, and takes a neighbour only where it means the
//! same thing.

use numaplace_model::Counter;

use super::libpfm::{EventEncoder, PfmEncoding};
use super::raw_event::{EventOrigin, RawEvent};

/// What stands for one counter on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// A libpfm4 event string, without the `pmu::` prefix; `note` says how
    /// it relates to the counter where it is not the obvious event.
    Event {
        /// The event string.
        name: &'static str,
        /// How it relates to the counter; empty where it is the obvious event.
        note: &'static str,
    },
    /// This CPU has no event that means the counter: why.
    Absent(&'static str),
}

const fn ev(name: &'static str) -> Choice {
    Choice::Event { name, note: "" }
}

/// One CPU family's events, for the libpfm4 PMUs named in `pmus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuEvents {
    /// libpfm4's PMU names this entry serves.
    pub pmus: &'static [&'static str],
    /// The CPU in words, for messages.
    pub cpu: &'static str,
    /// `t'`: cycles with an outstanding offcore data read.
    pub occupancy: Choice,
    /// `λ`: offcore data reads.
    pub requests: Choice,
    /// LLC references.
    pub llc_references: Choice,
    /// LLC misses.
    pub llc_misses: Choice,
    /// Instructions retired.
    pub instructions: Choice,
    /// Core cycles.
    pub cycles: Choice,
    /// The PEBS load-latency event (`:ldlat=N` is appended), or why none.
    pub load_latency: Choice,
    /// The group leader the kernel requires before a load-latency event
    /// that records `data_src` (Sapphire Rapids: `mem-loads-aux`,
    /// event 0x03 umask 0x82, linux `arch/x86/events/intel/core.c`).
    pub load_latency_aux: Option<&'static str>,
}

impl CpuEvents {
    /// The choice for `c`; `None` for the software counters (the kernel's).
    pub fn for_counter(&self, c: Counter) -> Option<Choice> {
        Some(match c {
            Counter::UncoreOccupancy => self.occupancy,
            Counter::UncoreRequests => self.requests,
            Counter::LlcReferences => self.llc_references,
            Counter::LlcMisses => self.llc_misses,
            Counter::Instructions => self.instructions,
            Counter::Cycles => self.cycles,
            Counter::TaskClock
            | Counter::ContextSwitches
            | Counter::CpuMigrations
            | Counter::PageFaults => return None,
        })
    }
}

// Intel's architectural events (SDM vol. 3B, "Pre-defined Architectural
// Performance Events": UnHalted Core Cycles 3CH/00H, Instruction Retired
// C0H/00H, LLC Reference 2EH/4FH, LLC Misses 2EH/41H), under libpfm4's names.
const INTEL_INSTRUCTIONS: Choice = ev("INSTRUCTION_RETIRED");
const INTEL_CYCLES: Choice = ev("UNHALTED_CORE_CYCLES");
const INTEL_LLC_REFERENCES: Choice = ev("LONGEST_LAT_CACHE:REFERENCE");
const INTEL_LLC_MISSES: Choice = ev("LONGEST_LAT_CACHE:MISS");

/// Skylake-SP to Ice Lake-SP: the super-queue pair and PEBS load latency
/// (`MEM_TRANS_RETIRED.LOAD_LATENCY`, 0xCD/0x01).
const INTEL_SQ_OCCUPANCY: Choice = ev("OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1");
const INTEL_SQ_REQUESTS: Choice = ev("OFFCORE_REQUESTS:DEMAND_DATA_RD");
const INTEL_LOAD_LATENCY: Choice = ev("MEM_TRANS_RETIRED:LOAD_LATENCY");

const AMD_NO_PEBS: Choice = Choice::Absent(
    "AMD has no PEBS; its load sampling is IBS op, which the kernel describes as the ibs_op \
     PMU in sysfs (libpfm4 does not encode it)",
);
const ZEN_LLC: &str = "Zen's last-level cache (L3) is counted by the amd_l3 uncore PMU, per \
                       core complex and not per thread (AMD PPR, \"L3 Cache PMC Events\"); \
                       the kernel's generic event is used instead";

const FAM10H: CpuEvents = CpuEvents {
    pmus: &[
        "amd64_fam10h_barcelona",
        "amd64_fam10h_shanghai",
        "amd64_fam10h_istanbul",
    ],
    cpu: "AMD family 10h",
    occupancy: Choice::Absent(
        "AMD family 10h counts no outstanding misses per core: its BKDG (31116) has no \
         miss-address-buffer occupancy event (those begin with family 17h, PMCx05F), and its \
         read-latency events (CPU_READ_COMMAND_LATENCY_*, EventSelect 1E3h) count at the \
         northbridge, for the whole node",
    ),
    requests: Choice::Event {
        name: "L2_CACHE_MISS:DATA",
        note: "data-cache fills that missed L2 (BKDG 31116, EventSelect 07Eh, unit mask 02h): \
               the demand data requests that leave the core, as OFFCORE_REQUESTS.DEMAND_DATA_RD \
               counts on Intel",
    },
    // The kernel's generic cache-references / cache-misses on family 10h
    // are these same L2 events, 0x077d and 0x077e (linux
    // arch/x86/events/amd/core.c, amd_perfmon_event_map): the L3 events
    // (EventSelect 4E0h/4E1h) are northbridge events counting every core
    // of the node selected by the unit mask, not one thread.
    llc_references: Choice::Event {
        name: "REQUESTS_TO_L2:INSTRUCTIONS:DATA:TLB_WALK",
        note: "L2 requests, as the kernel's generic cache-references on family 10h (its L3 \
               events count for the whole node, not per thread)",
    },
    llc_misses: Choice::Event {
        name: "L2_CACHE_MISS:INSTRUCTIONS:DATA:TLB_WALK",
        note: "L2 misses, as the kernel's generic cache-misses on family 10h (its L3 events \
               count for the whole node, not per thread)",
    },
    instructions: ev("RETIRED_INSTRUCTIONS"),
    cycles: ev("CPU_CLK_UNHALTED"),
    load_latency: AMD_NO_PEBS,
    load_latency_aux: None,
};

const ZEN2: CpuEvents = CpuEvents {
    pmus: &["amd64_fam17h_zen2"],
    cpu: "AMD Zen 2",
    occupancy: Choice::Absent(
        "Zen 2 lists no count of L1D misses in flight: neither libpfm4's zen2 table nor \
         perf's amdzen2 events (linux tools/perf/pmu-events/arch/x86/amdzen2/memory.json) have \
         LsAllocMabCount (PMCx05F), which Zen 3 introduced",
    ),
    requests: Choice::Event {
        name: "MAB_ALLOCATION_BY_PIPE:DATA_PIPE",
        note: "miss-address-buffer allocations by loads (PMCx041 unit mask 01h, perf's \
               ls_mab_alloc.loads in amdzen2/memory.json): L1D load misses, a superset of the \
               uncore requests as [Rao13]'s super queue is",
    },
    llc_references: Choice::Absent(ZEN_LLC),
    llc_misses: Choice::Absent(ZEN_LLC),
    instructions: ev("RETIRED_INSTRUCTIONS"),
    cycles: ev("CYCLES_NOT_IN_HALT"),
    load_latency: AMD_NO_PEBS,
    load_latency_aux: None,
};

const ZEN34_OCCUPANCY: Choice = Choice::Absent(
    "ALLOC_MAB_COUNT (PMCx05F) counts the L1D misses in flight divided by 4 unless a second \
     counter is merged with it (MergeEvent, AMD PPR \"Large Increment per Cycle Events\"; \
     perf's amdzen3/memory.json and libpfm4's table say so), which perf does not do for it: \
     with cmask=1 it would count the cycles with at least 4 misses in flight, not those with \
     at least one ([Rao13] §3.1's t')",
);
const ZEN34_REQUESTS: Choice = Choice::Event {
    name: "MAB_ALLOCATION_BY_TYPE:LS",
    note: "miss-address-buffer allocations by the load-store pipes, without the hardware \
           prefetcher's (PMCx041 unit mask 3Fh, perf's ls_mab_alloc.load_store_allocations in \
           amdzen3/memory.json and amdzen4/cache.json; on Zen 3 it includes the DC \
           prefetcher's, 08h): L1D misses, a superset of the uncore requests as [Rao13]'s \
           super queue is; libpfm4 has no loads-only unit mask for Zen 3/4",
};

const ZEN3: CpuEvents = CpuEvents {
    pmus: &["amd64_fam19h_zen3"],
    cpu: "AMD Zen 3",
    occupancy: ZEN34_OCCUPANCY,
    requests: ZEN34_REQUESTS,
    ..ZEN2
};

const ZEN4: CpuEvents = CpuEvents {
    pmus: &["amd64_fam19h_zen4"],
    cpu: "AMD Zen 4",
    ..ZEN3
};

const WESTMERE: CpuEvents = CpuEvents {
    pmus: &["wsm_dp", "wsm"],
    cpu: "Intel Westmere",
    // Westmere names the demand data reads DEMAND_READ_DATA (0x60/0x01 and
    // 0xB0/0x01): [Rao13]'s machine.
    occupancy: ev("OFFCORE_REQUESTS_OUTSTANDING:DEMAND_READ_DATA:c=1"),
    requests: ev("OFFCORE_REQUESTS:DEMAND_READ_DATA"),
    llc_references: INTEL_LLC_REFERENCES,
    llc_misses: INTEL_LLC_MISSES,
    instructions: INTEL_INSTRUCTIONS,
    cycles: INTEL_CYCLES,
    // The kernel's own mem-loads on Nehalem/Westmere: event=0x0b,umask=0x10.
    load_latency: ev("MEM_INST_RETIRED:LATENCY_ABOVE_THRESHOLD"),
    load_latency_aux: None,
};

const SKYLAKE_SP: CpuEvents = CpuEvents {
    pmus: &["skx"],
    cpu: "Intel Skylake-SP",
    occupancy: INTEL_SQ_OCCUPANCY,
    requests: INTEL_SQ_REQUESTS,
    load_latency: INTEL_LOAD_LATENCY,
    ..WESTMERE
};

const CASCADE_LAKE: CpuEvents = CpuEvents {
    pmus: &["clx"],
    cpu: "Intel Cascade Lake",
    ..SKYLAKE_SP
};

const ICE_LAKE_SP: CpuEvents = CpuEvents {
    pmus: &["icx"],
    cpu: "Intel Ice Lake-SP",
    llc_references: Choice::Absent(
        "libpfm4's icx table has no LONGEST_LAT_CACHE:REFERENCE; the kernel's generic \
         cache-references (the architectural event 2EH/4FH) is used instead",
    ),
    ..SKYLAKE_SP
};

const SAPPHIRE_RAPIDS: CpuEvents = CpuEvents {
    pmus: &["spr"],
    cpu: "Intel Sapphire Rapids",
    // libpfm 4.13's spr table has OFFCORE_REQUESTS:DEMAND_DATA_RD but no
    // demand-only OFFCORE_REQUESTS_OUTSTANDING umask: both halves of the
    // pair then count all data reads (demand and L1/L2 prefetch, umask
    // 0x08), so t' and λ still describe the same requests.
    occupancy: Choice::Event {
        name: "OFFCORE_REQUESTS_OUTSTANDING:CYCLES_WITH_DATA_RD",
        note: "all data reads, demand and prefetch (libpfm4 4.13 has no demand-only umask for \
               spr), paired with OFFCORE_REQUESTS:DATA_RD",
    },
    requests: Choice::Event {
        name: "OFFCORE_REQUESTS:DATA_RD",
        note: "all data reads, demand and prefetch, to pair with the occupancy event",
    },
    load_latency_aux: Some("LD_BLOCKS:STORE_FORWARD"),
    ..SKYLAKE_SP
};

/// Every CPU numaplace has libpfm4 events for.
pub const CPUS: [CpuEvents; 9] = [
    WESTMERE,
    SKYLAKE_SP,
    CASCADE_LAKE,
    ICE_LAKE_SP,
    SAPPHIRE_RAPIDS,
    FAM10H,
    ZEN2,
    ZEN3,
    ZEN4,
];

/// The entry for libpfm4's PMU `pmu`.
pub fn cpu_events(pmu: &str) -> Option<&'static CpuEvents> {
    CPUS.iter().find(|c| c.pmus.contains(&pmu))
}

/// Every libpfm4 PMU name with an entry, for messages.
pub fn known_pmus() -> Vec<&'static str> {
    CPUS.iter().flat_map(|c| c.pmus.iter().copied()).collect()
}

/// This CPU's entry, through the encoder's core PMU, or why there is none.
fn this_cpu(encoder: &dyn EventEncoder) -> Result<(String, &'static CpuEvents), String> {
    let pmu = encoder.core_pmu()?;
    match cpu_events(&pmu) {
        Some(cpu) => Ok((pmu, cpu)),
        None => Err(format!(
            "libpfm4 names this CPU's PMU {pmu}, for which numaplace lists no events (it \
             lists: {})",
            known_pmus().join(", ")
        )),
    }
}

fn raw(pmu: &str, name: &str, e: PfmEncoding) -> RawEvent {
    RawEvent {
        what: format!("{pmu}::{name}"),
        pmu_type: e.pmu_type,
        config: e.config,
        config1: e.config1,
        config2: e.config2,
        origin: EventOrigin::Libpfm { event: e.name },
    }
}

/// `c`'s event on this CPU as libpfm4 encodes it, or why there is none
/// (no libpfm4, an unknown CPU, no such event on it).
pub fn libpfm_event(encoder: &dyn EventEncoder, c: Counter) -> Result<RawEvent, String> {
    let (pmu, cpu) = this_cpu(encoder)?;
    match cpu.for_counter(c) {
        None => Err(format!("{} is a software event", c.name())),
        Some(Choice::Absent(why)) => Err(format!("not on {} ({pmu}): {why}", cpu.cpu)),
        Some(Choice::Event { name, .. }) => {
            let full = format!("{pmu}::{name}");
            encoder.encode(&full).map(|e| raw(&pmu, name, e))
        }
    }
}

/// The PEBS load-latency event on this CPU as libpfm4 encodes it, with
/// threshold `ldlat` (cycles), and the group leader the kernel requires
/// where it does; or why there is none.
pub fn libpfm_load_latency(
    encoder: &dyn EventEncoder,
    ldlat: u64,
) -> Result<(RawEvent, Option<RawEvent>), String> {
    let (pmu, cpu) = this_cpu(encoder)?;
    let name = match cpu.load_latency {
        Choice::Absent(why) => return Err(format!("not on {} ({pmu}): {why}", cpu.cpu)),
        Choice::Event { name, .. } => format!("{name}:ldlat={ldlat}"),
    };
    let ev = encoder
        .encode(&format!("{pmu}::{name}"))
        .map(|e| raw(&pmu, &name, e))?;
    let aux = match cpu.load_latency_aux {
        None => None,
        Some(aux) => Some(
            encoder
                .encode(&format!("{pmu}::{aux}"))
                .map(|e| raw(&pmu, aux, e))?,
        ),
    };
    Ok((ev, aux))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::libpfm::NoEncoder;

    /// An encoder for one PMU that encodes any event to a fixed config and
    /// remembers nothing: the resolution logic, without libpfm4.
    struct Fake(&'static str);

    impl EventEncoder for Fake {
        fn core_pmu(&self) -> Result<String, String> {
            Ok(self.0.into())
        }
        fn encode(&self, event: &str) -> Result<PfmEncoding, String> {
            if event.contains("STORE_FORWARD") {
                return Ok(PfmEncoding {
                    pmu_type: 4,
                    config: 0x8203,
                    config1: 0,
                    config2: 0,
                    name: event.into(),
                });
            }
            let ldlat = event
                .rsplit_once(":ldlat=")
                .map_or(0, |(_, v)| v.parse().unwrap());
            Ok(PfmEncoding {
                pmu_type: 4,
                config: 0x1cd,
                config1: ldlat,
                config2: 0,
                name: event.into(),
            })
        }
    }

    #[test]
    fn resolution_says_which_cpu_and_why_not() {
        let e = libpfm_event(&Fake("skx"), Counter::UncoreOccupancy).unwrap();
        assert_eq!(
            e.what,
            "skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1"
        );
        assert_eq!(
            e.source(),
            "libpfm4 skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1 = config 0x1cd"
        );
        let why = libpfm_event(&Fake("amd64_fam19h_zen4"), Counter::UncoreOccupancy).unwrap_err();
        assert!(
            why.starts_with("not on AMD Zen 4 (amd64_fam19h_zen4): ALLOC_MAB_COUNT"),
            "{why}"
        );
        let why = libpfm_event(&Fake("knl"), Counter::Cycles).unwrap_err();
        assert!(
            why.contains("PMU knl") && why.contains("wsm_dp, wsm, skx"),
            "{why}"
        );
        let why = libpfm_event(&NoEncoder("gone".into()), Counter::Cycles).unwrap_err();
        assert_eq!(why, "gone");
        assert!(libpfm_event(&Fake("skx"), Counter::PageFaults).is_err());
    }

    #[test]
    fn load_latency_carries_the_threshold_and_the_aux_leader() {
        let (ev, aux) = libpfm_load_latency(&Fake("icx"), 30).unwrap();
        assert_eq!((ev.config1, aux), (30, None));
        assert_eq!(ev.what, "icx::MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30");
        let (_, aux) = libpfm_load_latency(&Fake("spr"), 3).unwrap();
        assert_eq!(aux.unwrap().config, 0x8203);
        let why = libpfm_load_latency(&Fake("amd64_fam17h_zen2"), 3).unwrap_err();
        assert!(why.contains("IBS"), "{why}");
    }

    #[test]
    fn each_pmu_has_one_entry() {
        let all = known_pmus();
        for p in &all {
            assert_eq!(all.iter().filter(|q| *q == p).count(), 1, "{p} twice");
            assert!(cpu_events(p).is_some());
        }
        assert!(cpu_events("skl").is_none());
        assert_eq!(cpu_events("clx").unwrap().cpu, "Intel Cascade Lake");
    }

    #[test]
    fn every_hardware_counter_has_an_event_or_a_reason() {
        for cpu in &CPUS {
            for c in Counter::HARDWARE.iter().chain(&Counter::UNCORE) {
                match cpu.for_counter(*c) {
                    Some(Choice::Event { name, .. }) => {
                        assert!(
                            !name.is_empty() && !name.contains("::") && !name.contains(' '),
                            "{}: {name}",
                            cpu.cpu
                        )
                    }
                    Some(Choice::Absent(why)) => assert!(why.len() > 20, "{}", cpu.cpu),
                    None => panic!("{} has no choice for {c:?}", cpu.cpu),
                }
            }
            assert_eq!(cpu.for_counter(Counter::TaskClock), None);
        }
    }

    #[test]
    fn the_uncore_pair_is_whole_or_explained() {
        // Zen 3/4 count requests but not occupancy: the reason must say why
        // the closest event does not mean t'.
        let zen3 = cpu_events("amd64_fam19h_zen3").unwrap();
        let Choice::Absent(why) = zen3.occupancy else {
            panic!("zen3 occupancy should be refused")
        };
        assert!(why.contains("divided by 4"), "{why}");
        let wsm = cpu_events("wsm_dp").unwrap();
        assert!(matches!(wsm.occupancy, Choice::Event { name, .. } if name.ends_with(":c=1")));
        assert!(cpu_events("spr").unwrap().load_latency_aux.is_some());
        assert!(matches!(
            cpu_events("amd64_fam10h_barcelona").unwrap().load_latency,
            Choice::Absent(_)
        ));
    }
}
