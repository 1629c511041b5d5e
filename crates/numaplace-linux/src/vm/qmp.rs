//! A client of QEMU's machine protocol (QMP) on a UNIX socket, asking a
//! VM for its vCPU threads: which host thread runs which vCPU
//! (`query-cpus-fast`, with the guest NUMA node and socket of each vCPU
//! where the machine has them), the guest's name (`query-name`) and
//! whether KVM runs it (`query-kvm`).
//!
//! The exchange follows QEMU's `docs/interop/qmp-spec.rst`: the server
//! speaks first (a greeting, `{"QMP": {...}}`), the client leaves
//! capabilities negotiation with `qmp_capabilities`, then each command
//! gets one `return` or `error` reply, with the command's `id` echoed;
//! asynchronous `event` messages may come in between and are skipped.
//! Every message is one JSON object ending in a newline.
//!
//! Everything here is bounded: the connect does not wait (a full backlog
//! is "busy"), the whole exchange has one deadline ([`DEADLINE`]), a line
//! is at most [`MAX_LINE_BYTES`] and all lines together at most
//! [`MAX_TOTAL_BYTES`]. What comes back is not trusted here: the answer
//! carries the pid of the process that serves the socket (`SO_PEERCRED`),
//! and, where the kernel has it, a pidfd of that very process
//! (`SO_PEERPIDFD`, Linux 6.5), for `vm::discover` to check (see there).
//!
//! QEMU's monitor chardev serves one client at a time: while another
//! client (libvirt, a management tool, a `socat` left open) holds the
//! socket, the connection is queued but never greeted, and the deadline
//! ends it; the error says so.

use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use thiserror::Error;

/// The whole exchange, connect to last reply: QEMU answers these queries
/// from its main loop in well under a millisecond when it is not busy.
pub const DEADLINE: Duration = Duration::from_millis(500);
/// One message: `query-cpus-fast` of a 4,096-vCPU machine (QEMU's largest
/// x86 `maxcpus`) is about 1 MB.
pub const MAX_LINE_BYTES: usize = 2 << 20;
/// All messages of one exchange, events included.
pub const MAX_TOTAL_BYTES: usize = 4 << 20;
/// vCPUs accepted in one answer.
pub const MAX_VCPUS: usize = 8192;
/// The longest guest name accepted (libvirt's and QEMU's are far shorter).
pub const MAX_NAME_BYTES: usize = 256;

/// One vCPU as QEMU reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QmpVcpu {
    /// QEMU's `cpu-index`, the vCPU's index (as in `CPU <n>/KVM`).
    pub index: u32,
    /// The host thread that runs it.
    pub tid: i32,
    /// The guest NUMA node it belongs to (`props.node-id`), where the
    /// machine has NUMA nodes.
    pub node: Option<u32>,
    /// Its guest socket (`props.socket-id`), where the machine says.
    pub socket: Option<u32>,
}

/// What a QMP socket answered, and who answered it.
#[derive(Debug)]
pub struct QmpAnswer {
    /// The process serving the socket (`SO_PEERCRED`: the one that called
    /// `listen`), as the kernel sees it; untrusted until checked.
    pub server_pid: i32,
    /// A pidfd of that process (`SO_PEERPIDFD`), where the kernel has it:
    /// it says whether that very process is still alive, whatever reused
    /// its pid since.
    pub server_pidfd: Option<OwnedFd>,
    /// The vCPU threads, by index.
    pub vcpus: Vec<QmpVcpu>,
    /// The guest's name (`-name`), if it has one.
    pub name: Option<String>,
    /// Whether KVM runs the guest (`query-kvm`); `None` if QEMU would not say.
    pub kvm: Option<bool>,
}

