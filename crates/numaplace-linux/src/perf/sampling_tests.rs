use std::fs;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::*;
use crate::testutil::AnonMapping;

/// No libpfm4: these tests check what sysfs gives.
fn no_pfm() -> crate::perf::libpfm::NoEncoder {
    crate::perf::libpfm::NoEncoder("libpfm4 is not asked in this test".into())
}

// ---------------------------------------------------------------- records

/// A sample body: `u64` words, with `(pid, tid)` packed as the kernel does.
fn body(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

fn pid_tid(pid: u32, tid: u32) -> u64 {
    u64::from_ne_bytes(
        [pid.to_ne_bytes(), tid.to_ne_bytes()]
            .concat()
            .try_into()
            .unwrap(),
    )
}

#[test]
fn parses_sample_bodies_in_the_kernels_field_order() {
    use bits::*;
    let b = body(&[pid_tid(10, 11), 0x7f00_1234_5678]);
    assert_eq!(
        parse_sample(TID | ADDR, &b),
        Some(ParsedSample {
            pid: 10,
            tid: 11,
            addr: 0x7f00_1234_5678,
            data_src: None
        })
    );
    // IBS-style: a store in data_src.mem_op.
    let b = body(&[pid_tid(1, 2), 0x1000, 0x0000_0004]);
    let s = parse_sample(TID | ADDR | DATA_SRC, &b).unwrap();
    assert_eq!((s.addr, s.data_src, s.write()), (0x1000, Some(4), true));
    let load = body(&[pid_tid(1, 2), 0x1000, 0x0000_0002 | (0x2 << 5)]);
    assert!(!parse_sample(TID | ADDR | DATA_SRC, &load).unwrap().write());
    // Fixed-size fields before and between are skipped: identifier, ip,
    // time, id, stream id, cpu, period, weight.
    let all = IDENTIFIER | IP | TID | TIME | ADDR | ID | STREAM_ID | CPU | PERIOD | WEIGHT;
    let b = body(&[
        99,
        0x40_1000,
        pid_tid(7, 8),
        123_456,
        0xdead_b000,
        5,
        6,
        3,
        1000,
        42,
        0x4,
    ]);
    let s = parse_sample(all | DATA_SRC, &b).unwrap();
    assert_eq!(
        (s.pid, s.tid, s.addr, s.data_src),
        (7, 8, 0xdead_b000, Some(4))
    );
    // Too short, and variable-length fields before data_src: refused.
    assert_eq!(parse_sample(TID | ADDR | DATA_SRC, &b[..16]), None);
    assert_eq!(parse_sample(TID | ADDR, &b[..12]), None);
    assert_eq!(parse_sample(TID | ADDR | CALLCHAIN, &b), None);
    // No data_src: never a store.
    assert!(!parse_sample(TID | ADDR, &b).unwrap().write());
}

#[test]
fn spreading_keeps_evenly_spaced_samples() {
    let v: Vec<u32> = (0..100).collect();
    assert_eq!(spread(&v, 200), v);
    assert_eq!(spread(&v, 4), vec![0, 25, 50, 75]);
    assert!(spread(&v, 0).is_empty());
}

// ----------------------------------------------------------------- sysfs

/// `(pmu, type, formats, events)`.
type FakePmu<'a> = (
    &'a str,
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
);

