//! The kernel's NUMA allocation counters under a [`SysRoot`]: each online
//! node's `numastat` and the NUMA lines of `/proc/vmstat`, which need no
//! PMU and count in virtual machines; and [`NumaCounters`], which keeps
//! the last reading so each round gets its counts over the round (the
//! first round none: a count needs two readings).

use std::collections::BTreeMap;
use std::path::PathBuf;

use numaplace_model::{CpuSet, NumaStat, VmNumaStat};
use numaplace_parse::numastat::{parse_numastat, parse_vmstat_numa};
use numaplace_parse::procfs::ParseError;
use thiserror::Error;

use crate::sysroot::{ReadError, SysRoot};

/// The list of online nodes, under the root.
const ONLINE: &str = "sys/devices/system/node/online";

/// Why the per-node counters cannot be read.
#[derive(Debug, Error)]
pub enum NumastatError {
    #[error(
        "{path} does not exist: a kernel built without CONFIG_NUMA has no nodes and writes no \
         numastat"
    )]
    /// The root has no NUMA nodes in sysfs.
    NoNuma {
        /// The file or directory.
        path: PathBuf,
    },
    #[error(
        "{path} does not exist though the node is online: a kernel that writes no per-node \
         numastat (or the node just went offline)"
    )]
    /// A node has no `numastat`.
    NoFile {
        /// The file or directory.
        path: PathBuf,
    },
    #[error(transparent)]
    /// A file could not be read.
    Read(#[from] ReadError),
    #[error("{path}: {error}")]
    /// A `numastat` file did not parse.
    Parse {
        /// The file or directory.
        path: PathBuf,
        /// Why it did not parse.
        error: ParseError,
    },
}

/// Every online node's `numastat` under the root, by node (kernel id).
pub fn read_numastat(root: &SysRoot) -> Result<BTreeMap<u32, NumaStat>, NumastatError> {
    let online = root
        .read_optional(ONLINE)?
        .ok_or_else(|| NumastatError::NoNuma {
            path: root.join(ONLINE),
        })?;
    let online = CpuSet::parse_list(&online).map_err(|e| NumastatError::Parse {
        path: root.join(ONLINE),
        error: ParseError::List {
            file: "online",
            field: "node list",
            source: e,
        },
    })?;
    online
        .iter()
        .map(|n| {
            let rel = format!("sys/devices/system/node/node{n}/numastat");
            let text = root
                .read_optional(&rel)?
                .ok_or_else(|| NumastatError::NoFile {
                    path: root.join(&rel),
                })?;
            let stat = parse_numastat(&text).map_err(|error| NumastatError::Parse {
                path: root.join(&rel),
                error,
            })?;
            Ok((n, stat))
        })
        .collect()
}

/// `/proc/vmstat`'s NUMA counters under the root.
pub fn read_vmstat_numa(root: &SysRoot) -> Result<VmNumaStat, ReadError> {
    root.read("proc/vmstat").map(|t| parse_vmstat_numa(&t))
}

/// The last reading of both, to count each round's events.
#[derive(Debug, Default)]
pub struct NumaCounters {
    nodes: Option<BTreeMap<u32, NumaStat>>,
    vmstat: Option<VmNumaStat>,
    /// Why the nodes' counters could not be read, once said.
    said: Option<String>,
}

impl NumaCounters {
    /// None read yet.
    pub fn new() -> NumaCounters {
        NumaCounters::default()
    }

