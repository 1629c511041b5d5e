//! Tests of `top --connect`'s reader: an answer read as a frame of this
//! format only, and a fetch that ends whatever the peer does.

use super::*;
use numaplace::top_state::FORMAT;
use std::os::unix::net::UnixListener;
use std::path::Path;

fn frame() -> TopState {
    TopState {
        format: FORMAT,
        policy: "static".into(),
        round: 9,
        ..TopState::default()
    }
}

fn http(body: &str) -> Vec<u8> {
    format!("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{body}").into_bytes()
}

#[test]
fn an_answer_is_read_as_a_frame_of_this_format_only() {
    let json = serde_json::to_string(&frame()).unwrap();
    assert_eq!(parse_answer(&http(&json)).unwrap().round, 9);

    let e = parse_answer(b"").unwrap_err();
    assert!(e.contains("closed the connection without an answer"), "{e}");
    let e = parse_answer(b"\xff\xfe\x1b[2J garbage\n").unwrap_err();
    assert!(e.starts_with("not an HTTP answer: \""), "{e}");
    assert!(!e.contains('\x1b'), "escape sequences are escaped: {e}");
    let e = parse_answer(b"SSH-2.0-OpenSSH\r\n\r\n").unwrap_err();
    assert!(e.contains("not an HTTP answer"), "{e}");
    let e =
        parse_answer(b"HTTP/1.0 404 Not Found\r\n\r\nnumaplace serves GET /metrics\n").unwrap_err();
    assert!(e.contains("serves no /state"), "{e}");
    let e = parse_answer(b"HTTP/1.0 503 Service Unavailable\r\n\r\nnot yet\n").unwrap_err();
    assert!(e.contains("503") && e.contains("not yet"), "{e}");
    let e = parse_answer(&http("{\"nodes\": 3}")).unwrap_err();
    assert!(e.contains("not numaplace's state"), "{e}");
    let newer = serde_json::to_string(&TopState {
        format: FORMAT + 1,
        ..frame()
    })
    .unwrap();
    let e = parse_answer(&http(&newer)).unwrap_err();
    assert!(e.contains("same numaplace version"), "{e}");
}

/// A UNIX socket at `path` whose every connection `answer` handles.
fn peer(path: &Path, answer: fn(std::os::unix::net::UnixStream)) {
    let l = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || answer(c));
        }
    });
}

