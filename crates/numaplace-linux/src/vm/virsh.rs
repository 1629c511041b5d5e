//! libvirt's own client, `virsh`, run as a subprocess: how numaplace pins
//! the vCPUs and emulator threads of a domain libvirt manages, and moves
//! its memory, so that libvirt's live XML, its cgroups and `virsh
//! vcpuinfo` agree with what numaplace did (a `sched_setaffinity` behind
//! libvirt's back is undone by its next `vcpupin`, `setvcpus` or restart,
//! and fails with EINVAL outside the domain's cgroup).
//!
//! Why `virsh` and not the `virt` crate over libvirt's C library: the
//! daemon is one binary that runs on hosts without libvirt (and statically
//! linked in the test guests); linking libvirt.so would make libvirt a
//! dependency of every install, and a libvirt client library that
//! disagrees with the daemon's version is a support matter of its own.
//! `virsh` ships with the daemon it talks to (Debian's libvirt-clients),
//! speaks every API we need (`vcpupin`, `emulatorpin`, `numatune`, each
//! with `--live`), and its contract is plain: exit status 0, or 1 with
//! `error: ...` lines on stderr. The cost is a process per call (a few
//! milliseconds); numaplace pins a domain's threads rarely, never in a
//! tight loop. Each call is bounded ([`Virsh::timeout`]): a libvirtd that
//! hangs cannot stall a round for long; the child is killed.
//!
//! Domains are named by UUID (`--domain UUID`): a name can look like a
//! domain id or an option, a UUID cannot, and it is what the status file
//! says. Output is read with `LC_ALL=C`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use numaplace_model::CpuSet;
use thiserror::Error;

/// How long one `virsh` call may take before it is killed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// The connection of the privileged daemon (system instance).
pub const SYSTEM_URI: &str = "qemu:///system";
/// How long `numatune --nodeset` may take: libvirt returns once the
/// kernel moved the domain's pages.
pub const MOVE_TIMEOUT: Duration = Duration::from_secs(300);
/// Output read from one call at most.
const MAX_OUTPUT: u64 = 1 << 20;

/// Why a `virsh` call did not do what was asked.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum VirshError {
    #[error(
        "{program} not found: install libvirt's client (Debian: libvirt-clients) or set \
         [vms] virsh to its path"
    )]
    /// `virsh` is not installed.
    NotInstalled {
        /// The program.
        program: String,
    },
    #[error("cannot run {program}: {why}")]
    /// `virsh` could not be started.
    Spawn {
        /// The program.
        program: String,
        /// The reason, in words.
        why: String,
    },
    #[error("virsh {what} took more than {secs} s (libvirtd not answering?); killed")]
    /// `virsh` took too long.
    TimedOut {
        /// The command, in words.
        what: String,
        /// The time allowed, seconds.
        secs: u64,
    },
    #[error("virsh {what}: {message}")]
    /// `virsh` failed.
    Failed {
        /// The command, in words.
        what: String,
        /// What it said.
        message: String,
    },
    #[error("virsh {what}: unexpected output: {output}")]
    /// `virsh`'s output did not parse.
    Unparsable {
        /// The command, in words.
        what: String,
        /// What it printed.
        output: String,
    },
}

/// A domain's memory tuning (`virsh numatune`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Numatune {
    /// `strict`, `preferred`, `interleave`, `restrictive`.
    pub mode: String,
    /// The nodes; `None` where the domain names none.
    pub nodeset: Option<CpuSet>,
}

/// The client: which `virsh`, which connection, how long a call may take.
#[derive(Debug, Clone)]
pub struct Virsh {
    program: PathBuf,
    uri: String,
    timeout: Duration,
}

impl Default for Virsh {
    fn default() -> Self {
        Virsh::new("virsh", SYSTEM_URI, DEFAULT_TIMEOUT)
    }
}

impl Virsh {
    /// Runs `program` on libvirt's `uri`, each call bounded by `timeout`.
    pub fn new(program: impl Into<PathBuf>, uri: &str, timeout: Duration) -> Virsh {
        Virsh {
            program: program.into(),
            uri: uri.to_string(),
            timeout,
        }
    }

    /// The program it runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The time each call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `virsh -c URI ARGS...`; its stdout.
    pub fn run(&self, args: &[&str]) -> Result<String, VirshError> {
        self.run_for(args, self.timeout)
    }

