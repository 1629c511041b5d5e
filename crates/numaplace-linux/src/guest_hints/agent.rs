//! The guest's side: which of this VM's vCPUs run threads that pinned
//! themselves, and the port the hints go out on.
//!
//! **Which threads (\[Rao13\] §5).** The paper's guest kernel checks, when a
//! thread is scheduled, whether the weight of its CPU mask is below the
//! number of online CPUs, and skips pids under 1000 so that kernel threads,
//! whose masks the boot process sets, are not tagged. A pid says nothing
//! reliable about a thread (a long-running guest hands out pids far past
//! 1000 to kernel workers too), so here a thread is skipped when the kernel
//! marks it `PF_KTHREAD` (`stat` field 9); every user thread whose
//! `Cpus_allowed_list` does not cover all online CPUs counts, whoever set
//! it (`taskset`, `numactl`, `sched_setaffinity`, a cgroup's cpuset).
//!
//! **Which vCPUs "run" it.** The paper tags the CPU a pinned thread is
//! running on each time it is scheduled, and clears the tag when the thread
//! exits (`exit_group`). Without a hook in the scheduler we sample: each
//! round a pinned thread's last CPU (`stat` field 39, always within its
//! mask) is added to the CPUs it has been seen on, and the thread's tags
//! are the CPUs seen that are still in its mask. A thread that exits, or
//! whose mask widens back to every CPU, drops its tags at the next round:
//! the paper's `clear`. So a thread pinned to one CPU tags exactly that
//! CPU from its first round, and a thread bound to a node tags the CPUs
//! of the node it has been seen running on, as the paper's per-schedule
//! tag would after as many context switches. A pinned thread that never
//! runs (or has not run yet) tags nothing, as in the paper.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use numaplace_model::{CpuSet, TaskId};

use crate::SysRoot;
use crate::procfs::{ProcError, ProcReader};

/// Why the guest's tasks or CPUs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{path}: cannot read the online CPUs")]
    /// The guest's online CPUs could not be read.
    Online {
        /// The file.
        path: PathBuf,
        #[source]
        /// The error.
        source: io::Error,
    },
    #[error("{path}: {what}")]
    /// The online CPUs' list did not parse.
    BadOnline {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    #[error(transparent)]
    /// `/proc` could not be read.
    Proc(#[from] ProcError),
    #[error(
        "no virtio-serial port named {name:?}: neither {dev} nor an entry of {sys} names it \
         (give the VM a virtserialport with name={name}, or --device PATH)"
    )]
    /// No virtio port of that name.
    NoPort {
        /// The port's name.
        name: String,
        /// Where its device was looked for.
        dev: PathBuf,
        /// Where sysfs lists the ports.
        sys: PathBuf,
    },
    #[error("{path}: cannot open the port")]
    /// The port could not be opened.
    Open {
        /// The file.
        path: PathBuf,
        #[source]
        /// The error.
        source: io::Error,
    },
    #[error(
        "{path}: not a character device, so not a virtio-serial port (hints are written only to \
         one: give the port's /dev/vportNpM, or --device - to print them)"
    )]
    /// The path given is not a virtio port.
    NotAPort {
        /// The file.
        path: PathBuf,
    },
    #[error(
        "--port {name:?}: not a port name (give the name= of the VM's virtserialport, one path \
         component of letters, digits, '.', '_' and '-')"
    )]
    /// A port name numaplace does not accept.
    BadName {
        /// The port's name.
        name: String,
    },
}

/// The guest's online CPUs (`/sys/devices/system/cpu/online`).
pub fn online_cpus(root: &SysRoot) -> Result<CpuSet, AgentError> {
    let rel = "sys/devices/system/cpu/online";
    let path = root.join(rel);
    let text = root.read(rel).map_err(|e| AgentError::Online {
        path: path.clone(),
        source: e.source,
    })?;
    let set = CpuSet::parse_list(text.trim()).map_err(|e| AgentError::BadOnline {
        path: path.clone(),
        what: e.to_string(),
    })?;
    if set.is_empty() {
        return Err(AgentError::BadOnline {
            path,
            what: "no CPU is online".into(),
        });
    }
    Ok(set)
}

