//! Tests of `numaplace bench`: its arguments checked against a synthetic
//! machine, and the experiments' plans and fits.

use super::experiment::{Fig, fit, loops_for, parse, plan};
use super::*;
use numaplace_linux::{TopologySource, discover};

fn synthetic(desc: &str) -> Topology {
    discover(&TopologySource::Synthetic(desc.into())).unwrap()
}

fn machine(desc: &str) -> Usable {
    let topo = synthetic(desc);
    Usable {
        all: topo.span().clone(),
        topo,
    }
}

fn args(extra: &[&str]) -> BenchArgs {
    use clap::Parser;
    let mut argv = vec!["numaplace", "bench"];
    argv.extend_from_slice(extra);
    match numaplace::cli::Cli::try_parse_from(argv).unwrap().command {
        numaplace::cli::Command::Bench(a) => a,
        other => panic!("{other:?}"),
    }
}

fn err(extra: &[&str], m: &Usable) -> String {
    config(&args(extra), m).unwrap_err().0
}

const TWO_NODES: &str = "pack:2 numa:1 l3:1 core:4 pu:2";

#[test]
fn sizes_must_be_whole_entries_and_words() {
    assert_eq!(size_arg("--working-set", "1MiB", 64).unwrap(), MIB);
    assert_eq!(size_arg("--shared", "0", 8).unwrap(), 0);
    assert!(
        size_arg("--working-set", "100", 64)
            .unwrap_err()
            .0
            .contains("multiple of 64")
    );
    assert!(
        size_arg("--shared", "12", 8)
            .unwrap_err()
            .0
            .contains("8-byte words")
    );
    assert!(
        size_arg("--shared", "lots", 8)
            .unwrap_err()
            .0
            .contains("--shared lots")
    );
}

#[test]
fn memory_nodes_must_exist_and_have_memory() {
    let m = machine(TWO_NODES);
    assert_eq!(memory_arg("1", &m.topo).unwrap(), MemoryPolicy::Node(1));
    assert_eq!(memory_arg("local", &m.topo).unwrap(), MemoryPolicy::Local);
    assert!(
        matches!(memory_arg("interleave", &m.topo).unwrap(), MemoryPolicy::Interleave(s) if s.len() == 2)
    );
    let e = memory_arg("5", &m.topo).unwrap_err().0;
    assert!(
        e.contains("node 5 does not exist; this machine has nodes 0-1"),
        "{e}"
    );
    assert!(memory_arg("near", &m.topo).unwrap_err().0.contains("local"));
}

#[test]
fn cpus_are_one_per_thread_and_on_the_machine() {
    let m = machine(TWO_NODES);
    let ok = |a: &[&str]| config(&args(a), &m).unwrap().cpus;
    assert_eq!(ok(&["--cpus", "0,8"]), [0, 8]);
    assert_eq!(ok(&["--threads", "2", "--cpus", "3-4"]), [3, 4]);
    assert!(err(&["--threads", "3", "--cpus", "0,1"], &m).contains("one CPU per thread"));
    assert!(err(&["--cpus", "99"], &m).contains("CPU 99 is not one of this machine's CPUs"));
    assert!(err(&["--threads", "0"], &m).contains("at least one thread"));
    assert!(err(&["--threads", "17"], &m).contains("16 CPUs"));
    assert!(err(&["--cpus", "x"], &m).contains("--cpus"));
    let narrow = Usable {
        topo: m.topo.restrict(&"0-3".parse().unwrap()).unwrap(),
        all: m.all.clone(),
    };
    assert!(err(&["--cpus", "5"], &narrow).contains("CPU 5 is not allowed to this process"));
}

#[test]
fn nodes_spread_or_pack_over_separate_cores_first() {
    let m = machine(TWO_NODES);
    let ok = |a: &[&str]| config(&args(a), &m).unwrap().cpus;
    // Synthetic PUs: core k has CPUs 2k, 2k+1; node 1 is CPUs 8-15.
    assert_eq!(ok(&["--threads", "4", "--nodes", "0,1"]), [0, 8, 2, 10]);
    assert_eq!(
        ok(&["--threads", "4", "--nodes", "0,1", "--pack"]),
        [0, 2, 4, 6]
    );
    assert_eq!(
        ok(&["--threads", "6", "--nodes", "1", "--pack"]),
        [8, 10, 12, 14, 9, 11]
    );
    assert!(err(&["--nodes", "7"], &m).contains("node 7 does not exist"));
    assert!(err(&["--threads", "9", "--nodes", "0"], &m).contains("8 CPUs"));
}

