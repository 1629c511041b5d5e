//! Test support: run Debian hwloc's `lstopo-no-graphics` (hwloc 2.x) and boil
//! its XML export down to a small, comparable view of the topology.
//!
//! Include from an integration test with:
//!
//! ```ignore
//! #[path = "support/lstopo.rs"]
//! mod lstopo;
//! ```
//!
//! Only `std`, `roxmltree` (0.20) and `tempfile` (3) are used.
//!
//! Notes on what lstopo reports (hwloc 2.9, verified on the fixtures in
//! `tests/fixtures/sysfs/`):
//!
//! * `-i DIR` (forced with `--if fsroot`) makes hwloc treat the topology as
//!   "not this system", so the x86 CPUID backend is *not* used; setting
//!   `HWLOC_COMPONENTS=-x86` is unnecessary and actually harmful (lstopo then
//!   cannot force the linux component first and leaks the *host's* OSName,
//!   OSRelease, HostName... into the XML). We therefore strip every `HWLOC_*`
//!   variable from the child's environment.
//! * Disallowed (cgroup-restricted) PUs are *removed* (lstopo is run without
//!   `--disallowed`); the `cpuset` of the remaining objects only contains
//!   allowed PUs, while `complete_cpuset` still has everything. Packages / L3s
//!   / NUMA nodes whose CPUs are all disallowed but whose memory is allowed
//!   are kept with `cpuset="0x0"`; they are counted / listed here as-is (so
//!   `packages`, `l3`, `llc` may contain entries with no CPUs, and NUMA nodes
//!   may have empty `cpus`).
//! * Offline CPUs are absent entirely (not even in `complete_cpuset`), and an
//!   offline NUMA node is absent too.
//! * CPU-less NUMA nodes (e.g. PMEM / CXL nodes) are attached by hwloc to a
//!   parent object (often a `Group`) and get *that parent's* cpuset, so their
//!   `cpus` here are NOT empty even though sysfs `nodeN/cpulist` is empty.
//! * Distances come from `<distances2 type="NUMANode" indexing="os">`;
//!   the values are split over several `<u64values>` elements (and indexes
//!   may be split over several `<indexes>` elements); the `length` attribute
//!   is a *character* count, not an element count, and is ignored.
//!   Beware: `lstopo --distances` on the console labels rows/columns with
//!   os indexes in logical order but prints the matrix in os order, which
//!   is misleading when logical order != os order (e.g. nri-server).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The lstopo binary used by this module.
pub(crate) const LSTOPO: &str = "lstopo-no-graphics";

/// A reduced view of an hwloc topology, as exported by `lstopo --of xml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LstopoView {
    /// Number of `Package` objects (including ones with an empty cpuset).
    pub packages: usize,
    /// Number of `Core` objects.
    pub cores: usize,
    /// Each `Package`'s cpuset as sorted PU os indexes (empty ones kept);
    /// the list is sorted.
    pub package_cpus: Vec<Vec<u32>>,
    /// Each `Core`'s cpuset, the same way.
    pub core_cpus: Vec<Vec<u32>>,
    /// Every data/unified CPU cache as (level, sorted PU os indexes), in
    /// document order; instruction and memory-side caches are left out.
    pub caches: Vec<(u32, Vec<u32>)>,
    /// PU os_index list, sorted.
    pub pus: Vec<u32>,
    /// NUMA nodes, sorted by os_index.
    pub numa_nodes: Vec<NodeView>,
    /// Each L3 cache's cpuset as sorted PU os indexes; the list is sorted.
    pub l3: Vec<Vec<u32>>,
    /// Same for the highest-level data/unified CPU cache present (L3, or L2
    /// if there is no L3, ...); instruction caches are ignored. Memory-side
    /// caches (`MemCache`) are ignored. The list is sorted.
    pub llc: Vec<Vec<u32>>,
    /// NUMA latency distances from the OS (`distances2` of type NUMANode with
    /// a latency kind), if any.
    pub distances: Option<Distances>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeView {
    pub os_index: u32,
    /// hwloc `cpuset` of the node (see module docs for CPU-less nodes).
    pub cpus: Vec<u32>,
    /// `local_memory` attribute in bytes (0 if absent).
    pub local_memory: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Distances {
    /// NUMA node os indexes, in matrix order.
    pub nodes: Vec<u32>,
    /// Row-major `n * n` matrix.
    pub values: Vec<u64>,
}

impl Distances {
    /// Distance between NUMA nodes with os indexes `from` and `to`.
    pub(crate) fn get(&self, from: u32, to: u32) -> Option<u64> {
        let n = self.nodes.len();
        let i = self.nodes.iter().position(|&x| x == from)?;
        let j = self.nodes.iter().position(|&x| x == to)?;
        self.values.get(i * n + j).copied()
    }

    /// The matrix re-ordered so that `nodes` is sorted ascending.
    pub(crate) fn sorted_by_os_index(&self) -> Distances {
        let n = self.nodes.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| self.nodes[i]);
        let nodes = order.iter().map(|&i| self.nodes[i]).collect();
        let mut values = Vec::with_capacity(n * n);
        for &i in &order {
            for &j in &order {
                values.push(self.values[i * n + j]);
            }
        }
        Distances { nodes, values }
    }
}

