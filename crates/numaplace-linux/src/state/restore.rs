//! Putting back what the state file holds: each pinned thread's original
//! affinity, `kernel.numa_balancing` (libvirt's nodesets go back through
//! [`crate::actuate::libvirt::ThroughLibvirt::restore`]), each entry only
//! where it is still the one numaplace wrote.

use numaplace_model::{Action, Outcome};

use super::{KernelBalancingEntry, LibvirtNodesetEntry, PinEntry, StateFile};
use crate::actuate::{Actuator, AffinityError};

/// What became of one entry in [`restore_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restore {
    /// The original affinity is back; the entry is dropped.
    Restored,
    /// The thread changed its affinity since numaplace pinned it (or
    /// someone did for it): left as it is, entry dropped.
    LeftAlone {
        /// The reason, in words.
        why: String,
    },
    /// The thread exited, or its tid names another task: entry dropped.
    Gone,
    /// Could not restore now (the kernel refused, dry run): the entry is
    /// kept, so a later restore tries again; it is dropped once the thread
    /// exits or changes its own affinity.
    Kept {
        /// The reason, in words.
        why: String,
    },
}

/// The result of [`restore_all`], entry by entry.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// Each entry and what became of it.
    pub entries: Vec<(PinEntry, Restore)>,
    /// `kernel.numa_balancing`, where numaplace had changed it.
    pub kernel_balancing: Option<(KernelBalancingEntry, Restore)>,
    /// libvirt's domains whose nodeset numaplace had changed (filled by
    /// [`crate::actuate::libvirt::ThroughLibvirt::restore`]).
    pub libvirt_nodesets: Vec<(LibvirtNodesetEntry, Restore)>,
    /// Writing the journal afterwards failed.
    pub save_error: Option<String>,
}

impl RestoreReport {
    /// How many entries' restores `f` holds for.
    pub fn count(&self, f: impl Fn(&Restore) -> bool) -> usize {
        self.entries.iter().filter(|(_, r)| f(r)).count()
    }
}

impl std::fmt::Display for RestoreReport {
    /// One line: `3 restored, 1 left alone, 2 gone, 0 kept`, and why any
    /// were kept.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let own =
            self.count(|r| matches!(r, Restore::LeftAlone { why } if why.starts_with(SET_ITS_OWN)));
        write!(
            f,
            "{} restored, {} left alone{}, {} gone, {} kept",
            self.count(|r| matches!(r, Restore::Restored)),
            self.count(|r| matches!(r, Restore::LeftAlone { .. })),
            if own > 0 {
                format!(" ({own} set their own affinity)")
            } else {
                String::new()
            },
            self.count(|r| matches!(r, Restore::Gone)),
            self.count(|r| matches!(r, Restore::Kept { .. })),
        )?;
        // Every other reason, thread by thread: a kernel thread, a pin
        // that never took effect, an entry numaplace did not write.
        for (e, r) in &self.entries {
            match r {
                Restore::Kept { why } => write!(f, "; thread {} kept: {why}", e.task.tid)?,
                Restore::LeftAlone { why } if !why.starts_with(SET_ITS_OWN) => {
                    write!(f, "; thread {} left alone: {why}", e.task.tid)?
                }
                _ => {}
            }
        }
        if let Some((k, r)) = &self.kernel_balancing {
            match r {
                Restore::Restored => write!(
                    f,
                    "; kernel.numa_balancing back to {} (numaplace had set {})",
                    k.original, k.applied
                )?,
                Restore::LeftAlone { why } | Restore::Kept { why } => write!(
                    f,
                    "; kernel.numa_balancing {}: {why}",
                    if matches!(r, Restore::Kept { .. }) {
                        "kept to restore later"
                    } else {
                        "left as it is"
                    }
                )?,
                Restore::Gone => {}
            }
        }
        for (e, r) in &self.libvirt_nodesets {
            match r {
                Restore::Restored => write!(
                    f,
                    "; domain {}'s memory nodes back to libvirt's {} (numaplace had set {})",
                    e.name, e.original, e.applied
                )?,
                Restore::Gone => write!(
                    f,
                    "; domain {} no longer runs in the same QEMU (its nodeset is libvirt's)",
                    e.name
                )?,
                Restore::LeftAlone { why } => write!(
                    f,
                    "; domain {}'s memory nodes left as they are: {why}",
                    e.name
                )?,
                Restore::Kept { why } => write!(
                    f,
                    "; domain {}'s memory nodes kept to restore later: {why}",
                    e.name
                )?,
            }
        }
        if let Some(e) = &self.save_error {
            write!(f, "; saving the state file failed: {e}")?;
        }
        Ok(())
    }
}

