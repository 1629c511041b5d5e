//! The one place where discovery repairs what hwloc read.
//!
//! A machine's files sometimes contradict each other (an ia64 kernel gives
//! two packages one `physical_package_id`; a tree whose cache and package
//! lists overlap makes hwloc drop a package, leaving its CPUs in none).
//! hwloc still builds a topology from them, and `lstopo` shows it; the
//! model ([`numaplace_model::Topology::new`]) requires what every real
//! machine satisfies (unique package ids, every CPU in a package and a
//! node). Discovery never refuses a tree hwloc reads: it follows hwloc's
//! answer and, where that answer does not fit the model, changes the
//! description as little as it can, here, and says what it changed in a
//! [`Repair`] each. Callers print them (`numaplace topology` on stderr,
//! `numaplace run` in its log at start).
//!
//! Input that is no machine at all (no CPU, ids beyond Linux's range) is
//! not repaired: it is refused before hwloc sees it.

use numaplace_model::{CacheDesc, CoreDesc, CpuSet, NodeDesc, PackageDesc};

/// What kind of contradiction was repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepairKind {
    /// hwloc reports distinct packages with one kernel id; the later ones
    /// got free ids.
    DuplicatePackageId,
    /// hwloc puts some CPUs in no package; they became a package of their
    /// own.
    CpusInNoPackage,
    /// CPUs whose NUMA node is offline were counted with an online node.
    CpusInNoNode,
    /// Caches hwloc puts inside a core (one per hardware thread) were
    /// widened to the whole core.
    CacheInsideCore,
}

/// One repair of what hwloc read, in a sentence that says what was
/// contradictory and what discovery did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// What kind of repair.
    pub kind: RepairKind,
    /// The sentence.
    pub message: String,
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The lowest package id neither in `taken` nor in `packages`.
fn free_package_id(packages: &[PackageDesc], taken: &[u32]) -> u32 {
    (0..)
        .find(|id| !taken.contains(id) && !packages.iter().any(|p| p.os_id == *id))
        .unwrap_or(u32::MAX)
}

/// Packages hwloc tells apart (disjoint CPUs) but the kernel gives one id
/// (16ia64-8n2s: `physical_package_id` 0 for CPUs 0 and 1, which are not
/// core siblings). hwloc's packages stay; the first of each id keeps it,
/// each later one takes the lowest id no package has. Order is kept, so
/// indexes into `packages` stay valid.
pub fn unique_package_ids(packages: &mut [PackageDesc]) -> Option<Repair> {
    let mut seen: Vec<u32> = Vec::new();
    let mut renumbered: Vec<(u32, u32, CpuSet)> = Vec::new();
    let mut assigned: Vec<u32> = Vec::new();
    for i in 0..packages.len() {
        let id = packages[i].os_id;
        if !seen.contains(&id) {
            seen.push(id);
            continue;
        }
        let new = free_package_id(packages, &assigned);
        assigned.push(new);
        packages[i].os_id = new;
        renumbered.push((id, new, packages[i].cpus.clone()));
    }
    if renumbered.is_empty() {
        return None;
    }
    let list: Vec<String> = renumbered
        .iter()
        .map(|(old, new, cpus)| format!("{old} of CPUs {cpus} as {new}"))
        .collect();
    Some(Repair {
        kind: RepairKind::DuplicatePackageId,
        message: format!(
            "hwloc tells apart {} packages whose kernel id (physical_package_id) another \
             package has too; counting each as hwloc does, under a free id: package {}",
            renumbered.len(),
            list.join(", package ")
        ),
    })
}

/// CPUs that hwloc puts in no package. A machine without any package
/// information (some ARM and test trees) is one package 0 of all its CPUs,
/// which is no contradiction. Where hwloc has packages but leaves some CPUs
/// out (40intel64-4n10c+pci-conflicts: its cache and package lists
/// overlap, and hwloc drops a package), those CPUs become one package of
/// their own, under the lowest id no package has.
pub fn package_for_cpus_in_none(all: &CpuSet, packages: &mut Vec<PackageDesc>) -> Option<Repair> {
    let packaged = packages.iter().fold(CpuSet::new(), |a, p| a.union(&p.cpus));
    let outside = all.difference(&packaged);
    if outside.is_empty() {
        return None;
    }
    let os_id = free_package_id(packages, &[]);
    let had_packages = !packages.is_empty();
    packages.push(PackageDesc {
        os_id,
        cpus: outside.clone(),
    });
    had_packages.then(|| Repair {
        kind: RepairKind::CpusInNoPackage,
        message: format!(
            "CPUs {outside} are in no package in hwloc's view; counting them as a package of \
             their own, {os_id}"
        ),
    })
}

