//! The QMP side of VM discovery: the configured patterns' sockets, each
//! asked when its process is new or changed, its answer checked as the
//! parent module's doc says.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use numaplace_model::Snapshot;
use numaplace_model::scope::glob;

use super::{
    Asked, CLOCK_SLACK_SECS, Found, MAX_SCAN, MAX_SOCKETS, RETRY_FIRST, RETRY_MAX, VmDiscovery,
    still_holds, still_running,
};
use crate::procfs::ProcReader;
use crate::sysroot::SysRoot;
use crate::vm::qmp::{self, QmpConnection};

/// Whether `pattern` is a QMP socket pattern numaplace takes: an absolute
/// path, wildcards (`*`, `?`) only in its last component.
pub fn check_qmp_pattern(pattern: &str) -> Result<(), String> {
    let p = Path::new(pattern);
    let file = p.file_name().and_then(|f| f.to_str());
    let dir = p.parent().and_then(|d| d.to_str());
    let why = if !pattern.starts_with('/') {
        "not an absolute path"
    } else if pattern.chars().any(char::is_control) {
        "a control character (NUL, a line break, an escape)"
    } else if pattern.len() > 4096 {
        "longer than 4096 bytes"
    } else if file.is_none_or(|f| f.is_empty()) || pattern.ends_with('/') {
        "no file name at its end"
    } else if dir.is_some_and(|d| d.contains(['*', '?'])) {
        "wildcards outside the last component"
    } else if pattern.split('/').any(|c| c == "..") {
        "a `..` component"
    } else {
        return Ok(());
    };
    Err(format!(
        "{pattern:?}: {why}; give an absolute path whose file name may hold * and ?, \
         like \"/run/qemu/*.qmp\""
    ))
}

