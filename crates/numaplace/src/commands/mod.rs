//! One module per subcommand.

pub mod topology;

use numaplace_linux::{DiscoveryError, SysRootError};

/// Exit status: 2 when the input was at fault (a path, file or description
/// the user gave), 1 for anything else.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    let input_fault = e
        .chain()
        .any(|c| c.is::<SysRootError>() || c.is::<DiscoveryError>());
    if input_fault { 2 } else { 1 }
}
