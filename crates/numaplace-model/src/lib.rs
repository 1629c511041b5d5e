//! numaplace's pure domain: the machine's topology and CPU sets, tasks and
//! snapshots, and the interfaces every world implements for the engine's
//! loop (`world`, `scope`). No I/O and no OS calls live here; readers in
//! `numaplace-linux` and the simulator's presets build these values, and
//! the policies read them.

// 4 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod counters;
// 13 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod cpuset;
// 10 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod memory_events;
pub mod metrics;
// 18 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod plan;
// 3 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod power;
// 3 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod rng;
// 2 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod scope;
// 16 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod snapshot;
// 10 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod task;
// 66 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod topology;
// 12 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod world;

pub use counters::{Counter, CounterDeltas};
pub use cpuset::{CpuSet, CpuSetParseError};
pub use memory_events::{NumaStat, NumaStatRates, PageFaults, VmNumaStat};
pub use plan::{Action, Decision, Outcome, PageCounts, Plan};
pub use power::PowerModel;
pub use scope::Scope;
pub use snapshot::{
    AddressSample, CacheSignature, EnergyDelta, MachineReadings, NodeMeminfo, PageSets, PageWindow,
    RecordHeader, ResctrlSample, Snapshot,
};
pub use task::{GroupKind, Manager, NodeMemory, NodeSet, NumaFaults, Task, TaskGroup, TaskId};
pub use topology::{
    Cache, CacheDesc, CacheKind, Core, CoreDesc, Cpu, CpuKind, CpuKindDesc, Llc, Node, NodeDesc,
    Package, PackageDesc, SyntheticError, Topology, TopologyDesc, TopologyError,
};
