//! The topology as a tree a person reads at a glance.
//!
//! ```text
//! Package 0: CPUs 0-7
//!   Node 0: 15.6 GiB, CPUs 0-7
//!     L3 16 MiB: CPUs 0-7 (L2 1 MiB, L1d 32 KiB per core)
//!       cores 0-3: [0,4] [1,5] [2,6] [3,7]
//! ```
//! Packages hold nodes; under a node come the LLC domains its CPUs use.
//! An LLC shared by several nodes (sub-NUMA clustering) is printed under
//! each of them with the nodes it spans.

use std::fmt::Write;

use numaplace_model::{CacheKind, Topology};

/// Bytes for people: `512 KiB`, `39 MiB`, `15.6 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    let one_decimal = format!("{v:.1}");
    match one_decimal.strip_suffix(".0") {
        _ if u == 0 || v >= 100.0 => format!("{v:.0} {}", UNITS[u]),
        Some(whole) => format!("{whole} {}", UNITS[u]),
        None => format!("{one_decimal} {}", UNITS[u]),
    }
}

/// Private cache sizes of a core, innermost outward, below its LLC.
fn private_caches(t: &Topology, core: usize) -> String {
    let c = &t.cores()[core];
    let llc_cache = t.llcs()[c.llc].cache;
    c.caches
        .iter()
        .filter(|&&i| Some(i) != llc_cache)
        .map(|&i| {
            let cache = &t.caches()[i];
            let kind = if cache.kind == CacheKind::Data {
                "d"
            } else {
                ""
            };
            format!("L{}{} {}", cache.level, kind, bytes(cache.size))
        })
        .rev()
        .collect::<Vec<_>>()
        .join(", ")
}

const WIDTH: usize = 100;

/// `numaplace topology`'s tree of `t`: packages, nodes, caches, cores,
/// and the node distances.
pub fn render(t: &Topology) -> String {
    let mut out = String::new();
    let cpu_nodes = t.cpu_nodes().count();
    let cpuless = t.nodes().len() - cpu_nodes;
    let _ = writeln!(
        out,
        "Machine ({}): {} package{}, {} NUMA node{}{}, {} LLC domain{}, {} cores, {} CPUs ({} per core), {} memory",
        t.source(),
        t.packages().len(),
        plural(t.packages().len()),
        t.nodes().len(),
        plural(t.nodes().len()),
        if cpuless > 0 {
            format!(" ({cpuless} without CPUs)")
        } else {
            String::new()
        },
        t.llcs().len(),
        plural(t.llcs().len()),
        t.cores().len(),
        t.cpus().len(),
        t.smt_width(),
        bytes(t.total_memory()),
    );
    let _ = writeln!(
        out,
        "CPU numbers are the kernel's; [a,b] is one core's hardware threads."
    );
    for p in t.packages() {
        if p.span.is_empty() {
            let _ = writeln!(out, "Package {}: none of its CPUs is ours to use", p.os_id);
        } else {
            let _ = writeln!(out, "Package {}: CPUs {}", p.os_id, p.span);
        }
        for &n in &p.nodes {
            render_node(t, n, &mut out);
        }
    }
    let orphans: Vec<usize> = t
        .nodes()
        .iter()
        .filter(|n| n.package.is_none())
        .map(|n| n.id)
        .collect();
    if !orphans.is_empty() {
        let _ = writeln!(out, "Nodes outside any one package:");
        for n in orphans {
            render_node(t, n, &mut out);
        }
    }
    render_kinds(t, &mut out);
    render_distances(t, &mut out);
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn render_node(t: &Topology, n: usize, out: &mut String) {
    let node = &t.nodes()[n];
    if node.span.is_empty() {
        let near = if node.locality.is_empty() {
            "no CPU of ours near it".to_string()
        } else {
            format!("near CPUs {}", node.locality)
        };
        let _ = writeln!(
            out,
            "  Node {}: {}, no CPUs ({near})",
            node.os_id,
            bytes(node.memory)
        );
        return;
    }
    let _ = writeln!(
        out,
        "  Node {}: {}, CPUs {}",
        node.os_id,
        bytes(node.memory),
        node.span
    );
    for &l in &node.llcs {
        let llc = &t.llcs()[l];
        let name = match llc.cache {
            Some(c) => {
                let cache = &t.caches()[c];
                format!("L{} {}", cache.level, bytes(cache.size))
            }
            None => "LLC (no cache reported)".to_string(),
        };
        // An LLC spanning several nodes (sub-NUMA clustering) is named with
        // them: its CPUs on this node are the node's, listed above.
        let whom = if llc.nodes.len() > 1 {
            let ids: Vec<String> = llc
                .nodes
                .iter()
                .map(|&i| t.nodes()[i].os_id.to_string())
                .collect();
            format!("spanning nodes {}", ids.join(","))
        } else {
            format!("CPUs {}", llc.span)
        };
        let cores: Vec<usize> = llc
            .cores
            .iter()
            .copied()
            .filter(|&c| t.cores()[c].node == n)
            .collect();
        let private = cores
            .first()
            .map(|&c| private_caches(t, c))
            .unwrap_or_default();
        let private = if private.is_empty() {
            String::new()
        } else {
            format!(" ({private} per core)")
        };
        let _ = writeln!(out, "    {name}: {whom}{private}");
        let mut line = format!("      {} core{}:", cores.len(), plural(cores.len()));
        for &c in &cores {
            let item = format!(" [{}]", t.cores()[c].span);
            if line.len() + item.len() > WIDTH {
                let _ = writeln!(out, "{line}");
                line = " ".repeat(14);
            }
            line.push_str(&item);
        }
        let _ = writeln!(out, "{line}");
    }
}

fn render_kinds(t: &Topology, out: &mut String) {
    if t.cpu_kinds().is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "CPU kinds (hybrid machine, most power-efficient first):"
    );
    for k in t.cpu_kinds() {
        let _ = writeln!(out, "  {}: CPUs {}", k.name, k.span);
    }
}

