//! \[Bae12\] §1's two mappings, computed from
//! the topology for any number of sockets: "a local mapping is a
//! non-overlapping mapping of virtual cores onto physical cores such that
//! the minimum number of sockets is used. An interleaved mapping is a
//! non-overlapping mapping in which the maximum number of sockets is
//! used." Local fills a socket's hardware threads core by core (the paper
//! puts 8 vcores on one E5620's 8 hardware threads, §6); interleaved deals
//! vcores round-robin over the sockets, one per physical core before any
//! core gets a second.
//!
//! Several groups are laid out together: both mappings are computed over
//! the CPUs no other group of this policy holds, so that no two groups
//! are pinned onto the same CPUs while others sit free (the paper runs one
//! VM at a time, §6; its mappings are non-overlapping within a VM, and
//! here between VMs too).

use numaplace_model::{Cpu, CpuSet, Node, Topology};

use super::models::Mapping;

/// \[Bae12\]'s sockets on this machine: each a memory controller with
/// the cores beside it, what the local mapping fills one at a time and
/// the interleaved mapping deals over. The paper's sockets are packages
/// (§2, two of them). On a machine of one package whose nodes have CPUs
/// of their own (sub-NUMA clustering, a package of several dies), the
/// package leaves nothing to choose (both mappings are the whole
/// machine, and a group laid anywhere on it was as often as not a node
/// away from the memory it had touched: mix:57083, a 2-node package, 9 %
/// slower than under Linux), so its nodes are the sockets. Where there
/// are several packages, each is a socket even if it holds several
/// nodes: a group held in one package keeps its traffic off the links
/// between them, and nodes of a few cores each would split every group
/// over several (measured: sockets made of nodes there took
/// adaptive-mapping's mean over 100 generated mixes from -5.1 % to
/// -3.7 % against Linux; mix:57071 lost all of a 93 % gain).
#[derive(Debug, Clone, Copy)]
pub struct Sockets<'t> {
    t: &'t Topology,
    by_node: bool,
}

impl<'t> Sockets<'t> {
    /// The sockets of `t`.
    pub fn of(t: &'t Topology) -> Sockets<'t> {
        let by_node = t.packages().len() < 2 && t.cpu_nodes().count() > 1;
        Sockets { t, by_node }
    }

    /// How many there are (dense ids `0..len`; a CPU-less node's id, where
    /// sockets are nodes, holds no core).
    pub fn len(&self) -> usize {
        if self.by_node {
            self.t.nodes().len()
        } else {
            self.t.packages().len()
        }
    }

    /// Whether the machine has none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Socket `s`'s CPUs (kernel ids).
    pub fn span(&self, s: usize) -> &'t CpuSet {
        if self.by_node {
            &self.t.nodes()[s].span
        } else {
            &self.t.packages()[s].span
        }
    }

    /// Socket `s`'s cores (dense ids).
    pub fn cores(&self, s: usize) -> &'t [usize] {
        if self.by_node {
            &self.t.nodes()[s].cores
        } else {
            &self.t.packages()[s].cores
        }
    }

    /// The socket of a CPU.
    pub fn of_cpu(&self, cpu: &Cpu) -> usize {
        if self.by_node { cpu.node } else { cpu.package }
    }

    /// The socket whose controller a node's memory is behind; `None` for
    /// a node beside no CPU.
    pub fn of_node(&self, n: &Node) -> Option<usize> {
        if self.by_node {
            (!n.span.is_empty()).then_some(n.id)
        } else {
            n.package
        }
    }
}

/// Per vcore (in order), the CPU (kernel id) it goes on, and per physical
/// core used, the vcores on it. `sockets` is the package order to fill
/// (the one holding the memory first); `None` when the machine has fewer
/// CPUs than vcores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The CPUs (kernel ids) the group's vcores go to, in order.
    pub cpus: Vec<u32>,
    /// Vcore indices sharing each used physical core.
    pub cores: Vec<Vec<usize>>,
    /// Sockets used (dense ids of [`Sockets`]: packages, or nodes where
    /// a package holds several).
    pub sockets: Vec<usize>,
}

/// One physical core as a layout sees it: its hardware threads no other
/// group holds, and how many of its hardware threads other groups hold.
#[derive(Debug, Clone)]
struct FreeCore {
    cpus: Vec<u32>,
    held: usize,
}

