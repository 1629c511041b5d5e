use std::path::Path;

use super::*;

/// A fake PMU: `(name, type, formats, events)`.
type FakePmu = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
);

/// A fake sysfs tree of PMUs.
fn tree(pmus: &[FakePmu]) -> (tempfile::TempDir, SysRoot) {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
    for (name, ty, formats, events) in pmus {
        let base = dir.path().join(EVENT_SOURCE_DIR).join(name);
        fs::create_dir_all(base.join("format")).unwrap();
        fs::create_dir_all(base.join("events")).unwrap();
        fs::write(base.join("type"), format!("{ty}\n")).unwrap();
        for (f, text) in *formats {
            fs::write(base.join("format").join(f), format!("{text}\n")).unwrap();
        }
        for (e, text) in *events {
            fs::write(base.join("events").join(e), format!("{text}\n")).unwrap();
        }
    }
    let root = SysRoot::new(dir.path()).unwrap();
    (dir, root)
}

const INTEL_FORMATS: &[(&str, &str)] = &[
    ("event", "config:0-7"),
    ("umask", "config:8-15"),
    ("edge", "config:18"),
    ("inv", "config:23"),
    ("cmask", "config:24-31"),
    ("in_tx", "config:32"),
    ("ldlat", "config1:0-15"),
    ("offcore_rsp", "config1:0-63"),
];

const AMD_FORMATS: &[(&str, &str)] = &[
    ("event", "config:0-7,32-35"),
    ("umask", "config:8-15"),
    ("edge", "config:18"),
    ("inv", "config:23"),
    ("cmask", "config:24-31"),
];

/// No libpfm4: these tests check what sysfs and the user give.
fn no_pfm() -> crate::perf::libpfm::NoEncoder {
    crate::perf::libpfm::NoEncoder("libpfm4 is not asked in this test".into())
}

const SOFTWARE: FakePmu = ("software", "1", &[], &[]);

#[test]
fn parses_formats_including_split_ranges() {
    assert_eq!(
        parse_format("config:0-7\n").unwrap(),
        FormatField {
            word: ConfigWord::Config,
            ranges: vec![(0, 7)]
        }
    );
    assert_eq!(
        parse_format("config1:0-15").unwrap().word,
        ConfigWord::Config1
    );
    let single = parse_format("config:21").unwrap();
    assert_eq!((single.ranges.clone(), single.width()), (vec![(21, 21)], 1));
    let split = parse_format("config:0-7,32-35").unwrap();
    assert_eq!(split.width(), 12);
    assert_eq!(split.place(0x1a5), Some(0x1_0000_00a5));
    assert_eq!(split.place(0xfff), Some(0xf_0000_00ff));
    assert_eq!(split.place(0x1000), None);
    let full = parse_format("config1:0-63").unwrap();
    assert_eq!(full.place(u64::MAX), Some(u64::MAX));
    for bad in [
        "config",
        "confog:0-7",
        "config:7-0",
        "config:0-64",
        "config:a-b",
        "config:",
    ] {
        assert!(parse_format(bad).is_err(), "{bad}");
    }
}

#[test]
fn parses_terms() {
    let t = parse_terms("event=0x60,umask=0x08,cmask=1\n").unwrap();
    assert_eq!(
        t,
        vec![
            Term {
                name: "event".into(),
                value: 0x60
            },
            Term {
                name: "umask".into(),
                value: 8
            },
            Term {
                name: "cmask".into(),
                value: 1
            },
        ]
    );
    assert_eq!(parse_terms("event=0x3c, edge").unwrap()[1].value, 1);
    for bad in [
        "",
        "event=",
        "event=0xzz",
        "event=1,event=2",
        "config=?",
        "a b=1",
        "x,,y",
    ] {
        assert!(parse_terms(bad).is_err(), "{bad:?}");
    }
    let t = with_term(parse_terms("event=0x60,cmask=4").unwrap(), "cmask", 1);
    assert_eq!(t[1].value, 1);
    assert_eq!(with_term(Vec::new(), "cmask", 1).len(), 1);
    assert_eq!(
        split_pmu("cpu/event=1,umask=2/", "x"),
        ("cpu", "event=1,umask=2")
    );
    assert_eq!(split_pmu("event=1", "cpu"), ("cpu", "event=1"));
}

#[test]
fn resolves_intel_like_events_by_name() {
    let (_d, root) = tree(&[
        (
            "cpu",
            "4",
            INTEL_FORMATS,
            &[
                ("cpu-cycles", "event=0x3c"),
                ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
                (
                    "offcore_requests_outstanding.cycles_with_demand_data_rd",
                    "event=0x60,umask=0x01,cmask=1",
                ),
                ("offcore_requests.demand_data_rd", "event=0xb0,umask=0x01"),
            ],
        ),
        SOFTWARE,
    ]);
    let r = EventResolver::new(&root);
    assert_eq!(r.pmus().unwrap(), vec!["cpu", "software"]);
    let cpu = r.pmu("cpu").unwrap();
    assert_eq!(cpu.pmu_type, 4);
    let loads = r.named_event(&cpu, "mem-loads", &[]).unwrap().unwrap();
    assert_eq!((loads.config, loads.config1), (0x01cd, 3));
    assert_eq!(r.named_event(&cpu, "absent", &[]).unwrap(), None);

    let u = resolve_uncore(&root, &UncoreEncodings::default(), &no_pfm());
    let occ = u.occupancy.unwrap();
    assert_eq!((occ.pmu_type, occ.config), (4, 0x0100_0160));
    assert_eq!(
        occ.what,
        "cpu/offcore_requests_outstanding.cycles_with_demand_data_rd/"
    );
    assert_eq!(u.requests.unwrap().config, 0x01b0);
}