/// Puts back the original affinity of every journalled thread that is still
/// the same task and still has the affinity numaplace set. The journal
/// keeps only the entries that could not be settled ([`Restore::Kept`]);
/// when none remain the file is removed.
///
/// A thread that changes its own affinity between the check and the
/// restore (microseconds) is overwritten: no syscall compares and sets.
pub fn restore_all(state: &mut StateFile, act: &mut dyn Actuator) -> RestoreReport {
    let mut report = RestoreReport::default();
    let mut kept = Vec::new();
    for entry in std::mem::take(&mut state.entries) {
        let result = restore_one(&entry, act);
        if matches!(result, Restore::Kept { .. }) {
            kept.push(entry.clone());
        }
        report.entries.push((entry, result));
    }
    state.entries = kept;
    if let Some(k) = state.kernel_balancing {
        let result = restore_kernel_balancing(k, act);
        if !matches!(result, Restore::Kept { .. }) {
            state.kernel_balancing = None;
        }
        report.kernel_balancing = Some((k, result));
    }
    if let Err(e) = state.save() {
        report.save_error = Some(e.to_string());
    }
    report
}

/// Puts `kernel.numa_balancing` back to the value numaplace found, if it
/// is still the value numaplace wrote (an operator who changed it since
/// has the last word).
fn restore_kernel_balancing(k: KernelBalancingEntry, act: &mut dyn Actuator) -> Restore {
    // The values the kernel takes (0 off, 1 NUMA balancing, 2 memory
    // tiering, 3 both): anything else was not written by numaplace and is
    // never written back.
    if k.original > 3 || k.applied > 3 {
        return Restore::LeftAlone {
            why: format!(
                "the state file names {} and {}, not values kernel.numa_balancing takes (0 to 3): \
                 not an entry numaplace wrote",
                k.original, k.applied
            ),
        };
    }
    match act.kernel_balancing_value() {
        None => Restore::Kept {
            why: "kernel.numa_balancing cannot be set here (dry run)".into(),
        },
        Some(Err(e)) => Restore::Kept {
            why: format!("cannot read kernel.numa_balancing: {e}"),
        },
        Some(Ok(now)) if now != k.applied => Restore::LeftAlone {
            why: format!(
                "it is {now}, not the {} numaplace set: someone changed it since",
                k.applied
            ),
        },
        Some(Ok(_)) if k.original == k.applied => Restore::Restored,
        Some(Ok(_)) => match act.set_kernel_balancing_value(k.original) {
            Ok(()) => Restore::Restored,
            Err(e) => Restore::Kept {
                why: format!("cannot write kernel.numa_balancing: {e}"),
            },
        },
    }
}

/// Why a restore leaves a thread that set its own affinity as it is: the
/// common case, counted in [`RestoreReport`]'s line rather than listed.
const SET_ITS_OWN: &str = "the task set its own affinity";

fn restore_one(e: &PinEntry, act: &mut dyn Actuator) -> Restore {
    // Putting an original back never narrows a thread to part of what
    // numaplace gave it: numaplace pins within the affinity it found (the
    // whole machine, or the whole of its cgroup's CPUs), so there the
    // original holds what it set. A libvirt domain's threads are the
    // exception that is not a narrowing: moved from libvirt's node to
    // another, their original and what numaplace set are apart, and go
    // back to libvirt's. An entry whose original is a strict part of what
    // it says numaplace set was not written by numaplace: never acted on.
    if e.original.is_subset(&e.applied) && e.original != e.applied {
        return Restore::LeftAlone {
            why: format!(
                "its entry would narrow it (to {} from the {} it names as set): not an entry \
                 numaplace wrote",
                e.original, e.applied
            ),
        };
    }
    match act.affinity(e.task, e.tgid) {
        Err(AffinityError::Gone) => Restore::Gone,
        // A planted or stale entry naming a kernel thread: never touched.
        Err(err @ AffinityError::KernelThread) => Restore::LeftAlone {
            why: err.to_string(),
        },
        Err(err) => Restore::Kept {
            why: format!("cannot read its affinity: {err}"),
        },
        // Written ahead, the pin never took effect (the daemon stopped
        // between the two, or the kernel refused it).
        Ok(now) if now == e.original => Restore::LeftAlone {
            why: format!("its affinity is its original {now} already: the pin never took effect"),
        },
        Ok(now) if now != e.applied => Restore::LeftAlone {
            why: format!("{SET_ITS_OWN} (now {now}; numaplace had set {})", e.applied),
        },
        Ok(_) => {
            let pin = Action::Pin {
                task: e.task,
                tgid: e.tgid,
                cpus: e.original.clone(),
            };
            match act.apply(&pin) {
                Outcome::Done => Restore::Restored,
                Outcome::Gone => Restore::Gone,
                Outcome::Refused { errno, why } => Restore::Kept {
                    why: format!("{errno}: {why}"),
                },
                Outcome::NotApplied => Restore::Kept {
                    why: "not applied (dry run)".into(),
                },
                other => Restore::Kept {
                    why: format!("unexpected outcome {other:?}"),
                },
            }
        }
    }
}
