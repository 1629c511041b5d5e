use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use numaplace_model::{CpuSet, Task, TaskGroup};

use super::*;
use crate::vm::fake_qmp::{Behaviour, FakeQmp};
use crate::vm::libvirt::tests::STATUS;

const QEMU: &str = "/usr/bin/qemu-system-x86_64";
const START: u64 = 1000;

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A /proc and /sys tree with process `pid` running `exe` since tick
/// [`START`], booted `boot_ago` seconds ago.
fn tree(pid: i32, exe: &str, boot_ago: i64) -> (tempfile::TempDir, SysRoot) {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("sys/devices/system/cpu")).unwrap();
    std::fs::create_dir_all(d.path().join("proc")).unwrap();
    std::fs::write(
        d.path().join("proc/stat"),
        format!("cpu 1 2 3 4\nbtime {}\n", now_secs() - boot_ago),
    )
    .unwrap();
    process(d.path(), pid, exe);
    let root = SysRoot::new(d.path()).unwrap();
    (d, root)
}

fn process(dir: &Path, pid: i32, exe: &str) {
    let p = dir.join(format!("proc/{pid}"));
    std::fs::create_dir_all(p.join("fd")).unwrap();
    std::fs::create_dir_all(p.join(format!("task/{pid}"))).unwrap();
    let _ = std::fs::remove_file(p.join("exe"));
    std::os::unix::fs::symlink(exe, p.join("exe")).unwrap();
    let mut fields = vec!["0"; 49];
    let start = START.to_string();
    fields[18] = &start; // field 22 (fields from 4 on)
    std::fs::write(
        p.join(format!("task/{pid}/stat")),
        format!("{pid} (qemu-system-x86) S {}\n", fields.join(" ")),
    )
    .unwrap();
}

/// A round's snapshot with process `pid` and its threads `tids`.
fn snapshot(pid: i32, tids: &[i32], cmdline: &[&str]) -> Snapshot {
    let mut threads: Vec<i32> = tids.to_vec();
    threads.push(pid);
    threads.sort_unstable();
    let tasks = threads
        .iter()
        .map(|&tid| Task {
            tid,
            tgid: pid,
            start_time: START,
            comm: "qemu-system-x86".into(),
            state: 'S',
            last_cpu: Some(0),
            allowed_cpus: CpuSet::new(),
            allowed_mems: CpuSet::new(),
            confined_cpus: None,
            manager: None,
            utime: 0,
            stime: 0,
            vcpu: None,
        })
        .collect();
    Snapshot {
        tasks,
        groups: vec![TaskGroup {
            pid,
            start_time: START,
            comm: "qemu-system-x86".into(),
            cmdline: cmdline.iter().map(|s| s.to_string()).collect(),
            cgroup: None,
            kind: GroupKind::Process,
            threads,
            memory: None,
        }],
        ..Snapshot::default()
    }
}

fn vcpus_of(s: &Snapshot) -> BTreeMap<u32, i32> {
    s.tasks
        .iter()
        .filter_map(|t| t.vcpu.map(|v| (v, t.tid)))
        .collect()
}

fn me() -> i32 {
    std::process::id() as i32
}

fn qmp_only(path: &Path) -> VmDiscovery {
    VmDiscovery::new(VmSources {
        qmp: vec![path.to_str().unwrap().to_string()],
        libvirt: false,
        ..VmSources::default()
    })
}

