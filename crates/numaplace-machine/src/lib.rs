//! The machine model, one library for two uses (issue 31): the
//! simulator's world runs it with a scenario's truth, and `auto` runs it
//! as a predictor with what a live host (or the simulator) shows it.
//!
//! - [`machine`]: machines with sourced parameters (the papers'
//!   presets, a generic machine for any topology, synthetic ones);
//! - [`machine_file`]: machines in files (`numaplace calibrate`'s output);
//! - [`thread`]: what a thread is to the model (its core CPI, its uncore
//!   requests and miss curve, its memory-level parallelism, its writes to
//!   shared data);
//! - [`model`]: the contention model (M1-M8 of `docs/simulator.md`): given
//!   where each running thread is and where its memory lives, how fast
//!   each goes.

pub mod machine;
pub mod machine_file;
pub mod model;
pub mod thread;

pub use machine::{Machine, MachineError, MachineParams, PRESETS, Param, Source};
pub use thread::{Pattern, ThreadModel};
