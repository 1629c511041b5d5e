//! The simulator's integration tests: the papers' measurements, trends,
//! determinism, the oracle, hostile scenarios, each policy on its paper's
//! machine. One test binary.
//!
//! Each module was a test binary of its own (tests/NAME.rs); together they
//! link the workspace once.

#[path = "../support/seed000.rs"]
mod seed000;

mod adaptive;
mod brm;
mod confinement;
mod custom_policy;
mod determinism;
mod dino;
mod headlines;
mod hostile_scenarios;
mod mpi;
mod oracle_sequences;
mod regressions;
mod slices;
mod symbiosis;
mod trends;
mod validation;
