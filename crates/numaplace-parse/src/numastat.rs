//! The kernel's NUMA allocation counters as text: a node's `numastat`
//! (`/sys/devices/system/node/nodeN/numastat`, `name value` lines written
//! by `node_read_numastat`) and the NUMA lines of `/proc/vmstat`. Pure:
//! the readers in numaplace-linux bind them to paths.

use numaplace_model::{NumaStat, VmNumaStat};

use crate::procfs::ParseError;

const FILE: &str = "numastat";

/// The six counters every kernel since 2.6 writes in a node's `numastat`.
/// Lines this does not know (a later kernel's) are skipped; a missing,
/// repeated or non-numeric counter refuses the file, which names it.
pub fn parse_numastat(text: &str) -> Result<NumaStat, ParseError> {
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(ParseError::Unterminated { file: FILE });
    }
    let mut seen: [Option<u64>; 6] = [None; 6];
    const NAMES: [&str; 6] = [
        "numa_hit",
        "numa_miss",
        "numa_foreign",
        "interleave_hit",
        "local_node",
        "other_node",
    ];
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        let (Some(name), value, rest) = (words.next(), words.next(), words.next()) else {
            continue; // a blank line
        };
        let Some(i) = NAMES.iter().position(|n| *n == name) else {
            continue;
        };
        let field = NAMES[i];
        let v = match (value, rest) {
            (Some(v), None) => v
                .parse::<u64>()
                .map_err(|_| ParseError::invalid(FILE, field, v, "a count"))?,
            _ => return Err(ParseError::invalid(FILE, field, line, "`name count`")),
        };
        if seen[i].replace(v).is_some() {
            return Err(ParseError::Malformed {
                file: FILE,
                what: format!("{field} is written twice"),
            });
        }
    }
    let get = |i: usize| {
        seen[i].ok_or(ParseError::MissingField {
            file: FILE,
            field: NAMES[i],
        })
    };
    Ok(NumaStat {
        numa_hit: get(0)?,
        numa_miss: get(1)?,
        numa_foreign: get(2)?,
        interleave_hit: get(3)?,
        local_node: get(4)?,
        other_node: get(5)?,
    })
}