#[test]
fn falls_back_to_occupancy_with_cmask() {
    let (_d, root) = tree(&[(
        "cpu_core",
        "8",
        INTEL_FORMATS,
        &[(
            "offcore_requests_outstanding.demand_data_rd",
            "event=0x60,umask=0x01,cmask=4",
        )],
    )]);
    let u = resolve_uncore(&root, &UncoreEncodings::default(), &no_pfm());
    let occ = u.occupancy.unwrap();
    assert_eq!((occ.pmu_type, occ.config), (8, 0x0100_0160));
    assert!(occ.what.ends_with(",cmask=1/"), "{}", occ.what);
    let why = u.requests.unwrap_err();
    assert!(why.contains("offcore_requests.demand_data_rd"), "{why}");
    assert!(why.contains("give the encoding"), "{why}");
}

#[test]
fn resolves_amd_like_events_with_split_event_field() {
    let (_d, root) = tree(&[(
        "cpu",
        "4",
        AMD_FORMATS,
        &[
            ("ls_alloc_mab_count", "event=0x5f"),
            ("ls_mab_alloc.all_allocations", "event=0x41,umask=0x7f"),
        ],
    )]);
    let u = resolve_uncore(&root, &UncoreEncodings::default(), &no_pfm());
    // ls_alloc_mab_count counts misses in flight / 4: with cmask=1 it is
    // not t', so it is no candidate.
    let why = u.occupancy.unwrap_err();
    assert!(!why.contains("ls_alloc_mab_count"), "{why}");
    assert_eq!(u.requests.unwrap().config, 0x7f41);
    let cpu = EventResolver::new(&root).pmu("cpu").unwrap();
    // An extended (12-bit) AMD event number lands in bits 32-35.
    let t = parse_terms("event=0x1a5,umask=2").unwrap();
    assert_eq!(cpu.encode(&t).unwrap(), [0x1_0000_02a5, 0, 0]);
    let t = parse_terms("event=0x1000").unwrap();
    let e = cpu.encode(&t).unwrap_err();
    assert!(e.to_string().contains("12 bits"), "{e}");
}

#[test]
fn generic_only_kernel_reports_the_uncore_pair_unavailable() {
    let (_d, root) = tree(&[("cpu", "4", INTEL_FORMATS, &[("cpu-cycles", "event=0x3c")])]);
    let u = resolve_uncore(&root, &UncoreEncodings::default(), &no_pfm());
    assert!(
        u.occupancy
            .unwrap_err()
            .contains("kernels list only generic events")
    );

    // The user's encoding is checked against the format files.
    let given = UncoreEncodings {
        occupancy: Some("event=0x60,umask=0x01,cmask=1".into()),
        requests: Some("cpu/event=0xb0,umask=0x01,bogus=3/".into()),
    };
    let u = resolve_uncore(&root, &given, &no_pfm());
    assert_eq!(u.occupancy.unwrap().config, 0x0100_0160);
    let why = u.requests.unwrap_err();
    assert!(
        why.contains("\"bogus\" is not in this PMU's format"),
        "{why}"
    );
    assert!(why.contains("cmask"), "lists the known fields: {why}");
}

#[test]
fn no_core_pmu_is_said_plainly() {
    // This VM: only software-ish PMUs.
    let (_d, root) = tree(&[
        SOFTWARE,
        (
            "msr",
            "9",
            &[("event", "config:0-63")],
            &[("tsc", "event=0x00")],
        ),
    ]);
    let u = resolve_uncore(&root, &UncoreEncodings::default(), &no_pfm());
    let why = u.occupancy.unwrap_err();
    assert!(
        why.contains("no core PMU") && why.contains("msr, software"),
        "{why}"
    );
    let e = EventResolver::new(&root)
        .encoding("event=1", "cpu")
        .unwrap_err();
    assert!(e.to_string().contains("no PMU \"cpu\""), "{e}");
}

