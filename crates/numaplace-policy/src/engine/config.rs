//! The engine's configuration (`[engine]` in the config): the migration
//! rate limit, who moves memory beside the kernel's balancing, and whether
//! a policy may change that balancing.

use serde::{Deserialize, Serialize};

/// `[engine]`: how the engine carries decisions out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Memory moved per second at most, MiB (numaplace's rate limit on
    /// migrations; 0 means none moves).
    pub migrate_mib_per_sec: u64,
    /// Who moves memory between nodes while the kernel's automatic NUMA
    /// balancing does too (`kernel.numa_balancing` 1 or 3); no effect
    /// while it is off.
    pub memory_mover: MemoryMover,
    /// Whether the kernel's automatic NUMA balancing moves pages between
    /// nodes on this host (read at start, not a config key; each round's
    /// snapshot says what it is then, where the host has the setting).
    #[serde(skip)]
    pub kernel_balancing: bool,
    /// Whether a policy may turn the kernel's automatic NUMA balancing on
    /// or off (`auto` tries the other setting as an experiment). Only with
    /// `scope.all`: the setting is the whole machine's. The setting as it
    /// was is recorded before the first change and put back at stop.
    pub manage_kernel_balancing: bool,
    /// Page size of the host, bytes (a host constant, passed in).
    #[serde(skip)]
    pub page_size: u64,
}

/// The highest `migrate_mib_per_sec` taken: 1 TiB/s, far above what any
/// machine copies between nodes (tens of GiB/s), and far below where MiB
/// to bytes (`<< 20`) would wrap.
pub const MAX_MIGRATE_MIB_PER_SEC: u64 = 1 << 20;

impl EngineConfig {
    /// The config's `[engine]` values in their ranges.
    pub fn validate(&self) -> Result<(), String> {
        if self.migrate_mib_per_sec > MAX_MIGRATE_MIB_PER_SEC {
            return Err(format!(
                "[engine] migrate_mib_per_sec = {}: at most {MAX_MIGRATE_MIB_PER_SEC} (1 TiB/s); \
                 0 moves no memory",
                self.migrate_mib_per_sec
            ));
        }
        Ok(())
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            migrate_mib_per_sec: 256,
            memory_mover: MemoryMover::default(),
            kernel_balancing: false,
            manage_kernel_balancing: true,
            page_size: 4096,
        }
    }
}

/// Who moves memory while the kernel's automatic NUMA balancing moves
/// pages between nodes too (`[engine] memory_mover`). Threads numaplace
/// pins are never moved back by the kernel (its task placement keeps to a
/// task's allowed CPUs), so pins are carried out in every mode; what
/// would fight is two movers of the same pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryMover {
    /// numaplace moves every process's memory as its policy decides, and
    /// the kernel moves the same pages toward the threads that touch them:
    /// said at start, as the two may move pages back and forth.
    Numaplace,
    /// The kernel moves all memory: numaplace's memory moves are journalled
    /// as left to it, none carried out.
    Kernel,
    /// numaplace moves only the memory the kernel will not: that of
    /// processes with memory under an explicit memory policy (`bind`,
    /// `interleave`, `prefer`, ... in `numa_maps`), which automatic NUMA
    /// balancing never moves. The kernel moves the rest after the threads
    /// numaplace pins. The default.
    #[default]
    WhereKernelCannot,
}

impl MemoryMover {
    /// The config value.
    pub fn name(self) -> &'static str {
        match self {
            MemoryMover::Numaplace => "numaplace",
            MemoryMover::Kernel => "kernel",
            MemoryMover::WhereKernelCannot => "where-kernel-cannot",
        }
    }

    /// What numaplace does about memory, for the daemon's start: given
    /// whether the kernel balances between nodes.
    pub fn describe(self, kernel_balancing: bool) -> String {
        if !kernel_balancing {
            return format!(
                "memory_mover = \"{}\" has no effect: the kernel balances no pages between \
                 nodes, so numaplace moves memory as its policy decides",
                self.name()
            );
        }
        match self {
            MemoryMover::Numaplace => format!(
                "memory_mover = \"{}\": numaplace moves memory as its policy decides AND the kernel \
                 moves the same pages toward the threads that touch them: the two may move pages \
                 back and forth (set memory_mover = \"where-kernel-cannot\" or turn \
                 kernel.numa_balancing off)",
                self.name()
            ),
            MemoryMover::Kernel => format!(
                "memory_mover = \"{}\": numaplace pins threads and leaves every memory move to the \
                 kernel, which moves pages after the threads (each move the policy wanted is \
                 journalled as left to the kernel)",
                self.name()
            ),
            MemoryMover::WhereKernelCannot => format!(
                "memory_mover = \"{}\": numaplace pins threads and the kernel moves their memory \
                 after them; numaplace moves only the memory of processes under an explicit \
                 memory policy (bind, interleave, prefer...), which the kernel never moves",
                self.name()
            ),
        }
    }

    /// Why a memory move of process `pid` is left to the kernel; `None`
    /// when numaplace carries it out. `explicit_policy`: whether the
    /// process has memory under an explicit memory policy.
    pub fn leaves_to_kernel(self, kernel_balancing: bool, explicit_policy: bool) -> Option<String> {
        if !kernel_balancing {
            return None;
        }
        match self {
            MemoryMover::Numaplace => None,
            MemoryMover::Kernel => Some(
                "left to the kernel's automatic NUMA balancing (memory_mover = \"kernel\"): it \
                 moves pages toward the threads that touch them"
                    .into(),
            ),
            MemoryMover::WhereKernelCannot if explicit_policy => None,
            MemoryMover::WhereKernelCannot => Some(
                "left to the kernel's automatic NUMA balancing (memory_mover = \
                 \"where-kernel-cannot\"): the process's memory is under the default policy, \
                 which the kernel moves toward the threads that touch it"
                    .into(),
            ),
        }
    }
}
