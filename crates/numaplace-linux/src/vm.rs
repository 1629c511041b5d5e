//! Recognising QEMU/KVM virtual machines among processes.
//!
//! QEMU names its vCPU threads `CPU <n>/KVM` (or `/TCG` under emulation),
//! but any process can name its threads so. numaplace calls a process a VM
//! only when those names come with evidence the process cannot fake by
//! renaming itself: file descriptors of KVM vCPUs (`anon_inode:kvm-vcpu:N`
//! in `/proc/<pid>/fd`), or an executable (the kernel's `/proc/<pid>/exe`
//! link, set by `execve`) named `qemu-system-*` or `qemu-kvm` that is
//! root's and writable by no one else, as a package installs it. Any user
//! can copy an interpreter to a file of that name (the copy is theirs) but
//! cannot make a root-owned file, nor hard-link one under another name
//! (`fs.protected_hardlinks`, on by default). Under a snapshot root the
//! link is only a recorded name: its name is what is checked.
//!
//! QEMU names its threads so only with `-name ...,debug-threads=on`; a VM
//! started without it is found through its QMP socket ([`qmp`]) or
//! libvirt's status file ([`libvirt`]), as [`discover`] does each round.

pub mod discover;
#[cfg(test)]
mod fake_qmp;
pub mod libvirt;
pub mod qmp;
pub mod virsh;

pub use discover::{VmDiscovery, VmSources};

use std::fs;

use numaplace_model::GroupKind;
use numaplace_model::task::{parse_vcpu_comm, qemu_guest_name};

use crate::sysroot::SysRoot;

/// vCPU indexes of the KVM vCPU file descriptors the process holds, or
/// `None` if its fd table cannot be read (another user's process, gone).
pub fn kvm_vcpu_fds(root: &SysRoot, pid: i32) -> Option<Vec<u32>> {
    let dir = root.join(&format!("proc/{pid}/fd"));
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).ok()? {
        let Ok(entry) = entry else { continue };
        let Ok(target) = fs::read_link(entry.path()) else {
            continue;
        };
        if let Some(n) = target
            .to_str()
            .and_then(|t| t.strip_prefix("anon_inode:kvm-vcpu:"))
            .and_then(|n| n.parse().ok())
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Some(out)
}

/// The file name of the process's executable, from the kernel's link.
pub fn exe_name(root: &SysRoot, pid: i32) -> Option<String> {
    let target = fs::read_link(root.join(&format!("proc/{pid}/exe"))).ok()?;
    let name = target.file_name()?.to_str()?;
    // A replaced or deleted binary reads "qemu-system-x86_64 (deleted)".
    Some(name.trim_end_matches(" (deleted)").to_string())
}

fn is_qemu_exe(name: &str) -> bool {
    name.starts_with("qemu-system-") || name == "qemu-kvm"
}

/// The process runs a QEMU executable as a package installs it: named so,
/// and (on the live host) root's and not writable by group or others.
fn runs_installed_qemu(root: &SysRoot, pid: i32) -> bool {
    if !exe_name(root, pid).is_some_and(|n| is_qemu_exe(&n)) {
        return false;
    }
    if !root.is_host() {
        return true;
    }
    use std::os::unix::fs::MetadataExt;
    // The link's target: the executable's inode, also once deleted.
    fs::metadata(root.join(&format!("proc/{pid}/exe")))
        .is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0)
}

/// Why a process is a VM whatever it calls itself: it holds KVM vCPU fds
/// (`kvm-vcpu fds`) or runs an installed QEMU executable (`qemu
/// executable`: root's, writable by no one else); `None` if neither.
pub fn vm_evidence(root: &SysRoot, pid: i32) -> Option<&'static str> {
    if kvm_vcpu_fds(root, pid).is_some_and(|fds| !fds.is_empty()) {
        Some("kvm-vcpu fds")
    } else if runs_installed_qemu(root, pid) {
        Some("qemu executable")
    } else {
        None
    }
}

/// Classifies a process from its threads' `(tid, comm)` and command line.
/// Returns its kind and, for a VM, the vCPU index of each vCPU thread.
pub fn classify(
    root: &SysRoot,
    pid: i32,
    threads: &[(i32, &str)],
    cmdline: &[String],
) -> (GroupKind, Vec<(i32, u32)>) {
    let named: Vec<(i32, u32, &str)> = threads
        .iter()
        .filter_map(|&(tid, comm)| parse_vcpu_comm(comm).map(|(n, accel)| (tid, n, accel)))
        .collect();
    if named.is_empty() {
        return (GroupKind::Process, Vec::new());
    }
    let Some(evidence) = vm_evidence(root, pid) else {
        tracing::debug!("process {pid} names threads like vCPUs but shows no sign of being a VM");
        return (GroupKind::Process, Vec::new());
    };
    let kind = GroupKind::Vm {
        name: qemu_guest_name(cmdline),
        accel: named[0].2.to_string(),
        evidence: evidence.to_string(),
    };
    (kind, named.iter().map(|&(tid, n, _)| (tid, n)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(pid: i32, exe: &str) -> (tempfile::TempDir, SysRoot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        let p = dir.path().join(format!("proc/{pid}"));
        std::fs::create_dir_all(p.join("fd")).unwrap();
        std::os::unix::fs::symlink(exe, p.join("exe")).unwrap();
        let root = SysRoot::new(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn names_alone_do_not_make_a_vm() {
        let (_d, root) = fake_proc(10, "/usr/bin/python3");
        let threads = [(10, "python3"), (11, "CPU 0/KVM")];
        let (kind, vcpus) = classify(&root, 10, &threads, &["python3".into()]);
        assert_eq!(kind, GroupKind::Process);
        assert!(vcpus.is_empty());
    }

    #[test]
    fn qemu_with_vcpu_fds_or_executable() {
        let (d, root) = fake_proc(20, "/usr/bin/qemu-system-x86_64");
        let cmd: Vec<String> = ["qemu-system-x86_64", "-name", "guest=web,debug-threads=on"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let threads = [
            (20, "qemu-system-x86"),
            (21, "CPU 0/TCG"),
            (22, "CPU 1/TCG"),
        ];
        let (kind, vcpus) = classify(&root, 20, &threads, &cmd);
        assert_eq!(
            kind,
            GroupKind::Vm {
                name: Some("web".into()),
                accel: "TCG".into(),
                evidence: "qemu executable".into()
            }
        );
        assert_eq!(vcpus, vec![(21, 0), (22, 1)]);

        // KVM vCPU fds are evidence even for a renamed binary.
        let p = d.path().join("proc/20");
        std::fs::remove_file(p.join("exe")).unwrap();
        std::os::unix::fs::symlink("/opt/vmm", p.join("exe")).unwrap();
        std::os::unix::fs::symlink("anon_inode:kvm-vcpu:0", p.join("fd/12")).unwrap();
        let threads = [(20, "vmm"), (21, "CPU 0/KVM")];
        let (kind, _) = classify(&root, 20, &threads, &cmd);
        assert!(matches!(kind, GroupKind::Vm { ref evidence, .. } if evidence == "kvm-vcpu fds"));
        assert_eq!(kvm_vcpu_fds(&root, 20), Some(vec![0]));
        assert_eq!(kvm_vcpu_fds(&root, 99), None);
    }
}
