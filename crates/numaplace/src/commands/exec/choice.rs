//! `numaplace exec`'s choice, from the machine and what the caller may use:
//! the nodes, the CPUs the command may run on and its memory policy.
//! Nothing here reads or changes the machine.

use numaplace_linux::launch::MemoryPolicy;
use numaplace_model::{CpuSet, Topology};
use numaplace_policy::preplacement::Request;
use serde::Serialize;

use numaplace::error::InputError;
use numaplace::machine_room::Advised;

/// How the command's memory is placed on the chosen nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemoryMode {
    /// Preferred there, anywhere when they are full (numactl --preferred,
    /// --preferred-many): the default.
    Preferred,
    /// Only there (numactl --membind).
    Bind,
    /// Page by page over them (numactl --interleave).
    Interleave,
}

/// What the caller of `exec` may use: the command never gets more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Allowed {
    /// Its CPU affinity (within its cgroup's cpuset).
    pub cpus: CpuSet,
    /// The nodes its cpuset lets it allocate from (`Mems_allowed`).
    pub mems: CpuSet,
}

/// Where the nodes come from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// `--nodes LIST`, parsed ([`parse_nodes`]).
    Given { list: String, nodes: CpuSet },
    /// The pre-placement advice for `req` (`--policy NAME`).
    Advised {
        policy: String,
        req: Request,
        advised: Advised,
    },
    /// A machine (as the caller sees it) with one node: nothing to place.
    OneNode,
}

/// What `exec` sets before it runs the command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Choice {
    /// Whether anything is set (not on a one-node machine without --nodes).
    pub placed: bool,
    /// The chosen nodes (kernel ids).
    #[serde(serialize_with = "list")]
    pub nodes: CpuSet,
    /// The command's CPU affinity.
    #[serde(serialize_with = "list")]
    pub cpus: CpuSet,
    /// The command's memory policy (`None` when left as it is).
    #[serde(serialize_with = "policy_word")]
    pub memory_policy: Option<MemoryPolicy>,
    /// Why, in words, on one line.
    pub reason: String,
}

fn list<S: serde::Serializer>(set: &CpuSet, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&set.to_list_string())
}

fn policy_word<S: serde::Serializer>(p: &Option<MemoryPolicy>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.serialize_str(&p.numa_maps_word()),
        None => s.serialize_none(),
    }
}

/// `--nodes LIST`: kernel node ids in list syntax, each a node of
/// `topology` (the nodes this process may use).
pub(crate) fn parse_nodes(list: &str, topology: &Topology) -> Result<CpuSet, InputError> {
    let have: CpuSet = topology.nodes().iter().map(|n| n.os_id).collect();
    let nodes = CpuSet::parse_list(list).map_err(|e| {
        InputError(format!(
            "--nodes {list:?}: {e}; give node numbers in list syntax, e.g. 1, 0-1 or 0,2 \
             (this machine has nodes {have})"
        ))
    })?;
    if nodes.is_empty() {
        return Err(InputError(format!(
            "--nodes {list:?}: no node named; give node numbers, e.g. 1 or 0-1 \
             (this machine has nodes {have})"
        )));
    }
    let unknown = nodes.difference(&have);
    if !unknown.is_empty() {
        return Err(InputError(format!(
            "--nodes {list}: {} not on this machine, or outside this process's cpuset; give \
             nodes among {have} (`numaplace topology` shows them)",
            if unknown.len() == 1 {
                format!("node {unknown} is")
            } else {
                format!("nodes {unknown} are")
            }
        )));
    }
    Ok(nodes)
}

