//! Everything numaplace does that touches the operating system. Every
//! reader takes a [`SysRoot`], so a snapshot of another machine can stand
//! in for the live one.

pub mod actuate;
pub mod atomic;
pub mod balancing;
pub mod collect;
pub mod confinement;
pub mod cpu_idle;
pub mod guest_hints;
pub mod kubelet;
pub mod launch;
pub mod live;
pub mod microbench;
pub mod mmap;
pub mod nodes;
pub mod numastat;
pub mod perf;
pub mod powercap;
pub mod probe;
pub mod procfs;
pub mod record;
pub mod resctrl;
pub mod state;
pub mod sysconf;
pub mod sysroot;
pub mod taskiter;
#[cfg(any(test, feature = "testutil"))]
pub mod testutil;
pub mod topology;
pub mod uptime;
pub mod vm;

pub use collect::{CollectOptions, Collector};
pub use live::LiveTelemetry;
pub use record::{RecordError, Recorder, Replay};
pub use sysroot::{ReadError, SysRoot, SysRootError};
pub use topology::{
    Discovered, DiscoveryError, Repair, RepairKind, TopologySource, discover, discover_repaired,
};