#[test]
fn a_qmp_answer_makes_a_vm_and_is_asked_again_only_when_threads_change() {
    let (_d, root) = tree(me(), QEMU, 10_000);
    let sockets = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(
        sockets.path(),
        "db.qmp",
        Behaviour::Good {
            vcpus: vec![(0, 5001), (1, 5002)]
                .into_iter()
                .map(|(i, t)| (i, t, Some(i)))
                .collect(),
            name: Some("db".into()),
            kvm: false,
        },
    );
    let pattern = sockets.path().join("*.qmp");
    let mut d = qmp_only(&pattern);
    let cmd = ["qemu-system-x86_64", "-name", "from-cmdline"];
    let mut s = snapshot(me(), &[5001, 5002, 5003], &cmd);
    d.discover(&root, &mut s);
    assert_eq!(
        s.groups[0].kind,
        GroupKind::Vm {
            name: Some("db".into()),
            accel: "TCG".into(),
            evidence: format!("qmp {} (qemu executable)", server.path.display()),
        }
    );
    assert_eq!(vcpus_of(&s), BTreeMap::from([(0, 5001), (1, 5002)]));

    // The fake serves one client, then nobody listens on its socket: a
    // second round with the same threads must not ask again.
    drop(server);
    let mut s = snapshot(me(), &[5001, 5002, 5003], &cmd);
    d.discover(&root, &mut s);
    assert!(matches!(s.groups[0].kind, GroupKind::Vm { .. }), "cached");
    assert_eq!(vcpus_of(&s).len(), 2);

    // A vCPU plugged (a new thread): asked again; nobody answers now, so
    // the VM keeps what it was known by (the new thread unnumbered).
    let mut s = snapshot(me(), &[5001, 5002, 5003, 5004], &cmd);
    d.discover(&root, &mut s);
    assert!(matches!(&s.groups[0].kind, GroupKind::Vm { name: Some(n), .. } if n == "db"));
    assert_eq!(vcpus_of(&s), BTreeMap::from([(0, 5001), (1, 5002)]));
    let (_, asked) = &d.sockets[&sockets.path().join("db.qmp")];
    assert!(
        matches!(asked, Asked::Failed { last: Some(_), .. }),
        "{asked:?}"
    );
    // A vCPU unplugged, while the socket waits for its retry: still known.
    let mut s = snapshot(me(), &[5002, 5003], &cmd);
    d.discover(&root, &mut s);
    assert_eq!(vcpus_of(&s), BTreeMap::from([(1, 5002)]));

    // Another process under that pid (a new start time): not a VM.
    let mut s = snapshot(me(), &[5001, 5002], &cmd);
    s.groups[0].start_time += 1;
    d.discover(&root, &mut s);
    assert_eq!(s.groups[0].kind, GroupKind::Process);
    assert!(vcpus_of(&s).is_empty());
}

#[test]
fn a_socket_served_by_a_process_that_is_no_vm_is_not_asked() {
    let (_d, root) = tree(me(), "/usr/bin/python3", 10_000);
    let sockets = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(
        sockets.path(),
        "fake.qmp",
        Behaviour::Good {
            vcpus: vec![(0, 5001, None)],
            name: Some("evil".into()),
            kvm: true,
        },
    );
    let mut d = qmp_only(&server.path);
    let mut s = snapshot(me(), &[5001], &["python3"]);
    let before = s.clone();
    let err = d.ask(&root, &server.path, &s).unwrap_err();
    assert_eq!(err.0, "not a VM", "{err:?}");
    assert!(
        err.1.contains(&format!("served by process {}", me())),
        "{}",
        err.1
    );
    drop(server);
    d.discover(&root, &mut s);
    assert_eq!(s, before);
}

#[test]
fn thread_ids_that_are_not_the_servers_threads_are_dropped() {
    let (_d, root) = tree(me(), QEMU, 10_000);
    let sockets = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(
        sockets.path(),
        "liar.qmp",
        Behaviour::Good {
            vcpus: vec![(0, 5001, None), (1, 1, None)],
            name: None,
            kvm: true,
        },
    );
    let mut d = qmp_only(&server.path);
    let mut s = snapshot(me(), &[5001], &["qemu-system-x86_64"]);
    // Another process's thread (pid 1) in the snapshot: still not ours.
    d.discover(&root, &mut s);
    assert!(
        matches!(&s.groups[0].kind, GroupKind::Vm { accel, name: None, .. } if accel == "KVM"),
        "{:?}",
        s.groups[0].kind
    );
    assert_eq!(vcpus_of(&s), BTreeMap::from([(0, 5001)]));
    assert!(d.said.iter().any(|(_, k)| k == "foreign threads"));

    // Only foreign threads: no VM at all.
    let server = FakeQmp::start(
        sockets.path(),
        "liar2.qmp",
        Behaviour::Good {
            vcpus: vec![(0, 999_999, None)],
            name: None,
            kvm: true,
        },
    );
    let mut d = qmp_only(&server.path);
    let mut s = snapshot(me(), &[5001], &["qemu-system-x86_64"]);
    d.discover(&root, &mut s);
    assert_eq!(s.groups[0].kind, GroupKind::Process);
}