    /// [`Self::run`], killed after `timeout`.
    fn run_for(&self, args: &[&str], timeout: Duration) -> Result<String, VirshError> {
        let what = args.first().copied().unwrap_or("").to_string();
        let program = self.program.display().to_string();
        let mut child = Command::new(&self.program)
            .arg("-c")
            .arg(&self.uri)
            .args(args)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => VirshError::NotInstalled {
                    program: program.clone(),
                },
                _ => VirshError::Spawn {
                    program: program.clone(),
                    why: e.to_string(),
                },
            })?;
        // Readers on their own threads: a child that fills a pipe while
        // nobody reads would never exit.
        let out = reader(child.stdout.take());
        let err = reader(child.stderr.take());
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(VirshError::TimedOut {
                        what,
                        secs: timeout.as_secs(),
                    });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(VirshError::Spawn {
                        program,
                        why: e.to_string(),
                    });
                }
            }
        };
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        if status.success() {
            return Ok(stdout);
        }
        Err(VirshError::Failed {
            what,
            message: error_message(&stderr, status),
        })
    }

    /// Runs a query and reads its output with `parse`; output it cannot
    /// read is [`VirshError::Unparsable`].
    fn query<T>(&self, args: &[&str], parse: fn(&str) -> Option<T>) -> Result<T, VirshError> {
        let out = self.run(args)?;
        parse(&out).ok_or_else(|| VirshError::Unparsable {
            what: args[0].into(),
            output: clip(&out),
        })
    }

    /// Pins vCPU `vcpu` of the running domain to `cpus` (`vcpupin --live`).
    pub fn vcpupin(&self, uuid: &str, vcpu: u32, cpus: &CpuSet) -> Result<(), VirshError> {
        domain_arg("vcpupin", uuid)?;
        let (vcpu, cpus) = (vcpu.to_string(), cpus.to_list_string());
        self.run(&[
            "vcpupin",
            "--domain",
            uuid,
            "--vcpu",
            &vcpu,
            "--cpulist",
            &cpus,
            "--live",
        ])
        .map(drop)
    }

    /// Each vCPU's CPUs as libvirt has them now (`vcpupin --live`).
    pub fn vcpupins(&self, uuid: &str) -> Result<Vec<(u32, CpuSet)>, VirshError> {
        domain_arg("vcpupin", uuid)?;
        self.query(&["vcpupin", "--domain", uuid, "--live"], parse_vcpupins)
    }

    /// Pins the domain's emulator threads to `cpus` (`emulatorpin --live`).
    pub fn emulatorpin(&self, uuid: &str, cpus: &CpuSet) -> Result<(), VirshError> {
        domain_arg("emulatorpin", uuid)?;
        let cpus = cpus.to_list_string();
        self.run(&[
            "emulatorpin",
            "--domain",
            uuid,
            "--cpulist",
            &cpus,
            "--live",
        ])
        .map(drop)
    }

    /// The emulator threads' CPUs as libvirt has them now.
    pub fn emulator_cpus(&self, uuid: &str) -> Result<CpuSet, VirshError> {
        domain_arg("emulatorpin", uuid)?;
        self.query(
            &["emulatorpin", "--domain", uuid, "--live"],
            parse_emulatorpin,
        )
    }

    /// The running domain's memory tuning (`numatune --live`).
    pub fn numatune(&self, uuid: &str) -> Result<Numatune, VirshError> {
        domain_arg("numatune", uuid)?;
        self.query(&["numatune", "--domain", uuid, "--live"], parse_numatune)
    }

    /// Sets the running domain's memory nodes (`numatune --nodeset
    /// --live`); libvirt writes its cgroups' `cpuset.mems`, and the kernel
    /// moves the pages there before the call returns: it is given
    /// [`MOVE_TIMEOUT`] at least (a domain of 64 GiB takes tens of
    /// seconds at a few GB/s).
    pub fn set_nodeset(&self, uuid: &str, nodes: &CpuSet) -> Result<(), VirshError> {
        domain_arg("numatune", uuid)?;
        let nodes = nodes.to_list_string();
        self.run_for(
            &["numatune", "--domain", uuid, "--nodeset", &nodes, "--live"],
            self.timeout.max(MOVE_TIMEOUT),
        )
        .map(drop)
    }
}

