//! `numaplace topology`.

use anyhow::Result;
use numaplace_model::CpuSet;

use numaplace::cli::TopologyArgs;
use numaplace::error::InputError;
use numaplace::report;

pub(crate) fn run(args: &TopologyArgs) -> Result<()> {
    let mut topo = numaplace::machine::load(&args.machine)?;
    if let Some(list) = &args.cpus {
        let cpus: CpuSet = list
            .parse()
            .map_err(|e| InputError(format!("--cpus: {e}")))?;
        topo = topo
            .restrict(&cpus)
            .map_err(|e| InputError(format!("--cpus {list}: {}", e.0)))?;
    }
    if args.json {
        println!("{}", numaplace::output::json::pretty(&topo)?);
    } else {
        print!("{}", report::topology::render(&topo));
    }
    Ok(())
}
