//! The simulator held to the papers' measurements: the headlines side by
//! side, the trends, the validation targets, time slices, MPI jobs. One of
//! the simulator's two test binaries.
//!
//! Each module was a test binary of its own (tests/NAME.rs).

#[path = "../support/seed000.rs"]
mod seed000;

mod headlines;
mod mpi;
mod slices;
mod trends;
mod validation;
