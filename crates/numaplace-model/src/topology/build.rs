//! The one constructor of [`Topology`]: derives every relation from a
//! [`TopologyDesc`] and refuses descriptions that no real machine has.

use std::collections::BTreeSet;

use super::*;

/// Why a description is not a machine. Each message names the objects at
/// fault by their kernel ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyError(pub String);

impl std::fmt::Display for TopologyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "inconsistent topology: {}", self.0)
    }
}

impl std::error::Error for TopologyError {}

macro_rules! bail {
    ($($arg:tt)*) => { return Err(TopologyError(format!($($arg)*))) };
}

/// Checks that `sets` are non-empty and pairwise disjoint; returns their union.
fn disjoint_union<'a>(
    what: &str,
    sets: impl Iterator<Item = (u32, &'a CpuSet)>,
) -> Result<CpuSet, TopologyError> {
    let mut all = CpuSet::new();
    for (id, s) in sets {
        if s.is_empty() {
            bail!("{what} {id} has no CPU");
        }
        if s.intersects(&all) {
            bail!(
                "{what} {id} shares CPUs {} with another {what}",
                s.intersection(&all)
            );
        }
        all = all.union(s);
    }
    Ok(all)
}

/// The index of the one set in `sets` that contains the non-empty `inner`.
fn container(sets: &[&CpuSet], inner: &CpuSet) -> Option<usize> {
    if inner.is_empty() {
        return None;
    }
    sets.iter().position(|s| inner.is_subset(s))
}

impl Topology {
    /// Builds and validates a topology. Dense ids follow the machine's
    /// order: packages by kernel id; within a package LLC domains, then
    /// cores, by their lowest CPU; CPUs within a core by kernel id. Nodes
    /// are ordered by kernel id so the distance matrix reads as the kernel's.
    /// One step per level, each checking what that level must satisfy.
    pub fn new(desc: TopologyDesc) -> Result<Topology, TopologyError> {
        if desc.packages.is_empty() || desc.cores.is_empty() {
            bail!("no package or no core: a machine has at least one CPU");
        }
        if desc.nodes.is_empty() {
            bail!("no NUMA node: even a uniform machine has node 0");
        }
        let (pkg_desc, span) = sorted_packages(&desc.packages)?;
        let core_span = disjoint_union("core", desc.cores.iter().map(|c| (c.os_id, &c.cpus)))?;
        if core_span != span {
            bail!("cores cover CPUs {} but packages cover {}", core_span, span);
        }
        let pkg_sets: Vec<&CpuSet> = pkg_desc.iter().map(|p| &p.cpus).collect();
        let (node_desc, order) = sorted_nodes(&desc.nodes, &span)?;
        let (distances, distances_reported) = distance_matrix(desc.distances.as_deref(), &order)?;
        let caches = sorted_caches(&desc.caches, &span, &pkg_sets)?;
        let node_sets: Vec<&CpuSet> = node_desc.iter().map(|n| &n.cpus).collect();
        let infos = core_infos(&desc.cores, &pkg_sets, &node_sets, &caches)?;
        let llc_keys = llc_domains(&infos, &caches, &pkg_sets);
        let (cores, mut cpus) = cores_and_cpus(infos, &llc_keys, span.len());
        let llcs = llcs_of(&llc_keys, &cores);
        let nodes = nodes_of(&node_desc, &pkg_desc, &pkg_sets, &span, &cores)?;
        let packages = packages_of(&pkg_desc, &cores, &llcs, &nodes)?;
        let cpu_kinds = cpu_kinds_of(&desc.cpu_kinds, &span, &mut cpus)?;
        let mut cpu_by_os_id = vec![usize::MAX; span.last().map_or(0, |l| l as usize + 1)];
        for c in &cpus {
            cpu_by_os_id[c.os_id as usize] = c.id;
        }
        Ok(Topology {
            source: desc.source,
            span,
            cpus,
            cores,
            llcs,
            nodes,
            packages,
            caches,
            cpu_kinds,
            distances,
            distances_reported,
            cpu_by_os_id,
        })
    }
}

