//! Topology discovery through hwloc (Debian's libhwloc, through the
//! `hwlocality` binding), from the live host, another machine's sysfs
//! snapshot, an hwloc XML file or a synthetic description.
//!
//! What hwloc reports is converted to a [`TopologyDesc`], repaired where the
//! machine's files contradict each other ([`repair`]: hwloc's answer is
//! followed, each repair reported) and validated by [`Topology::new`]. hwloc's view is the allowed one: CPUs offline or
//! outside our cgroup's cpuset are absent, memory nodes outside its mems
//! are absent. Nodes and packages whose memory we may use but none of whose
//! CPUs we may run on stay, as CPU-less.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hwlocality::Topology as Hw;
use hwlocality::object::TopologyObject;
use hwlocality::object::attributes::{CacheAssociativity, ObjectAttributes};
use hwlocality::object::distance::DistancesKind;
use hwlocality::object::types::{CacheType, ObjectType};
use numaplace_model::{
    CacheDesc, CacheKind, CoreDesc, CpuKindDesc, CpuSet, NodeDesc, PackageDesc, Topology,
    TopologyDesc, TopologyError,
};
use thiserror::Error;

use crate::sysroot::SysRoot;

pub mod repair;

pub use repair::{Repair, RepairKind};

/// Where to read a machine from.
#[derive(Debug, Clone)]
pub enum TopologySource {
    /// A Linux sysfs tree: the running machine's (`SysRoot::host()`) or
    /// another machine's snapshot, read through hwloc's fsroot.
    Sysfs(SysRoot),
    /// An hwloc XML export (`lstopo --of xml`).
    Xml(PathBuf),
    /// An hwloc synthetic description (`pack:2 l3:1 core:4 pu:2`).
    Synthetic(String),
}

impl TopologySource {
    /// A short name for people and for `Topology::source`.
    pub fn describe(&self) -> String {
        match self {
            TopologySource::Sysfs(r) if r.is_host() => "host".into(),
            TopologySource::Sysfs(r) => format!("sysfs:{}", r.path().display()),
            TopologySource::Xml(p) => format!("xml:{}", p.display()),
            TopologySource::Synthetic(s) => format!("synthetic:{s}"),
        }
    }
}

/// Why a machine's topology could not be had.
#[derive(Debug, Error)]
pub enum DiscoveryError {
    #[error("hwloc could not read {what}: {detail}")]
    /// hwloc failed.
    Hwloc {
        /// What hwloc was doing.
        what: String,
        /// The reason, in words.
        detail: String,
    },
    #[error("{path}: cannot read: {detail}")]
    /// A snapshot could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The reason, in words.
        detail: String,
    },
    #[error(
        "{path}: hwloc rejected this XML file: {detail} (give a file written by `lstopo --of xml`)"
    )]
    /// hwloc refused the XML file.
    Xml {
        /// The file.
        path: PathBuf,
        /// The reason, in words.
        detail: String,
    },
    #[error("{path}: not read: {detail}; give a file written by `lstopo --of xml`")]
    /// The XML file is not one numaplace reads.
    XmlShape {
        /// The file.
        path: PathBuf,
        /// The reason, in words.
        detail: String,
    },
    #[error(
        "invalid synthetic topology {input:?}: {detail} (expected levels like \"pack:2 l3:1 core:4 pu:2\")"
    )]
    /// The synthetic description is not valid.
    Synthetic {
        /// The description given.
        input: String,
        /// The reason, in words.
        detail: String,
    },
    #[error("{source_name}: {error}")]
    /// What was read is not a machine numaplace can use.
    Inconsistent {
        /// Where it was read from.
        source_name: String,
        /// What is wrong with it.
        error: TopologyError,
    },
}

/// hwloc's Linux backend takes another root only from the `HWLOC_FSROOT`
/// environment variable, read while the topology loads. Loads are
/// serialised here so that variable is never seen half-set by another load.
static HWLOC_LOAD: Mutex<()> = Mutex::new(());