#[test]
fn lengths_and_memory_needs_are_checked() {
    let m = machine(TWO_NODES);
    assert!(err(&["--loops", "0"], &m).contains("at least one loop"));
    assert!(err(&["--seconds", "-1"], &m).contains("positive"));
    let c = config(&args(&["--seconds", "0.5"]), &m).unwrap();
    assert_eq!(c.length, Length::Seconds(0.5));
    assert_eq!(
        config(&args(&[]), &m).unwrap().length,
        Length::Loops(DEFAULT_LOOPS)
    );
    let node_mem = m.topo.nodes()[0].memory;
    if node_mem > 0 {
        let too_much = format!("{}B", node_mem + 64 * MIB);
        let e = err(&["--memory-node", "0", "--working-set", &too_much], &m);
        assert!(e.contains("but node 0 has"), "{e}");
    }
}

#[test]
fn experiment_names_are_checked() {
    assert_eq!(parse("fig5b").unwrap(), Fig::B5);
    assert!(parse("fig6").unwrap_err().0.contains("fig4a"));
}

#[test]
fn threads_fit_both_placements() {
    assert_eq!(fit(4, 8, Some((8, 8))), 4);
    assert_eq!(fit(4, 2, Some((2, 2))), 2);
    assert_eq!(fit(4, 2, None), 2);
    assert_eq!(fit(4, 4, Some((4, 1))), 2);
    assert_eq!(fit(4, 3, Some((3, 3))), 2);
    assert_eq!(fit(1, 1, Some((1, 1))), 1);
}

#[test]
fn fig4a_puts_the_remote_thread_on_the_other_node() {
    let p = plan(Fig::A4, &synthetic(TWO_NODES), false);
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    assert_eq!(p.memory, MemoryPolicy::Node(0));
    assert_eq!(p.points.len(), 9);
    assert_eq!(
        (p.points[0].first.clone(), p.points[0].second.clone()),
        (vec![0], Some(vec![8]))
    );
    let one = plan(Fig::A4, &synthetic("pack:1 l3:1 core:2 pu:1"), true);
    assert_eq!(
        one.notes,
        ["fig4a needs two NUMA nodes; this machine has 1: running the local case only"]
    );
    assert!(one.points.iter().all(|p| p.second.is_none()));
}

#[test]
fn fig4b_and_fig5_place_four_threads_packed_and_two_plus_two() {
    let t = synthetic(TWO_NODES);
    let b = plan(Fig::B4, &t, true);
    assert_eq!(b.points[0].first, [0, 2, 4, 6]);
    assert_eq!(b.points[0].second.as_deref(), Some(&[0, 2, 8, 10][..]));
    assert_eq!(b.points[0].working_set, MIB);
    assert_eq!(b.memory, MemoryPolicy::Local);
    let c = plan(Fig::C5, &t, false);
    assert!(c.points.iter().all(|p| p.shared == 128 * KIB));
    assert_eq!(c.points[0].second.as_deref(), Some(&[0, 2, 8, 10][..]));
    let s = plan(Fig::B5, &t, true);
    let shared: Vec<u64> = s.points.iter().map(|p| p.shared).collect();
    assert_eq!(shared, [0, 32 * KIB, 256 * KIB]);
    assert!(s.points.iter().all(|p| p.working_set == 4 * MIB));
}

#[test]
fn small_machines_say_what_they_cannot_host() {
    let t = synthetic("pack:1 l3:1 core:2 pu:1");
    let b = plan(Fig::B4, &t, true);
    assert!(
        b.notes[0].starts_with("fig4b needs two LLC domains; this machine has 1"),
        "{:?}",
        b.notes
    );
    assert_eq!(b.points[0].first.len(), 2);
    let c = plan(Fig::C4, &t, false);
    assert!(
        c.notes[0].starts_with("fig4c needs two sockets"),
        "{:?}",
        c.notes
    );
    assert_eq!(c.points.len(), 1, "only 2 threads fit");
    assert_eq!(c.points[0].shared, 64);
    let s = plan(Fig::A5, &t, true);
    assert!(
        s.notes[0].contains("running the Intra-S case only"),
        "{:?}",
        s.notes
    );
}

#[test]
fn loops_follow_the_budget() {
    let p = |ws: u64, shared: u64| experiment::Point {
        x: String::new(),
        working_set: ws,
        shared,
        first: vec![0],
        second: None,
    };
    assert_eq!(loops_for(&p(MIB, 0), 16384.0 * 10.0), 10);
    assert_eq!(loops_for(&p(0, 64), 80.0), 10);
    assert_eq!(loops_for(&p(256 * MIB, 0), 1.0), 1);
}
