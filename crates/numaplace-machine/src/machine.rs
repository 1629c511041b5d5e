//! Simulated machines: a topology and the numbers the contention model
//! needs, each with where it comes from.
//!
//! The presets are the machines of the papers (docs/references.md) and
//! two current Intel servers, each number with its source here and in
//! docs/simulator.md, "Machines". Where a
//! number the model needs is not published for that machine, the preset
//! says so (`Source::Assumed`) and the validation tests are what hold it
//! to account.

use std::borrow::Cow;

use numaplace_model::{Topology, TopologyError};
use serde::{Deserialize, Serialize};

/// Where a parameter's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A published measurement or specification.
    Published(Cow<'static, str>),
    /// Derived from published numbers by the stated rule.
    Derived(Cow<'static, str>),
    /// Not published for this machine: a stated assumption, to be
    /// checked against the validation targets.
    Assumed(Cow<'static, str>),
    /// Measured on the machine itself (`numaplace calibrate`): how.
    Measured(Cow<'static, str>),
}

/// A number and its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// The number, in the unit its field names.
    pub value: f64,
    /// Where it comes from: published, derived, assumed or measured.
    pub source: Source,
}

fn published(value: f64, from: &'static str) -> Param {
    Param {
        value,
        source: Source::Published(Cow::Borrowed(from)),
    }
}

fn derived(value: f64, how: &'static str) -> Param {
    Param {
        value,
        source: Source::Derived(Cow::Borrowed(how)),
    }
}

fn assumed(value: f64, why: &'static str) -> Param {
    Param {
        value,
        source: Source::Assumed(Cow::Borrowed(why)),
    }
}

pub use numaplace_model::PowerModel;

/// What the contention model needs to know about a machine besides its
/// topology.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineParams {
    /// Core clock, GHz.
    pub ghz: Param,
    /// Unloaded DRAM read latency to the local node, ns.
    pub local_latency_ns: Param,
    /// Unloaded latency from a CPU of node a to the memory of node b, ns,
    /// row-major by dense node id (the diagonal is the local latency).
    pub latency_ns: Vec<f64>,
    /// How `latency_ns` was obtained.
    pub latency_source: Source,
    /// Latency of a hit in the last-level cache, ns.
    pub llc_hit_ns: Param,
    /// `k` of the loaded-latency curve `L(u) = L0 + k u / (1 − u)` of a
    /// memory controller or link at utilisation `u` (docs/simulator.md, M3).
    pub queueing_k_ns: Param,
    /// Peak bandwidth of one node's memory controller, GB/s.
    pub node_bandwidth_gbs: Param,
    /// Bandwidth of the interconnect between two sockets, each direction,
    /// GB/s.
    pub link_bandwidth_gbs: Param,
    /// Cache-to-cache transfer of a modified line (HITM) within a socket
    /// and across sockets, ns.
    pub hitm_same_socket_ns: Param,
    /// The same transfer from a core of another socket, ns.
    pub hitm_cross_socket_ns: Param,
    /// Power model, where it was measured.
    pub power: Option<PowerModel>,
}

impl MachineParams {
    /// The scalar parameters with their names in the machine file, in the
    /// file's order (the node latencies and the power model aside).
    pub fn named(&self) -> [(&'static str, &Param); 8] {
        [
            ("ghz", &self.ghz),
            ("local_latency_ns", &self.local_latency_ns),
            ("llc_hit_ns", &self.llc_hit_ns),
            ("queueing_k_ns", &self.queueing_k_ns),
            ("node_bandwidth_gbs", &self.node_bandwidth_gbs),
            ("link_bandwidth_gbs", &self.link_bandwidth_gbs),
            ("hitm_same_socket_ns", &self.hitm_same_socket_ns),
            ("hitm_cross_socket_ns", &self.hitm_cross_socket_ns),
        ]
    }
}

/// A machine to simulate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// Its name: a preset's (`westmere-2s`) or a machine file's.
    pub name: String,
    /// Its packages, nodes, caches, cores and CPUs.
    pub topology: Topology,
    /// The numbers the model needs: latencies, bandwidths, caches, power.
    pub params: MachineParams,
}

/// The presets, by name.
pub const PRESETS: [&str; 5] = [
    "westmere-2s",
    "barcelona-4s",
    "core2duo",
    "cascadelake-2s",
    "sapphirerapids-2s-snc4",
];

/// Why a machine could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineError {
    /// No preset has this name (see [`PRESETS`]).
    UnknownPreset(String),
    /// Its topology is not one the model can use.
    Topology(TopologyError),
    /// A machine file that cannot be read or used: which, and why.
    File {
        /// The file, as given.
        path: String,
        /// What is wrong with it.
        message: String,
    },
}

