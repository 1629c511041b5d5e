//! Memory of each NUMA node, from `/sys/devices/system/node/nodeN/meminfo`.

use std::collections::BTreeMap;

use numaplace_model::{CpuSet, NodeMeminfo};

use crate::sysroot::SysRoot;

/// Parses a node's `meminfo` (`Node 0 MemTotal:  6777036 kB` lines).
/// Returns `None` if either total or free is missing.
pub fn parse_node_meminfo(text: &str) -> Option<NodeMeminfo> {
    let mut total = None;
    let mut free = None;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some("Node"), Some(_), Some(key), Some(value)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let unit = it.next();
        let Ok(v) = value.parse::<u64>() else {
            continue;
        };
        let bytes = if unit == Some("kB") {
            v.saturating_mul(1024)
        } else {
            v
        };
        match key {
            "MemTotal:" => total = Some(bytes),
            "MemFree:" => free = Some(bytes),
            _ => {}
        }
    }
    Some(NodeMeminfo {
        total: total?,
        free: free?,
    })
}

/// What numad counts as a node's free memory: `MemFree` plus
/// `Inactive(file)` (clean page cache the kernel reclaims first; numad's
/// default `-C 1`, numad.c update_nodes), bytes. `None` without `MemFree`;
/// a kernel without the `Inactive(file)` line counts `MemFree` alone.
pub fn parse_node_available(text: &str) -> Option<u64> {
    let kib = |key: &str| {
        text.lines().find_map(|line| {
            let mut it = line.split_whitespace();
            let (Some("Node"), Some(_), Some(k), Some(v)) =
                (it.next(), it.next(), it.next(), it.next())
            else {
                return None;
            };
            (k == key).then(|| v.parse::<u64>().ok()).flatten()
        })
    };
    let free = kib("MemFree:")?;
    let inactive = kib("Inactive(file):").unwrap_or(0);
    Some(free.saturating_add(inactive).saturating_mul(1024))
}

/// [`parse_node_available`] of every online node under the root; nodes
/// whose file cannot be read or parsed are left out.
pub fn read_node_available(root: &SysRoot) -> BTreeMap<u32, u64> {
    per_online_node_meminfo(root, parse_node_available)
}

/// Total and free memory of every online node under the root. Nodes whose
/// file cannot be read or parsed are left out (a node can go offline
/// between listing and reading).
pub fn read_node_meminfo(root: &SysRoot) -> BTreeMap<u32, NodeMeminfo> {
    per_online_node_meminfo(root, parse_node_meminfo)
}

/// `parse` of each online node's `meminfo` under the root, by node; nodes
/// whose file cannot be read or parsed are left out.
fn per_online_node_meminfo<T>(
    root: &SysRoot,
    parse: impl Fn(&str) -> Option<T>,
) -> BTreeMap<u32, T> {
    let online = root
        .read_optional("sys/devices/system/node/online")
        .ok()
        .flatten()
        .and_then(|t| CpuSet::parse_list(&t).ok())
        .unwrap_or_default();
    online
        .iter()
        .filter_map(|n| {
            let text = root
                .read_optional(&format!("sys/devices/system/node/node{n}/meminfo"))
                .ok()??;
            Some((n, parse(&text)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_node_meminfo() {
        let text = "Node 0 MemTotal:        6777036 kB\nNode 0 MemFree:         5628432 kB\nNode 0 MemUsed:         1148604 kB\nNode 0 HugePages_Total:     0\n";
        let m = parse_node_meminfo(text).unwrap();
        assert_eq!(m.total, 6777036 * 1024);
        assert_eq!(m.free, 5628432 * 1024);
        assert_eq!(parse_node_meminfo("Node 0 MemTotal: 5 kB\n"), None);
        assert_eq!(parse_node_meminfo("garbage\n\n"), None);
    }

    #[test]
    fn available_is_free_plus_inactive_file_cache() {
        let text = "Node 1 MemTotal: 100 kB\nNode 1 MemFree: 40 kB\nNode 1 Inactive(anon): 7 kB\nNode 1 Inactive(file): 15 kB\n";
        assert_eq!(parse_node_available(text), Some(55 * 1024));
        assert_eq!(
            parse_node_available("Node 1 MemFree: 40 kB\n"),
            Some(40 * 1024)
        );
        assert_eq!(parse_node_available("Node 1 Inactive(file): 15 kB\n"), None);
    }

    #[test]
    fn reads_the_live_host() {
        let nodes = read_node_meminfo(&SysRoot::host());
        let n0 = nodes.values().next().expect("at least one online node");
        assert!(n0.total > 0 && n0.free <= n0.total);
    }
}
