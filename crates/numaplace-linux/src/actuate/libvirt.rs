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
//! Memory: a domain whose `<numatune>` mode is `restrictive` has its
//! memory bound to its nodes by libvirt's cgroups' `cpuset.mems`, where
//! `move_pages` to another node fails: a move of its memory to a node
//! becomes `virsh numatune --nodeset NODE --live`, libvirt writes the
//! cgroups' `cpuset.mems` and the kernel moves the pages (cgroup v2 always
//! migrates them; v1 where `cpuset.memory_migrate` is set). libvirt's
//! nodeset is recorded in the state file first (write-ahead), and
//! [`ThroughLibvirt::restore`] puts it back at a stop and at the next
//! start after a crash, if the domain still runs in the same QEMU and its
//! nodeset is still numaplace's. In mode `strict` (a memory policy on
//! QEMU's memory) libvirt 9.0 refuses to change a running domain's nodes
//! ("change of nodeset for running domain requires restrictive numa
//! mode"): such moves are declined with that reason. Other domains'
//! memory moves page by page as any process's does: libvirt has no say
//! over it.
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

use crate::state::{LibvirtNodesetEntry, Restore, RestoreReport, StateFile, restore_all};
use crate::vm::discover::LibvirtDomain;
pub use crate::vm::discover::SharedDomains;
use crate::vm::virsh::Virsh;

/// The state file, shared by the engine's write-ahead of pins and this
/// actuator's write-ahead of libvirt's nodesets.
pub type SharedState = Arc<Mutex<StateFile>>;

/// An actuator that pins libvirt's domains' threads through libvirt.
pub struct ThroughLibvirt<A> {
    inner: A,
    virsh: Virsh,
    domains: SharedDomains,
    /// Where libvirt's nodesets are recorded before numaplace changes
    /// them; without it (no state file) no nodeset is changed.
    state: Option<SharedState>,
}

impl<A: Actuator> ThroughLibvirt<A> {
    /// An actuator that acts on libvirt's domains through `virsh` and on
    /// everything else through `inner`.
    pub fn new(inner: A, virsh: Virsh, domains: SharedDomains) -> Self {
        ThroughLibvirt {
            inner,
            virsh,
            domains,
            state: None,
        }
    }

    /// The state file libvirt's nodesets are recorded in before a change.
    pub fn set_state(&mut self, state: SharedState) {
        self.state = Some(state);
    }

    /// The actuator it wraps.
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

impl<A: Actuator> ThroughLibvirt<A> {
    /// Moves a `restrictive` domain's memory to `node` through libvirt:
    /// its nodeset recorded, then `numatune --nodeset --live`, then read
    /// back.
    fn move_memory(&mut self, d: &LibvirtDomain, node: u32) -> Outcome {
        let refused = |why: String| Outcome::Refused {
            errno: "libvirt".into(),
            why: format!("domain {}: {why}", d.name),
        };
        let Some(state) = self.state.clone() else {
            return Outcome::Skipped {
                why: format!(
                    "domain {}: libvirt binds its memory to its nodes, and without a state file \
                     numaplace could not give libvirt's nodeset back: not changed",
                    d.name
                ),
            };
        };
        let now = match self.virsh.numatune(&d.uuid) {
            Ok(now) => now,
            Err(e) => return refused(e.to_string()),
        };
        if now.mode != "restrictive" {
            return Outcome::Skipped {
                why: strict_reason(&d.name, &now.mode),
            };
        }
        let target: CpuSet = [node].into_iter().collect();
        let Some(original) = now.nodeset else {
            return refused(
                "libvirt names no memory nodes for it (numatune shows an empty nodeset): \
                 nothing numaplace could give back"
                    .into(),
            );
        };
        if original == target {
            return Outcome::Done;
        }
        let entry = LibvirtNodesetEntry {
            domain: d.uuid.clone(),
            name: d.name.clone(),
            qemu: TaskId {
                tid: d.pid,
                start_time: d.start_time,
            },
            original,
            applied: target.clone(),
        };
        if let Err(e) = lock(&state).record_libvirt_nodeset(entry) {
            return refused(format!("cannot record libvirt's nodeset first: {e}"));
        }
        // A failure keeps the entry: a virsh killed at its timeout may
        // still have had libvirt change the nodes, and the restore puts
        // libvirt's back either way (a no-op where it is still libvirt's).
        if let Err(e) = self.virsh.set_nodeset(&d.uuid, &target) {
            return refused(e.to_string());
        }
        match self.virsh.numatune(&d.uuid) {
            Ok(after) if after.nodeset.as_ref() == Some(&target) => Outcome::Done,
            Ok(after) => refused(format!(
                "virsh numatune --nodeset {target} succeeded, but libvirt's nodeset is {}",
                after.nodeset.map_or("empty".into(), |n| n.to_string())
            )),
            Err(e) => refused(format!("nodeset set to {target}; reading it back: {e}")),
        }
    }