/// Environment variables through which hwloc would read something other
/// than the machine it runs on.
const HWLOC_REDIRECTS: [&str; 4] = [
    "HWLOC_FSROOT",
    "HWLOC_XMLFILE",
    "HWLOC_SYNTHETIC",
    "HWLOC_COMPONENTS",
];

/// A machine as discovered, with what discovery had to repair in what
/// hwloc read (empty when the machine's files agree with each other).
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The machine.
    pub topology: Topology,
    /// What was contradictory in what hwloc read, and what discovery did.
    pub repairs: Vec<Repair>,
}

/// Reads the machine `source` names, and says what it repaired: the caller
/// reports each repair once (see [`repair`]).
pub fn discover_repaired(source: &TopologySource) -> Result<Discovered, DiscoveryError> {
    let name = source.describe();
    let hw = load(source)?;
    let sysfs = match source {
        TopologySource::Sysfs(r) => Some(r.clone()),
        _ => None,
    };
    let (desc, repairs) = convert(&hw, name.clone(), sysfs.as_ref());
    let topology = Topology::new(desc).map_err(|error| DiscoveryError::Inconsistent {
        source_name: name,
        error,
    })?;
    Ok(Discovered { topology, repairs })
}

/// Reads the machine `source` names; each repair is logged as a warning.
pub fn discover(source: &TopologySource) -> Result<Topology, DiscoveryError> {
    let d = discover_repaired(source)?;
    for r in &d.repairs {
        tracing::warn!("{}: {r}", source.describe());
    }
    Ok(d.topology)
}

fn hwloc_err(what: &str, e: impl std::fmt::Display) -> DiscoveryError {
    DiscoveryError::Hwloc {
        what: what.to_string(),
        detail: e.to_string(),
    }
}

