//! The metrics endpoint: Prometheus text format over HTTP on a loopback
//! address or a UNIX socket, never anything else. Off unless configured.
//! The same listener answers `GET /state` with what `numaplace top` shows
//! (JSON of [`crate::top_state::TopState`], bounded in size where it is
//! built), read-only like the metrics.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use numaplace_policy::engine::EngineTotals;

use crate::error::InputError;

/// What the endpoint reports; the daemon updates it every round.
#[derive(Debug, Clone, Default)]
pub struct MetricsState {
    /// The policy's name.
    pub policy: String,
    /// Whether decisions are only journaled.
    pub dry_run: bool,
    /// The engine's counts since the start: rounds, decisions, outcomes.
    pub totals: EngineTotals,
    /// Processes in scope at the last round.
    pub managed_processes: usize,
    /// Threads the last round saw.
    pub threads_seen: usize,
    /// Threads in scope no policy may place at the last round, by the
    /// kind of reason ([`numaplace_policy::LeftAlone::kind`]).
    pub left_alone: std::collections::BTreeMap<String, usize>,
    /// How long the last round's collection took, ns.
    pub collect_ns: u64,
    /// When the last round ended, seconds since the Unix epoch.
    pub last_round_unix_s: f64,
    /// `GET /state`'s body: the last round's [`crate::top_state::TopState`]
    /// as JSON, serialized once per round (empty before the first).
    pub state_json: Arc<String>,
}

/// The state as the daemon's loop and the endpoint's thread share it.
pub type Shared = Arc<Mutex<MetricsState>>;

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A loopback TCP address.
    Tcp(SocketAddr),
    /// A Unix socket at this path.
    Unix(PathBuf),
}

/// Parses `127.0.0.1:9464`, `[::1]:9464` or `unix:/path`; refuses any
/// address that is not loopback.
pub fn parse_listen(text: &str) -> Result<Listen, InputError> {
    if let Some(path) = text.strip_prefix("unix:") {
        if !path.starts_with('/') {
            return Err(InputError(format!(
                "metrics listen {text:?}: give an absolute socket path, like unix:/run/numaplace/metrics.sock"
            )));
        }
        let path = PathBuf::from(path);
        let dir = path.parent().unwrap_or(std::path::Path::new("/"));
        if !dir.is_dir() {
            return Err(InputError(format!(
                "metrics listen {text:?}: the directory {} does not exist; create it first",
                dir.display()
            )));
        }
        return Ok(Listen::Unix(path));
    }
    let addr: SocketAddr = text.parse().map_err(|_| {
        InputError(format!(
            "metrics listen {text:?}: expected 127.0.0.1:PORT, [::1]:PORT or unix:/PATH"
        ))
    })?;
    if !addr.ip().is_loopback() {
        return Err(InputError(format!(
            "metrics listen {text:?}: not a loopback address; numaplace serves metrics on 127.0.0.1, ::1 or a UNIX socket only"
        )));
    }
    Ok(Listen::Tcp(addr))
}