fn tree(pmus: &[FakePmu<'_>]) -> (tempfile::TempDir, SysRoot) {
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
    ("cmask", "config:24-31"),
    ("ldlat", "config1:0-15"),
];
const MEM_LOADS: (&str, &str) = ("mem-loads", "event=0xcd,umask=0x1,ldlat=3");
const IBS_FORMATS: &[(&str, &str)] = &[("rand_en", "config:57"), ("cnt_ctl", "config:19")];

fn facts(root: &SysRoot, hypervisor: bool) -> HostFacts {
    HostFacts {
        paranoid: Some(2),
        pmus: EventResolver::new(root).pmus().unwrap(),
        hypervisor,
    }
}

#[test]
fn mem_loads_comes_from_sysfs_with_its_ldlat() {
    let (_d, root) = tree(&[
        ("cpu", "4", INTEL_FORMATS, &[MEM_LOADS]),
        ("software", "1", &[], &[]),
    ]);
    let host = facts(&root, false);
    let ev = choose_event(&root, None, None, &host, &no_pfm()).unwrap();
    assert_eq!(ev.source, SampleSource::PebsLoads);
    assert_eq!(ev.what, "cpu/mem-loads/");
    let raw = ev.event.unwrap();
    assert_eq!(
        (raw.pmu_type, raw.config, raw.config1, raw.config2),
        (4, 0x01cd, 3, 0)
    );
    assert_eq!(ev.aux, None);
    // A threshold of our own replaces sysfs'.
    let ev = resolve_event(&root, SampleSource::PebsLoads, Some(30), &host, &no_pfm()).unwrap();
    assert_eq!(ev.what, "cpu/mem-loads,ldlat=30/");
    assert_eq!(ev.event.unwrap().config1, 30);
    // Too wide for the 16-bit field: said, not truncated.
    let e = resolve_event(
        &root,
        SampleSource::PebsLoads,
        Some(1 << 20),
        &host,
        &no_pfm(),
    )
    .unwrap_err();
    assert!(e.contains("unusable") && e.contains("ldlat"), "{e}");
}

#[test]
fn mem_loads_aux_leads_where_listed_and_hybrid_uses_cpu_core() {
    let (_d, root) = tree(&[
        (
            "cpu_core",
            "8",
            INTEL_FORMATS,
            &[MEM_LOADS, ("mem-loads-aux", "event=0x03,umask=0x82")],
        ),
        ("cpu_atom", "10", INTEL_FORMATS, &[]),
    ]);
    let ev = choose_event(&root, None, None, &facts(&root, false), &no_pfm()).unwrap();
    assert_eq!(ev.what, "cpu_core/mem-loads/");
    assert_eq!(ev.event.as_ref().unwrap().pmu_type, 8);
    let aux = ev.aux.unwrap();
    assert_eq!((aux.pmu_type, aux.config), (8, 0x8203));
}

#[test]
fn ibs_op_comes_from_its_pmu_type() {
    let (_d, root) = tree(&[
        ("cpu", "4", INTEL_FORMATS, &[]),
        ("ibs_op", "11", IBS_FORMATS, &[]),
        ("ibs_fetch", "10", &[], &[]),
    ]);
    let host = facts(&root, false);
    // No mem-loads: IBS.
    let ev = choose_event(&root, None, None, &host, &no_pfm()).unwrap();
    assert_eq!(ev.source, SampleSource::IbsOp);
    assert_eq!(ev.what, "ibs_op//");
    let raw = ev.event.unwrap();
    assert_eq!((raw.pmu_type, raw.config, raw.config1), (11, 0, 0));
    // Asked for PEBS explicitly: why not.
    let e = choose_event(&root, Some(SampleSource::PebsLoads), None, &host, &no_pfm()).unwrap_err();
    assert!(
        e.starts_with(
            "no PEBS here: sys/bus/event_source/devices/cpu/events/mem-loads does not exist"
        ),
        "{e}"
    );
    // Both: PEBS first.
    let (_d2, both) = tree(&[
        ("cpu", "4", INTEL_FORMATS, &[MEM_LOADS]),
        ("ibs_op", "11", IBS_FORMATS, &[]),
    ]);
    let ev = choose_event(&both, None, None, &facts(&both, false), &no_pfm()).unwrap();
    assert_eq!(ev.source, SampleSource::PebsLoads);
    let ev = choose_event(
        &both,
        Some(SampleSource::IbsOp),
        None,
        &facts(&both, false),
        &no_pfm(),
    )
    .unwrap();
    assert_eq!(ev.source, SampleSource::IbsOp);
}

#[test]
fn without_mem_loads_in_sysfs_libpfm4_gives_pebs_and_its_aux_leader() {
    // A Sapphire Rapids whose kernel describes no mem-loads: libpfm4's
    // MEM_TRANS_RETIRED:LOAD_LATENCY, led by LD_BLOCKS:STORE_FORWARD (the
    // kernel's mem-loads-aux). Values: Intel's SPR/events/sapphirerapids_core.json.
    let (_d, root) = tree(&[
        ("cpu", "4", INTEL_FORMATS, &[]),
        ("software", "1", &[], &[]),
    ]);
    let spr = crate::perf::libpfm::FakeEncoder {
        pmu: "spr",
        events: vec![
            ("spr::MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=3", 0x01cd, 3),
            ("spr::MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30", 0x01cd, 30),
            ("spr::LD_BLOCKS:STORE_FORWARD", 0x8203, 0),
        ],
    };
    let host = facts(&root, false);
    let ev = choose_event(&root, None, None, &host, &spr).unwrap();
    assert_eq!(ev.source, SampleSource::PebsLoads);
    assert_eq!(ev.what, "spr::MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=3");
    let raw = ev.event.unwrap();
    assert_eq!((raw.config, raw.config1), (0x01cd, 3));
    assert_eq!(ev.aux.unwrap().config, 0x8203);
    let ev = choose_event(&root, None, Some(30), &host, &spr).unwrap();
    assert_eq!(
        ev.event.unwrap().source(),
        "libpfm4 spr::MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30 = config 0x1cd, config1 0x1e"
    );
    // Neither: the reason has both halves.
    let e = resolve_event(&root, SampleSource::PebsLoads, None, &host, &no_pfm()).unwrap_err();
    assert!(
        e.contains("mem-loads does not exist and libpfm4 is not asked"),
        "{e}"
    );
}

#[test]
fn without_pebs_or_ibs_the_reason_says_what_is_missing() {
    // A VM without a virtual PMU (like the machine this was written on).
    let (_d, vm) = tree(&[("breakpoint", "5", &[], &[]), ("software", "1", &[], &[])]);
    let e = choose_event(&vm, None, None, &facts(&vm, true), &no_pfm()).unwrap_err();
    assert!(
        e.starts_with(
            "no PEBS/IBS here: this CPU's PMU is not exposed (the kernel lists only breakpoint, \
             software): a VM without a virtual PMU"
        ),
        "{e}"
    );
    let e = choose_event(&vm, None, None, &facts(&vm, false), &no_pfm()).unwrap_err();
    assert!(e.contains("perf driver does not drive"), "{e}");
    let e = choose_event(
        &vm,
        Some(SampleSource::IbsOp),
        None,
        &facts(&vm, true),
        &no_pfm(),
    )
    .unwrap_err();
    assert!(
        e.starts_with("no IBS here: this CPU's PMU is not exposed"),
        "{e}"
    );

    // A core PMU, but neither mem-loads nor IBS.
    let (_d, bare) = tree(&[("cpu", "4", INTEL_FORMATS, &[("cycles", "event=0x3c")])]);
    let e = choose_event(&bare, None, None, &facts(&bare, true), &no_pfm()).unwrap_err();
    assert!(
        e.starts_with("no PEBS/IBS here: the cpu PMU describes no mem-loads event")
            && e.contains("does not pass them through"),
        "{e}"
    );
    let e = choose_event(
        &bare,
        Some(SampleSource::IbsOp),
        None,
        &facts(&bare, false),
        &no_pfm(),
    )
    .unwrap_err();
    assert!(e.starts_with("no IBS here: there is no"), "{e}");

    // A broken description is reported, not taken for absent.
    let (_d, broken) = tree(&[(
        "cpu",
        "4",
        INTEL_FORMATS,
        &[("mem-loads", "event=0xcd,umask=0x1,ldlat=?")],
    )]);
    let e = choose_event(&broken, None, None, &facts(&broken, false), &no_pfm()).unwrap_err();
    assert!(e.contains("unusable") && e.contains("ldlat"), "{e}");

    // Page faults need nothing from sysfs.
    let ev = choose_event(
        &vm,
        Some(SampleSource::PageFaults),
        None,
        &facts(&vm, true),
        &no_pfm(),
    )
    .unwrap();
    assert_eq!(
        (ev.what.as_str(), ev.event, ev.aux),
        ("page-faults", None, None)
    );
}

#[test]
fn open_failures_are_explained() {
    let ev = |source| SampleEvent {
        source,
        what: "x".into(),
        event: None,
        aux: None,
    };
    let fail = |stage, errno| OpenFailure {
        stage,
        what: "cpu/mem-loads/".into(),
        err: io::Error::from_raw_os_error(errno),
    };
    let metal = HostFacts {
        paranoid: Some(3),
        pmus: vec!["cpu".into(), "software".into()],
        hypervisor: false,
    };
    let vm = HostFacts {
        pmus: vec!["software".into()],
        hypervisor: true,
        ..metal.clone()
    };
    let r = failure_reason(
        &ev(SampleSource::PebsLoads),
        &fail(Stage::Open, libc::EACCES),
        &metal,
    );
    assert!(
        r.starts_with("perf_event_paranoid=3 forbids it") && r.contains("run as root"),
        "{r}"
    );
    let r = failure_reason(
        &ev(SampleSource::PebsLoads),
        &fail(Stage::Open, libc::ENOENT),
        &vm,
    );
    assert!(
        r.starts_with("no PEBS/IBS here: this CPU's PMU is not exposed: perf_event_open"),
        "{r}"
    );
    let r = failure_reason(
        &ev(SampleSource::PebsLoads),
        &fail(Stage::Open, libc::EOPNOTSUPP),
        &HostFacts {
            hypervisor: true,
            ..metal.clone()
        },
    );
    assert!(
        r.starts_with("no PEBS here") && r.contains("PEBS virtualisation"),
        "{r}"
    );
    let r = failure_reason(
        &ev(SampleSource::IbsOp),
        &fail(Stage::Open, libc::EINVAL),
        &metal,
    );
    assert!(r.contains("per CPU only"), "{r}");
    let r = failure_reason(
        &ev(SampleSource::PebsLoads),
        &fail(Stage::Open, libc::ENODATA),
        &metal,
    );
    assert!(r.contains("mem-loads-aux"), "{r}");
    let r = failure_reason(
        &ev(SampleSource::PageFaults),
        &fail(Stage::Map, libc::EPERM),
        &metal,
    );
    assert!(r.contains("perf_event_mlock_kb"), "{r}");
}

// ------------------------------------------------------------ live kernel

/// An anonymous mapping, not yet touched (no huge pages: one fault per
/// base page).
struct Region {
    start: u64,
    len: usize,
    /// Unmapped when the region is dropped.
    _map: AnonMapping,
}

impl Region {
    fn new(pages: usize) -> Region {
        let len = pages * page_size() as usize;
        let map = AnonMapping::new(len);
        map.no_huge_pages();
        Region {
            start: map.start(),
            len,
            _map: map,
        }
    }

    fn contains(&self, a: u64) -> bool {
        (self.start..self.start + self.len as u64).contains(&a)
    }

    fn pages(&self) -> BTreeSet<u64> {
        (0..self.len as u64 / page_size())
            .map(|i| self.start + i * page_size())
            .collect()
    }
}

/// A thread that writes one byte per page of a region on request.
struct Toucher {
    tid: i32,
    cmd: mpsc::Sender<Option<(u64, usize)>>,
    done: mpsc::Receiver<i32>,
    handle: thread::JoinHandle<()>,
}

fn touch(start: u64, len: usize) {
    let ps = page_size() as usize;
    for off in (0..len).step_by(ps) {
        // SAFETY: inside a live read-write mapping.
        unsafe { std::ptr::write_volatile((start as usize + off) as *mut u8, 1) };
    }
}

impl Toucher {
    fn spawn() -> Toucher {
        let (cmd, cmds) = mpsc::channel::<Option<(u64, usize)>>();
        let (tell, done) = mpsc::channel();
        let handle = thread::spawn(move || {
            // Fault in this code path and the channel's first blocks before
            // anyone samples.
            let warm = Region::new(4);
            touch(warm.start, warm.len);
            // SAFETY: gettid has no preconditions.
            tell.send(unsafe { libc::gettid() }).unwrap();
            while let Ok(Some((start, len))) = cmds.recv() {
                touch(start, len);
                tell.send(0).unwrap();
            }
        });
        let tid = done.recv().unwrap();
        Toucher {
            tid,
            cmd,
            done,
            handle,
        }
    }

    fn touch(&self, r: &Region) {
        self.cmd.send(Some((r.start, r.len))).unwrap();
        self.done.recv_timeout(Duration::from_secs(30)).unwrap();
    }

    fn exit(self) -> i32 {
        self.cmd.send(None).unwrap();
        self.handle.join().unwrap();
        self.tid
    }
}

fn page_faults(config: SamplerConfig) -> Option<AddressSampler> {
    let paranoid = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    let s = AddressSampler::new(
        &SysRoot::host(),
        &SamplerConfig {
            source: Some(SampleSource::PageFaults),
            rate: SampleRate::Period(1),
            ..config
        },
    );
    match s.availability().reason() {
        None => Some(s),
        Some(why) => {
            // The kernel refuses perf_event_open here (paranoid, seccomp,
            // a container): nothing to test against.
            eprintln!(
                "SKIPPED: software page-fault sampling refused here (perf_event_paranoid={}): {why}",
                paranoid.trim()
            );
            None
        }
    }
}

/// Nodes the kernel has, or None without NUMA (`move_pages` says ENOSYS).
fn numa_nodes() -> Option<BTreeSet<u32>> {
    let r = Region::new(1);
    touch(r.start, r.len);
    query_nodes(0, &[r.start]).ok()?;
    let nodes = fs::read_dir("/sys/devices/system/node")
        .ok()?
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("node")?
                .parse()
                .ok()
        })
        .collect();
    Some(nodes)
}

