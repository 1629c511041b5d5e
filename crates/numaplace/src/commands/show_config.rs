//! `numaplace config`: the configuration `run` would use, as TOML.

use anyhow::{Context, Result};

use numaplace::cli::RunArgs;
use numaplace::daemon::settings;

/// Checks the configuration as `run` does (the interval, the CPUs, the
/// machine file, the metrics address), then prints it.
pub(crate) fn run(args: &RunArgs) -> Result<()> {
    let s = settings(args)?;
    let text = toml::to_string_pretty(&s.config).context("writing the configuration as TOML")?;
    print!("{text}");
    Ok(())
}
