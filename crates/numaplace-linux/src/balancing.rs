//! The kernel's automatic NUMA balancing (`kernel.numa_balancing`), which
//! numaplace reads at start: while it is on, the kernel scans every
//! process's memory, takes hinting faults, moves pages toward the node that
//! touches them and tasks toward their memory. A daemon that also moves
//! memory must know, or the two move the same pages.
//!
//! The value is a bit mask (Documentation/admin-guide/sysctl/kernel.rst,
//! "numa_balancing"; `NUMA_BALANCING_NORMAL` 0x1 and
//! `NUMA_BALANCING_MEMORY_TIERING` 0x2 in include/linux/sched/sysctl.h):
//! 0 off, 1 balancing between nodes, 2 memory tiering (promotion from slow
//! memory nodes, no balancing between normal ones), 3 both. The file is
//! absent on a kernel built without `CONFIG_NUMA_BALANCING`.

use crate::sysroot::SysRoot;

/// Where the setting lives, relative to the root.
pub const SYSCTL: &str = "proc/sys/kernel/numa_balancing";

/// What the kernel's automatic NUMA balancing does on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaBalancing {
    /// The kernel has none (no `CONFIG_NUMA_BALANCING`), or the file
    /// cannot be read.
    Absent,
    Off,
    /// Pages and tasks balanced between nodes (mode 1, or 3 with tiering).
    Normal {
        tiering: bool,
    },
    /// Memory tiering only (mode 2): hot pages promoted from memory-only
    /// nodes; pages between normal nodes are not balanced.
    TieringOnly,
}

impl NumaBalancing {
    /// Reads the setting under `root`.
    pub fn read(root: &SysRoot) -> NumaBalancing {
        root.read(SYSCTL)
            .ok()
            .and_then(|text| Self::parse(&text))
            .unwrap_or(NumaBalancing::Absent)
    }

    /// The file's text: a number whose bits 0 and 1 are the modes; `None`
    /// if it is not a number.
    pub fn parse(text: &str) -> Option<NumaBalancing> {
        let v: u32 = text.trim().parse().ok()?;
        Some(match (v & 1 != 0, v & 2 != 0) {
            (false, false) => NumaBalancing::Off,
            (true, tiering) => NumaBalancing::Normal { tiering },
            (false, true) => NumaBalancing::TieringOnly,
        })
    }

    /// Whether the kernel moves pages between normal nodes toward the
    /// threads that touch them (and tasks toward their memory).
    pub fn balances_between_nodes(self) -> bool {
        matches!(self, NumaBalancing::Normal { .. })
    }

    /// The mode in a word: `absent`, `off`, `normal` (balancing between
    /// nodes, bit 0x1), `tiering` (memory tiering, bit 0x2) or `both`.
    pub fn mode(self) -> &'static str {
        match self {
            NumaBalancing::Absent => "absent",
            NumaBalancing::Off => "off",
            NumaBalancing::Normal { tiering: false } => "normal",
            NumaBalancing::Normal { tiering: true } => "both",
            NumaBalancing::TieringOnly => "tiering",
        }
    }

    /// One line for the daemon's start: the setting and what it means.
    pub fn describe(self) -> String {
        match self {
            NumaBalancing::Absent => {
                "kernel.numa_balancing: not in this kernel (or unreadable): the kernel moves no pages \
                 by itself (absent)"
                    .into()
            }
            NumaBalancing::Off => {
                "kernel.numa_balancing=0 (off): the kernel's automatic NUMA balancing is off".into()
            }
            NumaBalancing::Normal { tiering } => format!(
                "kernel.numa_balancing={} ({}): the kernel moves pages toward the node that touches them \
                 and tasks toward their memory (never memory under an explicit policy){}",
                if tiering { 3 } else { 1 },
                self.mode(),
                if tiering {
                    ", and promotes hot pages from memory-only nodes"
                } else {
                    ""
                }
            ),
            NumaBalancing::TieringOnly => {
                "kernel.numa_balancing=2 (tiering): memory tiering only: the kernel promotes hot pages from \
                 memory-only nodes and balances nothing between the others"
                    .into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_of_the_bit_mask() {
        assert_eq!(NumaBalancing::parse("0\n"), Some(NumaBalancing::Off));
        assert_eq!(
            NumaBalancing::parse("1\n"),
            Some(NumaBalancing::Normal { tiering: false })
        );
        assert_eq!(NumaBalancing::parse("2"), Some(NumaBalancing::TieringOnly));
        assert_eq!(
            NumaBalancing::parse(" 3 "),
            Some(NumaBalancing::Normal { tiering: true })
        );
        assert_eq!(NumaBalancing::parse("yes"), None);
        assert_eq!(NumaBalancing::parse(""), None);
        assert!(NumaBalancing::parse("1").unwrap().balances_between_nodes());
        assert!(NumaBalancing::parse("3").unwrap().balances_between_nodes());
        let modes: Vec<&str> = ["0", "1", "2", "3"]
            .iter()
            .map(|v| NumaBalancing::parse(v).unwrap().mode())
            .collect();
        assert_eq!(modes, ["off", "normal", "tiering", "both"]);
        assert!(
            NumaBalancing::parse("3")
                .unwrap()
                .describe()
                .starts_with("kernel.numa_balancing=3 (both): ")
        );
        assert!(
            NumaBalancing::parse("3")
                .unwrap()
                .describe()
                .contains("promotes hot pages from memory-only nodes")
        );
        assert!(!NumaBalancing::parse("2").unwrap().balances_between_nodes());
    }

    #[test]
    fn read_from_a_root_and_absent_without_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        let root = SysRoot::new(dir.path()).unwrap();
        assert_eq!(NumaBalancing::read(&root), NumaBalancing::Absent);
        std::fs::create_dir_all(dir.path().join("proc/sys/kernel")).unwrap();
        std::fs::write(dir.path().join(SYSCTL), "1\n").unwrap();
        assert_eq!(
            NumaBalancing::read(&root),
            NumaBalancing::Normal { tiering: false }
        );
        assert!(
            NumaBalancing::read(&root)
                .describe()
                .starts_with("kernel.numa_balancing=1")
        );
    }
}
