//! `numaplace topology`.

use anyhow::Result;
use numaplace_linux::{SysRoot, TopologySource, discover};
use numaplace_model::{CpuSet, Topology};

use crate::cli::{MachineArgs, TopologyArgs};
use crate::commands::InputError;
use crate::report;

pub fn run(args: &TopologyArgs) -> Result<()> {
    let mut topo = load(&args.machine)?;
    if let Some(list) = &args.cpus {
        let cpus: CpuSet = list
            .parse()
            .map_err(|e| InputError(format!("--cpus: {e}")))?;
        topo = topo
            .restrict(&cpus)
            .map_err(|e| InputError(format!("--cpus {list}: {}", e.0)))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&topo)?);
    } else {
        print!("{}", report::topology::render(&topo));
    }
    Ok(())
}

/// The machine the arguments name: another one's tree, XML or synthetic
/// description, or this one.
pub fn load(m: &MachineArgs) -> Result<Topology> {
    let source = if let Some(dir) = &m.sysfs_root {
        TopologySource::Sysfs(SysRoot::new(dir)?)
    } else if let Some(file) = &m.xml {
        TopologySource::Xml(file.clone())
    } else if let Some(text) = &m.synthetic {
        TopologySource::Synthetic(text.clone())
    } else {
        TopologySource::Sysfs(SysRoot::host())
    };
    Ok(discover(&source)?)
}
