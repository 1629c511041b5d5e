//! `numaplace topology`.

use anyhow::Result;
use numaplace_linux::{SysRoot, TopologySource, discover};
use numaplace_model::Topology;

use crate::cli::{MachineArgs, TopologyArgs};
use crate::report;

pub fn run(args: &TopologyArgs) -> Result<()> {
    let topo = load(&args.machine)?;
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
        TopologySource::Root(SysRoot::new(dir)?)
    } else if let Some(file) = &m.xml {
        TopologySource::Xml(file.clone())
    } else if let Some(text) = &m.synthetic {
        TopologySource::Synthetic(text.clone())
    } else {
        TopologySource::Host
    };
    Ok(discover(&source)?)
}
