//! Property tests: no parser panics, on arbitrary bytes or on mutated real
//! captures, and the stat parser gets any comm back exactly. They run in
//! every `cargo test`; `fuzz/` runs the same parsers under libFuzzer for
//! longer.

use proptest::prelude::*;

use super::*;

/// Real captures (and hand-written lines of every form) to mutate.
const SEEDS: &[&str] = &[
    "20537 (cat) R 20535 20535 18209 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 145153 3133440 362 18446744073709551615 94427664003072 94427664022953 140735313128496 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94427664038960 94427664040576 94428397969408 140735313136353 140735313136373 140735313136373 140735313137643 0\n",
    "Name:\tcat\nTgid:\t20538\nPid:\t20538\nPPid:\t20535\nVmRSS:\t    1624 kB\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\nvoluntary_ctxt_switches:\t0\nnonvoluntary_ctxt_switches:\t0\n",
    "7f2cbde3b000 prefer (many):0 anon=3 dirty=3 active=0 N0=3 kernelpagesize_kB=4\n\
     7f2cbdc00000 default file=/anon_hugepage\\040(deleted) huge anon=1 dirty=1 N0=1 kernelpagesize_kB=2048\n\
     7f2cbe034000 interleave:0-1 anon=4 dirty=4 active=0 N0=2 N1=2 kernelpagesize_kB=4\n\
     7f2cbe03e000 default\n",
    "numa_preferred_nid                           :                    1\ncurrent_node=1, numa_group_id=0\nnuma_faults node=0 task_private=4 task_shared=0 group_private=0 group_shared=0\n",
    "9:name=systemd:/\n4:memory:/process_api/bdee\n0::/\n",
    "11104 3595 2080 257 0 1204 0\n",
    "pgmigrate_success 120\npgmigrate_fail 7\nthp_collapse_alloc 3\npgsteal_kswapd 10\n",
    "cpu  1969524 4066 398291 30521587 12843 0 10521 0 0 0\ncpu0 985716 2033 199011 15259871 6460 0 5617 0 0 0\nintr 1 2\n",
];

/// A seed with a few bytes replaced, inserted or cut.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(SEEDS),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..8),
    )
        .prop_map(|(seed, edits)| {
            let mut bytes = seed.as_bytes().to_vec();
            for (at, byte, op) in edits {
                let len = bytes.len();
                match op {
                    0 if len > 0 => bytes[at.index(len)] = byte,
                    1 => bytes.insert(at.index(len + 1), byte),
                    _ if len > 0 => bytes.truncate(at.index(len)),
                    _ => {}
                }
            }
            bytes
        })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![prop::collection::vec(any::<u8>(), 0..512), mutated()]
}

/// Every parser on the same input; none may panic.
fn parse_all(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let _ = parse_stat(bytes);
    let _ = parse_status(&text);
    let m = parse_numa_maps(&text);
    assert!(m.mappings + m.skipped_lines <= text.split('\n').count());
    let _ = m.total();
    for line in text.split('\n') {
        if let Ok(l) = parse_numa_maps_line(line) {
            let _ = l.node_bytes().count();
        }
    }
    let _ = parse_cgroup(&text);
    let _ = parse_cmdline(bytes);
    let _ = parse_sched_numa(&text);
    let _ = parse_statm(&text);
    let _ = parse_vmstat_page_moves(&text);
    let _ = parse_cpu_times(&text);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_parser_panics(bytes in input()) {
        parse_all(&bytes);
    }

    #[test]
    fn stat_gets_any_comm_back(comm in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut line = b"77 (".to_vec();
        line.extend_from_slice(&comm);
        // Fields 3 to 22, then zeros up to field 39 (processor) = 5.
        line.extend_from_slice(b") S 1 77 77 0 -1 0 0 0 0 0 9 8 0 0 20 0 3 0 12345");
        line.extend_from_slice(" 0".repeat(39 - 22 - 1).as_bytes());
        line.extend_from_slice(b" 5\n");
        let s = parse_stat(&line).unwrap();
        prop_assert_eq!(s.comm, numaplace_model::task::name_from_bytes(&comm));
        prop_assert_eq!((s.pid, s.utime, s.stime, s.num_threads), (77, 9, 8, 3));
        prop_assert_eq!((s.start_time, s.processor), (12345, Some(5)));
    }

    #[test]
    fn numa_maps_bytes_are_pages_times_page_size(
        pages in prop::collection::vec((0u32..1024, 0u64..1 << 30), 0..8),
        kb in prop::sample::select(vec![4u64, 16, 64, 2048, 1 << 20]),
        file in any::<bool>(),
    ) {
        let mut seen = std::collections::BTreeMap::new();
        let mut line = String::from("7f0000000000 bind:0-1");
        if file {
            line.push_str(" file=/a\\040b");
        }
        for (node, n) in &pages {
            if !seen.contains_key(node) {
                seen.insert(*node, *n);
                line.push_str(&format!(" N{node}={n}"));
            }
        }
        line.push_str(&format!(" kernelpagesize_kB={kb}"));
        let m = parse_numa_maps(&line);
        prop_assert_eq!((m.mappings, m.skipped_lines), (1, 0));
        for (node, n) in seen {
            let got = m.node(node);
            let want = n * kb * 1024;
            let kind = if kb >= 2048 { got.huge } else if file { got.file } else { got.anon };
            prop_assert_eq!(kind, want);
            prop_assert_eq!(got.anon.max(got.file).max(got.huge), want);
        }
    }
}
