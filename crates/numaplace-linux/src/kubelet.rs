//! The kubelet's static CPU and memory managers: which CPUs it handed to
//! Guaranteed containers for their sole use, and on which nodes it put
//! their memory, read from its checkpoint files
//! (`/var/lib/kubelet/cpu_manager_state` and `memory_manager_state`, under
//! the kubelet's `--root-dir`).
//!
//! The file is JSON (Kubernetes' pkg/kubelet/cm/cpumanager/state,
//! `CPUManagerCheckpoint`): `policyName` (`none` or `static`),
//! `defaultCpuSet` (the shared pool, a CPU list), `entries` (pod UID ->
//! container name -> its exclusive CPUs, a CPU list) and a `checksum`.
//! With the `none` policy there are no entries and nothing is exclusive.
//!
//! The memory manager's (pkg/kubelet/cm/memorymanager/state,
//! `MemoryManagerCheckpoint`): `policyName` (`None` or `Static`),
//! `machineState` (per node, its memory tables), `entries` (pod UID ->
//! container name -> memory blocks, each `{"numaAffinity": [nodes],
//! "type", "size"}`), in newer kubelets `podEntries` (pod UID ->
//! `{"memoryBlocks": [...]}`) and a `checksum`. A pod with blocks is a
//! Guaranteed pod whose memory the kubelet bound to those nodes (its
//! cgroup's `cpuset.mems`): numaplace leaves it to the kubelet, saying
//! so, unless the configuration opts Guaranteed pods in; then its memory
//! moves only among those nodes (the engine keeps every move inside a
//! task's `Mems_allowed`).
//!
//! What numaplace does with it ([`Exclusive`]): no thread is ever placed
//! onto an exclusive CPU (every other task's room loses them, so the
//! engine refuses a pin that reaches one), and the threads of a pod that
//! holds exclusive CPUs are the kubelet's: left alone, saying why, unless
//! the configuration opts Guaranteed pods in. Shared-pool pods are already
//! confined to the pool by their cgroup's cpuset, which the kubelet writes.
//!
//! Each file is trusted as far as its place ([`Checkpoint`]): a regular
//! file (no symlink followed), owned by root or this process's user,
//! writable by no one else, at most [`MAX_BYTES`]; it is read again only
//! when it changed.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use numaplace_model::CpuSet;

/// Where the kubelet keeps them by default.
pub const DEFAULT_CPU_MANAGER_STATE: &str = "/var/lib/kubelet/cpu_manager_state";
/// See [`DEFAULT_CPU_MANAGER_STATE`].
pub const DEFAULT_MEMORY_MANAGER_STATE: &str = "/var/lib/kubelet/memory_manager_state";
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
        pod_of(&self.pods, path)
    }
}

/// Pods whose memory the kubelet's memory manager bound to nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryPods {
    /// Per pod (its UID), the nodes of its memory blocks.
    pub pods: Vec<(String, CpuSet)>,
}

impl MemoryPods {
    /// The pod whose cgroup `path` is (or is below), if the memory
    /// manager placed its memory: its UID and nodes.
    pub fn pod_of(&self, path: &str) -> Option<&(String, CpuSet)> {
        pod_of(&self.pods, path)
    }
}

/// The pod of `pods` whose cgroup `path` is (or is below). The kubelet
/// names a pod's cgroup after its UID, `pod<UID>` (cgroupfs driver) or
/// `kubepods-…-pod<UID with '_' for '-'>.slice` (systemd driver).
fn pod_of<'a>(pods: &'a [(String, CpuSet)], path: &str) -> Option<&'a (String, CpuSet)> {
    if pods.is_empty() {
        return None;
    }
    path.split('/').find_map(|part| {
        let part = part.strip_suffix(".slice").unwrap_or(part);
        let uid = &part[part.rfind("pod")? + 3..];
        // Every process's cgroup, every round: compared in place.
        let same = |a: u8, b: u8| a == b || (a == b'-' && b == b'_');
        pods.iter().find(|(u, _)| {
            u.len() == uid.len() && u.bytes().zip(uid.bytes()).all(|(a, b)| same(a, b))
        })
    })
}

/// A pod UID as the kubelet writes one.
fn check_uid(uid: &str) -> Result<(), String> {
    if uid.is_empty()
        || uid.len() > 128
        || !uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(format!("pod UID {uid:?} is not one"));
    }
    Ok(())
}

/// A checkpoint's JSON object.
type Object = serde_json::Map<String, serde_json::Value>;

