//! Synthetic machines from hwloc's synthetic syntax, without hwloc: the
//! builder every crate's tests and the simulator's presets use.
//!
//! `"pack:2 numa:2 l3:1(size=8MB) core:4 pu:2"` lists levels from the top,
//! each `TYPE:COUNT` children per parent. Types: `package`/`pack`/`socket`,
//! `numa`/`node`/`numanode`, `group`/`die` (ignored), `l1`/`l1d`, `l2`, `l3`,
//! `l4`, `core`, `pu`. Attributes: `(size=N)` on caches, `(memory=N)` on NUMA
//! nodes, with hwloc's suffixes (`KiB`.. binary, `kB`.. decimal). Defaults are hwloc's own
//! (hwloc 2.9 `lstopo -i "..."`): L1 32 KiB, L2 4 MiB, L3 and L4 16 MiB,
//! 1 GiB per NUMA node; without a NUMA level, one node spans the machine.
//! Kernel ids (CPUs, cores, nodes, packages) are assigned in order across
//! the machine, as hwloc does.

use std::fmt;

use super::*;

/// Why a synthetic description (`pack:2 numa:2 core:4 pu:2`) was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticError {
    /// The description as given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for SyntheticError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid synthetic topology {:?}: {} (expected levels like \"pack:2 l3:1 core:4 pu:2\")",
            self.input, self.reason
        )
    }
}

impl std::error::Error for SyntheticError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Package,
    Numa { memory: u64 },
    Group,
    Cache { level: u8, size: u64 },
    Core,
    Pu,
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Sizes as hwloc's synthetic syntax reads them: `KiB`/`MiB`/`GiB`/`TiB`
/// binary, `kB`/`MB`/`GB`/`TB` decimal, a bare number in bytes.
fn parse_size(s: &str) -> Option<u64> {
    const SUFFIXES: [(&str, u64); 9] = [
        ("TIB", 1 << 40),
        ("GIB", GIB),
        ("MIB", MIB),
        ("KIB", KIB),
        ("TB", 1_000_000_000_000),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1_000),
        ("B", 1),
    ];
    let upper = s.trim().to_ascii_uppercase();
    let (digits, mult) = SUFFIXES
        .iter()
        .find_map(|(suf, m)| upper.strip_suffix(suf).map(|d| (d.to_string(), *m)))
        .unwrap_or((upper.clone(), 1));
    digits.trim().parse::<u64>().ok()?.checked_mul(mult)
}

impl Topology {
    /// Builds the machine a synthetic description names. See the module docs.
    pub fn synthetic(text: &str) -> Result<Topology, SyntheticError> {
        let levels = parse_levels(text)?;
        let desc = describe(text, &levels)?;
        Topology::new(desc).map_err(|e| error(text)(e.0))
    }
}

/// An error about `text`, with the reason given.
fn error(text: &str) -> impl Fn(String) -> SyntheticError + '_ {
    move |reason| SyntheticError {
        input: text.to_string(),
        reason,
    }
}

/// One `TYPE:COUNT` or `TYPE:COUNT(KEY=VALUE)` token of `text`.
fn parse_level(text: &str, tok: &str) -> Result<(Level, u32), SyntheticError> {
    let err = error(text);
    let (name, rest) = tok
        .split_once(':')
        .ok_or_else(|| err(format!("{tok:?} is not TYPE:COUNT")))?;
    let (count, attrs) = match rest.split_once('(') {
        Some((c, a)) => {
            let a = a
                .strip_suffix(')')
                .ok_or_else(|| err(format!("{tok:?}: attributes need a closing ')'")))?;
            (c, Some(a))
        }
        None => (rest, None),
    };
    let count: u32 = count
        .parse()
        .ok()
        .filter(|&c| c > 0)
        .ok_or_else(|| err(format!("{tok:?}: count must be a positive number")))?;
    let attr = |key: &str| -> Result<Option<u64>, SyntheticError> {
        let Some(a) = attrs else { return Ok(None) };
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| err(format!("{tok:?}: attribute {a:?} is not KEY=VALUE")))?;
        if k.trim() != key {
            return Err(err(format!(
                "{tok:?}: {name} takes only the attribute {key}="
            )));
        }
        parse_size(v)
            .map(Some)
            .ok_or_else(|| err(format!("{tok:?}: {v:?} is not a size like 8MB")))
    };
    let level = match name.to_ascii_lowercase().as_str() {
        "package" | "pack" | "socket" => Level::Package,
        "numa" | "node" | "numanode" => Level::Numa {
            memory: attr("memory")?.unwrap_or(GIB),
        },
        "group" | "die" => Level::Group,
        "l1" | "l1d" | "l1cache" => Level::Cache {
            level: 1,
            size: attr("size")?.unwrap_or(32 * KIB),
        },
        "l2" | "l2cache" => Level::Cache {
            level: 2,
            size: attr("size")?.unwrap_or(4 * MIB),
        },
        "l3" | "l3cache" => Level::Cache {
            level: 3,
            size: attr("size")?.unwrap_or(16 * MIB),
        },
        "l4" | "l4cache" => Level::Cache {
            level: 4,
            size: attr("size")?.unwrap_or(16 * MIB),
        },
        "core" => Level::Core,
        "pu" => Level::Pu,
        other => return Err(err(format!("unknown level type {other:?}"))),
    };
    if !matches!(level, Level::Cache { .. } | Level::Numa { .. }) && attrs.is_some() {
        return Err(err(format!("{tok:?}: {name} takes no attributes")));
    }
    Ok((level, count))
}