#[test]
fn hanging_nonsense_and_flooding_sockets_are_said_once_and_ignored() {
    let (_d, root) = tree(me(), QEMU, 10_000);
    let sockets = tempfile::tempdir().unwrap();
    let servers = [
        FakeQmp::start(sockets.path(), "a-hang.qmp", Behaviour::Silent),
        FakeQmp::start(
            sockets.path(),
            "b-junk.qmp",
            Behaviour::Say("{{{{\n".into()),
        ),
        FakeQmp::start(sockets.path(), "c-flood.qmp", Behaviour::FloodOneLine),
        FakeQmp::start(sockets.path(), "d-error.qmp", Behaviour::ErrorReply),
    ];
    std::fs::write(sockets.path().join("e-file.qmp"), "not a socket").unwrap();
    let mut d = qmp_only(&sockets.path().join("*.qmp"));
    let mut s = snapshot(me(), &[5001], &["qemu-system-x86_64"]);
    let before = s.clone();
    d.discover(&root, &mut s);
    assert_eq!(s, before, "nothing believed");
    let kinds: BTreeMap<String, String> = d
        .said
        .iter()
        .map(|(p, k)| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                k.clone(),
            )
        })
        .collect();
    assert_eq!(kinds["a-hang.qmp"], "no greeting");
    assert_eq!(kinds["b-junk.qmp"], "nonsense");
    assert_eq!(kinds["c-flood.qmp"], "line too long");
    assert_eq!(kinds["d-error.qmp"], "refused");
    assert_eq!(kinds["e-file.qmp"], "not a socket");
    for sv in &servers {
        let (_, asked) = &d.sockets[&sv.path];
        match asked {
            Asked::Failed { backoff, .. } => assert_eq!(*backoff, RETRY_FIRST),
            other => panic!("{other:?}"),
        }
    }
    // The next round (before the retry time) asks none of them.
    d.discover(&root, &mut s);
    assert_eq!(s, before);
}

#[test]
fn a_server_outside_the_rounds_processes_is_refused() {
    let (_d, root) = tree(me(), QEMU, 10_000);
    let sockets = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(
        sockets.path(),
        "x.qmp",
        Behaviour::Good {
            vcpus: vec![(0, 5001, None)],
            name: None,
            kvm: true,
        },
    );
    let mut d = qmp_only(&server.path);
    let s = snapshot(me() + 1, &[5001], &["qemu-system-x86_64"]);
    let err = d.ask(&root, &server.path, &s).unwrap_err();
    assert_eq!(err.0, "not a process here", "{err:?}");
}

#[test]
fn patterns_are_checked_and_expanded() {
    for ok in ["/run/qemu/*.qmp", "/run/vm.sock", "/run/q/vm-??.qmp"] {
        check_qmp_pattern(ok).unwrap();
    }
    for (bad, want) in [
        ("run/*.qmp", "not an absolute path"),
        ("/run/*/qmp.sock", "wildcards outside"),
        ("/run/qemu/", "no file name"),
        ("/run/../etc/x", "`..`"),
    ] {
        let e = check_qmp_pattern(bad).unwrap_err();
        assert!(e.contains(want) && e.contains("/run/qemu/*.qmp"), "{e}");
    }
    let dir = tempfile::tempdir().unwrap();
    for f in ["a.qmp", "b.qmp", "c.txt"] {
        std::fs::write(dir.path().join(f), "").unwrap();
    }
    let mut d = VmDiscovery::new(VmSources {
        qmp: vec![
            dir.path().join("*.qmp").to_str().unwrap().into(),
            dir.path().join("a.qmp").to_str().unwrap().into(),
            "/nonexistent/*.qmp".into(),
        ],
        libvirt: false,
        ..VmSources::default()
    });
    let names: Vec<String> = d
        .socket_paths()
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a.qmp", "b.qmp"]);
}

/// libvirt's status file names a domain, QEMU's pid and its vCPU threads.
fn libvirt_tree(exe: &str, boot_ago: i64) -> (tempfile::TempDir, SysRoot) {
    let (d, root) = tree(4100, exe, boot_ago);
    let dir = d.path().join(libvirt::STATE_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("web.xml"), STATUS).unwrap();
    (d, root)
}

