use super::*;
use proptest::prelude::*;

fn set(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap()
}

#[test]
fn a_round_says_what_changed_then_the_whole_set() {
    let online = set("0-3");
    let text = round_message(7, 1000, &online, &set("0"), &set("1"));
    assert_eq!(
        text,
        "numaplace-hints 1 tag seq=7 vcpus=1\n\
         numaplace-hints 1 clear seq=7 vcpus=0\n\
         numaplace-hints 1 set seq=7 interval-ms=1000 online=0-3 tagged=1\n"
    );
    // Nothing changed: the set alone, the heartbeat.
    let text = round_message(8, 1000, &online, &set("1"), &set("1"));
    assert_eq!(
        text,
        "numaplace-hints 1 set seq=8 interval-ms=1000 online=0-3 tagged=1\n"
    );
    let text = round_message(9, 250, &online, &set("1"), &CpuSet::new());
    assert!(
        text.ends_with("set seq=9 interval-ms=250 online=0-3 tagged=-\n"),
        "{text}"
    );
    for line in text.lines() {
        parse_line(line).unwrap();
    }
}

#[test]
fn lines_are_parsed_strictly() {
    assert_eq!(
        parse_line("numaplace-hints 1 set seq=3 interval-ms=1000 online=0-7 tagged=1,5-6").unwrap(),
        Message::Set {
            seq: 3,
            interval_ms: 1000,
            online: set("0-7"),
            tagged: set("1,5-6"),
        }
    );
    assert_eq!(
        parse_line("numaplace-hints 1 clear seq=4 vcpus=2").unwrap(),
        Message::Clear {
            seq: 4,
            vcpus: set("2")
        }
    );
    for (line, want) in [
        ("", "not starting with"),
        ("hello", "not starting with"),
        ("numaplace-hints 2 set seq=1", "version \"2\""),
        ("numaplace-hints 1 reboot", "unknown message"),
        (
            "numaplace-hints 1 set seq=-1 interval-ms=1000 online=0 tagged=-",
            "not a number",
        ),
        (
            "numaplace-hints 1 set seq=+1 interval-ms=1000 online=0 tagged=-",
            "not a number",
        ),
        (
            "numaplace-hints 1 set seq=99999999999999999999 interval-ms=1000 online=0 tagged=-",
            "out of range",
        ),
        (
            "numaplace-hints 1 set seq=1 interval-ms=5 online=0 tagged=-",
            "interval-ms=5",
        ),
        (
            "numaplace-hints 1 set seq=1 interval-ms=1000 online=0-1 tagged=4",
            "not within",
        ),
        (
            "numaplace-hints 1 set seq=1 interval-ms=1000 online=- tagged=-",
            "at least one CPU",
        ),
        (
            "numaplace-hints 1 set seq=1 interval-ms=1000 online=0-9000 tagged=-",
            "online",
        ),
        (
            "numaplace-hints 1 set seq=1 interval-ms=1000 online=0-15:2/4 tagged=-",
            "not a CPU list",
        ),
        (
            "numaplace-hints 1 set seq=1 interval-ms=1000 online=0 tagged=- more",
            "unexpected",
        ),
        (
            "numaplace-hints 1 set seq=1 online=0 tagged=- interval-ms=1000",
            "expected interval-ms",
        ),
        ("numaplace-hints 1 tag seq=1 vcpus=-", "no vCPU"),
        ("numaplace-hints 1 tag seq=1 vcpus=-3", "vcpus"),
        ("numaplace-hints 1 tag seq=1 vcpus=4294967296", "vcpus"),
        ("numaplace-hints 1 tag seq=1  vcpus=1", "expected vcpus"),
        ("numaplace-hints 1 tag seq=1 vcpus=1\r", "printable"),
        ("numaplace-hints 1 tag seq=1 vcpus=\u{e9}", "printable"),
    ] {
        let e = parse_line(line).unwrap_err().to_string();
        assert!(e.contains(want), "{line:?}: wanted {want:?} in {e:?}");
        assert!(!e.contains('\n'));
    }
    let long = format!("numaplace-hints 1 tag seq=1 vcpus={}", "1,".repeat(3000));
    assert!(
        parse_line(&long)
            .unwrap_err()
            .to_string()
            .contains("at most 4095")
    );
}

fn cpus(max: u32) -> impl Strategy<Value = CpuSet> {
    proptest::collection::btree_set(0..max, 0..40).prop_map(|s| s.into_iter().collect())
}

proptest! {
    /// What a guest writes, a host reads back the same.
    #[test]
    fn every_message_round_trips(
        seq in any::<u64>(),
        interval_ms in MIN_INTERVAL_MS..=MAX_INTERVAL_MS,
        online in cpus(512),
        before in cpus(512),
        now in cpus(512),
    ) {
        let mut online = online;
        online.insert(0);
        let text = round_message(seq, interval_ms, &online, &before, &now);
        let lines: Vec<&str> = text.lines().collect();
        prop_assert!(!lines.is_empty() && lines.len() <= 3);
        for line in &lines {
            prop_assert!(line.len() < MAX_LINE_BYTES);
            let m = parse_line(line).unwrap();
            prop_assert_eq!(m.seq(), seq);
            prop_assert_eq!(&m.to_string(), line);
        }
        let last = parse_line(lines[lines.len() - 1]).unwrap();
        prop_assert_eq!(last, Message::Set {
            seq, interval_ms, online: online.clone(), tagged: now.intersection(&online),
        });
    }

    /// Anything at all is a message or a one-line refusal, never a panic,
    /// and what is accepted stays within the bounds.
    #[test]
    fn garbage_is_refused_in_one_line(line in "\\PC{0,200}") {
        match parse_line(&line) {
            Ok(Message::Set { online, tagged, interval_ms, .. }) => {
                prop_assert!(tagged.is_subset(&online));
                prop_assert!((MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&interval_ms));
            }
            Ok(_) => {}
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }

    /// Lines that start right and go wrong anywhere after.
    #[test]
    fn near_misses_are_refused_in_one_line(
        verb in prop::sample::select(vec!["set", "tag", "clear", "sett", ""]),
        rest in "[ -~]{0,120}",
    ) {
        let line = format!("{MAGIC} 1 {verb} {rest}");
        if let Err(e) = parse_line(&line) {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }
}
