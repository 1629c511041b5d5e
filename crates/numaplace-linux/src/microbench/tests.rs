//! Tests of `microbench`.

use super::*;

/// The index each entry links to, while links are indices.
fn next_indices(entries: &[Entry]) -> Vec<usize> {
    entries.iter().map(|e| e.next).collect()
}

/// Follows the index links from entry 0: the entries visited before
/// coming back to 0.
fn cycle_from_zero(next: &[usize]) -> Vec<usize> {
    let mut seen = vec![0];
    let mut at = next[0];
    while at != 0 && seen.len() <= next.len() {
        seen.push(at);
        at = next[at];
    }
    seen
}

#[test]
fn the_list_is_one_cycle_through_every_entry() {
    for (n, seed) in [(1, 0), (2, 1), (3, 2), (64, 3), (1000, 4), (4097, 5)] {
        let mut entries = vec![Entry::default(); n];
        link_cycle(&mut entries, seed);
        let next = next_indices(&entries);
        let mut sorted = next.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (0..n).collect::<Vec<_>>(),
            "n={n}: not a permutation"
        );
        let mut cycle = cycle_from_zero(&next);
        assert_eq!(cycle.len(), n, "n={n}: the cycle from 0 misses entries");
        cycle.sort_unstable();
        cycle.dedup();
        assert_eq!(cycle.len(), n, "n={n}");
    }
}

#[test]
fn the_order_is_random_and_depends_on_the_seed() {
    let n = 1000;
    let links = |seed| {
        let mut e = vec![Entry::default(); n];
        link_cycle(&mut e, seed);
        next_indices(&e)
    };
    let (a, b) = (links(1), links(2));
    assert_ne!(a, b);
    assert_eq!(a, links(1));
    // Few entries link to their neighbour: no prefetch-friendly runs.
    let sequential = a.iter().enumerate().filter(|&(i, &j)| j == i + 1).count();
    assert!(sequential < 10, "{sequential} sequential links of {n}");
}

#[test]
fn walking_the_built_list_comes_back_after_every_entry() {
    let n = 513;
    let mut entries = vec![Entry::default(); n];
    link_cycle(&mut entries, 9);
    links_to_addresses(&mut entries);
    let head: *const Entry = entries.as_ptr();
    let mut at = head;
    let mut visited = std::collections::HashSet::new();
    for _ in 0..n {
        assert!(visited.insert(at as usize));
        // SAFETY: the list was built by link_cycle + links_to_addresses.
        at = unsafe { walk(at, 1) };
    }
    assert_eq!(at, head);
    assert_eq!(visited.len(), n);
    // SAFETY: as above.
    assert_eq!(unsafe { walk(head, 3 * n as u64) }, head);
}

#[test]
fn the_shared_sweep_adds_one_to_every_word_per_thread_and_loop() {
    let words: Vec<AtomicU64> = (0..100).map(|_| AtomicU64::new(0)).collect();
    let (threads, loops) = (4, 250);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..loops {
                    sweep(&words);
                }
            });
        }
    });
    for w in &words {
        assert_eq!(w.load(Ordering::SeqCst), threads * loops);
    }
    sweep(&[]);
}

#[test]
fn below_stays_in_range() {
    let mut r = SplitMix(7);
    for n in [1, 2, 3, 10, 1 << 40] {
        for _ in 0..1000 {
            assert!(r.below(n) < n);
        }
    }
}

#[test]
fn node_masks_are_kernel_bitmaps() {
    assert_eq!(words_of(&CpuSet::new()), vec![0]);
    assert_eq!(words_of(&CpuSet::from_iter([0, 2])), vec![0b101]);
    let w = words_of(&CpuSet::from_iter([65]));
    assert_eq!(w.len(), 65 / c_ulong::BITS as usize + 1);
    assert_eq!(w[w.len() - 1], 1 << (65 % c_ulong::BITS));
}

/// A thread that cannot be pinned fails the run, and the error names
/// it, not the thread that stopped because of it.
#[test]
fn a_thread_that_cannot_start_is_the_error() {
    let cpu = thread_affinity(0, 1024).unwrap().first().unwrap();
    let cfg = Config {
        cpus: vec![cpu, 100_000],
        working_set: 64 * 1024,
        shared: 0,
        memory: MemoryPolicy::Local,
        length: Length::Loops(1),
        seed: 1,
    };
    let e = run(&cfg).unwrap_err();
    assert!(
        e.what.contains("thread 1: sched_setaffinity to CPU 100000"),
        "{e}"
    );
}

/// A real run on this machine: 2 threads on CPU 0 (or whatever the
/// process may use), 1 MiB each, memory local.
#[test]
fn a_tiny_run_touches_and_counts_its_pages() {
    let cpu = thread_affinity(0, 1024).unwrap().first().unwrap();
    let cfg = Config {
        cpus: vec![cpu, cpu],
        working_set: 1 << 20,
        shared: 4096,
        memory: MemoryPolicy::Local,
        length: Length::Loops(3),
        seed: 1,
    };
    let r = run(&cfg).unwrap();
    assert_eq!(r.threads.len(), 2);
    assert_eq!(r.entries_per_thread, (1 << 20) / 64);
    for t in &r.threads {
        assert_eq!(t.loops, 3);
        assert_eq!(t.hops, 3 * r.entries_per_thread);
        assert_eq!(t.shared_adds, 3 * 512);
        assert!(t.ran_on.iter().all(|s| s.cpu == cpu), "{t:?}");
        let pages: u64 = t.private_pages.values().sum();
        assert_eq!(pages + t.private_pages_absent, (1 << 20) / r.page_size);
        assert!(pages > 0, "{t:?}");
    }
    assert_eq!(r.shared_pages.values().sum::<u64>(), 4096 / r.page_size);
    assert!(r.mean_seconds > 0.0);
}