    /// Reads both and returns the counts since the last call, by node and
    /// for the machine: empty and `None` at the first call, and where the
    /// files cannot be read (said once in the log). A node that was not in
    /// the last reading (it came online) has no count yet.
    pub fn round(&mut self, root: &SysRoot) -> (BTreeMap<u32, NumaStat>, Option<VmNumaStat>) {
        let nodes = match read_numastat(root) {
            Ok(n) => {
                self.said = None;
                Some(n)
            }
            Err(e) => {
                let why = e.to_string();
                if self.said.as_deref() != Some(&why) {
                    tracing::info!("not measured this round: allocations per node: {why}");
                    self.said = Some(why);
                }
                None
            }
        };
        let counts = match (&nodes, &self.nodes) {
            (Some(now), Some(before)) => now
                .iter()
                .filter_map(|(n, c)| Some((*n, c.since(before.get(n)?))))
                .collect(),
            _ => BTreeMap::new(),
        };
        self.nodes = nodes;
        let vmstat = read_vmstat_numa(root).ok();
        let vm_counts = match (&vmstat, &self.vmstat) {
            (Some(now), Some(before)) => Some(now.since(before)),
            _ => None,
        };
        self.vmstat = vmstat;
        (counts, vm_counts)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn numastat(hit: u64, foreign: u64, other: u64) -> String {
        format!(
            "numa_hit {hit}\nnuma_miss 0\nnuma_foreign {foreign}\ninterleave_hit 0\n\
             local_node {}\nother_node {other}\n",
            hit - other
        )
    }

    /// A two-node tree: `online`, each node's `numastat`, and `vmstat`.
    fn tree(nodes: &[(u32, String)]) -> (tempfile::TempDir, SysRoot) {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys/devices/system");
        fs::create_dir_all(sys.join("cpu")).unwrap();
        fs::create_dir_all(sys.join("node")).unwrap();
        fs::create_dir_all(dir.path().join("proc")).unwrap();
        let ids: Vec<String> = nodes.iter().map(|(n, _)| n.to_string()).collect();
        fs::write(sys.join("node/online"), format!("{}\n", ids.join(","))).unwrap();
        for (n, text) in nodes {
            fs::create_dir_all(sys.join(format!("node/node{n}"))).unwrap();
            fs::write(sys.join(format!("node/node{n}/numastat")), text).unwrap();
        }
        fs::write(
            dir.path().join("proc/vmstat"),
            "numa_hint_faults 10\nnuma_hint_faults_local 4\npgmigrate_success 3\n",
        )
        .unwrap();
        let root = SysRoot::new(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn reads_every_online_node_of_a_tree() {
        let (_dir, root) = tree(&[(0, numastat(100, 0, 10)), (1, numastat(50, 7, 0))]);
        let n = read_numastat(&root).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!((n[&0].numa_hit, n[&0].other_node), (100, 10));
        assert_eq!(n[&1].numa_foreign, 7);
        let v = read_vmstat_numa(&root).unwrap();
        assert_eq!(v.numa_hint_faults_local, Some(4));
        assert_eq!(v.numa_pages_migrated, None);
    }

    #[test]
    fn what_cannot_be_read_says_which_file_and_why() {
        let (dir, root) = tree(&[(0, numastat(100, 0, 10)), (1, "numa_hit 5\n".into())]);
        let e = read_numastat(&root).unwrap_err().to_string();
        assert!(
            e.contains("node1/numastat: numastat: no numa_miss line"),
            "{e}"
        );
        fs::remove_file(dir.path().join("sys/devices/system/node/node1/numastat")).unwrap();
        let e = read_numastat(&root).unwrap_err().to_string();
        assert!(e.contains("node1/numastat does not exist"), "{e}");
        fs::remove_file(dir.path().join("sys/devices/system/node/online")).unwrap();
        let e = read_numastat(&root).unwrap_err().to_string();
        assert!(e.contains("without CONFIG_NUMA"), "{e}");
        fs::write(dir.path().join("sys/devices/system/node/online"), "x\n").unwrap();
        let e = read_numastat(&root).unwrap_err().to_string();
        assert!(e.contains("online: node list"), "{e}");
    }

    /// The first round has no counts; the next has what changed; a round
    /// the files cannot be read has none, and the one after starts again.
    #[test]
    fn counts_over_rounds() {
        let (dir, root) = tree(&[(0, numastat(100, 0, 10)), (1, numastat(50, 7, 0))]);
        let mut c = NumaCounters::new();
        let (nodes, vm) = c.round(&root);
        assert!(nodes.is_empty() && vm.is_none(), "first round");
        let node = |n: u32| {
            dir.path()
                .join(format!("sys/devices/system/node/node{n}/numastat"))
        };
        fs::write(node(0), numastat(160, 0, 30)).unwrap();
        fs::write(node(1), numastat(50, 9, 0)).unwrap();
        let (nodes, vm) = c.round(&root);
        assert_eq!((nodes[&0].numa_hit, nodes[&0].other_node), (60, 20));
        assert_eq!((nodes[&1].numa_hit, nodes[&1].numa_foreign), (0, 2));
        assert_eq!(vm.unwrap().numa_hint_faults, Some(0));
        fs::write(node(1), "garbage\n").unwrap();
        assert!(c.round(&root).0.is_empty(), "unreadable");
        fs::write(node(1), numastat(51, 9, 0)).unwrap();
        assert!(c.round(&root).0.is_empty(), "a new start");
        fs::write(node(1), numastat(52, 9, 0)).unwrap();
        assert_eq!(c.round(&root).0[&1].numa_hit, 1);
    }

    #[test]
    fn reads_the_live_host() {
        let n = read_numastat(&SysRoot::host()).expect("this kernel writes numastat");
        assert!(!n.is_empty());
        assert!(n.values().any(|s| s.numa_hit > 0), "{n:?}");
    }
}