/// The choice (module documentation). `preferred_many`: whether the
/// kernel takes `MPOL_PREFERRED_MANY` (Linux 5.15+) on these nodes, asked
/// only where memory is preferred on several.
pub(crate) fn choose(
    topology: &Topology,
    source: &Source,
    allowed: &Allowed,
    mode: MemoryMode,
    preferred_many: impl Fn(&CpuSet) -> bool,
) -> Result<Choice, InputError> {
    let (nodes, why) = match source {
        Source::OneNode => {
            return Ok(Choice {
                placed: false,
                nodes: topology.nodes().iter().map(|n| n.os_id).collect(),
                cpus: allowed.cpus.clone(),
                memory_policy: None,
                reason: "this machine has one NUMA node (as this process sees it): nothing \
                         to place, the command runs as it is"
                    .into(),
            });
        }
        Source::Given { list, nodes } => (nodes.clone(), format!("--nodes {list}")),
        Source::Advised {
            policy,
            req,
            advised,
        } => (
            advised.nodes(),
            advice_in_words(topology, policy, req, advised),
        ),
    };
    let cpus = cpus_of(topology, &nodes).intersection(&allowed.cpus);
    if cpus.is_empty() {
        return Err(InputError(format!(
            "{why}: node{} {nodes} {} no CPU this process may use (its CPUs: {}); choose nodes \
             holding some of those CPUs, or run numaplace with a wider affinity",
            plural(&nodes),
            if nodes.len() == 1 { "has" } else { "have" },
            allowed.cpus
        )));
    }
    let (memory_policy, memory_note) =
        memory_policy(topology, &nodes, allowed, mode, preferred_many)
            .map_err(|e| InputError(format!("{why}: {e}")))?;
    let reason = format!(
        "node{} {nodes}: CPU{} {cpus}, memory {memory_policy}{memory_note} ({why})",
        plural(&nodes),
        plural(&cpus)
    );
    Ok(Choice {
        placed: true,
        nodes,
        cpus,
        memory_policy: Some(memory_policy),
        reason,
    })
}

/// The CPUs of `nodes`.
fn cpus_of(topology: &Topology, nodes: &CpuSet) -> CpuSet {
    topology
        .nodes()
        .iter()
        .filter(|n| nodes.contains(n.os_id))
        .fold(CpuSet::new(), |acc, n| acc.union(&n.span))
}

/// The memory policy of `mode` on the nodes of `nodes` that have memory
/// the caller may use, and a note on anything left out; an error when a
/// strict mode has no such node.
fn memory_policy(
    topology: &Topology,
    nodes: &CpuSet,
    allowed: &Allowed,
    mode: MemoryMode,
    preferred_many: impl Fn(&CpuSet) -> bool,
) -> Result<(MemoryPolicy, String), String> {
    let with_memory: CpuSet = topology
        .nodes()
        .iter()
        .filter(|n| n.memory > 0 && allowed.mems.contains(n.os_id))
        .map(|n| n.os_id)
        .collect();
    let mems = nodes.intersection(&with_memory);
    let left_out = nodes.difference(&mems);
    let mut note = if left_out.is_empty() || mems.is_empty() {
        String::new()
    } else {
        format!(
            "; node{} {left_out} without memory it may use",
            plural(&left_out)
        )
    };
    if mems.is_empty() {
        let flag = match mode {
            MemoryMode::Preferred => {
                note = format!(
                    " (node{} {nodes} {} no memory this process may use)",
                    plural(nodes),
                    if nodes.len() == 1 { "has" } else { "have" }
                );
                return Ok((MemoryPolicy::Default, note));
            }
            MemoryMode::Bind => "--membind",
            MemoryMode::Interleave => "--interleave",
        };
        return Err(format!(
            "{flag}: node{} {nodes} {} no memory this process may use (nodes with memory it \
             may use: {with_memory}); choose some of those, or leave out {flag}",
            plural(nodes),
            if nodes.len() == 1 { "has" } else { "have" }
        ));
    }
    let policy = match mode {
        MemoryMode::Bind => MemoryPolicy::Bind(mems),
        MemoryMode::Interleave => MemoryPolicy::Interleave(mems),
        MemoryMode::Preferred if mems.len() == 1 => {
            MemoryPolicy::Preferred(mems.first().expect("one node"))
        }
        MemoryMode::Preferred if preferred_many(&mems) => MemoryPolicy::PreferredMany(mems),
        MemoryMode::Preferred => {
            note.push_str(&format!(
                " (this kernel has no MPOL_PREFERRED_MANY, Linux 5.15+: with its CPUs on \
                 nodes {mems}, local allocation fills them first)"
            ));
            MemoryPolicy::Default
        }
    };
    Ok((policy, note))
}