/// Packages sorted by kernel id, each id once, and the CPUs they cover
/// (disjoint, at least one). CPU-less packages are checked once nodes are
/// known ([`packages_of`]).
fn sorted_packages(packages: &[PackageDesc]) -> Result<(Vec<PackageDesc>, CpuSet), TopologyError> {
    let mut pkg_desc = packages.to_vec();
    pkg_desc.sort_by_key(|p| p.os_id);
    if let Some(w) = pkg_desc.windows(2).find(|w| w[0].os_id == w[1].os_id) {
        bail!("package {} appears twice", w[0].os_id);
    }
    let span = disjoint_union(
        "package",
        pkg_desc
            .iter()
            .filter(|p| !p.cpus.is_empty())
            .map(|p| (p.os_id, &p.cpus)),
    )?;
    if span.is_empty() {
        bail!("no package has a CPU: a machine has at least one CPU");
    }
    Ok((pkg_desc, span))
}

/// Nodes sorted by kernel id, each id once, their CPUs disjoint and
/// covering the machine's; with, for each sorted node, its index in the
/// description (the distance matrix's order).
fn sorted_nodes(
    nodes: &[NodeDesc],
    span: &CpuSet,
) -> Result<(Vec<NodeDesc>, Vec<usize>), TopologyError> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by_key(|&i| nodes[i].os_id);
    let node_desc: Vec<NodeDesc> = order.iter().map(|&i| nodes[i].clone()).collect();
    if let Some(w) = node_desc.windows(2).find(|w| w[0].os_id == w[1].os_id) {
        bail!("node {} appears twice", w[0].os_id);
    }
    let mut node_span = CpuSet::new();
    for n in &node_desc {
        if n.cpus.intersects(&node_span) {
            bail!(
                "node {} claims CPUs {} that are another node's",
                n.os_id,
                n.cpus.intersection(&node_span)
            );
        }
        if !n.cpus.is_subset(span) {
            bail!(
                "node {} has CPUs {} that no package has",
                n.os_id,
                n.cpus.difference(span)
            );
        }
        node_span = node_span.union(&n.cpus);
    }
    if node_span != *span {
        bail!("CPUs {} belong to no node", span.difference(&node_span));
    }
    Ok((node_desc, order))
}

/// The distance matrix in sorted node order, and whether the firmware
/// reported it (otherwise: local 10, remote 20).
fn distance_matrix(
    reported: Option<&[u32]>,
    order: &[usize],
) -> Result<(Vec<u32>, bool), TopologyError> {
    let nn = order.len();
    let Some(d) = reported else {
        let mut m = vec![REMOTE_DISTANCE; nn * nn];
        for a in 0..nn {
            m[a * nn + a] = LOCAL_DISTANCE;
        }
        return Ok((m, false));
    };
    if d.len() != nn * nn {
        bail!(
            "distance matrix has {} entries for {} nodes (needs {})",
            d.len(),
            nn,
            nn * nn
        );
    }
    if let Some(i) = d.iter().position(|&v| v == 0) {
        bail!("distance from node index {} to {} is 0", i / nn, i % nn);
    }
    let mut m = vec![0; nn * nn];
    for (a, &oa) in order.iter().enumerate() {
        for (b, &ob) in order.iter().enumerate() {
            m[a * nn + b] = d[oa * nn + ob];
        }
    }
    Ok((m, true))
}