fn libvirt_only() -> VmDiscovery {
    VmDiscovery::new(VmSources {
        qmp: Vec::new(),
        libvirt: true,
        ..VmSources::default()
    })
}

#[test]
fn a_libvirt_domain_is_a_vm_with_its_name_and_vcpu_threads() {
    let (d, root) = libvirt_tree(QEMU, 10_000);
    let mut disc = libvirt_only();
    let cmd = [
        "qemu-system-x86_64",
        "-name",
        "guest=other,debug-threads=on",
    ];
    let mut s = snapshot(4100, &[4101, 4105, 4106, 4108], &cmd);
    disc.discover(&root, &mut s);
    let file = d.path().join("run/libvirt/qemu/web.xml");
    assert_eq!(
        s.groups[0].kind,
        GroupKind::Vm {
            name: Some("web".into()),
            accel: "KVM".into(),
            evidence: format!("libvirt status {} (qemu executable)", file.display()),
        }
    );
    assert_eq!(
        vcpus_of(&s),
        BTreeMap::from([(0, 4105), (1, 4106), (3, 4108)])
    );

    // A thread gone (unplugged): the others stay numbered.
    let mut s = snapshot(4100, &[4101, 4105, 4106], &cmd);
    disc.discover(&root, &mut s);
    assert_eq!(vcpus_of(&s), BTreeMap::from([(0, 4105), (1, 4106)]));

    // Not running: nothing, and nothing said.
    let mut s = snapshot(4200, &[4201], &cmd);
    disc.discover(&root, &mut s);
    assert_eq!(s.groups[0].kind, GroupKind::Process);
}

#[test]
fn a_libvirt_pid_that_is_no_vm_or_newer_than_the_file_is_refused() {
    let (_d, root) = libvirt_tree("/usr/bin/sleep", 10_000);
    let mut disc = libvirt_only();
    let mut s = snapshot(4100, &[4105, 4106, 4108], &["sleep"]);
    disc.discover(&root, &mut s);
    assert_eq!(s.groups[0].kind, GroupKind::Process);
    assert!(disc.said.iter().any(|(_, k)| k == "not a VM"));

    // Booted a second ago: the process (tick 1000, 10 s after boot)
    // started after the file was written; the file is stale.
    let (_d, root) = libvirt_tree(QEMU, 1);
    let mut disc = libvirt_only();
    let mut s = snapshot(4100, &[4105, 4106, 4108], &["qemu-system-x86_64"]);
    disc.discover(&root, &mut s);
    assert_eq!(s.groups[0].kind, GroupKind::Process);
    assert!(
        disc.said.iter().any(|(_, k)| k == "stale"),
        "{:?}",
        disc.said
    );
}

