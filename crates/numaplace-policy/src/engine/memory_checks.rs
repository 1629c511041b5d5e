//! The engine's checks on a memory move before it reaches the actuator:
//! whether its target is inside the process's cpuset's memory nodes, and
//! whether it goes through a manager that sets those nodes (libvirt).

use numaplace_model::{Action, Snapshot};

/// Whether the memory move `a` goes through the process's manager, which
/// sets the nodes its cpuset allows (libvirt's numatune on a `restrictive`
/// domain: [`numaplace_model::Manager::sets_memory_nodes`]).
pub(super) fn nodes_set_by_manager(s: &Snapshot, a: &Action) -> bool {
    a.moves_memory()
        && (s.task(a.pid()))
            .and_then(|t| t.manager.as_ref())
            .is_some_and(|m| m.sets_memory_nodes && m.hands_off.is_none())
}

/// Why a memory move is not tried: its target node is outside the memory
/// nodes the process's cpuset allows (`Mems_allowed`), which the kernel
/// refuses (`EACCES`) after the policy may already have pinned the threads
/// there; `None` when allowed or not known, or when numaplace moves the
/// memory through a manager that sets those nodes (libvirt's numatune).
pub(super) fn outside_mems(s: &Snapshot, a: &Action) -> Option<String> {
    let (Action::MoveMemory {
        process, to_node, ..
    }
    | Action::MoveWindow {
        process, to_node, ..
    }) = a
    else {
        return None;
    };
    if nodes_set_by_manager(s, a) {
        return None;
    }
    let mems = &s.task(process.tid)?.allowed_mems;
    (!mems.is_empty() && !mems.contains(*to_node)).then(|| {
        format!(
            "node {to_node} is not among the memory nodes its cpuset allows ({mems}): the kernel \
             would refuse the move"
        )
    })
}
