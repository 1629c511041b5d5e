//! An encoded perf event and where its encoding came from (the user's,
//! sysfs' or libpfm4's): what [`super::events`] and
//! [`super::libpfm_events`] both produce.

use std::fmt::Write as _;
use std::path::PathBuf;

/// An encoded event, ready for `perf_event_open`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEvent {
    /// Where it came from, perf-style: `cpu/offcore_requests.demand_data_rd/`
    /// or `cpu/event=0x60,umask=0x01,cmask=1/`.
    pub what: String,
    /// `perf_event_attr.type`.
    pub pmu_type: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// `perf_event_attr.config1`.
    pub config1: u64,
    /// `perf_event_attr.config2`.
    pub config2: u64,
    /// Where the encoding came from.
    pub origin: EventOrigin,
}

impl RawEvent {
    /// Where it came from and what it encodes to, in one line:
    /// `libpfm4 skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1 = config 0x1000160`.
    pub fn source(&self) -> String {
        let mut s = format!("{} = config {:#x}", self.origin, self.config);
        if self.config1 != 0 {
            let _ = write!(s, ", config1 {:#x}", self.config1);
        }
        if self.config2 != 0 {
            let _ = write!(s, ", config2 {:#x}", self.config2);
        }
        s
    }
}

/// Where an event's encoding came from: the resolution order is the
/// user's, then sysfs', then libpfm4's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventOrigin {
    /// Given by the user (configuration), checked against sysfs' format
    /// files.
    User {
        /// The text given.
        text: String,
    },
    /// Described by the kernel in sysfs (an event file, or a PMU's type).
    Sysfs {
        /// The sysfs file.
        path: PathBuf,
    },
    /// Encoded by libpfm4 for the PMU it detected (or was forced to):
    /// its fully qualified name, `skx::OFFCORE_REQUESTS:DEMAND_DATA_RD`.
    Libpfm {
        /// libpfm4's fully qualified name.
        event: String,
    },
}

impl std::fmt::Display for EventOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventOrigin::User { text } => write!(f, "the configured encoding {text}"),
            EventOrigin::Sysfs { path } => write!(f, "sysfs {}", path.display()),
            EventOrigin::Libpfm { event } => write!(f, "libpfm4 {event}"),
        }
    }
}
