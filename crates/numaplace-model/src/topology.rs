//! The machine as the policies see it: an immutable Machine > Package >
//! NUMA node > LLC domain > Core > CPU description with span cpusets at
//! every level, dense ids beside kernel ids, cache sizes and the node
//! distance matrix.
//!
//! A `Topology` is built and validated once, by [`Topology::new`] from a
//! [`TopologyDesc`] (what a discovery backend saw, in terms of kernel CPU
//! ids), and never mutated: on CPU hotplug a new one is built.
//!
//! Real machines do not nest as neatly as the tree suggests, and the model
//! keeps each relation explicit instead of assuming one:
//! * an LLC domain may hold several NUMA nodes (sub-NUMA clustering: one L3
//!   per package, two or four nodes) or a node several LLCs (AMD CCXs);
//! * a node may have memory and no CPUs (CXL, persistent memory, HBM): its
//!   `cpus` is empty and its `locality` names the CPUs near it;
//! * a node may have CPUs and no memory;
//! * kernel ids may be sparse (offline CPUs, holes in numbering), so dense
//!   ids index arrays and kernel ids go to syscalls, and the two never mix.

mod build;
mod synthetic;

pub use build::TopologyError;
pub use synthetic::SyntheticError;

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;

/// Linux's distance to a node from itself and the default to another node
/// when the firmware gives no table (`LOCAL_DISTANCE` / `REMOTE_DISTANCE`,
/// include/linux/topology.h).
pub const LOCAL_DISTANCE: u32 = 10;
/// See [`LOCAL_DISTANCE`].
pub const REMOTE_DISTANCE: u32 = 20;

/// Raw description of a machine from a discovery backend, in kernel ids.
/// Only [`Topology::new`] turns it into a `Topology`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TopologyDesc {
    /// Where the description came from, for people: `host`, `sysfs:/path`, ...
    pub source: String,
    /// The packages (sockets), with their CPUs.
    pub packages: Vec<PackageDesc>,
    /// The cores, with their hardware threads.
    pub cores: Vec<CoreDesc>,
    /// The NUMA nodes, with their memory and CPUs.
    pub nodes: Vec<NodeDesc>,
    /// Every cache the backend reports, all levels.
    pub caches: Vec<CacheDesc>,
    /// Row-major `nodes.len()²` distances in the order of `nodes`, if the
    /// machine reports them.
    pub distances: Option<Vec<u32>>,
    /// CPU kinds of a hybrid machine in hwloc's order, most power-efficient
    /// first. Empty when all CPUs are alike.
    pub cpu_kinds: Vec<CpuKindDesc>,
}

/// A package may have no CPU when a cgroup leaves us none of its CPUs but
/// some of its memory: it then holds only CPU-less nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageDesc {
    /// The kernel's `physical_package_id`.
    pub os_id: u32,
    /// Its CPUs (kernel ids); empty when a cgroup leaves us none.
    pub cpus: CpuSet,
}

/// One core as a backend reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreDesc {
    /// The kernel's `core_id`: unique only within a package (or die).
    pub os_id: u32,
    /// Its hardware threads (kernel ids).
    pub cpus: CpuSet,
}

/// One NUMA node as a backend reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDesc {
    /// The kernel's node number.
    pub os_id: u32,
    /// Bytes of memory local to the node.
    pub memory: u64,
    /// CPUs whose home node this is (`/sys/devices/system/node/nodeN/cpulist`).
    /// CPUs whose own node is offline take their memory from another node
    /// and are counted with it: then `cpus` is wider than `locality`.
    pub cpus: CpuSet,
    /// CPUs close to this node's memory: usually equal to `cpus`. For a CPU-less
    /// node, the CPUs of the package or group it hangs from (empty when a
    /// cgroup leaves none of those CPUs to us).
    pub locality: CpuSet,
    /// Kernel id of the package the node belongs to, when the backend knows
    /// it; needed for a CPU-less node whose package has no usable CPU.
    #[serde(default)]
    pub package: Option<u32>,
}

/// What a cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheKind {
    /// Data only (L1d).
    Data,
    /// Instructions only (L1i).
    Instruction,
    /// Both (L2, L3).
    Unified,
}

/// One cache as a backend reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheDesc {
    /// 1 for L1, 2 for L2, ...
    pub level: u8,
    /// What it holds.
    pub kind: CacheKind,
    /// Bytes; 0 when unknown.
    pub size: u64,
    /// Bytes per line; 0 when unknown.
    pub line_size: u32,
    /// Ways of associativity; 0 when unknown, -1 for fully associative.
    pub ways: i32,
    /// The CPUs that share it (kernel ids).
    pub cpus: CpuSet,
}

