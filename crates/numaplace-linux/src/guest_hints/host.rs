//! The host's side: each round, what every guest that speaks says, checked
//! against the VMs the collector recognised.
//!
//! **Whose socket.** A socket belongs to the process that listens on it
//! (`SO_PEERCRED`), read once when numaplace connects, with that process's
//! start time; the hints count only while that very process (pid and start
//! time) is a VM of the round's snapshot. A path or a name proves nothing.
//! libvirt opens a chardev's listening socket itself and passes the fd to
//! QEMU (`qemuOpenChrChardevUNIXSocket`, "for chardev FD passing"), so
//! there `SO_PEERCRED` names libvirt's daemon, which called `listen()`;
//! then the socket belongs to the one recognised VM whose open files hold
//! the listening socket (its inode from `/proc/net/unix`, found in
//! `/proc/<pid>/fd`).
//!
//! **Bounds.** Per socket and round at most [`MAX_ROUND_BYTES`] are read,
//! without blocking, and at most [`MAX_LINES_PER_ROUND`] lines parsed; a
//! line longer than the protocol's `MAX_LINE_BYTES` is skipped up to its
//! newline. A guest that fills the budget is flooding: its hints are
//! ignored that round. vCPU ids the VM does not have are dropped. Every
//! kind of trouble is reported at most once per [`REPORT_EVERY`] per
//! socket. A guest that sends no `set` for [`EXPIRE_INTERVALS`] of its
//! announced intervals (within [`MIN_EXPIRY`]..=[`MAX_EXPIRY`]) has no
//! hints any more.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use numaplace_model::{CpuSet, GroupKind, Snapshot, TaskId};
use numaplace_parse::guest_hints::{MAX_LINE_BYTES, Message, parse_line};

use super::socket::{
    ConnectError, connect_nonblocking, expand, holds_socket, listening_inode, peer_pid,
};
use crate::SysRoot;
use crate::procfs::ProcReader;

/// Bytes read per socket and round at most.
pub const MAX_ROUND_BYTES: usize = 64 * 1024;
/// Lines parsed per socket and round at most: a guest sending every
/// 100 ms (the shortest interval), three lines each, fills a minute of the
/// host's rounds with 1,800.
pub const MAX_LINES_PER_ROUND: usize = 4096;
/// The same trouble of a socket is said at most this often.
pub const REPORT_EVERY: Duration = Duration::from_secs(600);
/// A socket that could not be followed is tried again after this.
pub const RETRY_AFTER: Duration = Duration::from_secs(10);
/// Hints expire after this many of the guest's intervals without a `set`.
pub const EXPIRE_INTERVALS: u32 = 3;
/// Hints expire no sooner than this after the last `set`.
pub const MIN_EXPIRY: Duration = Duration::from_secs(2);
/// Hints expire no later than this after the last `set`.
pub const MAX_EXPIRY: Duration = Duration::from_secs(60);

/// What one round found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HintRound {
    /// Per VM (pid), the vCPU indexes its guest hints and the VM has; a VM
    /// is here only while its guest's hints are live.
    pub hints: BTreeMap<i32, BTreeSet<u32>>,
    /// Trouble to report (already rate-limited).
    pub notes: Vec<String>,
    /// What changed since the last round: tags and clears, for the log.
    pub changes: Vec<String>,
}

/// A VM of the snapshot: its identity, label and vCPU indexes.
struct Vm {
    id: TaskId,
    label: String,
    vcpus: BTreeSet<u32>,
}

fn vms(snap: &Snapshot) -> HashMap<i32, Vm> {
    let mut out: HashMap<i32, Vm> = snap
        .groups
        .iter()
        .filter(|g| matches!(g.kind, GroupKind::Vm { .. }))
        .map(|g| {
            let vm = Vm {
                id: g.id(),
                label: g.label(),
                vcpus: BTreeSet::new(),
            };
            (g.pid, vm)
        })
        .collect();
    for t in &snap.tasks {
        if let (Some(v), Some(vm)) = (t.vcpu, out.get_mut(&t.tgid)) {
            vm.vcpus.insert(v);
        }
    }
    out
}

/// One followed socket.
struct Conn {
    stream: UnixStream,
    /// The process serving it, as found when connecting.
    vm: TaskId,
    /// The start of a line whose newline has not come yet.
    partial: Vec<u8>,
    /// Inside a line longer than the protocol allows: skip to its end.
    skipping: bool,
    /// The guest's tagged vCPUs and when they expire, once it sent a `set`.
    tagged: Option<(CpuSet, Instant)>,
}

