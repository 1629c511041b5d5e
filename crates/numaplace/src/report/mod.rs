//! What numaplace prints for people.

pub mod engine;
pub mod tasks;
pub mod topology;
