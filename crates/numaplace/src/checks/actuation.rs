//! The rows of what numaplace acts through, each tried the way the kernel
//! checks it: `sched_setaffinity` and `move_pages` on numaplace's own
//! thread (whether other users' tasks are allowed is the capability
//! line's), and `kernel.numa_balancing` written with the value it holds.

use std::io;

use numaplace_linux::SysRoot;
use numaplace_linux::{balancing, probe};

use super::caps::{self, Cap};
use super::{Check, Status};

pub(super) fn actuation(root: &SysRoot) -> Vec<Check> {
    // Other users' tasks: the capability line of each row says what is
    // missing and how to grant it, so the row itself does not.
    let has = |cap| caps::sets(root).is_ok_and(|s| s.has(cap));
    vec![
        pinning(has(Cap::SysNice)),
        moving_memory(has(Cap::SysPtrace)),
        balancing_switch(root),
    ]
}

/// Whose tasks: the capability line names what the others need.
fn scope_note(others: bool) -> &'static str {
    if others {
        "any user's tasks"
    } else {
        "only tasks of numaplace's own user"
    }
}

/// Pinning: this thread's affinity set to what it is.
fn pinning(others: bool) -> Check {
    match probe::rewrite_own_affinity() {
        Ok(()) => Check {
            id: "pinning".into(),
            name: "pinning threads".into(),
            status: if others { Status::Ok } else { Status::Partial },
            source: format!("sched_setaffinity(2): {}", scope_note(others)),
            fix: None,
            used_by: Vec::new(),
        },
        Err(e) => Check {
            id: "pinning".into(),
            name: "pinning threads".into(),
            status: Status::Missing,
            source: format!("sched_setaffinity(2) on numaplace's own thread failed: {e}"),
            fix: Some(
                "a seccomp profile or container runtime forbids it: allow sched_setaffinity".into(),
            ),
            used_by: Vec::new(),
        },
    }
}

/// Moving memory: move_pages(2) asked where one of our pages is.
fn moving_memory(others: bool) -> Check {
    match probe::own_page_node() {
        Ok(node) => Check {
            id: "moving-memory".into(),
            name: "moving memory".into(),
            status: if others { Status::Ok } else { Status::Partial },
            source: format!(
                "move_pages(2) (numaplace's own page is on node {}): {}",
                node,
                scope_note(others)
            ),
            fix: None,
            used_by: Vec::new(),
        },
        Err(e) => Check {
            id: "moving-memory".into(),
            name: "moving memory".into(),
            status: Status::Missing,
            source: format!("move_pages(2) failed: {e}"),
            fix: Some("a kernel built with CONFIG_NUMA and CONFIG_MIGRATION; in a container, allow move_pages".into()),
            used_by: Vec::new(),
        },
    }
}

/// What became of writing `kernel.numa_balancing` back with its own value.
#[derive(Debug)]
pub(super) enum SwitchProbe {
    /// Written: the kernel lets numaplace switch it.
    Written(u32),
    /// Not in this kernel, or not readable.
    Unreadable(io::Error),
    /// Read, but the write was refused.
    Refused(u32, io::Error),
    /// A snapshot, not the live kernel: nothing written.
    NotLive,
}

/// Writes the value the sysctl holds back to it: a write the kernel checks
/// as it checks the daemon's (CAP_SYS_ADMIN, a read-only /proc/sys) and
/// that changes nothing. Between the read and the write another writer
/// could change it (microseconds); numaplace's own daemon writes it only
/// under its state file's lock, which doctor does not race.
pub(super) fn probe_switch(root: &SysRoot) -> SwitchProbe {
    if !root.is_host() {
        return SwitchProbe::NotLive;
    }
    match balancing::read_value(root) {
        Err(e) => SwitchProbe::Unreadable(e),
        Ok(v) => match balancing::write_value(root, v) {
            Ok(()) => SwitchProbe::Written(v),
            Err(e) => SwitchProbe::Refused(v, e),
        },
    }
}

