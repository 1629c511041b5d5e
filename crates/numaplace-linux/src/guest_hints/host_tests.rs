//! The host's reader against real UNIX sockets served by this test
//! process, which the snapshot calls a VM: an honest guest, one that
//! floods, one that lies, one that goes silent, and a socket whose server
//! is no VM.

use super::*;
use crate::guest_hints::socket::validate_patterns;
use numaplace_model::{Task, TaskGroup};
use numaplace_parse::guest_hints::round_message;
use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::Path;

const VCPUS: u32 = 4;

fn me() -> TaskId {
    let pid = std::process::id() as i32;
    let start_time = ProcReader::new(SysRoot::host())
        .stat(pid, pid)
        .unwrap()
        .start_time;
    TaskId {
        tid: pid,
        start_time,
    }
}

/// A snapshot in which this process is a VM with vCPUs 0..VCPUS (or not).
fn snapshot(vm: bool) -> Snapshot {
    let id = me();
    let task = |n: u32| Task {
        tid: id.tid + n as i32 + 1,
        tgid: id.tid,
        start_time: id.start_time,
        comm: format!("CPU {n}/KVM"),
        state: 'R',
        last_cpu: None,
        allowed_cpus: CpuSet::default(),
        allowed_mems: CpuSet::default(),
        confined_cpus: None,
        manager: None,
        utime: 0,
        stime: 0,
        vcpu: Some(n),
    };
    let kind = if vm {
        GroupKind::Vm {
            name: Some("web".into()),
            accel: "KVM".into(),
            evidence: "test".into(),
        }
    } else {
        GroupKind::Process
    };
    Snapshot {
        tasks: (0..VCPUS).map(task).collect(),
        groups: vec![TaskGroup {
            pid: id.tid,
            start_time: id.start_time,
            comm: "qemu".into(),
            cmdline: vec!["qemu".into()],
            cgroup: None,
            kind,
            threads: (0..VCPUS).map(|n| id.tid + n as i32 + 1).collect(),
            memory: None,
        }],
        ..Snapshot::default()
    }
}

/// A listening socket in a temp dir, and a reader following `dir/*.sock`.
fn setup() -> (tempfile::TempDir, UnixListener, GuestHints) {
    let dir = tempfile::tempdir().unwrap();
    let listener = UnixListener::bind(dir.path().join("vm1.sock")).unwrap();
    let pattern = format!("{}/*.sock", dir.path().display());
    validate_patterns(std::slice::from_ref(&pattern)).unwrap();
    let hints = GuestHints::new(SysRoot::host(), vec![pattern]);
    (dir, listener, hints)
}

/// The first round connects; the test then accepts: the guest's end.
fn connect(hints: &mut GuestHints, listener: &UnixListener, snap: &Snapshot) -> UnixStream {
    let r = hints.poll(snap, Instant::now());
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert_eq!(hints.connected(), 1);
    listener.accept().unwrap().0
}

fn set(seq: u64, tagged: &str) -> String {
    let online = CpuSet::first_n(VCPUS);
    let tagged = CpuSet::parse_list(tagged).unwrap();
    round_message(seq, 1000, &online, &tagged, &tagged)
}

#[test]
fn an_honest_guest_tags_and_clears_a_vcpu() {
    let (_d, listener, mut hints) = setup();
    let snap = snapshot(true);
    let pid = me().tid;
    let mut guest = connect(&mut hints, &listener, &snap);
    assert_eq!(hints.silent().len(), 1, "connected, nothing sent yet");
    let path = hints.silent().remove(0);
    assert_eq!(hints.pending_bytes(&path), 0);
    // Text without its newline, then nothing: said as bytes pending, not
    // as nothing at all.
    guest.write_all(b"numaplace-hints 1 ").unwrap();
    hints.poll(&snap, Instant::now());
    assert_eq!(hints.silent(), vec![path.clone()]);
    assert_eq!(hints.pending_bytes(&path), 18);
    guest.write_all(b"\n").unwrap();
    hints.poll(&snap, Instant::now());
    let online = CpuSet::first_n(VCPUS);
    let one = CpuSet::parse_list("1").unwrap();
    guest
        .write_all(round_message(1, 1000, &online, &CpuSet::new(), &one).as_bytes())
        .unwrap();
    let r = hints.poll(&snap, Instant::now());
    assert_eq!(r.hints, BTreeMap::from([(pid, BTreeSet::from([1]))]));
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert!(hints.silent().is_empty());
    assert!(
        r.changes[0].contains("vm:web") && r.changes[0].contains("hinted: 1"),
        "{:?}",
        r.changes
    );
    // A line cut in two across rounds is read whole.
    let text = round_message(2, 1000, &online, &one, &CpuSet::new());
    let (a, b) = text.split_at(10);
    guest.write_all(a.as_bytes()).unwrap();
    let r = hints.poll(&snap, Instant::now());
    assert_eq!(r.hints[&pid], BTreeSet::from([1]), "the cut line waits");
    guest.write_all(b.as_bytes()).unwrap();
    let r = hints.poll(&snap, Instant::now());
    assert_eq!(r.hints, BTreeMap::from([(pid, BTreeSet::new())]));
    assert_eq!(
        r.changes,
        vec![format!("guest hints: vm:web (pid {pid}): clear vCPUs 1")]
    );
}