/// The levels of `text`, top down, checked: the last is `pu`, and `pu`,
/// `package`, `core` and `numa` appear at most once.
fn parse_levels(text: &str) -> Result<Vec<(Level, u32)>, SyntheticError> {
    let err = error(text);
    let mut levels: Vec<(Level, u32)> = Vec::new();
    for tok in text.split_whitespace() {
        levels.push(parse_level(text, tok)?);
    }
    match levels.last() {
        Some((Level::Pu, _)) => {}
        _ => return Err(err("the last level must be pu:N".into())),
    }
    if levels.iter().filter(|(l, _)| *l == Level::Pu).count() > 1 {
        return Err(err("pu appears more than once".into()));
    }
    for unique in [Level::Package, Level::Core] {
        if levels.iter().filter(|(l, _)| *l == unique).count() > 1 {
            return Err(err(
                format!("{unique:?} appears more than once").to_lowercase()
            ));
        }
    }
    if levels
        .iter()
        .filter(|(l, _)| matches!(l, Level::Numa { .. }))
        .count()
        > 1
    {
        return Err(err("numa appears more than once".into()));
    }
    Ok(levels)
}

/// The machine `levels` describe, as `Topology::new` takes it.
fn describe(text: &str, levels: &[(Level, u32)]) -> Result<TopologyDesc, SyntheticError> {
    let err = error(text);
    let total: u64 = levels.iter().map(|&(_, c)| c as u64).product();
    if total > (crate::cpuset::MAX_CPU_ID as u64 + 1) {
        return Err(err(format!("{total} CPUs is more than Linux supports")));
    }
    let total = total as u32;

    // Number of PUs under one object of each level.
    let mut under = vec![1u32; levels.len()];
    for i in (0..levels.len()).rev() {
        under[i] = if i + 1 < levels.len() {
            under[i + 1] * levels[i + 1].1
        } else {
            1
        };
    }
    let groups = |i: usize| -> Vec<CpuSet> {
        (0..total / under[i])
            .map(|g| (g * under[i]..(g + 1) * under[i]).collect())
            .collect()
    };
    let find = |pred: &dyn Fn(&Level) -> bool| levels.iter().position(|(l, _)| pred(l));

    let packages = match find(&|l| *l == Level::Package) {
        Some(i) => groups(i),
        None => vec![CpuSet::first_n(total)],
    };
    let core_level = find(&|l| *l == Level::Core).unwrap_or(levels.len() - 1);
    // Cores numbered across the machine, as hwloc numbers synthetic ones.
    let cores = groups(core_level)
        .into_iter()
        .enumerate()
        .map(|(i, cpus)| CoreDesc {
            os_id: i as u32,
            cpus,
        })
        .collect();
    let nodes = match find(&|l| matches!(l, Level::Numa { .. })) {
        Some(i) => {
            let Level::Numa { memory } = levels[i].0 else {
                unreachable!()
            };
            groups(i)
                .into_iter()
                .enumerate()
                .map(|(n, cpus)| NodeDesc {
                    os_id: n as u32,
                    memory,
                    locality: cpus.clone(),
                    cpus,
                    package: None,
                })
                .collect()
        }
        None => vec![NodeDesc {
            os_id: 0,
            memory: GIB,
            cpus: CpuSet::first_n(total),
            locality: CpuSet::first_n(total),
            package: None,
        }],
    };
    let mut caches = Vec::new();
    for (i, &(l, _)) in levels.iter().enumerate() {
        if let Level::Cache { level, size } = l {
            for cpus in groups(i) {
                caches.push(CacheDesc {
                    level,
                    kind: if level == 1 {
                        CacheKind::Data
                    } else {
                        CacheKind::Unified
                    },
                    size,
                    line_size: 64,
                    ways: 0,
                    cpus,
                });
            }
        }
    }
    Ok(TopologyDesc {
        source: format!("synthetic:{}", text.trim()),
        packages: packages
            .into_iter()
            .enumerate()
            .map(|(i, cpus)| PackageDesc {
                os_id: i as u32,
                cpus,
            })
            .collect(),
        cores,
        nodes,
        caches,
        distances: None,
        cpu_kinds: Vec::new(),
    })
}
