//! The rows of what numaplace reads of the machine and its tasks: the
//! topology, memory per node, how threads are read (the BPF task iterator
//! or `/proc`) and the kernel's NUMA hinting faults.

use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::{SysRoot, TopologySource, discover_repaired};

use super::{Check, Status, caps};

pub(super) fn topology(root: &SysRoot) -> Check {
    match discover_repaired(&TopologySource::Sysfs(root.clone())) {
        Ok(found) => {
            let t = &found.topology;
            let llcs = t.llcs().len();
            let repaired = if found.repairs.is_empty() {
                String::new()
            } else {
                format!(
                    "; repaired where the kernel's files contradict each other: {}",
                    found
                        .repairs
                        .iter()
                        .map(|r| r.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            };
            Check {
                id: "topology".into(),
                name: "topology".into(),
                status: Status::Ok,
                source: format!(
                    "hwloc over {}: {} packages, {} NUMA nodes, {llcs} LLC domains, {} cores, {} CPUs",
                    root.path().join("sys").display(),
                    t.packages().len(),
                    t.nodes().len(),
                    t.cores().len(),
                    t.cpus().len()
                ) + &repaired,
                fix: None,
                used_by: Vec::new(),
            }
        }
        Err(e) => Check {
            id: "topology".into(),
            name: "topology".into(),
            status: Status::Missing,
            source: format!("{e}"),
            fix: Some("numaplace cannot place anything without it: report this machine's /sys/devices/system tree".into()),
            used_by: Vec::new(),
        },
    }
}

pub(super) fn memory_per_node(root: &SysRoot) -> Check {
    let maps = root
        .read("proc/self/numa_maps")
        .ok()
        .map(|text| numaplace_linux::procfs::parse_numa_maps(&text));
    match maps {
        Some(m) if m.mappings > 0 => Check {
            id: "memory-per-node".into(),
            name: "memory per node".into(),
            status: Status::Ok,
            source: format!(
                "/proc/PID/numa_maps (numaplace's own: {} mappings on {} node{})",
                m.mappings,
                m.nodes.len(),
                if m.nodes.len() == 1 { "" } else { "s" }
            ),
            fix: None,
            used_by: Vec::new(),
        },
        _ => Check {
            id: "memory-per-node".into(),
            name: "memory per node".into(),
            status: Status::Missing,
            source: "/proc/self/numa_maps could not be read or lists nothing".into(),
            fix: Some(
                "a kernel built with CONFIG_NUMA shows numa_maps; in a container, mount /proc"
                    .into(),
            ),
            used_by: Vec::new(),
        },
    }
}

/// How the daemon's rounds read every thread: the BPF task iterator (one
/// pass per round, `collect/iterated.rs`), or `/proc` (a `stat` per
/// thread). Loads the iterator and drops it.
pub(super) fn reading_threads(root: &SysRoot) -> Check {
    let check = |status, source: String, fix: Option<&str>| Check {
        id: "task-iterator".into(),
        name: "reading threads".into(),
        status,
        source,
        fix: fix.map(str::to_string),
        used_by: Vec::new(),
    };
    if !root.is_host() {
        return check(
            Status::Partial,
            "/proc/PID/task/TID/stat under the snapshot (the task iterator reads only the live host)".into(),
            None,
        );
    }
    match numaplace_linux::probe::task_iterator() {
        Ok(_) => check(
            Status::Ok,
            "BPF task iterator (bpf_iter_task; task_struct offsets from /sys/kernel/btf/vmlinux): \
             every thread in one pass per round"
                .into(),
            None,
        ),
        Err(e) => {
            let why = e.to_string();
            let source = |why: &str| {
                format!(
                    "from /proc, a stat per thread per round: the BPF task iterator cannot be used: {why}"
                )
            };
            let caps_missing = caps::sets(root).is_ok_and(|s| !caps::TASK_ITERATOR.check(&s).ok());
            let fix = if why.contains("CAP_BPF") && caps_missing {
                // The row's capability line says which and how to grant them.
                return check(Status::Partial, source(&why), None);
            } else if why.contains("CAP_BPF") {
                "every capability is there, so a security module (lockdown, SELinux) or a \
                 seccomp filter refuses bpf(2): allow it for numaplace"
            } else if why.contains("pid namespace") {
                "run in the host's pid namespace (Kubernetes: hostPID: true)"
            } else if why.contains("BTF") {
                "a kernel built with CONFIG_DEBUG_INFO_BTF (Debian's is) and Linux 5.8 or later"
            } else {
                "nothing needed: /proc works, at a few microseconds per thread per round"
            };
            check(Status::Partial, source(&why), Some(fix))
        }
    }
}

pub(super) fn hinting_faults(root: &SysRoot) -> Check {
    let b = NumaBalancing::read(root);
    let name = "NUMA hinting faults".to_string();
    let id = "hinting-faults";
    let used_by = vec![
        "di-plain".into(),
        "di-migrate".into(),
        "dino".into(),
        "symbiosis".into(),
    ];
    // The per-thread lines exist only with CONFIG_SCHED_DEBUG.
    let sched = root.read("proc/self/sched");
    let shows = sched
        .as_deref()
        .is_ok_and(|t| t.contains("numa_faults") || t.contains("total_numa_faults"));
    match b {
        NumaBalancing::Absent => Check {
            id: id.into(),
            name,
            status: Status::Missing,
            source: "kernel.numa_balancing is not in this kernel (no CONFIG_NUMA_BALANCING)".into(),
            fix: Some("a kernel built with CONFIG_NUMA_BALANCING (every major distribution's is)".into()),
            used_by,
        },
        b if !b.balances_between_nodes() => Check {
            id: id.into(),
            name,
            status: Status::Off,
            source: format!(
                "{}; the kernel takes hinting faults only while it balances",
                b.describe()
            ),
            fix: Some(
                "where there are no sampled addresses: `sysctl kernel.numa_balancing=1`, or let auto try \
                 it (`[engine] manage_kernel_balancing`, with `[scope] all = true`)"
                    .into(),
            ),
            used_by,
        },
        b if sched.is_err() => Check {
            id: id.into(),
            name,
            status: Status::Missing,
            source: format!(
                "{}, but /proc/PID/sched does not exist (a kernel without CONFIG_SCHED_DEBUG)",
                b.describe()
            ),
            fix: Some("a kernel built with CONFIG_SCHED_DEBUG".into()),
            used_by,
        },
        b => Check {
            id: id.into(),
            name,
            status: Status::Ok,
            source: format!(
                "/proc/PID/task/TID/sched numa_faults lines{}; {}",
                if shows { "" } else { " (none yet for numaplace itself)" },
                b.describe()
            ),
            fix: None,
            used_by,
        },
    }
}