/// Caches sorted by level, kind and lowest CPU, with dense ids: each of
/// the machine's CPUs, within one package, not overlapping another of its
/// level and kind.
fn sorted_caches(
    caches: &[CacheDesc],
    span: &CpuSet,
    pkg_sets: &[&CpuSet],
) -> Result<Vec<Cache>, TopologyError> {
    let mut cache_desc = caches.to_vec();
    cache_desc.sort_by_key(|c| (c.level, c.kind, c.cpus.first()));
    for c in &cache_desc {
        if c.level == 0 {
            bail!("a cache of level 0 (levels start at 1)");
        }
        if c.cpus.is_empty() {
            bail!("an L{} cache has no CPU", c.level);
        }
        if !c.cpus.is_subset(span) {
            bail!(
                "an L{} cache holds CPUs {} the machine lacks",
                c.level,
                c.cpus.difference(span)
            );
        }
        if container(pkg_sets, &c.cpus).is_none() {
            bail!("the L{} cache of CPUs {} spans packages", c.level, c.cpus);
        }
    }
    // Sorted: overlaps can only be within a run of one level and kind.
    for (i, a) in cache_desc.iter().enumerate() {
        for b in &cache_desc[i + 1..] {
            if (a.level, a.kind) != (b.level, b.kind) {
                break;
            }
            if a.cpus.intersects(&b.cpus) {
                bail!(
                    "two L{} caches share CPUs {}",
                    a.level,
                    a.cpus.intersection(&b.cpus)
                );
            }
        }
    }
    Ok(cache_desc
        .iter()
        .enumerate()
        .map(|(id, c)| Cache {
            id,
            level: c.level,
            kind: c.kind,
            size: c.size,
            line_size: c.line_size,
            ways: c.ways,
            span: c.cpus.clone(),
        })
        .collect())
}

/// A core of the description with its package, home node (dense ids),
/// data and unified caches (inner first) and outermost one.
struct CoreInfo<'a> {
    desc: &'a CoreDesc,
    package: usize,
    node: usize,
    caches: Vec<usize>,
    llc_cache: Option<usize>,
}

impl CoreInfo<'_> {
    /// Its LLC domain: its outermost cache, or its package's cache-less
    /// domain.
    fn llc_key(&self) -> LlcKey {
        match self.llc_cache {
            Some(c) => LlcKey::Cache(c),
            None => LlcKey::Package(self.package),
        }
    }
}

/// Each core's place: in one package, one node, and whole in every cache
/// it touches.
fn core_infos<'a>(
    cores: &'a [CoreDesc],
    pkg_sets: &[&CpuSet],
    node_sets: &[&CpuSet],
    caches: &[Cache],
) -> Result<Vec<CoreInfo<'a>>, TopologyError> {
    let mut infos = Vec::with_capacity(cores.len());
    for c in cores {
        let Some(package) = container(pkg_sets, &c.cpus) else {
            bail!("core {} (CPUs {}) spans packages", c.os_id, c.cpus);
        };
        let Some(node) = container(node_sets, &c.cpus) else {
            bail!("core {} (CPUs {}) spans NUMA nodes", c.os_id, c.cpus);
        };
        let mut mine = Vec::new();
        for cache in caches {
            if cache.span.intersects(&c.cpus) {
                if !c.cpus.is_subset(&cache.span) {
                    bail!(
                        "core {} (CPUs {}) is split by an L{} cache of CPUs {}",
                        c.os_id,
                        c.cpus,
                        cache.level,
                        cache.span
                    );
                }
                if cache.kind != CacheKind::Instruction {
                    mine.push(cache.id);
                }
            }
        }
        mine.sort_by_key(|&i| caches[i].level);
        let llc_cache = mine.last().copied();
        infos.push(CoreInfo {
            desc: c,
            package,
            node,
            caches: mine,
            llc_cache,
        });
    }
    Ok(infos)
}

/// An LLC domain: one per outermost cache; cores without any cache share
/// one standing for their package.
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum LlcKey {
    Cache(usize),
    Package(usize),
}

