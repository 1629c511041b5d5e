//! The kubelet's static CPU manager: which CPUs it handed to Guaranteed
//! containers for their sole use, read from its checkpoint file
//! (`/var/lib/kubelet/cpu_manager_state`, the kubelet's `--root-dir`).
//!
//! The file is JSON (Kubernetes' pkg/kubelet/cm/cpumanager/state,
//! `CPUManagerCheckpoint`): `policyName` (`none` or `static`),
//! `defaultCpuSet` (the shared pool, a CPU list), `entries` (pod UID ->
//! container name -> its exclusive CPUs, a CPU list) and a `checksum`.
//! With the `none` policy there are no entries and nothing is exclusive.
//!
//! What numaplace does with it ([`Exclusive`]): no thread is ever placed
//! onto an exclusive CPU (every other task's room loses them, so the
//! engine refuses a pin that reaches one), and the threads of a pod that
//! holds exclusive CPUs are the kubelet's: left alone, saying why, unless
//! the configuration opts Guaranteed pods in. Shared-pool pods are already
//! confined to the pool by their cgroup's cpuset, which the kubelet writes.
//!
//! The file is trusted as far as its place: a regular file (no symlink
//! followed), owned by root or this process's user, writable by no one
//! else, at most [`MAX_BYTES`]; it is read again only when it changed.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use numaplace_model::CpuSet;

/// Where the kubelet keeps it by default.
pub const DEFAULT_CPU_MANAGER_STATE: &str = "/var/lib/kubelet/cpu_manager_state";
/// A checkpoint of thousands of pods is a few hundred KB.
pub const MAX_BYTES: u64 = 8 << 20;
/// Pods with exclusive CPUs, at most.
const MAX_PODS: usize = 65_536;

/// The exclusive CPUs, and which pods hold them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclusive {
    /// Every CPU some container holds for its sole use.
    pub cpus: CpuSet,
    /// Per pod (its UID), the CPUs its containers hold.
    pub pods: Vec<(String, CpuSet)>,
}

impl Exclusive {
    /// The pod whose cgroup `path` is (or is below), if it holds exclusive
    /// CPUs: its UID and CPUs. The kubelet names a pod's cgroup after its
    /// UID, `pod<UID>` (cgroupfs driver) or `kubepods-…-pod<UID with
    /// '_' for '-'>.slice` (systemd driver).
    pub fn pod_of(&self, path: &str) -> Option<&(String, CpuSet)> {
        if self.pods.is_empty() {
            return None;
        }
        path.split('/').find_map(|part| {
            let part = part.strip_suffix(".slice").unwrap_or(part);
            let uid = &part[part.rfind("pod")? + 3..];
            // Every process's cgroup, every round: compared in place.
            let same = |a: u8, b: u8| a == b || (a == b'-' && b == b'_');
            (self.pods.iter()).find(|(u, _)| {
                u.len() == uid.len() && u.bytes().zip(uid.bytes()).all(|(a, b)| same(a, b))
            })
        })
    }
}

/// Parses a `cpu_manager_state` checkpoint.
pub fn parse_cpu_manager_state(text: &str) -> Result<Exclusive, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let policy = obj
        .get("policyName")
        .and_then(|p| p.as_str())
        .ok_or("no policyName")?;
    let mut out = Exclusive::default();
    let Some(entries) = obj.get("entries") else {
        return Ok(out);
    };
    if entries.is_null() {
        return Ok(out);
    }
    let entries = entries.as_object().ok_or("entries is not an object")?;
    if policy != "static" && !entries.is_empty() {
        return Err(format!("policy {policy:?} with exclusive entries"));
    }
    if entries.len() > MAX_PODS {
        return Err(format!("more than {MAX_PODS} pods"));
    }
    for (uid, containers) in entries {
        if uid.is_empty()
            || uid.len() > 128
            || !uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(format!("pod UID {uid:?} is not one"));
        }
        let containers = containers
            .as_object()
            .ok_or_else(|| format!("pod {uid}: not an object of containers"))?;
        let mut pod = CpuSet::new();
        for (name, cpus) in containers {
            let list = cpus
                .as_str()
                .ok_or_else(|| format!("pod {uid} container {name:?}: CPUs not a string"))?;
            let set = CpuSet::parse_list(list.trim())
                .map_err(|e| format!("pod {uid} container {name:?}: {e}"))?;
            pod = pod.union(&set);
        }
        if !pod.is_empty() {
            out.cpus = out.cpus.union(&pod);
            out.pods.push((uid.clone(), pod));
        }
    }
    out.pods.sort();
    Ok(out)
}

