//! Pre-placement advice: which NUMA nodes a virtual machine (or any new
//! process) of so many vCPUs and so much memory should start on, as
//! numad answers `numad -w NCPUS:MB` for libvirt's `placement='auto'`.
//!
//! After numad.c's `pick_numa_nodes` (numad 0.5, the version Debian
//! ships), with its rules kept:
//! - a node's room is its idle CPU and its free memory (MemFree plus the
//!   inactive file cache, numad's default `-C 1`), a core's further
//!   hardware threads counting 20 % of a CPU (`-t 20`, see
//!   [`crate::numad::node_cpus`]); each node keeps 100 MiB back
//!   (`MBS_MARGIN`);
//! - nodes are ranked by numad's "magnitude" (`combined_value_of_weighted_resources`:
//!   the request's share of memory weighs 10 and the rest 4, of CPU 6 and
//!   1, multiplied), so the least loaded and freest node comes first;
//! - from each node in turn, the others are taken nearest first by the
//!   distance matrix (ties: the larger magnitude) until the request fits;
//! - a request larger than the machine gets every node, as numad does.
//!
//! Where this differs, and why: numad picks its starting node by a sum of
//! magnitudes over a node count estimated from node 0's size, then takes
//! nodes until memory and CPU are met; here every starting node is tried
//! and the answer is the one with the **fewest** nodes, then the nearest
//! (smallest sum of distances between its nodes), then the most room, so
//! a VM that fits on one node always gets one node (numad's estimate can
//! give two on a machine whose node 0 is smaller than the others, as its
//! node count comes from node 0's size alone). CPU-less memory nodes take
//! part as memory only.

use std::collections::BTreeMap;

use numaplace_model::Topology;

use crate::numad::node_cpus;

/// What numad keeps free on every node it assigns (numad.c `MBS_MARGIN`).
pub const MARGIN_BYTES: u64 = 100 << 20;

/// A node's free resources, by dense node id of the topology.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeRoom {
    /// Idle CPUs (0 for a CPU-less node), hardware threads discounted.
    pub cpus_free: f64,
    /// Free memory, bytes.
    pub memory_free: u64,
}

/// A request: `numad -w NCPUS:MB`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    /// CPUs' worth of work (`NCPUS`).
    pub cpus: f64,
    /// Memory, bytes (`MB`).
    pub memory: u64,
}

/// The nodes to start on (kernel ids, increasing) and whether they hold
/// the whole request; when not, they are every node of the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advice {
    /// The nodes advised (kernel ids).
    pub nodes: Vec<u32>,
    /// Whether they hold the whole request.
    pub fits: bool,
}

/// What a core's second (third, ...) hardware thread adds, percent of a
/// CPU: numad's `-t` default (numad(8)), as [`crate::numad::NumadParams`].
pub const HTT_PERCENT: u64 = 20;

/// Each node's room (by dense id) from each CPU's idle share over a
/// sample (kernel CPU id -> 0..1; a CPU without a share, whose counters
/// did not move, counts as idle) and each node's free memory (kernel node
/// id -> bytes, see `numaplace_linux::nodes::parse_node_available`).
///
/// As numad.c's update_nodes: the idle CPUs summed, less what the
/// hardware threads beyond the first of each core do not add, between 0
/// and the node's CPUs as [`node_cpus`] counts them.
pub fn rooms(
    t: &Topology,
    idle: &BTreeMap<u32, Option<f64>>,
    memory_free: &BTreeMap<u32, u64>,
) -> Vec<NodeRoom> {
    let discount = 1.0 - HTT_PERCENT as f64 / 100.0;
    t.nodes()
        .iter()
        .map(|n| {
            let mine = n.span.intersection(t.span());
            let idle_cpus: f64 = mine
                .iter()
                .map(|c| {
                    idle.get(&c)
                        .copied()
                        .flatten()
                        .unwrap_or(1.0)
                        .clamp(0.0, 1.0)
                })
                .sum();
            let extra_threads = mine.len() as f64
                - n.cores
                    .iter()
                    .filter(|&&c| !t.cores()[c].span.intersection(t.span()).is_empty())
                    .count() as f64;
            let total = node_cpus(t, n, HTT_PERCENT);
            NodeRoom {
                cpus_free: (idle_cpus - extra_threads * discount).clamp(0.0, total),
                memory_free: memory_free.get(&n.os_id).copied().unwrap_or(0),
            }
        })
        .collect()
}

