//! Acting on libvirt's domains through libvirt: [`ThroughLibvirt`] wraps
//! another actuator and carries out a pin of a domain's thread with
//! `virsh vcpupin --live` (a vCPU thread) or `virsh emulatorpin --live`
//! (any other thread of its QEMU), so libvirt's live XML, its cgroups and
//! `virsh vcpuinfo` say what numaplace did; everything else goes to the
//! inner actuator. Restoring an original affinity is a pin too, so a stop
//! or the next start after a crash puts libvirt's placement back through
//! libvirt the same way.
//!
//! The domains come from VM discovery each round ([`SharedDomains`]):
//! only domains numaplace may act on through libvirt are listed (the
//! others' threads carry a [`Manager`] that leaves them alone, and the
//! engine does not pin them).
//!
//! Memory: a domain whose `<numatune>` mode is `strict` (a memory policy
//! on QEMU's memory) or `restrictive` (libvirt's cgroups' `cpuset.mems`)
//! has its memory bound to its nodes, where `move_pages` to another node
//! fails; its memory moves are declined with that reason. libvirt 9.0
//! changes a running domain's nodes only in mode `restrictive`
//! (`numatune --nodeset --live` refuses `strict`: "change of nodeset for
//! running domain requires restrictive numa mode"); doing that, and
//! putting libvirt's nodeset back at a stop, is not done yet. Other
//! domains' memory moves page by page as any process's does: libvirt has
//! no say over it.
//!
//! Identity: the thread is proven to be the task decided about (the
//! inner actuator's pidfd and start-time checks) before `virsh` is run,
//! and its affinity read after: a thread gone meanwhile is
//! [`Outcome::Gone`].
//!
//! [`Manager`]: numaplace_model::Manager

use std::sync::{Arc, Mutex};

use numaplace_model::world::{Actuator, AffinityError};
use numaplace_model::{Action, CpuSet, Outcome, TaskId};

use crate::vm::discover::LibvirtDomain;
use crate::vm::virsh::Virsh;

/// The domains of the last round, written by VM discovery
/// ([`crate::Collector::share_libvirt_domains`]) and read here.
pub type SharedDomains = Arc<Mutex<Vec<LibvirtDomain>>>;

/// An actuator that pins libvirt's domains' threads through libvirt.
pub struct ThroughLibvirt<A> {
    inner: A,
    virsh: Virsh,
    domains: SharedDomains,
}

impl<A: Actuator> ThroughLibvirt<A> {
    pub fn new(inner: A, virsh: Virsh, domains: SharedDomains) -> Self {
        ThroughLibvirt {
            inner,
            virsh,
            domains,
        }
    }

    pub fn into_inner(self) -> A {
        self.inner
    }

    /// The domain whose QEMU is process `pid`, if libvirt runs it.
    fn domain(&self, pid: i32) -> Option<LibvirtDomain> {
        let d = self.domains.lock().unwrap_or_else(|e| e.into_inner());
        d.iter().find(|d| d.pid == pid).cloned()
    }

    fn pin(&mut self, d: &LibvirtDomain, task: TaskId, tgid: i32, cpus: &CpuSet) -> Outcome {
        match self.inner.affinity(task, tgid) {
            Ok(_) => {}
            Err(AffinityError::Gone) => return Outcome::Gone,
            Err(e) => {
                return Outcome::Refused {
                    errno: "libvirt".into(),
                    why: format!("cannot read its affinity first: {e}"),
                };
            }
        }
        let vcpu = (d.vcpus.iter()).find_map(|&(i, tid)| (tid == task.tid).then_some(i));
        let (done, how) = match vcpu {
            Some(i) => (
                self.virsh.vcpupin(&d.uuid, i, cpus),
                format!("virsh vcpupin of vCPU {i}"),
            ),
            None => (
                self.virsh.emulatorpin(&d.uuid, cpus),
                "virsh emulatorpin".to_string(),
            ),
        };
        if let Err(e) = done {
            return Outcome::Refused {
                errno: "libvirt".into(),
                why: format!("domain {}: {e}", d.name),
            };
        }
        match self.inner.affinity(task, tgid) {
            Ok(now) if now == *cpus => Outcome::Done,
            Ok(now) => Outcome::Refused {
                errno: "libvirt".into(),
                why: format!(
                    "domain {}: {how} to {cpus} succeeded, but the thread's affinity is {now}",
                    d.name
                ),
            },
            Err(AffinityError::Gone) => Outcome::Gone,
            Err(e) => Outcome::Refused {
                errno: "libvirt".into(),
                why: format!(
                    "domain {}: {how} done; its affinity cannot be read: {e}",
                    d.name
                ),
            },
        }
    }
}

