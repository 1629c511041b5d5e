//! The room a machine has for a process that has not started yet, as numad
//! reads it for `numad -w`: the topology, each CPU's idle share over a
//! short sample and each node's free memory, and the pre-placement advice
//! from them (`numaplace_policy::preplacement`). `advise --numad-w` and
//! `exec` both ask it.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result};
use numaplace_linux::cpu_idle::sample_idle;
use numaplace_linux::nodes::read_node_available;
use numaplace_linux::{SysRoot, TopologySource, discover};
use numaplace_model::{CpuSet, Topology};
use numaplace_policy::preplacement::{self, Advice, NodeRoom, Request};

use crate::error::InputError;

/// How long each CPU's idle time is sampled. numad sleeps 2 s between its
/// two reads; libvirt waits for the answer while a domain starts, and a
/// fifth of a second is 20 clock ticks per CPU, a 5 % resolution.
pub(crate) const SAMPLE: Duration = Duration::from_millis(200);

/// More CPUs than a request may ask for (libvirt's vCPU count is an
/// unsigned short).
pub(crate) const MAX_CPUS: f64 = 65_535.0;

/// A machine's free room, read once.
#[derive(Debug, Clone)]
pub struct MachineRoom {
    /// The machine.
    pub topology: Topology,
    /// Each CPU's idle share (kernel CPU id -> 0..1; `None`: its counters
    /// did not move).
    pub idle: BTreeMap<u32, Option<f64>>,
    /// Each node's free memory as numad counts it (kernel node id -> bytes).
    pub memory: BTreeMap<u32, u64>,
}

/// The advice and what it was given.
#[derive(Debug, Clone)]
pub struct Advised {
    /// The nodes advised, or why none.
    pub advice: Advice,
    /// Each node's room, by dense node id.
    pub rooms: Vec<NodeRoom>,
}

impl Advised {
    /// The advised nodes as a set of kernel ids.
    pub fn nodes(&self) -> CpuSet {
        self.advice.nodes.iter().copied().collect()
    }

    /// When the request did not fit: what the machine has free, in words.
    pub fn free_in_words(&self) -> String {
        let cpus: f64 = self.rooms.iter().map(|r| r.cpus_free).sum();
        let mib: u64 = self.rooms.iter().map(|r| r.memory_free >> 20).sum();
        format!("{cpus:.1} idle CPUs, {mib} MiB free memory")
    }
}

impl MachineRoom {
    /// Reads the machine under `root`: its topology (hwloc), each CPU's
    /// idle share over `SAMPLE` and each node's free memory.
    pub fn read(root: &SysRoot) -> Result<MachineRoom> {
        let topology = discover(&TopologySource::Sysfs(root.clone()))?;
        MachineRoom::of(root, topology)
    }

    /// [`MachineRoom::read`] of a machine whose topology was read already.
    pub fn of(root: &SysRoot, topology: Topology) -> Result<MachineRoom> {
        let idle = sample_idle(root, SAMPLE).context("the CPUs' idle time")?;
        if idle.values().all(Option::is_none) {
            tracing::info!(
                "{}: the CPU times did not move over {SAMPLE:?} (a snapshot?): every CPU counts as idle",
                root.join("proc/stat").display()
            );
        }
        let memory = read_node_available(root);
        if memory.is_empty() {
            return Err(InputError(format!(
                "{}: no node's meminfo could be read: numaplace cannot tell where memory is free",
                root.join("sys/devices/system/node").display()
            ))
            .into());
        }
        Ok(MachineRoom {
            topology,
            idle,
            memory,
        })
    }

    /// numad's pre-placement of `req` (module documentation of
    /// `numaplace_policy::preplacement`).
    pub fn advise(&self, req: &Request) -> Advised {
        let rooms = preplacement::rooms(&self.topology, &self.idle, &self.memory);
        let advice = preplacement::advise(&self.topology, &rooms, req);
        Advised { advice, rooms }
    }

    /// The room a process confined to `cpus` and `mems` has: CPUs outside
    /// `cpus` count as busy and nodes outside `mems` as full, so the advice
    /// holds only what it may use.
    pub fn confined_to(&self, cpus: &CpuSet, mems: &CpuSet) -> MachineRoom {
        let mut room = self.clone();
        for cpu in self.topology.span().difference(cpus).iter() {
            room.idle.insert(cpu, Some(0.0));
        }
        room.memory.retain(|node, _| mems.contains(*node));
        room
    }
}

/// What is wrong with a number of CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadCpuCount {
    /// Not a positive decimal number.
    NotANumber,
    /// Zero CPUs.
    Zero,
    /// More than `MAX_CPUS`.
    TooMany,
}

/// A number of CPUs as numad takes it (`-w NCPUS`, in hundredths: `2.5`):
/// a positive decimal number, at most `MAX_CPUS`.
pub fn parse_cpu_count(text: &str) -> Result<f64, BadCpuCount> {
    let (int, frac) = text.split_once('.').unwrap_or((text, "0"));
    let decimal = !int.is_empty()
        && !frac.is_empty()
        && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit());
    let cpus: f64 = match decimal.then(|| text.parse().ok()).flatten() {
        Some(c) => c,
        None => return Err(BadCpuCount::NotANumber),
    };
    if cpus <= 0.0 {
        return Err(BadCpuCount::Zero);
    }
    if cpus > MAX_CPUS {
        return Err(BadCpuCount::TooMany);
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_counts_are_positive_decimals() {
        assert_eq!(parse_cpu_count("4"), Ok(4.0));
        assert_eq!(parse_cpu_count("2.5"), Ok(2.5));
        use BadCpuCount::*;
        for (t, why) in [
            ("", NotANumber),
            ("-1", NotANumber),
            ("4.", NotANumber),
            (".5", NotANumber),
            ("1e3", NotANumber),
            (" 4", NotANumber),
            ("0", Zero),
            ("0.00", Zero),
            ("70000", TooMany),
        ] {
            assert_eq!(parse_cpu_count(t), Err(why), "{t:?}");
        }
    }

    #[test]
    fn a_confined_process_sees_no_room_outside_its_cpus_and_nodes() {
        let topology = Topology::synthetic("pack:2 numa:1 l3:1 core:2 pu:1").unwrap();
        let room = MachineRoom {
            idle: topology.span().iter().map(|c| (c, Some(1.0))).collect(),
            memory: BTreeMap::from([(0, 4 << 30), (1, 1 << 30)]),
            topology,
        };
        let req = Request {
            cpus: 1.0,
            memory: 0,
        };
        // Free, node 0 (more memory) wins; confined to node 1's CPUs and
        // memory, node 1.
        assert_eq!(room.advise(&req).advice.nodes, [0]);
        let confined = room.confined_to(&CpuSet::from_iter([2, 3]), &CpuSet::from_iter([1]));
        let advised = confined.advise(&req);
        assert_eq!(advised.advice.nodes, [1]);
        assert_eq!(advised.rooms[0].cpus_free, 0.0);
        assert_eq!(advised.rooms[0].memory_free, 0);
    }
}