fn load(source: &TopologySource) -> Result<Hw, DiscoveryError> {
    let _guard = HWLOC_LOAD.lock().unwrap_or_else(|p| p.into_inner());
    match source {
        TopologySource::Sysfs(root) if root.is_host() => {
            for var in HWLOC_REDIRECTS {
                if std::env::var_os(var).is_some() {
                    tracing::warn!(
                        "{var} is set: hwloc honours it, so the topology may not be this machine's"
                    );
                }
            }
            // hwloc reads HWLOC_XMLFILE itself, recursing per level: its
            // nesting is checked first, as for --xml.
            if let Some(path) = std::env::var_os("HWLOC_XMLFILE").map(PathBuf::from) {
                let refused = |detail: String| DiscoveryError::XmlShape {
                    path: path.clone(),
                    detail: format!("{detail} (HWLOC_XMLFILE)"),
                };
                let text = numaplace_io::bounded::read_to_string(
                    &path,
                    numaplace_io::bounded::XML_MAX_BYTES,
                )
                .map_err(|e| refused(e.to_string()))?;
                check_xml(&text).map_err(refused)?;
            }
            // The whole machine, not only the CPUs numaplace itself may
            // run on (hwloc's default when it runs in a cpuset: a
            // container, a systemd unit's AllowedCPUs=): the threads it
            // places are others', on CPUs their own cgroups allow.
            Hw::builder()
                .with_flags(hwlocality::topology::builder::BuildFlags::INCLUDE_DISALLOWED)
                .map_err(|e| hwloc_err("this machine's topology", e))?
                .build()
                .map_err(|e| hwloc_err("this machine's topology", e))
        }
        TopologySource::Sysfs(root) => {
            check_sysfs_lists(root)?;
            load_fsroot(root.path())
        }
        TopologySource::Xml(path) => {
            // Read it ourselves: the binding's file path API treats an
            // unreadable file as an internal error.
            let xml_err = |detail: String| DiscoveryError::Xml {
                path: path.clone(),
                detail,
            };
            let text =
                numaplace_io::bounded::read_to_string(path, numaplace_io::bounded::XML_MAX_BYTES)
                    .map_err(|e| DiscoveryError::Read {
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
            check_xml(&text).map_err(|detail| DiscoveryError::XmlShape {
                path: path.clone(),
                detail,
            })?;
            Hw::builder()
                .from_xml(&text)
                .map_err(|e| xml_err(e.to_string()))?
                .build()
                .map_err(|e| xml_err(e.to_string()))
        }
        TopologySource::Synthetic(text) => {
            // hwloc's own message is a bare errno; numaplace's parser of the
            // same syntax says what is wrong where it can.
            let refused = |e: &dyn std::fmt::Display| DiscoveryError::Synthetic {
                input: text.clone(),
                detail: match Topology::synthetic(text) {
                    Err(ours) => ours.reason,
                    Ok(_) => format!("hwloc refused it: {e}"),
                },
            };
            check_synthetic_size(text).map_err(|detail| DiscoveryError::Synthetic {
                input: text.clone(),
                detail,
            })?;
            Hw::builder()
                .from_synthetic(text)
                .map_err(|e| refused(&e))?
                .build()
                .map_err(|e| refused(&e))
        }
    }
}

/// The deepest nesting of `<object>` elements read from hwloc XML: a real
/// machine's is under 20 (machine, packages, groups, caches, cores, PUs);
/// hwloc's parser recurses per level, and 20,000 levels overflow its stack.
pub const MAX_XML_DEPTH: usize = 256;

/// What numaplace checks of hwloc XML before hwloc reads it: the nesting
/// ([`check_xml_depth`]), then that it is well-formed XML at all. hwloc's
/// own parser takes malformed text (`gp_index="7"8` inside a tag) and can
/// build a topology that breaks hwloc's invariants, which hwloc's
/// consistency check (run by the binding in debug builds) aborts on.
pub fn check_xml(text: &str) -> Result<(), String> {
    check_xml_depth(text)?;
    // lstopo writes a DOCTYPE (never fetched); a real machine's file is
    // tens of thousands of nodes, so entity expansion cannot go far.
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        nodes_limit: 4 << 20,
    };
    roxmltree::Document::parse_with_options(text, opts)
        .map(drop)
        .map_err(|e| format!("not well-formed XML: {e}"))
}

/// Refuses hwloc XML whose `<object>` elements nest deeper than
/// [`MAX_XML_DEPTH`], before hwloc parses it. A tag ends at the first `>`
/// outside a quoted attribute value (`name="/>"` neither closes nor hides
/// one); comments and CDATA sections are skipped whole.
pub fn check_xml_depth(text: &str) -> Result<(), String> {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while let Some(at) = b[i..].iter().position(|&c| c == b'<') {
        let start = i + at + 1;
        let tag = &b[start..];
        let skip_to = |close: &[u8]| {
            tag.windows(close.len())
                .position(|w| w == close)
                .map_or(tag.len(), |p| p + close.len())
        };
        if tag.starts_with(b"!--") {
            i = start + skip_to(b"-->");
            continue;
        }
        if tag.starts_with(b"![CDATA[") {
            i = start + skip_to(b"]]>");
            continue;
        }
        let mut quote = None;
        let end = tag
            .iter()
            .position(|&c| match quote {
                Some(q) => {
                    if c == q {
                        quote = None;
                    }
                    false
                }
                None if c == b'"' || c == b'\'' => {
                    quote = Some(c);
                    false
                }
                None => c == b'>',
            })
            .unwrap_or(tag.len());
        if tag.starts_with(b"/object") {
            depth = depth.saturating_sub(1);
        } else if tag.starts_with(b"object")
            && tag
                .get(6)
                .is_some_and(|c| c.is_ascii_whitespace() || *c == b'>' || *c == b'/')
            && !(end > 0 && tag[end - 1] == b'/')
        {
            depth += 1;
            if depth > MAX_XML_DEPTH {
                return Err(format!(
                    "<object> elements nest deeper than {MAX_XML_DEPTH} levels"
                ));
            }
        }
        i = start + end;
    }
    Ok(())
}

/// The most NUMA node ids Linux has (`CONFIG_NODES_SHIFT` is at most 10).
pub const MAX_NODE_ID: u32 = 1023;
/// The most PUs a synthetic description may make (as many as CPU ids).
pub const MAX_SYNTHETIC_PUS: u64 = numaplace_model::cpuset::MAX_CPU_ID as u64 + 1;

/// The lists hwloc's Linux backend sizes its arrays from, checked before
/// hwloc sees them: a hostile tree whose `node/online` says `4294967295`
/// makes hwloc's node count wrap to 0 and abort on an assertion.
fn check_sysfs_lists(root: &SysRoot) -> Result<(), DiscoveryError> {
    let lists: [(&str, u32); 5] = [
        ("sys/devices/system/node/online", MAX_NODE_ID),
        ("sys/devices/system/node/possible", MAX_NODE_ID),
        (
            "sys/devices/system/cpu/online",
            numaplace_model::cpuset::MAX_CPU_ID,
        ),
        (
            "sys/devices/system/cpu/possible",
            numaplace_model::cpuset::MAX_CPU_ID,
        ),
        (
            "sys/devices/system/cpu/present",
            numaplace_model::cpuset::MAX_CPU_ID,
        ),
    ];
    for (rel, max) in lists {
        let path = root.join(rel);
        let text = match numaplace_io::bounded::read_to_string(
            &path,
            numaplace_io::bounded::SYSFS_MAX_BYTES,
        ) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(DiscoveryError::Read {
                    path,
                    detail: e.to_string(),
                });
            }
        };
        // Snapshots may pad a file with NULs after its text (hwloc stops
        // at the first, and so does this check).
        let text = text.split('\0').next().unwrap_or("");
        let detail = match CpuSet::parse_list(text) {
            Err(e) => Some(format!(
                "not a list of ids 0..={max} in the kernel's syntax ({})",
                e.reason.replace("CPU ", "id ")
            )),
            Ok(set) => set
                .last()
                .filter(|&last| last > max)
                .map(|last| format!("id {last} is out of range: ids must be 0..={max}")),
        };
        if let Some(detail) = detail {
            return Err(DiscoveryError::Read { path, detail });
        }
    }
    Ok(())
}