/// numad's magnitude of a node for a request (numad.c,
/// `combined_value_of_weighted_resources`), CPUs in hundredths and memory
/// in MiB as numad counts them.
pub fn magnitude(room: &NodeRoom, req: &Request) -> f64 {
    let split = |free: f64, want: f64| (free.min(want), (free - want).max(0.0));
    let (mem_need, mem_extra) = split(room.memory_free as f64 / MIB, req.memory as f64 / MIB);
    let (cpu_need, cpu_extra) = split(room.cpus_free * 100.0, req.cpus * 100.0);
    (mem_need * 10.0 + mem_extra * 4.0) * (cpu_need * 6.0 + cpu_extra)
}

const MIB: f64 = (1u64 << 20) as f64;

/// The nodes of `topology` that best hold `req`, given each node's room
/// (`rooms[i]` for dense node `i`). See the module documentation.
pub fn advise(topology: &Topology, rooms: &[NodeRoom], req: &Request) -> Advice {
    let n = topology.nodes().len().min(rooms.len());
    let mag: Vec<f64> = rooms[..n].iter().map(|r| magnitude(r, req)).collect();
    let mut best: Option<Candidate> = None;
    for start in 0..n {
        let c = from(topology, rooms, &mag, start, req);
        if best.as_ref().is_none_or(|b| c.better_than(b)) {
            best = Some(c);
        }
    }
    let Some(best) = best.filter(|b| b.fits) else {
        return Advice {
            nodes: topology.nodes().iter().map(|x| x.os_id).collect(),
            fits: false,
        };
    };
    let mut nodes: Vec<u32> = best
        .nodes
        .iter()
        .map(|&d| topology.nodes()[d].os_id)
        .collect();
    nodes.sort_unstable();
    Advice { nodes, fits: true }
}

/// The nodes taken from one starting node.
struct Candidate {
    nodes: Vec<usize>,
    fits: bool,
    spread: u64,
    room: f64,
    start: usize,
}

impl Candidate {
    fn better_than(&self, other: &Candidate) -> bool {
        use std::cmp::Ordering::*;
        let key = |c: &Candidate| (!c.fits, c.nodes.len(), c.spread);
        match key(self).cmp(&key(other)) {
            Less => true,
            Greater => false,
            Equal => match self.room.total_cmp(&other.room) {
                Greater => true,
                Less => false,
                Equal => self.start < other.start,
            },
        }
    }
}

