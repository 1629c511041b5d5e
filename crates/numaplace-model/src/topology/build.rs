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
    pub fn new(desc: TopologyDesc) -> Result<Topology, TopologyError> {
        if desc.packages.is_empty() || desc.cores.is_empty() {
            bail!("no package or no core: a machine has at least one CPU");
        }
        if desc.nodes.is_empty() {
            bail!("no NUMA node: even a uniform machine has node 0");
        }

        // Packages.
        let mut pkg_desc = desc.packages.clone();
        pkg_desc.sort_by_key(|p| p.os_id);
        if let Some(w) = pkg_desc.windows(2).find(|w| w[0].os_id == w[1].os_id) {
            bail!("package {} appears twice", w[0].os_id);
        }
        // CPU-less packages are checked once nodes are known.
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

        // Cores.
        let core_span = disjoint_union("core", desc.cores.iter().map(|c| (c.os_id, &c.cpus)))?;
        if core_span != span {
            bail!("cores cover CPUs {} but packages cover {}", core_span, span);
        }
        let pkg_sets: Vec<&CpuSet> = pkg_desc.iter().map(|p| &p.cpus).collect();

        // Nodes.
        let mut node_desc = desc.nodes.clone();
        let order: Vec<usize> = {
            let mut o: Vec<usize> = (0..node_desc.len()).collect();
            o.sort_by_key(|&i| node_desc[i].os_id);
            o
        };
        node_desc.sort_by_key(|n| n.os_id);
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
            if !n.cpus.is_subset(&span) {
                bail!(
                    "node {} has CPUs {} that no package has",
                    n.os_id,
                    n.cpus.difference(&span)
                );
            }
            node_span = node_span.union(&n.cpus);
        }
        if node_span != span {
            bail!("CPUs {} belong to no node", span.difference(&node_span));
        }
        let nn = node_desc.len();
        let (distances, distances_reported) = match &desc.distances {
            Some(d) => {
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
                // Reorder to the sorted node order.
                let mut m = vec![0; nn * nn];
                for (a, &oa) in order.iter().enumerate() {
                    for (b, &ob) in order.iter().enumerate() {
                        m[a * nn + b] = d[oa * nn + ob];
                    }
                }
                (m, true)
            }
            None => {
                let mut m = vec![REMOTE_DISTANCE; nn * nn];
                for a in 0..nn {
                    m[a * nn + a] = LOCAL_DISTANCE;
                }
                (m, false)
            }
        };

        // Caches: sorted by level, then kind, then lowest CPU.
        let mut cache_desc = desc.caches.clone();
        cache_desc.sort_by_key(|c| (c.level, c.kind, c.cpus.first()));
        for c in &cache_desc {
            if c.level == 0 {
                bail!("a cache of level 0 (levels start at 1)");
            }
            if c.cpus.is_empty() {
                bail!("an L{} cache has no CPU", c.level);
            }
            if !c.cpus.is_subset(&span) {
                bail!(
                    "an L{} cache holds CPUs {} the machine lacks",
                    c.level,
                    c.cpus.difference(&span)
                );
            }
            if container(&pkg_sets, &c.cpus).is_none() {
                bail!("the L{} cache of CPUs {} spans packages", c.level, c.cpus);
            }
        }
        // Caches of one level and kind must not overlap (sorted: compare within a group).
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
        let caches: Vec<Cache> = cache_desc
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
            .collect();

        // Per core: package, home node, data/unified caches, LLC cache.
        struct CoreInfo<'a> {
            desc: &'a CoreDesc,
            package: usize,
            node: usize,
            caches: Vec<usize>,
            llc_cache: Option<usize>,
        }
        let node_sets: Vec<&CpuSet> = node_desc.iter().map(|n| &n.cpus).collect();
        let mut infos = Vec::with_capacity(desc.cores.len());
        for c in &desc.cores {
            let Some(package) = container(&pkg_sets, &c.cpus) else {
                bail!("core {} (CPUs {}) spans packages", c.os_id, c.cpus);
            };
            let Some(node) = container(&node_sets, &c.cpus) else {
                bail!("core {} (CPUs {}) spans NUMA nodes", c.os_id, c.cpus);
            };
            let mut mine = Vec::new();
            for cache in &caches {
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

        // LLC domains: one per outermost cache; cores without any cache
        // share one domain standing for their package.
        #[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
        enum LlcKey {
            Cache(usize),
            Package(usize),
        }
        let key_of = |i: &CoreInfo| match i.llc_cache {
            Some(c) => LlcKey::Cache(c),
            None => LlcKey::Package(i.package),
        };
        let mut llc_keys: Vec<(usize, u32, LlcKey)> = Vec::new();
        {
            let mut seen = BTreeSet::new();
            for i in &infos {
                let k = key_of(i);
                if seen.insert(k) {
                    let first = match k {
                        LlcKey::Cache(c) => caches[c].span.first(),
                        LlcKey::Package(p) => pkg_sets[p].first(),
                    };
                    llc_keys.push((i.package, first.unwrap_or(0), k));
                }
            }
            llc_keys.sort();
        }
        // A cache-less domain must not overlap a cached one (it would, if
        // part of a package reported caches and part did not: then the
        // domain is the rest of the package).
        let llc_index = |k: LlcKey| llc_keys.iter().position(|x| x.2 == k).unwrap_or(0);

        // Core order: package, LLC, lowest CPU.
        infos.sort_by_key(|i| (i.package, llc_index(key_of(i)), i.desc.cpus.first()));
        let mut cores = Vec::with_capacity(infos.len());
        let mut cpus = Vec::with_capacity(span.len());
        for (id, i) in infos.iter().enumerate() {
            let llc = llc_index(key_of(i));
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
        for c in &cores {
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

        let mut nodes: Vec<Node> = node_desc
            .iter()
            .enumerate()
            .map(|(id, n)| {
                let locality = if n.locality.is_empty() {
                    n.cpus.clone()
                } else {
                    n.locality.clone()
                };
                // The package holding the CPUs near the node (its own, for
                // an ordinary node), else the one the backend names.
                let package = container(&pkg_sets, &locality).or_else(|| {
                    n.package
                        .and_then(|os| pkg_desc.iter().position(|p| p.os_id == os))
                });
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
        for n in &node_desc {
            if let Some(os) = n.package
                && !pkg_desc.iter().any(|p| p.os_id == os)
            {
                bail!(
                    "node {} names package {os}, which the machine lacks",
                    n.os_id
                );
            }
            if !n.locality.is_subset(&span) {
                bail!(
                    "node {}'s locality {} holds CPUs the machine lacks",
                    n.os_id,
                    n.locality
                );
            }
        }
        for c in &cores {
            nodes[c.node].cores.push(c.id);
            if !nodes[c.node].llcs.contains(&c.llc) {
                nodes[c.node].llcs.push(c.llc);
            }
        }

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
        for c in &cores {
            packages[c.package].cores.push(c.id);
        }
        for l in &llcs {
            packages[l.package].llcs.push(l.id);
        }
        for n in &nodes {
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

        // CPU kinds (hybrid machines).
        let kind_span = disjoint_union(
            "CPU kind",
            desc.cpu_kinds
                .iter()
                .enumerate()
                .map(|(i, k)| (i as u32, &k.cpus)),
        )?;
        if !desc.cpu_kinds.is_empty() && kind_span != span {
            bail!("CPU kinds cover {} but the machine has {}", kind_span, span);
        }
        let cpu_kinds: Vec<CpuKind> = desc
            .cpu_kinds
            .iter()
            .enumerate()
            .map(|(id, k)| CpuKind {
                id,
                name: k.name.clone(),
                span: k.cpus.clone(),
            })
            .collect();
        for cpu in &mut cpus {
            cpu.kind = cpu_kinds.iter().position(|k| k.span.contains(cpu.os_id));
        }

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