impl std::fmt::Display for MachineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MachineError::UnknownPreset(n) => write!(
                f,
                "unknown machine preset {n:?}: numaplace has {}",
                PRESETS.join(", ")
            ),
            MachineError::Topology(e) => write!(f, "{e}"),
            MachineError::File { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for MachineError {}

/// A synthetic topology with the given node distance matrix.
fn topology(levels: &str, distances: Vec<u32>) -> Result<Topology, MachineError> {
    let t =
        Topology::synthetic(levels).map_err(|e| MachineError::Topology(TopologyError(e.reason)))?;
    let mut d = t.to_desc();
    d.distances = Some(distances);
    Topology::new(d).map_err(MachineError::Topology)
}

/// Latency matrix from the SLIT distances, scaled so that the firmware's
/// remote/local ratio becomes the measured one: `local · (1 + (d/10 - 1) ·
/// s)` with `s` chosen so the farthest node costs `farthest_ns`.
fn latencies_from_distances(t: &Topology, local_ns: f64, farthest_ns: f64) -> Vec<f64> {
    let far = t.distances().iter().copied().max().unwrap_or(10) as f64 / 10.0;
    let scale = if far > 1.0 {
        (farthest_ns / local_ns - 1.0) / (far - 1.0)
    } else {
        0.0
    };
    t.distances()
        .iter()
        .map(|&d| local_ns * (1.0 + (d as f64 / 10.0 - 1.0) * scale))
        .collect()
}

impl Machine {
    /// A preset by name, or a synthetic machine ([`Machine::synthetic`])
    /// for a name that starts with `synthetic:`.
    pub fn preset(name: &str) -> Result<Machine, MachineError> {
        if let Some(spec) = name.strip_prefix(SYNTHETIC_PREFIX) {
            return Machine::synthetic(spec);
        }
        match name {
            "westmere-2s" => westmere_2s(),
            "barcelona-4s" => barcelona_4s(),
            "core2duo" => core2duo(),
            "cascadelake-2s" => cascadelake_2s(),
            "sapphirerapids-2s-snc4" => sapphirerapids_2s_snc4(),
            other => Err(MachineError::UnknownPreset(other.to_string())),
        }
    }

    /// Any topology numaplace can read, with the stated default parameters:
    /// a 2.5 GHz core, 90 ns local latency, remote latency growing with the
    /// SLIT distance as on the presets (distance 21 ≈ 1.7 × local), 20 GB/s
    /// per node and per link, HITM 50 / 110 ns.
    pub fn generic(name: &str, topology: Topology) -> Machine {
        let local = 90.0;
        let scale_per_10 = 0.64; // 21 -> 1 + 1.1 × 0.64 ≈ 1.7 × local
        let latency_ns = topology
            .distances()
            .iter()
            .map(|&d| local * (1.0 + (d as f64 / 10.0 - 1.0) * scale_per_10))
            .collect();
        Machine {
            name: name.to_string(),
            params: MachineParams {
                ghz: assumed(2.5, "generic default"),
                local_latency_ns: assumed(local, "generic default"),
                latency_ns,
                latency_source: Source::Assumed(
                    "generic default: local × (1 + 0.64 (d/10 - 1)) for SLIT distance d".into(),
                ),
                llc_hit_ns: assumed(15.0, "generic default"),
                queueing_k_ns: assumed(10.4, "not published: Cascade Lake's fitted value"),
                node_bandwidth_gbs: assumed(20.0, "generic default"),
                link_bandwidth_gbs: assumed(20.0, "generic default"),
                hitm_same_socket_ns: assumed(50.0, "generic default, after cascadelake-2s"),
                hitm_cross_socket_ns: assumed(110.0, "generic default, after cascadelake-2s"),
                power: None,
            },
            topology,
        }
    }
}

/// What names a synthetic machine where a preset is asked for.
pub const SYNTHETIC_PREFIX: &str = "synthetic:";

/// The token of a synthetic description that adds memory-only nodes.
const MEMORY_ONLY: &str = "memory-only:";

/// At most this many memory-only (CPU-less) nodes.
const MAX_MEMORY_ONLY: u32 = 8;

impl Machine {
    /// A machine of any shape, for generated mixes and what-ifs:
    /// `LEVELS [memory-only:N]`. `LEVELS` is hwloc's synthetic syntax
    /// ([`Topology::synthetic`], e.g. `pack:2 numa:4 l3:1(size=32MiB)
    /// core:8 pu:2`); `memory-only:N` adds N nodes with memory and no CPU
    /// (CXL or persistent-memory expanders), hung from the packages in
    /// turn. The distances are the ones firmware reports for such
    /// machines (the shapes of the presets and fixtures): 10 within a node,
    /// 12 between nodes of one package (sub-NUMA clustering, as
    /// sapphirerapids-2s-snc4), 21 to another package, 31 to a package of
    /// the other half of a machine of more than 4 packages (two hops, as
    /// 8-socket glueless boards), and for a memory-only node 17 from its
    /// package and 28 from the others. The parameters are
    /// [`Machine::generic`]'s.
    pub fn synthetic(spec: &str) -> Result<Machine, MachineError> {
        let bad = |reason: String| {
            MachineError::Topology(TopologyError(format!(
                "synthetic machine {spec:?}: {reason}"
            )))
        };
        let mut levels = Vec::new();
        let mut memory_only = 0u32;
        for tok in spec.split_whitespace() {
            match tok.strip_prefix(MEMORY_ONLY) {
                Some(n) => {
                    memory_only = n
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_MEMORY_ONLY).contains(n))
                        .ok_or_else(|| {
                            bad(format!(
                                "{tok:?}: memory-only nodes must be 1 to {MAX_MEMORY_ONLY}"
                            ))
                        })?
                }
                None => levels.push(tok),
            }
        }
        let t = Topology::synthetic(&levels.join(" ")).map_err(|e| bad(e.reason))?;
        let mut d = t.to_desc();
        let packages = d.packages.len();
        // Each CPU node's package, by its CPUs.
        let mut pkg_of: Vec<usize> = d
            .nodes
            .iter()
            .map(|n| {
                d.packages
                    .iter()
                    .position(|p| n.cpus.iter().next().is_some_and(|c| p.cpus.contains(c)))
                    .unwrap_or(0)
            })
            .collect();
        let cpu_nodes = d.nodes.len();
        let next_id = d.nodes.iter().map(|n| n.os_id + 1).max().unwrap_or(0);
        let memory = d.nodes.first().map_or(1 << 30, |n| n.memory);
        for i in 0..memory_only {
            let p = i as usize % packages;
            d.nodes.push(numaplace_model::topology::NodeDesc {
                os_id: next_id + i,
                memory,
                cpus: numaplace_model::CpuSet::new(),
                locality: d.packages[p].cpus.clone(),
                package: Some(d.packages[p].os_id),
            });
            pkg_of.push(p);
        }
        let n = d.nodes.len();
        let mut dist = vec![0u32; n * n];
        for a in 0..n {
            for b in 0..n {
                let (pa, pb) = (pkg_of[a], pkg_of[b]);
                let far_pkg = if packages > 4 && pa / 4 != pb / 4 {
                    31
                } else {
                    21
                };
                dist[a * n + b] = if a == b {
                    10
                } else if a >= cpu_nodes || b >= cpu_nodes {
                    if pa == pb { 17 } else { 28 }
                } else if pa == pb {
                    12
                } else {
                    far_pkg
                };
            }
        }
        d.distances = Some(dist);
        let t = Topology::new(d).map_err(|e| bad(e.0))?;
        Ok(Machine::generic(&format!("{SYNTHETIC_PREFIX}{spec}"), t))
    }
}