#[test]
fn a_flooding_guest_is_bounded_reported_once_and_ignored() {
    let (_d, listener, mut hints) = setup();
    let snap = snapshot(true);
    let mut guest = connect(&mut hints, &listener, &snap);
    guest.write_all(set(1, "2").as_bytes()).unwrap();
    assert_eq!(hints.poll(&snap, Instant::now()).hints.len(), 1);
    // Megabytes of garbage without a newline, as fast as the socket takes them.
    guest.set_nonblocking(true).unwrap();
    let junk = vec![b'x'; 1 << 20];
    let flood = |guest: &mut UnixStream| {
        let mut sent = 0;
        while let Ok(n) = guest.write(&junk) {
            sent += n;
            if n == 0 || sent > 8 << 20 {
                break;
            }
        }
        sent
    };
    assert!(flood(&mut guest) > MAX_ROUND_BYTES);
    let r = hints.poll(&snap, Instant::now());
    assert!(
        r.hints.is_empty(),
        "a flood's hints are ignored: {:?}",
        r.hints
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("more than 65536 bytes a round")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("a line longer than 4095 bytes"))
    );
    assert!(r.changes[0].contains("no live hints"), "{:?}", r.changes);
    // Still flooding: bounded again, and not said again.
    flood(&mut guest);
    let r = hints.poll(&snap, Instant::now());
    assert!(r.hints.is_empty() && r.notes.is_empty(), "{r:?}");
    // Reported again once REPORT_EVERY has passed, with the count held back.
    flood(&mut guest);
    let r = hints.poll(&snap, Instant::now() + REPORT_EVERY);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("more times since the last report")),
        "{:?}",
        r.notes
    );
}

#[test]
fn endless_short_lines_are_bounded_per_round() {
    let (_d, listener, mut hints) = setup();
    let snap = snapshot(true);
    let mut guest = connect(&mut hints, &listener, &snap);
    let mut text = "junk\n".repeat(MAX_LINES_PER_ROUND);
    text.push_str(&set(1, "3"));
    guest.write_all(text.as_bytes()).unwrap();
    let r = hints.poll(&snap, Instant::now());
    // The valid line came after the limit: refused, so nothing is hinted yet.
    assert!(r.hints.is_empty(), "{:?}", r.hints);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains(&format!("{} line(s) refused", MAX_LINES_PER_ROUND + 1))),
        "{:?}",
        r.notes
    );
    // The next round's set is read: a flood of lines ends, the guest heals.
    guest.write_all(set(2, "3").as_bytes()).unwrap();
    let r = hints.poll(&snap, Instant::now());
    assert_eq!(r.hints[&me().tid], BTreeSet::from([3]));
}

#[test]
fn a_lying_guest_gets_only_the_vcpus_its_vm_has() {
    let (_d, listener, mut hints) = setup();
    let snap = snapshot(true);
    let mut guest = connect(&mut hints, &listener, &snap);
    // Online 0-4095 though the VM has 4 vCPUs; ids out of range, negative.
    let lies = "numaplace-hints 1 set seq=1 interval-ms=1000 online=0-4095 tagged=1,7,4000\n\
                numaplace-hints 1 tag seq=2 vcpus=-1\n\
                numaplace-hints 1 tag seq=2 vcpus=99999\n";
    guest.write_all(lies.as_bytes()).unwrap();
    let r = hints.poll(&snap, Instant::now());
    assert_eq!(r.hints, BTreeMap::from([(me().tid, BTreeSet::from([1]))]));
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("names vCPUs 7,4000 the VM does not have")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes.iter().any(|n| n.contains("2 line(s) refused")),
        "{:?}",
        r.notes
    );
    // The same lies again: the same answer, not reported again.
    guest.write_all(lies.as_bytes()).unwrap();
    let r = hints.poll(&snap, Instant::now());
    assert_eq!(r.hints[&me().tid], BTreeSet::from([1]));
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn a_silent_guest_expires_and_a_hangup_drops_the_socket() {
    let (_d, listener, mut hints) = setup();
    let snap = snapshot(true);
    let mut guest = connect(&mut hints, &listener, &snap);
    guest.write_all(set(1, "0").as_bytes()).unwrap();
    let t0 = Instant::now();
    assert_eq!(hints.poll(&snap, t0).hints.len(), 1);
    // interval-ms=1000: three intervals without a set.
    assert_eq!(
        hints
            .poll(&snap, t0 + Duration::from_millis(2900))
            .hints
            .len(),
        1
    );
    let r = hints.poll(&snap, t0 + Duration::from_secs(3));
    assert!(r.hints.is_empty());
    assert!(r.changes[0].contains("no live hints"), "{:?}", r.changes);
    drop(guest);
    let r = hints.poll(&snap, t0 + Duration::from_secs(4));
    assert!(r.hints.is_empty() && r.notes.is_empty(), "{r:?}");
    assert_eq!(hints.connected(), 0, "a hung-up socket is dropped");
}