/// CPUs whose own node is offline (the kernel links them to a node that is
/// not online, as on a machine with node 0 offline) or outside our cpuset's
/// memory nodes (hwloc's `16amd64-4n4c-cgroup-distance-merge`) are in no
/// node of hwloc's. Their memory comes from another node, as Linux falls back to
/// the nearest node with memory: they are counted with a node that has
/// memory in their package if there is one, else with the first node that
/// has memory. One repair per adopting node.
pub fn adopt_cpus_in_no_node(
    all: &CpuSet,
    packages: &[PackageDesc],
    nodes: &mut [NodeDesc],
) -> Vec<Repair> {
    let homed = nodes.iter().fold(CpuSet::new(), |a, n| a.union(&n.cpus));
    let orphans = all.difference(&homed);
    if orphans.is_empty() || nodes.is_empty() {
        return Vec::new();
    }
    let mut adopted: Vec<(u32, CpuSet)> = Vec::new();
    for cpu in orphans.iter() {
        let package = packages
            .iter()
            .find(|p| p.cpus.contains(cpu))
            .map(|p| p.os_id);
        let has_memory = |n: &&NodeDesc| n.memory > 0;
        let pick = nodes
            .iter()
            .filter(has_memory)
            .find(|n| n.package.is_some() && n.package == package)
            .or_else(|| nodes.iter().find(has_memory))
            .or(nodes.first())
            .map(|n| n.os_id);
        if let Some(os) = pick {
            if let Some(n) = nodes.iter_mut().find(|n| n.os_id == os) {
                n.cpus.insert(cpu);
            }
            match adopted.iter_mut().find(|(o, _)| *o == os) {
                Some((_, s)) => s.insert(cpu),
                None => adopted.push((os, [cpu].into_iter().collect())),
            }
        }
    }
    adopted
        .into_iter()
        .map(|(os, cpus)| Repair {
            kind: RepairKind::CpusInNoNode,
            message: format!(
                "CPUs {cpus} are in no NUMA node we may use (their node is offline, or \
                 outside the memory nodes our cgroup's cpuset allows); counting them with node \
                 {os}, where their memory comes from"
            ),
        })
        .collect()
}

