//! The memory events that need no PMU, read from this machine's own files:
//! a process that touches fresh memory between two rounds shows the page
//! faults it took, and the allocations show in its node's `numastat`.

use numaplace_linux::testutil::AnonMapping;
use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_model::memory_events::NoRates;

/// Pages touched between the rounds: 16 MiB of 4 KiB pages.
const PAGES: usize = 4096;

#[test]
fn fresh_memory_shows_in_page_faults_and_numastat() {
    let mut c = Collector::new(
        SysRoot::host(),
        CollectOptions {
            memory: false,
            counters: false,
            machine: true,
            samples: false,
        },
    );
    let me = std::process::id() as i32;
    let first = c.collect().unwrap();
    assert!(
        first.page_faults.is_empty(),
        "the first round has no counts"
    );
    assert_eq!(first.node_rates(), Err(NoRates::FirstRound));
    assert!(first.machine.vmstat_numa.is_none());

    let len = PAGES * 4096;
    // One fault and one allocation per 4 KiB page (no huge page takes a
    // block of them).
    let m = AnonMapping::new(len);
    m.no_huge_pages().fill();
    let second = c.collect().unwrap();
    drop(m);

    let faults = second.page_faults[&me];
    assert!(
        faults.minor >= PAGES as u64,
        "{faults:?}: at least one minor fault per page touched"
    );
    let (minor_per_s, _) = faults.per_second(second.interval_ns).unwrap();
    assert!(minor_per_s > 0.0);

    let allocated: u64 = (second.machine.numastat.values())
        .map(|n| n.numa_hit + n.numa_miss)
        .sum();
    assert!(
        allocated >= PAGES as u64,
        "{allocated} allocations over the nodes: {:?}",
        second.machine.numastat
    );
    let rates = second
        .node_rates()
        .expect("a rate per node from the second round");
    assert_eq!(rates.len(), second.machine.numastat.len());
    assert!(rates.values().any(|r| r.numa_hit > 0.0), "{rates:?}");
    assert!(second.machine.vmstat_numa.is_some(), "vmstat is read");
    eprintln!(
        "this process: {} minor faults ({minor_per_s:.0}/s); nodes: {rates:?}",
        faults.minor
    );
}