/// The manager of a domain's threads: numaplace places a domain through
/// libvirt unless its owner pinned it there (a pin to every CPU online
/// pins nothing) or libvirt cannot be reached.
#[test]
fn a_libvirt_domains_threads_are_placed_through_libvirt_or_left_to_it() {
    let managers = |disc: &mut VmDiscovery, root: &SysRoot| {
        let mut s = snapshot(4100, &[4101, 4105, 4106, 4108], &["qemu-system-x86_64"]);
        disc.discover(root, &mut s);
        (s.tasks.iter())
            .map(|t| {
                let m = t
                    .manager
                    .as_ref()
                    .expect("every thread of a domain has its manager");
                assert_eq!(m.who, "libvirt domain web");
                (t.tid, m.hands_off.clone())
            })
            .collect::<BTreeMap<_, _>>()
    };
    let (d, root) = libvirt_tree(QEMU, 10_000);
    std::fs::write(d.path().join("sys/devices/system/cpu/online"), "0-7\n").unwrap();
    let status = d.path().join(libvirt::STATE_DIR).join("web.xml");
    let mut disc = libvirt_only();
    let m = managers(&mut disc, &root);
    assert!(m.values().all(Option::is_none), "{m:?}");
    let dom = &disc.libvirt_domains()[0];
    assert_eq!(
        (dom.pid, dom.uuid.as_str()),
        (4100, "c7a5fdbd-edaf-9455-926a-d65c16db1809")
    );
    assert_eq!(dom.vcpus, [(0, 4105), (1, 4106), (3, 4108)]);

    // The owner pinned vCPU 1 and the emulator; vCPU 3's pin is to every
    // CPU online, no pin at all.
    let pinned = STATUS.replace(
        "<vcpu placement='static' current='3'>4</vcpu>",
        "<vcpu placement='static' current='3'>4</vcpu>
    <cputune>
      <vcpupin vcpu='1' cpuset='2'/>
      <vcpupin vcpu='3' cpuset='0-7'/>
      <emulatorpin cpuset='0'/>
    </cputune>",
    );
    std::fs::write(&status, &pinned).unwrap();
    let m = managers(&mut disc, &root);
    let owner = |what: &str| {
        Some(format!(
            "its owner pinned it in libvirt's XML ({what}); [vms] libvirt_pinned = \"place\" lets \
             numaplace place it"
        ))
    };
    assert_eq!(m[&4105], None);
    assert_eq!(m[&4106], owner("<vcpupin vcpu='1' cpuset='2'>"));
    assert_eq!(m[&4108], None);
    assert_eq!(m[&4101], owner("<emulatorpin cpuset='0'>"));

    // The same domain started through numad (placement='auto'): the
    // advice was a starting point, and libvirt's pins of it are numad's.
    let auto = pinned.replace("placement='static'", "placement='auto'");
    std::fs::write(&status, auto).unwrap();
    assert!(managers(&mut disc, &root).values().all(Option::is_none));

    // The operator lets numaplace place what owners pinned.
    std::fs::write(&status, &pinned).unwrap();
    let mut disc = VmDiscovery::new(VmSources {
        libvirt: true,
        place_owner_pinned: true,
        ..VmSources::default()
    });
    assert!(managers(&mut disc, &root).values().all(Option::is_none));

    // No way to reach libvirt: every thread left to it, saying why.
    let mut disc = VmDiscovery::new(VmSources {
        libvirt: true,
        libvirt_unreachable: Some("virsh not found".into()),
        ..VmSources::default()
    });
    let m = managers(&mut disc, &root);
    assert!(
        m.values().all(|w| w
            .as_deref()
            .is_some_and(|w| w.contains("(virsh not found)"))),
        "{m:?}"
    );
    assert!(disc.libvirt_domains().is_empty());
}

/// A `restrictive` domain's memory nodes are numaplace's to change through
/// libvirt (its threads say so to the engine) unless its owner chose them
/// for a statically placed domain; a `strict` domain's never are.
#[test]
fn a_restrictive_domains_memory_nodes_are_changed_through_libvirt() {
    let sets = |disc: &mut VmDiscovery, root: &SysRoot| {
        let mut s = snapshot(4100, &[4101, 4105, 4106, 4108], &["qemu-system-x86_64"]);
        disc.discover(root, &mut s);
        (s.tasks.iter())
            .map(|t| t.manager.as_ref().unwrap().sets_memory_nodes)
            .collect::<Vec<_>>()
    };
    let (d, root) = libvirt_tree(QEMU, 10_000);
    let status = d.path().join(libvirt::STATE_DIR).join("web.xml");
    let with = |vcpu: &str, memory: &str| {
        let xml = STATUS.replace(
            "<vcpu placement='static' current='3'>4</vcpu>",
            &format!("<vcpu placement='{vcpu}' current='3'>4</vcpu><numatune>{memory}</numatune>"),
        );
        std::fs::write(&status, xml).unwrap();
    };
    let mut disc = libvirt_only();
    with("auto", "<memory mode='restrictive' placement='auto'/>");
    assert_eq!(sets(&mut disc, &root), [true; 5]);
    assert_eq!(
        disc.libvirt_domains()[0].memory_bound.as_deref(),
        Some("restrictive")
    );
    // numad's domain after numaplace's own live change: still numaplace's.
    with("auto", "<memory mode='restrictive' nodeset='1'/>");
    assert_eq!(sets(&mut disc, &root), [true; 5]);
    // Its owner's nodes.
    with("static", "<memory mode='restrictive' nodeset='1'/>");
    assert_eq!(sets(&mut disc, &root), [false; 5]);
    // A memory policy: libvirt cannot change it while the domain runs.
    with("auto", "<memory mode='strict' placement='auto'/>");
    assert_eq!(sets(&mut disc, &root), [false; 5]);
}
