//! What numaplace prints for people.

pub mod tasks;
pub mod topology;