/// The pinned user threads seen so far, and the CPUs each was seen on.
#[derive(Debug, Default)]
pub struct PinnedThreads {
    seen: BTreeMap<TaskId, CpuSet>,
}

impl PinnedThreads {
    /// None seen yet.
    pub fn new() -> PinnedThreads {
        PinnedThreads::default()
    }

    /// One round: reads every task under `procs`, and returns the vCPUs
    /// tagged now (within `online`). A task that exits while being read,
    /// or cannot be read, is skipped.
    pub fn scan(&mut self, procs: &ProcReader, online: &CpuSet) -> Result<CpuSet, ProcError> {
        let mut now: BTreeMap<TaskId, CpuSet> = BTreeMap::new();
        let mut tagged = CpuSet::new();
        for pid in procs.pids()? {
            let Ok(tids) = procs.tids(pid) else { continue };
            for tid in tids {
                let Ok(stat) = procs.stat(pid, tid) else {
                    continue;
                };
                if stat.is_kernel_thread() || matches!(stat.state, 'Z' | 'X' | 'x') {
                    continue;
                }
                let Ok(status) = procs.status(pid, tid) else {
                    continue;
                };
                let mask = status.cpus_allowed.intersection(online);
                if mask.is_empty() || online.is_subset(&mask) {
                    continue;
                }
                let id = TaskId {
                    tid,
                    start_time: stat.start_time,
                };
                let mut seen = self.seen.remove(&id).unwrap_or_default();
                if let Some(cpu) = stat.processor.filter(|&c| mask.contains(c)) {
                    seen.insert(cpu);
                }
                let tags = seen.intersection(&mask);
                tagged = tagged.union(&tags);
                now.insert(id, tags);
            }
        }
        self.seen = now;
        Ok(tagged)
    }

    /// How many pinned user threads the last round found.
    pub fn threads(&self) -> usize {
        self.seen.len()
    }
}

/// The device of the virtio-serial port `name`: `dev/virtio-ports/NAME`
/// where udev made the link, else the `vportNpM` whose
/// `sys/class/virtio-ports/*/name` says `name` (a guest without udev, such
/// as an initramfs).
pub fn find_port(root: &SysRoot, name: &str) -> Result<PathBuf, AgentError> {
    // A name, never a path: `../../etc/x` would leave /dev/virtio-ports.
    // QEMU's names are such as org.qemu.guest_agent.0.
    let name_ok = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !name_ok {
        return Err(AgentError::BadName {
            name: name.to_string(),
        });
    }
    let dev = root.join(&format!("dev/virtio-ports/{name}"));
    if dev.exists() {
        return Ok(dev);
    }
    let sys = root.join("sys/class/virtio-ports");
    let no_port = || AgentError::NoPort {
        name: name.to_string(),
        dev: dev.clone(),
        sys: sys.clone(),
    };
    let entries = std::fs::read_dir(&sys).map_err(|_| no_port())?;
    for entry in entries.flatten() {
        let Ok(text) = numaplace_io::bounded::read_to_string(&entry.path().join("name"), 4096)
        else {
            continue;
        };
        if text.trim_end_matches('\n') == name {
            let port = root.join(&format!("dev/{}", entry.file_name().to_string_lossy()));
            if port.exists() {
                return Ok(port);
            }
        }
    }
    Err(no_port())
}

/// What became of one round's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Written whole.
    All,
    /// Nobody reads the host's end (QEMU's socket has no client), or its
    /// buffer is full: the message is dropped, the next round's full set
    /// replaces it.
    NotNow,
    /// Part of it went out: the next message starts on a new line, so the
    /// host refuses the cut line and reads the rest.
    Part,
}