#[test]
fn bad_files_are_errors_with_their_path() {
    let (d, root) = tree(&[(
        "cpu",
        "four",
        &[
            ("event", "config:0-7"),
            ("weird", "conf:0-7"),
            ("hi", "config3:0-7"),
        ],
        &[
            ("broken", "event=0xzz"),
            ("uses_weird", "weird=1"),
            ("uses_hi", "hi=1"),
        ],
    )]);
    let r = EventResolver::new(&root);
    let e = r.pmu("cpu").unwrap_err();
    assert!(e.to_string().contains("not a PMU type number"), "{e}");
    fs::write(d.path().join(EVENT_SOURCE_DIR).join("cpu/type"), "4").unwrap();
    let cpu = r.pmu("cpu").unwrap();
    assert!(cpu.bad_formats.contains_key("weird"));
    let e = r.named_event(&cpu, "broken", &[]).unwrap_err();
    assert!(
        e.to_string()
            .contains(&Path::new("events/broken").display().to_string()),
        "{e}"
    );
    let e = r.named_event(&cpu, "uses_weird", &[]).unwrap_err();
    assert!(e.to_string().contains("unreadable format file"), "{e}");
    let e = r.named_event(&cpu, "uses_hi", &[]).unwrap_err();
    assert!(e.to_string().contains("config3"), "{e}");
    // A broken description of a candidate is reported, not silently skipped.
    fs::write(
        d.path()
            .join(EVENT_SOURCE_DIR)
            .join("cpu/events/offcore_requests.demand_data_rd"),
        "event=?",
    )
    .unwrap();
    let why = resolve_uncore(&root, &UncoreEncodings::default(), &no_pfm())
        .requests
        .unwrap_err();
    assert!(
        why.contains("unusable descriptions") && why.contains("needs a parameter"),
        "{why}"
    );
}

#[test]
fn this_host_resolves_without_error() {
    // Whatever this machine has, resolving reports (never panics or fails).
    let u = resolve_uncore(&SysRoot::host(), &UncoreEncodings::default(), &no_pfm());
    for c in Counter::UNCORE {
        match u.get(c).unwrap() {
            Ok(ev) => assert!(!ev.what.is_empty()),
            Err(why) => assert!(!why.is_empty()),
        }
    }
}

/// libpfm4 as it would answer on a Skylake-SP (values: Intel's
/// SKX/events/skylakex_core.json, as tests/libpfm_cpus.rs checks them).
fn skx() -> crate::perf::libpfm::FakeEncoder {
    crate::perf::libpfm::FakeEncoder {
        pmu: "skx",
        events: vec![
            (
                "skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1",
                0x0100_0160,
                0,
            ),
            ("skx::OFFCORE_REQUESTS:DEMAND_DATA_RD", 0x01b0, 0),
        ],
    }
}

#[test]
fn the_users_encoding_then_sysfs_then_libpfm4() {
    let (_d, root) = tree(&[(
        "cpu",
        "4",
        INTEL_FORMATS,
        &[("offcore_requests.demand_data_rd", "event=0xb0,umask=0x01")],
    )]);
    let given = UncoreEncodings {
        occupancy: None,
        requests: Some("event=0xb0,umask=0x11".into()),
    };
    // The user's encoding wins over sysfs; sysfs' name is used where the
    // user gives none; libpfm4 only where neither has the event.
    let u = resolve_uncore(&root, &given, &skx());
    let req = u.requests.unwrap();
    assert_eq!(req.config, 0x11b0);
    assert_eq!(
        req.source(),
        "the configured encoding event=0xb0,umask=0x11 = config 0x11b0"
    );
    let occ = u.occupancy.unwrap();
    assert_eq!(
        occ.source(),
        "libpfm4 skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1 = config 0x1000160"
    );
    assert_eq!(
        occ.what,
        "skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1"
    );

    let u = resolve_uncore(&root, &UncoreEncodings::default(), &skx());
    let req = u.requests.unwrap();
    let file = root
        .join(EVENT_SOURCE_DIR)
        .join("cpu/events/offcore_requests.demand_data_rd");
    assert_eq!(req.origin, EventOrigin::Sysfs { path: file.clone() });
    assert_eq!(
        req.source(),
        format!("sysfs {} = config 0x1b0", file.display())
    );
}

#[test]
fn without_libpfm4_the_reason_says_to_install_it() {
    let (_d, root) = tree(&[("cpu", "4", INTEL_FORMATS, &[("cpu-cycles", "event=0x3c")])]);
    let missing = crate::perf::libpfm::NoEncoder(format!(
        "{} (dlopen libpfm.so.4: not found)",
        crate::perf::LIBPFM_MISSING
    ));
    let why = resolve_uncore(&root, &UncoreEncodings::default(), &missing)
        .occupancy
        .unwrap_err();
    assert!(
        why.contains("and libpfm4 not found: install Debian's libpfm4 for model-specific events"),
        "{why}"
    );
    // A CPU libpfm4 knows, without the event: the reason is the CPU's.
    let zen3 = crate::perf::libpfm::FakeEncoder {
        pmu: "amd64_fam19h_zen3",
        events: vec![],
    };
    let why = resolve_uncore(&root, &UncoreEncodings::default(), &zen3)
        .occupancy
        .unwrap_err();
    assert!(
        why.contains("not on AMD Zen 3") && why.contains("divided by 4"),
        "{why}"
    );
    // No core PMU in sysfs: libpfm4's encoding could not be opened anyway.
    let (_d, vm) = tree(&[SOFTWARE]);
    let why = resolve_uncore(&vm, &UncoreEncodings::default(), &skx())
        .occupancy
        .unwrap_err();
    assert!(why.starts_with("no core PMU"), "{why}");
}
