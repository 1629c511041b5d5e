//! The simulator of NUMA machines (issue 5): machines with sourced
//! parameters, workloads from scenario files, the contention model, the
//! simulated Linux and the world the policies act on, the oracle, and the
//! comparison of policies over seeds. See `docs/simulator.md`.

// The machine, its files and the contention model live in numaplace-machine
// (issue 31: auto predicts with the same model); the simulator names them
// as its own modules.
pub use numaplace_machine::{machine, machine_file, model};

// 12 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod adaptive;
// 28 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod bloom;
// 4 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod compare;
// 3 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod generate;
// 6 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod oracle;
pub mod oracle_search;
// 30 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod outcome;
pub mod report;
pub mod rng;
// 8 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod run;
// 9 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod scenario;
// 20 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod sweep;
// 14 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod workload;
// 16 public items here still lack docs (issue 35): document them, then drop this.
#[allow(missing_docs)]
pub mod world;

pub use machine::{Machine, MachineError, MachineParams, PRESETS};
pub use outcome::{AppRun, Comparison, PolicySummary, RunResult, Trace};
pub use workload::{
    AppKind, AppSpec, LinuxModel, MemoryPlacement, Pattern, Phase, ThreadModel, Workload,
};