/// Why a socket gave no answer. Every variant names the socket.
#[derive(Debug, Error)]
pub enum QmpError {
    #[error("{path}: cannot connect: {source}")]
    /// The socket could not be connected to.
    Connect {
        /// The QMP socket.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    #[error(
        "{path}: busy: its backlog is full (QEMU's monitor serves one client at a time, and \
         others wait)"
    )]
    /// The monitor's backlog is full.
    Backlog {
        /// The QMP socket.
        path: PathBuf,
    },
    #[error(
        "{path}: no greeting within {ms} ms: another client holds it (QEMU's monitor serves \
         one client at a time: use a second -qmp socket for numaplace) or it is not a QMP \
         socket"
    )]
    /// No greeting in time: another client holds the monitor, or it is not QMP.
    NoGreeting {
        /// The QMP socket.
        path: PathBuf,
        /// The time allowed, ms.
        ms: u128,
    },
    #[error("{path}: no reply to {command} within {ms} ms (all of the exchange)")]
    /// No reply in time.
    Timeout {
        /// The QMP socket.
        path: PathBuf,
        /// The command (`query-cpus-fast`).
        command: &'static str,
        /// The time allowed, ms.
        ms: u128,
    },
    #[error("{path}: a message longer than {max} bytes: not QMP, ignored")]
    /// A message longer than QMP's.
    LineTooLong {
        /// The QMP socket.
        path: PathBuf,
        /// The most bytes allowed.
        max: usize,
    },
    #[error("{path}: more than {max} bytes in one exchange: not QMP, ignored")]
    /// More bytes in one exchange than QMP sends.
    TooMuch {
        /// The QMP socket.
        path: PathBuf,
        /// The most bytes allowed.
        max: usize,
    },
    #[error("{path}: the server closed the connection {during}")]
    /// QEMU closed the connection.
    Closed {
        /// The QMP socket.
        path: PathBuf,
        /// When, in words (`before query-cpus-fast was sent`).
        during: String,
    },
    #[error("{path}: not QMP: {what}")]
    /// An answer that is not QMP.
    Nonsense {
        /// The QMP socket.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
    #[error("{path}: {command} failed: {class}: {desc}")]
    /// QEMU refused the command.
    Refused {
        /// The QMP socket.
        path: PathBuf,
        /// The command (`query-cpus-fast`).
        command: &'static str,
        /// QMP's error class.
        class: String,
        /// QMP's description.
        desc: String,
    },
    #[error("{path}: {source}")]
    /// Reading or writing the socket failed.
    Io {
        /// The QMP socket.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl QmpError {
    /// A short name of what went wrong, the same for the same trouble: a
    /// warning is said once per socket and kind.
    pub fn kind(&self) -> &'static str {
        match self {
            QmpError::Connect { .. } => "connect",
            QmpError::Backlog { .. } => "backlog",
            QmpError::NoGreeting { .. } => "no greeting",
            QmpError::Timeout { .. } => "timeout",
            QmpError::LineTooLong { .. } => "line too long",
            QmpError::TooMuch { .. } => "too much",
            QmpError::Closed { .. } => "closed",
            QmpError::Nonsense { .. } => "nonsense",
            QmpError::Refused { .. } => "refused",
            QmpError::Io { .. } => "io",
        }
    }
}

/// Asks the QMP server on `path` for its vCPUs, name and accelerator,
/// within [`DEADLINE`].
pub fn query(path: &Path) -> Result<QmpAnswer, QmpError> {
    QmpConnection::open(path)?.ask()
}

/// [`query`] with another deadline (tests).
pub fn query_within(path: &Path, deadline: Duration) -> Result<QmpAnswer, QmpError> {
    QmpConnection::open_within(path, deadline)?.ask()
}

/// A connection to a QMP socket, before anything is said: who serves it
/// is known ([`QmpConnection::server_pid`]), so a caller can hang up
/// without talking to a process it would not believe.
pub struct QmpConnection<'a> {
    path: &'a Path,
    stream: UnixStream,
    end: Instant,
    deadline: Duration,
    pending: Vec<u8>,
    total: usize,
    next_id: u32,
    server_pid: i32,
    server_pidfd: Option<OwnedFd>,
}

