//! Everything numaplace does that touches the operating system. Every
//! reader takes a [`SysRoot`], so a snapshot of another machine can stand
//! in for the live one.

pub mod record;
pub mod sysroot;
pub mod topology;

pub use sysroot::{ReadError, SysRoot, SysRootError};
pub use topology::{DiscoveryError, TopologySource, discover};