/// Peers that hang, flood or answer rightly: each fetch ends, with the
/// frame or why not. The deadline is short here; the test asserts what
/// came back, not how fast.
#[test]
fn a_fetch_ends_whatever_the_peer_does() {
    let dir = tempfile::tempdir().unwrap();
    let deadline = Duration::from_millis(300);

    let hang = dir.path().join("hang.sock");
    peer(&hang, |c| {
        std::thread::sleep(Duration::from_secs(30));
        drop(c);
    });
    let e = fetch(&Listen::Unix(hang), deadline).unwrap_err();
    assert!(e.contains("no whole answer within"), "{e}");

    // A byte at a time, never ending: the deadline is the whole
    // exchange's, not each read's.
    let drip = dir.path().join("drip.sock");
    peer(&drip, |mut c| {
        let _ = c.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
        while c.write_all(b" ").is_ok() {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let e = fetch(&Listen::Unix(drip), deadline).unwrap_err();
    assert!(e.contains("no whole answer within"), "{e}");

    let flood = dir.path().join("flood.sock");
    peer(&flood, |mut c| {
        let chunk = vec![b'['; 1 << 20];
        while c.write_all(&chunk).is_ok() {}
    });
    let e = fetch(&Listen::Unix(flood), Duration::from_secs(60)).unwrap_err();
    assert!(e.contains("larger than 4 MiB"), "{e}");

    let e = fetch(&Listen::Unix(dir.path().join("nobody.sock")), deadline).unwrap_err();
    assert!(e.starts_with("cannot connect to "), "{e}");

    let good = dir.path().join("good.sock");
    peer(&good, |mut c| {
        let mut buf = [0u8; 512];
        let _ = c.read(&mut buf);
        let json = serde_json::to_string(&frame()).unwrap();
        let _ = c.write_all(&http(&json));
    });
    assert_eq!(
        fetch(&Listen::Unix(good), Duration::from_secs(60))
            .unwrap()
            .policy,
        "static"
    );
}

/// The reader thread leaves the frame, then why the next try failed,
/// keeping the frame it had.
#[test]
fn the_reader_keeps_the_last_frame_and_says_why_a_try_failed() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("d.sock");
    let shared = Arc::new(Mutex::new(numaplace::daemon::metrics::MetricsState {
        state_json: Arc::new(serde_json::to_string(&frame()).unwrap()),
        ..Default::default()
    }));
    numaplace::daemon::metrics::serve(&Listen::Unix(sock.clone()), shared, false).unwrap();
    let latest: Shared = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    spawn_daemon_reader(
        Listen::Unix(sock.clone()),
        Duration::from_millis(20),
        Arc::clone(&latest),
        Arc::clone(&stop),
    )
    .unwrap();
    let wait = |what: &str, f: &dyn Fn(&Latest) -> bool| {
        let start = Instant::now();
        while !f(&lock(&latest)) {
            assert!(start.elapsed() < Duration::from_secs(60), "{what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait("a frame", &|l| l.state.is_some());
    // The socket goes: the reader says so and keeps the frame.
    std::fs::remove_file(&sock).unwrap();
    wait("the error", &|l| l.error.is_some());
    let l = lock(&latest);
    assert_eq!(l.state.as_ref().unwrap().round, 9);
    assert!(l.error.as_ref().unwrap().contains("cannot connect"));
    drop(l);
    stop.store(true, Ordering::Relaxed);
}

/// A listener that accepts nothing, its backlog full: the connecting side
/// of a UNIX socket then waits for room, which no socket deadline bounds;
/// the wait for the answer ends anyway (the test asserts that it ends with
/// an error, not how fast).
#[test]
fn a_listener_that_accepts_nothing_ends_the_wait_too() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("full.sock");
    let l = UnixListener::bind(&sock).unwrap();
    // SAFETY: listen(2) on the listener's own open descriptor.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let path = sock.clone();
    // Fills the backlog; its last connect blocks until the test ends.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok(c) = std::os::unix::net::UnixStream::connect(&path) {
            held.push(c);
        }
    });
    let e = fetch_within(&Listen::Unix(sock), Duration::from_millis(300)).unwrap_err();
    assert!(
        e.contains("no answer within") || e.contains("no whole answer within"),
        "{e}"
    );
    drop(l);
}

/// A hostile peer's strings reach the screen escaped, its lists cut to the
/// daemon's limits; the daemon's own escapes show as they were.
#[test]
fn a_peers_strings_are_escaped_and_its_lists_cut() {
    let evil = "\u{1b}]2;owned\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\u{9b}31m\u{202e}x";
    let mut f = frame();
    f.policy = evil.into();
    f.decisions = (0..500)
        .map(|i| numaplace::top_state::DecisionRow {
            round: i,
            label: evil.into(),
            reason: "r".repeat(100_000),
            ..Default::default()
        })
        .collect();
    f.groups = (0..25_000)
        .map(|pid| numaplace::top_state::GroupRow {
            pid,
            label: format!("ok\\x1b{evil}"),
            ..Default::default()
        })
        .collect();
    let s = parse_answer(&http(&serde_json::to_string(&f).unwrap())).unwrap();
    let strings = std::iter::once(&s.policy)
        .chain(s.decisions.iter().flat_map(|d| [&d.label, &d.reason]))
        .chain(s.groups.iter().map(|g| &g.label));
    for t in strings {
        assert!(
            !t.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{t:?}"
        );
        assert!(
            t.chars().count() <= numaplace::top_state::MAX_REASON,
            "{}",
            t.len()
        );
    }
    assert!(s.policy.starts_with("\\x1b]2;owned\\x07"), "{}", s.policy);
    // The daemon's own escape of a name is shown as it sent it.
    assert!(
        s.groups[0].label.starts_with("ok\\x1b\\x1b]2;"),
        "{}",
        s.groups[0].label
    );
    assert_eq!(s.groups.len(), numaplace::top_state::MAX_GROUPS);
    assert_eq!(s.decisions.len(), numaplace::top_state::MAX_DECISIONS);
    assert_eq!(s.decisions.last().unwrap().round, 499);
}
