//! numad's node ranking with a signal that needs no PMU: each node's
//! `numastat`. A node whose `numa_foreign` grew over the last round turned
//! away allocations meant for it (the page allocator found it short of free
//! memory and took the pages from another node): what runs there already
//! allocates faster than the node can serve, whatever its `MemFree` and
//! clean page cache (numad's measure of room) say. A process moved there
//! would push that work's new pages, and its own, onto other nodes, where
//! they are remote. So among the nodes a process fits, numad-like ranks
//! those that turned away the fewest allocations first, then by room as
//! numad does; `auto`, which ranks by LLC misses where they are counted,
//! does so only where its machine counts no instructions, and ranks as
//! before where it does. Without rates (the first round, a kernel without
//! `numastat`, a recording made before) nothing changes.

use numaplace_model::{Counter, Node, Snapshot, Topology};

use super::NodeRoom;

/// Allocations per second each node (by dense id) turned away over the
/// round (`numa_foreign`); `None` where the round has no `numastat` rates,
/// and for `auto` (`ranks_by_misses`) where it counts instructions.
pub(super) fn turned_away(t: &Topology, s: &Snapshot, ranks_by_misses: bool) -> Option<Vec<f64>> {
    if ranks_by_misses && counts_instructions(s) {
        return None;
    }
    let rates = s.node_rates().ok()?;
    Some(
        t.nodes()
            .iter()
            .map(|n| rates.get(&n.os_id).map_or(0.0, |r| r.numa_foreign))
            .collect(),
    )
}

/// Whether the round counted any thread's instructions.
fn counts_instructions(s: &Snapshot) -> bool {
    (s.counters.values()).any(|c| c.get(Counter::Instructions).is_some())
}