/// The most a world may differ from the machine the policies are told,
/// percent (exclusive): at 100 % a latency or a bandwidth could be drawn
/// as zero.
pub const MAX_MISMATCH_PERCENT: f64 = 100.0;

/// Whether `percent` is a mismatch [`Machine::perturbed`] accepts:
/// `0 <= percent < 100`; the message says what is allowed.
pub fn check_mismatch(percent: f64) -> Result<(), String> {
    if percent.is_finite() && (0.0..MAX_MISMATCH_PERCENT).contains(&percent) {
        Ok(())
    } else {
        Err(format!(
            "{percent} is not a mismatch: give a percentage from 0 to below {MAX_MISMATCH_PERCENT} \
             (each machine parameter of the world is drawn within ±P % of the machine the \
             policies see)"
        ))
    }
}

impl Machine {
    /// The machine as the world has it when it differs from what policies
    /// are told (issue 31, item 3; `compare --mismatch P`): every number
    /// of [`MachineParams`] but the power model — the clock, the local
    /// latency, the latency matrix, the LLC hit, the queueing constant,
    /// node and link bandwidth, both HITM latencies — multiplied by its
    /// own factor drawn uniformly from `[1 − P/100, 1 + P/100]` by a
    /// generator seeded with `seed`. The latency matrix stays a matrix of
    /// this machine: its diagonal is the drawn local latency, each pair of
    /// distinct nodes gets one factor (a symmetric matrix stays
    /// symmetric), and no remote entry is below the local one. Each
    /// parameter's source says it was drawn, from what and by how much;
    /// the name gains `~P%`. The topology is the same. `percent` must pass
    /// [`check_mismatch`]; 0 gives the machine back unchanged.
    pub fn perturbed(&self, percent: f64, seed: u64) -> Machine {
        assert!(
            check_mismatch(percent).is_ok(),
            "Machine::perturbed: {percent} % is outside 0 to below 100"
        );
        if percent == 0.0 {
            return self.clone();
        }
        let mut rng = numaplace_model::rng::Rng::new(seed);
        let p = percent / 100.0;
        let mut factor = move || 1.0 + p * (2.0 * rng.unit() - 1.0);
        let tag = |f: f64, nominal: f64, was: &Source| {
            let (kind, text) = match was {
                Source::Published(s) => ("published", s),
                Source::Derived(s) => ("derived", s),
                Source::Assumed(s) => ("assumed", s),
                Source::Measured(s) => ("measured", s),
            };
            Source::Assumed(Cow::Owned(format!(
                "perturbed: drawn within ±{percent} % (seed {seed}), × {f:.4} of the nominal \
                 {nominal} ({kind}: {text})"
            )))
        };
        let mut draw = |param: &Param| {
            let f = factor();
            Param {
                value: param.value * f,
                source: tag(f, param.value, &param.source),
            }
        };
        let old = &self.params;
        let mut params = old.clone();
        params.ghz = draw(&old.ghz);
        params.local_latency_ns = draw(&old.local_latency_ns);
        params.llc_hit_ns = draw(&old.llc_hit_ns);
        params.queueing_k_ns = draw(&old.queueing_k_ns);
        params.node_bandwidth_gbs = draw(&old.node_bandwidth_gbs);
        params.link_bandwidth_gbs = draw(&old.link_bandwidth_gbs);
        params.hitm_same_socket_ns = draw(&old.hitm_same_socket_ns);
        params.hitm_cross_socket_ns = draw(&old.hitm_cross_socket_ns);
        let local = params.local_latency_ns.value;
        let n = self.topology.nodes().len();
        if old.latency_ns.len() == n * n {
            for a in 0..n {
                params.latency_ns[a * n + a] = local;
                for b in a + 1..n {
                    let f = factor();
                    for (i, j) in [(a, b), (b, a)] {
                        params.latency_ns[i * n + j] = (old.latency_ns[i * n + j] * f).max(local);
                    }
                }
            }
        }
        params.latency_source = Source::Assumed(Cow::Owned(format!(
            "perturbed: the diagonal is the drawn local latency, each pair of distinct nodes \
             × its own factor within ±{percent} % (seed {seed}), never below local; nominal: {}",
            match &old.latency_source {
                Source::Published(s)
                | Source::Derived(s)
                | Source::Assumed(s)
                | Source::Measured(s) => s,
            }
        )));
        Machine {
            name: format!("{}~{percent}%", self.name),
            topology: self.topology.clone(),
            params,
        }
    }
}