impl<'a> QmpConnection<'a> {
    /// Connects, with [`DEADLINE`] for all of the exchange from now.
    pub fn open(path: &'a Path) -> Result<Self, QmpError> {
        Self::open_within(path, DEADLINE)
    }

    /// Connects to `path` and reads the greeting, within `deadline`.
    pub fn open_within(path: &'a Path, deadline: Duration) -> Result<Self, QmpError> {
        let end = Instant::now() + deadline;
        let stream = connect(path)?;
        let (server_pid, server_pidfd) = peer(&stream, path)?;
        Ok(QmpConnection {
            path,
            stream,
            end,
            deadline,
            pending: Vec::new(),
            total: 0,
            next_id: 0,
            server_pid,
            server_pidfd,
        })
    }

    /// The pid of the process serving the socket (`SO_PEERCRED`; 0 if it
    /// is in a PID namespace this one cannot see).
    pub fn server_pid(&self) -> i32 {
        self.server_pid
    }

    /// The exchange: greeting, capabilities, the queries.
    pub fn ask(mut self) -> Result<QmpAnswer, QmpError> {
        self.greeting()?;
        self.execute("qmp_capabilities")?;
        let cpus = self.execute("query-cpus-fast")?;
        let vcpus = parse_cpus(self.path, cpus)?;
        let name = parse_name(self.path, self.execute("query-name")?)?;
        // A build without query-kvm: not a reason to drop the rest.
        let kvm = match self.execute("query-kvm") {
            Ok(v) => v.get("enabled").and_then(Value::as_bool),
            Err(QmpError::Refused { .. }) => None,
            Err(e) => return Err(e),
        };
        Ok(QmpAnswer {
            server_pid: self.server_pid,
            server_pidfd: self.server_pidfd.take(),
            vcpus,
            name,
            kvm,
        })
    }
}

/// What one line of the server was.
enum Message {
    Greeting,
    Return(Value, Option<Value>),
    Error(String, String, Option<Value>),
}

