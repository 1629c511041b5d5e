//! The events numaplace asks libpfm4 for, encoded for CPUs this machine is
//! not: each CPU's PMU is forced with `LIBPFM_FORCE_PMU`, which libpfm4
//! reads once, in `pfm_initialize`, so each runs in its own process (this
//! test binary again, running [`one_forced_pmu`] alone). The encodings are
//! checked against the vendors' published event and unit-mask values, each
//! with its source.
//!
//! Needs Debian's libpfm4 (setup.sh installs it): without it the child
//! says "libpfm4 not found" and the test fails.

use std::collections::BTreeMap;
use std::process::Command;

use numaplace_linux::perf::host_encoder;
use numaplace_linux::perf::libpfm_events::{libpfm_event, libpfm_load_latency};
use numaplace_model::Counter;

/// The threshold the children encode load latency with (cycles).
const LDLAT: u64 = 30;

/// `IA32_PERFEVTSELx` (Intel SDM vol. 3B, "Architectural Performance
/// Monitoring Version 1": event select bits 0-7, unit mask 8-15, counter
/// mask 24-31) and AMD's `PERF_CTL` (AMD64 APM vol. 2, "Performance
/// Event-Select Registers": the same, with event select bits 11:8 in bits
/// 35:32). perf's `config` is this register without the enable and
/// privilege bits.
fn sel(event: u64, umask: u64, cmask: u64) -> u64 {
    (event & 0xff) | ((event >> 8) << 32) | (umask << 8) | (cmask << 24)
}

/// What one counter must come out as on one CPU.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// `config` (and `config1`, the load-latency threshold).
    Config(u64, u64),
    /// No event: the reason contains this.
    Absent(&'static str),
}
use Want::{Absent, Config};

fn config(event: u64, umask: u64, cmask: u64) -> Want {
    Config(sel(event, umask, cmask), 0)
}

/// One forced PMU and what its encodings must be; keys are
/// `Counter::name()`, `load_latency` and `load_latency_aux`.
fn check(pmu: &str, want: &[(&str, Want)]) {
    let got = run_child(pmu);
    for (key, w) in want {
        let line = got
            .get(*key)
            .unwrap_or_else(|| panic!("{pmu}: the child printed no {key}: {got:?}"));
        match (w, line) {
            (Config(config, config1), Ok((ty, c, c1, source))) => {
                assert_eq!(
                    (*c, *c1),
                    (*config, *config1),
                    "{pmu} {key}: got config {c:#x}/{c1:#x}, want {config:#x}/{config1:#x} \
                     ({source})"
                );
                // PERF_TYPE_RAW: a core event.
                assert_eq!(*ty, 4, "{pmu} {key}: {source}");
                // Where it came from, for `numaplace doctor`.
                assert!(
                    source.starts_with(&format!("libpfm4 {pmu}::"))
                        && source.contains(&format!(" = config {c:#x}")),
                    "{pmu} {key}: {source}"
                );
            }
            (Absent(part), Err(why)) => {
                assert!(why.contains(part), "{pmu} {key}: {why:?} lacks {part:?}")
            }
            (w, got) => panic!("{pmu} {key}: want {w:?}, got {got:?}"),
        }
    }
}

type Line = Result<(u32, u64, u64, String), String>;

/// Runs [`one_forced_pmu`] in a child with `LIBPFM_FORCE_PMU=pmu` and
/// parses what it printed.
fn run_child(pmu: &str) -> BTreeMap<String, Line> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name!("one_forced_pmu"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LIBPFM_FORCE_PMU", pmu)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the child for {pmu} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got = BTreeMap::new();
    let mut core = None;
    for line in stdout.lines() {
        // The harness may print "test one_forced_pmu ... " before the
        // first line.
        let Some((_, rest)) = line.split_once("NP|") else {
            continue;
        };
        let f: Vec<&str> = rest.splitn(6, '|').collect();
        if f[0] == "core_pmu" {
            core = f.get(1).map(|s| s.to_string());
            continue;
        }
        let parsed = match f[1] {
            "ok" => Ok((
                f[2].parse().unwrap(),
                u64::from_str_radix(f[3], 16).unwrap(),
                u64::from_str_radix(f[4], 16).unwrap(),
                f[5].to_owned(),
            )),
            _ => Err(f[2..].join("|")),
        };
        got.insert(f[0].to_owned(), parsed);
    }
    assert!(
        core.as_deref() == Some(pmu),
        "libpfm4 was forced to {pmu} but reports {core:?}: {stdout}"
    );
    got
}

