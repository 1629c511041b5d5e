//! Where a cgroup confines its tasks: the CPUs of its cpuset.
//!
//! A task in a cpuset cgroup runs only on the cgroup's effective CPUs: the
//! kernel keeps the task's affinity inside them (`sched_setaffinity` takes
//! the intersection, and fails with `EINVAL` when it is empty). libvirt
//! confines each domain so (`machine.slice/machine-qemu…`), as do the
//! kubelet (pods, its static CPU manager's shared pool), systemd's
//! `AllowedCPUs=` and container runtimes. Such a task did not choose its
//! CPUs: numaplace places it inside them ([`numaplace_model::Task::room`]).
//!
//! cgroup v2: `cpuset.cpus.effective` of the process's cgroup, or, where
//! the cpuset controller is not enabled there, of the nearest ancestor
//! that has the file (a cgroup without the controller shares its parent's
//! CPUs). cgroup v1: `cpuset.effective_cpus` (`cpuset.cpus` on kernels
//! without it) of the process's cgroup in the cpuset hierarchy. A set equal
//! to the root cgroup's (the whole machine) confines nothing.

use std::collections::HashMap;
use std::path::PathBuf;

use numaplace_model::{CpuSet, Manager};

use crate::kubelet::{CpuManagerState, Exclusive, MemoryManagerState, MemoryPods};
use crate::sysroot::SysRoot;

/// Where the cgroup hierarchies are mounted, relative to the root.
const V2: &str = "sys/fs/cgroup";
const V1_CPUSET: &str = "sys/fs/cgroup/cpuset";
/// A cpuset file is a CPU list: a few hundred bytes at most on any machine
/// Linux runs on; anything longer is not one.
const MAX_BYTES: u64 = 64 * 1024;

/// A process's cgroups, as its `/proc/<pid>/cgroup` names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cgroups {
    /// Its cgroup in the unified (v2) hierarchy.
    pub unified: Option<String>,
    /// Its cgroup in a v1 cpuset hierarchy, where there is one.
    pub cpuset_v1: Option<String>,
}

impl Cgroups {
    /// From the parsed `cgroup` file.
    pub fn of(info: &numaplace_parse::procfs::CgroupInfo) -> Cgroups {
        Cgroups {
            unified: info.v2_path.clone(),
            cpuset_v1: info
                .v1
                .iter()
                .find(|(controllers, _)| controllers.split(',').any(|c| c == "cpuset"))
                .map(|(_, path)| path.clone()),
        }
    }
}

/// The effective CPUs of cpuset cgroups, read once a round per cgroup.
#[derive(Debug)]
pub struct Confinements {
    root: SysRoot,
    /// Per hierarchy (v2, v1), path -> its CPUs where narrower than the
    /// root's (looked up by `&str`: no copy of the path per process).
    cache: [HashMap<String, Option<CpuSet>>; 2],
    /// The root cgroup's effective CPUs, per hierarchy (v2, v1), this round.
    whole: [Option<Option<CpuSet>>; 2],
    /// The kubelet's static CPU manager, where its checkpoint is read.
    kubelet: Option<Kubelet>,
}

/// The kubelet's checkpoints numaplace reads ([`Confinements::set_kubelet`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeletFiles {
    /// Its CPU manager's `cpu_manager_state`, if read.
    pub cpu_manager_state: Option<PathBuf>,
    /// Its memory manager's `memory_manager_state`, if read.
    pub memory_manager_state: Option<PathBuf>,
    /// Whether Guaranteed pods the kubelet placed (exclusive CPUs, memory
    /// on chosen nodes) are placed too (within what the kubelet gave
    /// them) rather than left to the kubelet.
    pub place_guaranteed: bool,
}

/// The kubelet's exclusive CPUs and memory-bound pods, read each round.
#[derive(Debug)]
struct Kubelet {
    cpu: Option<Read<CpuManagerState, Exclusive>>,
    memory: Option<Read<MemoryManagerState, MemoryPods>>,
    place_guaranteed: bool,
}

