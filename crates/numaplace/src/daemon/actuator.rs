//! The daemon's actuator: the host (libvirt's domains through libvirt), or
//! a recording of what would be done (a dry run).

use numaplace_linux::actuate::HostActuator;
use numaplace_linux::actuate::libvirt::ThroughLibvirt;
use numaplace_model::{Action, CpuSet, Outcome, TaskId};
use numaplace_policy::engine::{Actuator, AffinityError, RecordingActuator};

/// Carries actions out on the host, or only records them (dry run).
pub(super) enum DaemonActuator {
    /// The host, libvirt's domains through libvirt.
    Host(ThroughLibvirt<HostActuator>),
    Dry(RecordingActuator),
}

impl Actuator for DaemonActuator {
    fn apply(&mut self, action: &Action) -> Outcome {
        match self {
            DaemonActuator::Host(h) => Actuator::apply(h, action),
            DaemonActuator::Dry(r) => r.apply(action),
        }
    }

    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError> {
        match self {
            DaemonActuator::Host(h) => Actuator::affinity(h, task, tgid),
            DaemonActuator::Dry(r) => r.affinity(task, tgid),
        }
    }

    fn kernel_balancing_value(&self) -> Option<Result<u32, String>> {
        match self {
            DaemonActuator::Host(h) => Actuator::kernel_balancing_value(h),
            DaemonActuator::Dry(_) => None,
        }
    }

    fn set_kernel_balancing_value(&mut self, value: u32) -> Result<(), String> {
        match self {
            DaemonActuator::Host(h) => Actuator::set_kernel_balancing_value(h, value),
            DaemonActuator::Dry(r) => r.set_kernel_balancing_value(value),
        }
    }
}