    /// Puts back what numaplace changed: libvirt's nodesets (through
    /// libvirt), then every pinned thread's affinity and
    /// `kernel.numa_balancing` ([`restore_all`]). At a stop, and at the
    /// next start after a crash (the domains read first, so pins of their
    /// threads go back through libvirt too).
    pub fn restore(&mut self) -> RestoreReport {
        let Some(state) = self.state.clone() else {
            return RestoreReport::default();
        };
        let mut state = lock(&state);
        let mut kept = Vec::new();
        let mut done = Vec::new();
        for e in state.take_libvirt_nodesets() {
            let r = self.restore_nodeset(&e);
            if matches!(r, Restore::Kept { .. }) {
                kept.push(e.clone());
            }
            done.push((e, r));
        }
        let saved = state.keep_libvirt_nodesets(kept);
        let mut report = restore_all(&mut state, self);
        report.libvirt_nodesets = done;
        if let Err(e) = saved {
            if report.save_error.is_none() {
                report.save_error = Some(e.to_string());
            }
        }
        report
    }

    fn restore_nodeset(&mut self, e: &LibvirtNodesetEntry) -> Restore {
        // The same QEMU (pid and start time), or the domain stopped or
        // restarted since, with libvirt's nodeset from its XML.
        match self.inner.affinity(e.qemu, e.qemu.tid) {
            Err(AffinityError::Gone) => return Restore::Gone,
            Err(err) => {
                return Restore::Kept {
                    why: format!("cannot check its QEMU (pid {}): {err}", e.qemu.tid),
                };
            }
            Ok(_) => {}
        }
        let now = match self.virsh.numatune(&e.domain) {
            Ok(now) => now,
            Err(err) => {
                return Restore::Kept {
                    why: err.to_string(),
                };
            }
        };
        if now.nodeset.as_ref() == Some(&e.original) {
            // libvirt's already (the change was refused, or undone).
            return Restore::Restored;
        }
        if now.nodeset.as_ref() != Some(&e.applied) {
            return Restore::LeftAlone {
                why: format!(
                    "its nodeset is {}, not the {} numaplace set: someone changed it since",
                    now.nodeset.map_or("empty".into(), |n| n.to_string()),
                    e.applied
                ),
            };
        }
        match self.virsh.set_nodeset(&e.domain, &e.original) {
            Ok(()) => Restore::Restored,
            Err(err) => Restore::Kept {
                why: err.to_string(),
            },
        }
    }
}

fn lock(state: &SharedState) -> std::sync::MutexGuard<'_, StateFile> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why a domain's memory, bound by libvirt in `mode`, is not moved.
fn strict_reason(name: &str, mode: &str) -> String {
    format!(
        "domain {name}: libvirt binds its memory to its nodes (<numatune> mode '{mode}'): \
         pages cannot leave them, and libvirt 9 changes a running domain's nodes only in mode \
         'restrictive' (numatune --nodeset --live refuses '{mode}')"
    )
}

impl<A: Actuator> Actuator for ThroughLibvirt<A> {
    fn apply(&mut self, action: &Action) -> Outcome {
        match action {
            Action::Pin { task, tgid, cpus } => {
                if let Some(d) = self.domain(*tgid) {
                    return self.pin(&d, *task, *tgid, cpus);
                }
            }
            // A window of pages moves with the whole nodeset: libvirt has
            // no partial move.
            Action::MoveMemory {
                process, to_node, ..
            }
            | Action::MoveWindow {
                process, to_node, ..
            } => {
                let d = (self.domain(process.tid)).filter(|d| d.start_time == process.start_time);
                if let Some(d) = d {
                    if let Some(mode) = &d.memory_bound {
                        return if mode == "restrictive" {
                            self.move_memory(&d, *to_node)
                        } else {
                            Outcome::Skipped {
                                why: strict_reason(&d.name, mode),
                            }
                        };
                    }
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

    /// A `virsh` that keeps one domain's nodeset in `DIR/nodeset`, as
    /// libvirt does for a `restrictive` domain, and logs its calls.
    /// Where `DIR/refuse` exists, it refuses every change.
    fn numatune_virsh(dir: &Path) -> Virsh {
        let p = dir.join("virsh");
        let d = dir.display();
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$3 $6 $7\" >> {d}/args\n\
                 if [ \"$6\" = --nodeset ] && [ -e {d}/refuse ]; then echo 'error: no' >&2; \
                 exit 1; fi\n\
                 if [ \"$6\" = --nodeset ]; then echo \"$7\" > {d}/nodeset; exit 0; fi\n\
                 printf 'numa_mode      : restrictive\\nnuma_nodeset   : %s\\n' \"$(cat {d}/nodeset)\"\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("nodeset"), "0\n").unwrap();
        Virsh::new(p, "qemu:///system", Duration::from_secs(5))
    }

    fn private_state(dir: &Path) -> SharedState {
        let s = dir.join("state");
        std::fs::create_dir(&s).unwrap();
        std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o700)).unwrap();
        Arc::new(Mutex::new(StateFile::open(s.join("state.json")).unwrap()))
    }

    /// A restrictive domain's memory moves through `numatune --nodeset`,
    /// libvirt's nodeset recorded first; the restore puts it back while
    /// the QEMU and numaplace's nodeset are the same, and leaves it when
    /// someone changed it or the QEMU is gone.
    #[test]
    fn a_restrictive_domains_memory_moves_through_numatune_and_goes_back() {
        let d = tempfile::tempdir().unwrap();
        let mut dom = domain();
        dom.memory_bound = Some("restrictive".into());
        let shared: SharedDomains = Arc::new(Mutex::new(vec![dom]));
        let mut inner = RecordingActuator::default();
        inner.set_affinity(id(100), set("0-3"));
        let mut a = ThroughLibvirt::new(inner, numatune_virsh(d.path()), shared);
        let state = private_state(d.path());
        let mv = |node| Action::MoveMemory {
            process: id(100),
            to_node: node,
            max_pages: None,
        };
        let nodeset = || std::fs::read_to_string(d.path().join("nodeset")).unwrap();
        // Without a state file to record libvirt's nodeset in: declined.
        assert!(matches!(a.apply(&mv(1)), Outcome::Skipped { why } if why.contains("state file")));
        a.set_state(Arc::clone(&state));
        assert_eq!(a.apply(&mv(1)), Outcome::Done);
        assert_eq!(nodeset(), "1\n");
        let recorded = state.lock().unwrap().libvirt_nodesets().to_vec();
        assert_eq!(recorded.len(), 1);
        assert_eq!(
            (
                recorded[0].original.to_string(),
                recorded[0].applied.to_string()
            ),
            ("0".into(), "1".into())
        );
        // Already there: nothing set again.
        assert_eq!(a.apply(&mv(1)), Outcome::Done);
        let r = a.restore();
        assert_eq!(r.libvirt_nodesets.len(), 1);
        assert_eq!(r.libvirt_nodesets[0].1, Restore::Restored, "{r}");
        assert!(
            r.to_string()
                .contains("domain web's memory nodes back to libvirt's 0"),
            "{r}"
        );
        assert_eq!(nodeset(), "0\n");
        assert!(state.lock().unwrap().is_empty());
        let args = std::fs::read_to_string(d.path().join("args")).unwrap();
        assert_eq!(
            args.lines()
                .filter(|l| l.contains("--nodeset"))
                .collect::<Vec<_>>(),
            ["numatune --nodeset 1", "numatune --nodeset 0"]
        );
        // Someone set another nodeset since: theirs stays.
        assert_eq!(a.apply(&mv(1)), Outcome::Done);
        std::fs::write(d.path().join("nodeset"), "0-1\n").unwrap();
        let r = a.restore();
        assert!(
            matches!(&r.libvirt_nodesets[0].1, Restore::LeftAlone { why } if why.contains("0-1")),
            "{r}"
        );
        assert_eq!(nodeset(), "0-1\n");
        // The QEMU gone (the domain stopped or restarted): nothing set.
        assert_eq!(a.apply(&mv(1)), Outcome::Done);
        a.inner = RecordingActuator::default();
        let r = a.restore();
        assert_eq!(r.libvirt_nodesets[0].1, Restore::Gone, "{r}");
        assert_eq!(nodeset(), "1\n");
        assert!(state.lock().unwrap().is_empty());
        // libvirt refuses the change (or a virsh killed at its timeout
        // leaves it unknown): refused, the entry kept, and the restore
        // finds libvirt's nodeset still there and changes nothing.
        a.inner.set_affinity(id(100), set("0-3"));
        std::fs::write(d.path().join("refuse"), "").unwrap();
        let o = a.apply(&mv(0));
        assert!(
            matches!(&o, Outcome::Refused { why, .. } if why.contains("no")),
            "{o:?}"
        );
        assert_eq!(state.lock().unwrap().libvirt_nodesets().len(), 1);
        let r = a.restore();
        assert_eq!(r.libvirt_nodesets[0].1, Restore::Restored, "{r}");
        assert_eq!(nodeset(), "1\n");
        assert!(state.lock().unwrap().is_empty());
        let args = std::fs::read_to_string(d.path().join("args")).unwrap();
        assert_eq!(args.lines().last(), Some("numatune --live "), "{args}");
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