/// Refuses a synthetic description that would make more than
/// [`MAX_SYNTHETIC_PUS`] PUs (hwloc builds every one, for minutes).
fn check_synthetic_size(text: &str) -> Result<(), String> {
    let mut total: u64 = 1;
    for tok in text.split_whitespace() {
        let Some((_, rest)) = tok.split_once(':') else {
            continue;
        };
        let count = rest.split('(').next().unwrap_or("");
        let Ok(n) = count.trim().parse::<u64>() else {
            continue;
        };
        total = total.saturating_mul(n);
        if total > MAX_SYNTHETIC_PUS {
            return Err(format!(
                "it makes more than {MAX_SYNTHETIC_PUS} PUs: the product of the counts must be 1..={MAX_SYNTHETIC_PUS}"
            ));
        }
    }
    Ok(())
}

/// Loads another root as `lstopo -i DIR` does: `HWLOC_FSROOT` set, the
/// topology marked as not this system so that hwloc's x86 backend does not
/// mix the CPUID of the machine we run on into the foreign tree.
/// Must be called with `HWLOC_LOAD` held.
fn load_fsroot(path: &Path) -> Result<Hw, DiscoveryError> {
    let what = format!("the sysfs tree at {}", path.display());
    let abs = std::fs::canonicalize(path).map_err(|e| hwloc_err(&what, e))?;
    let previous = std::env::var_os("HWLOC_FSROOT");
    // SAFETY: set_var races only with concurrent environment reads from C
    // code in other threads. hwloc is the only C code in this process that
    // reads HWLOC_* variables, and every hwloc load is serialised by
    // HWLOC_LOAD, which we hold. The binary discovers before it starts
    // threads; in tests, other threads only read the environment through
    // std, which takes its own lock.
    unsafe { std::env::set_var("HWLOC_FSROOT", &abs) };
    let result = Hw::builder()
        .without_component("x86")
        .map_err(|e| hwloc_err(&what, e))
        .and_then(|b| b.build().map_err(|e| hwloc_err(&what, e)));
    // SAFETY: as above.
    unsafe {
        match previous {
            Some(v) => std::env::set_var("HWLOC_FSROOT", v),
            None => std::env::remove_var("HWLOC_FSROOT"),
        }
    }
    let hw = result?;
    // When hwloc's Linux backend gives up on a tree (no CPU topology in it)
    // hwloc falls back to a backend that describes the running machine:
    // only a topology the Linux backend built is the tree's.
    let linux = hw
        .root_object()
        .info("Backend")
        .and_then(|v| v.to_str().ok())
        == Some("Linux");
    if hw.is_this_system() || !linux {
        return Err(hwloc_err(
            &what,
            "hwloc's Linux backend found no CPU topology in it \
             (sys/devices/system/cpu/cpuN/topology); give a snapshot of a Linux machine's /sys",
        ));
    }
    Ok(hw)
}

