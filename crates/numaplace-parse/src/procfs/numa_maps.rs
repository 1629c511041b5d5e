//! `/proc/<pid>/numa_maps`: one line per mapping, with its memory policy and
//! its resident pages per NUMA node.
//!
//! The kernel's format (`show_numa_map` in `fs/proc/task_mmu.c`), fields
//! separated by single spaces:
//!
//! ```text
//! <start-hex> <policy> [file=<path> | heap | stack] [huge]
//!     [anon=N] [dirty=N] [mapped=N] [mapmax=N] [swapcache=N] [active=N]
//!     [writeback=N] [N<node>=<pages> ...] kernelpagesize_kB=<kB>
//! ```
//!
//! A mapping with no resident pages stops after the name (`7fd03b530000
//! default`). Two facts from the kernel source shape the tokenizer:
//!
//! * the path is written with `seq_file_path(m, file, "\n\t= ")`, which
//!   escapes newline, tab, `=` and space as octal (`\012`, `\011`, `\075`,
//!   `\040`), so a path is one space-free token and cannot fake a
//!   `key=value` field. Other bytes (`\r`, form feed, non-UTF-8) are *not*
//!   escaped, so tokens are split on the space character only;
//! * the policy (`mpol_to_str`: `<mode>[=<flags>][:<nodes>]`) can itself
//!   hold a space: the modes `prefer (many)` and `weighted interleave`. It
//!   runs from the second token up to the first recognised field.
//!
//! Unknown tokens after the policy are ignored, for kernels yet to come.

use std::collections::BTreeMap;

use super::error::ParseError;

const FILE: &str = "numa_maps";

/// Bytes of memory on one node, by kind: the model's [`NodeMemory`].
///
/// [`NodeMemory`]: numaplace_model::NodeMemory
pub type NodePages = numaplace_model::NodeMemory;

/// How a mapping's pages are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MappingKind {
    /// Anonymous memory: heap, stacks, private anonymous mappings.
    Anon,
    /// A mapping with `file=`: page cache, and also shared memory (shmem,
    /// memfd, SysV shm), which the kernel backs by a file. Pages of a
    /// private file mapping that were copied on write are anonymous in the
    /// kernel but counted here as file, since the kernel does not split
    /// the per-node count by kind.
    File,
    /// hugetlb pages: a mapping marked `huge`, or any with a kernel page
    /// size of 2 MiB or more. Takes precedence over `file=` (hugetlbfs
    /// files). Transparent huge pages are reported in base pages and count
    /// as anon or file.
    Huge,
}

/// One line of `numa_maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaMapping {
    /// Start address of the mapping.
    pub start: u64,
    /// The memory policy as the kernel wrote it: `default`, `bind:1`,
    /// `interleave:0-1`, `prefer=static:1`, `prefer (many)=relative:0-1`.
    pub policy: String,
    /// The `file=` path, still escaped as the kernel wrote it (`\040` for
    /// a space).
    pub file: Option<String>,
    /// How its pages are counted: anonymous, file-backed or hugetlb.
    pub kind: MappingKind,
    /// The kernel page size in bytes; 0 when no pages are resident.
    pub page_size: u64,
    /// Resident pages per node (node id, pages), in the kernel's order.
    pub node_pages: Vec<(u32, u64)>,
}

impl NumaMapping {
    /// Whether the kernel's automatic NUMA balancing may move this
    /// mapping's pages: it scans only memory under the default policy, or
    /// a policy with the `balancing` flag (`MPOL_F_NUMA_BALANCING`, Linux
    /// 5.16+, written `bind=balancing:0-1`); memory under any other
    /// explicit policy stays where the policy put it (`vma_policy_mof` in
    /// mm/mempolicy.c).
    pub fn kernel_balances(&self) -> bool {
        let (mode, flags) = match self.policy.split_once('=') {
            Some((mode, rest)) => (mode, rest.split(':').next().unwrap_or_default()),
            None => (self.policy.split(':').next().unwrap_or_default(), ""),
        };
        mode == "default" || flags.split(',').any(|f| f == "balancing")
    }

    /// Resident bytes per node (node id, bytes). Parsing checked these
    /// products cannot overflow.
    pub fn node_bytes(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.node_pages
            .iter()
            .map(|&(node, pages)| (node, pages.saturating_mul(self.page_size)))
    }
}

/// A process's resident memory per node, summed over its mappings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaMaps {
    /// Bytes per node id, by kind. Nodes holding none of the process's
    /// pages are absent.
    pub nodes: BTreeMap<u32, NodePages>,
    /// Lines parsed as mappings (with or without resident pages).
    pub mappings: usize,
    /// Non-blank lines refused as malformed and left out of `nodes`.
    pub skipped_lines: usize,
    /// Resident bytes (all nodes) in mappings under an explicit memory
    /// policy the kernel's automatic NUMA balancing does not move
    /// ([`NumaMapping::kernel_balances`] false): `bind`, `interleave`,
    /// `prefer`, `local`...
    pub explicit_policy_bytes: u64,
}

impl NumaMaps {
    /// Bytes on all nodes together, by kind.
    pub fn total(&self) -> NodePages {
        self.nodes
            .values()
            .fold(NodePages::default(), |acc, n| add(acc, *n))
    }

    /// Bytes on one node, by kind (zero if the process has none there).
    pub fn node(&self, node: u32) -> NodePages {
        self.nodes.get(&node).copied().unwrap_or_default()
    }