/// The NUMA balancing and migration counters of `/proc/vmstat`; each one
/// the kernel does not write, or writes as something other than a count,
/// is `None` (vmstat's other lines are not ours to judge).
pub fn parse_vmstat_numa(text: &str) -> VmNumaStat {
    let mut out = VmNumaStat::default();
    for line in text.lines() {
        let mut w = line.split_ascii_whitespace();
        let (Some(name), Some(value)) = (w.next(), w.next()) else {
            continue;
        };
        let slot = match name {
            "numa_hint_faults" => &mut out.numa_hint_faults,
            "numa_hint_faults_local" => &mut out.numa_hint_faults_local,
            "numa_pages_migrated" => &mut out.numa_pages_migrated,
            "pgmigrate_success" => &mut out.pgmigrate_success,
            _ => continue,
        };
        *slot = value.parse::<u64>().ok().filter(|_| w.next().is_none());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This development VM's node 0 (Linux 6.18, one node), as read.
    const ONE_NODE: &str = "numa_hit 534383895\nnuma_miss 0\nnuma_foreign 0\n\
        interleave_hit 2783\nlocal_node 534379790\nother_node 0\n";

    /// The same machine's `/proc/vmstat` NUMA lines, among others (the
    /// kernel's balancing off: its counters are there, at zero).
    const VMSTAT: &str = "nr_free_pages 5807339\nnuma_hit 534384009\nnuma_miss 0\n\
        numa_foreign 0\nnuma_interleave 2783\nnuma_local 534379904\nnuma_other 0\n\
        pgfault 552939808\npgmajfault 166802\nnuma_pte_updates 0\nnuma_huge_pte_updates 0\n\
        numa_hint_faults 0\nnuma_hint_faults_local 0\nnuma_pages_migrated 0\n\
        pgmigrate_success 0\npgmigrate_fail 0\n";

    #[test]
    fn a_real_nodes_numastat() {
        let s = parse_numastat(ONE_NODE).unwrap();
        assert_eq!(s.numa_hit, 534383895);
        assert_eq!(s.interleave_hit, 2783);
        assert_eq!(s.local_node, 534379790);
        assert_eq!((s.numa_miss, s.numa_foreign, s.other_node), (0, 0, 0));
        // A later kernel's extra line is skipped; order does not matter.
        let reordered = "other_node 9\nnuma_future 1\nlocal_node 8\ninterleave_hit 7\n\
            numa_foreign 6\nnuma_miss 5\nnuma_hit 4\n";
        let s = parse_numastat(reordered).unwrap();
        assert_eq!((s.numa_hit, s.numa_miss, s.other_node), (4, 5, 9));
    }

    #[test]
    fn a_malformed_numastat_names_what_is_wrong() {
        let err = |t: &str| parse_numastat(t).unwrap_err().to_string();
        let missing = ONE_NODE.replace("other_node 0\n", "");
        assert_eq!(err(&missing), "numastat: no other_node line");
        assert_eq!(err(""), "numastat: no numa_hit line");
        let not_a_number = ONE_NODE.replace("numa_miss 0", "numa_miss -3");
        assert_eq!(
            err(&not_a_number),
            "numastat: numa_miss: \"-3\" is not a count"
        );
        let two_values = ONE_NODE.replace("numa_miss 0", "numa_miss 0 1");
        assert!(
            err(&two_values).contains("`name count`"),
            "{}",
            err(&two_values)
        );
        let no_value = ONE_NODE.replace("numa_miss 0", "numa_miss");
        assert!(err(&no_value).contains("numa_miss"), "{}", err(&no_value));
        let twice = format!("{ONE_NODE}numa_hit 1\n");
        assert_eq!(err(&twice), "numastat: numa_hit is written twice");
        let cut = ONE_NODE.trim_end_matches('\n');
        assert!(err(cut).contains("cut short"), "{}", err(cut));
        assert!(err("\u{0}\u{ff}garbage\n").contains("no numa_hit"));
    }

    #[test]
    fn vmstat_numa_counters() {
        let v = parse_vmstat_numa(VMSTAT);
        assert_eq!(v.numa_hint_faults, Some(0));
        assert_eq!(v.numa_hint_faults_local, Some(0));
        assert_eq!(v.numa_pages_migrated, Some(0));
        assert_eq!(v.pgmigrate_success, Some(0));
        let busy = "numa_hint_faults 120\nnuma_hint_faults_local 100\npgmigrate_success 9\n";
        let v = parse_vmstat_numa(busy);
        assert_eq!(v.numa_hint_faults, Some(120));
        assert_eq!(v.numa_hint_faults_local, Some(100));
        assert_eq!(v.numa_pages_migrated, None, "a kernel without balancing");
        // Garbage values are missing counters, not zeros.
        let bad = "numa_hint_faults x\npgmigrate_success 1 2\nnuma_pages_migrated\n";
        assert_eq!(parse_vmstat_numa(bad), VmNumaStat::default());
        assert_eq!(parse_vmstat_numa(""), VmNumaStat::default());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in ".{0,400}") {
            let _ = parse_numastat(&text);
            let _ = parse_vmstat_numa(&text);
        }

        #[test]
        fn what_the_kernel_writes_reads_back(v in proptest::array::uniform6(0u64..u64::MAX)) {
            let text = format!(
                "numa_hit {}\nnuma_miss {}\nnuma_foreign {}\ninterleave_hit {}\nlocal_node {}\nother_node {}\n",
                v[0], v[1], v[2], v[3], v[4], v[5]
            );
            let s = parse_numastat(&text).unwrap();
            proptest::prop_assert_eq!(
                [s.numa_hit, s.numa_miss, s.numa_foreign, s.interleave_hit, s.local_node, s.other_node],
                v
            );
        }
    }
}
