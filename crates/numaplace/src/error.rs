//! How a command fails: [`InputError`] when what the user gave is at
//! fault, and the exit status an error gives.

use numaplace_linux::{DiscoveryError, RecordError, SysRootError};

/// Something the user gave on the command line is wrong; the message says
/// what and names it.
#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// Exit status: 2 when the input was at fault (a path, file, list or
/// description the user gave), 1 for anything else.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    let input_fault = e.chain().any(|c| {
        c.is::<SysRootError>()
            || c.is::<DiscoveryError>()
            || c.is::<RecordError>()
            || c.is::<InputError>()
            || c.is::<numaplace_sim::scenario::ScenarioError>()
    });
    if input_fault { 2 } else { 1 }
}
