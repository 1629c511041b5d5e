//! Everything numaplace does that touches the operating system. Every
//! reader takes a [`SysRoot`], so a snapshot of another machine can stand
//! in for the live one.

// 6 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod actuate;
// 3 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod atomic;
// 2 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod balancing;
// 3 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod collect;
// 1 public item here still lacks docs (issue 35): document it, then drop this.
#[allow(missing_docs)]
pub mod confinement;
// 7 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod cpu_idle;
pub mod guest_hints;
// 4 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod kubelet;
// 11 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod launch;
// 2 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod live;
// 15 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod microbench;
pub mod nodes;
// 9 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod numastat;
pub mod perf;
// 18 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod powercap;
pub mod probe;
pub mod procfs;
// 24 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod record;
// 20 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod resctrl;
// 27 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod state;
pub mod sysconf;
// 11 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod sysroot;
// 20 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod taskiter;
#[cfg(any(test, feature = "testutil"))]
// 2 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod testutil;
// 21 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
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
