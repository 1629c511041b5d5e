//! What numaplace prints for people.

pub mod engine;
pub mod tasks;
// 1 public item here still lacks docs (issue 35): document it, then drop this.
#[allow(missing_docs)]
pub mod topology;