/// The row for a probe's outcome: `path` is the sysctl's file.
pub(super) fn switch_row(probe: &SwitchProbe, path: &str) -> (Status, String, Option<String>) {
    match probe {
        SwitchProbe::Written(v) => (
            Status::Ok,
            format!("{path}: {v} written back as it was (the kernel accepts numaplace's writes)"),
            None,
        ),
        SwitchProbe::NotLive => (
            Status::Missing,
            format!("{path}: a snapshot, not the live kernel: not tried"),
            Some("run doctor on the machine itself".into()),
        ),
        SwitchProbe::Unreadable(e) => (
            Status::Missing,
            format!("{path}: cannot be read: {e}"),
            Some(
                "a kernel built with CONFIG_NUMA_BALANCING (every major distribution's is)".into(),
            ),
        ),
        SwitchProbe::Refused(v, e) => {
            let (why, fix) = match e.raw_os_error() {
                Some(libc::EPERM) => (
                    "the kernel refuses the write without CAP_SYS_ADMIN, whatever the file's mode",
                    None,
                ),
                Some(libc::EROFS) => (
                    "/proc/sys is mounted read-only for numaplace (systemd's \
                     ProtectKernelTunables=, or a container runtime)",
                    Some(
                        "in the unit, `ReadWritePaths=/proc/sys/kernel/numa_balancing` (the \
                         shipped unit has it); in a container, a writable /proc/sys"
                            .to_string(),
                    ),
                ),
                Some(libc::EACCES) => (
                    "the file's mode, or a security module, forbids numaplace's user to write it",
                    Some(
                        "run numaplace as root, or allow the write in the security module's policy"
                            .to_string(),
                    ),
                ),
                _ => ("the write failed", None),
            };
            (
                Status::Missing,
                format!("{path}: writing its value {v} back: {e}: {why}"),
                fix,
            )
        }
    }
}

/// Switching the kernel's balancing: the write the daemon would make,
/// tried with the value there.
fn balancing_switch(root: &SysRoot) -> Check {
    let path = root.path().join(balancing::SYSCTL);
    let (status, source, fix) = switch_row(&probe_switch(root), &path.display().to_string());
    Check {
        id: "kernel-balancing-switch".into(),
        name: "switching kernel.numa_balancing".into(),
        status,
        source,
        fix: fix.map(|f| format!("{f} (only `auto` with `[scope] all = true` uses it)")),
        used_by: vec!["auto".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(errno: i32) -> (Status, String, Option<String>) {
        switch_row(
            &SwitchProbe::Refused(1, io::Error::from_raw_os_error(errno)),
            "/proc/sys/kernel/numa_balancing",
        )
    }

    #[test]
    fn a_refused_write_says_what_the_kernel_said() {
        let (status, source, fix) = refused(libc::EPERM);
        assert_eq!(status, Status::Missing);
        assert!(source.contains("without CAP_SYS_ADMIN"), "{source}");
        // The capability line says how to grant it.
        assert_eq!(fix, None);
        let (_, source, fix) = refused(libc::EROFS);
        assert!(source.contains("read-only"), "{source}");
        assert!(
            fix.unwrap()
                .contains("ReadWritePaths=/proc/sys/kernel/numa_balancing")
        );
        let (_, source, fix) = refused(libc::EACCES);
        assert!(source.contains("writing its value 1 back"), "{source}");
        assert!(fix.unwrap().contains("root"));
    }

    #[test]
    fn a_snapshot_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        std::fs::create_dir_all(dir.path().join("proc/sys/kernel")).unwrap();
        let file = dir.path().join(balancing::SYSCTL);
        std::fs::write(&file, "0\n").unwrap();
        let root = SysRoot::new(dir.path()).unwrap();
        assert!(matches!(probe_switch(&root), SwitchProbe::NotLive));
        let (status, source, _) = switch_row(&SwitchProbe::NotLive, "x");
        assert_eq!(status, Status::Missing);
        assert!(source.contains("not tried"), "{source}");
    }
}
