//! numaplace's pure domain: the machine's topology and CPU sets, tasks and
//! snapshots, and the interfaces every world implements for the engine's
//! loop (`world`, `scope`). No I/O and no OS calls live here; readers in
//! `numaplace-linux` and the simulator's presets build these values, and
//! the policies read them.

pub mod counters;
pub mod cpuset;
pub mod memory_events;
pub mod metrics;
pub mod plan;
pub mod power;
pub mod rng;
pub mod scope;
pub mod snapshot;
pub mod task;
pub mod topology;
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
