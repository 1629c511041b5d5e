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

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;

use crate::sysroot::SysRoot;

/// Where the setting lives, relative to the root.
pub const SYSCTL: &str = "proc/sys/kernel/numa_balancing";

/// What the kernel's automatic NUMA balancing does on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaBalancing {
    /// The kernel has none (no `CONFIG_NUMA_BALANCING`), or the file
    /// cannot be read.
    Absent,
    /// Off (mode 0).
    Off,
    /// Pages and tasks balanced between nodes (mode 1, or 3 with tiering).
    Normal {
        /// Whether memory tiering is on too (mode 3).
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

    /// Whether the kernel balances between nodes, as a snapshot says it:
    /// `None` where it has no such setting.
    pub fn between_nodes(self) -> Option<bool> {
        match self {
            NumaBalancing::Absent => None,
            m => Some(m.balances_between_nodes()),
        }
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

/// The setting's value under `root` (the bit mask).
pub fn read_value(root: &SysRoot) -> io::Result<u32> {
    let text = root.read(SYSCTL).map_err(|e| e.source)?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: not a number: {:?}",
                root.join(SYSCTL).display(),
                text.trim()
            ),
        )
    })
}

/// Writes the whole bit mask `value` (what a restore puts back). Never
/// through a symbolic link, never creating the file: where the kernel has
/// no such setting the write fails with `ENOENT`.
pub fn write_value(root: &SysRoot, value: u32) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(root.join(SYSCTL))?;
    f.write_all(format!("{value}\n").as_bytes())
}

/// The bit mask `value` with balancing between nodes (bit 0x1) set to
/// `on`, every other bit (tiering) as it is.
pub fn with_between_nodes(value: u32, on: bool) -> u32 {
    if on { value | 1 } else { value & !1 }
}

/// Turns balancing between nodes (bit 0x1) on or off, the tiering bit
/// kept: returns the value before and the value written.
pub fn set_between_nodes(root: &SysRoot, on: bool) -> io::Result<(u32, u32)> {
    let before = read_value(root)?;
    let after = with_between_nodes(before, on);
    if after != before {
        write_value(root, after)?;
    }
    Ok((before, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root with `proc/sys/kernel/numa_balancing` holding `value`.
    fn root_with(value: &str) -> (tempfile::TempDir, SysRoot) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/devices/system/cpu")).unwrap();
        std::fs::create_dir_all(d.path().join("proc/sys/kernel")).unwrap();
        std::fs::write(d.path().join(SYSCTL), value).unwrap();
        let r = SysRoot::new(d.path()).unwrap();
        (d, r)
    }

    #[test]
    fn turning_balancing_on_and_off_keeps_the_tiering_bit() {
        let (_d, root) = root_with("2\n");
        assert_eq!(set_between_nodes(&root, true).unwrap(), (2, 3));
        assert_eq!(read_value(&root).unwrap(), 3);
        assert_eq!(
            NumaBalancing::read(&root),
            NumaBalancing::Normal { tiering: true }
        );
        assert_eq!(set_between_nodes(&root, false).unwrap(), (3, 2));
        assert_eq!(NumaBalancing::read(&root), NumaBalancing::TieringOnly);
        assert_eq!(NumaBalancing::read(&root).between_nodes(), Some(false));
        // Already so: nothing written.
        assert_eq!(set_between_nodes(&root, false).unwrap(), (2, 2));
    }

    #[test]
    fn never_creates_the_setting_nor_writes_through_a_link() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/devices/system/cpu")).unwrap();
        std::fs::create_dir_all(d.path().join("proc/sys/kernel")).unwrap();
        let root = SysRoot::new(d.path()).unwrap();
        assert!(set_between_nodes(&root, true).is_err());
        assert!(write_value(&root, 1).is_err());
        assert!(
            !root.join(SYSCTL).exists(),
            "a missing setting is not created"
        );
        assert_eq!(NumaBalancing::read(&root).between_nodes(), None);
        let target = d.path().join("elsewhere");
        std::fs::write(&target, "0\n").unwrap();
        std::os::unix::fs::symlink(&target, root.join(SYSCTL)).unwrap();
        let e = write_value(&root, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "0\n");
    }

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