/// Caches hwloc puts inside a core: a tree whose cache list names one
/// hardware thread (`cpuN/cache/indexM/shared_cpu_list`) where the core
/// has several (`thread_siblings_list`) gets, from hwloc, an L1 per thread
/// below the core. The model shares caches between whole cores (a thread
/// is placed by its core), so the caches of one level and kind inside one
/// core become one cache of the whole core, as large as they are together.
/// hwloc's tree is nested, so a cache that meets a core and does not hold
/// it is inside it.
pub fn widen_caches_inside_cores(cores: &[CoreDesc], caches: &mut Vec<CacheDesc>) -> Vec<Repair> {
    let inside = |c: &CacheDesc| {
        cores
            .iter()
            .position(|core| c.cpus.is_subset(&core.cpus) && c.cpus != core.cpus)
    };
    // (core, level, kind) -> the widened cache and how many it replaced.
    let mut widened: Vec<(usize, CacheDesc, usize)> = Vec::new();
    let mut kept = Vec::with_capacity(caches.len());
    for c in caches.drain(..) {
        let Some(core) = inside(&c) else {
            kept.push(c);
            continue;
        };
        match widened
            .iter_mut()
            .find(|(k, w, _)| *k == core && w.level == c.level && w.kind == c.kind)
        {
            Some((_, w, n)) => {
                w.size += c.size;
                *n += 1;
            }
            None => {
                let cpus = cores[core].cpus.clone();
                widened.push((core, CacheDesc { cpus, ..c }, 1));
            }
        }
    }
    // One repair per level and kind, naming the cores.
    let mut repairs: Vec<(u8, String, CpuSet, usize)> = Vec::new();
    for (_, w, n) in &widened {
        let kind = format!("{:?}", w.kind).to_lowercase();
        match repairs
            .iter_mut()
            .find(|(l, k, _, _)| *l == w.level && *k == kind)
        {
            Some((_, _, cpus, count)) => {
                *cpus = cpus.union(&w.cpus);
                *count += n;
            }
            None => repairs.push((w.level, kind, w.cpus.clone(), *n)),
        }
    }
    kept.extend(widened.into_iter().map(|(_, w, _)| w));
    *caches = kept;
    repairs
        .into_iter()
        .map(|(level, kind, cpus, n)| Repair {
            kind: RepairKind::CacheInsideCore,
            message: format!(
                "{n} L{level} {kind} caches of CPUs {cpus} each hold part of a core's hardware \
                 threads in hwloc's view; counting one L{level} per core, of all its threads"
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(os_id: u32, cpus: &str) -> PackageDesc {
        PackageDesc {
            os_id,
            cpus: CpuSet::parse_list(cpus).unwrap(),
        }
    }

    #[test]
    fn repeated_package_ids_take_the_lowest_free_ones() {
        let mut p = vec![
            pkg(0, "0"),
            pkg(0, "1"),
            pkg(2, "2"),
            pkg(2, "3"),
            pkg(0, "4"),
        ];
        let r = unique_package_ids(&mut p).unwrap();
        let ids: Vec<u32> = p.iter().map(|p| p.os_id).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        assert_eq!(r.kind, RepairKind::DuplicatePackageId);
        assert!(r.message.contains("package 0 of CPUs 1 as 1"), "{r}");
        assert!(r.message.contains("package 0 of CPUs 4 as 4"), "{r}");
    }

    #[test]
    fn distinct_package_ids_are_left_alone() {
        let mut p = vec![pkg(3, "0-1"), pkg(1, "2-3")];
        assert_eq!(unique_package_ids(&mut p), None);
        assert_eq!(p, vec![pkg(3, "0-1"), pkg(1, "2-3")]);
    }

    #[test]
    fn cpus_outside_every_package_become_one() {
        let all = CpuSet::parse_list("0-7").unwrap();
        let mut p = vec![pkg(0, "0-1"), pkg(1, "2-3"), pkg(3, "4-5")];
        let r = package_for_cpus_in_none(&all, &mut p).unwrap();
        assert_eq!(p.last(), Some(&pkg(2, "6-7")));
        assert_eq!(r.kind, RepairKind::CpusInNoPackage);
        assert!(r.message.contains("CPUs 6-7"), "{r}");
    }

    fn cache(level: u8, size: u64, cpus: &str) -> CacheDesc {
        CacheDesc {
            level,
            kind: numaplace_model::CacheKind::Data,
            size,
            line_size: 64,
            ways: 8,
            cpus: CpuSet::parse_list(cpus).unwrap(),
        }
    }

    #[test]
    fn per_thread_caches_become_the_cores() {
        let cores = vec![
            CoreDesc {
                os_id: 0,
                cpus: CpuSet::parse_list("0,2").unwrap(),
            },
            CoreDesc {
                os_id: 1,
                cpus: CpuSet::parse_list("1,3").unwrap(),
            },
        ];
        let mut caches = vec![
            cache(1, 32, "0"),
            cache(1, 32, "2"),
            cache(1, 32, "1,3"),
            cache(2, 256, "0-3"),
        ];
        let r = widen_caches_inside_cores(&cores, &mut caches);
        let spans: Vec<(u8, u64, String)> = caches
            .iter()
            .map(|c| (c.level, c.size, c.cpus.to_string()))
            .collect();
        assert_eq!(
            spans,
            vec![
                (1, 32, "1,3".into()),
                (2, 256, "0-3".into()),
                (1, 64, "0,2".into())
            ]
        );
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, RepairKind::CacheInsideCore);
        assert!(
            r[0].message.starts_with("2 L1 data caches of CPUs 0,2 "),
            "{}",
            r[0]
        );
    }

    #[test]
    fn caches_of_whole_cores_are_left_alone() {
        let cores = vec![CoreDesc {
            os_id: 0,
            cpus: CpuSet::parse_list("0-1").unwrap(),
        }];
        let mut caches = vec![cache(1, 32, "0-1"), cache(3, 1024, "0-1")];
        let before = caches.clone();
        assert!(widen_caches_inside_cores(&cores, &mut caches).is_empty());
        assert_eq!(caches, before);
    }

    #[test]
    fn a_machine_without_packages_is_one_without_a_repair() {
        let all = CpuSet::parse_list("0-3").unwrap();
        let mut p = Vec::new();
        assert_eq!(package_for_cpus_in_none(&all, &mut p), None);
        assert_eq!(p, vec![pkg(0, "0-3")]);
        let mut whole = vec![pkg(0, "0-3")];
        assert_eq!(package_for_cpus_in_none(&all, &mut whole), None);
        assert_eq!(whole.len(), 1);
    }
}
