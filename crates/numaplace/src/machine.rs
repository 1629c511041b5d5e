//! Which machine a command reads, and the part of it numaplace may use:
//! the machine the `--sysfs-root`/`--xml`/`--synthetic` arguments name
//! (this host when none is given), the root a `--root` names, and this
//! host as the calling process may run on it, with its CPUs in the order
//! the micro-benchmarks take them (separate cores first).

use std::path::Path;

use anyhow::Result;
use numaplace_linux::actuate::thread_affinity;
use numaplace_linux::{SysRoot, TopologySource, discover, discover_repaired};
use numaplace_model::{CpuSet, Topology};

use crate::cli::MachineArgs;
use crate::error::InputError;

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

/// The root to read tasks under: `/`, or a snapshot directory.
pub fn root_of(dir: Option<&Path>) -> Result<SysRoot> {
    Ok(match dir {
        Some(d) => SysRoot::new(d)?,
        None => SysRoot::host(),
    })
}

/// The machine as this process may use it.
pub struct Usable {
    /// The topology restricted to the CPUs this process may run on.
    pub topo: Topology,
    /// Every CPU numaplace sees on the machine.
    pub all: CpuSet,
}

impl Usable {
    /// This host, cut down to the CPUs the calling thread may run on.
    pub fn host() -> Result<Usable> {
        let full = discover(&TopologySource::Sysfs(SysRoot::host()))?;
        let allowed = thread_affinity(0, 1024)?;
        let topo = full.restrict(&allowed).map_err(|e| InputError(e.0))?;
        Ok(Usable {
            all: full.span().clone(),
            topo,
        })
    }
}

/// The CPUs of `set` ordered so that separate cores come before second
/// hardware threads of a core already used.
pub fn core_order(topo: &Topology, set: &CpuSet) -> Vec<u32> {
    let mut ranked: Vec<(usize, u32)> = set
        .iter()
        .filter_map(|c| {
            let core = &topo.cores()[topo.cpu_by_os_id(c)?.core];
            let rank = core
                .span
                .iter()
                .filter(|&s| s < c && set.contains(s))
                .count();
            Some((rank, c))
        })
        .collect();
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, c)| c).collect()
}