/// Extracts a fixture tarball (`.tar.bz2` / `.tar.xz` / `.tar.gz` / `.tar`,
/// via the system `tar`, which auto-detects the compression) into `dir`, and
/// returns the root: the directory holding `sys/` (either `dir` itself or the
/// single wrapper directory inside it, whose name may differ from the
/// tarball's). An empty `proc/` is created beside `sys/` if absent (hwloc's
/// fsroot backend wants one). Panics with a clear message on failure.
pub(crate) fn extract_fixture(tarball: &Path, dir: &Path) -> PathBuf {
    assert!(
        tarball.is_file(),
        "fixture tarball {} does not exist",
        tarball.display()
    );
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let out = Command::new("tar")
        .arg("-xf")
        .arg(tarball)
        .arg("-C")
        .arg(dir)
        .arg("--no-same-owner")
        .output()
        .unwrap_or_else(|e| panic!("cannot run `tar` to extract {}: {e}", tarball.display()));
    assert!(
        out.status.success(),
        "`tar -xf {} -C {}` failed ({}): {}",
        tarball.display(),
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    let root = if dir.join("sys").is_dir() {
        dir.to_path_buf()
    } else {
        let entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .map(|e| e.expect("read_dir entry").path())
            .collect();
        let with_sys: Vec<&PathBuf> = entries
            .iter()
            .filter(|p| p.is_dir() && p.join("sys").is_dir())
            .collect();
        match with_sys.as_slice() {
            [one] => (*one).clone(),
            [] => panic!(
                "fixture {} has no sys/ directory at the top level or in a wrapper directory \
                 (top-level entries: {:?})",
                tarball.display(),
                entries
            ),
            many => panic!(
                "fixture {} has several wrapper directories holding sys/: {:?}",
                tarball.display(),
                many
            ),
        }
    };
    let proc_dir = root.join("proc");
    if !proc_dir.exists() {
        std::fs::create_dir_all(&proc_dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", proc_dir.display()));
    }
    root
}

/// Runs `lstopo-no-graphics --if fsroot -i ROOT --of xml` and returns the XML.
pub(crate) fn lstopo_xml(root: &Path) -> String {
    assert!(
        root.join("sys").is_dir(),
        "{} does not look like an fsroot (no sys/ directory)",
        root.display()
    );
    let root_str = root
        .to_str()
        .unwrap_or_else(|| panic!("non-UTF-8 fsroot path {}", root.display()));
    run_lstopo(&["--if", "fsroot", "-i", root_str, "--of", "xml"])
}

/// Runs lstopo on a fsroot and parses the XML into an [`LstopoView`].
pub(crate) fn lstopo_view(root: &Path) -> LstopoView {
    parse_lstopo_xml(&lstopo_xml(root))
}

/// Like [`lstopo_view`] but passing `--disallowed`, so that PUs / NUMA nodes
/// excluded by the fixture's cgroup are kept.
pub(crate) fn lstopo_view_disallowed(root: &Path) -> LstopoView {
    let root_str = root.to_str().expect("UTF-8 fsroot path");
    parse_lstopo_xml(&run_lstopo(&[
        "--if",
        "fsroot",
        "-i",
        root_str,
        "--disallowed",
        "--of",
        "xml",
    ]))
}

/// Same for a synthetic description, e.g. `"pack:2 l3:1 core:4 pu:2"`
/// (run as `lstopo-no-graphics --if synthetic -i INPUT --of xml`).
pub(crate) fn lstopo_view_input(input: &str) -> LstopoView {
    parse_lstopo_xml(&run_lstopo(&[
        "--if",
        "synthetic",
        "-i",
        input,
        "--of",
        "xml",
    ]))
}

/// Runs lstopo with `args` in a clean (`HWLOC_*`-free) environment and
/// returns its stdout. Panics with a clear message on failure.
pub(crate) fn run_lstopo(args: &[&str]) -> String {
    let mut cmd = Command::new(LSTOPO);
    cmd.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("HWLOC_") {
            cmd.env_remove(&k);
        }
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run `{LSTOPO}` (is Debian package hwloc-nox installed?): {e}")
    });
    assert!(
        out.status.success(),
        "`{LSTOPO} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("lstopo printed non-UTF-8 XML")
}

fn cache_level(ty: &str) -> Option<u32> {
    // hwloc 2.x: L1Cache..L5Cache are data/unified, L1iCache..L3iCache are
    // instruction caches; MemCache is a memory-side cache.
    let rest = ty.strip_prefix('L')?.strip_suffix("Cache")?;
    rest.parse().ok()
}

fn attr_u64(node: roxmltree::Node, name: &str) -> Option<u64> {
    node.attribute(name).map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|e| panic!("bad {name}={v:?} in lstopo XML: {e}"))
    })
}

