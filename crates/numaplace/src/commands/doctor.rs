//! `numaplace doctor`: the rows of what works on this machine
//! ([`numaplace::checks`]) as a table or JSON, and the exit status they
//! give the configured policy, for a readiness probe.

use anyhow::Result;
use numaplace::checks::{self, Reads, numastat};
use numaplace::cli::DoctorArgs;
use numaplace::config::Config;
use numaplace::error::InputError;
use numaplace_linux::SysRoot;
use numaplace_policy::registry::PolicyKind;

/// `numaplace doctor`: the report, then the exit status the rows give
/// (0, or [`checks::NOT_READY`]).
pub(crate) fn run(args: &DoctorArgs) -> Result<u8> {
    let interval = numastat::interval(&args.interval)?;
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(p) = &args.policy {
        config.policy =
            PolicyKind::from_name(p).map_err(|e| InputError(format!("--policy: {e}")))?;
    }
    let reads = Reads::of(&config);
    let root = SysRoot::host();
    // numastat's first reading, so the checks' time counts toward its rates.
    let sampling = numastat::Sampling::start(&root);
    let rows = checks::rows(&root, checks::checks(&root), &reads);
    let counted = sampling.finish(interval);
    if args.json {
        let json = numastat::json_rows(&rows, &counted);
        println!("{}", numaplace::output::json::pretty(&json)?);
    } else {
        print!(
            "{}",
            checks::render(&rows, &reads, &numastat::render(&counted))
        );
    }
    Ok(checks::exit_status(&rows))
}
