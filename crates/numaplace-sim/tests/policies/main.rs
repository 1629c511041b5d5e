//! The policies on their papers' machines (BRM, DINO, symbiosis, adaptive
//! mapping, a policy of one's own) and the simulator's guarantees
//! (confinement, determinism, the oracle, hostile scenarios, regressions).
//! One of the simulator's two test binaries.
//!
//! Each module was a test binary of its own (tests/NAME.rs).

#[path = "../support/seed000.rs"]
mod seed000;

mod adaptive;
mod brm;
mod confinement;
mod custom_policy;
mod determinism;
mod dino;
mod hostile_scenarios;
mod oracle_sequences;
mod regressions;
mod symbiosis;