/// The metrics in Prometheus text format.
pub fn render(m: &MetricsState) -> String {
    let t = &m.totals;
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, lines: &[(String, String)]| {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for (labels, value) in lines {
            out.push_str(&format!("{name}{labels} {value}\n"));
        }
    };
    let one = |v: String| vec![(String::new(), v)];
    metric(
        "numaplace_info",
        "gauge",
        "The running policy and mode.",
        &[(
            format!(
                "{{policy=\"{}\",dry_run=\"{}\",version=\"{}\"}}",
                m.policy,
                m.dry_run,
                env!("CARGO_PKG_VERSION")
            ),
            "1".into(),
        )],
    );
    metric(
        "numaplace_rounds_total",
        "counter",
        "Rounds the engine ran.",
        &one(t.rounds.to_string()),
    );
    // A dry run applies nothing: its actions are `not_applied`, as its
    // journal says, and it has no `applied` line (nor a real run a
    // `not_applied` one), unless one was counted.
    let outcomes: Vec<(String, String)> = [
        ("applied", t.applied, !m.dry_run),
        ("not_applied", t.not_applied, m.dry_run),
        ("skipped", t.skipped, true),
        ("refused", t.refused, true),
        ("gone", t.gone, true),
    ]
    .into_iter()
    .filter(|&(_, n, always)| always || n > 0)
    .map(|(outcome, n, _)| (format!("{{outcome=\"{outcome}\"}}"), n.to_string()))
    .collect();
    metric(
        "numaplace_actions_total",
        "counter",
        "Actions the policy decided, by what became of them (a dry run's are not_applied).",
        &outcomes,
    );
    metric(
        "numaplace_log_lines_lost_total",
        "counter",
        "Lines of its log the daemon could not write to stderr (a closed pipe, a full disk): \
         dropped, never fatal.",
        &one(crate::output::lost_lines().to_string()),
    );
    metric(
        "numaplace_pages_moved_total",
        "counter",
        "Pages moved between nodes.",
        &one(t.pages_moved.to_string()),
    );
    metric(
        "numaplace_decide_seconds_total",
        "counter",
        "Time spent deciding.",
        &one(format!("{:.6}", t.decide_ns as f64 / 1e9)),
    );
    metric(
        "numaplace_apply_seconds_total",
        "counter",
        "Time spent carrying actions out.",
        &one(format!("{:.6}", t.apply_ns as f64 / 1e9)),
    );
    metric(
        "numaplace_collect_seconds_total",
        "counter",
        "Time spent reading the machine.",
        &one(format!("{:.6}", m.collect_ns as f64 / 1e9)),
    );
    metric(
        "numaplace_managed_processes",
        "gauge",
        "Processes in scope at the last round.",
        &one(m.managed_processes.to_string()),
    );
    metric(
        "numaplace_threads",
        "gauge",
        "Threads seen at the last round.",
        &one(m.threads_seen.to_string()),
    );
    let left: Vec<(String, String)> = numaplace_policy::LeftAlone::KINDS
        .iter()
        .map(|k| {
            (
                format!("{{reason=\"{k}\"}}"),
                m.left_alone.get(*k).copied().unwrap_or(0).to_string(),
            )
        })
        .collect();
    metric(
        "numaplace_threads_left_alone",
        "gauge",
        "Threads of processes in scope that no policy may place at the last round, by why \
         (numaplace advise names them).",
        &left,
    );
    metric(
        "numaplace_last_round_timestamp_seconds",
        "gauge",
        "When the last round ran (Unix time).",
        &one(format!("{:.3}", m.last_round_unix_s)),
    );
    out
}

/// The most connections held open at once. One more evicts the oldest: a
/// local user holding connections open cannot keep a scrape out, since the
/// scraper's connection is the newest and sends its request at once.
pub(crate) const MAX_CONNECTIONS: usize = 32;
/// The longest a connection may take to send its request and read the
/// answer, in all.
const CONNECTION_TIME: Duration = Duration::from_secs(2);
/// The most bytes of a request read (a `GET /metrics` line fits many
/// times over).
const MAX_REQUEST_BYTES: usize = 4096;

/// Whether `GET /state` is answered on a listener: always on the UNIX
/// socket (mode 0600: the daemon's own user), on TCP loopback only where
/// the operator said so (`[metrics] state_over_tcp`), since any local user
/// can connect there and `/state` names the processes in scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateAccess {
    Served,
    Refused,
}