impl VmDiscovery {
    /// The VMs behind the configured sockets: cached answers that still
    /// hold, new answers for the rest (within the round's budget).
    pub(super) fn vms_behind_sockets(&mut self, root: &SysRoot, snapshot: &Snapshot) -> Vec<Found> {
        let paths = self.socket_paths();
        let seen: HashSet<&PathBuf> = paths.iter().collect();
        self.sockets.retain(|p, _| seen.contains(p));
        let start = Instant::now();
        let mut out = Vec::new();
        for path in &paths {
            let id = match fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_socket() => (m.dev(), m.ino()),
                Ok(m) => {
                    self.say(path, "not a socket", format_args!("not a socket; ignored"));
                    let failed = Asked::Failed {
                        retry_at: Instant::now(),
                        backoff: RETRY_FIRST,
                        last: None,
                    };
                    self.sockets
                        .insert(path.clone(), ((m.dev(), m.ino()), failed));
                    continue;
                }
                // A path named as it is (no wildcard) that is not there
                // is said once; one a pattern listed went between the
                // listing and now.
                Err(e) => {
                    if self.sources.qmp.iter().any(|p| Path::new(p) == path) {
                        self.say(
                            path,
                            "missing",
                            format_args!("{e}; looked for again each round"),
                        );
                    }
                    continue;
                }
            };
            let now = Instant::now();
            match self.sockets.get(path) {
                Some((was, Asked::Found { found, threads }))
                    if *was == id && still_holds(found, threads, snapshot) =>
                {
                    out.push(found.clone());
                    continue;
                }
                Some((was, Asked::Failed { retry_at, last, .. }))
                    if *was == id && now < *retry_at =>
                {
                    out.extend(last.as_ref().and_then(|f| still_running(f, snapshot)));
                    continue;
                }
                _ => {}
            }
            if start.elapsed() >= self.budget {
                tracing::debug!(
                    "QMP socket {}: left for the next round (this round's {:?} are spent)",
                    path.display(),
                    self.budget
                );
                continue;
            }
            match self.ask(root, path, snapshot) {
                Ok(f) => {
                    tracing::info!(
                        "VM {} (pid {}) found through {}: {} vCPUs",
                        f.name.as_deref().unwrap_or("without a name"),
                        f.pid,
                        f.evidence(),
                        f.vcpus.len()
                    );
                    // Its failures may be said again; what this answer
                    // itself showed stays said.
                    self.said
                        .retain(|(p, k)| p != path || k == "foreign threads");
                    let threads = snapshot
                        .group(f.pid)
                        .map_or(Vec::new(), |g| g.threads.clone());
                    out.push(f.clone());
                    self.sockets
                        .insert(path.clone(), (id, Asked::Found { found: f, threads }));
                }
                Err((kind, why)) => {
                    let (backoff, last) = match self.sockets.remove(path) {
                        Some((was, Asked::Failed { backoff, last, .. })) if was == id => {
                            ((backoff * 2).min(RETRY_MAX), last)
                        }
                        Some((was, Asked::Found { found, .. })) if was == id => {
                            (RETRY_FIRST, Some(found))
                        }
                        _ => (RETRY_FIRST, None),
                    };
                    out.extend(last.as_ref().and_then(|f| still_running(f, snapshot)));
                    self.say(
                        path,
                        kind,
                        format_args!("{why}; ignored, asked again in {}s", backoff.as_secs()),
                    );
                    let retry_at = Instant::now() + backoff;
                    let failed = Asked::Failed {
                        retry_at,
                        backoff,
                        last,
                    };
                    self.sockets.insert(path.clone(), (id, failed));
                }
            }
        }
        out
    }

    /// The paths the QMP patterns match now, at most [`MAX_SOCKETS`].
    pub(super) fn socket_paths(&mut self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for pattern in self.sources.qmp.clone() {
            let p = Path::new(&pattern);
            let (Some(dir), Some(file)) = (p.parent(), p.file_name().and_then(|f| f.to_str()))
            else {
                continue;
            };
            if !file.contains(['*', '?']) {
                out.push(p.to_path_buf());
                continue;
            }
            let Ok(entries) = fs::read_dir(dir) else {
                continue;
            };
            let mut matched: Vec<PathBuf> = entries
                .take(MAX_SCAN)
                .flatten()
                .filter(|e| e.file_name().to_str().is_some_and(|n| glob(file, n)))
                .map(|e| e.path())
                .collect();
            matched.sort();
            out.append(&mut matched);
        }
        out.sort();
        out.dedup();
        if out.len() > MAX_SOCKETS {
            let first = PathBuf::from(&self.sources.qmp[0]);
            self.say(
                &first,
                "too many sockets",
                format_args!(
                    "the [vms] qmp patterns match {} sockets; only the first {MAX_SOCKETS} \
                     are asked",
                    out.len()
                ),
            );
            out.truncate(MAX_SOCKETS);
        }
        out
    }

    /// Asks one socket and checks the answer; the error is (kind, why).
    pub(super) fn ask(
        &mut self,
        root: &SysRoot,
        path: &Path,
        snapshot: &Snapshot,
    ) -> Result<Found, (&'static str, String)> {
        let failed = |e: qmp::QmpError| (e.kind(), e.to_string());
        let conn = QmpConnection::open(path).map_err(failed)?;
        let pid = conn.server_pid();
        let p = path.display();
        let Some(group) = snapshot.group(pid).filter(|_| pid > 0) else {
            return Err((
                "not a process here",
                format!(
                    "{p}: served by pid {pid}, which is not among this round's processes \
                     (another PID namespace, or it just exited)"
                ),
            ));
        };
        let start_time = group.start_time;
        let Some(why_vm) = self.vm_evidence(root, pid, start_time) else {
            return Err((
                "not a VM",
                format!(
                    "{p}: served by process {pid} ({}), which is not a VM: neither a \
                     qemu-system-*/qemu-kvm executable nor KVM vCPU fds",
                    numaplace_model::task::printable(&group.comm)
                ),
            ));
        };
        let answer = conn.ask().map_err(failed)?;
        // Still that process?
        let alive = match &answer.server_pidfd {
            Some(fd) => qmp::pidfd_alive(fd),
            None => self.started_before(root, start_time, path),
        };
        let same = ProcReader::new(root.clone())
            .stat(pid, pid)
            .is_ok_and(|s| s.start_time == start_time);
        if !alive || !same {
            return Err((
                "process changed",
                format!(
                    "{p}: the process that serves it (pid {pid}) exited or is not the one \
                     this round saw"
                ),
            ));
        }
        let vcpus: Vec<(u32, i32)> = answer.vcpus.iter().map(|v| (v.index, v.tid)).collect();
        let vcpus = self.own_threads(path, pid, &vcpus, &group.threads);
        if vcpus.is_empty() {
            return Err((
                "no vCPU threads",
                format!("{p}: process {pid} reported no vCPU that is one of its threads"),
            ));
        }
        let nodes: Vec<String> = answer
            .vcpus
            .iter()
            .filter_map(|v| v.node.map(|n| format!("{}:{n}", v.index)))
            .collect();
        if !nodes.is_empty() {
            tracing::debug!(
                "{p}: guest node of each vCPU (vcpu:node): {}",
                nodes.join(" ")
            );
        }
        Ok(Found {
            pid,
            start_time,
            name: answer.name,
            accel: answer
                .kvm
                .map(|k| if k { "KVM" } else { "TCG" }.to_string()),
            vcpus,
            source: format!("qmp {p}"),
            why_vm,
            managed: None,
        })
    }

    /// Without a pidfd: whether the process started before the socket was
    /// made (its change time: a reused pid's process started after it).
    fn started_before(&mut self, root: &SysRoot, start_time: u64, socket: &Path) -> bool {
        let Ok(m) = fs::symlink_metadata(socket) else {
            return false;
        };
        match self.start_secs(root, start_time) {
            Some(started) => started <= m.ctime() + CLOCK_SLACK_SECS,
            None => false,
        }
    }
}
