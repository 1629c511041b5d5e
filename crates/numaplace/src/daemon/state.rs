//! The state file and putting back: what an earlier run left changed is
//! put back at start, each original affinity is written ahead of the pin
//! that changes it, and what this run changed is put back at its stop.

use std::sync::{Arc, Mutex};

use anyhow::Result;
use numaplace_linux::actuate::HostActuator;
use numaplace_linux::actuate::libvirt::{SharedDomains, SharedState, ThroughLibvirt};
use numaplace_linux::state::StateFile;
use numaplace_model::CpuSet;

use super::actuator::DaemonActuator;
use super::collector::read_libvirt_domains;
use crate::config::Config;
use crate::error::InputError;

/// The state file, after putting back whatever an earlier run left changed
/// (it was killed before it could), given to the actuator for libvirt's
/// nodesets. A dry run changes nothing, so it neither needs nor touches
/// the state file (nor restores what an earlier real run left: that run's
/// next real start will).
pub(super) fn open_state_and_restore(
    c: &Config,
    host: &mut ThroughLibvirt<HostActuator>,
    domains: &SharedDomains,
) -> Result<Option<SharedState>> {
    if c.dry_run {
        return Ok(None);
    }
    let state = StateFile::open(&c.state).map_err(|e| InputError(format!("{e}")))?;
    let left = !state.is_empty();
    if left {
        tracing::warn!(
            "{}: an earlier run did not stop cleanly and left {} threads pinned{}{}; \
             restoring them",
            c.state.display(),
            state.entries().len(),
            if state.kernel_balancing().is_some() {
                ", kernel.numa_balancing changed"
            } else {
                ""
            },
            match state.libvirt_nodesets().len() {
                0 => String::new(),
                n => format!(", the memory nodes of {n} libvirt domains changed"),
            }
        );
    }
    let state = Arc::new(Mutex::new(state));
    host.set_state(Arc::clone(&state));
    if left {
        // libvirt's domains go back through libvirt.
        read_libvirt_domains(c, domains);
        let report = host.restore();
        tracing::warn!("restored: {report}");
    }
    Ok(Some(state))
}

/// Write-ahead of original affinities into the state file.
pub(super) struct StateGuard<'a> {
    pub(super) state: &'a numaplace_linux::actuate::libvirt::SharedState,
}

impl StateGuard<'_> {
    fn file(&self) -> std::sync::MutexGuard<'_, numaplace_linux::state::StateFile> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl numaplace_model::world::PinGuard for StateGuard<'_> {
    fn before_pin(
        &mut self,
        task: numaplace_model::TaskId,
        tgid: i32,
        original: &CpuSet,
        new: &CpuSet,
    ) -> Result<(), String> {
        self.file()
            .record_pin(task, tgid, original.clone(), new.clone())
            .map_err(|e| e.to_string())
    }

    /// `kernel.numa_balancing` as it is now, recorded before numaplace
    /// turns balancing between nodes `on` or off (the tiering bit kept).
    fn before_kernel_balancing(&mut self, on: bool) -> Result<(), String> {
        let root = numaplace_linux::sysroot::SysRoot::host();
        let now = numaplace_linux::balancing::read_value(&root)
            .map_err(|e| format!("cannot read kernel.numa_balancing: {e}"))?;
        let applied = numaplace_linux::balancing::with_between_nodes(now, on);
        self.file()
            .record_kernel_balancing(now, applied)
            .map_err(|e| e.to_string())
    }
}

/// Puts back what the daemon changed (a dry run changed nothing), and says
/// so in its last line; `bug` is the panic that stopped the loop, if one
/// did: then the daemon ends with an error.
pub(super) fn put_back(
    actuator: DaemonActuator,
    state: Option<SharedState>,
    c: &Config,
    domains: &SharedDomains,
    rounds: u64,
    bug: Option<String>,
) -> Result<()> {
    let stopped = |report: &dyn std::fmt::Display| -> Result<()> {
        match &bug {
            None => Ok(()),
            Some(what) => Err(anyhow::anyhow!(
                "stopped by a bug after {rounds} rounds ({what}); {report}: please report it"
            )),
        }
    };
    let (DaemonActuator::Host(mut host), Some(_)) = (actuator, state) else {
        tracing::info!("dry run: nothing to restore");
        if bug.is_none() {
            crate::output::say!(
                "numaplace: stopped after {rounds} rounds (dry run: nothing was changed)"
            );
        }
        return stopped(&"nothing was changed (dry run)");
    };
    // libvirt's domains as they are now (one may have stopped since the
    // last round), so their threads and nodesets go back through libvirt.
    read_libvirt_domains(c, domains);
    let report = host.restore();
    tracing::info!("stopping after {rounds} rounds; restored: {report}");
    if bug.is_none() {
        crate::output::say!("numaplace: stopped after {rounds} rounds; {report}");
    }
    stopped(&format_args!("restored: {report}"))
}