    /// Adds one mapping's pages.
    pub fn add_mapping(&mut self, mapping: &NumaMapping) {
        self.mappings += 1;
        let explicit = !mapping.kernel_balances();
        for (node, bytes) in mapping.node_bytes() {
            if explicit {
                self.explicit_policy_bytes = self.explicit_policy_bytes.saturating_add(bytes);
            }
            let slot = self.nodes.entry(node).or_default();
            let field = match mapping.kind {
                MappingKind::Anon => &mut slot.anon,
                MappingKind::File => &mut slot.file,
                MappingKind::Huge => &mut slot.huge,
            };
            *field = field.saturating_add(bytes);
        }
    }
}

fn add(a: NodePages, b: NodePages) -> NodePages {
    NodePages {
        anon: a.anon.saturating_add(b.anon),
        file: a.file.saturating_add(b.file),
        huge: a.huge.saturating_add(b.huge),
    }
}

/// Parses a whole `numa_maps`. Never fails: malformed lines are counted in
/// [`NumaMaps::skipped_lines`] and left out; blank lines are ignored.
pub fn parse_numa_maps(text: &str) -> NumaMaps {
    let mut maps = NumaMaps::default();
    for line in text.split('\n') {
        if line.trim().is_empty() {
            continue;
        }
        match parse_numa_maps_line(line) {
            Ok(mapping) => maps.add_mapping(&mapping),
            Err(_) => maps.skipped_lines += 1,
        }
    }
    maps
}

/// Counters the kernel may write between the name and the node counts.
const COUNTERS: [&str; 7] = [
    "anon",
    "dirty",
    "mapped",
    "mapmax",
    "swapcache",
    "active",
    "writeback",
];

/// Parses one line of `numa_maps` (without its newline).
pub fn parse_numa_maps_line(line: &str) -> Result<NumaMapping, ParseError> {
    let malformed = |what: &str| ParseError::Malformed {
        file: FILE,
        what: what.to_string(),
    };
    let mut tokens = line.split(' ').filter(|t| !t.is_empty()).peekable();

    let start_text = tokens.next().ok_or_else(|| malformed("empty line"))?;
    let start = parse_hex(start_text)
        .ok_or_else(|| ParseError::invalid(FILE, "start", start_text, "a hex address"))?;

    let mut policy = Vec::new();
    while let Some(t) = tokens.next_if(|t| !is_field(t)) {
        policy.push(t);
    }
    if policy.is_empty() {
        return Err(malformed("no memory policy after the address"));
    }

    let mut file = None;
    let mut huge = false;
    let mut page_kb = None;
    let mut node_pages: Vec<(u32, u64)> = Vec::new();
    for t in tokens {
        if let Some(path) = t.strip_prefix("file=") {
            if file.replace(path.to_string()).is_some() {
                return Err(malformed("two file= fields"));
            }
            continue;
        }
        if t == "huge" {
            huge = true;
            continue;
        }
        let Some((key, value)) = t.split_once('=') else {
            continue; // heap, stack, stack:<tid>, or a newer kernel's word
        };
        if key == "kernelpagesize_kB" {
            let kb = parse_dec(value).ok_or_else(|| {
                ParseError::invalid(FILE, "kernelpagesize_kB", value, "a decimal integer")
            })?;
            if page_kb.replace(kb).is_some() {
                return Err(malformed("two kernelpagesize_kB fields"));
            }
        } else if let Some(node) = key.strip_prefix('N') {
            let node = parse_dec(node)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| ParseError::invalid(FILE, "N<node>", key, "N and a node id"))?;
            let pages = parse_dec(value)
                .ok_or_else(|| ParseError::invalid(FILE, "N<node>", value, "a page count"))?;
            if node_pages.iter().any(|&(n, _)| n == node) {
                return Err(malformed("a node counted twice"));
            }
            node_pages.push((node, pages));
        } else if COUNTERS.contains(&key) && parse_dec(value).is_none() {
            return Err(ParseError::invalid(FILE, "counter", t, "`name=<count>`"));
        }
    }

    let page_size = match (page_kb, node_pages.is_empty()) {
        (Some(kb), _) => kb
            .checked_mul(1024)
            .ok_or_else(|| malformed("kernelpagesize_kB out of range"))?,
        (None, true) => 0,
        (None, false) => return Err(malformed("node counts without kernelpagesize_kB")),
    };
    for &(_, pages) in &node_pages {
        if pages.checked_mul(page_size).is_none() {
            return Err(malformed("more bytes on a node than fit in 64 bits"));
        }
    }

    let kind = if huge || page_size >= 2 << 20 {
        MappingKind::Huge
    } else if file.is_some() {
        MappingKind::File
    } else {
        MappingKind::Anon
    };
    Ok(NumaMapping {
        start,
        policy: policy.join(" "),
        file,
        kind,
        page_size,
        node_pages,
    })
}

/// Whether a token is one of the fields after the policy (so the policy
/// ends before it).
fn is_field(t: &str) -> bool {
    if matches!(t, "heap" | "stack" | "huge") || t.starts_with("stack:") || t.starts_with("file=") {
        return true;
    }
    match t.split_once('=') {
        Some((key, _)) => {
            // Modes are lower case, so any `N...=` is a node count (and a
            // malformed one is refused, not taken into the policy).
            key == "kernelpagesize_kB" || COUNTERS.contains(&key) || key.starts_with('N')
        }
        None => false,
    }
}

fn parse_hex(t: &str) -> Option<u64> {
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(t, 16).ok()
}

fn parse_dec(t: &str) -> Option<u64> {
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

#[cfg(test)]
mod tests;