/// One kind of CPU of a hybrid machine, as a backend reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuKindDesc {
    /// e.g. `IntelCore`, `IntelAtom`, or the hwloc info `CoreType`; empty if unnamed.
    pub name: String,
    /// The CPUs of this kind (kernel ids).
    pub cpus: CpuSet,
}

/// One logical CPU (a hardware thread, hwloc's PU).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    /// Dense id: index into [`Topology::cpus`].
    pub id: usize,
    /// The kernel's CPU number, what `sched_setaffinity` takes.
    pub os_id: u32,
    /// Dense id: index into [`Topology::cores`]. Its core.
    pub core: usize,
    /// Dense id: index into [`Topology::llcs`]. Its last-level-cache domain.
    pub llc: usize,
    /// Home node (dense id).
    pub node: usize,
    /// Dense id: index into [`Topology::packages`]. Its package.
    pub package: usize,
    /// Index into [`Topology::cpu_kinds`] (most power-efficient first);
    /// `None` when the machine is not hybrid.
    pub kind: Option<usize>,
}

/// One core of the validated machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    /// Dense id: index into [`Topology::cores`].
    pub id: usize,
    /// The kernel's `core_id`: unique only within a package (or die).
    pub os_id: u32,
    /// The core's hardware threads (SMT siblings), kernel ids.
    pub span: CpuSet,
    /// The same CPUs as dense ids, in increasing kernel id.
    pub cpus: Vec<usize>,
    /// Its last-level-cache domain (dense id).
    pub llc: usize,
    /// The home node of its CPUs (dense id).
    pub node: usize,
    /// Its package (dense id).
    pub package: usize,
    /// Indexes into [`Topology::caches`] of the data and unified caches
    /// covering this core, innermost level first.
    pub caches: Vec<usize>,
}

/// A last-level-cache domain: the CPUs that share the outermost cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Llc {
    /// Dense id: index into [`Topology::llcs`].
    pub id: usize,
    /// Index into [`Topology::caches`]; `None` when the machine reports no
    /// cache for these CPUs and the domain stands for the package.
    pub cache: Option<usize>,
    /// Its CPUs, kernel ids.
    pub span: CpuSet,
    /// Its cores (dense ids).
    pub cores: Vec<usize>,
    /// Its package (dense id).
    pub package: usize,
    /// Home nodes of the domain's CPUs (dense ids).
    pub nodes: Vec<usize>,
}

/// One NUMA node of the validated machine: its memory and the CPUs
/// whose home it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Dense id: index into [`Topology::nodes`].
    pub id: usize,
    /// The kernel's node number, what `mbind` and `numa_maps` use.
    pub os_id: u32,
    /// Bytes of memory local to the node.
    pub memory: u64,
    /// CPUs whose home node this is; empty for a CPU-less node.
    pub span: CpuSet,
    /// CPUs close to this node's memory (hwloc's cpuset); equal to `span`
    /// for an ordinary node, empty-spanned for a CPU-less one, narrower when
    /// the node adopted CPUs whose own node is offline.
    pub locality: CpuSet,
    /// Cores whose CPUs have this node as home (dense ids).
    pub cores: Vec<usize>,
    /// Last-level-cache domains with CPUs here (dense ids).
    pub llcs: Vec<usize>,
    /// Its package: the one the description names (hwloc's, the node's
    /// ancestor), else the one holding its CPUs (or its locality, for a
    /// CPU-less node); `None` if they straddle packages. A node that
    /// adopted CPUs of another package (its own CPUs outside our cpuset,
    /// theirs outside its memory nodes) stays in its own.
    pub package: Option<usize>,
}

/// One package (socket) of the validated machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// Dense id: index into [`Topology::packages`].
    pub id: usize,
    /// The kernel's `physical_package_id`.
    pub os_id: u32,
    /// Its CPUs, kernel ids.
    pub span: CpuSet,
    /// Its cores (dense ids).
    pub cores: Vec<usize>,
    /// Its last-level-cache domains (dense ids).
    pub llcs: Vec<usize>,
    /// Nodes whose CPUs (or, CPU-less, whose locality) lie in this package.
    pub nodes: Vec<usize>,
}