/// One checkpoint and what it said this round.
#[derive(Debug)]
struct Read<F, T> {
    file: F,
    /// This round's.
    now: Option<T>,
    /// The trouble last said, so it is said once.
    said: Option<String>,
}

impl<T: Clone> Read<crate::kubelet::Checkpoint<T>, T> {
    fn new(file: crate::kubelet::Checkpoint<T>) -> Self {
        Read {
            file,
            now: None,
            said: None,
        }
    }

    /// Reads it again where it changed; trouble said once, and then
    /// nothing counts as the kubelet's (`what` says what that means).
    fn new_round(&mut self, what: &str) {
        self.now = match self.file.read() {
            Ok(now) => {
                self.said = None;
                now
            }
            Err(e) => {
                if self.said.as_ref() != Some(&e) {
                    tracing::warn!("{e}; until it reads, {what}");
                    self.said = Some(e);
                }
                None
            }
        };
    }
}

impl Confinements {
    /// Reads cgroups' cpusets under `root`, remembering none yet.
    pub fn new(root: SysRoot) -> Confinements {
        Confinements {
            root,
            cache: [HashMap::new(), HashMap::new()],
            whole: [None, None],
            kubelet: None,
        }
    }

    /// Reads the kubelet's CPU and memory manager checkpoints each round
    /// (where named): no thread is placed onto a CPU the kubelet handed a
    /// container for its sole use, and a pod that holds such CPUs, or
    /// whose memory the memory manager bound to nodes, is left to the
    /// kubelet unless `place_guaranteed`.
    pub fn set_kubelet(&mut self, files: KubeletFiles) {
        self.kubelet = (files.cpu_manager_state.is_some() || files.memory_manager_state.is_some())
            .then(|| Kubelet {
                cpu: (files.cpu_manager_state).map(|p| Read::new(CpuManagerState::new(p))),
                memory: (files.memory_manager_state).map(|p| Read::new(MemoryManagerState::new(p))),
                place_guaranteed: files.place_guaranteed,
            });
    }

    /// Where a process's threads may be placed, and who else holds them:
    /// its cgroup's CPUs ([`cpus`](Self::cpus)) without the kubelet's
    /// exclusive CPUs, or, for a pod holding exclusive CPUs, its cgroup's
    /// CPUs and the kubelet as its manager.
    pub fn room(&mut self, cgroups: &Cgroups) -> (Option<CpuSet>, Option<Manager>) {
        let confined = self.cpus(cgroups);
        let Some(k) = &self.kubelet else {
            return (confined, None);
        };
        let path = cgroups.unified.as_deref().or(cgroups.cpuset_v1.as_deref());
        let cpu = k.cpu.as_ref().and_then(|r| r.now.as_ref());
        let memory = k.memory.as_ref().and_then(|r| r.now.as_ref());
        let held = path.and_then(|p| {
            let by_cpus = cpu.and_then(|e| e.pod_of(p)).map(|(uid, cpus)| {
                let why = format!(
                    "its pod holds CPUs {cpus} for its sole use (a Guaranteed pod, the \
                     kubelet's static CPU manager); [kubernetes] place_guaranteed = true lets \
                     numaplace place it within them"
                );
                (uid, why)
            });
            by_cpus.or_else(|| {
                memory.and_then(|m| m.pod_of(p)).map(|(uid, nodes)| {
                    let why = format!(
                        "its pod's memory is bound to nodes {nodes} (a Guaranteed pod, the \
                         kubelet's static memory manager); [kubernetes] place_guaranteed = true \
                         lets numaplace place it, its memory within those nodes"
                    );
                    (uid, why)
                })
            })
        });
        if let Some((uid, why)) = held {
            let manager = Manager {
                who: format!("the kubelet (pod {uid})"),
                hands_off: (!k.place_guaranteed).then_some(why),
                sets_memory_nodes: false,
            };
            return (confined, Some(manager));
        }
        let Some(e) = cpu.filter(|e| !e.cpus.is_empty()) else {
            return (confined, None);
        };
        let exclusive = e.cpus.clone();
        let Some(base) = confined.or_else(|| self.machine()) else {
            return (None, None);
        };
        (Some(base.difference(&exclusive)), None)
    }

