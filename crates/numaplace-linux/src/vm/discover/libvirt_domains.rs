//! The libvirt side of VM discovery: each running domain's status file,
//! read again only when it changed, what it says checked against the
//! round as the parent module's doc says.

use std::collections::HashSet;
use std::path::PathBuf;

use numaplace_model::Snapshot;

use numaplace_model::CpuSet;
use numaplace_model::task::printable;

use super::{CLOCK_SLACK_SECS, Found, LibvirtDomain, Managed, StatusRead, VmDiscovery};
use crate::sysroot::SysRoot;
use crate::vm::libvirt::{self, DomainStatus, StatusFile};

impl VmDiscovery {
    /// The VMs libvirt's status files describe, each checked.
    pub(super) fn read_libvirt_domains(
        &mut self,
        root: &SysRoot,
        snapshot: &Snapshot,
    ) -> Vec<Found> {
        let dir = root.join(libvirt::STATE_DIR);
        let files = match libvirt::status_files(root) {
            Ok(f) => f,
            Err(libvirt::LibvirtError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                if self.said.insert((dir.clone(), "denied".into())) {
                    tracing::debug!(
                        "{}: not readable (root's); libvirt's domains are not read",
                        dir.display()
                    );
                }
                return Vec::new();
            }
            Err(e) => {
                self.say(
                    &dir,
                    "unreadable",
                    format_args!("{e}; libvirt's domains are not read"),
                );
                return Vec::new();
            }
        };
        let paths: HashSet<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
        self.status.retain(|p, _| paths.contains(p));
        let mut out = Vec::new();
        for file in files {
            let fresh = self
                .status
                .get(&file.path)
                .is_some_and(|r| r.version == file);
            if !fresh {
                let status = libvirt::read_status(&file.path).map_err(|e| e.to_string());
                self.status.insert(
                    file.path.clone(),
                    StatusRead {
                        version: file.clone(),
                        status,
                    },
                );
            }
            let read = &self.status[&file.path];
            let status = match &read.status {
                Ok(s) => s.clone(),
                Err(e) => {
                    let e = e.clone();
                    self.say(&file.path, "malformed", format_args!("{e}; ignored"));
                    continue;
                }
            };
            match self.check_domain(root, &file, &status, snapshot) {
                Ok(f) => out.push(f),
                Err(None) => {}
                Err(Some((kind, why))) => {
                    self.say(&file.path, kind, format_args!("{why}; ignored"));
                }
            }
        }
        out
    }

    /// A domain's status checked against the round; `Err(None)` for a
    /// domain whose process is not there (starting or stopping: normal).
    fn check_domain(
        &mut self,
        root: &SysRoot,
        file: &StatusFile,
        s: &DomainStatus,
        snapshot: &Snapshot,
    ) -> Result<Found, Option<(&'static str, String)>> {
        let Some(group) = snapshot.group(s.pid) else {
            return Err(None);
        };
        let (pid, start_time) = (group.pid, group.start_time);
        let Some(why_vm) = self.vm_evidence(root, pid, start_time) else {
            return Err(Some((
                "not a VM",
                format!(
                    "domain {}: its pid {pid} ({}) is not a VM: neither a qemu-system-*/qemu-kvm \
                     executable nor KVM vCPU fds (a stale status file?)",
                    s.name,
                    numaplace_model::task::printable(&group.comm)
                ),
            )));
        };
        if self
            .start_secs(root, start_time)
            .is_some_and(|started| started > file.mtime.0 + CLOCK_SLACK_SECS)
        {
            return Err(Some((
                "stale",
                format!(
                    "domain {}: process {pid} started after the file was last written: \
                     the file is stale and the pid another process's",
                    s.name
                ),
            )));
        }
        let vcpus = self.own_threads(&file.path, pid, &s.vcpus, &group.threads);
        if vcpus.is_empty() && !s.vcpus.is_empty() {
            return Err(Some((
                "no vCPU threads",
                format!(
                    "domain {}: none of its vCPU threads is a thread of process {pid}",
                    s.name
                ),
            )));
        }
        let accel = match s.domain_type.as_deref() {
            Some("kvm") => Some("KVM".to_string()),
            Some("qemu") => Some("TCG".to_string()),
            _ => None,
        };
        let managed = self.managed(root, s, pid, start_time, &vcpus);
        Ok(Found {
            pid,
            start_time,
            name: Some(s.name.clone()),
            accel,
            vcpus,
            source: format!("libvirt status {}", file.path.display()),
            why_vm,
            managed: Some(managed),
        })
    }

    /// Which of the domain's threads numaplace places through libvirt
    /// and which it leaves to libvirt, and why.
    ///
    /// A pin in the live definition is its owner's unless it pins nothing
    /// (all the CPUs online) or the domain asked numad where to start
    /// (`placement='auto'`: the advice is a starting point). numaplace's
    /// own live pins are written there too, but the engine knows its own
    /// (a thread whose affinity is what numaplace set stays placeable),
    /// and at a stop it puts back what libvirt had, which for a domain it
    /// may place is no pin or numad's.
    fn managed(
        &mut self,
        root: &SysRoot,
        s: &DomainStatus,
        pid: i32,
        start_time: u64,
        vcpus: &[(u32, i32)],
    ) -> Managed {
        let who = format!("libvirt domain {}", printable(&s.name));
        let mut m = Managed {
            who,
            all: None,
            vcpus: Vec::new(),
            emulator: None,
            domain: None,
            memory_through_libvirt: false,
        };
        if let Some(why) = &self.sources.libvirt_unreachable {
            m.all = Some(format!(
                "numaplace cannot act through libvirt ({why}), and a pin made behind \
                 libvirt's back would be undone by it"
            ));
            return m;
        }
        let Some(uuid) = &s.uuid else {
            m.all = Some("its status file gives no UUID to name it to virsh by".into());
            return m;
        };
        let p = &s.placement;
        if !p.auto && !self.sources.place_owner_pinned {
            let online = self.online_cpus(root);
            let pins = |c: &CpuSet| online.as_ref() != Some(c);
            let owner = |what: String| {
                format!(
                    "its owner pinned it in libvirt's XML ({what}); [vms] libvirt_pinned = \
                     \"place\" lets numaplace place it"
                )
            };
            if let Some(c) = p.cpuset.as_ref().filter(|c| pins(c)) {
                m.all = Some(owner(format!("<vcpu cpuset='{c}'>")));
            }
            m.vcpus = (p.vcpupins.iter())
                .filter(|(_, c)| pins(c))
                .map(|(v, c)| (*v, owner(format!("<vcpupin vcpu='{v}' cpuset='{c}'>"))))
                .collect();
            m.emulator = (p.emulatorpin.as_ref())
                .filter(|c| pins(c))
                .map(|c| owner(format!("<emulatorpin cpuset='{c}'>")));
        }
        // The nodes of a restrictive domain are libvirt's or numad's to
        // start with, numaplace's to change; an owner's own nodeset (a
        // domain placed statically) stays the owner's.
        let owner_nodes = !p.auto && !self.sources.place_owner_pinned && p.memory_nodeset_static;
        m.memory_through_libvirt = p.memory_mode.as_deref() == Some("restrictive") && !owner_nodes;
        m.domain = Some(LibvirtDomain {
            name: s.name.clone(),
            uuid: uuid.clone(),
            pid,
            start_time,
            vcpus: vcpus.to_vec(),
            memory_bound: (p.memory_mode.as_deref())
                .filter(|m| matches!(*m, "strict" | "restrictive"))
                .map(str::to_string),
        });
        m
    }
}
