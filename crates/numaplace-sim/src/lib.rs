//! The simulator of NUMA machines (issue 5): the machines so far; the
//! contention model, scenarios, the oracle and `compare` come next. See
//! `docs/simulator.md`.

pub mod machine;

pub use machine::{Machine, MachineError, MachineParams, PRESETS};