fn attr_u32(node: roxmltree::Node, name: &str) -> Option<u32> {
    attr_u64(node, name).map(|v| u32::try_from(v).expect("u32 attribute"))
}

fn cpus_of(node: roxmltree::Node) -> Vec<u32> {
    node.attribute("cpuset")
        .map(parse_hwloc_bitmap)
        .unwrap_or_default()
}

/// Parses hwloc 2.x XML (as produced by `lstopo --of xml`) into a view.
pub(crate) fn parse_lstopo_xml(xml: &str) -> LstopoView {
    // roxmltree refuses DTDs unless allowed.
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, opts)
        .unwrap_or_else(|e| panic!("cannot parse lstopo XML: {e}"));
    let topo = doc.root_element();
    assert_eq!(
        topo.tag_name().name(),
        "topology",
        "lstopo XML root element is not <topology>"
    );

    let mut package_cpus = Vec::new();
    let mut core_cpus = Vec::new();
    let mut pus = Vec::new();
    let mut numa_nodes = Vec::new();
    // (level, cpus) of data/unified CPU caches.
    let mut caches: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut gp_to_os: HashMap<u64, u32> = HashMap::new();

    for obj in topo
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "object")
    {
        let ty = obj.attribute("type").unwrap_or("");
        match ty {
            "Package" => package_cpus.push(cpus_of(obj)),
            "Core" => core_cpus.push(cpus_of(obj)),
            "PU" => pus.push(attr_u32(obj, "os_index").expect("PU without os_index")),
            "NUMANode" => {
                let os_index = attr_u32(obj, "os_index").expect("NUMANode without os_index");
                if let Some(gp) = attr_u64(obj, "gp_index") {
                    gp_to_os.insert(gp, os_index);
                }
                numa_nodes.push(NodeView {
                    os_index,
                    cpus: cpus_of(obj),
                    local_memory: attr_u64(obj, "local_memory").unwrap_or(0),
                });
            }
            _ => {
                if let Some(level) = cache_level(ty) {
                    // cache_type: 0 unified, 1 data, 2 instruction.
                    if attr_u64(obj, "cache_type") != Some(2) {
                        caches.push((level, cpus_of(obj)));
                    }
                }
            }
        }
    }
    pus.sort_unstable();
    package_cpus.sort();
    core_cpus.sort();
    numa_nodes.sort_by_key(|n| n.os_index);

    let mut l3: Vec<Vec<u32>> = caches
        .iter()
        .filter(|(l, _)| *l == 3)
        .map(|(_, c)| c.clone())
        .collect();
    l3.sort();
    let mut llc: Vec<Vec<u32>> = match caches.iter().map(|(l, _)| *l).max() {
        Some(max) => caches
            .iter()
            .filter(|(l, _)| *l == max)
            .map(|(_, c)| c.clone())
            .collect(),
        None => Vec::new(),
    };
    llc.sort();

    let distances = parse_distances(topo, &gp_to_os);

    LstopoView {
        packages: package_cpus.len(),
        cores: core_cpus.len(),
        package_cpus,
        core_cpus,
        caches,
        pus,
        numa_nodes,
        l3,
        llc,
        distances,
    }
}