/// The LLC domains in dense order (package, lowest CPU): (package, lowest
/// CPU, domain).
fn llc_domains(
    infos: &[CoreInfo<'_>],
    caches: &[Cache],
    pkg_sets: &[&CpuSet],
) -> Vec<(usize, u32, LlcKey)> {
    let mut llc_keys = Vec::new();
    let mut seen = BTreeSet::new();
    for i in infos {
        let k = i.llc_key();
        if seen.insert(k) {
            let first = match k {
                LlcKey::Cache(c) => caches[c].span.first(),
                LlcKey::Package(p) => pkg_sets[p].first(),
            };
            llc_keys.push((i.package, first.unwrap_or(0), k));
        }
    }
    llc_keys.sort();
    llc_keys
}

/// Cores in dense order (package, LLC domain, lowest CPU) and their CPUs
/// (kernel order within a core); CPU kinds come later.
fn cores_and_cpus(
    mut infos: Vec<CoreInfo<'_>>,
    llc_keys: &[(usize, u32, LlcKey)],
    n_cpus: usize,
) -> (Vec<Core>, Vec<Cpu>) {
    let llc_index = |k: LlcKey| llc_keys.iter().position(|x| x.2 == k).unwrap_or(0);
    infos.sort_by_key(|i| (i.package, llc_index(i.llc_key()), i.desc.cpus.first()));
    let mut cores = Vec::with_capacity(infos.len());
    let mut cpus = Vec::with_capacity(n_cpus);
    for (id, i) in infos.iter().enumerate() {
        let llc = llc_index(i.llc_key());
        let mut dense = Vec::new();
        for os_id in i.desc.cpus.iter() {
            dense.push(cpus.len());
            cpus.push(Cpu {
                id: cpus.len(),
                os_id,
                core: id,
                llc,
                node: i.node,
                package: i.package,
                kind: None,
            });
        }
        cores.push(Core {
            id,
            os_id: i.desc.os_id,
            span: i.desc.cpus.clone(),
            cpus: dense,
            llc,
            node: i.node,
            package: i.package,
            caches: i.caches.clone(),
        });
    }
    (cores, cpus)
}

/// The LLC domains with their CPUs, cores and nodes.
fn llcs_of(llc_keys: &[(usize, u32, LlcKey)], cores: &[Core]) -> Vec<Llc> {
    let mut llcs: Vec<Llc> = llc_keys
        .iter()
        .enumerate()
        .map(|(id, &(package, _, k))| Llc {
            id,
            cache: match k {
                LlcKey::Cache(c) => Some(c),
                LlcKey::Package(_) => None,
            },
            span: CpuSet::new(),
            cores: Vec::new(),
            package,
            nodes: Vec::new(),
        })
        .collect();
    for c in cores {
        let l = &mut llcs[c.llc];
        l.span = l.span.union(&c.span);
        l.cores.push(c.id);
        if !l.nodes.contains(&c.node) {
            l.nodes.push(c.node);
        }
    }
    for l in &mut llcs {
        l.nodes.sort_unstable();
    }
    llcs
}

/// The most memory one node may have: 1 PiB, about 100 times today's
/// largest nodes (a few TiB), far below a wrapped `-1`.
pub(super) const MAX_NODE_MEMORY: u64 = 1 << 50;

/// The nodes with their locality, package, cores and LLC domains; a node
/// may name only a package the machine has, and a locality of its CPUs.
fn nodes_of(
    node_desc: &[NodeDesc],
    pkg_desc: &[PackageDesc],
    pkg_sets: &[&CpuSet],
    span: &CpuSet,
    cores: &[Core],
) -> Result<Vec<Node>, TopologyError> {
    let mut nodes: Vec<Node> = node_desc
        .iter()
        .enumerate()
        .map(|(id, n)| {
            // Unsaid, the node's own CPUs; where the backend places the
            // node (hwloc) and finds no allowed CPU near it, none, even if
            // CPUs were given it as their home ([`Node::locality`]).
            let locality = if n.locality.is_empty() && n.package.is_none() {
                n.cpus.clone()
            } else {
                n.locality.clone()
            };
            // The package the backend names (hwloc's: the node's own
            // ancestor), else the one holding the CPUs near the node (a
            // description written by hand). Named first: a node no
            // allowed CPU is near (a cpuset left it only its memory) may
            // be made the home of CPUs of another package whose own node
            // is not allowed (hwloc's `16amd64-4n4c-cgroup-distance-merge`:
            // package 0's CPUs, memory only from packages 2 and 3), and it
            // stays in its own.
            let package = n
                .package
                .and_then(|os| pkg_desc.iter().position(|p| p.os_id == os))
                .or_else(|| container(pkg_sets, &locality));
            Node {
                id,
                os_id: n.os_id,
                memory: n.memory,
                span: n.cpus.clone(),
                locality,
                cores: Vec::new(),
                llcs: Vec::new(),
                package,
            }
        })
        .collect();
    for n in node_desc {
        if let Some(os) = n.package {
            if !pkg_desc.iter().any(|p| p.os_id == os) {
                bail!(
                    "node {} names package {os}, which the machine lacks",
                    n.os_id
                );
            }
        }
        if n.memory > MAX_NODE_MEMORY {
            bail!(
                "node {} has {} bytes of memory, more than any machine has (at most {} \
                 TiB a node; hwloc writes an unknown size as 0, a negative one wraps)",
                n.os_id,
                n.memory,
                MAX_NODE_MEMORY >> 40
            );
        }
        if !n.locality.is_subset(span) {
            bail!(
                "node {}'s locality {} holds CPUs the machine lacks",
                n.os_id,
                n.locality
            );
        }
    }
    for c in cores {
        nodes[c.node].cores.push(c.id);
        if !nodes[c.node].llcs.contains(&c.llc) {
            nodes[c.node].llcs.push(c.llc);
        }
    }
    Ok(nodes)
}

/// The packages with their cores, LLC domains and nodes; every package
/// has a CPU or a memory node.
fn packages_of(
    pkg_desc: &[PackageDesc],
    cores: &[Core],
    llcs: &[Llc],
    nodes: &[Node],
) -> Result<Vec<Package>, TopologyError> {
    let mut packages: Vec<Package> = pkg_desc
        .iter()
        .enumerate()
        .map(|(id, p)| Package {
            id,
            os_id: p.os_id,
            span: p.cpus.clone(),
            cores: Vec::new(),
            llcs: Vec::new(),
            nodes: Vec::new(),
        })
        .collect();
    for c in cores {
        packages[c.package].cores.push(c.id);
    }
    for l in llcs {
        packages[l.package].llcs.push(l.id);
    }
    for n in nodes {
        if let Some(p) = n.package {
            packages[p].nodes.push(n.id);
        }
    }
    if let Some(p) = packages
        .iter()
        .find(|p| p.span.is_empty() && p.nodes.is_empty())
    {
        bail!("package {} has no CPU and no memory node", p.os_id);
    }
    Ok(packages)
}

/// CPU kinds of a hybrid machine (disjoint, covering every CPU when there
/// are any), each CPU told its kind.
fn cpu_kinds_of(
    kinds: &[CpuKindDesc],
    span: &CpuSet,
    cpus: &mut [Cpu],
) -> Result<Vec<CpuKind>, TopologyError> {
    let kind_span = disjoint_union(
        "CPU kind",
        kinds.iter().enumerate().map(|(i, k)| (i as u32, &k.cpus)),
    )?;
    if !kinds.is_empty() && kind_span != *span {
        bail!("CPU kinds cover {} but the machine has {}", kind_span, span);
    }
    let cpu_kinds: Vec<CpuKind> = kinds
        .iter()
        .enumerate()
        .map(|(id, k)| CpuKind {
            id,
            name: k.name.clone(),
            span: k.cpus.clone(),
        })
        .collect();
    for cpu in cpus {
        cpu.kind = cpu_kinds.iter().position(|k| k.span.contains(cpu.os_id));
    }
    Ok(cpu_kinds)
}