    /// The whole machine's CPUs: the root cgroup's, or those online.
    fn machine(&mut self) -> Option<CpuSet> {
        self.whole(false).or_else(|| self.whole(true)).or_else(|| {
            let text = self.root.read("sys/devices/system/cpu/online").ok()?;
            CpuSet::parse_list(text.trim()).ok()
        })
    }

    /// Forgets what was read: a cgroup's CPUs may change between rounds
    /// (the kubelet hands CPUs out, `virsh emulatorpin`, systemd
    /// `set-property`).
    pub fn new_round(&mut self) {
        self.cache.iter_mut().for_each(HashMap::clear);
        self.whole = [None, None];
        if let Some(k) = &mut self.kubelet {
            if let Some(r) = &mut k.cpu {
                r.new_round("no CPU counts as the kubelet's exclusive CPUs");
            }
            if let Some(r) = &mut k.memory {
                r.new_round("no pod counts as one whose memory the kubelet bound to nodes");
            }
        }
    }

    /// The CPUs the process's cgroups confine it to, where a cpuset
    /// narrower than the whole machine does; `None` if none does or none
    /// could be read (the whole machine, as before cgroups).
    pub fn cpus(&mut self, cgroups: &Cgroups) -> Option<CpuSet> {
        if let Some(found) = (cgroups.unified.as_ref()).and_then(|path| self.lookup(false, path)) {
            return found;
        }
        if let Some(found) = (cgroups.cpuset_v1.as_ref()).and_then(|path| self.lookup(true, path)) {
            return found;
        }
        None
    }

    /// `Some(confinement)` where the hierarchy has a cpuset file for the
    /// cgroup or an ancestor; `None` where it has none (no cpuset there).
    fn lookup(&mut self, v1: bool, path: &str) -> Option<Option<CpuSet>> {
        if let Some(c) = self.cache[usize::from(v1)].get(path) {
            return Some(c.clone());
        }
        let whole = self.whole(v1)?;
        let found = self.effective(v1, path)?;
        let confined = (found != whole && !found.is_empty()).then_some(found);
        self.cache[usize::from(v1)].insert(path.to_string(), confined.clone());
        Some(confined)
    }

    /// The root cgroup's effective CPUs in one hierarchy (read once a
    /// round); `None` where that hierarchy has no cpuset.
    fn whole(&mut self, v1: bool) -> Option<CpuSet> {
        let i = usize::from(v1);
        if self.whole[i].is_none() {
            self.whole[i] = Some(self.effective(v1, "/"));
        }
        self.whole[i].clone().flatten()
    }

    /// The effective CPUs of `path`, or of its nearest ancestor with a
    /// cpuset file; `None` if none has one or `path` is not a cgroup path
    /// (a `.` or `..` component: never read outside the hierarchy).
    fn effective(&self, v1: bool, path: &str) -> Option<CpuSet> {
        // A cgroup removed while the process was in it keeps the name.
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.iter().any(|p| *p == "." || *p == "..") {
            return None;
        }
        let parts = &parts[..parts.len() - libvirt_thread_cgroup(&parts)];
        let (base, files): (&str, &[&str]) = if v1 {
            (V1_CPUSET, &["cpuset.effective_cpus", "cpuset.cpus"])
        } else {
            (V2, &["cpuset.cpus.effective"])
        };
        for depth in (0..=parts.len()).rev() {
            let dir = std::iter::once(base)
                .chain(parts[..depth].iter().copied())
                .collect::<Vec<_>>()
                .join("/");
            for file in files {
                let p = self.root.join(&format!("{dir}/{file}"));
                let Ok(text) = numaplace_io::bounded::read_to_string(&p, MAX_BYTES) else {
                    continue;
                };
                // An empty effective set (a v2 cgroup whose cpuset has no
                // CPUs yet) or one that does not parse says nothing.
                return CpuSet::parse_list(text.trim()).ok();
            }
        }
        None
    }
}