impl LstopoView {
    /// The last-level-cache domains as each PU sees them: for every PU, the
    /// cpuset of the outermost data/unified cache holding it (sorted,
    /// each once), and the PUs that no cache holds. On a machine whose
    /// caches are all of one depth this is `llc`; where some CPUs have a
    /// deeper cache than others it is not.
    pub(crate) fn outermost_caches(&self) -> (Vec<Vec<u32>>, Vec<u32>) {
        let mut domains: Vec<Vec<u32>> = Vec::new();
        let mut uncached = Vec::new();
        for &pu in &self.pus {
            let outermost = self
                .caches
                .iter()
                .filter(|(_, cpus)| cpus.contains(&pu))
                .max_by_key(|(level, _)| *level);
            match outermost {
                Some((_, cpus)) if !domains.contains(cpus) => domains.push(cpus.clone()),
                Some(_) => {}
                None => uncached.push(pu),
            }
        }
        domains.sort();
        (domains, uncached)
    }
}

fn split_text_children<T: std::str::FromStr>(el: roxmltree::Node, tag: &str) -> Vec<T>
where
    T::Err: std::fmt::Display,
{
    el.children()
        .filter(|c| c.is_element() && c.tag_name().name() == tag)
        .flat_map(|c| {
            c.text()
                .unwrap_or("")
                .split_whitespace()
                .map(|w| {
                    w.parse::<T>()
                        .unwrap_or_else(|e| panic!("bad <{tag}> entry {w:?}: {e}"))
                })
                .collect::<Vec<T>>()
        })
        .collect()
}