fn respond(stream: &mut dyn ReadWrite, shared: &Shared, state: StateAccess) {
    // Read until the end of the request line or headers, at most
    // MAX_REQUEST_BYTES; each read is bounded in time by the caller.
    let mut buf = vec![0u8; MAX_REQUEST_BYTES];
    let mut n = 0;
    // The whole request within CONNECTION_TIME, not each read: a client
    // sending a byte a second cannot hold a slot for long.
    let start = std::time::Instant::now();
    while n < buf.len() && start.elapsed() < CONNECTION_TIME {
        match stream.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
        if buf[..n].windows(2).any(|w| w == b"\r\n" || w == b"\n\n") {
            break;
        }
    }
    if n == 0 {
        // Closed, evicted or silent: nobody to answer.
        return;
    }
    let req = String::from_utf8_lossy(&buf[..n]);
    let line = req.lines().next().unwrap_or("");
    let asks = |path: &str| {
        line.strip_prefix("GET ")
            .and_then(|rest| rest.strip_prefix(path))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    };
    const TEXT: &str = "text/plain; version=0.0.4";
    let (status, kind, body) = if asks("/metrics") {
        let m = shared.lock().unwrap_or_else(|p| p.into_inner()).clone();
        ("200 OK", TEXT, render(&m))
    } else if asks("/state") && state == StateAccess::Refused {
        (
            "403 Forbidden",
            TEXT,
            "numaplace serves /state (the processes in scope, by name) on its UNIX socket; on \
             TCP loopback, where every local user can connect, only with [metrics] \
             state_over_tcp = true\n"
                .to_string(),
        )
    } else if asks("/state") {
        // Only the Arc is taken under the lock: a slow reader holds no one up.
        let state = Arc::clone(&shared.lock().unwrap_or_else(|p| p.into_inner()).state_json);
        if state.is_empty() {
            (
                "503 Service Unavailable",
                TEXT,
                "numaplace has not finished a round yet\n".to_string(),
            )
        } else {
            ("200 OK", "application/json", String::clone(&state))
        }
    } else {
        (
            "404 Not Found",
            TEXT,
            "numaplace serves GET /metrics and GET /state\n".to_string(),
        )
    };
    let _ = write!(
        stream,
        "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Closes a connection from outside the thread answering it: its blocked
/// read or write returns at once.
type Closer = Box<dyn FnOnce() + Send>;

/// A connection whose reads and writes can be bounded in time, so one slow
/// client cannot hold the endpoint, and that can be closed from outside.
trait Connection: ReadWrite + Send + 'static {
    fn bound(&self, limit: Duration);
    /// `None` when the socket cannot be duplicated (out of descriptors).
    fn closer(&self) -> Option<Closer>;
}

impl Connection for std::net::TcpStream {
    fn bound(&self, limit: Duration) {
        let _ = self.set_read_timeout(Some(limit));
        let _ = self.set_write_timeout(Some(limit));
    }
    fn closer(&self) -> Option<Closer> {
        let c = self.try_clone().ok()?;
        Some(Box::new(move || {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }))
    }
}

impl Connection for std::os::unix::net::UnixStream {
    fn bound(&self, limit: Duration) {
        let _ = self.set_read_timeout(Some(limit));
        let _ = self.set_write_timeout(Some(limit));
    }
    fn closer(&self) -> Option<Closer> {
        let c = self.try_clone().ok()?;
        Some(Box::new(move || {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }))
    }
}

/// The connections being answered, oldest first.
#[derive(Default)]
struct Open {
    next: u64,
    conns: std::collections::VecDeque<(u64, Closer)>,
}

impl Open {
    /// Takes a connection in, evicting the oldest when [`MAX_CONNECTIONS`]
    /// are open; its id.
    fn admit(&mut self, closer: Closer) -> u64 {
        while self.conns.len() >= MAX_CONNECTIONS {
            let Some((_, oldest)) = self.conns.pop_front() else {
                break;
            };
            oldest();
        }
        let id = self.next;
        self.next += 1;
        self.conns.push_back((id, closer));
        id
    }

    fn done(&mut self, id: u64) {
        self.conns.retain(|(i, _)| *i != id);
    }
}

/// Accepts connections in a thread of its own and answers each in a thread
/// of its own, each bounded in time and size; at most [`MAX_CONNECTIONS`]
/// open, a new one evicting the oldest, so idle connections held open by
/// anyone cannot keep a scrape out.
fn spawn_server<C: Connection>(
    incoming: impl Iterator<Item = std::io::Result<C>> + Send + 'static,
    shared: Shared,
    state: StateAccess,
) -> Result<()> {
    let open = Arc::new(Mutex::new(Open::default()));
    std::thread::Builder::new()
        .name("np-metrics".into())
        .spawn(move || {
            for mut c in incoming.flatten() {
                let Some(closer) = c.closer() else {
                    continue;
                };
                let id = open.lock().unwrap_or_else(|p| p.into_inner()).admit(closer);
                let (shared, open2) = (Arc::clone(&shared), Arc::clone(&open));
                let spawned = std::thread::Builder::new()
                    .name("np-metrics-conn".into())
                    .spawn(move || {
                        c.bound(CONNECTION_TIME);
                        respond(&mut c, &shared, state);
                        open2.lock().unwrap_or_else(|p| p.into_inner()).done(id);
                    });
                if spawned.is_err() {
                    open.lock().unwrap_or_else(|p| p.into_inner()).done(id);
                }
            }
        })?;
    Ok(())
}

/// Starts serving in a thread. The UNIX socket is bound under a temporary
/// name, made mode 0600, then renamed into place, so it is never reachable
/// with looser permissions; a stale socket at the path is replaced, anything
/// else there is an error.
///
/// `state_over_tcp`: whether a TCP listener answers `GET /state` too.
pub fn serve(listen: &Listen, shared: Shared, state_over_tcp: bool) -> Result<()> {
    match listen {
        Listen::Tcp(addr) => {
            let l = TcpListener::bind(addr).map_err(|e| {
                InputError(format!(
                    "metrics listen {addr}: cannot listen there: {e}; choose another port"
                ))
            })?;
            if state_over_tcp {
                tracing::warn!(
                    "[metrics] state_over_tcp: every local user can read GET /state on {addr}, \
                     the processes in scope by name and pid"
                );
            }
            spawn_server(
                std::iter::from_fn(move || Some(l.accept().map(|(c, _)| c))),
                shared,
                if state_over_tcp {
                    StateAccess::Served
                } else {
                    StateAccess::Refused
                },
            )
        }
        Listen::Unix(path) => {
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                if !meta.file_type().is_socket() {
                    return Err(InputError(format!(
                    "metrics socket {}: something that is not a socket is there; remove it or choose another path",
                    path.display()
                ))
                .into());
                }
            }
            // A socket a live process listens on is not taken over (its
            // owner could no longer be reached); a stale one is replaced.
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(InputError(format!(
                    "metrics socket {}: another process listens on it (another numaplace?); stop it or choose another path",
                    path.display()
                ))
                .into());
            }
            let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            let l = UnixListener::bind(&tmp).map_err(|e| {
                InputError(format!(
                    "metrics socket {}: cannot create it: {e}",
                    tmp.display()
                ))
            })?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&tmp, path).with_context(|| {
                format!("moving the metrics socket into place at {}", path.display())
            })?;
            spawn_server(
                std::iter::from_fn(move || Some(l.accept().map(|(c, _)| c))),
                shared,
                StateAccess::Served,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback() {
        assert_eq!(
            parse_listen("127.0.0.1:9464").unwrap(),
            Listen::Tcp("127.0.0.1:9464".parse().unwrap())
        );
        assert!(matches!(parse_listen("[::1]:9").unwrap(), Listen::Tcp(_)));
        assert!(matches!(
            parse_listen("unix:/run/x.sock").unwrap(),
            Listen::Unix(_)
        ));
        for bad in [
            "0.0.0.0:9464",
            "10.1.2.3:80",
            "[::]:9",
            "localhost",
            "unix:rel.sock",
            "9464",
        ] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serves_prometheus_text_on_loopback_and_unix() {
        let shared: Shared = Arc::new(Mutex::new(MetricsState {
            policy: "numad-like".into(),
            ..MetricsState::default()
        }));
        shared.lock().unwrap().totals.rounds = 7;
        // An ephemeral loopback port.
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        serve(&Listen::Tcp(addr), Arc::clone(&shared), false).unwrap();
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
        assert!(body.contains("\nnumaplace_rounds_total 7\n"), "{body}");
        assert!(
            body.contains("numaplace_info{policy=\"numad-like\""),
            "{body}"
        );

        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        serve(&Listen::Unix(sock.clone()), Arc::clone(&shared), false).unwrap();
        let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mut u = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        u.write_all(b"GET /nothing HTTP/1.0\r\n\r\n").unwrap();
        let mut body = String::new();
        u.read_to_string(&mut body).unwrap();
        assert!(body.starts_with("HTTP/1.0 404"), "{body}");

        // A regular file in the way is not removed.
        let file = dir.path().join("f");
        std::fs::write(&file, "keep").unwrap();
        assert!(serve(&Listen::Unix(file.clone()), shared, false).is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    }

    /// A dry run's actions are counted as its journal says them,
    /// `not_applied`, and it shows no `applied` line at all; a real run
    /// the other way round.
    #[test]
    fn a_dry_run_counts_its_actions_as_not_applied_never_as_applied() {
        let mut dry = MetricsState {
            dry_run: true,
            ..MetricsState::default()
        };
        dry.totals.not_applied = 3;
        dry.totals.skipped = 1;
        let text = render(&dry);
        assert!(
            text.contains("numaplace_actions_total{outcome=\"not_applied\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("numaplace_actions_total{outcome=\"skipped\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("outcome=\"applied\""), "{text}");
        let mut real = MetricsState::default();
        real.totals.applied = 2;
        let text = render(&real);
        assert!(
            text.contains("numaplace_actions_total{outcome=\"applied\"} 2\n"),
            "{text}"
        );
        assert!(!text.contains("outcome=\"not_applied\""), "{text}");
    }

    fn scrape(s: impl Read + Write) -> String {
        ask(s, b"GET /metrics HTTP/1.0\r\n\r\n")
    }

    /// Idle connections held open by anyone, three times the cap, do not
    /// keep a scrape out: the newest evicts the oldest. The 60 s timeout
    /// only bounds a failure.
    #[test]
    fn a_scrape_answers_while_idle_connections_are_held_open() {
        let shared: Shared = Arc::new(Mutex::new(MetricsState::default()));
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        serve(&Listen::Tcp(addr), Arc::clone(&shared), false).unwrap();
        let mut idle: Vec<_> = (0..3 * MAX_CONNECTIONS)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        for _ in 0..3 {
            let s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let body = scrape(s);
            assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
        }
        // The oldest idle connection was closed by the server, unanswered.
        idle[0]
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut rest = Vec::new();
        assert_eq!(idle[0].read_to_end(&mut rest).unwrap_or(0), 0);
        drop(idle);
    }

    fn ask(mut s: impl Read + Write, request: &[u8]) -> String {
        s.write_all(request).unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        body
    }

    /// `GET /state`: 503 before the first round, then the round's JSON
    /// as the daemon left it, on TCP and on the UNIX socket; other paths
    /// that merely start the same are not it.
    #[test]
    fn serves_the_state_for_top_once_a_round_has_run() {
        let shared: Shared = Arc::new(Mutex::new(MetricsState::default()));
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        serve(&Listen::Tcp(addr), Arc::clone(&shared), true).unwrap();
        let tcp = || std::net::TcpStream::connect(addr).unwrap();
        let body = ask(tcp(), b"GET /state HTTP/1.0\r\n\r\n");
        assert!(body.starts_with("HTTP/1.0 503"), "{body}");
        assert!(body.contains("not finished a round yet"), "{body}");

        shared.lock().unwrap().state_json = Arc::new("{\"format\":1}".into());
        let body = ask(tcp(), b"GET /state HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
        assert!(body.contains("Content-Type: application/json"), "{body}");
        assert!(body.ends_with("\r\n\r\n{\"format\":1}"), "{body}");
        for other in [
            "GET /stateful HTTP/1.0\r\n\r\n",
            "POST /state HTTP/1.0\r\n\r\n",
        ] {
            let body = ask(tcp(), other.as_bytes());
            assert!(body.starts_with("HTTP/1.0 404"), "{other}: {body}");
            assert!(body.contains("GET /state"), "{body}");
        }
        // The metrics are still there, beside it.
        let body = ask(tcp(), b"GET /metrics\r\n\r\n");
        assert!(body.contains("numaplace_rounds_total"), "{body}");

        // TCP loopback without the operator's word: every local user could
        // read which processes run, so /state is refused, /metrics served.
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = probe.local_addr().unwrap();
        drop(probe);
        serve(&Listen::Tcp(closed), Arc::clone(&shared), false).unwrap();
        let body = ask(
            std::net::TcpStream::connect(closed).unwrap(),
            b"GET /state HTTP/1.0\r\n\r\n",
        );
        assert!(body.starts_with("HTTP/1.0 403"), "{body}");
        assert!(body.contains("state_over_tcp"), "{body}");
        assert!(!body.contains("format"), "{body}");
        let body = ask(
            std::net::TcpStream::connect(closed).unwrap(),
            b"GET /metrics\r\n\r\n",
        );
        assert!(body.contains("numaplace_rounds_total"), "{body}");

        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        serve(&Listen::Unix(sock.clone()), shared, false).unwrap();
        let body = ask(
            std::os::unix::net::UnixStream::connect(&sock).unwrap(),
            b"GET /state HTTP/1.0\r\n\r\n",
        );
        assert!(body.ends_with("{\"format\":1}"), "{body}");
    }

    /// Idle connections held open do not keep `top` out either: the
    /// newest evicts the oldest, whatever it asks.
    #[test]
    fn the_state_answers_while_idle_connections_are_held_open() {
        let shared: Shared = Arc::new(Mutex::new(MetricsState {
            state_json: Arc::new("{}".into()),
            ..MetricsState::default()
        }));
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        serve(&Listen::Unix(sock.clone()), shared, false).unwrap();
        let idle: Vec<_> = (0..2 * MAX_CONNECTIONS)
            .map(|_| std::os::unix::net::UnixStream::connect(&sock).unwrap())
            .collect();
        let s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let body = ask(s, b"GET /state HTTP/1.0\r\n\r\n");
        assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
        drop(idle);
    }

    /// The table of open connections: the oldest goes first, a finished
    /// one leaves, never more than the cap.
    #[test]
    fn the_oldest_connection_is_evicted_at_the_cap() {
        let closed = Arc::new(Mutex::new(Vec::new()));
        let mut open = Open::default();
        let closer = |i: usize| -> Closer {
            let closed = Arc::clone(&closed);
            Box::new(move || closed.lock().unwrap().push(i))
        };
        let ids: Vec<u64> = (0..MAX_CONNECTIONS)
            .map(|i| open.admit(closer(i)))
            .collect();
        assert!(closed.lock().unwrap().is_empty());
        open.done(ids[0]);
        open.admit(closer(100));
        assert!(closed.lock().unwrap().is_empty(), "a slot was free");
        open.admit(closer(101));
        open.admit(closer(102));
        assert_eq!(*closed.lock().unwrap(), vec![1, 2]);
        assert_eq!(open.conns.len(), MAX_CONNECTIONS);
    }

    /// A socket a live endpoint serves is not taken over; a stale one
    /// (nobody listens) is replaced.
    #[test]
    fn a_live_unix_socket_is_not_taken_over_and_a_stale_one_is_replaced() {
        let shared: Shared = Arc::new(Mutex::new(MetricsState::default()));
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("m.sock");
        serve(&Listen::Unix(sock.clone()), Arc::clone(&shared), false).unwrap();
        let e = serve(&Listen::Unix(sock.clone()), Arc::clone(&shared), false).unwrap_err();
        assert!(
            format!("{e}").contains("another process listens on it"),
            "{e}"
        );
        assert!(e.downcast_ref::<InputError>().is_some());
        // The first is still reachable.
        let body = scrape(std::os::unix::net::UnixStream::connect(&sock).unwrap());
        assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");

        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        assert!(stale.exists());
        serve(&Listen::Unix(stale.clone()), shared, false).unwrap();
        let body = scrape(std::os::unix::net::UnixStream::connect(&stale).unwrap());
        assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
    }

    #[test]
    fn a_missing_socket_directory_and_a_busy_port_are_input_errors() {
        let e = parse_listen("unix:/nonexistent/dir/sock").unwrap_err();
        assert!(e.0.contains("/nonexistent/dir does not exist"), "{e}");
        let busy = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = busy.local_addr().unwrap();
        let shared: Shared = Arc::new(Mutex::new(MetricsState::default()));
        let e = serve(&Listen::Tcp(addr), shared, false).unwrap_err();
        assert!(e.downcast_ref::<InputError>().is_some(), "{e}");
        assert_eq!(crate::error::exit_code(&e), 2);
    }
}
