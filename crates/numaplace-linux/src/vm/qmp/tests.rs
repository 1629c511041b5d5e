use std::time::Duration;

use super::*;
use crate::vm::fake_qmp::{Behaviour, FakeQmp};

/// A short deadline for the servers that never answer: these tests say
/// what went wrong, never how long it took.
const SHORT: Duration = Duration::from_millis(200);

#[test]
fn a_good_server_gives_its_vcpus_name_and_accelerator() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(
        dir.path(),
        "vm.qmp",
        Behaviour::Good {
            vcpus: vec![(1, 4242, Some(1)), (0, 4241, Some(0))],
            name: Some("web".into()),
            kvm: true,
        },
    );
    let a = query(&server.path).unwrap();
    assert_eq!(a.server_pid, std::process::id() as i32, "SO_PEERCRED");
    assert_eq!(a.name.as_deref(), Some("web"));
    assert_eq!(a.kvm, Some(true));
    assert_eq!(
        a.vcpus,
        vec![
            QmpVcpu {
                index: 0,
                tid: 4241,
                node: Some(0),
                socket: Some(0)
            },
            QmpVcpu {
                index: 1,
                tid: 4242,
                node: Some(1),
                socket: Some(1)
            },
        ]
    );
    // Where the kernel has SO_PEERPIDFD, it is a pidfd of this process.
    if let Some(fd) = &a.server_pidfd {
        assert!(pidfd_alive(fd));
    }
}

#[test]
fn a_guest_without_a_name_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(
        dir.path(),
        "vm.qmp",
        Behaviour::Good {
            vcpus: vec![(0, 77, None)],
            name: None,
            kvm: false,
        },
    );
    let a = query(&server.path).unwrap();
    assert_eq!(a.name, None);
    assert_eq!(a.kvm, Some(false));
    assert_eq!(a.vcpus[0].node, None);
}

#[test]
fn nonsense_is_reported_with_what_came() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(
        dir.path(),
        "junk.sock",
        Behaviour::Say("HTTP/1.1 200 OK\r\n\r\n".into()),
    );
    let e = query_within(&server.path, SHORT).unwrap_err();
    assert!(matches!(e, QmpError::Nonsense { .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("junk.sock") && m.contains("not JSON") && m.contains("HTTP/1.1"),
        "{m}"
    );

    let server = FakeQmp::start(dir.path(), "array.sock", Behaviour::Say("[1, 2]\n".into()));
    let e = query_within(&server.path, SHORT).unwrap_err();
    assert!(e.to_string().contains("not a JSON object"), "{e}");

    let server = FakeQmp::start(
        dir.path(),
        "early.sock",
        Behaviour::Say("{\"return\": {}}\n".into()),
    );
    let e = query_within(&server.path, SHORT).unwrap_err();
    assert!(e.to_string().contains("before the greeting"), "{e}");
}

#[test]
fn a_silent_server_is_a_held_or_foreign_socket() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(dir.path(), "held.qmp", Behaviour::Silent);
    let e = query_within(&server.path, SHORT).unwrap_err();
    assert!(matches!(e, QmpError::NoGreeting { .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("held.qmp") && m.contains("one client at a time"),
        "{m}"
    );

    // A listener that never accepts (QEMU while another client holds its
    // monitor): queued, never greeted.
    let path = dir.path().join("busy.qmp");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let e = query_within(&path, SHORT).unwrap_err();
    assert!(matches!(e, QmpError::NoGreeting { .. }), "{e}");
}

#[test]
fn a_server_that_stops_after_the_greeting_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(dir.path(), "stuck.qmp", Behaviour::SilentAfterGreeting);
    let e = query_within(&server.path, SHORT).unwrap_err();
    match &e {
        QmpError::Timeout { command, .. } => assert_eq!(*command, "qmp_capabilities"),
        _ => panic!("{e}"),
    }
}

#[test]
fn floods_are_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(dir.path(), "line.qmp", Behaviour::FloodOneLine);
    let e = query(&server.path).unwrap_err();
    assert!(matches!(e, QmpError::LineTooLong { .. }), "{e}");

    let server = FakeQmp::start(dir.path(), "events.qmp", Behaviour::FloodEvents);
    let e = query(&server.path).unwrap_err();
    assert!(matches!(e, QmpError::TooMuch { .. }), "{e}");
}

#[test]
fn an_error_reply_is_reported_with_its_class() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeQmp::start(dir.path(), "old.qmp", Behaviour::ErrorReply);
    let e = query(&server.path).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("query-cpus-fast failed: CommandNotFound"), "{m}");
}

#[test]
fn nothing_listening_and_bad_paths() {
    let dir = tempfile::tempdir().unwrap();
    let e = query(&dir.path().join("absent.qmp")).unwrap_err();
    assert!(matches!(e, QmpError::Connect { .. }), "{e}");
    // A socket file whose server is gone: refused.
    let path = dir.path().join("stale.qmp");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let e = query(&path).unwrap_err();
    assert!(e.to_string().contains("stale.qmp"), "{e}");
    let long = dir.path().join("x".repeat(200));
    let e = query(&long).unwrap_err();
    assert!(e.to_string().contains("at most 107 bytes"), "{e}");
}

#[test]
fn replies_are_checked() {
    let p = Path::new("/run/x.qmp");
    let ok = serde_json::json!([
        {"cpu-index": 1, "thread-id": 11, "props": {"socket-id": 1}},
        {"cpu-index": 0, "thread-id": 10}
    ]);
    let v = parse_cpus(p, ok).unwrap();
    assert_eq!((v[0].index, v[0].tid, v[0].socket), (0, 10, None));
    assert_eq!((v[1].index, v[1].socket), (1, Some(1)));
    for (bad, want) in [
        (serde_json::json!({"a": 1}), "no list"),
        (
            serde_json::json!([{"cpu-index": 0, "thread-id": -1}]),
            "no thread id",
        ),
        (
            serde_json::json!([{"cpu-index": 0, "thread-id": 1u64 << 40}]),
            "no thread id",
        ),
        (serde_json::json!([{"cpu-index": 0}]), "thread-id"),
        (
            serde_json::json!([{"cpu-index": 0, "thread-id": 5}, {"cpu-index": 0, "thread-id": 6}]),
            "twice",
        ),
    ] {
        let e = parse_cpus(p, bad).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    let many: Vec<Value> = (0..=MAX_VCPUS as u32)
        .map(|i| serde_json::json!({"cpu-index": i, "thread-id": i + 1}))
        .collect();
    let e = parse_cpus(p, Value::Array(many)).unwrap_err().to_string();
    assert!(e.contains("more than 8192"), "{e}");

    assert_eq!(parse_name(p, serde_json::json!({})).unwrap(), None);
    assert_eq!(
        parse_name(p, serde_json::json!({"name": "db"})).unwrap(),
        Some("db".into())
    );
    let e = parse_name(p, serde_json::json!({"name": "n".repeat(300)})).unwrap_err();
    assert!(e.to_string().contains("300 bytes"), "{e}");
    assert!(parse_name(p, serde_json::json!({"name": 5})).is_err());
}