/// How many trailing components of a cgroup path are one of the thread
/// cgroups libvirt makes inside a domain's cgroup: `libvirt/emulator`,
/// `libvirt/vcpuN`, `libvirt/iothreadN` (cgroup v2), or the same names
/// right under a `machine-qemu...` / `qemu-...` scope (v1). Their cpusets
/// are libvirt's pins (`emulatorpin`, `vcpupin`), which numaplace changes
/// through libvirt: the domain's own cgroup is what confines its threads.
fn libvirt_thread_cgroup(parts: &[&str]) -> usize {
    let [.., parent, leaf] = parts else { return 0 };
    let thread = *leaf == "emulator"
        || ["vcpu", "iothread"].iter().any(|p| {
            leaf.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
    if !thread {
        0
    } else if *parent == "libvirt" && parts.len() >= 3 {
        2
    } else if parent.contains("qemu") {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, Confinements) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        for (p, text) in files {
            let p = dir.path().join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        let root = SysRoot::new(dir.path()).unwrap();
        (dir, Confinements::new(root))
    }

    fn v2(path: &str) -> Cgroups {
        Cgroups {
            unified: Some(path.into()),
            cpuset_v1: None,
        }
    }

    #[test]
    fn a_v2_cgroup_narrower_than_the_root_confines_and_its_children_inherit_it() {
        let (_d, mut c) = tree(&[
            ("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n"),
            ("sys/fs/cgroup/machine.slice/cpuset.cpus.effective", "0-7\n"),
            (
                "sys/fs/cgroup/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope/cpuset.cpus.effective",
                "4-7\n",
            ),
            // No cpuset controller below: the file is absent.
            (
                "sys/fs/cgroup/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope/libvirt/vcpu0/cgroup.procs",
                "",
            ),
        ]);
        let vm = "/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope";
        assert_eq!(c.cpus(&v2(vm)).unwrap().to_list_string(), "4-7");
        assert_eq!(
            c.cpus(&v2(&format!("{vm}/libvirt/vcpu0")))
                .unwrap()
                .to_list_string(),
            "4-7"
        );
        // As wide as the machine: not confined.
        assert_eq!(c.cpus(&v2("/machine.slice")), None);
        assert_eq!(c.cpus(&v2("/user.slice/user-0.slice")), None);
        assert_eq!(c.cpus(&v2("/")), None);
        // A removed cgroup keeps its name with the kernel's suffix.
        assert_eq!(
            c.cpus(&v2(&format!("{vm} (deleted)")))
                .unwrap()
                .to_list_string(),
            "4-7"
        );
    }

    /// libvirt's thread cgroups hold its pins (emulatorpin, vcpupin),
    /// which numaplace changes through libvirt: the domain's cgroup
    /// confines its threads, on v2 and v1 layouts alike.
    #[test]
    fn a_libvirt_domains_threads_are_confined_by_the_domains_cgroup() {
        let vm = "machine.slice/machine-qemu\\x2d1\\x2dvm1.scope";
        let (_d, mut c) = tree(&[
            ("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n"),
            (
                &format!("sys/fs/cgroup/{vm}/cpuset.cpus.effective"),
                "0-5\n",
            ),
            (
                &format!("sys/fs/cgroup/{vm}/libvirt/emulator/cpuset.cpus.effective"),
                "0\n",
            ),
            (
                &format!("sys/fs/cgroup/{vm}/libvirt/vcpu12/cpuset.cpus.effective"),
                "3\n",
            ),
            (
                &format!("sys/fs/cgroup/{vm}/libvirt/iothread1/cpuset.cpus.effective"),
                "4\n",
            ),
            (
                &format!("sys/fs/cgroup/{vm}/libvirt/other/cpuset.cpus.effective"),
                "5\n",
            ),
            ("sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-7\n"),
            (
                "sys/fs/cgroup/cpuset/machine/qemu-2-vm2/cpuset.effective_cpus",
                "2-7\n",
            ),
            (
                "sys/fs/cgroup/cpuset/machine/qemu-2-vm2/vcpu0/cpuset.effective_cpus",
                "6\n",
            ),
            (
                "sys/fs/cgroup/cpuset/app/emulator/cpuset.effective_cpus",
                "7\n",
            ),
        ]);
        for leaf in ["libvirt/emulator", "libvirt/vcpu12", "libvirt/iothread1"] {
            let cpus = c.cpus(&v2(&format!("/{vm}/{leaf}"))).unwrap();
            assert_eq!(cpus.to_list_string(), "0-5", "{leaf}");
        }
        // Not one of libvirt's thread cgroups: its own cpuset.
        let other = c.cpus(&v2(&format!("/{vm}/libvirt/other"))).unwrap();
        assert_eq!(other.to_list_string(), "5");
        let v1 = |p: &str| Cgroups {
            unified: None,
            cpuset_v1: Some(p.into()),
        };
        let vcpu = c.cpus(&v1("/machine/qemu-2-vm2/vcpu0")).unwrap();
        assert_eq!(vcpu.to_list_string(), "2-7");
        // libvirt 9 on cgroup v2 without systemd (seen in the QEMU test
        // bed): the thread cgroups right under the domain's.
        let (_d2, mut c2) = tree(&[
            ("sys/fs/cgroup/cpuset.cpus.effective", "0-3\n"),
            (
                "sys/fs/cgroup/machine/qemu-2-bed.libvirt-qemu/cpuset.cpus.effective",
                "0-2\n",
            ),
            (
                "sys/fs/cgroup/machine/qemu-2-bed.libvirt-qemu/vcpu1/cpuset.cpus.effective",
                "2\n",
            ),
        ]);
        let vcpu = c2
            .cpus(&v2("/machine/qemu-2-bed.libvirt-qemu/vcpu1"))
            .unwrap();
        assert_eq!(vcpu.to_list_string(), "0-2");
        // `emulator` under something that is not a QEMU domain's scope.
        assert_eq!(c.cpus(&v1("/app/emulator")).unwrap().to_list_string(), "7");
        assert_eq!(libvirt_thread_cgroup(&["libvirt", "vcpu0"]), 0);
        assert_eq!(libvirt_thread_cgroup(&["a", "libvirt", "vcpu"]), 0);
        assert_eq!(libvirt_thread_cgroup(&["a", "libvirt", "vcpu0x"]), 0);
    }

    #[test]
    fn a_path_that_leaves_the_hierarchy_is_not_read() {
        let (_d, mut c) = tree(&[
            ("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n"),
            ("sys/fs/cpuset.cpus.effective", "1\n"),
        ]);
        assert_eq!(c.cpus(&v2("/..")), None);
        assert_eq!(c.cpus(&v2("/a/../..")), None);
    }

    #[test]
    fn without_a_v2_cpuset_the_v1_cpuset_hierarchy_is_read() {
        let (_d, mut c) = tree(&[
            ("sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-15\n"),
            (
                "sys/fs/cgroup/cpuset/kubepods/cpuset.effective_cpus",
                "0-15\n",
            ),
            (
                "sys/fs/cgroup/cpuset/kubepods/pod1/cpuset.effective_cpus",
                "2-3\n",
            ),
            // An old kernel: only cpuset.cpus.
            ("sys/fs/cgroup/cpuset/old/cpuset.cpus", "5\n"),
            ("sys/fs/cgroup/unified/cgroup.procs", ""),
        ]);
        let info = numaplace_parse::procfs::parse_cgroup(
            "12:cpuset:/kubepods/pod1\n1:name=systemd:/kubepods/pod1\n0::/kubepods/pod1\n",
        );
        let cg = Cgroups::of(&info);
        assert_eq!(cg.cpuset_v1.as_deref(), Some("/kubepods/pod1"));
        assert_eq!(c.cpus(&cg).unwrap().to_list_string(), "2-3");
        let old = Cgroups {
            unified: None,
            cpuset_v1: Some("/old".into()),
        };
        assert_eq!(c.cpus(&old).unwrap().to_list_string(), "5");
        assert_eq!(c.cpus(&Cgroups::default()), None);
    }

    #[test]
    fn a_cpuset_that_changes_is_read_again_the_next_round() {
        let (d, mut c) = tree(&[
            ("sys/fs/cgroup/cpuset.cpus.effective", "0-3\n"),
            ("sys/fs/cgroup/pod/cpuset.cpus.effective", "0-1\n"),
        ]);
        assert_eq!(c.cpus(&v2("/pod")).unwrap().to_list_string(), "0-1");
        fs::write(
            d.path().join("sys/fs/cgroup/pod/cpuset.cpus.effective"),
            "2-3\n",
        )
        .unwrap();
        assert_eq!(c.cpus(&v2("/pod")).unwrap().to_list_string(), "0-1");
        c.new_round();
        assert_eq!(c.cpus(&v2("/pod")).unwrap().to_list_string(), "2-3");
    }

    /// A pod whose memory the memory manager bound is the kubelet's, left
    /// alone unless `place_guaranteed`; a pod with exclusive CPUs says
    /// those first; other processes lose the exclusive CPUs only.
    #[test]
    fn the_kubelets_pods_are_its_own_and_its_cpus_no_one_elses() {
        let (d, mut c) = tree(&[
            ("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n"),
            ("sys/fs/cgroup/kubepods/cpuset.cpus.effective", "0-7\n"),
            (
                "var/lib/kubelet/cpu_manager_state",
                r#"{"policyName":"static","defaultCpuSet":"0-1,3-7","entries":{"aaaa":{"db":"2"}},"checksum":1}"#,
            ),
            (
                "var/lib/kubelet/memory_manager_state",
                r#"{"policyName":"Static","machineState":{},"entries":{"aaaa":{"db":[{"numaAffinity":[0],"type":"memory","size":1}]},"bbbb":{"c":[{"numaAffinity":[1],"type":"memory","size":1}]}},"checksum":1}"#,
            ),
        ]);
        let files = |place| KubeletFiles {
            cpu_manager_state: Some(d.path().join("var/lib/kubelet/cpu_manager_state")),
            memory_manager_state: Some(d.path().join("var/lib/kubelet/memory_manager_state")),
            place_guaranteed: place,
        };
        c.set_kubelet(files(false));
        c.new_round();
        let (_, m) = c.room(&v2("/kubepods/podaaaa/ctr"));
        let why = m.unwrap().hands_off.unwrap();
        assert!(why.contains("holds CPUs 2 for its sole use"), "{why}");
        let (_, m) = c.room(&v2("/kubepods/podbbbb/ctr"));
        let m = m.unwrap();
        assert_eq!(m.who, "the kubelet (pod bbbb)");
        let why = m.hands_off.unwrap();
        assert!(why.contains("memory is bound to nodes 1"), "{why}");
        let (room, m) = c.room(&v2("/system.slice/x.service"));
        assert_eq!(
            (room.unwrap().to_list_string(), m),
            ("0-1,3-7".into(), None)
        );
        // Opted in: still the kubelet's pods, no longer hands off.
        c.set_kubelet(files(true));
        c.new_round();
        let (_, m) = c.room(&v2("/kubepods/podbbbb/ctr"));
        assert_eq!(m.unwrap().hands_off, None);
        // Only the memory manager read: nothing is exclusive.
        c.set_kubelet(KubeletFiles {
            cpu_manager_state: None,
            ..files(false)
        });
        c.new_round();
        assert_eq!(c.room(&v2("/system.slice/x.service")), (None, None));
        assert!(c.room(&v2("/kubepods/podaaaa/ctr")).1.is_some());
    }
}