fn cpuset_of(obj: &TopologyObject) -> CpuSet {
    obj.cpuset()
        .map(|s| s.iter_set().map(|i| usize::from(i) as u32).collect())
        .unwrap_or_default()
}

fn os_id(obj: &TopologyObject) -> u32 {
    obj.os_index().unwrap_or(obj.logical_index()) as u32
}

/// The CPUs the kernel makes each node the home of (`nodeN/cpulist`), where
/// sysfs is at hand; hwloc gives a CPU-less node its neighbours' CPUs.
fn sysfs_node_cpus(root: &SysRoot, node: u32) -> Option<CpuSet> {
    let text = root
        .read_optional(&format!("sys/devices/system/node/node{node}/cpulist"))
        .ok()??;
    CpuSet::parse_list(&text).ok()
}

fn convert(hw: &Hw, source: String, sysfs: Option<&SysRoot>) -> (TopologyDesc, Vec<Repair>) {
    let all: CpuSet = hw
        .cpuset()
        .iter_set()
        .map(|i| usize::from(i) as u32)
        .collect();
    let mut repairs = Vec::new();

    // hwloc's packages, in its order; nodes find theirs by hwloc identity
    // (kernel ids may repeat until repaired).
    let hw_packages: Vec<&TopologyObject> = hw.objects_with_type(ObjectType::Package).collect();
    let mut packages: Vec<PackageDesc> = hw_packages
        .iter()
        .map(|p| PackageDesc {
            os_id: os_id(p),
            cpus: cpuset_of(p),
        })
        .collect();
    repairs.extend(repair::unique_package_ids(&mut packages));
    repairs.extend(repair::package_for_cpus_in_none(&all, &mut packages));
    let package_of = |n: &TopologyObject| -> Option<u32> {
        let p = n
            .ancestors()
            .find(|a| a.object_type() == ObjectType::Package)?;
        let i = hw_packages
            .iter()
            .position(|q| q.global_persistent_index() == p.global_persistent_index())?;
        Some(packages[i].os_id)
    };

    let cores = hw_cores(hw, &all);

    // Nodes: locality is hwloc's cpuset; home CPUs from sysfs where we
    // have it, otherwise each CPU goes to the most local node covering it
    // (smallest locality, then lowest kernel id: CPU nodes come first).
    let hw_nodes: Vec<&TopologyObject> = hw.objects_with_type(ObjectType::NUMANode).collect();
    let mut nodes: Vec<NodeDesc> = hw_nodes
        .iter()
        .map(|n| {
            let memory = match n.attributes() {
                Some(ObjectAttributes::NUMANode(a)) => a.local_memory().map_or(0, |m| m.get()),
                _ => 0,
            };
            let package = package_of(n);
            NodeDesc {
                os_id: os_id(n),
                memory,
                cpus: CpuSet::new(),
                locality: cpuset_of(n),
                package,
            }
        })
        .collect();
    let from_sysfs: Option<Vec<CpuSet>> = sysfs.and_then(|root| {
        nodes
            .iter()
            .map(|n| sysfs_node_cpus(root, n.os_id).map(|c| c.intersection(&all)))
            .collect()
    });
    match from_sysfs {
        Some(home) => {
            for (n, cpus) in nodes.iter_mut().zip(home) {
                n.cpus = cpus;
            }
        }
        None => {
            for cpu in all.iter() {
                let best = (0..nodes.len())
                    .filter(|&i| nodes[i].locality.contains(cpu))
                    .min_by_key(|&i| (nodes[i].locality.len(), nodes[i].os_id));
                if let Some(i) = best {
                    nodes[i].cpus.insert(cpu);
                }
            }
        }
    }

    repairs.extend(repair::adopt_cpus_in_no_node(&all, &packages, &mut nodes));

    let mut caches = hw_caches(hw);

    repairs.extend(repair::widen_caches_inside_cores(&cores, &mut caches));

    let distances = node_distances(hw, &nodes);

    let cpu_kinds = hw_cpu_kinds(hw);

    let desc = TopologyDesc {
        source,
        packages,
        cores,
        nodes,
        caches,
        distances,
        cpu_kinds,
    };
    (desc, repairs)
}

