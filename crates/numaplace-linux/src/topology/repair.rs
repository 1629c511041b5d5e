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

use numaplace_model::{CpuSet, NodeDesc, PackageDesc};

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
}

/// One repair of what hwloc read, in a sentence that says what was
/// contradictory and what discovery did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    pub kind: RepairKind,
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
            "CPUs {outside} are in no package in hwloc's view (the kernel's cache and package \
             lists contradict each other); counting them as a package of their own, {os_id}"
        ),
    })
}

/// CPUs whose own node is offline (the kernel links them to a node that is
/// not online, as on a machine with node 0 offline) are in no node of
/// hwloc's. Their memory comes from another node, as Linux falls back to
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
                "CPUs {cpus} are in no online NUMA node (their node is offline); \
                 counting them with node {os}, where their memory comes from"
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
