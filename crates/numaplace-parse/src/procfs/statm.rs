//! `/proc/<pid>/statm` (the process's memory size and resident pages, in
//! pages) and `/proc/vmstat` (the host's counters of pages moved between
//! nodes or reclaimed): what tells a daemon a process's memory per node
//! may have changed without its faulting.

use super::error::ParseError;

/// The first two fields of `statm`: total program size and resident set,
/// in pages (proc(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statm {
    /// Total program size, pages.
    pub size: u64,
    /// Resident set, pages.
    pub resident: u64,
}

/// Parses `statm`'s first two fields.
pub fn parse_statm(text: &str) -> Result<Statm, ParseError> {
    let mut fields = text.split_ascii_whitespace();
    let mut next = |field: &'static str| {
        let f = fields.next().ok_or(ParseError::Truncated {
            file: "statm",
            found: 0,
            needed: 2,
            field,
        })?;
        f.parse::<u64>()
            .map_err(|_| ParseError::invalid("statm", field, f, "a number of pages"))
    };
    Ok(Statm {
        size: next("size (1)")?,
        resident: next("resident (2)")?,
    })
}

/// The `/proc/vmstat` counters of pages whose node changed or that left
/// memory without their process faulting: every successful migration
/// (`pgmigrate_success`: NUMA balancing, compaction, `move_pages`,
/// demotion), huge pages khugepaged collapsed into a new page
/// (`thp_collapse_alloc`), and pages reclaimed (`pgsteal_*`).
pub const PAGE_MOVES: &[&str] = &[
    "pgmigrate_success",
    "thp_collapse_alloc",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgsteal_khugepaged",
];

/// The sum of the [`PAGE_MOVES`] counters `vmstat` has (a kernel lacks
/// some); `None` if it has none of them.
pub fn parse_vmstat_page_moves(text: &str) -> Option<u64> {
    let mut sum: Option<u64> = None;
    for line in text.lines() {
        let mut w = line.split_ascii_whitespace();
        let (Some(name), Some(value)) = (w.next(), w.next()) else {
            continue;
        };
        if !PAGE_MOVES.contains(&name) {
            continue;
        }
        if let Ok(v) = value.parse::<u64>() {
            sum = Some(sum.unwrap_or(0).wrapping_add(v));
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_and_vmstat_as_the_kernel_writes_them() {
        assert_eq!(
            parse_statm("11104 3595 2080 257 0 1204 0\n").unwrap(),
            Statm {
                size: 11104,
                resident: 3595
            }
        );
        assert!(parse_statm("").is_err());
        assert!(parse_statm("12 x 0\n").is_err());
        let vmstat = "nr_free_pages 5807339\npgmigrate_success 120\npgmigrate_fail 7\n\
                      thp_collapse_alloc 3\npgsteal_kswapd 10\npgsteal_direct 0\n";
        assert_eq!(parse_vmstat_page_moves(vmstat), Some(133));
        assert_eq!(parse_vmstat_page_moves("nr_free_pages 1\n"), None);
        assert_eq!(parse_vmstat_page_moves("pgmigrate_success\n"), None);
    }
}