impl QmpConnection<'_> {
    fn path(&self) -> PathBuf {
        self.path.to_path_buf()
    }

    fn greeting(&mut self) -> Result<(), QmpError> {
        match self.message("the greeting") {
            Ok(Message::Greeting) => Ok(()),
            Ok(_) => Err(QmpError::Nonsense {
                path: self.path(),
                what: "a reply before the greeting".into(),
            }),
            Err(QmpError::Timeout { .. }) => Err(QmpError::NoGreeting {
                path: self.path(),
                ms: self.deadline.as_millis(),
            }),
            Err(e) => Err(e),
        }
    }

    /// Sends `command` and waits for its reply, skipping events.
    fn execute(&mut self, command: &'static str) -> Result<Value, QmpError> {
        self.next_id += 1;
        let id = format!("numaplace-{}", self.next_id);
        let mut line = serde_json::to_vec(&serde_json::json!({"execute": command, "id": id}))
            .expect("a JSON object serializes");
        line.push(b'\n');
        self.write(&line, command)?;
        let (reply, echoed) = match self.message(command)? {
            Message::Greeting => {
                return Err(QmpError::Nonsense {
                    path: self.path(),
                    what: format!("a second greeting in reply to {command}"),
                });
            }
            Message::Return(v, echoed) => (Ok(v), echoed),
            Message::Error(class, desc, echoed) => (
                Err(QmpError::Refused {
                    path: self.path(),
                    command,
                    class,
                    desc,
                }),
                echoed,
            ),
        };
        match echoed {
            // QEMU echoes the id; a reply without one is to us too.
            None => reply,
            Some(Value::String(s)) if s == id => reply,
            Some(other) => Err(QmpError::Nonsense {
                path: self.path(),
                what: format!("a reply to {command} with id {other}, not {id:?}"),
            }),
        }
    }

    fn write(&mut self, bytes: &[u8], command: &'static str) -> Result<(), QmpError> {
        let left = self.left(command)?;
        self.stream
            .set_write_timeout(Some(left))
            .map_err(|source| self.io(source))?;
        match self.stream.write_all(bytes) {
            Ok(()) => Ok(()),
            Err(e) if is_timeout(&e) => Err(self.timeout(command)),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(QmpError::Closed {
                path: self.path(),
                during: format!("before {command} was sent"),
            }),
            Err(e) => Err(self.io(e)),
        }
    }

    /// The next message that is not an event.
    fn message(&mut self, during: &'static str) -> Result<Message, QmpError> {
        loop {
            let line = self.line(during)?;
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(text).map_err(|e| QmpError::Nonsense {
                path: self.path(),
                what: format!("a line that is not JSON ({e}): {}", excerpt(text)),
            })?;
            let Value::Object(mut o) = v else {
                return Err(QmpError::Nonsense {
                    path: self.path(),
                    what: format!("a message that is not a JSON object: {}", excerpt(text)),
                });
            };
            if o.contains_key("QMP") {
                return Ok(Message::Greeting);
            }
            if o.contains_key("event") {
                continue;
            }
            let id = o.remove("id");
            if let Some(r) = o.remove("return") {
                return Ok(Message::Return(r, id));
            }
            if let Some(e) = o.remove("error") {
                let field = |k: &str| {
                    e.get(k)
                        .and_then(Value::as_str)
                        .map_or_else(|| "?".to_string(), |s| excerpt(s).to_string())
                };
                return Ok(Message::Error(field("class"), field("desc"), id));
            }
            return Err(QmpError::Nonsense {
                path: self.path(),
                what: format!(
                    "a message that is no greeting, reply, error or event: {}",
                    excerpt(text)
                ),
            });
        }
    }

    /// The next line (without its newline), reading as needed before the
    /// deadline, within the byte limits.
    fn line(&mut self, during: &'static str) -> Result<Vec<u8>, QmpError> {
        let mut searched = 0;
        loop {
            if let Some(i) = self.pending[searched..].iter().position(|&b| b == b'\n') {
                let rest = self.pending.split_off(searched + i + 1);
                let mut line = std::mem::replace(&mut self.pending, rest);
                line.pop();
                return Ok(line);
            }
            searched = self.pending.len();
            if self.pending.len() > MAX_LINE_BYTES {
                return Err(QmpError::LineTooLong {
                    path: self.path(),
                    max: MAX_LINE_BYTES,
                });
            }
            let left = self.left(during)?;
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|source| self.io(source))?;
            let mut chunk = [0u8; 16 << 10];
            let n = match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(QmpError::Closed {
                        path: self.path(),
                        during: format!("while numaplace waited for {during}"),
                    });
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_timeout(&e) => return Err(self.timeout(during)),
                Err(e) => return Err(self.io(e)),
            };
            self.total += n;
            if self.total > MAX_TOTAL_BYTES {
                return Err(QmpError::TooMuch {
                    path: self.path(),
                    max: MAX_TOTAL_BYTES,
                });
            }
            self.pending.extend_from_slice(&chunk[..n]);
        }
    }

    /// Time left before the deadline, or the timeout error.
    fn left(&self, during: &'static str) -> Result<Duration, QmpError> {
        let left = self.end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.timeout(during));
        }
        Ok(left)
    }

    fn timeout(&self, command: &'static str) -> QmpError {
        QmpError::Timeout {
            path: self.path(),
            command,
            ms: self.deadline.as_millis(),
        }
    }

    fn io(&self, source: io::Error) -> QmpError {
        QmpError::Io {
            path: self.path(),
            source,
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

mod reply;
mod socket;
#[cfg(test)]
mod tests;

use reply::{excerpt, parse_cpus, parse_name};
pub use socket::pidfd_alive;
use socket::{connect, peer};