/// The child: encodes every counter for the forced PMU and prints one line
/// each. Run by the tests below, one PMU per process.
#[test]
#[ignore = "a child process of the forced-PMU tests (needs LIBPFM_FORCE_PMU)"]
fn one_forced_pmu() {
    let forced = std::env::var("LIBPFM_FORCE_PMU")
        .expect("run by the forced-PMU tests of this file, with LIBPFM_FORCE_PMU set");
    let enc = host_encoder();
    let core = enc
        .core_pmu()
        .unwrap_or_else(|why| panic!("{forced}: {why}"));
    println!("NP|core_pmu|{core}");
    let print = |key: &str, r: Result<(u32, u64, u64, String), String>| match r {
        Ok((ty, c, c1, source)) => println!("NP|{key}|ok|{ty}|{c:x}|{c1:x}|{source}"),
        Err(why) => println!("NP|{key}|absent|{}", why.replace('\n', " ")),
    };
    for c in Counter::HARDWARE.iter().chain(&Counter::UNCORE) {
        let r = libpfm_event(enc, *c).map(|e| (e.pmu_type, e.config, e.config1, e.source()));
        print(c.name(), r);
    }
    match libpfm_load_latency(enc, LDLAT) {
        Ok((ev, aux)) => {
            print(
                "load_latency",
                Ok((ev.pmu_type, ev.config, ev.config1, ev.source())),
            );
            let aux = aux
                .map(|a| (a.pmu_type, a.config, a.config1, a.source()))
                .ok_or_else(|| "no aux event".to_owned());
            print("load_latency_aux", aux);
        }
        Err(why) => print("load_latency", Err(why)),
    }
}

// Intel: github.com/intel/perfmon, the core event files named per test
// (EventCode, UMask, CounterMask; the load-latency threshold is MSR 0x3F6,
// which perf takes in config1 through the PMU's `ldlat` format field).

#[test]
fn westmere_ep_encodes_the_super_queue_pair_of_seed_000() {
    // WSM-EP-DP/events/WestmereEP-DP_core.json
    check(
        "wsm_dp",
        &[
            // OFFCORE_REQUESTS_OUTSTANDING.DEMAND.READ_DATA_NOT_EMPTY: 0x60, 0x01, cmask 1
            ("uncore_occupancy", config(0x60, 0x01, 1)),
            // OFFCORE_REQUESTS.DEMAND.READ_DATA: 0xB0, 0x01
            ("uncore_requests", config(0xb0, 0x01, 0)),
            // LONGEST_LAT_CACHE.REFERENCE / .MISS: 0x2E, 0x4F / 0x41
            ("llc_references", config(0x2e, 0x4f, 0)),
            ("llc_misses", config(0x2e, 0x41, 0)),
            // CPU_CLK_UNHALTED.THREAD_P: 0x3C, 0x00
            ("cycles", config(0x3c, 0x00, 0)),
            // The architectural Instruction Retired, C0H/00H (SDM vol. 3B,
            // "Pre-defined Architectural Performance Events").
            ("instructions", config(0xc0, 0x00, 0)),
            // MEM_INST_RETIRED.LATENCY_ABOVE_THRESHOLD_32 etc.: 0x0B, 0x10
            ("load_latency", Config(sel(0x0b, 0x10, 0), LDLAT)),
            ("load_latency_aux", Absent("no aux")),
        ],
    );
}

/// Skylake-SP and Cascade Lake list the same values.
fn skylake_sp_values() -> Vec<(&'static str, Want)> {
    vec![
        // OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_DEMAND_DATA_RD: 0x60, 0x01, cmask 1
        ("uncore_occupancy", config(0x60, 0x01, 1)),
        // OFFCORE_REQUESTS.DEMAND_DATA_RD: 0xB0, 0x01
        ("uncore_requests", config(0xb0, 0x01, 0)),
        // LONGEST_LAT_CACHE.REFERENCE / .MISS: 0x2E, 0x4F / 0x41
        ("llc_references", config(0x2e, 0x4f, 0)),
        ("llc_misses", config(0x2e, 0x41, 0)),
        // INST_RETIRED.ANY_P: 0xC0, 0x00; CPU_CLK_UNHALTED.THREAD_P: 0x3C, 0x00
        ("instructions", config(0xc0, 0x00, 0)),
        ("cycles", config(0x3c, 0x00, 0)),
        // MEM_TRANS_RETIRED.LOAD_LATENCY_GT_32 etc.: 0xCD, 0x01, MSR 0x3F6
        ("load_latency", Config(sel(0xcd, 0x01, 0), LDLAT)),
        ("load_latency_aux", Absent("no aux")),
    ]
}

#[test]
fn skylake_sp_encodes_as_intel_publishes() {
    // SKX/events/skylakex_core.json
    check("skx", &skylake_sp_values());
}

#[test]
fn cascade_lake_encodes_as_intel_publishes() {
    // CLX/events/cascadelakex_core.json
    check("clx", &skylake_sp_values());
}