fn parse_distances(topo: roxmltree::Node, gp_to_os: &HashMap<u64, u32>) -> Option<Distances> {
    const KIND_FROM_OS: u64 = 1;
    const KIND_MEANS_LATENCY: u64 = 4;
    let candidates: Vec<roxmltree::Node> = topo
        .children()
        .filter(|n| {
            n.is_element()
                && n.tag_name().name() == "distances2"
                && n.attribute("type") == Some("NUMANode")
        })
        .filter(|n| {
            let kind = attr_u64(*n, "kind").unwrap_or(0);
            kind & KIND_MEANS_LATENCY != 0 && kind & KIND_FROM_OS != 0
        })
        .collect();
    let el = candidates
        .iter()
        .find(|n| n.attribute("name") == Some("NUMALatency"))
        .or_else(|| candidates.first())?;

    let n = attr_u64(*el, "nbobjs").expect("distances2 without nbobjs") as usize;
    let raw: Vec<u64> = split_text_children(*el, "indexes");
    let values: Vec<u64> = split_text_children(*el, "u64values");
    assert_eq!(
        raw.len(),
        n,
        "distances2: {} indexes for nbobjs={n}",
        raw.len()
    );
    assert_eq!(
        values.len(),
        n * n,
        "distances2: {} values for nbobjs={n}",
        values.len()
    );
    let nodes = match el.attribute("indexing").unwrap_or("os") {
        "os" => raw
            .iter()
            .map(|&i| u32::try_from(i).expect("u32 os index"))
            .collect(),
        "gp" => raw
            .iter()
            .map(|gp| {
                *gp_to_os.get(gp).unwrap_or_else(|| {
                    panic!("distances2 refers to unknown NUMANode gp_index {gp}")
                })
            })
            .collect(),
        other => panic!("unsupported distances2 indexing={other:?}"),
    };
    Some(Distances { nodes, values })
}

/// Parses an hwloc bitmap string as found in hwloc XML (`cpuset`,
/// `nodeset`, ...): comma-separated 32-bit hex chunks, most significant
/// first, e.g. `"0x000000ff,0xffffffff"` (bits 0..40) or `"0x0"` (empty).
/// hwloc writes all-zero words as empty chunks: `"0x00000002,,0x02000000"`
/// is bits 25 and 65.
/// Returns the set bits, sorted.
///
/// Infinite bitmaps (`"0xf...f"` prefix, meaning "all bits above the listed
/// chunks are set too") cannot be represented as a list: this function
/// PANICS on them. Use [`parse_hwloc_bitmap_ext`] to get the finite part and
/// an "infinite" flag instead.
pub(crate) fn parse_hwloc_bitmap(s: &str) -> Vec<u32> {
    let (bits, infinite) = parse_hwloc_bitmap_ext(s);
    assert!(
        !infinite,
        "hwloc bitmap {s:?} is infinite (0xf...f prefix); use parse_hwloc_bitmap_ext"
    );
    bits
}

/// Like [`parse_hwloc_bitmap`] but accepts infinite bitmaps: returns the set
/// bits among the explicitly listed chunks, plus `true` if the bitmap has a
/// `0xf...f` prefix (every bit at index `>= 32 * listed_chunks` is also set).
/// `"0xf...f"` alone is the full bitmap: `(vec![], true)`.
pub(crate) fn parse_hwloc_bitmap_ext(s: &str) -> (Vec<u32>, bool) {
    let s = s.trim();
    assert!(!s.is_empty(), "empty hwloc bitmap string");
    let mut chunks: Vec<&str> = s.split(',').map(str::trim).collect();
    let infinite = chunks[0].eq_ignore_ascii_case("0xf...f");
    if infinite {
        chunks.remove(0);
    }
    let n = chunks.len();
    let mut bits = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let hex = chunk
            .strip_prefix("0x")
            .or_else(|| chunk.strip_prefix("0X"))
            .unwrap_or(chunk);
        if chunk.is_empty() {
            // hwloc writes all-zero 32-bit words as empty chunks, e.g.
            // "0x00000002,,0x02000000".
            continue;
        }
        assert!(
            !hex.is_empty() && hex.len() <= 8,
            "bad chunk {chunk:?} in hwloc bitmap {s:?}"
        );
        let v = u32::from_str_radix(hex, 16)
            .unwrap_or_else(|e| panic!("bad chunk {chunk:?} in hwloc bitmap {s:?}: {e}"));
        // Chunk i (from the left) holds bits [32*(n-1-i), 32*(n-i)).
        let base = 32 * (n - 1 - i) as u32;
        for b in 0..32 {
            if v & (1 << b) != 0 {
                bits.push(base + b);
            }
        }
    }
    bits.sort_unstable();
    (bits, infinite)
}