impl<A: Actuator> Actuator for ThroughLibvirt<A> {
    fn apply(&mut self, action: &Action) -> Outcome {
        match action {
            Action::Pin { task, tgid, cpus } => {
                if let Some(d) = self.domain(*tgid) {
                    return self.pin(&d, *task, *tgid, cpus);
                }
            }
            Action::MoveMemory { process, .. } | Action::MoveWindow { process, .. } => {
                if let Some(d) = self.domain(process.tid)
                    && d.start_time == process.start_time
                    && let Some(mode) = &d.memory_bound
                {
                    return Outcome::Skipped {
                        why: format!(
                            "domain {}: libvirt binds its memory to its nodes (<numatune> mode \
                             '{mode}'): pages cannot leave them; {}",
                            d.name,
                            if mode == "strict" {
                                "libvirt 9 changes a running domain's nodes only in mode \
                                 'restrictive' (numatune --nodeset --live refuses 'strict')"
                            } else {
                                "moving them through libvirt (numatune --nodeset --live) is not \
                                 done yet"
                            }
                        ),
                    };
                }
            }
            Action::KernelBalancing { .. } => {}
        }
        self.inner.apply(action)
    }

    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError> {
        self.inner.affinity(task, tgid)
    }

    fn kernel_balancing_value(&self) -> Option<Result<u32, String>> {
        self.inner.kernel_balancing_value()
    }

    fn set_kernel_balancing_value(&mut self, value: u32) -> Result<(), String> {
        self.inner.set_kernel_balancing_value(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numaplace_model::world::RecordingActuator;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::time::Duration;

    fn set(l: &str) -> CpuSet {
        CpuSet::parse_list(l).unwrap()
    }

    /// A `virsh` that logs its arguments and exits with `status`.
    fn virsh(dir: &Path, status: i32) -> Virsh {
        let p = dir.join("virsh");
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$@\" >> {}/args\n[ {status} = 0 ] || echo 'error: no' >&2\n\
                 exit {status}\n",
                dir.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Virsh::new(p, "qemu:///system", Duration::from_secs(5))
    }

    fn domain() -> LibvirtDomain {
        LibvirtDomain {
            name: "web".into(),
            uuid: "c7a5fdbd-edaf-9455-926a-d65c16db1809".into(),
            pid: 100,
            start_time: 7,
            vcpus: vec![(0, 101), (1, 102)],
            memory_bound: Some("strict".into()),
        }
    }

    fn id(tid: i32) -> TaskId {
        TaskId { tid, start_time: 7 }
    }

    /// The recording actuator's threads have the affinity last set by a
    /// pin it applied; libvirt (the fake virsh) sets nothing, so a pin it
    /// says it made is checked against the thread and found not made.
    #[test]
    fn pins_of_a_domains_threads_go_to_virsh_and_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let shared: SharedDomains = Arc::new(Mutex::new(vec![domain()]));
        let mut inner = RecordingActuator::default();
        inner.set_affinity(id(101), set("0-3"));
        inner.set_affinity(id(103), set("0-3"));
        let mut a = ThroughLibvirt::new(inner, virsh(d.path(), 0), Arc::clone(&shared));
        let pin = |tid, cpus: &str| Action::Pin {
            task: id(tid),
            tgid: 100,
            cpus: set(cpus),
        };
        // virsh says yes, the thread's affinity did not change: refused,
        // saying so.
        let o = a.apply(&pin(101, "2-3"));
        assert!(
            matches!(&o, Outcome::Refused { why, .. } if why.contains("succeeded, but")),
            "{o:?}"
        );
        // The affinity libvirt leaves is the one asked: done.
        assert_eq!(a.apply(&pin(101, "0-3")), Outcome::Done);
        let o = a.apply(&pin(103, "2"));
        assert!(matches!(&o, Outcome::Refused { .. }), "{o:?}");
        let args = std::fs::read_to_string(d.path().join("args")).unwrap();
        assert_eq!(
            args,
            "-c qemu:///system vcpupin --domain c7a5fdbd-edaf-9455-926a-d65c16db1809 --vcpu 0 \
             --cpulist 2-3 --live\n\
             -c qemu:///system vcpupin --domain c7a5fdbd-edaf-9455-926a-d65c16db1809 --vcpu 0 \
             --cpulist 0-3 --live\n\
             -c qemu:///system emulatorpin --domain c7a5fdbd-edaf-9455-926a-d65c16db1809 \
             --cpulist 2 --live\n"
        );
        // A thread that is gone: nothing asked of libvirt.
        assert_eq!(a.apply(&pin(104, "2")), Outcome::Gone);
        // Strict memory is libvirt's: declined, saying why.
        let mv = Action::MoveMemory {
            process: id(100),
            to_node: 1,
            max_pages: None,
        };
        assert!(matches!(a.apply(&mv), Outcome::Skipped { why } if why.contains("numatune")));
        // Not a domain: the inner actuator's (the recorder's) as always.
        shared.lock().unwrap().clear();
        assert_eq!(a.apply(&pin(101, "2-3")), Outcome::NotApplied);
        assert_eq!(a.apply(&mv), Outcome::NotApplied);
    }

    #[test]
    fn libvirt_refusing_is_a_refusal_that_names_the_domain() {
        let d = tempfile::tempdir().unwrap();
        let shared: SharedDomains = Arc::new(Mutex::new(vec![domain()]));
        let mut inner = RecordingActuator::default();
        inner.set_affinity(id(102), set("0-3"));
        let mut a = ThroughLibvirt::new(inner, virsh(d.path(), 1), shared);
        let o = a.apply(&Action::Pin {
            task: id(102),
            tgid: 100,
            cpus: set("1"),
        });
        assert_eq!(
            o,
            Outcome::Refused {
                errno: "libvirt".into(),
                why: "domain web: virsh vcpupin: no".into()
            }
        );
    }
}