fn westmere_2s() -> Result<Machine, MachineError> {
    // [Rao13] Table 1: 2 x Xeon E5620, 4 cores / 8 threads per socket,
    // L1 32+32 KB, L2 256 KB, L3 12 MB per socket, 2 nodes.
    let t = topology(
        "pack:2 numa:1 l3:1(size=12MiB) l2:4(size=256KiB) l1d:1(size=32KiB) core:1 pu:2",
        vec![10, 21, 21, 10],
    )?;
    let local = 81.0;
    let remote = local * 1.72;
    Ok(Machine {
        name: "westmere-2s".into(),
        params: MachineParams {
            ghz: published(2.4, "[Rao13] Table 1: Xeon E5620 2.4 GHz"),
            local_latency_ns: published(
                local,
                "Sandra: X5570 81 ns (published for Nehalem-EP and Westmere-EP: about 65-87 ns; X5670 87 ns, Anandtech 2978 p.5)",
            ),
            latency_ns: vec![local, remote, remote, local],
            latency_source: Source::Derived(
                "remote 70-75 % above local (Intel; IBM x3620 M3 guide): 1.72 x".into(),
            ),
            llc_hit_ns: assumed(
                17.0,
                "not in the seeds: about 40 cycles for a Nehalem/Westmere L3 hit",
            ),
            queueing_k_ns: assumed(10.4, "not published: Cascade Lake's fitted value"),
            node_bandwidth_gbs: published(25.6, "3 x DDR3-1066 per socket"),
            link_bandwidth_gbs: derived(
                11.7,
                "QPI 5.86 GT/s, from 6.4 GT/s = 12.8 GB/s per direction",
            ),
            hitm_same_socket_ns: assumed(
                49.0,
                "not published for Westmere: cascadelake-2s's MLC value",
            ),
            hitm_cross_socket_ns: assumed(
                113.0,
                "not published for Westmere: cascadelake-2s's MLC value",
            ),
            power: Some(PowerModel::FIG7),
        },
        topology: t,
    })
}