/// What the reason adds where the allocations turned away ranked the nodes
/// (`ranked`: no LLC misses did) and passed over one of `fitting` with as
/// much room as `best` or more: which nodes were passed over, and how
/// many allocations each turned away; empty where none was.
pub(super) fn among(
    fitting: &[&Node],
    best: &Node,
    room: &[NodeRoom],
    ranked: bool,
    turned_away: &Option<Vec<f64>>,
) -> String {
    let Some(turned_away) = turned_away.as_deref().filter(|_| ranked) else {
        return String::new();
    };
    let roomier = |n: &Node| room[n.id].magnitude() >= room[best.id].magnitude();
    let over: Vec<String> = fitting
        .iter()
        .filter(|n| turned_away[n.id] > turned_away[best.id] && roomier(n))
        .map(|n| format!("node {} {:.1}/s", n.os_id, turned_away[n.id]))
        .collect();
    if over.is_empty() {
        return String::new();
    }
    format!(
        " of the nodes that turned away the fewest allocations meant for them over the last \
         round (numastat numa_foreign: {}, short of free memory for what runs there{})",
        over.join(", "),
        if turned_away[best.id] > 0.0 {
            format!("; node {} {:.1}/s", best.os_id, turned_away[best.id])
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use numaplace_model::{
        Action, NodeMeminfo, NodeMemory, NumaStat, Plan, Snapshot, Task, Topology,
    };

    use crate::Policy;
    use crate::auto::{Auto, AutoParams};
    use crate::numad::{NumadLike, NumadParams};
    use crate::testutil::{counters, decide, process, task};

    const MIB: u64 = 1 << 20;

    fn topo() -> Topology {
        // Node 0 = CPUs 0-1, node 1 = CPUs 2-3.
        Topology::synthetic("pack:2 numa:1 l3:1 core:2 pu:1").unwrap()
    }

    /// Round `seq` (1 s each) of process 100, threads 101-102 busy on node
    /// 0's CPUs (allowed anywhere), `memory` MiB on each node; 8 GiB free
    /// on each node; node 0 turned away `away` allocations meant for it
    /// over the round (from the second round on: the first has no rates).
    fn round(seq: u64, memory: [u64; 2], away: [u64; 2]) -> Snapshot {
        let t = topo();
        let tasks: Vec<Task> = [101, 102]
            .iter()
            .zip([0, 1])
            .map(|(&tid, cpu)| Task {
                utime: seq * 100,
                last_cpu: Some(cpu),
                ..task(tid, 100, t.span())
            })
            .collect();
        let mut g = process(100, "hog", vec![101, 102]);
        g.memory = Some(
            (0..2)
                .map(|n| {
                    let anon = memory[n as usize] * MIB;
                    (
                        n,
                        NodeMemory {
                            anon,
                            ..NodeMemory::default()
                        },
                    )
                })
                .collect(),
        );
        let mut s = Snapshot {
            seq,
            time_unix_ns: seq * 1_000_000_000,
            interval_ns: if seq == 0 { 0 } else { 1_000_000_000 },
            tasks,
            groups: vec![g],
            ..Snapshot::default()
        };
        s.machine.clock_ticks = 100;
        for n in 0..2u32 {
            let free = 8192 * MIB;
            s.machine.nodes.insert(
                n,
                NodeMeminfo {
                    total: 2 * free,
                    free,
                },
            );
            if seq > 0 {
                let foreign = away[n as usize];
                let stat = NumaStat {
                    numa_hit: 1000,
                    numa_foreign: foreign,
                    ..NumaStat::default()
                };
                s.machine.numastat.insert(n, stat);
            }
        }
        s
    }

    /// Where the plan pins the process's threads and moves its memory.
    fn placed(plan: &Plan) -> (Vec<String>, Vec<u32>) {
        let mut pins = Vec::new();
        let mut moves = Vec::new();
        for d in &plan.decisions {
            match &d.action {
                Action::Pin { cpus, .. } => pins.push(cpus.to_string()),
                Action::MoveMemory { to_node, .. } => moves.push(*to_node),
                _ => {}
            }
        }
        (pins, moves)
    }

    /// numad-like's second round on a process of 1 GiB half on each node:
    /// both nodes have the same room, so numad takes node 0 (the lower);
    /// while node 0 turns allocations away, node 1.
    fn numad_on(away: [u64; 2]) -> Plan {
        let t = topo();
        let mut p = NumadLike::new(NumadParams::default());
        assert!(decide(&mut p, &t, &round(0, [512, 512], away)).is_empty());
        decide(&mut p, &t, &round(1, [512, 512], away))
    }

    #[test]
    fn numad_like_passes_over_a_node_that_turns_allocations_away() {
        let (pins, moves) = placed(&numad_on([0, 0]));
        assert_eq!((pins, moves), (vec!["0-1".into(); 2], vec![0]));
        let plan = numad_on([500, 0]);
        assert_eq!(placed(&plan), (vec!["2-3".into(); 2], vec![1]));
        let why = &plan.decisions[0].reason;
        assert!(
            why.contains("turned away the fewest allocations")
                && why.contains("numastat numa_foreign: node 0 500.0/s"),
            "{why}"
        );
        // Both turn some away: the one that turns fewer away.
        assert_eq!(placed(&numad_on([500, 20])).1, vec![1]);
        assert_eq!(placed(&numad_on([20, 500])).1, vec![0]);
    }

    /// `auto` where instructions are not counted makes numad's placement
    /// as it is, so it passes over the node that turns allocations away
    /// too; where they are counted, it ranks as before.
    #[test]
    fn auto_without_counters_passes_over_it_too_and_with_counters_as_before() {
        let t = topo();
        let first_move = |away: [u64; 2], ips: Option<u64>| {
            let mut auto = Auto::new(AutoParams::default());
            for seq in 0..=40 {
                let mut s = round(seq, [512, 512], away);
                if let Some(ips) = ips {
                    for tid in [101, 102] {
                        let c = counters([(numaplace_model::Counter::Instructions, ips)]);
                        s.counters.insert(tid, c);
                    }
                }
                let plan = auto.decide(&crate::View {
                    topology: &t,
                    snapshot: &s,
                    managed: &[100].into(),
                });
                if !plan.is_empty() {
                    return plan;
                }
            }
            panic!("auto never moved the process");
        };
        let plan = first_move([500, 0], None);
        assert!(
            plan.decisions
                .iter()
                .all(|d| d.reason.contains("no experiment")
                    && d.reason.contains("numastat numa_foreign: node 0")),
            "{plan:?}"
        );
        assert_eq!(placed(&plan), (vec!["2-3".into(); 2], vec![1]));
        let plain = first_move([0, 0], None);
        assert_eq!(placed(&plain).1, vec![0], "{plain:?}");
        // Counted: the same node as with no rates at all.
        let counted = |away| placed(&first_move(away, Some(1_000_000_000)));
        assert_eq!(counted([500, 0]), counted([0, 0]));
    }
}