#[test]
fn page_fault_samples_carry_the_touched_addresses_of_each_thread() {
    let Some(mut s) = page_faults(SamplerConfig::default()) else {
        return;
    };
    eprintln!("{}", s.availability());
    assert_eq!(s.availability().fds_per_thread, 1);
    let (a, b) = (Toucher::spawn(), Toucher::spawn());
    let r = s.sync(&[a.tid, b.tid]);
    assert_eq!((r.opened, r.refused, r.gone), (2, 0, 0), "{r:?}");
    assert_eq!(s.open_fds(), 2);

    let (ra, rb) = (Region::new(64), Region::new(32));
    a.touch(&ra);
    b.touch(&rb);
    let got = s.read();
    let round = *s.last_round();
    eprintln!("{round:?}");
    let inside = |tid: i32, r: &Region| -> Vec<AddressSample> {
        got.get(&tid)
            .map(|v| {
                v.iter()
                    .filter(|x| r.contains(x.address))
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    };
    let (in_a, in_b) = (inside(a.tid, &ra), inside(b.tid, &rb));
    // One fault per page, each at an address of the page it touched, in
    // the thread that touched it, and nothing of one region in the other
    // thread.
    let pages = |v: &[AddressSample]| -> BTreeSet<u64> {
        v.iter().map(|x| x.address & !(page_size() - 1)).collect()
    };
    assert_eq!(pages(&in_a), ra.pages(), "{:?}", got.get(&a.tid));
    assert_eq!(pages(&in_b), rb.pages());
    assert_eq!((in_a.len(), in_b.len()), (64, 32));
    assert!(inside(a.tid, &rb).is_empty() && inside(b.tid, &ra).is_empty());
    // Anything else a thread faulted on (the channel's blocks) is rare.
    for (tid, r) in [(a.tid, &ra), (b.tid, &rb)] {
        let other: Vec<_> = got[&tid]
            .iter()
            .filter(|x| !r.contains(x.address))
            .collect();
        assert!(
            other.len() <= 8,
            "thread {tid} outside its region: {other:x?}"
        );
    }
    assert!(got.keys().all(|t| *t == a.tid || *t == b.tid), "{got:?}");
    assert!(in_a.iter().all(|x| !x.write), "page faults do not say");
    assert_eq!((round.threads, round.lost, round.malformed), (2, 0, 0));
    assert!(round.records >= 96 && round.kept >= 96, "{round:?}");
    // Every touched page is resident on a node of this machine.
    if let Some(nodes) = numa_nodes() {
        for x in in_a.iter().chain(&in_b) {
            let n = x
                .node
                .unwrap_or_else(|| panic!("no node for {:#x}", x.address));
            assert!(nodes.contains(&n), "node {n} of {nodes:?}");
        }
    } else {
        eprintln!("no NUMA in this kernel: nodes not checked");
    }

    // The next round has only what happened since: the pages are already
    // there, so touching them again samples nothing.
    a.touch(&ra);
    let got = s.read();
    assert!(
        got.get(&a.tid)
            .is_none_or(|v| v.iter().all(|x| !ra.contains(x.address))),
        "{got:?}"
    );
    let rc = Region::new(16);
    a.touch(&rc);
    let got = s.read();
    let in_c: BTreeSet<u64> = got[&a.tid]
        .iter()
        .filter(|x| rc.contains(x.address))
        .map(|x| x.address & !(page_size() - 1))
        .collect();
    assert_eq!(in_c, rc.pages());

    // An exited thread is dropped and not reopened while listed.
    let gone = b.exit();
    let _ = s.read();
    assert_eq!(s.tracked().collect::<Vec<_>>(), vec![a.tid]);
    assert_eq!(s.unsampled().get(&gone).map(String::as_str), Some("exited"));
    assert_eq!(s.sync(&[a.tid, gone]), SyncReport::default());
    // Leaving the list closes the event and forgets the thread.
    let r = s.sync(&[]);
    assert_eq!(r.closed, 1);
    assert!(s.unsampled().is_empty() && s.open_fds() == 0);
    assert!(s.read().is_empty());
    a.exit();
}

#[test]
fn samples_beyond_the_cap_are_spread_over_the_round() {
    let Some(mut s) = page_faults(SamplerConfig {
        max_per_thread: 16,
        node_lookup: false,
        ..SamplerConfig::default()
    }) else {
        return;
    };
    let a = Toucher::spawn();
    s.sync(&[a.tid]);
    let r = Region::new(256);
    a.touch(&r);
    let got = s.read();
    let v = &got[&a.tid];
    assert_eq!(v.len(), 16);
    assert!(v.iter().all(|x| x.node.is_none()), "no lookup asked for");
    let round = s.last_round();
    assert!(round.over_cap >= 240, "{round:?}");
    // Spread: from the first pages to the last ones, not the first 16.
    let inside: Vec<u64> = v
        .iter()
        .filter(|x| r.contains(x.address))
        .map(|x| (x.address - r.start) / page_size())
        .collect();
    assert!(inside.len() >= 14, "{inside:?}");
    assert!(inside.iter().any(|&p| p >= 200), "{inside:?}");
    a.exit();
}

#[test]
fn threads_beyond_the_budget_wait_for_freed_fds() {
    let Some(mut s) = page_faults(SamplerConfig {
        max_fds: Some(1),
        ..SamplerConfig::default()
    }) else {
        return;
    };
    assert_eq!(s.availability().max_threads, 1);
    let (a, b) = (Toucher::spawn(), Toucher::spawn());
    let r = s.sync(&[a.tid, b.tid]);
    assert_eq!((r.opened, r.starved), (1, 1), "{r:?}");
    let starved = if s.tracked().next() == Some(a.tid) {
        b.tid
    } else {
        a.tid
    };
    assert!(s.unsampled()[&starved].contains("no room left"));
    let r = s.sync(&[a.tid, b.tid]);
    assert_eq!((r.opened, r.starved), (0, 1));
    let r = s.sync(&[starved]);
    assert_eq!((r.closed, r.opened), (1, 1), "{r:?}");
    // Memory budget too: two threads' rings do not fit in one's bytes.
    let one = s.availability().ring_bytes_per_thread;
    let tight = page_faults(SamplerConfig {
        max_ring_bytes: one + one / 2,
        ..SamplerConfig::default()
    })
    .unwrap();
    assert_eq!(tight.availability().max_threads, 1);
    let mut bad = page_faults(SamplerConfig::default()).unwrap();
    let r = bad.sync(&[0x7fff_fff0, 0, -1]);
    assert_eq!((r.gone, r.refused, r.opened), (1, 2, 0), "{r:?}");
    a.exit();
    b.exit();
}

#[test]
fn availability_on_this_host_is_decided_and_explained() {
    let s = AddressSampler::new(&SysRoot::host(), &SamplerConfig::default());
    let a = s.availability();
    eprintln!("{a}");
    let host = host_facts(&SysRoot::host());
    let pebs_or_ibs = host
        .pmus
        .iter()
        .any(|p| CORE_PMUS.contains(&p.as_str()) || p == "ibs_op");
    if !pebs_or_ibs {
        // A VM without a virtual PMU, like the machine this was written on.
        let why = a.reason().expect("nothing to sample with");
        assert!(
            why.starts_with("no PEBS/IBS here: this CPU's PMU is not exposed"),
            "{why}"
        );
        assert_eq!(a.max_threads, 0);
    } else {
        assert!(a.is_available() || !a.reason().unwrap().is_empty(), "{a}");
    }
    // Nothing to sample with: sync and read are harmless no-ops.
    if !a.is_available() {
        let mut s = s;
        assert_eq!(s.sync(&[std::process::id() as i32]), SyncReport::default());
        assert!(s.read().is_empty());
    }
}

/// The per-round cost of the read for N threads with the software event
/// (`cargo test -p numaplace-linux --lib sampling -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement, not a check"]
fn measure_read_cost() {
    for (n, node_lookup) in [16usize, 128, 512]
        .into_iter()
        .flat_map(|n| [(n, true), (n, false)])
    {
        let Some(mut s) = page_faults(SamplerConfig {
            node_lookup,
            ..SamplerConfig::default()
        }) else {
            return;
        };
        let threads: Vec<Toucher> = (0..n).map(|_| Toucher::spawn()).collect();
        let tids: Vec<i32> = threads.iter().map(|t| t.tid).collect();
        let t0 = std::time::Instant::now();
        s.sync(&tids);
        let open = t0.elapsed();
        let regions: Vec<Region> = (0..n).map(|_| Region::new(32)).collect();
        let mut costs = Vec::new();
        for round in 0..3 {
            let fresh: Vec<Region> = (0..n).map(|_| Region::new(32)).collect();
            let rs = if round == 0 { &regions } else { &fresh };
            for (t, r) in threads.iter().zip(rs) {
                t.touch(r);
            }
            let got = s.read();
            let r = *s.last_round();
            assert_eq!(got.len(), n);
            costs.push((r.elapsed_ns, r.kept));
        }
        let idle = {
            let _ = s.read();
            s.last_round().elapsed_ns
        };
        eprintln!(
            "{n} threads, node lookup {node_lookup}: open {open:?}; read with 32 samples/thread: \
             {costs:?} (ns, samples); idle read {idle} ns"
        );
        for t in threads {
            t.exit();
        }
    }
}

#[test]
fn the_sampler_can_move_to_another_thread() {
    fn send<T: Send>() {}
    send::<AddressSampler>();
    send::<crate::Collector>();
}

#[test]
fn a_sampling_fd_hangs_up_when_its_thread_exits() {
    if page_faults(SamplerConfig::default()).is_none() {
        return;
    }
    let ev = resolve_event(
        &SysRoot::host(),
        SampleSource::PageFaults,
        None,
        &HostFacts::default(),
        &no_pfm(),
    )
    .unwrap();
    let t = Toucher::spawn();
    let attrs = candidates(SampleSource::PageFaults)[0];
    let s = ThreadSampler::open(t.tid, &ev, attrs, SampleRate::Period(1), 4096).unwrap();
    assert!(!s.exited(), "a live thread's ring buffer does not hang up");
    t.exit();
    assert!(
        s.exited(),
        "POLLHUP once the thread is gone, whatever its tid is now"
    );
}