fn barcelona_4s() -> Result<Machine, MachineError> {
    // [Blagodurov11] §2.1: 4 x Opteron 8356, 4 cores per socket, 2 MB shared L3,
    // 512 KB L2 per core, 4 nodes x 16 GB. Links form a square: chips 0
    // and 3 (and 1 and 2) are two hops apart (AMD guide 40555), so the
    // distances are those of a 4-socket Opteron board.
    let t = topology(
        "pack:4 numa:1(memory=16GiB) l3:1(size=2MiB) l2:4(size=512KiB) l1d:1(size=64KiB) core:1 pu:1",
        vec![
            10, 16, 16, 22, 16, 10, 22, 16, 16, 22, 10, 16, 22, 16, 16, 10,
        ],
    )?;
    let local = 100.0;
    let latency_ns = t
        .distances()
        .iter()
        .map(|&d| match d {
            10 => local,
            16 => local * 1.08,
            _ => local * 1.30,
        })
        .collect();
    Ok(Machine {
        name: "barcelona-4s".into(),
        params: MachineParams {
            ghz: published(2.3, "[Blagodurov11] §2.1: Opteron 8356 2.3 GHz"),
            local_latency_ns: published(local, "McCalpin 2010: local 100 ns on a 4-socket Opteron"),
            latency_ns,
            latency_source: Source::Published(
                "AMD guide 40555: 1-hop 108 %, 2-hop 130 % of local read time".into(),
            ),
            llc_hit_ns: assumed(
                21.0,
                "not in the seeds: about 48 cycles for a Barcelona L3 hit",
            ),
            queueing_k_ns: assumed(
                60.0,
                "not published: a two-channel DDR2 controller queues far sooner than Cascade Lake's six DDR4 channels; checked against [Blagodurov11] Fig. 4 (validation target 6)",
            ),
            node_bandwidth_gbs: assumed(
                5.3,
                "no published figure for this machine: about half the 10.7 GB/s peak of dual-channel DDR2-667, what STREAM sustains on such a socket",
            ),
            link_bandwidth_gbs: assumed(
                4.0,
                "no published figure for this machine: a 16-bit HyperTransport link at 2 GT/s, each direction",
            ),
            hitm_same_socket_ns: assumed(60.0, "not published: between L3 hit and local DRAM"),
            hitm_cross_socket_ns: assumed(140.0, "not published: about a remote DRAM access"),
            power: None,
        },
        topology: t,
    })
}