/// The `policyName` and the object `entries` of a checkpoint (`None` for
/// an absent or null one), or what is wrong.
fn policy_and<'a>(obj: &'a Object, key: &str) -> Result<(&'a str, Option<&'a Object>), String> {
    let policy = obj
        .get("policyName")
        .and_then(|p| p.as_str())
        .ok_or("no policyName")?;
    let entries = match obj.get(key) {
        None | Some(serde_json::Value::Null) => None,
        Some(e) => Some(
            e.as_object()
                .ok_or_else(|| format!("{key} is not an object"))?,
        ),
    };
    if let Some(e) = entries {
        if e.len() > MAX_PODS {
            return Err(format!("more than {MAX_PODS} pods"));
        }
    }
    Ok((policy, entries))
}

/// Parses a `memory_manager_state` checkpoint.
pub fn parse_memory_manager_state(text: &str) -> Result<MemoryPods, String> {
    use serde_json::Value;
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let mut pods: std::collections::BTreeMap<&str, CpuSet> = Default::default();
    for key in ["entries", "podEntries"] {
        let (policy, Some(entries)) = policy_and(obj, key)? else {
            continue;
        };
        if !policy.eq_ignore_ascii_case("static") && !entries.is_empty() {
            return Err(format!("policy {policy:?} with memory assignments"));
        }
        for (uid, assigned) in entries {
            check_uid(uid)?;
            let bad = || format!("pod {uid}: {key} not as the kubelet writes them");
            // entries: container -> blocks; podEntries: {"memoryBlocks": blocks}.
            let lists: Vec<&Value> = match (key, assigned) {
                ("entries", Value::Object(containers)) => containers.values().collect(),
                (_, Value::Object(o)) => o.get("memoryBlocks").into_iter().collect(),
                _ => return Err(bad()),
            };
            let nodes = pods.entry(uid).or_default();
            for list in lists {
                for block in list.as_array().ok_or_else(bad)? {
                    let affinity = (block.get("numaAffinity"))
                        .and_then(|a| a.as_array())
                        .ok_or_else(|| format!("pod {uid}: a memory block without numaAffinity"))?;
                    for n in affinity {
                        let n = (n.as_u64())
                            .filter(|&n| n < 4096)
                            .ok_or_else(|| format!("pod {uid}: node {n} is not one"))?;
                        nodes.insert(n as u32);
                    }
                }
            }
        }
    }
    Ok(MemoryPods {
        pods: (pods.into_iter())
            .filter(|(_, n)| !n.is_empty())
            .map(|(u, n)| (u.to_string(), n))
            .collect(),
    })
}

