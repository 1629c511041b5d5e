//! Where `top`'s frames come from: a running daemon's `GET /state`, read
//! with a deadline and a size cap, or `top`'s own collection rounds (the
//! policy deciding on the live machine, nothing applied). Either runs in a
//! thread of its own and leaves its latest frame, or why there is none, in
//! a [`Latest`] the view reads.

use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numaplace_model::Snapshot;
use numaplace_model::world::JournalEntry;
use numaplace_policy::engine::{Observer, RoundReport};

use numaplace::daemon::metrics::Listen;
use numaplace::top_state::{Feed, TopState};
pub(crate) use numaplace_view::parse_answer;

pub(crate) use numaplace_view::MAX_ANSWER_BYTES;
/// The longest one request to the daemon may take, connecting included.
pub(crate) const DEADLINE: Duration = Duration::from_secs(2);

/// The latest frame, or why there is none.
#[derive(Debug, Default)]
pub(crate) struct Latest {
    pub state: Option<TopState>,
    /// The last try failed: why (the frame, if any, is older).
    pub error: Option<String>,
    /// When the frame was received.
    pub received: Option<Instant>,
    /// A request under way since then (a daemon that does not accept hangs
    /// the connect; the view says so once it is older than the deadline).
    pub asking_since: Option<Instant>,
}

pub(crate) type Shared = Arc<Mutex<Latest>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Latest> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// Asks the daemon at `listen` every `interval` until `stop`.
pub(crate) fn spawn_daemon_reader(
    listen: Listen,
    interval: Duration,
    latest: Shared,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("np-top-read".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                lock(&latest).asking_since = Some(Instant::now());
                let answer = fetch(&listen, DEADLINE);
                let mut l = lock(&latest);
                l.asking_since = None;
                match answer {
                    Ok(s) => {
                        l.state = Some(s);
                        l.error = None;
                        l.received = Some(Instant::now());
                    }
                    Err(e) => l.error = Some(e),
                }
                drop(l);
                sleep_unless(&stop, interval);
            }
        })
}

/// Sleeps `d` in short steps, ending early once `stop` is set.
pub(crate) fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
    }
}

trait Stream: Read + Write {
    fn limit(&self, d: Duration) -> std::io::Result<()>;
}

impl Stream for std::net::TcpStream {
    fn limit(&self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d))?;
        self.set_write_timeout(Some(d))
    }
}

impl Stream for std::os::unix::net::UnixStream {
    fn limit(&self, d: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(d))?;
        self.set_write_timeout(Some(d))
    }
}

/// One `GET /state`: the whole exchange within `deadline`, at most
/// [`MAX_ANSWER_BYTES`] read; what went wrong in one line.
pub(crate) fn fetch(listen: &Listen, deadline: Duration) -> Result<TopState, String> {
    let start = Instant::now();
    let mut s: Box<dyn Stream> = match listen {
        Listen::Tcp(addr) => Box::new(
            std::net::TcpStream::connect_timeout(addr, deadline)
                .map_err(|e| format!("cannot connect to {addr}: {e}"))?,
        ),
        Listen::Unix(path) => Box::new(
            std::os::unix::net::UnixStream::connect(path)
                .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?,
        ),
    };
    let left = || {
        deadline
            .checked_sub(start.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("no whole answer within {deadline:?}"))
    };
    s.limit(left()?).map_err(|e| format!("socket: {e}"))?;
    s.write_all(b"GET /state HTTP/1.0\r\n\r\n")
        .map_err(|e| format!("sending the request: {e}"))?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 64 << 10];
    loop {
        s.limit(left()?).map_err(|e| format!("socket: {e}"))?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if answer.len() + n > MAX_ANSWER_BYTES {
                    return Err(format!(
                        "the answer is larger than {} MiB; is that a numaplace daemon?",
                        MAX_ANSWER_BYTES >> 20
                    ));
                }
                answer.extend_from_slice(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!("no whole answer within {deadline:?}"));
            }
            Err(e) => return Err(format!("reading the answer: {e}")),
        }
    }
    parse_answer(&answer)
}

/// [`fetch`] in a thread of its own, waited for at most `deadline` and a
/// second more: a connect that blocks (the connecting side of a UNIX socket
/// whose listener's backlog is full waits for room, and no deadline of
/// `std` bounds it) ends the wait, not the program (`--once`).
pub(crate) fn fetch_within(listen: &Listen, deadline: Duration) -> Result<TopState, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let l = listen.clone();
    std::thread::Builder::new()
        .name("np-top-fetch".into())
        .spawn(move || {
            let _ = tx.send(fetch(&l, deadline));
        })
        .map_err(|e| format!("cannot start a thread to ask it: {e}"))?;
    rx.recv_timeout(deadline + Duration::from_secs(1))
        .unwrap_or_else(|_| {
            Err(format!(
                "no answer within {deadline:?} (not even a connection: it accepts none)"
            ))
        })
}

/// `top`'s own loop: each round's frame into `latest`, until `stop`.
pub(crate) struct LocalObserver<'a> {
    pub feed: Feed<'a>,
    pub latest: Shared,
    pub stop: Arc<AtomicBool>,
    /// Stop after this many rounds (`--once`: the first is the baseline).
    pub max_rounds: Option<u64>,
    pub rounds: u64,
}

impl Observer for LocalObserver<'_> {
    fn entry(&mut self, _: &Snapshot, e: &JournalEntry) {
        self.feed.builder.entry(e);
    }

    fn round_done(&mut self, snap: &Snapshot, report: &RoundReport) -> ControlFlow<()> {
        let frame = self.feed.frame(snap, report);
        let mut l = lock(&self.latest);
        l.state = Some(frame);
        l.error = None;
        l.received = Some(Instant::now());
        self.rounds += 1;
        if self.stop.load(Ordering::Relaxed) || self.max_rounds.is_some_and(|m| self.rounds >= m) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

#[cfg(test)]
mod tests;