/// From `start`, the nearest nodes (ties: larger magnitude, then lower id)
/// until the request's CPUs and memory are met.
fn from(t: &Topology, rooms: &[NodeRoom], mag: &[f64], start: usize, req: &Request) -> Candidate {
    let mut order: Vec<usize> = (0..mag.len()).collect();
    order.sort_by(|&a, &b| {
        (t.distance(start, a), a != start)
            .cmp(&(t.distance(start, b), b != start))
            .then(mag[b].total_cmp(&mag[a]))
            .then(a.cmp(&b))
    });
    let (mut cpus, mut memory) = (0.0, 0u64);
    let mut nodes = Vec::new();
    let mut fits = false;
    for d in order {
        nodes.push(d);
        cpus += rooms[d].cpus_free;
        memory += rooms[d].memory_free.saturating_sub(MARGIN_BYTES);
        if cpus + 1e-9 >= req.cpus && memory >= req.memory {
            fits = true;
            break;
        }
    }
    let spread = nodes
        .iter()
        .flat_map(|&a| nodes.iter().map(move |&b| (a, b)))
        .filter(|(a, b)| a < b)
        .map(|(a, b)| u64::from(t.distance(a, b)))
        .sum();
    Candidate {
        room: nodes.iter().map(|&d| mag[d]).sum(),
        nodes,
        fits,
        spread,
        start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn room(cpus_free: f64, gib: u64) -> NodeRoom {
        NodeRoom {
            cpus_free,
            memory_free: gib * GIB,
        }
    }

    fn req(cpus: f64, gib: u64) -> Request {
        Request {
            cpus,
            memory: gib * GIB,
        }
    }

    /// Four nodes of four CPUs in a square 0-1-3-2-0 (16 one hop, 22 two).
    fn square() -> Topology {
        let mut d = Topology::synthetic("pack:4 numa:1 l3:1 core:4 pu:1")
            .unwrap()
            .to_desc();
        d.distances = Some(vec![
            10, 16, 16, 22, //
            16, 10, 22, 16, //
            16, 22, 10, 16, //
            22, 16, 16, 10,
        ]);
        Topology::new(d).unwrap()
    }

    #[test]
    fn a_vm_that_fits_one_node_goes_to_the_least_loaded() {
        let t = square();
        let rooms = [room(1.0, 8), room(3.5, 8), room(2.0, 8), room(0.5, 8)];
        let a = advise(&t, &rooms, &req(2.0, 2));
        assert_eq!(
            a,
            Advice {
                nodes: vec![1],
                fits: true
            }
        );
    }

    #[test]
    fn with_equal_cpu_the_node_with_more_free_memory_wins() {
        let t = square();
        let rooms = [room(4.0, 3), room(4.0, 3), room(4.0, 7), room(4.0, 3)];
        assert_eq!(advise(&t, &rooms, &req(2.0, 2)).nodes, vec![2]);
    }

    #[test]
    fn a_vm_needing_two_nodes_gets_two_neighbours() {
        let t = square();
        // Node 3 is the freest, but 0 and 3 are two hops apart; every pair
        // of neighbours holds 6 CPUs.
        let rooms = [room(4.0, 8), room(2.0, 8), room(2.0, 8), room(4.0, 8)];
        let a = advise(&t, &rooms, &req(6.0, 4));
        assert!(a.fits);
        assert_eq!(a.nodes.len(), 2, "{a:?}");
        let (x, y) = (a.nodes[0] as usize, a.nodes[1] as usize);
        assert_eq!(t.distance(x, y), 16, "neighbours, not {a:?}");
        assert!(
            a.nodes.contains(&0) || a.nodes.contains(&3),
            "a free node: {a:?}"
        );
    }

    #[test]
    fn memory_alone_can_need_more_nodes() {
        let t = square();
        let rooms = [room(4.0, 8), room(4.0, 8), room(4.0, 8), room(4.0, 8)];
        let a = advise(&t, &rooms, &req(1.0, 20));
        assert_eq!(a.nodes.len(), 3, "{a:?}");
        assert!(a.fits);
        let a = advise(&t, &rooms, &req(1.0, 12));
        assert_eq!(a.nodes.len(), 2, "{a:?}");
    }

    #[test]
    fn the_margin_is_kept_on_every_node() {
        let t = square();
        let rooms = [room(4.0, 2), room(4.0, 2), room(4.0, 2), room(4.0, 2)];
        // 2 GiB free is not room for 2 GiB once numad's 100 MiB is kept.
        assert_eq!(advise(&t, &rooms, &req(1.0, 2)).nodes.len(), 2);
    }

    #[test]
    fn bigger_than_the_machine_gets_every_node_and_says_so() {
        let t = square();
        let rooms = [room(4.0, 8); 4];
        let a = advise(&t, &rooms, &req(2.0, 64));
        assert_eq!(
            a,
            Advice {
                nodes: vec![0, 1, 2, 3],
                fits: false
            }
        );
        let a = advise(&t, &rooms, &req(17.0, 1));
        assert!(!a.fits);
    }

    #[test]
    fn room_counts_idle_cpus_and_discounts_second_threads() {
        // Two nodes of 2 cores x 2 threads: 2 + 2 x 0.2 = 2.4 CPUs each.
        let t = Topology::synthetic("pack:2 numa:1 l3:1 core:2 pu:2").unwrap();
        let cpus = |n: usize| t.nodes()[n].span.iter().collect::<Vec<_>>();
        let mut idle = BTreeMap::new();
        for c in cpus(0) {
            idle.insert(c, Some(0.5));
        }
        for c in cpus(1) {
            idle.insert(c, None);
        }
        let mem = BTreeMap::from([(t.nodes()[0].os_id, 5 * GIB)]);
        let r = rooms(&t, &idle, &mem);
        // Node 0: 4 CPUs half idle = 2, less 2 second threads x 0.8.
        assert!((r[0].cpus_free - 0.4).abs() < 1e-9, "{r:?}");
        assert_eq!(r[0].memory_free, 5 * GIB);
        // Node 1: no share counts as idle, capped at numad's 2.4.
        assert!((r[1].cpus_free - 2.4).abs() < 1e-9, "{r:?}");
        assert_eq!(r[1].memory_free, 0, "no meminfo, no memory");
    }

    #[test]
    fn magnitude_follows_numads_weights() {
        // 2 CPUs and 1024 MiB wanted; 3 CPUs and 1536 MiB free:
        // (1024*10 + 512*4) * (200*6 + 100*1).
        let m = magnitude(
            &NodeRoom {
                cpus_free: 3.0,
                memory_free: 1536 << 20,
            },
            &Request {
                cpus: 2.0,
                memory: 1 << 30,
            },
        );
        assert_eq!(m, (10240.0 + 2048.0) * (1200.0 + 100.0));
    }
}
