//! The simulator of NUMA machines (issue 5): machines with sourced
//! parameters, workloads from scenario files, the contention model, the
//! simulated Linux and the world the policies act on, the oracle, and the
//! comparison of policies over seeds. See `docs/simulator.md`.

// The machine, its files and the contention model live in numaplace-machine
// (issue 31: auto predicts with the same model); the simulator names them
// as its own modules.
pub use numaplace_machine::{machine, machine_file, model};

pub mod adaptive;
pub mod bloom;
pub mod compare;
pub mod generate;
pub mod oracle;
pub mod oracle_search;
pub mod outcome;
pub mod paired;
pub mod report;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod shard;
pub mod sweep;
pub mod workload;
pub mod world;

pub use machine::{Machine, MachineError, MachineParams, PRESETS};
pub use outcome::{AppRun, Comparison, PolicySummary, RunResult, Trace};
pub use workload::{
    AppKind, AppSpec, LinuxModel, MemoryPlacement, Pattern, Phase, ThreadModel, Workload,
};