/// One cache of the validated machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// Dense id: index into [`Topology::caches`].
    pub id: usize,
    /// 1 for L1, 2 for L2, ...
    pub level: u8,
    /// What it holds.
    pub kind: CacheKind,
    /// Bytes; 0 when unknown.
    pub size: u64,
    /// Bytes per line; 0 when unknown.
    pub line_size: u32,
    /// Ways of associativity; 0 when unknown, -1 for fully associative.
    pub ways: i32,
    /// The CPUs that share it, kernel ids.
    pub span: CpuSet,
}

/// One kind of CPU of a hybrid machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuKind {
    /// Dense id: index into [`Topology::cpu_kinds`]. 0 is the most power-efficient.
    pub id: usize,
    /// `IntelCore`, `IntelAtom`, or hwloc's `CoreType`; empty if unnamed.
    pub name: String,
    /// The CPUs of this kind, kernel ids.
    pub span: CpuSet,
}

/// The validated machine. See the module documentation.
///
/// Serialized, it is the whole derived view (for programs reading
/// `numaplace topology --json`); deserializing rebuilds it from the
/// packages, cores, nodes, caches, kinds and distances of that view and
/// validates it again, so a hand-edited file cannot smuggle in a broken tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Topology {
    source: String,
    span: CpuSet,
    cpus: Vec<Cpu>,
    cores: Vec<Core>,
    llcs: Vec<Llc>,
    nodes: Vec<Node>,
    packages: Vec<Package>,
    caches: Vec<Cache>,
    cpu_kinds: Vec<CpuKind>,
    /// Row-major distances between nodes by dense id.
    distances: Vec<u32>,
    distances_reported: bool,
    /// Dense CPU id by kernel id (`usize::MAX` for holes).
    #[serde(skip)]
    cpu_by_os_id: Vec<usize>,
}

impl Topology {
    /// Where the description came from, for people: `host`, `sysfs:/path`, ...
    pub fn source(&self) -> &str {
        &self.source
    }
    /// Every CPU of the machine, kernel ids.
    pub fn span(&self) -> &CpuSet {
        &self.span
    }
    /// Every CPU, by dense id.
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }
    /// Every core, by dense id.
    pub fn cores(&self) -> &[Core] {
        &self.cores
    }
    /// Every last-level-cache domain, by dense id.
    pub fn llcs(&self) -> &[Llc] {
        &self.llcs
    }
    /// Every NUMA node, by dense id.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// Every package, by dense id.
    pub fn packages(&self) -> &[Package] {
        &self.packages
    }
    /// Every cache, by the index [`Core::caches`] and [`Llc::cache`] hold.
    pub fn caches(&self) -> &[Cache] {
        &self.caches
    }
    /// The CPU kinds of a hybrid machine, most power-efficient first;
    /// empty when all CPUs are alike.
    pub fn cpu_kinds(&self) -> &[CpuKind] {
        &self.cpu_kinds
    }
    /// A description that builds this same topology again.
    pub fn to_desc(&self) -> TopologyDesc {
        desc_from_parts(
            self.source.clone(),
            &self.packages,
            &self.cores,
            &self.nodes,
            &self.caches,
            &self.cpu_kinds,
            self.distances_reported.then(|| self.distances.clone()),
        )
    }

    /// Distance from node `a` to node `b` (dense ids), in the kernel's units
    /// (10 = local).
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        self.distances[a * self.nodes.len() + b]
    }

    /// The distance matrix, row-major by dense node id.
    pub fn distances(&self) -> &[u32] {
        &self.distances
    }

    /// Whether the machine reported its distances; if not, they are
    /// [`LOCAL_DISTANCE`] / [`REMOTE_DISTANCE`] as Linux assumes.
    pub fn distances_reported(&self) -> bool {
        self.distances_reported
    }

    /// The CPU with this kernel id, if the machine has it.
    pub fn cpu_by_os_id(&self, os_id: u32) -> Option<&Cpu> {
        match self.cpu_by_os_id.get(os_id as usize) {
            Some(&i) if i != usize::MAX => Some(&self.cpus[i]),
            _ => None,
        }
    }

    /// The node with this kernel id.
    pub fn node_by_os_id(&self, os_id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.os_id == os_id)
    }

    /// Hardware threads per core on the widest core (1 without SMT).
    pub fn smt_width(&self) -> usize {
        self.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(1)
    }

    /// Nodes that have CPUs.
    pub fn cpu_nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| !n.span.is_empty())
    }

    /// Total memory of all nodes, bytes.
    pub fn total_memory(&self) -> u64 {
        self.nodes.iter().map(|n| n.memory).sum()
    }

    /// The cache of `level` (data or unified) covering `core`, if reported.
    pub fn core_cache(&self, core: usize, level: u8) -> Option<&Cache> {
        self.cores[core]
            .caches
            .iter()
            .map(|&c| &self.caches[c])
            .find(|c| c.level == level)
    }

    /// Size in bytes of an LLC domain's cache, if reported.
    pub fn llc_size(&self, llc: usize) -> Option<u64> {
        self.llcs[llc]
            .cache
            .map(|c| self.caches[c].size)
            .filter(|&s| s > 0)
    }
}