/// Sockets ([`Sockets`], dense ids) with their cores' CPUs (kernel ids,
/// in core order) but those `taken`, in the given preference order, then
/// the rest.
fn package_cores(t: &Topology, first: &[usize], taken: &CpuSet) -> Vec<(usize, Vec<FreeCore>)> {
    let sockets = Sockets::of(t);
    // `first` names a socket once per node of it that holds memory.
    let mut order: Vec<usize> = Vec::new();
    for &p in first {
        if p < sockets.len() && !order.contains(&p) {
            order.push(p);
        }
    }
    // The rest, those with the most CPUs no other group holds first: a
    // group with no memory resident yet goes to an idle package before
    // the siblings of another group's cores (mix:90, westmere-2s: a
    // 4-vcore VM laid on the free hardware threads of a 3-thread process's
    // cores beside an idle socket, 7.8 % slower than under Linux).
    let free = |p: usize| {
        sockets
            .span(p)
            .iter()
            .filter(|c| !taken.contains(*c))
            .count()
    };
    let mut rest: Vec<usize> = (0..sockets.len()).filter(|p| !order.contains(p)).collect();
    rest.sort_by_key(|&p| (std::cmp::Reverse(free(p)), p));
    order.extend(rest);
    order
        .into_iter()
        .map(|p| {
            let cores = sockets
                .cores(p)
                .iter()
                .map(|&c| {
                    let (held, cpus): (Vec<u32>, Vec<u32>) = t.cores()[c]
                        .span
                        .iter()
                        .partition(|cpu| taken.contains(*cpu));
                    FreeCore {
                        cpus,
                        held: held.len(),
                    }
                })
                .filter(|c| !c.cpus.is_empty())
                .collect();
            (p, cores)
        })
        .filter(|(_, c): &(usize, Vec<FreeCore>)| !c.is_empty())
        .collect()
}

/// The layout of `vcores` vcores in `mapping` on the CPUs not `taken`
/// (held by other groups), filling packages in `prefer` order first;
/// `None` when fewer CPUs than vcores are free.
pub fn layout(
    t: &Topology,
    mapping: Mapping,
    vcores: usize,
    prefer: &[usize],
    taken: &CpuSet,
) -> Option<Layout> {
    let pkgs = package_cores(t, prefer, taken);
    let total: usize = pkgs.iter().flat_map(|(_, c)| c).map(|c| c.cpus.len()).sum();
    if vcores == 0 || vcores > total {
        return None;
    }
    let mut out = Layout {
        cpus: Vec::with_capacity(vcores),
        cores: Vec::new(),
        sockets: Vec::new(),
    };
    match mapping {
        Mapping::Local => {
            // The fewest packages: each filled before the next, and
            // within one, a hardware thread of every core before any core
            // gets a second, so vcores share a core only when the package
            // has fewer cores than vcores (the paper's 8 vcores on an
            // E5620's 4 cores, §6).
            for (p, cores) in &pkgs {
                if out.cpus.len() == vcores {
                    break;
                }
                out.sockets.push(*p);
                let mut on_core = vec![Vec::new(); cores.len()];
                for (core, cpu) in smt_last(cores) {
                    if out.cpus.len() == vcores {
                        break;
                    }
                    on_core[core].push(out.cpus.len());
                    out.cpus.push(cpu);
                }
                out.cores
                    .extend(on_core.into_iter().filter(|v| !v.is_empty()));
            }
        }
        Mapping::Interleaved => {
            let used = pkgs.len().min(vcores);
            // Slots per package: first hardware thread of every core, then
            // the second ones, and so on.
            let slots: Vec<Vec<(usize, u32)>> = pkgs[..used]
                .iter()
                .map(|(_, cores)| smt_last(cores))
                .collect();
            let mut next = vec![0usize; used];
            let mut on_core: Vec<Vec<Vec<usize>>> = pkgs[..used]
                .iter()
                .map(|(_, c)| vec![Vec::new(); c.len()])
                .collect();
            let mut p = 0;
            while out.cpus.len() < vcores {
                if next[p] < slots[p].len() {
                    let (core, cpu) = slots[p][next[p]];
                    next[p] += 1;
                    on_core[p][core].push(out.cpus.len());
                    out.cpus.push(cpu);
                }
                p = (p + 1) % used;
            }
            for (k, (pkg, _)) in pkgs[..used].iter().enumerate() {
                if next[k] > 0 {
                    out.sockets.push(*pkg);
                }
                out.cores
                    .extend(on_core[k].drain(..).filter(|v| !v.is_empty()));
            }
        }
    }
    Some(out)
}