fn core2duo() -> Result<Machine, MachineError> {
    // [Symbiosis-Bloom] §2.3.2, §4.2: two cores sharing a 4 MB 16-way L2, one node.
    let t = topology(
        "pack:1 numa:1 l2:1(size=4MiB) l1d:2(size=32KiB) core:1 pu:1",
        vec![10],
    )?;
    Ok(Machine {
        name: "core2duo".into(),
        params: MachineParams {
            ghz: published(2.4, "[Symbiosis-Bloom] §4.2: 2.34-2.6 GHz"),
            local_latency_ns: assumed(70.0, "not published: a front-side-bus DDR2 system"),
            latency_ns: vec![70.0],
            latency_source: Source::Assumed("one node".into()),
            llc_hit_ns: assumed(6.0, "not in the seeds: about 14 cycles for a Core 2 L2 hit"),
            queueing_k_ns: assumed(10.4, "not published: Cascade Lake's fitted value"),
            node_bandwidth_gbs: assumed(8.5, "not published: a 1066 MT/s front-side bus"),
            link_bandwidth_gbs: assumed(8.5, "one socket: no link"),
            hitm_same_socket_ns: assumed(20.0, "not published: shared L2"),
            hitm_cross_socket_ns: assumed(20.0, "one socket"),
            power: None,
        },
        topology: t,
    })
}

fn cascadelake_2s() -> Result<Machine, MachineError> {
    // Two 20-core sockets with a 27.5 MiB L3 each, as the shared fixture
    // nri-2-socket-4-node-40-core (without its sub-NUMA clustering).
    let t = topology(
        "pack:2 numa:1 l3:1(size=28160KiB) l2:20(size=1MiB) l1d:1(size=32KiB) core:1 pu:2",
        vec![10, 21, 21, 10],
    )?;
    let latency_ns = latencies_from_distances(&t, 81.0, 141.0);
    Ok(Machine {
        name: "cascadelake-2s".into(),
        params: MachineParams {
            ghz: assumed(
                2.5,
                "not in the MLC output: a typical Cascade Lake base clock",
            ),
            local_latency_ns: published(81.0, "Intel MLC (cascadelake_mlc.txt): local 81 ns"),
            latency_ns,
            latency_source: Source::Published("Intel MLC: remote 141 ns".into()),
            llc_hit_ns: assumed(
                20.0,
                "not in the MLC output: about 50 cycles for a Cascade Lake L3 hit",
            ),
            queueing_k_ns: derived(
                10.4,
                "least squares of Intel MLC's Cascade Lake loaded latencies (82 ns idle; 94, 103, 120 ns at 30, 53, 80 % of peak)",
            ),
            node_bandwidth_gbs: published(113.0, "Intel MLC: 113 GB/s local per node"),
            link_bandwidth_gbs: published(34.0, "Intel MLC: 34 GB/s remote"),
            hitm_same_socket_ns: published(49.0, "Intel MLC: same-socket HITM 49 ns"),
            hitm_cross_socket_ns: published(113.0, "Intel MLC: cross-socket HITM 113 ns"),
            power: None,
        },
        topology: t,
    })
}