/// The advice, in words: what was asked and how much room the nodes had.
fn advice_in_words(topology: &Topology, policy: &str, req: &Request, a: &Advised) -> String {
    let cpus = if req.cpus == 1.0 { "CPU" } else { "CPUs" };
    let asked = if req.memory > 0 {
        format!(
            "{} {cpus} and {} MiB",
            req.cpus,
            req.memory.div_ceil(1 << 20)
        )
    } else {
        format!("{} {cpus}", req.cpus)
    };
    if !a.advice.fits {
        return format!(
            "{policy}: {asked} is more than the machine has free for this process ({}): every \
             node, as numad advises",
            a.free_in_words()
        );
    }
    let rooms: Vec<String> = topology
        .nodes()
        .iter()
        .zip(&a.rooms)
        .filter(|(n, _)| a.advice.nodes.contains(&n.os_id))
        .map(|(n, r)| {
            format!(
                "node {} has {:.1} idle CPUs and {} MiB free",
                n.os_id,
                r.cpus_free,
                r.memory_free >> 20
            )
        })
        .collect();
    format!(
        "{policy}: numad's pre-placement of {asked}, the fewest, least loaded nodes holding it: {}",
        rooms.join(", ")
    )
}

fn plural(s: &CpuSet) -> &'static str {
    if s.len() == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use numaplace::machine_room::MachineRoom;

    /// Two nodes: node 0 CPUs 0-1, node 1 CPUs 2-3, 1 GiB each.
    fn two() -> Topology {
        Topology::synthetic("pack:2 numa:1 l3:1 core:2 pu:1").unwrap()
    }

    fn everything(t: &Topology) -> Allowed {
        Allowed {
            cpus: t.span().clone(),
            mems: t.nodes().iter().map(|n| n.os_id).collect(),
        }
    }

    fn set(ids: &[u32]) -> CpuSet {
        ids.iter().copied().collect()
    }

    fn given(t: &Topology, list: &str) -> Source {
        Source::Given {
            list: list.into(),
            nodes: parse_nodes(list, t).unwrap(),
        }
    }

    /// Advice on `t` with each node's idle CPUs and free MiB.
    fn advised(t: &Topology, free: &[(f64, u64)], req: Request, allowed: &Allowed) -> Source {
        let mut idle = BTreeMap::new();
        let mut memory = BTreeMap::new();
        for (n, &(cpus, mib)) in t.nodes().iter().zip(free) {
            for (i, c) in n.span.iter().enumerate() {
                idle.insert(c, Some((cpus - i as f64).clamp(0.0, 1.0)));
            }
            memory.insert(n.os_id, mib << 20);
        }
        let room = MachineRoom {
            topology: t.clone(),
            idle,
            memory,
        };
        Source::Advised {
            policy: "auto".into(),
            req,
            advised: room.confined_to(&allowed.cpus, &allowed.mems).advise(&req),
        }
    }

    fn req(cpus: f64, mib: u64) -> Request {
        Request {
            cpus,
            memory: mib << 20,
        }
    }

    #[test]
    fn given_nodes_are_checked_against_the_machine() {
        let t = two();
        assert_eq!(parse_nodes("0-1", &t).unwrap(), set(&[0, 1]));
        assert_eq!(parse_nodes("1", &t).unwrap(), set(&[1]));
        for (list, why) in [
            ("2", "node 2 is not on this machine"),
            ("0-3", "nodes 2-3 are not on this machine"),
            ("x", "list syntax"),
            ("1-0", "list syntax"),
            ("", "no node named"),
        ] {
            let e = parse_nodes(list, &t).unwrap_err().to_string();
            assert!(e.contains(why), "{list:?}: {e}");
            assert!(e.contains(" 0-1") && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn one_node_is_preferred_and_its_cpus_taken() {
        let t = two();
        // The kernel is asked about MPOL_PREFERRED_MANY only for several.
        let asked = |n: &CpuSet| panic!("asked about preferred-many on {n}");
        let c = choose(
            &t,
            &given(&t, "1"),
            &everything(&t),
            MemoryMode::Preferred,
            asked,
        )
        .unwrap();
        assert!(c.placed);
        assert_eq!((c.nodes.clone(), c.cpus.clone()), (set(&[1]), set(&[2, 3])));
        assert_eq!(c.memory_policy, Some(MemoryPolicy::Preferred(1)));
        assert!(
            c.reason
                .contains("node 1: CPUs 2-3, memory preferred on node 1 (--nodes 1)"),
            "{}",
            c.reason
        );
    }

    #[test]
    fn several_nodes_are_preferred_many_where_the_kernel_has_it() {
        let t = two();
        let all = everything(&t);
        let c = choose(&t, &given(&t, "0-1"), &all, MemoryMode::Preferred, |_| true).unwrap();
        assert_eq!(
            c.memory_policy,
            Some(MemoryPolicy::PreferredMany(set(&[0, 1])))
        );
        assert_eq!(c.cpus, set(&[0, 1, 2, 3]));
        let c = choose(&t, &given(&t, "0-1"), &all, MemoryMode::Preferred, |_| {
            false
        })
        .unwrap();
        assert_eq!(c.memory_policy, Some(MemoryPolicy::Default));
        assert!(c.reason.contains("no MPOL_PREFERRED_MANY"), "{}", c.reason);
    }

    #[test]
    fn strict_modes_take_every_chosen_node() {
        let t = two();
        let all = everything(&t);
        let c = choose(&t, &given(&t, "1"), &all, MemoryMode::Bind, |_| true).unwrap();
        assert_eq!(c.memory_policy, Some(MemoryPolicy::Bind(set(&[1]))));
        let c = choose(&t, &given(&t, "0,1"), &all, MemoryMode::Interleave, |_| {
            false
        })
        .unwrap();
        assert_eq!(
            c.memory_policy,
            Some(MemoryPolicy::Interleave(set(&[0, 1])))
        );
    }

    #[test]
    fn the_callers_cpus_are_never_widened() {
        let t = two();
        let narrow = Allowed {
            cpus: set(&[1, 3]),
            mems: set(&[0, 1]),
        };
        let c = choose(&t, &given(&t, "1"), &narrow, MemoryMode::Preferred, |_| {
            true
        })
        .unwrap();
        assert_eq!(c.cpus, set(&[3]));
        let only0 = Allowed {
            cpus: set(&[0, 1]),
            mems: set(&[0, 1]),
        };
        let e = choose(&t, &given(&t, "1"), &only0, MemoryMode::Preferred, |_| true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--nodes 1: node 1 has no CPU this process may use (its CPUs: 0-1)"),
            "{e}"
        );
    }

    #[test]
    fn memory_the_caller_may_not_use_is_left_out_or_refused() {
        let t = two();
        let mems0 = Allowed {
            cpus: set(&[0, 1, 2, 3]),
            mems: set(&[0]),
        };
        let c = choose(&t, &given(&t, "0-1"), &mems0, MemoryMode::Bind, |_| true).unwrap();
        assert_eq!(c.memory_policy, Some(MemoryPolicy::Bind(set(&[0]))));
        assert!(
            c.reason.contains("node 1 without memory it may use"),
            "{}",
            c.reason
        );
        let c = choose(&t, &given(&t, "1"), &mems0, MemoryMode::Preferred, |_| true).unwrap();
        assert_eq!(c.memory_policy, Some(MemoryPolicy::Default));
        let e = choose(&t, &given(&t, "1"), &mems0, MemoryMode::Interleave, |_| {
            true
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--interleave: node 1 has no memory"), "{e}");
        assert!(e.contains("nodes with memory it may use: 0"), "{e}");
    }

    #[test]
    fn a_cpu_less_memory_node_gives_memory_only() {
        let mut d = two().to_desc();
        d.nodes[1].memory = 0;
        let t = Topology::new(d).unwrap();
        let e = choose(
            &t,
            &given(&t, "1"),
            &everything(&t),
            MemoryMode::Bind,
            |_| true,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--membind: node 1 has no memory"), "{e}");
        let c = choose(
            &t,
            &given(&t, "0-1"),
            &everything(&t),
            MemoryMode::Preferred,
            |_| true,
        )
        .unwrap();
        assert_eq!(c.memory_policy, Some(MemoryPolicy::Preferred(0)));
        assert_eq!(c.cpus, set(&[0, 1, 2, 3]));
    }

    #[test]
    fn the_advice_takes_the_least_loaded_node_the_caller_may_use() {
        let t = two();
        let all = everything(&t);
        // Node 1 has both CPUs idle, node 0 one.
        let src = advised(&t, &[(1.0, 800), (2.0, 800)], req(1.0, 100), &all);
        let c = choose(&t, &src, &all, MemoryMode::Preferred, |_| true).unwrap();
        assert_eq!(c.nodes, set(&[1]));
        assert_eq!(c.memory_policy, Some(MemoryPolicy::Preferred(1)));
        assert!(
            c.reason
                .contains("auto: numad's pre-placement of 1 CPU and 100 MiB"),
            "{}",
            c.reason
        );
        assert!(
            c.reason
                .contains("node 1 has 2.0 idle CPUs and 800 MiB free"),
            "{}",
            c.reason
        );
        // Confined to node 0's CPUs, the advice is node 0.
        let narrow = Allowed {
            cpus: set(&[0, 1]),
            mems: set(&[0, 1]),
        };
        let src = advised(&t, &[(1.0, 800), (2.0, 800)], req(1.0, 100), &narrow);
        let c = choose(&t, &src, &narrow, MemoryMode::Preferred, |_| true).unwrap();
        assert_eq!((c.nodes, c.cpus), (set(&[0]), set(&[0, 1])));
    }

    #[test]
    fn a_request_larger_than_the_machine_gets_every_node() {
        let t = two();
        let all = everything(&t);
        let src = advised(&t, &[(2.0, 800), (2.0, 800)], req(3.0, 0), &all);
        let c = choose(&t, &src, &all, MemoryMode::Preferred, |_| true).unwrap();
        assert_eq!(c.nodes, set(&[0, 1]));
        let src = advised(&t, &[(2.0, 800), (2.0, 800)], req(8.0, 0), &all);
        let c = choose(&t, &src, &all, MemoryMode::Preferred, |_| true).unwrap();
        assert_eq!(c.nodes, set(&[0, 1]));
        assert!(
            c.reason.contains("every node, as numad advises"),
            "{}",
            c.reason
        );
    }

    #[test]
    fn one_node_places_nothing() {
        let t = Topology::synthetic("pack:1 numa:1 l3:1 core:2 pu:1").unwrap();
        let c = choose(
            &t,
            &Source::OneNode,
            &everything(&t),
            MemoryMode::Bind,
            |_| true,
        )
        .unwrap();
        assert!(!c.placed && c.memory_policy.is_none(), "{c:?}");
        assert!(c.reason.contains("one NUMA node"), "{}", c.reason);
    }
}
