//! The nodes a thread may go to on a machine of many nodes (issue 16).
//!
//! Algorithm 1 of \[Rao13\] counts a node never measured as the lowest, so a
//! thread tries every node once per reset period; its testbed had two nodes
//! (§6, Table 1: two Xeon E5620 sockets), one trip each. On sixteen nodes
//! that is fifteen trips per thread and reset, most of them far from the
//! thread's memory: mix:53046 (16 nodes of 2 cores) moved threads 28,800
//! times an hour, 287 of its first 316 moves explorations, and ran 12 %
//! slower than under Linux. So a thread compares, and goes to, only the
//! [`REACH_NODES`] nodes nearest its process's memory (by the machine's
//! distances), and the node it is on. On a machine of that many nodes or
//! fewer, that is every node: the paper's algorithm unchanged.

use std::collections::BTreeMap;

use numaplace_model::Topology;

/// How many nodes a thread's exploration reaches: the nodes of a 4-node
/// machine, twice \[Rao13\]'s testbed and the size of a two-socket machine
/// with sub-NUMA clustering, where every node is at most one link away.
pub const REACH_NODES: usize = 4;

/// For each domain (`nodes[d]`: its topology node, dense id), whether a
/// thread on domain `here` whose process's memory is `shares` (kernel
/// node id to share, `None` when not known) may compare and go there: the
/// [`REACH_NODES`] domains nearest the node holding most of the memory
/// (the thread's own node where none is known), nearer to `here` first
/// among equals, and `here` itself.
pub fn reach(
    t: &Topology,
    nodes: &[usize],
    here: usize,
    shares: Option<&BTreeMap<u32, f64>>,
) -> Vec<bool> {
    let mut out = vec![false; nodes.len()];
    if nodes.len() <= REACH_NODES {
        out.fill(true);
        return out;
    }
    let anchor = shares
        .and_then(|m| {
            m.iter()
                .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
        })
        .and_then(|(&os, _)| t.node_by_os_id(os))
        .map_or(nodes[here], |n| n.id);
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by_key(|&d| {
        (
            t.distance(anchor, nodes[d]),
            t.distance(nodes[here], nodes[d]),
            d,
        )
    });
    for &d in order.iter().take(REACH_NODES) {
        out[d] = true;
    }
    out[here] = true;
    out
}