fn sapphirerapids_2s_snc4() -> Result<Machine, MachineError> {
    // 8 nodes: two sockets in SNC4 mode, one L3 per socket spanning its
    // four nodes; 14 cores per node (56 per socket).
    let mut d = vec![0u32; 64];
    for a in 0..8 {
        for b in 0..8 {
            d[a * 8 + b] = if a == b {
                10
            } else if a / 4 == b / 4 {
                12
            } else {
                21
            };
        }
    }
    let t = topology(
        "pack:2 l3:1(size=105MiB) numa:4 l2:14(size=2MiB) l1d:1(size=48KiB) core:1 pu:2",
        d,
    )?;
    let latency_ns = t
        .distances()
        .iter()
        .map(|&d| match d {
            10 => 96.0,
            12 => 113.0,
            _ => 188.0,
        })
        .collect();
    Ok(Machine {
        name: "sapphirerapids-2s-snc4".into(),
        params: MachineParams {
            ghz: assumed(
                2.0,
                "not in the MLC output: a typical Sapphire Rapids base clock",
            ),
            local_latency_ns: published(96.0, "Intel MLC (sapphirerapids_mlc.txt): local 95-97 ns"),
            latency_ns,
            latency_source: Source::Published(
                "Intel MLC: same socket other node 102-124 ns (113 used), remote socket 186-189 ns (188 used)".into(),
            ),
            llc_hit_ns: assumed(
                33.0,
                "not in the MLC output: about 66 cycles for a Sapphire Rapids L3 hit",
            ),
            queueing_k_ns: assumed(10.4, "not published: Cascade Lake's fitted value"),
            node_bandwidth_gbs: published(61.0, "Intel MLC: about 61 GB/s per node, same socket"),
            link_bandwidth_gbs: published(56.0, "Intel MLC: about 56 GB/s cross-socket"),
            hitm_same_socket_ns: assumed(49.0, "not in the MLC output: cascadelake-2s's value"),
            hitm_cross_socket_ns: assumed(113.0, "not in the MLC output: cascadelake-2s's value"),
            power: None,
        },
        topology: t,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_the_published_shapes() {
        let m = Machine::preset("westmere-2s").unwrap();
        let t = &m.topology;
        assert_eq!(
            (t.packages().len(), t.nodes().len(), t.llcs().len()),
            (2, 2, 2)
        );
        assert_eq!((t.cores().len(), t.cpus().len()), (8, 16));
        assert_eq!(t.llc_size(0), Some(12 << 20));
        assert_eq!(m.params.latency_ns.len(), 4);
        assert!((m.params.latency_ns[1] / m.params.latency_ns[0] - 1.72).abs() < 1e-9);
        // [Bae12] Fig. 7: one busy core per socket, no SMT.
        let p = m.params.power.as_ref().unwrap();
        assert!((p.watts(2.0, 0.0) - (104.63 + 2.0 * 8.69)).abs() < 1e-9);

        let m = Machine::preset("barcelona-4s").unwrap();
        let t = &m.topology;
        assert_eq!(
            (t.packages().len(), t.nodes().len(), t.cores().len()),
            (4, 4, 16)
        );
        assert_eq!(t.llc_size(3), Some(2 << 20));
        assert_eq!(t.nodes()[3].memory, 16 << 30);
        // 0 and 3 are two hops apart: 130 % of local; 0 and 1 one hop: 108 %.
        assert_eq!(m.params.latency_ns[3], 130.0);
        assert_eq!(m.params.latency_ns[1], 108.0);

        let m = Machine::preset("core2duo").unwrap();
        assert_eq!(m.topology.cores().len(), 2);
        assert_eq!(m.topology.llcs().len(), 1);
        assert_eq!(m.topology.llc_size(0), Some(4 << 20));

        let m = Machine::preset("cascadelake-2s").unwrap();
        assert_eq!(m.topology.cpus().len(), 80);
        assert!((m.params.latency_ns[1] - 141.0).abs() < 1e-9);

        let m = Machine::preset("sapphirerapids-2s-snc4").unwrap();
        let t = &m.topology;
        assert_eq!(
            (t.nodes().len(), t.llcs().len(), t.cpus().len()),
            (8, 2, 224)
        );
        assert_eq!(t.llcs()[0].nodes.len(), 4, "one L3 spans four SNC nodes");
        assert_eq!(m.params.latency_ns[1], 113.0);
        assert_eq!(m.params.latency_ns[4], 188.0);
    }

    #[test]
    fn every_preset_builds_and_unknown_names_are_refused() {
        for n in PRESETS {
            let m = Machine::preset(n).unwrap();
            let nn = m.topology.nodes().len();
            assert_eq!(m.params.latency_ns.len(), nn * nn, "{n}");
            for a in 0..nn {
                assert_eq!(
                    m.params.latency_ns[a * nn + a],
                    m.params.local_latency_ns.value,
                    "{n}"
                );
            }
        }
        let e = Machine::preset("pentium").unwrap_err().to_string();
        assert!(e.contains("unknown machine preset \"pentium\""), "{e}");
    }

    /// Every number of the parameters, named, in a fixed order.
    fn numbers(m: &Machine) -> Vec<(&'static str, f64)> {
        let p = &m.params;
        let mut v = vec![
            ("ghz", p.ghz.value),
            ("local", p.local_latency_ns.value),
            ("llc_hit", p.llc_hit_ns.value),
            ("queueing_k", p.queueing_k_ns.value),
            ("node_bw", p.node_bandwidth_gbs.value),
            ("link_bw", p.link_bandwidth_gbs.value),
            ("hitm_same", p.hitm_same_socket_ns.value),
            ("hitm_cross", p.hitm_cross_socket_ns.value),
        ];
        v.extend(p.latency_ns.iter().map(|&x| ("latency", x)));
        v
    }

    #[test]
    fn a_perturbed_world_stays_within_its_bounds_and_its_matrix_stays_one() {
        for name in PRESETS
            .iter()
            .copied()
            .chain(["synthetic:pack:2 numa:2 core:2 pu:1 memory-only:2"])
        {
            let m = Machine::preset(name).unwrap();
            let n = m.topology.nodes().len();
            for seed in 0..20 {
                let w = m.perturbed(25.0, seed);
                assert_eq!(w.topology, m.topology);
                assert_eq!(w.params.power, m.params.power);
                let local = w.params.local_latency_ns.value;
                for ((what, was), (_, now)) in numbers(&m).into_iter().zip(numbers(&w)) {
                    let (lo, hi) = (was * 0.75, was * 1.25);
                    let ok = (lo - 1e-9..=hi + 1e-9).contains(&now)
                        // a remote entry raised to the drawn local latency
                        || (what == "latency" && now == local);
                    assert!(ok, "{name} seed {seed}: {what} {was} -> {now}");
                }
                for a in 0..n {
                    assert_eq!(w.params.latency_ns[a * n + a], local, "{name}: diagonal");
                    for b in 0..n {
                        let (ab, ba) = (
                            w.params.latency_ns[a * n + b],
                            w.params.latency_ns[b * n + a],
                        );
                        assert!(ab >= local, "{name}: remote {ab} below local {local}");
                        if m.params.latency_ns[a * n + b] == m.params.latency_ns[b * n + a] {
                            assert_eq!(ab, ba, "{name}: symmetric stays symmetric");
                        }
                    }
                }
                for s in [
                    &w.params.ghz.source,
                    &w.params.link_bandwidth_gbs.source,
                    &w.params.latency_source,
                ] {
                    assert!(
                        matches!(s, Source::Assumed(t) if t.starts_with("perturbed: ") && t.contains("25 %")),
                        "{s:?}"
                    );
                }
            }
            // Different from the nominal machine: every scalar moves
            // (a factor of exactly 1 has probability 0).
            let w = m.perturbed(25.0, 3);
            for ((what, was), (_, now)) in numbers(&m).into_iter().zip(numbers(&w)).take(8) {
                assert_ne!(was, now, "{name}: {what} did not move");
            }
        }
    }

    #[test]
    fn a_perturbed_world_is_the_same_for_a_seed_and_differs_between_seeds() {
        let m = Machine::preset("barcelona-4s").unwrap();
        let (a, b, c) = (
            m.perturbed(10.0, 7),
            m.perturbed(10.0, 7),
            m.perturbed(10.0, 8),
        );
        assert_eq!(a.params, b.params);
        assert_eq!(a.name, "barcelona-4s~10%");
        assert_ne!(numbers(&a), numbers(&c));
        // Remote entries are drawn each on its own: not all by one factor.
        let ratios: Vec<f64> = [1, 2, 3, 6]
            .iter()
            .map(|&i| a.params.latency_ns[i] / m.params.latency_ns[i])
            .collect();
        assert!(
            ratios.windows(2).any(|w| (w[0] - w[1]).abs() > 1e-6),
            "{ratios:?}"
        );
    }

    #[test]
    fn zero_mismatch_is_the_machine_itself_and_bad_ones_are_refused() {
        let m = Machine::preset("westmere-2s").unwrap();
        let w = m.perturbed(0.0, 42);
        assert_eq!(w.params, m.params);
        assert_eq!(w.name, m.name);
        for bad in [-1.0, 100.0, 150.0, f64::NAN, f64::INFINITY] {
            let e = check_mismatch(bad).unwrap_err();
            assert!(e.contains("from 0 to below 100"), "{e}");
        }
        assert!(check_mismatch(99.9).is_ok() && check_mismatch(0.0).is_ok());
    }

    #[test]
    fn generic_machines_from_any_topology() {
        let t = Topology::synthetic("pack:2 numa:1 core:2 pu:1").unwrap();
        let m = Machine::generic("synthetic", t);
        let remote = 90.0 * (1.0 + (20.0 / 10.0 - 1.0) * 0.64);
        let want = [90.0, remote, remote, 90.0];
        for (got, want) in m.params.latency_ns.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{:?}", m.params.latency_ns);
        }
        assert!(matches!(m.params.ghz.source, Source::Assumed(_)));
    }
}