impl<'de> Deserialize<'de> for Topology {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The serialized view; derived fields (cpus, llcs, relations) are
        // ignored and rebuilt.
        #[derive(Deserialize)]
        struct Wire {
            source: String,
            packages: Vec<Package>,
            cores: Vec<Core>,
            nodes: Vec<Node>,
            caches: Vec<Cache>,
            cpu_kinds: Vec<CpuKind>,
            distances: Vec<u32>,
            distances_reported: bool,
        }
        let w = Wire::deserialize(d)?;
        let desc = desc_from_parts(
            w.source,
            &w.packages,
            &w.cores,
            &w.nodes,
            &w.caches,
            &w.cpu_kinds,
            w.distances_reported.then_some(w.distances),
        );
        Topology::new(desc).map_err(serde::de::Error::custom)
    }
}

fn desc_from_parts(
    source: String,
    packages: &[Package],
    cores: &[Core],
    nodes: &[Node],
    caches: &[Cache],
    cpu_kinds: &[CpuKind],
    distances: Option<Vec<u32>>,
) -> TopologyDesc {
    TopologyDesc {
        source,
        packages: (packages.iter())
            .map(|p| PackageDesc {
                os_id: p.os_id,
                cpus: p.span.clone(),
            })
            .collect(),
        cores: (cores.iter())
            .map(|c| CoreDesc {
                os_id: c.os_id,
                cpus: c.span.clone(),
            })
            .collect(),
        nodes: (nodes.iter())
            .map(|n| NodeDesc {
                os_id: n.os_id,
                memory: n.memory,
                cpus: n.span.clone(),
                locality: n.locality.clone(),
                package: n.package.map(|p| packages[p].os_id),
            })
            .collect(),
        caches: (caches.iter())
            .map(|c| CacheDesc {
                level: c.level,
                kind: c.kind,
                size: c.size,
                line_size: c.line_size,
                ways: c.ways,
                cpus: c.span.clone(),
            })
            .collect(),
        distances,
        cpu_kinds: (cpu_kinds.iter())
            .map(|k| CpuKindDesc {
                name: k.name.clone(),
                cpus: k.span.clone(),
            })
            .collect(),
    }
}

impl Topology {
    /// The machine as seen by work confined to `cpus` (a cpuset cgroup, a
    /// scope): CPUs, cores, caches and kinds outside it are gone; every node
    /// stays, since confining CPUs does not confine memory, and nodes left
    /// without CPUs become CPU-less nodes of their package.
    pub fn restrict(&self, cpus: &CpuSet) -> Result<Topology, TopologyError> {
        let keep = self.span.intersection(cpus);
        if keep.is_empty() {
            return Err(TopologyError(format!(
                "none of CPUs {cpus} is on this machine (it has {})",
                self.span
            )));
        }
        let mut d = self.to_desc();
        for (n, node) in d.nodes.iter_mut().zip(&self.nodes) {
            n.cpus = n.cpus.intersection(&keep);
            n.locality = n.locality.intersection(&keep);
            n.package = node.package.map(|p| self.packages[p].os_id);
        }
        let pkg_with_nodes: Vec<u32> = d.nodes.iter().filter_map(|n| n.package).collect();
        for p in &mut d.packages {
            p.cpus = p.cpus.intersection(&keep);
        }
        d.packages
            .retain(|p| !p.cpus.is_empty() || pkg_with_nodes.contains(&p.os_id));
        for c in &mut d.cores {
            c.cpus = c.cpus.intersection(&keep);
        }
        d.cores.retain(|c| !c.cpus.is_empty());
        for c in &mut d.caches {
            c.cpus = c.cpus.intersection(&keep);
        }
        d.caches.retain(|c| !c.cpus.is_empty());
        for k in &mut d.cpu_kinds {
            k.cpus = k.cpus.intersection(&keep);
        }
        d.cpu_kinds.retain(|k| !k.cpus.is_empty());
        if d.cpu_kinds.len() == 1 {
            d.cpu_kinds.clear();
        }
        d.source = format!("{} restricted to CPUs {keep}", self.source);
        Topology::new(d)
    }
}