/// hwloc's cores with CPUs in `all`.
fn hw_cores(hw: &Hw, all: &CpuSet) -> Vec<CoreDesc> {
    let mut cores: Vec<CoreDesc> = hw
        .objects_with_type(ObjectType::Core)
        .map(|c| CoreDesc {
            os_id: os_id(c),
            cpus: cpuset_of(c),
        })
        .filter(|c| !c.cpus.is_empty())
        .collect();
    // PUs outside any core (synthetic or XML machines without cores) are
    // cores of their own.
    let in_cores = cores.iter().fold(CpuSet::new(), |a, c| a.union(&c.cpus));
    for pu in hw.objects_with_type(ObjectType::PU) {
        let id = os_id(pu);
        if all.contains(id) && !in_cores.contains(id) {
            cores.push(CoreDesc {
                os_id: id,
                cpus: [id].into_iter().collect(),
            });
        }
    }
    cores
}

/// hwloc's CPU caches with CPUs we may use.
fn hw_caches(hw: &Hw) -> Vec<CacheDesc> {
    let mut caches = Vec::new();
    for obj in hw.objects().filter(|o| o.object_type().is_cpu_cache()) {
        let Some(ObjectAttributes::Cache(attr)) = obj.attributes() else {
            continue;
        };
        let cpus = cpuset_of(obj);
        if cpus.is_empty() {
            // A cache none of whose CPUs we may use (cgroup) is no domain.
            continue;
        }
        caches.push(CacheDesc {
            level: attr.depth() as u8,
            kind: match attr.cache_type() {
                CacheType::Data => CacheKind::Data,
                CacheType::Instruction => CacheKind::Instruction,
                _ => CacheKind::Unified,
            },
            size: attr.size().map_or(0, |s| s.get()),
            line_size: attr.line_size().map_or(0, |l| l.get() as u32),
            ways: match attr.associativity() {
                CacheAssociativity::Ways(w) => w.get() as i32,
                CacheAssociativity::Full => -1,
                _ => 0,
            },
            cpus,
        });
    }
    caches
}