/// `layout` with only the vcores still running, each on the CPU it holds
/// (`cpus`, kernel ids, in vcore order, each one of `layout`'s): a thread
/// that ends leaves its CPU free and the others stay where they are,
/// instead of every later vcore moving up a slot. `None` unless each of
/// `cpus` is a distinct CPU of `layout`.
pub fn survivors(t: &Topology, layout: &Layout, cpus: &[u32]) -> Option<Layout> {
    let mut seen = CpuSet::new();
    for &c in cpus {
        if !layout.cpus.contains(&c) || seen.contains(c) {
            return None;
        }
        seen.insert(c);
    }
    of_cpus(t, &layout.sockets, cpus.to_vec())
}

/// `layout`'s CPUs dealt to the vcores so that as few threads move as
/// can be: each vcore (in order, `current`: the CPU its thread last ran
/// on) keeps its CPU where that is one of the layout's, else takes one on
/// its own node (where its first-touched memory is), else what is left.
/// The mappings say how many vcores go on each package and core, not
/// which: dealt in vcore order, a process's threads changed nodes away
/// from the memory each had touched (mix:53054, 12 threads on a
/// 2-package machine: 8 moved across nodes, 20 % slower than Linux).
pub fn matched(t: &Topology, layout: &Layout, current: &[Option<u32>]) -> Layout {
    let node = |c: u32| t.cpu_by_os_id(c).map(|x| x.node);
    let mut free = layout.cpus.clone();
    let mut out: Vec<Option<u32>> = vec![None; layout.cpus.len()];
    let mut take = |out: &mut Vec<Option<u32>>, fits: &dyn Fn(usize, u32) -> bool| {
        for (v, slot) in out.iter_mut().enumerate() {
            if slot.is_none() {
                if let Some(i) = free.iter().position(|&c| fits(v, c)) {
                    *slot = Some(free.remove(i));
                }
            }
        }
    };
    let was = |v: usize| current.get(v).copied().flatten();
    take(&mut out, &|v, c| was(v) == Some(c));
    take(&mut out, &|v, c| {
        was(v).and_then(node).is_some_and(|n| node(c) == Some(n))
    });
    take(&mut out, &|_, _| true);
    let cpus: Vec<u32> = out.into_iter().flatten().collect();
    of_cpus(t, &layout.sockets, cpus).unwrap_or_else(|| layout.clone())
}

/// The layout of vcores on `cpus` (kernel ids, in vcore order): the vcores
/// sharing each physical core, and which of `packages` they use; `None`
/// where a CPU is not the machine's.
fn of_cpus(t: &Topology, packages: &[usize], cpus: Vec<u32>) -> Option<Layout> {
    let sockets = Sockets::of(t);
    let mut cores: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut used = Vec::new();
    for (v, &c) in cpus.iter().enumerate() {
        let x = t.cpu_by_os_id(c)?;
        used.push(sockets.of_cpu(x));
        match cores.iter_mut().find(|(k, _)| *k == x.core) {
            Some((_, on)) => on.push(v),
            None => cores.push((x.core, vec![v])),
        }
    }
    Some(Layout {
        cpus,
        cores: cores.into_iter().map(|(_, on)| on).collect(),
        sockets: (packages.iter().copied())
            .filter(|p| used.contains(p))
            .collect(),
    })
}

/// A package's (core, CPU) slots: the first hardware thread of every
/// core, then the second ones, and so on. A core another group already
/// runs on counts its held hardware threads first, so its free sibling
/// comes after every idle core's first thread: a group is put beside
/// another group's vcore only when no whole core is left (the siblings
/// would share the core's pipelines and caches, which neither mapping
/// of \[Bae12\] §1 intends).
fn smt_last(cores: &[FreeCore]) -> Vec<(usize, u32)> {
    let width = cores
        .iter()
        .map(|c| c.held + c.cpus.len())
        .max()
        .unwrap_or(0);
    (0..width)
        .flat_map(|h| {
            cores.iter().enumerate().filter_map(move |(i, c)| {
                h.checked_sub(c.held)
                    .and_then(|k| c.cpus.get(k))
                    .map(|&cpu| (i, cpu))
            })
        })
        .collect()
}
