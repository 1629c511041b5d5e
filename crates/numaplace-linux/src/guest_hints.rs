//! The guest's hints: \[Rao13\] §4.3's candidate vCPUs told by the guest
//! itself, without a modified guest kernel.
//!
//! In the paper (Rao et al., HPCA 2013, §4.3 and §5) the guest kernel makes
//! a `tag` hypercall with the vCPU's id whenever a thread whose CPU mask is
//! narrower than the online CPUs is scheduled, and a `clear` when it exits;
//! the VMM's BRM then migrates only tagged vCPUs. Here `numaplace guest`
//! runs inside the VM ([`agent`]: which vCPUs run such threads) and writes
//! the protocol of `numaplace_parse::guest_hints` to a virtio-serial port;
//! the host's daemon reads the port's UNIX socket ([`host`], [`socket`])
//! and puts each VM's hinted vCPUs in the round's snapshot
//! (`Snapshot::guest_hints`), where BRM takes them as candidates.

pub mod agent;
pub mod host;
pub mod socket;
pub mod telemetry;

pub use host::{GuestHints, HintRound};
pub use numaplace_parse::guest_hints as protocol;
pub use socket::validate_patterns;
pub use telemetry::Hinted;
