//! numaplace-model's integration tests: the topology model and its
//! properties. One test binary.
//!
//! Each module was a test binary of its own (tests/NAME.rs); together they
//! link the workspace once.

mod properties;
mod topology;
