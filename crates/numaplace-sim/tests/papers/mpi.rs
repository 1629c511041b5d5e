//! The structure of MPI jobs (`rank_skew`, `barrier`; docs/simulator.md,
//! "MPI jobs"), on mpi-barcelona's lu job: with a barrier at each phase
//! end, one rank left away from its memory slows every rank of its job,
//! where independent copies leave the others as they were.

use numaplace_sim::run::{Driver, RunOptions, run};
use numaplace_sim::workload::{Barrier, MemoryPlacement, Workload};
use numaplace_sim::{Machine, scenario};

/// mpi-barcelona's lu job alone (16 ranks, `rank_skew` 0.1), starting at
/// 0, with the given barrier; the heaviest rank's memory on node 0 when
/// `remote`.
fn lu(barrier: Barrier, remote: bool) -> Workload {
    let mut w = scenario::builtin("mpi-barcelona").unwrap().unwrap();
    w.apps.retain(|a| a.name.starts_with("lu."));
    assert_eq!(w.apps.len(), 16);
    for a in &mut w.apps {
        a.start_s = 0.0;
        a.job.as_mut().unwrap().barrier = barrier;
    }
    if remote {
        w.apps[15].memory = MemoryPlacement::Node(0);
    }
    w
}

/// Each rank's run time, ranks bound one per core (rank r on CPU r, so
/// rank 15 runs on node 3).
fn rank_times(w: &Workload) -> Vec<f64> {
    let m = Machine::preset(&w.machine).unwrap();
    let driver = Driver::Binding {
        name: "one rank per core",
        cpus: (0..16).map(|r| vec![r]).collect(),
    };
    let r = run(&m, w, driver, &RunOptions::default(), &mut |_| {});
    assert!(r.finished);
    (0..16)
        .map(|k| r.app_runtime_s(&format!("lu.{k}")).unwrap())
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn a_rank_left_away_from_its_memory_slows_its_whole_job() {
    let free = rank_times(&lu(Barrier::None, false));
    let free_remote = rank_times(&lu(Barrier::None, true));
    // Independent copies: the heaviest rank (1.1 times the work) is the
    // slowest, and away from its memory only it slows.
    let slowdown = free_remote[15] / free[15] - 1.0;
    eprintln!(
        "rank 15 away from its memory: {:.1} % slower",
        100.0 * slowdown
    );
    assert!(slowdown > 0.02, "{slowdown}");
    let others = mean(&free_remote[..15]) / mean(&free[..15]) - 1.0;
    assert!(others.abs() < 0.01, "{others}");

    let synced = rank_times(&lu(Barrier::Phase, false));
    let synced_remote = rank_times(&lu(Barrier::Phase, true));
    // With the barrier every rank ends with the slowest, rank 15, at
    // about its time alone (the others spin and leave it the controller).
    for t in &synced {
        assert!((t / free[15] - 1.0).abs() < 0.01, "{t} vs {}", free[15]);
    }
    // And rank 15's slowdown is the whole job's.
    let job = mean(&synced_remote) / mean(&synced) - 1.0;
    eprintln!("the job with rank 15 away: {:.1} % slower", 100.0 * job);
    assert!(job > 0.8 * slowdown, "{job} vs {slowdown}");
}
