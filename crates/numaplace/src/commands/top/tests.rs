//! Tests of `top`'s frame: the panes drawn from a state, and what the view
//! says before a frame and in a small terminal.

use super::*;
use numaplace::top_state::{DecisionRow, GroupRow, NodeRow};
use std::collections::BTreeMap;

fn state() -> TopState {
    TopState {
        format: numaplace::top_state::FORMAT,
        policy: "static".into(),
        applies: false,
        round: 4,
        nodes: vec![
            NodeRow {
                id: 0,
                cpus: "0-3".into(),
                cpu_count: 4,
                busy_cpus: Some(1.5),
                mem_total: Some(8 << 30),
                mem_free: Some(2 << 30),
                allocations: Some(numaplace::top_state::NodeAllocations {
                    local_per_s: 5120.4,
                    remote_per_s: 37.0,
                    turned_away_per_s: 12.0,
                }),
            },
            NodeRow {
                id: 1,
                cpus: "4-7".into(),
                cpu_count: 4,
                busy_cpus: None,
                mem_total: None,
                mem_free: None,
                allocations: None,
            },
        ],
        groups: vec![GroupRow {
            pid: 4242,
            label: "db\\x1b[2J".into(),
            kind: "process".into(),
            in_scope: true,
            threads: 3,
            running: BTreeMap::from([(0, 2), (1, 1)]),
            cpus: "1-2,5".into(),
            busy_cpus: Some(0.75),
            memory: Some(BTreeMap::from([(0, 300 << 20)])),
            class: Some("devil".into()),
            signals: vec!["counters".into(), "numa_maps".into()],
            left_alone: vec!["1 chose-cpus".into()],
        }],
        decisions: vec![DecisionRow {
            round: 4,
            pid: 4242,
            label: "db".into(),
            action: "move memory to node 0".into(),
            reason: "its threads run on node 0".into(),
            outcome: "done".into(),
            ..DecisionRow::default()
        }],
        ..TopState::default()
    }
}

fn status(problem: Option<&str>) -> Status<'static> {
    Status {
        source: "daemon unix:/run/x.sock",
        problem: problem.map(String::from),
    }
}

#[test]
fn a_frame_shows_the_nodes_the_groups_and_what_is_not_measured() {
    let s = state();
    let text = frame_text(&App::default(), Some(&s), &status(None), (120, 30)).unwrap();
    assert!(
        text.contains("policy static | round 4 | applies nothing"),
        "{text}"
    );
    let node0 = text.lines().find(|l| l.contains("0-3")).unwrap();
    for want in ["1.50 of 4", "6GiB", "2GiB", "8GiB", " 5120 ", " 37"] {
        assert!(node0.contains(want), "{want}: {node0}");
    }
    let node1 = text.lines().find(|l| l.contains("4-7")).unwrap();
    assert!(node1.contains(" - "), "unknown is a dash: {node1}");
    assert!(!node1.contains(" 0 "), "allocations not measured: {node1}");
    assert!(text.contains("memory bandwidth: not measured"), "{text}");
    assert!(
        text.contains("LOCAL/S") && text.contains("REMOTE/S"),
        "{text}"
    );
    assert!(
        text.contains("allocations turned away (short of memory): node 0 12/s"),
        "{text}"
    );
    let g = text.lines().find(|l| l.contains("*4242")).unwrap();
    for want in [
        "db\\x1b[2J",
        "3",
        "0.75",
        "0:2 1:1",
        "1-2,5",
        "0:300MiB",
        "devil",
        "left alone: 1 chose-cp",
    ] {
        assert!(g.contains(want), "{want}: {g}");
    }
    assert!(!text.contains('\u{1b}'), "no escape reaches the terminal");
    // A wide terminal shows all of the last column.
    let wide = frame_text(&App::default(), Some(&s), &status(None), (200, 30)).unwrap();
    let g = wide.lines().find(|l| l.contains("*4242")).unwrap();
    assert!(
        g.contains("left alone: 1 chose-cpus; counters, numa_maps"),
        "{g}"
    );
}

#[test]
fn the_decisions_pane_gives_each_reason_and_a_problem_is_said() {
    let s = state();
    let app = App {
        pane: input::Pane::Decisions,
        ..App::default()
    };
    let text = frame_text(
        &app,
        Some(&s),
        &status(Some(
            "daemon not answering (retrying): no whole answer within 2s",
        )),
        (100, 24),
    )
    .unwrap();
    assert!(
        text.contains("daemon not answering (retrying): no whole answer"),
        "{text}"
    );
    assert!(
        text.contains("round 4 db (pid 4242): move memory to node 0 -> done"),
        "{text}"
    );
    assert!(text.contains("because its threads run on node 0"), "{text}");
}

#[test]
fn before_the_first_frame_and_in_a_small_terminal_the_view_says_so() {
    let text = frame_text(&App::default(), None, &status(None), (80, 20)).unwrap();
    assert!(text.contains("waiting for the first round"), "{text}");
    let text = frame_text(&App::default(), Some(&state()), &status(None), (50, 20)).unwrap();
    assert!(text.contains("terminal too small: 50x20"), "{text}");
}

#[test]
fn sizes_are_checked() {
    assert_eq!(parse_size("120x40").unwrap(), (120, 40));
    for bad in ["120", "x40", "0x40", "9x40", "120x5000", "axb", "120x40x2"] {
        let e = parse_size(bad).unwrap_err();
        assert!(e.to_string().contains("COLUMNSxROWS"), "{bad}: {e}");
    }
}