/// The guest's end of the port, opened non-blocking: the agent never
/// waits for a host that does not read.
pub struct HintPort {
    path: PathBuf,
    file: File,
    cut: bool,
}

impl HintPort {
    /// Opens the port at `path` for writing.
    pub fn open(path: &Path) -> Result<HintPort, AgentError> {
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(path)
            .map_err(|source| AgentError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        // Opened without O_TRUNC, a regular file (a --device mistyped, a
        // link planted in the port's place) is still unchanged here: it is
        // refused before anything is written over its first bytes.
        use std::os::unix::fs::FileTypeExt as _;
        if !file
            .metadata()
            .is_ok_and(|m| m.file_type().is_char_device())
        {
            return Err(AgentError::NotAPort {
                path: path.to_path_buf(),
            });
        }
        Ok(HintPort {
            path: path.to_path_buf(),
            file,
            cut: false,
        })
    }

    /// The port's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one round's lines in one write (virtio_console takes up to
    /// 32 KiB in one buffer).
    pub fn send(&mut self, text: &str) -> io::Result<Sent> {
        let mut buf = String::with_capacity(text.len() + 1);
        if self.cut {
            buf.push('\n');
        }
        buf.push_str(text);
        match self.file.write(buf.as_bytes()) {
            Ok(n) if n == buf.len() => {
                self.cut = false;
                Ok(Sent::All)
            }
            Ok(0) => Ok(Sent::NotNow),
            Ok(_) => {
                self.cut = true;
                Ok(Sent::Part)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Sent::NotNow),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake guest: `/proc` with tasks written by [`Guest::task`], four
    /// online CPUs.
    struct Guest {
        dir: tempfile::TempDir,
        root: SysRoot,
    }

    const PF_KTHREAD: u32 = 0x0020_0000;

    impl Guest {
        fn new() -> Guest {
            let dir = tempfile::tempdir().unwrap();
            let cpu = dir.path().join("sys/devices/system/cpu");
            std::fs::create_dir_all(&cpu).unwrap();
            std::fs::write(cpu.join("online"), "0-3\n").unwrap();
            std::fs::create_dir_all(dir.path().join("proc")).unwrap();
            let root = SysRoot::new(dir.path()).unwrap();
            Guest { dir, root }
        }

        /// Thread `tid` of process `pid`: its state, flags, last CPU and
        /// allowed CPUs.
        fn task(&self, pid: i32, tid: i32, state: char, flags: u32, cpu: u32, allowed: &str) {
            let d = self.dir.path().join(format!("proc/{pid}/task/{tid}"));
            std::fs::create_dir_all(&d).unwrap();
            // Fields 3..=52 of proc(5): 9 flags, 22 start time, 39 processor.
            let mut fields: Vec<String> = (3..=52).map(|_| "0".to_string()).collect();
            fields[0] = state.to_string();
            fields[9 - 3] = flags.to_string();
            fields[22 - 3] = (1000 + tid).to_string();
            fields[39 - 3] = cpu.to_string();
            let stat = format!("{tid} (t{tid}) {}\n", fields.join(" "));
            std::fs::write(d.join("stat"), stat).unwrap();
            let status = format!(
                "Name:\tt{tid}\nTgid:\t{pid}\nPid:\t{tid}\nPPid:\t1\n\
                 Cpus_allowed_list:\t{allowed}\nMems_allowed_list:\t0\n"
            );
            std::fs::write(d.join("status"), status).unwrap();
        }

        fn exit(&self, pid: i32) {
            std::fs::remove_dir_all(self.dir.path().join(format!("proc/{pid}"))).unwrap();
        }

        fn scan(&self, pinned: &mut PinnedThreads) -> String {
            let online = online_cpus(&self.root).unwrap();
            let procs = ProcReader::new(self.root.clone());
            pinned.scan(&procs, &online).unwrap().to_string()
        }
    }

    #[test]
    fn user_threads_narrower_than_the_online_cpus_tag_where_they_ran() {
        let g = Guest::new();
        let mut p = PinnedThreads::new();
        g.task(10, 10, 'S', 0, 2, "0-3"); // every CPU: not pinned
        g.task(11, 11, 'R', PF_KTHREAD, 3, "3"); // a kernel thread bound to CPU 3
        g.task(12, 12, 'Z', 0, 1, "1"); // a zombie
        g.task(1500, 1500, 'R', 0, 1, "1"); // taskset -c 1
        assert_eq!(g.scan(&mut p), "1");
        assert_eq!(p.threads(), 1);
        // A thread bound to CPUs 2-3 (a node): the CPUs it was seen on, as
        // the paper's tag at each schedule would add them.
        g.task(1600, 1600, 'R', 0, 2, "2-3");
        g.task(1600, 1601, 'S', 0, 3, "2-3");
        assert_eq!(g.scan(&mut p), "1-3");
        // The pinned program exits: its tags clear (the paper's exit_group).
        g.exit(1500);
        assert_eq!(g.scan(&mut p), "2-3");
        // A mask narrowed to CPU 3 drops CPU 2 though it ran there.
        g.task(1600, 1600, 'S', 0, 3, "3");
        assert_eq!(g.scan(&mut p), "3");
        // A mask widened back to every CPU: not pinned any more.
        g.task(1600, 1600, 'S', 0, 3, "0-3");
        g.task(1600, 1601, 'S', 0, 3, "0-7");
        assert_eq!(g.scan(&mut p), "");
        assert_eq!(p.threads(), 0);
    }

    #[test]
    fn the_port_is_found_by_its_name() {
        let g = Guest::new();
        let e = find_port(&g.root, "org.numaplace.hints.0").unwrap_err();
        assert!(e.to_string().contains("--device PATH"), "{e}");
        let sys = g.dir.path().join("sys/class/virtio-ports");
        for (port, name) in [
            ("vport0p1", "org.qemu.guest_agent.0"),
            ("vport0p2", "org.numaplace.hints.0"),
        ] {
            std::fs::create_dir_all(sys.join(port)).unwrap();
            std::fs::write(sys.join(port).join("name"), format!("{name}\n")).unwrap();
        }
        std::fs::create_dir_all(g.dir.path().join("dev")).unwrap();
        std::fs::write(g.dir.path().join("dev/vport0p2"), "").unwrap();
        assert_eq!(
            find_port(&g.root, "org.numaplace.hints.0").unwrap(),
            g.dir.path().join("dev/vport0p2")
        );
        // udev's link wins where there is one.
        let link = g.dir.path().join("dev/virtio-ports");
        std::fs::create_dir_all(&link).unwrap();
        std::fs::write(link.join("org.numaplace.hints.0"), "").unwrap();
        assert_eq!(
            find_port(&g.root, "org.numaplace.hints.0").unwrap(),
            link.join("org.numaplace.hints.0")
        );
    }

    /// A name that is a path, and anything but a character device, are
    /// refused before a byte is written: a regular file in the port's
    /// place (a link planted there, a mistyped --device) is left as it was.
    #[test]
    fn only_a_name_finds_a_port_and_only_a_character_device_is_written() {
        let g = Guest::new();
        for name in ["../../etc/x", "a/b", "..", "", "name\n"] {
            let e = find_port(&g.root, name).unwrap_err();
            assert!(matches!(e, AgentError::BadName { .. }), "{name:?}: {e}");
        }
        let file = g.dir.path().join("not-a-port");
        std::fs::write(&file, "precious\n").unwrap();
        let e = HintPort::open(&file).err().unwrap();
        assert!(e.to_string().contains("not a character device"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious\n");
        let link = g.dir.path().join("port-link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(matches!(
            HintPort::open(&link),
            Err(AgentError::NotAPort { .. })
        ));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious\n");
        // A character device passes (the port itself is one).
        assert!(HintPort::open(Path::new("/dev/null")).is_ok());
    }
}