#[test]
fn ice_lake_sp_encodes_as_intel_publishes() {
    // ICX/events/icelakex_core.json
    let mut want = skylake_sp_values();
    // OFFCORE_REQUESTS_OUTSTANDING.DEMAND_DATA_RD: 0x60, 0x01 (Ice Lake
    // lists no CYCLES_WITH_ variant; cmask 1 makes it one).
    want[0] = ("uncore_occupancy", config(0x60, 0x01, 1));
    // Intel lists LONGEST_LAT_CACHE.REFERENCE (0x2E, 0x4F); libpfm4 4.13's
    // icx table does not, and numaplace says so.
    want[2] = (
        "llc_references",
        Absent("icx table has no LONGEST_LAT_CACHE:REFERENCE"),
    );
    check("icx", &want);
}

#[test]
fn sapphire_rapids_pairs_all_data_reads_and_leads_with_mem_loads_aux() {
    // SPR/events/sapphirerapids_core.json
    let mut want = skylake_sp_values();
    // OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_DATA_RD: 0x20, 0x08, cmask 1
    want[0] = ("uncore_occupancy", config(0x20, 0x08, 1));
    // OFFCORE_REQUESTS.DATA_RD: 0x21, 0x08
    want[1] = ("uncore_requests", config(0x21, 0x08, 0));
    // LD_BLOCKS.STORE_FORWARD: 0x03, 0x82, which is the kernel's
    // mem-loads-aux (linux arch/x86/events/intel/core.c).
    want[7] = ("load_latency_aux", config(0x03, 0x82, 0));
    check("spr", &want);
}

// AMD.

#[test]
fn amd_family_10h_has_no_occupancy_and_counts_l2_like_the_kernel() {
    // BKDG for AMD Family 10h Processors (31116): EventSelect 07Eh "L2
    // Cache Misses", unit mask 02h "DC fill". The kernel's generic events
    // for K7 to family 16h (linux arch/x86/events/amd/core.c,
    // amd_perfmon_event_map): cycles 0x0076, instructions 0x00c0,
    // cache-references 0x077d, cache-misses 0x077e.
    let want = [
        (
            "uncore_occupancy",
            Absent("no miss-address-buffer occupancy"),
        ),
        ("uncore_requests", config(0x7e, 0x02, 0)),
        ("llc_references", config(0x7d, 0x07, 0)),
        ("llc_misses", config(0x7e, 0x07, 0)),
        ("instructions", config(0xc0, 0x00, 0)),
        ("cycles", config(0x76, 0x00, 0)),
        ("load_latency", Absent("IBS op")),
    ];
    check("amd64_fam10h_barcelona", &want);
    check("amd64_fam10h_istanbul", &want);
}

#[test]
fn zen2_counts_mab_allocations_by_loads() {
    // linux tools/perf/pmu-events/arch/x86/amdzen2/memory.json:
    // ls_mab_alloc.loads 0x41/0x01, ls_not_halted_cyc 0x76; instructions
    // 0x00c0 (amd_f17h_perfmon_event_map, linux arch/x86/events/amd/core.c).
    check(
        "amd64_fam17h_zen2",
        &[
            ("uncore_occupancy", Absent("Zen 2 lists no count")),
            ("uncore_requests", config(0x41, 0x01, 0)),
            ("llc_references", Absent("amd_l3")),
            ("llc_misses", Absent("amd_l3")),
            ("instructions", config(0xc0, 0x00, 0)),
            ("cycles", config(0x76, 0x00, 0)),
            ("load_latency", Absent("IBS op")),
        ],
    );
}

/// Zen 3 and Zen 4: ls_mab_alloc.load_store_allocations 0x41/0x3f (linux
/// tools/perf/pmu-events/arch/x86/amdzen3/memory.json,
/// amdzen4/cache.json); ls_alloc_mab_count counts in-flight misses / 4
/// (the same files), so no occupancy.
fn zen34_values() -> [(&'static str, Want); 7] {
    [
        ("uncore_occupancy", Absent("divided by 4")),
        ("uncore_requests", config(0x41, 0x3f, 0)),
        ("llc_references", Absent("amd_l3")),
        ("llc_misses", Absent("amd_l3")),
        ("instructions", config(0xc0, 0x00, 0)),
        ("cycles", config(0x76, 0x00, 0)),
        ("load_latency", Absent("IBS op")),
    ]
}

#[test]
fn zen3_counts_load_store_mab_allocations() {
    check("amd64_fam19h_zen3", &zen34_values());
}

#[test]
fn zen4_counts_load_store_mab_allocations() {
    check("amd64_fam19h_zen4", &zen34_values());
}

#[test]
fn a_pmu_without_an_entry_is_named_with_the_known_ones() {
    // Skylake client: libpfm4 knows it, numaplace lists no events for it.
    let got = run_child("skl");
    let why = got["uncore_occupancy"].clone().unwrap_err();
    assert!(
        why.contains("PMU skl") && why.contains("wsm_dp, wsm, skx"),
        "{why}"
    );
}
