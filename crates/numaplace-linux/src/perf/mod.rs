//! Per-thread hardware and software counters through `perf_event_open`
//! (via the `perf-event2` crate).
//!
//! - [`events`]: events by name from sysfs (`.../events/*`, `.../format/*`),
//!   encoded to raw `(type, config, config1, config2)`; the uncore-penalty
//!   pair of seed 000 §3.1.
//! - [`counters`]: one thread's group ([`ThreadCounters`]).
//! - [`scaling`]: raw readings, multiplexing scale and deltas — pure.
//! - [`monitor`]: [`PerfMonitor`], a changing set of threads, and the
//!   [`Availability`] report of what this host can count.
//! - [`sampling`]: [`AddressSampler`], sampled data addresses per thread
//!   (PEBS load latency, IBS op), and its [`SamplingAvailability`].

pub mod availability;
pub mod counters;
pub mod events;
pub mod monitor;
mod registry;
pub mod sampling;
pub mod scaling;

pub use availability::{Availability, CounterStatus, FdLimit};
pub use counters::{EventSource, EventSpec, OpenError, OpenOptions, ThreadCounters};
pub use events::{EventError, EventResolver, RawEvent, UncoreEncodings, UncoreEvents};
pub use monitor::{PerfConfig, PerfMonitor, SyncReport};
pub use sampling::{
    AddressSampler, SampleEvent, SampleRate, SampleRound, SampleSource, SamplerConfig,
    SamplingAvailability,
};
pub use scaling::{GroupReading, delta, scale};