/// A domain is named to virsh by its UUID only: anything else (a name
/// that looks like an option, a forged state file's entry) is refused
/// before virsh runs.
fn domain_arg(what: &str, uuid: &str) -> Result<(), VirshError> {
    if crate::vm::libvirt::is_uuid(uuid) {
        return Ok(());
    }
    Err(VirshError::Failed {
        what: what.into(),
        message: format!(
            "{:?} is not a domain UUID; numaplace names domains to virsh by UUID only",
            clip(uuid)
        ),
    })
}

fn reader<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(r) = r {
            let _ = r.take(MAX_OUTPUT).read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// virsh's `error: ...` lines joined, or what the status says.
fn error_message(stderr: &str, status: std::process::ExitStatus) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect();
    if lines.is_empty() {
        format!("failed ({status}) and said nothing")
    } else {
        clip(&lines.join("; "))
    }
}

fn clip(s: &str) -> String {
    const MAX: usize = 400;
    let s = s.trim();
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// `virsh vcpupin DOM`'s table: ` VCPU   CPU Affinity`, a rule, then
/// ` 0      0-3` per vCPU. `None` when a row does not read so or no row
/// came.
pub fn parse_vcpupins(out: &str) -> Option<Vec<(u32, CpuSet)>> {
    let mut rows = Vec::new();
    for line in table_rows(out) {
        let mut words = line.split_whitespace();
        let vcpu = words.next()?.trim_end_matches(':').parse().ok()?;
        let cpus = CpuSet::parse_list(words.next()?).ok()?;
        if words.next().is_some() {
            return None;
        }
        rows.push((vcpu, cpus));
    }
    (!rows.is_empty()).then_some(rows)
}

/// `virsh emulatorpin DOM`'s table: ` emulator: CPU Affinity`, a rule,
/// then `       *: 0-3`.
pub fn parse_emulatorpin(out: &str) -> Option<CpuSet> {
    let mut rows = table_rows(out);
    let row = rows.next()?;
    let cpus = row.trim().strip_prefix("*:")?.trim();
    if rows.next().is_some() {
        return None;
    }
    CpuSet::parse_list(cpus).ok()
}

/// The rows of a virsh table: the lines after the `----` rule, blank
/// lines dropped.
fn table_rows(out: &str) -> impl Iterator<Item = &str> {
    let mut lines = out.lines();
    let ruled = out.lines().any(|l| l.trim_start().starts_with("---"));
    if ruled {
        for l in lines.by_ref() {
            if l.trim_start().starts_with("---") {
                break;
            }
        }
    }
    lines.filter(|l| !l.trim().is_empty())
}

/// `virsh numatune DOM`: `numa_mode      : strict` and `numa_nodeset   :
/// 0-1` (the nodeset empty where the domain names none).
pub fn parse_numatune(out: &str) -> Option<Numatune> {
    let (mut mode, mut nodeset, mut saw_nodeset) = (None, None, false);
    for line in out.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "numa_mode" => mode = Some(value.to_string()),
            "numa_nodeset" => {
                saw_nodeset = true;
                if !value.is_empty() {
                    nodeset = Some(CpuSet::parse_list(value).ok()?);
                }
            }
            _ => {}
        }
    }
    let mode = mode?;
    (saw_nodeset || nodeset.is_some()).then_some(Numatune { mode, nodeset })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn set(l: &str) -> CpuSet {
        CpuSet::parse_list(l).unwrap()
    }

    #[test]
    fn reads_virsh_tables_as_libvirt_9_prints_them() {
        let out = " VCPU   CPU Affinity\n----------------------\n 0      0-3\n 1      2\n\n";
        assert_eq!(
            parse_vcpupins(out),
            Some(vec![(0, set("0-3")), (1, set("2"))])
        );
        let out = " emulator: CPU Affinity\n----------------------------------\n       *: 2-3\n\n";
        assert_eq!(parse_emulatorpin(out), Some(set("2-3")));
        let out = "numa_mode      : strict\nnuma_nodeset   : 1\n\n";
        assert_eq!(
            parse_numatune(out),
            Some(Numatune {
                mode: "strict".into(),
                nodeset: Some(set("1"))
            })
        );
        let out = "numa_mode      : strict\nnuma_nodeset   : \n";
        assert_eq!(
            parse_numatune(out),
            Some(Numatune {
                mode: "strict".into(),
                nodeset: None
            })
        );
    }

    #[test]
    fn refuses_what_is_not_a_virsh_table() {
        assert_eq!(parse_vcpupins(""), None);
        assert_eq!(
            parse_vcpupins(" VCPU CPU Affinity\n---\n 0 0-3 extra\n"),
            None
        );
        assert_eq!(parse_vcpupins("---\n x 0-3\n"), None);
        assert_eq!(parse_emulatorpin("---\n 0: 1\n"), None);
        assert_eq!(parse_emulatorpin("---\n *: 1\n *: 2\n"), None);
        assert_eq!(parse_numatune("numa_nodeset : 1\n"), None);
        assert_eq!(
            parse_numatune("numa_mode : strict\nnuma_nodeset : x\n"),
            None
        );
    }

    proptest::proptest! {
        /// Whatever virsh prints (another version, a locale, garbage),
        /// the readers answer or refuse, never panic.
        #[test]
        fn any_output_is_read_or_refused(text in "[ -~\n]{0,200}") {
            let _ = parse_vcpupins(&text);
            let _ = parse_emulatorpin(&text);
            let _ = parse_numatune(&text);
        }
    }

    /// A stand-in `virsh`: a shell script that logs its arguments and
    /// answers as `body` says.
    fn fake(dir: &Path, body: &str) -> Virsh {
        let p = dir.join("virsh");
        std::fs::write(
            &p,
            format!("#!/bin/sh\necho \"$@\" >> {}/args\n{body}\n", dir.display()),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Virsh::new(p, "qemu:///system", Duration::from_secs(5))
    }

    const UUID: &str = "c7a5fdbd-edaf-9455-926a-d65c16db1809";

    #[test]
    fn calls_virsh_by_uuid_live_and_maps_its_errors() {
        let d = tempfile::tempdir().unwrap();
        let v = fake(d.path(), "exit 0");
        v.vcpupin(UUID, 1, &set("2-3")).unwrap();
        v.emulatorpin(UUID, &set("2")).unwrap();
        v.set_nodeset(UUID, &set("1")).unwrap();
        let args = std::fs::read_to_string(d.path().join("args")).unwrap();
        assert_eq!(
            args,
            "-c qemu:///system vcpupin --domain c7a5fdbd-edaf-9455-926a-d65c16db1809 --vcpu 1 --cpulist 2-3 --live\n\
             -c qemu:///system emulatorpin --domain c7a5fdbd-edaf-9455-926a-d65c16db1809 --cpulist 2 --live\n\
             -c qemu:///system numatune --domain c7a5fdbd-edaf-9455-926a-d65c16db1809 --nodeset 1 --live\n"
        );

        let v = fake(
            d.path(),
            "echo 'error: Invalid value '\"'\"'0-9'\"'\"' for '\"'\"'cpuset.cpus'\"'\"'' >&2\n\
             echo 'error: Invalid argument' >&2\nexit 1",
        );
        let e = v.vcpupin(UUID, 0, &set("0-9")).unwrap_err();
        assert_eq!(
            e,
            VirshError::Failed {
                what: "vcpupin".into(),
                message: "Invalid value '0-9' for 'cpuset.cpus'; Invalid argument".into()
            }
        );
        assert!(
            e.to_string().starts_with("virsh vcpupin: Invalid value"),
            "{e}"
        );

        let v = fake(d.path(), "echo garbage");
        assert!(matches!(
            v.numatune(UUID),
            Err(VirshError::Unparsable { .. })
        ));
        // Not a UUID (an option, a name): refused, virsh never run.
        let v = fake(d.path(), "echo ran >> \"$(dirname \"$0\")/ran\"");
        for bad in ["--help", "web", "0a1b", ""] {
            let e = v.set_nodeset(bad, &set("0")).unwrap_err();
            assert!(e.to_string().contains("is not a domain UUID"), "{e}");
        }
        assert!(!d.path().join("ran").exists());
    }

    #[test]
    fn a_hung_virsh_is_killed_and_a_missing_one_named() {
        let d = tempfile::tempdir().unwrap();
        let mut v = fake(d.path(), "exec sleep 30");
        v.timeout = Duration::from_millis(200);
        let e = v.emulator_cpus(UUID).unwrap_err();
        assert!(matches!(e, VirshError::TimedOut { .. }), "{e}");

        let v = Virsh::new(d.path().join("no-virsh"), SYSTEM_URI, DEFAULT_TIMEOUT);
        let e = v.vcpupins(UUID).unwrap_err();
        assert!(matches!(e, VirshError::NotInstalled { .. }), "{e}");
        assert!(e.to_string().contains("libvirt-clients"), "{e}");
    }
}