/// hwloc's CPU kinds where there are several (performance and efficiency
/// cores), named by their `CoreType`.
fn hw_cpu_kinds(hw: &Hw) -> Vec<CpuKindDesc> {
    match hw.cpu_kinds() {
        Ok(kinds) if kinds.len() > 1 => kinds
            .enumerate()
            .map(|(i, k)| CpuKindDesc {
                name: k
                    .infos
                    .iter()
                    .find(|info| info.name().to_str() == Ok("CoreType"))
                    .and_then(|info| info.value().to_str().ok())
                    .map_or_else(|| format!("kind{i}"), str::to_string),
                cpus: k.cpuset.iter_set().map(|i| usize::from(i) as u32).collect(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The NUMA distance matrix in the order of `nodes`: the operating
/// system's (ACPI SLIT) latency matrix if hwloc has one.
fn node_distances(hw: &Hw, nodes: &[NodeDesc]) -> Option<Vec<u32>> {
    let all = hw.distances(None).ok()?;
    let matrix = all
        .iter()
        .filter(|d| {
            d.objects()
                .all(|o| o.is_some_and(|o| o.object_type() == ObjectType::NUMANode))
        })
        .max_by_key(|d| {
            let k = d.kind();
            (
                k.contains(DistancesKind::FROM_OS),
                k.contains(DistancesKind::MEANS_LATENCY),
            )
        })?;
    let index: Vec<Option<u32>> = matrix.objects().map(|o| o.map(os_id)).collect();
    let n = nodes.len();
    let pos = |os: u32| index.iter().position(|&i| i == Some(os));
    let values = matrix.distances();
    let mut out = Vec::with_capacity(n * n);
    for a in nodes {
        for b in nodes {
            let (ia, ib) = (pos(a.os_id)?, pos(b.os_id)?);
            let v = values[ia * index.len() + ib];
            out.push(u32::try_from(v).ok()?);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine lstopo wrote passes; nesting past the limit is refused
    /// whether or not elements close, and a self-closed element or another
    /// tag adds no level.
    #[test]
    fn hwloc_xml_nesting_is_bounded_before_hwloc_reads_it() {
        let real = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hybrid-2p4e.xml"),
        )
        .unwrap();
        assert_eq!(check_xml_depth(&real), Ok(()));
        let nest = |n: usize, close: bool| {
            let mut s = "<topology>".to_string();
            s += &"<object type=\"Group\">".repeat(n);
            if close {
                s += &"</object>".repeat(n);
            }
            s + "</topology>"
        };
        assert_eq!(check_xml_depth(&nest(MAX_XML_DEPTH, true)), Ok(()));
        for close in [true, false] {
            let e = check_xml_depth(&nest(MAX_XML_DEPTH + 1, close)).unwrap_err();
            assert!(e.contains("nest deeper than 256"), "{e}");
        }
        let flat = "<object type=\"PU\"/><objectx>".repeat(10_000);
        assert_eq!(check_xml_depth(&flat), Ok(()));
        assert_eq!(check_xml_depth("<object"), Ok(()));
        assert_eq!(check_xml_depth("<"), Ok(()));
        // A `/>` or `>` inside a quoted value neither closes the element
        // nor ends its tag; a comment with a lone quote hides nothing.
        for open in [
            "<object name=\"/>\">",
            "<object name='a>b'>",
            "<!-- don't --><object type=\"Group\">",
            "<![CDATA[ \" ]]><object>",
        ] {
            let s = open.repeat(MAX_XML_DEPTH + 1);
            assert!(check_xml_depth(&s).is_err(), "{open}");
        }
        // Nesting within bounds, but not XML: refused as such.
        let cut = real.replacen("gp_index=\"7\">", "gp_index=\"7\"8", 1);
        assert_ne!(cut, real);
        let e = check_xml(&cut).unwrap_err();
        assert!(e.starts_with("not well-formed XML"), "{e}");
        assert_eq!(check_xml(&real), Ok(()));
        // Objects inside a comment add no level.
        let commented = format!("<!--{}-->", "<object>".repeat(MAX_XML_DEPTH + 1));
        assert_eq!(check_xml_depth(&commented), Ok(()));
    }
}
