//! What numaplace prints for people.

pub mod topology;
