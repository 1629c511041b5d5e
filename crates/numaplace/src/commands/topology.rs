//! `numaplace topology`.

use anyhow::Result;
use numaplace_linux::{SysRoot, TopologySource, discover_repaired};
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
        println!("{}", crate::output::json::pretty(&topo)?);
    } else {
        print!("{}", report::topology::render(&topo));
    }
    Ok(())
}

/// The machine the arguments name: another one's tree, XML or synthetic
/// description, or this one. What discovery repaired in it (where its
/// files contradict each other, hwloc's reading is followed) is printed on
/// stderr, a line each.
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
    let found = discover_repaired(&source)?;
    for r in &found.repairs {
        crate::output::say!("numaplace: warning: {}: {r}", source.describe());
    }
    Ok(found.topology)
}