#[test]
fn a_socket_whose_server_is_not_a_vm_is_ignored() {
    let (_d, _listener, mut hints) = setup();
    let r = hints.poll(&snapshot(false), Instant::now());
    assert_eq!(hints.connected(), 0);
    assert!(r.hints.is_empty());
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(
        r.notes[0].contains("not a VM numaplace recognises"),
        "{:?}",
        r.notes
    );
    // Tried again later, but said once.
    let r = hints.poll(&snapshot(false), Instant::now() + RETRY_AFTER);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    // The VM's start time must match too: a reused pid is not the VM.
    let mut other = snapshot(true);
    other.groups[0].start_time += 1;
    let (_d2, _l2, mut hints2) = setup();
    let r = hints2.poll(&other, Instant::now());
    assert_eq!(hints2.connected(), 0);
    assert!(r.notes[0].contains("not a VM"), "{:?}", r.notes);
}

#[test]
fn patterns_are_checked_and_match_sockets_only() {
    for (bad, want) in [
        ("relative/*.sock", "not an absolute path"),
        ("/a/../b", ".. component"),
        ("/a/[ab]", "only * and ?"),
        ("/a/b/", "names a directory"),
        ("/a/\nb", "control characters"),
    ] {
        let e = validate_patterns(&[bad.to_string()]).unwrap_err();
        assert!(
            e.contains(want) && e.starts_with("[guest_hints] sockets"),
            "{bad}: {e}"
        );
    }
    let many: Vec<String> = (0..65).map(|i| format!("/s{i}")).collect();
    assert!(validate_patterns(&many).unwrap_err().contains("at most 64"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("domain-1-a")).unwrap();
    std::fs::create_dir(dir.path().join("domain-2-b")).unwrap();
    let _l = UnixListener::bind(dir.path().join("domain-1-a/org.numaplace.hints.0")).unwrap();
    // A plain file and a symbolic link of the right name are not followed.
    std::fs::write(dir.path().join("domain-2-b/org.numaplace.hints.0"), "").unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("domain-1-a/org.numaplace.hints.0"),
        dir.path().join("domain-3"),
    )
    .unwrap();
    let (found, cut) = super::super::socket::expand(&[
        format!("{}/domain-*/org.numaplace.hints.0", dir.path().display()),
        format!("{}/domain-?", dir.path().display()),
    ]);
    assert!(!cut);
    assert_eq!(
        found,
        vec![dir.path().join("domain-1-a/org.numaplace.hints.0")]
    );
}

/// The fallback for sockets libvirt opens and passes to QEMU: the
/// listening socket's inode, and who holds it.
#[test]
fn the_holder_of_a_listening_socket_is_found_by_its_inode() {
    use crate::guest_hints::socket::{holds_socket, listening_inode, listening_inode_in};
    let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                0000000000000000: 00000002 00000000 00010000 0001 01 4242 /run/a.sock\n\
                0000000000000000: 00000003 00000000 00000000 0001 03 4243 /run/a.sock\n\
                0000000000000000: 00000002 00000000 00010000 0001 01 4244 /run/b c.sock\n";
    assert_eq!(
        listening_inode_in(text, Path::new("/run/a.sock")),
        Some(4242)
    );
    assert_eq!(listening_inode_in(text, Path::new("/run/b")), None);
    assert_eq!(listening_inode_in("", Path::new("/run/a.sock")), None);
    // The real thing: this process listens, and holds the socket.
    let (dir, _listener, _) = setup();
    let path = dir.path().join("vm1.sock");
    let root = SysRoot::host();
    let inode = listening_inode(&root, &path).expect("our listener in /proc/net/unix");
    assert!(holds_socket(&root, me().tid, inode));
    assert!(!holds_socket(&root, 1, inode));
}
