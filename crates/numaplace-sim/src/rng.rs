//! The simulator's seeded generator: numaplace-model's, shared with the
//! policies.

pub use numaplace_model::rng::Rng;