/// Parses a `cpu_manager_state` checkpoint.
pub fn parse_cpu_manager_state(text: &str) -> Result<Exclusive, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let mut out = Exclusive::default();
    let (policy, Some(entries)) = policy_and(obj, "entries")? else {
        return Ok(out);
    };
    if policy != "static" && !entries.is_empty() {
        return Err(format!("policy {policy:?} with exclusive entries"));
    }
    for (uid, containers) in entries {
        check_uid(uid)?;
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

/// A checkpoint file of the kubelet, read again when it changes.
#[derive(Debug)]
pub struct Checkpoint<T> {
    path: PathBuf,
    /// Whose: "CPU manager", "memory manager".
    whose: &'static str,
    parse: fn(&str) -> Result<T, String>,
    /// The version read, and what it said.
    last: Option<(Version, Result<T, String>)>,
}

/// The CPU manager's checkpoint.
pub type CpuManagerState = Checkpoint<Exclusive>;
/// The memory manager's checkpoint.
pub type MemoryManagerState = Checkpoint<MemoryPods>;

/// A file's version: (inode, mtime seconds and nanoseconds, size); the
/// kubelet writes a new file and renames it over the old.
type Version = (u64, i64, i64, u64);

impl Checkpoint<Exclusive> {
    /// The CPU manager's checkpoint at `path`, not read yet.
    pub fn new(path: impl Into<PathBuf>) -> CpuManagerState {
        Checkpoint::with(path.into(), "CPU manager", parse_cpu_manager_state)
    }
}

impl Checkpoint<MemoryPods> {
    /// The memory manager's checkpoint at `path`, not read yet.
    pub fn new(path: impl Into<PathBuf>) -> MemoryManagerState {
        Checkpoint::with(path.into(), "memory manager", parse_memory_manager_state)
    }
}

impl<T: Clone> Checkpoint<T> {
    fn with(path: PathBuf, whose: &'static str, parse: fn(&str) -> Result<T, String>) -> Self {
        Checkpoint {
            path,
            whose,
            parse,
            last: None,
        }
    }

    /// The checkpoint file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the file says now: `Ok(None)` without the file (no kubelet,
    /// or its manager never ran), an error (said by the caller) for a
    /// file that cannot be trusted or read.
    pub fn read(&mut self) -> Result<Option<T>, String> {
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
        if let Some((v, said)) = &self.last {
            if *v == version {
                return said.clone().map(Some);
            }
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
                .and_then(|t| (self.parse)(&t))
        }
        .map_err(|e| format!("{p}: not the kubelet's {} checkpoint: {e}", self.whose));
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

    /// As a kubelet with `--memory-manager-policy=Static` writes it: two
    /// Guaranteed pods, one container's memory and hugepages on node 1,
    /// another's over nodes 0 and 1; a newer kubelet's pod-level entry.
    const MEMORY_STATE: &str = r#"{"policyName":"Static","machineState":{"0":{"numberOfAssignments":1,"memoryMap":{"memory":{"total":33554432000,"systemReserved":1073741824,"allocatable":32480690176,"reserved":2147483648,"free":30333206528}},"cells":[0,1]},"1":{"numberOfAssignments":3,"memoryMap":{"memory":{"total":33554432000,"systemReserved":0,"allocatable":33554432000,"reserved":3221225472,"free":30333206528}},"cells":[0,1]}},"entries":{"0e5b5a4c-1d3e-4b8a-9f5e-2c1d0a9b8c7d":{"app":[{"numaAffinity":[1],"type":"memory","size":1073741824},{"numaAffinity":[1],"type":"hugepages-1Gi","size":1073741824}]},"7f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f":{"db":[{"numaAffinity":[0,1],"type":"memory","size":2147483648}]}},"podEntries":{"11111111-2222-3333-4444-555555555555":{"memoryBlocks":[{"numaAffinity":[0],"type":"memory","size":1073741824}]}},"checksum":4211590532}"#;

    #[test]
    fn reads_which_pods_memory_the_memory_manager_bound() {
        let m = parse_memory_manager_state(MEMORY_STATE).unwrap();
        assert_eq!(
            m.pods,
            [
                ("0e5b5a4c-1d3e-4b8a-9f5e-2c1d0a9b8c7d".into(), set("1")),
                ("11111111-2222-3333-4444-555555555555".into(), set("0")),
                ("7f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f".into(), set("0-1")),
            ]
        );
        let systemd = "/kubepods.slice/kubepods-pod7f1c2d3e_4a5b_6c7d_8e9f_0a1b2c3d4e5f.slice/x";
        assert_eq!(m.pod_of(systemd).unwrap().1, set("0-1"));
        // The None policy: no entries, nothing bound.
        let none = r#"{"policyName":"None","machineState":{},"checksum":1}"#;
        assert_eq!(
            parse_memory_manager_state(none).unwrap(),
            MemoryPods::default()
        );
        for (text, want) in [
            (r#"{"machineState":{}}"#, "no policyName"),
            (
                r#"{"policyName":"None","entries":{"p":{"a":[{"numaAffinity":[0]}]}}}"#,
                "with memory assignments",
            ),
            (
                r#"{"policyName":"Static","entries":{"p":{"a":[{"type":"memory"}]}}}"#,
                "without numaAffinity",
            ),
            (
                r#"{"policyName":"Static","entries":{"p":{"a":[{"numaAffinity":[-1]}]}}}"#,
                "is not one",
            ),
            (
                r#"{"policyName":"Static","entries":{"p":[]}}"#,
                "not as the kubelet writes them",
            ),
            (
                r#"{"policyName":"Static","podEntries":{"p/..":{"memoryBlocks":[]}}}"#,
                "is not one",
            ),
        ] {
            let e = parse_memory_manager_state(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    proptest::proptest! {
        /// Hostile memory checkpoints: any text, and the real one cut or
        /// spliced, parses or is refused, never panics.
        #[test]
        fn any_memory_checkpoint_parses_or_is_refused(
            text in proptest::prelude::any::<String>(),
            cut in 0usize..1200,
            splice in "[\\[\\]{}\":,0-9a-zA-Z -]{0,12}",
        ) {
            let _ = parse_memory_manager_state(&text);
            let cut = cut.min(MEMORY_STATE.len());
            let _ = parse_memory_manager_state(&MEMORY_STATE[..cut]);
            let spliced = format!("{}{splice}{}", &MEMORY_STATE[..cut], &MEMORY_STATE[cut..]);
            if let Ok(m) = parse_memory_manager_state(&spliced) {
                proptest::prop_assert!(m.pods.iter().all(|(_, n)| !n.is_empty()));
            }
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
