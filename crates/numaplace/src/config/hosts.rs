//! The config's tables for the hosts numaplace shares a machine with:
//! `[vms]` (libvirt's and QEMU's VMs) and `[kubernetes]` (the kubelet).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[vms]`: where VMs whose vCPU threads carry no names (QEMU without
/// `-name ...,debug-threads=on`) are found: QMP sockets, and libvirt's
/// status files (`numaplace_linux::vm::discover` says what is believed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VmsSection {
    /// QMP sockets to ask (`-qmp unix:PATH,server=on,wait=off`): absolute
    /// paths whose file name may hold `*` and `?`, e.g. `/run/qemu/*.qmp`.
    pub qmp: Vec<String>,
    /// Whether libvirt's status files (`/run/libvirt/qemu/*.xml`) are read.
    pub libvirt: bool,
    /// What becomes of a domain its owner pinned in libvirt's XML
    /// (`<vcpupin>`, `<emulatorpin>`, `<vcpu cpuset>`): `"leave"` (the
    /// default) leaves those threads to their owner, `"place"` lets the
    /// policy place them (through libvirt, as every domain).
    pub libvirt_pinned: String,
    /// The `virsh` numaplace pins libvirt's domains with: a path, or a
    /// name looked up in `PATH`.
    pub virsh: String,
    /// The libvirt connection `virsh` is given.
    pub libvirt_uri: String,
}

impl Default for VmsSection {
    fn default() -> Self {
        VmsSection {
            qmp: Vec::new(),
            libvirt: true,
            libvirt_pinned: "leave".into(),
            virsh: "virsh".into(),
            libvirt_uri: numaplace_linux::vm::virsh::SYSTEM_URI.into(),
        }
    }
}

impl VmsSection {
    pub(super) fn validate(&self) -> Result<(), String> {
        use numaplace_linux::vm::discover::{MAX_PATTERNS, check_qmp_pattern};
        if self.qmp.len() > MAX_PATTERNS {
            return Err(format!(
                "[vms] qmp: {} patterns, at most {MAX_PATTERNS}; one pattern with * can match \
                 many sockets",
                self.qmp.len()
            ));
        }
        for p in &self.qmp {
            check_qmp_pattern(p).map_err(|e| format!("[vms] qmp {e}"))?;
        }
        if !matches!(self.libvirt_pinned.as_str(), "leave" | "place") {
            return Err(format!(
                "[vms] libvirt_pinned = {:?}: give \"leave\" (domains their owner pinned in \
                 libvirt's XML are left to them) or \"place\" (numaplace places them too)",
                self.libvirt_pinned
            ));
        }
        for (key, v) in [("virsh", &self.virsh), ("libvirt_uri", &self.libvirt_uri)] {
            if v.is_empty()
                || v.len() > 4096
                || v.starts_with('-')
                || v.chars().any(char::is_control)
            {
                return Err(format!(
                    "[vms] {key} = {v:?}: give a path or name (virsh) or a libvirt URI \
                     (qemu:///system), not empty, without control characters, not starting \
                     with '-'"
                ));
            }
        }
        Ok(())
    }

    /// The client numaplace pins libvirt's domains with.
    pub(crate) fn virsh(&self) -> numaplace_linux::vm::virsh::Virsh {
        numaplace_linux::vm::virsh::Virsh::new(
            &self.virsh,
            &self.libvirt_uri,
            numaplace_linux::vm::virsh::DEFAULT_TIMEOUT,
        )
    }

    /// Why numaplace cannot act through libvirt on this host, or `None`:
    /// it can, or there is no libvirt here (no state directory of its
    /// QEMU driver), or libvirt's domains are not looked for. Asked once,
    /// with `virsh uri`.
    /// Once per process: the daemon's start, its restore and its
    /// collector ask the same.
    pub fn libvirt_unreachable(&self) -> Option<String> {
        static ASKED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let root = numaplace_linux::SysRoot::host();
        if !self.libvirt || !root.join(numaplace_linux::vm::libvirt::STATE_DIR).is_dir() {
            return None;
        }
        ASKED
            .get_or_init(|| {
                let e = self.virsh().run(&["uri"]).err()?;
                tracing::warn!(
                    "libvirt's domains will be left alone: {e}; numaplace pins them only \
                     through libvirt, which would undo a pin made behind its back"
                );
                Some(e.to_string())
            })
            .clone()
    }

    /// The sources, for the collector; `unreachable` from
    /// [`libvirt_unreachable`](Self::libvirt_unreachable).
    pub fn sources(&self, unreachable: Option<String>) -> numaplace_linux::vm::VmSources {
        numaplace_linux::vm::VmSources {
            qmp: self.qmp.clone(),
            libvirt: self.libvirt,
            place_owner_pinned: self.libvirt_pinned == "place",
            libvirt_unreachable: unreachable,
        }
    }
}

/// `[kubernetes]`: the kubelet's static CPU and memory managers, read
/// from their checkpoints each round (`numaplace_linux::kubelet` says what
/// is believed): no thread is placed onto a CPU it handed a Guaranteed
/// container, and a pod holding such CPUs or whose memory it bound to
/// nodes is left to the kubelet unless opted in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubernetesSection {
    /// The kubelet's `cpu_manager_state` (under its `--root-dir`); read
    /// when it exists, `""` for not at all.
    pub cpu_manager_state: PathBuf,
    /// The kubelet's `memory_manager_state`; read when it exists, `""` for
    /// not at all.
    pub memory_manager_state: PathBuf,
    /// Place the threads of pods the kubelet placed too (within their
    /// exclusive CPUs, their memory within its nodes), rather than leave
    /// them to the kubelet.
    pub place_guaranteed: bool,
}

impl Default for KubernetesSection {
    fn default() -> Self {
        KubernetesSection {
            cpu_manager_state: numaplace_linux::kubelet::DEFAULT_CPU_MANAGER_STATE.into(),
            memory_manager_state: numaplace_linux::kubelet::DEFAULT_MEMORY_MANAGER_STATE.into(),
            place_guaranteed: false,
        }
    }
}

impl KubernetesSection {
    pub(super) fn validate(&self) -> Result<(), String> {
        for (key, p) in [
            ("cpu_manager_state", &self.cpu_manager_state),
            ("memory_manager_state", &self.memory_manager_state),
        ] {
            if !p.as_os_str().is_empty() && !p.is_absolute() {
                return Err(format!(
                    "[kubernetes] {key} = {:?}: give an absolute path (the kubelet's is \
                     /var/lib/kubelet/{key}), or \"\" to read none",
                    p.display()
                ));
            }
        }
        Ok(())
    }

    /// The CPU manager's checkpoint to read, if any.
    pub(crate) fn cpu_manager_state(&self) -> Option<PathBuf> {
        named(&self.cpu_manager_state)
    }

    /// What the collector reads of the kubelet's.
    pub fn files(&self) -> numaplace_linux::confinement::KubeletFiles {
        numaplace_linux::confinement::KubeletFiles {
            cpu_manager_state: self.cpu_manager_state(),
            memory_manager_state: named(&self.memory_manager_state),
            place_guaranteed: self.place_guaranteed,
        }
    }
}

/// A path given, or `None` for `""`.
fn named(p: &std::path::Path) -> Option<PathBuf> {
    (!p.as_os_str().is_empty()).then(|| p.to_path_buf())
}
