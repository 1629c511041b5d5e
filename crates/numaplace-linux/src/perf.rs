//! Per-thread hardware and software counters through `perf_event_open`
//! (via the `perf-event2` crate).
//!
//! - [`events`]: events by name from sysfs (`.../events/*`, `.../format/*`),
//!   encoded to raw `(type, config, config1, config2)`, after the user's
//!   encoding and before libpfm4's; each keeps its [`EventOrigin`]; the
//!   uncore-penalty pair of \[Rao13\] §3.1.
//! - [`libpfm`]: libpfm4 loaded at run time, which encodes model-specific
//!   events for the CPU it detects; [`libpfm_events`]: which of its events
//!   stands for each counter on each CPU, or why none does.
//! - [`counters`]: one thread's group ([`ThreadCounters`]).
//! - [`scaling`]: raw readings, multiplexing scale and deltas — pure.
//! - [`monitor`]: [`PerfMonitor`], a changing set of threads, and the
//!   [`Availability`] report of what this host can count.
//! - [`sampling`]: [`AddressSampler`], sampled data addresses per thread
//!   (PEBS load latency, IBS op), and its [`SamplingAvailability`].

pub mod availability;
pub mod counters;
pub mod events;
pub mod libpfm;
pub mod libpfm_events;
pub mod monitor;
pub mod raw_event;
mod registry;
pub mod sampling;
pub mod scaling;

pub use availability::{Availability, CounterStatus, FdLimit};
pub use counters::{EventSource, EventSpec, OpenError, OpenOptions, ThreadCounters};
pub use events::{EventError, EventResolver, UncoreEncodings, UncoreEvents};
pub use libpfm::{EventEncoder, LIBPFM_MISSING, NoEncoder, host_encoder};
pub use monitor::{PerfConfig, PerfMonitor};
pub use raw_event::{EventOrigin, RawEvent};
pub use registry::SyncReport;
pub use sampling::{
    AddressSampler, SampleEvent, SampleRate, SampleRound, SampleSource, SamplerConfig,
    SamplingAvailability,
};
pub use scaling::{GroupReading, delta, scale};