fn render_distances(t: &Topology, out: &mut String) {
    let nodes = t.nodes();
    if nodes.len() < 2 {
        return;
    }
    let _ = writeln!(
        out,
        "Node distances ({}; 10 = local):",
        if t.distances_reported() {
            "as the firmware reports them"
        } else {
            "none reported, Linux's defaults"
        }
    );
    let w = nodes
        .iter()
        .map(|n| n.os_id.to_string().len())
        .chain(t.distances().iter().map(|d| d.to_string().len()))
        .max()
        .unwrap_or(2)
        + 2;
    let mut header = format!("  {:>w$}", "");
    for n in nodes {
        let _ = write!(header, "{:>w$}", n.os_id);
    }
    let _ = writeln!(out, "{header}");
    for a in nodes {
        let mut row = format!("  {:>w$}", a.os_id);
        for b in nodes {
            let _ = write!(row, "{:>w$}", t.distance(a.id, b.id));
        }
        let _ = writeln!(out, "{row}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_for_people() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(32 * 1024), "32 KiB");
        assert_eq!(bytes(39 << 20), "39 MiB");
        assert_eq!(bytes(16_750_000_000), "15.6 GiB");
    }

    #[test]
    fn tree_of_a_sub_numa_machine() {
        let t =
            Topology::synthetic("pack:2 l3:1(size=30MiB) numa:2 l2:2(size=1MiB) l1:1 core:1 pu:2")
                .unwrap();
        let s = render(&t);
        assert!(
            s.contains("2 packages, 4 NUMA nodes, 2 LLC domains, 8 cores, 16 CPUs (2 per core)"),
            "{s}"
        );
        assert!(s.contains("Package 1: CPUs 8-15"), "{s}");
        assert!(s.contains("  Node 1: 1 GiB, CPUs 4-7"), "{s}");
        assert!(
            s.contains("    L3 30 MiB: spanning nodes 0,1 (L2 1 MiB, L1d 32 KiB per core)"),
            "{s}"
        );
        assert!(s.contains("      2 cores: [4-5] [6-7]"), "{s}");
        assert!(s.contains("none reported, Linux's defaults"), "{s}");
        assert!(s.contains("     0  10  20  20  20"), "{s}");
    }
}