/// Formats a sorted index list compactly, e.g. `0-3,8,10-11` (for messages).
pub(crate) fn fmt_list(v: &[u32]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

impl std::fmt::Display for LstopoView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "packages={} cores={} pus=[{}] ({})",
            self.packages,
            self.cores,
            fmt_list(&self.pus),
            self.pus.len()
        )?;
        for n in &self.numa_nodes {
            writeln!(
                f,
                "  node{}: cpus=[{}] mem={}",
                n.os_index,
                fmt_list(&n.cpus),
                n.local_memory
            )?;
        }
        let l3: Vec<String> = self
            .l3
            .iter()
            .map(|c| format!("[{}]", fmt_list(c)))
            .collect();
        let llc: Vec<String> = self
            .llc
            .iter()
            .map(|c| format!("[{}]", fmt_list(c)))
            .collect();
        writeln!(f, "  l3={}", l3.join(" "))?;
        writeln!(f, "  llc={}", llc.join(" "))?;
        match &self.distances {
            None => writeln!(f, "  distances=none"),
            Some(d) => {
                writeln!(f, "  distances nodes={:?}", d.nodes)?;
                let n = d.nodes.len();
                for r in 0..n {
                    writeln!(f, "    {:?}", &d.values[r * n..(r + 1) * n])?;
                }
                Ok(())
            }
        }
    }
}

/// Where the real-machine snapshots are: `tests/fixtures/sysfs/` in this
/// repository, or `NUMAPLACE_SYSFS_FIXTURES`.
pub(crate) fn fixtures_dir() -> PathBuf {
    let dir = std::env::var_os("NUMAPLACE_SYSFS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| own_fixtures_dir().join("sysfs"));
    assert!(
        dir.is_dir(),
        "fixture directory {} is missing: the snapshots ship with the repository in \
         tests/fixtures/sysfs (or set NUMAPLACE_SYSFS_FIXTURES to such a directory)",
        dir.display()
    );
    dir
}

/// More snapshots where a directory of them is given
/// (`NUMAPLACE_EXTRA_SYSFS_FIXTURES`, laid out as `tests/fixtures/sysfs`).
/// They may add machines; the tests never need them.
pub(crate) fn extra_fixtures_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("NUMAPLACE_EXTRA_SYSFS_FIXTURES")?);
    dir.is_dir().then_some(dir)
}

/// The snapshot tarballs directly in `dir`, sorted by path.
pub(crate) fn tarballs_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".tar.bz2") || n.ends_with(".tar.xz") || n.ends_with(".tar.gz")
        })
        .collect();
    out.sort();
    out
}

/// The folders of snapshots inside a fixture directory: the directory
/// itself and its `hwloc-linux/` (the rest of hwloc's Linux test trees).
pub(crate) const SNAPSHOT_SUBDIRS: [&str; 2] = ["", "hwloc-linux"];

/// Every snapshot tarball: the repository's (`tests/fixtures/sysfs/` and
/// its `hwloc-linux/`), then those of `extra_fixtures_dir()` (and its
/// `hwloc-linux/`) whose file name the repository lacks.
pub(crate) fn all_fixture_tarballs() -> Vec<PathBuf> {
    let mut all = Vec::new();
    let dirs = std::iter::once(fixtures_dir()).chain(extra_fixtures_dir());
    for dir in dirs {
        for sub in SNAPSHOT_SUBDIRS {
            let d = dir.join(sub);
            if !d.is_dir() {
                continue;
            }
            for p in tarballs_in(&d) {
                if !all.iter().any(|q: &PathBuf| q.file_name() == p.file_name()) {
                    all.push(p);
                }
            }
        }
    }
    all
}

/// This repository's own captures: `tests/fixtures/` at its top.
pub(crate) fn own_fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Fails the test, saying what to install, if lstopo is missing: a
/// comparison that silently skips would prove nothing.
pub(crate) fn require_lstopo() {
    let ok = Command::new(LSTOPO)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{LSTOPO} not found: install Debian's hwloc package (apt-get install hwloc)"
    );
}