/// The checkpoint file, read again when it changes.
#[derive(Debug)]
pub struct CpuManagerState {
    path: PathBuf,
    /// The version read, and what it said.
    last: Option<(Version, Result<Exclusive, String>)>,
}

/// A file's version: (inode, mtime seconds and nanoseconds, size); the
/// kubelet writes a new file and renames it over the old.
type Version = (u64, i64, i64, u64);

impl CpuManagerState {
    pub fn new(path: impl Into<PathBuf>) -> CpuManagerState {
        CpuManagerState {
            path: path.into(),
            last: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The exclusive CPUs now: `Ok(None)` without the file (no kubelet,
    /// or its CPU manager never ran), an error (said by the caller) for a
    /// file that cannot be trusted or read.
    pub fn read(&mut self) -> Result<Option<Exclusive>, String> {
        let p = self.path.display();
        let f = match File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&self.path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.last = None;
                return Ok(None);
            }
            Err(e) => return Err(format!("{p}: {e}")),
        };
        let m = f.metadata().map_err(|e| format!("{p}: {e}"))?;
        if !m.is_file() {
            return Err(format!("{p}: not a regular file"));
        }
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if (m.uid() != 0 && m.uid() != me) || m.mode() & 0o022 != 0 {
            return Err(format!(
                "{p}: not trusted: owned by uid {} with mode {:o}; the kubelet's is root's and \
                 writable by no one else",
                m.uid(),
                m.mode() & 0o7777
            ));
        }
        let version = (m.ino(), m.mtime(), m.mtime_nsec(), m.size());
        if let Some((v, said)) = &self.last
            && *v == version
        {
            return said.clone().map(Some);
        }
        let mut bytes = Vec::new();
        f.take(MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{p}: {e}"))?;
        let said = if bytes.len() as u64 > MAX_BYTES {
            Err(format!("larger than {MAX_BYTES} bytes"))
        } else {
            String::from_utf8(bytes)
                .map_err(|_| "not UTF-8".to_string())
                .and_then(|t| parse_cpu_manager_state(&t))
        }
        .map_err(|e| format!("{p}: not the kubelet's CPU manager checkpoint: {e}"));
        self.last = Some((version, said.clone()));
        said.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// As the kubelet writes it (static policy, two Guaranteed pods).
    pub(crate) const STATE: &str = r#"{"policyName":"static","defaultCpuSet":"0-1,6-7","entries":{"0e5b5a4c-1d3e-4b8a-9f5e-2c1d0a9b8c7d":{"app":"2-3"},"7f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f":{"db":"4","sidecar":"5"}},"checksum":1337}"#;

    fn set(l: &str) -> CpuSet {
        CpuSet::parse_list(l).unwrap()
    }

    #[test]
    fn reads_the_exclusive_cpus_and_their_pods() {
        let e = parse_cpu_manager_state(STATE).unwrap();
        assert_eq!(e.cpus, set("2-5"));
        assert_eq!(
            e.pods,
            [
                (
                    "0e5b5a4c-1d3e-4b8a-9f5e-2c1d0a9b8c7d".to_string(),
                    set("2-3")
                ),
                (
                    "7f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f".to_string(),
                    set("4-5")
                ),
            ]
        );
        // The none policy, or no entries: nothing exclusive.
        let none = r#"{"policyName":"none","defaultCpuSet":"","checksum":1}"#;
        assert_eq!(parse_cpu_manager_state(none).unwrap(), Exclusive::default());
        let empty = r#"{"policyName":"static","defaultCpuSet":"0-7","entries":{},"checksum":1}"#;
        assert_eq!(
            parse_cpu_manager_state(empty).unwrap(),
            Exclusive::default()
        );
    }

    #[test]
    fn finds_a_pods_cgroup_under_either_driver() {
        let e = parse_cpu_manager_state(STATE).unwrap();
        let systemd = "/kubepods.slice/kubepods-pod0e5b5a4c_1d3e_4b8a_9f5e_2c1d0a9b8c7d.slice/\
                       cri-containerd-abc.scope";
        assert_eq!(e.pod_of(systemd).unwrap().1, set("2-3"));
        let cgroupfs = "/kubepods/pod7f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f/0123abcd";
        assert_eq!(e.pod_of(cgroupfs).unwrap().1, set("4-5"));
        // A Burstable pod in the shared pool; a pod UID that is a prefix.
        let shared = "/kubepods.slice/kubepods-burstable.slice/\
                      kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice";
        assert_eq!(e.pod_of(shared), None);
        assert_eq!(e.pod_of("/kubepods/pod0e5b5a4c"), None);
        assert_eq!(e.pod_of("/system.slice/kubelet.service"), None);
    }

    proptest::proptest! {
        /// Hostile checkpoints: any text, and the real one cut or spliced,
        /// parses or is refused, never panics; what parses holds only
        /// CPUs its pods hold.
        #[test]
        fn any_checkpoint_parses_or_is_refused(
            text in proptest::prelude::any::<String>(),
            cut in 0usize..400,
            splice in "[\\[\\]{}\":,0-9a-z -]{0,12}",
        ) {
            let _ = parse_cpu_manager_state(&text);
            let mut spliced = STATE.to_string();
            let at = cut.min(spliced.len());
            spliced.insert_str(at, &splice);
            for t in [&STATE[..at], spliced.as_str()] {
                if let Ok(e) = parse_cpu_manager_state(t) {
                    let held = e.pods.iter().fold(CpuSet::new(), |a, (_, c)| a.union(c));
                    proptest::prop_assert_eq!(held, e.cpus);
                }
            }
        }
    }

    #[test]
    fn refuses_what_is_not_a_checkpoint() {
        for (text, want) in [
            ("", "not JSON"),
            ("[]", "not a JSON object"),
            (r#"{"entries":{}}"#, "no policyName"),
            (r#"{"policyName":"static","entries":[]}"#, "not an object"),
            (
                r#"{"policyName":"static","entries":{"../x":{"a":"1"}}}"#,
                "is not one",
            ),
            (
                r#"{"policyName":"static","entries":{"p":{"a":1}}}"#,
                "not a string",
            ),
            (
                r#"{"policyName":"static","entries":{"p":{"a":"1-x"}}}"#,
                "container \"a\"",
            ),
            (
                r#"{"policyName":"none","entries":{"p":{"a":"1"}}}"#,
                "with exclusive entries",
            ),
        ] {
            let e = parse_cpu_manager_state(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn the_file_is_read_from_a_trusted_place_and_again_when_it_changes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cpu_manager_state");
        let mut s = CpuManagerState::new(&p);
        assert_eq!(s.read(), Ok(None));
        std::fs::write(&p, STATE).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(s.read().unwrap().unwrap().cpus, set("2-5"));
        // The kubelet writes a new file and renames it over the old.
        let tmp = d.path().join("tmp");
        std::fs::write(&tmp, STATE.replace("\"4\"", "\"6\"")).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        assert_eq!(s.read().unwrap().unwrap().cpus, set("2-3,5-6"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(s.read().unwrap_err().contains("not trusted"));
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &p).unwrap();
        assert!(s.read().is_err());
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "{").unwrap();
        let e = s.read().unwrap_err();
        assert!(
            e.contains("not the kubelet's CPU manager checkpoint: not JSON"),
            "{e}"
        );
    }
}