/// Reads what the read budget allows; `(bytes, eof, budget used up)`.
fn drain(stream: &mut UnixStream, buf: &mut Vec<u8>) -> io::Result<(bool, bool)> {
    let mut chunk = [0u8; 8192];
    while buf.len() < MAX_ROUND_BYTES {
        let want = chunk.len().min(MAX_ROUND_BYTES - buf.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) => return Ok((true, false)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((false, false)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((false, true))
}

/// Once per [`REPORT_EVERY`] per key, with how many were held back.
#[derive(Default)]
struct Reports {
    last: HashMap<String, (Instant, u64)>,
}

impl Reports {
    fn say(&mut self, notes: &mut Vec<String>, key: String, now: Instant, text: String) {
        match self.last.get_mut(&key) {
            Some((at, held)) if now.duration_since(*at) < REPORT_EVERY => *held += 1,
            Some((at, held)) => {
                let more = if *held > 0 {
                    format!(" ({held} more times since the last report)")
                } else {
                    String::new()
                };
                notes.push(format!("{text}{more}"));
                *at = now;
                *held = 0;
            }
            None => {
                notes.push(text);
                self.last.insert(key, (now, 0));
            }
        }
    }
}

/// The guests' hints, followed over the rounds.
pub struct GuestHints {
    patterns: Vec<String>,
    procs: ProcReader,
    conns: BTreeMap<PathBuf, Conn>,
    retry: BTreeMap<PathBuf, Instant>,
    reports: Reports,
    last: BTreeMap<i32, BTreeSet<u32>>,
}

impl GuestHints {
    /// Follows the sockets `patterns` match (checked with
    /// [`super::validate_patterns`]); `root` is where the peers' `/proc` is.
    pub fn new(root: SysRoot, patterns: Vec<String>) -> GuestHints {
        GuestHints {
            patterns,
            procs: ProcReader::new(root),
            conns: BTreeMap::new(),
            retry: BTreeMap::new(),
            reports: Reports::default(),
            last: BTreeMap::new(),
        }
    }

    /// How many sockets are followed now.
    pub fn connected(&self) -> usize {
        self.conns.len()
    }

    /// The sockets followed whose guest has sent no `set` yet: the agent is
    /// not running, or QEMU has not accepted this client (it serves one at
    /// a time).
    pub fn silent(&self) -> Vec<PathBuf> {
        self.conns
            .iter()
            .filter(|(_, c)| c.tagged.is_none())
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Bytes of a line begun and not ended on `path` (the guest sent text
    /// without its newline and then nothing): 0 where no line is pending.
    pub fn pending_bytes(&self, path: &Path) -> usize {
        self.conns.get(path).map_or(0, |c| c.partial.len())
    }

    /// One round: connects to new sockets, reads what the guests sent, and
    /// returns each VM's live hints.
    pub fn poll(&mut self, snap: &Snapshot, now: Instant) -> HintRound {
        let mut round = HintRound::default();
        let vms = vms(snap);
        self.connect_new(&vms, now, &mut round.notes);
        let paths: Vec<PathBuf> = self.conns.keys().cloned().collect();
        for path in paths {
            let keep = self.read_one(&path, &vms, now, &mut round);
            if !keep {
                self.conns.remove(&path);
                self.retry.insert(path, now + RETRY_AFTER);
            }
        }
        self.changes(&vms, &mut round);
        round
    }

    fn connect_new(&mut self, vms: &HashMap<i32, Vm>, now: Instant, notes: &mut Vec<String>) {
        let (paths, cut) = expand(&self.patterns);
        if cut {
            self.reports.say(
                notes,
                "expand".into(),
                now,
                format!(
                    "guest hints: the sockets' patterns match more than {} sockets or \
                     directory entries; the rest are not read (narrow [guest_hints] sockets)",
                    super::socket::MAX_SOCKETS
                ),
            );
        }
        self.retry.retain(|p, at| *at > now && paths.contains(p));
        for path in paths {
            if self.conns.contains_key(&path) || self.retry.contains_key(&path) {
                continue;
            }
            match self.connect_one(&path, vms) {
                Ok(conn) => {
                    tracing::debug!("guest hints: following {}", path.display());
                    self.conns.insert(path, conn);
                }
                Err(why) => {
                    self.reports.say(
                        notes,
                        format!("connect {}", path.display()),
                        now,
                        format!("guest hints: {}: {why}; ignored", path.display()),
                    );
                    self.retry.insert(path, now + RETRY_AFTER);
                }
            }
        }
    }

    fn connect_one(&self, path: &std::path::Path, vms: &HashMap<i32, Vm>) -> Result<Conn, String> {
        let stream = connect_nonblocking(path).map_err(|e: ConnectError| e.to_string())?;
        let pid = peer_pid(&stream).map_err(|e| format!("cannot tell who serves it: {e}"))?;
        let start_time = self
            .procs
            .stat(pid, pid)
            .map_err(|e| format!("served by pid {pid}, which cannot be read: {e}"))?
            .start_time;
        let id = TaskId {
            tid: pid,
            start_time,
        };
        let vm = match vms.get(&pid) {
            Some(vm) if vm.id == id => id,
            _ => self.holder(path, vms).ok_or_else(|| {
                format!(
                    "served by pid {pid}, which is not a VM numaplace recognises, and no such VM \
                     holds the listening socket (a port's socket must be its QEMU's)"
                )
            })?,
        };
        Ok(Conn {
            stream,
            vm,
            partial: Vec::new(),
            skipping: false,
            tagged: None,
        })
    }

    /// The one VM holding the socket listening at `path`, when the
    /// listener was opened by another process (libvirt) and passed to it.
    fn holder(&self, path: &std::path::Path, vms: &HashMap<i32, Vm>) -> Option<TaskId> {
        let root = self.procs.root();
        let inode = listening_inode(root, path)?;
        let mut holders = vms
            .iter()
            .filter(|&(&pid, vm)| {
                holds_socket(root, pid, inode)
                    && self
                        .procs
                        .stat(pid, pid)
                        .is_ok_and(|st| st.start_time == vm.id.start_time)
            })
            .map(|(_, vm)| vm.id);
        let first = holders.next()?;
        holders.next().is_none().then_some(first)
    }

    /// Reads one socket; false when it is to be dropped.
    fn read_one(
        &mut self,
        path: &PathBuf,
        vms: &HashMap<i32, Vm>,
        now: Instant,
        round: &mut HintRound,
    ) -> bool {
        let conn = self.conns.get_mut(path).expect("listed above");
        let Some(vm) = vms.get(&conn.vm.tid).filter(|vm| vm.id == conn.vm) else {
            tracing::debug!("guest hints: {}: its VM is gone", path.display());
            return false;
        };
        let mut buf = Vec::new();
        let (eof, flooded) = match drain(&mut conn.stream, &mut buf) {
            Ok(r) => r,
            Err(e) => {
                self.reports.say(
                    &mut round.notes,
                    format!("read {}", path.display()),
                    now,
                    format!("guest hints: {}: cannot read: {e}", path.display()),
                );
                return false;
            }
        };
        let (msgs, bad, first_bad) = split_lines(conn, &buf);
        let who = format!("{} (pid {}) on {}", vm.label, vm.id.tid, path.display());
        if bad > 0 {
            self.reports.say(
                &mut round.notes,
                format!("bad {}", path.display()),
                now,
                format!(
                    "guest hints: {who}: {bad} line(s) refused and ignored, the first: {}",
                    first_bad.unwrap_or_default()
                ),
            );
        }
        for m in msgs {
            apply(conn, m, now);
        }
        if flooded {
            self.reports.say(
                &mut round.notes,
                format!("flood {}", path.display()),
                now,
                format!(
                    "guest hints: {who}: the guest sends more than {MAX_ROUND_BYTES} bytes a \
                     round; its hints are ignored while it does"
                ),
            );
        } else if let Some((tagged, expires)) = &conn.tagged {
            if *expires <= now {
                conn.tagged = None;
            } else {
                let ids: BTreeSet<u32> = tagged.iter().collect();
                let unknown: Vec<u32> = ids.difference(&vm.vcpus).copied().collect();
                if !unknown.is_empty() {
                    self.reports.say(
                        &mut round.notes,
                        format!("unknown {}", path.display()),
                        now,
                        format!(
                            "guest hints: {who}: the guest names vCPUs {} the VM does not have; \
                             ignored",
                            unknown.iter().copied().collect::<CpuSet>()
                        ),
                    );
                }
                round
                    .hints
                    .entry(vm.id.tid)
                    .or_default()
                    .extend(ids.intersection(&vm.vcpus));
            }
        }
        !eof
    }

    fn changes(&mut self, vms: &HashMap<i32, Vm>, round: &mut HintRound) {
        let label = |pid: &i32| {
            vms.get(pid).map_or_else(
                || format!("pid {pid}"),
                |v| format!("{} (pid {pid})", v.label),
            )
        };
        let empty = BTreeSet::new();
        for (pid, now) in &round.hints {
            let before = self.last.get(pid).unwrap_or(&empty);
            let tagged: CpuSet = now.difference(before).copied().collect();
            let cleared: CpuSet = before.difference(now).copied().collect();
            if !self.last.contains_key(pid) {
                round.changes.push(format!(
                    "guest hints: {}: the guest speaks; vCPUs hinted: {}",
                    label(pid),
                    list(now)
                ));
                continue;
            }
            if !tagged.is_empty() {
                round
                    .changes
                    .push(format!("guest hints: {}: tag vCPUs {tagged}", label(pid)));
            }
            if !cleared.is_empty() {
                round.changes.push(format!(
                    "guest hints: {}: clear vCPUs {cleared}",
                    label(pid)
                ));
            }
        }
        for pid in self.last.keys() {
            if !round.hints.contains_key(pid) {
                round.changes.push(format!(
                    "guest hints: {}: no live hints any more (silent, flooding, or gone)",
                    label(pid)
                ));
            }
        }
        self.last = round.hints.clone();
    }
}

fn list(s: &BTreeSet<u32>) -> String {
    if s.is_empty() {
        "none".into()
    } else {
        s.iter().copied().collect::<CpuSet>().to_string()
    }
}

/// Splits what was read into lines (the partial line kept for the next
/// round), parses at most [`MAX_LINES_PER_ROUND`]; returns the messages,
/// the number of refused lines and the first refusal.
fn split_lines(conn: &mut Conn, buf: &[u8]) -> (Vec<Message>, usize, Option<String>) {
    let (mut msgs, mut bad, mut first) = (Vec::new(), 0usize, None);
    let mut refuse = |why: String, bad: &mut usize| {
        *bad += 1;
        first.get_or_insert(why);
    };
    let mut lines = 0usize;
    let mut rest = buf;
    while !rest.is_empty() {
        let (piece, ended) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], true),
            None => (rest, false),
        };
        rest = if ended { &rest[piece.len() + 1..] } else { &[] };
        if conn.skipping {
            conn.skipping = !ended;
            continue;
        }
        if conn.partial.len() + piece.len() >= MAX_LINE_BYTES {
            refuse(
                format!("a line longer than {} bytes", MAX_LINE_BYTES - 1),
                &mut bad,
            );
            conn.partial.clear();
            conn.skipping = !ended;
            continue;
        }
        conn.partial.extend_from_slice(piece);
        if !ended {
            break;
        }
        let line = std::mem::take(&mut conn.partial);
        lines += 1;
        if lines > MAX_LINES_PER_ROUND {
            refuse(
                format!("more than {MAX_LINES_PER_ROUND} lines in a round"),
                &mut bad,
            );
            continue;
        }
        match std::str::from_utf8(&line)
            .map_err(|_| "a line that is not UTF-8".to_string())
            .and_then(|l| parse_line(l).map_err(|e| e.to_string()))
        {
            Ok(m) => msgs.push(m),
            Err(why) => refuse(why, &mut bad),
        }
    }
    (msgs, bad, first)
}

/// Applies one message: a `set` replaces the guest's state and renews its
/// expiry; `tag` / `clear` change a live state at once.
fn apply(conn: &mut Conn, m: Message, now: Instant) {
    match m {
        Message::Set {
            interval_ms,
            tagged,
            ..
        } => {
            let life = (Duration::from_millis(u64::from(interval_ms)) * EXPIRE_INTERVALS)
                .clamp(MIN_EXPIRY, MAX_EXPIRY);
            conn.tagged = Some((tagged, now + life));
        }
        Message::Tag { vcpus, .. } => {
            if let Some((t, _)) = &mut conn.tagged {
                *t = t.union(&vcpus);
            }
        }
        Message::Clear { vcpus, .. } => {
            if let Some((t, _)) = &mut conn.tagged {
                *t = t.difference(&vcpus);
            }
        }
    }
}

#[cfg(test)]
#[path = "host_tests.rs"]
mod tests;
