//! Tests of `layout`.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

const D: Class = Class::SuperDevil;
const DV: Class = Class::Devil;
const T: Class = Class::Turtle;

fn flat(grid: &[Vec<Option<u64>>]) -> Vec<Option<u64>> {
    grid.iter().flatten().copied().collect()
}

fn some(ids: &[u64]) -> Vec<Option<u64>> {
    ids.iter().map(|&t| Some(t)).collect()
}

/// The example of §3.3.3: threads 0, 3, 4, 5 are process 0; 1, 2, 6,
/// 7 are processes 1, 2, 3, 4. Input in the paper's sorted order.
fn paper_threads() -> Vec<Slotted> {
    // (thread, process, class, old core, old class)
    let rows = [
        (0, 0, D, 0, D),
        (7, 4, D, 7, T),
        (4, 0, DV, 4, DV),
        (2, 2, DV, 2, DV),
        (6, 3, DV, 6, DV),
        (3, 0, T, 3, T),
        (5, 0, T, 5, T),
        (1, 1, T, 1, T),
    ];
    rows.iter()
        .map(|&(thread, process, class, core, old_class)| Slotted {
            thread,
            process,
            class,
            old: Some(OldPlace {
                core,
                class: old_class,
            }),
            home: None,
        })
        .collect()
}

fn four_by_two() -> Domains {
    Domains {
        cores_per_domain: vec![2, 2, 2, 2],
    }
}

#[test]
fn paper_example_step_by_step() {
    let s = solve(&paper_threads(), &four_by_two());
    let layout: String = s
        .layout
        .iter()
        .map(|slots| slots.iter().map(|c| c.letter()).collect::<String>())
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(layout, "D t D t d t d d");
    assert_eq!(
        s.layout,
        vec![
            vec![D],
            vec![T],
            vec![D],
            vec![T],
            vec![DV],
            vec![T],
            vec![DV],
            vec![DV]
        ]
    );
    assert_eq!(
        flat(&s.initial),
        vec![
            Some(0),
            Some(1),
            None,
            Some(3),
            Some(4),
            Some(5),
            Some(6),
            None
        ]
    );
    assert_eq!(flat(&s.filled), some(&[0, 1, 7, 3, 4, 5, 6, 2]));
    assert_eq!(flat(&s.final_), some(&[0, 3, 7, 1, 4, 5, 6, 2]));
    assert_eq!(s.assignment()[1], (3, 1));
}

#[test]
fn input_order_only_breaks_ties() {
    // Shuffled input, same relative order within each class: same
    // solution.
    let t = paper_threads();
    let shuffled = vec![t[5], t[0], t[2], t[6], t[1], t[3], t[7], t[4]];
    assert_eq!(solve(&shuffled, &four_by_two()), solve(&t, &four_by_two()));
}

#[test]
fn layout_takes_t_instances_per_core() {
    let classes = [D, D, DV, DV, DV, T, T, T];
    let two_by_two = Domains {
        cores_per_domain: vec![2, 2],
    };
    // T = 2: front pass fills core 0 (dom0) and core 2 (dom1), the
    // back pass core 1 and core 3.
    assert_eq!(
        placement_layout(&classes, &two_by_two),
        vec![vec![D, D], vec![T, T], vec![DV, DV], vec![T, DV]]
    );
    // Nine threads on eight cores: no core idles; the first core dealt
    // takes the one extra thread.
    let mut nine = classes.to_vec();
    nine.push(T);
    let l = placement_layout(&nine, &four_by_two());
    let sizes: Vec<usize> = l.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![2, 1, 1, 1, 1, 1, 1, 1]);
}

#[test]
fn layout_with_fewer_threads_and_unequal_domains() {
    assert_eq!(
        placement_layout(&[D, DV, T], &four_by_two()),
        vec![
            vec![D],
            vec![],
            vec![DV],
            vec![],
            vec![T],
            vec![],
            vec![],
            vec![]
        ]
    );
    let uneven = Domains {
        cores_per_domain: vec![1, 0, 3],
    };
    // dom0 full after the first pass; dom1 has no core; dom2 keeps
    // receiving from both ends.
    assert_eq!(
        placement_layout(&[D, DV, DV, T], &uneven),
        vec![vec![D], vec![DV], vec![T], vec![DV]]
    );
    assert!(
        placement_layout(&[], &four_by_two())
            .iter()
            .all(Vec::is_empty)
    );
    assert_eq!(uneven.domain_of(0), 0);
    assert_eq!(uneven.domain_of(1), 2);
    assert_eq!(uneven.domain_of(3), 2);
}

#[test]
fn class_change_may_cross_domains() {
    // The old domain has no slot of the new class: the thread goes to
    // the lowest one elsewhere. Both threads' old cores are in domain 1,
    // so its cores are dealt first: the devil's slot is there, the
    // turtle's in domain 0.
    let doms = Domains {
        cores_per_domain: vec![2, 2],
    };
    let threads = [
        Slotted {
            thread: 5,
            process: 1,
            class: T,
            old: Some(OldPlace { core: 3, class: D }),
            home: None,
        },
        Slotted {
            thread: 6,
            process: 2,
            class: D,
            old: Some(OldPlace { core: 2, class: D }),
            home: None,
        },
    ];
    let s = solve(&threads, &doms);
    assert_eq!(s.layout, vec![vec![T], vec![], vec![D], vec![]]);
    assert_eq!(flat(&s.filled), some(&[5, 6]));
    assert_eq!(s.initial[2], vec![Some(6)], "the devil stays on its core");
}

/// With fewer threads than cores, the layout's slots go to the cores
/// the threads hold (mix:56116: dealt in core order, three of four
/// threads were moved a package away from their memory).
#[test]
fn fewer_threads_than_cores_keep_their_cores() {
    let doms = Domains {
        cores_per_domain: vec![2; 8],
    };
    let old = [9usize, 13, 1, 6];
    let threads: Vec<Slotted> = old
        .iter()
        .enumerate()
        .map(|(i, &core)| Slotted {
            thread: i as u64,
            process: 1,
            class: D,
            old: Some(OldPlace { core, class: D }),
            home: None,
        })
        .collect();
    let s = solve(&threads, &doms);
    let (places, _) = s.places(threads.len());
    for (i, &core) in old.iter().enumerate() {
        assert_eq!(places[i].map(|p| p.0), Some(core), "thread {i}: {s:?}");
    }
    // Without old places, core order as before: one slot per domain
    // from domain 0 on.
    let fresh: Vec<Slotted> = threads
        .iter()
        .map(|t| Slotted { old: None, ..*t })
        .collect();
    let s = solve(&fresh, &doms);
    let cores: Vec<usize> = s.places(4).0.iter().map(|p| p.unwrap().0).collect();
    assert_eq!(cores, vec![0, 2, 4, 6]);
}

#[test]
fn old_domain_preference_skips_lower_cores() {
    // Layout for D D d d t t on [3, 3], T = 1, domain 1 first (its core
    // 4 is held), its cores in the order 4, 3, 5: front: D->c4, D->c0;
    // back: t->c3, t->c1; front: d->c5, d->c2.
    let doms = Domains {
        cores_per_domain: vec![3, 3],
    };
    let mk = |thread, class, old: Option<usize>| Slotted {
        thread,
        process: thread as i64,
        class,
        old: old.map(|core| OldPlace { core, class: T }),
        home: None,
    };
    let threads = [
        mk(0, D, None),
        mk(1, D, None),
        // Devil now, turtle before on core 4 (dom1): gets core 5 even
        // though core 2 is lower.
        mk(2, DV, Some(4)),
        mk(3, DV, None),
        mk(4, T, None),
        mk(5, T, None),
    ];
    let s = solve(&threads, &doms);
    assert_eq!(
        s.layout,
        vec![vec![D], vec![T], vec![DV], vec![T], vec![D], vec![DV]]
    );
    assert_eq!(flat(&s.filled), some(&[0, 4, 3, 5, 1, 2]));
}

#[test]
fn multithreaded_pass_gathers_a_process() {
    // Four turtles on [2, 2], threads 0 and 1 of process 7 on cores 0
    // and 2, the others single-threaded.
    let doms = Domains {
        cores_per_domain: vec![2, 2],
    };
    let mk = |thread, process, core| Slotted {
        thread,
        process,
        class: T,
        old: Some(OldPlace { core, class: T }),
        home: None,
    };
    let threads = [mk(0, 7, 0), mk(1, 7, 2), mk(2, 8, 1), mk(3, 9, 3)];
    let s = solve(&threads, &doms);
    assert_eq!(flat(&s.filled), some(&[0, 2, 1, 3]));
    assert_eq!(flat(&s.final_), some(&[0, 1, 2, 3]));
    // A and B need not share a class; B and C must. Thread 1 is a
    // super-devil now: layout D | t | t | t, it fills core 0, thread
    // 0 (turtle, no room left on core 0) the lowest free turtle slot
    // on core 2, and the pass brings 0 next to 1 by swapping it with
    // thread 2 (process 8, a turtle in dom0).
    let mut threads = threads;
    threads[1].class = D;
    threads[1].old = Some(OldPlace { core: 2, class: D });
    let s = solve(&threads, &doms);
    assert_eq!(flat(&s.filled), some(&[1, 2, 0, 3]));
    assert_eq!(flat(&s.final_), some(&[1, 0, 2, 3]));
}

#[test]
fn multithreaded_pass_moves_no_thread_off_its_memory() {
    // As above: threads 0 and 1 of process 7 on cores 0 and 2; the pass
    // would gather them by swapping thread 1 with thread 2 (process 8,
    // dom0) or thread 0 with thread 3 (process 9, dom1).
    let doms = Domains {
        cores_per_domain: vec![2, 2],
    };
    let mk = |thread, process, core, home| Slotted {
        thread,
        process,
        class: T,
        old: Some(OldPlace { core, class: T }),
        home,
    };
    // Thread 0 is visited first and pulls thread 1 into dom0, swapping it
    // with thread 2, the only other thread there: not when thread 2's
    // memory is in dom0, so process 7 stays split.
    let threads = [
        mk(0, 7, 0, None),
        mk(1, 7, 2, None),
        mk(2, 8, 1, Some(0)),
        mk(3, 9, 3, Some(1)),
    ];
    let s = solve(&threads, &doms);
    assert_eq!(flat(&s.final_), some(&[0, 2, 1, 3]));
    // Thread 2's memory spread: the swap is made.
    let threads = [
        mk(0, 7, 0, None),
        mk(1, 7, 2, None),
        mk(2, 8, 1, None),
        mk(3, 9, 3, Some(1)),
    ];
    let s = solve(&threads, &doms);
    assert_eq!(flat(&s.final_), some(&[0, 1, 2, 3]));
    // Thread 1's own memory in dom1 keeps it there as well.
    let threads = [
        mk(0, 7, 0, None),
        mk(1, 7, 2, Some(1)),
        mk(2, 8, 1, None),
        mk(3, 9, 3, Some(1)),
    ];
    let s = solve(&threads, &doms);
    assert_eq!(flat(&s.final_), some(&[0, 2, 1, 3]));
}

#[test]
fn no_core_places_nothing() {
    let none = Domains {
        cores_per_domain: vec![0, 0],
    };
    assert_eq!(solve(&paper_threads(), &none), Solution::default());
    assert!(distributed_intensity(&[1, 2], &none).is_empty());
}

#[test]
fn di_alternates_ends() {
    // The paper's threads by decreasing miss rate.
    let sorted = [0, 7, 4, 2, 6, 3, 5, 1];
    let got = distributed_intensity(&sorted, &four_by_two());
    // Front pass: first core of each domain; back pass from thread 1:
    // second core of each domain.
    assert_eq!(
        got,
        vec![
            (0, 0),
            (7, 2),
            (4, 4),
            (2, 6),
            (6, 7),
            (3, 5),
            (5, 3),
            (1, 1)
        ]
    );
    // The most intensive four land in four different domains, and each
    // domain pairs one of them with one of the least intensive four.
    let doms = four_by_two();
    let mut per_domain = vec![Vec::new(); 4];
    for (rank, &(_, core)) in got.iter().enumerate() {
        per_domain[doms.domain_of(core)].push(rank);
    }
    for (d, ranks) in per_domain.iter().enumerate() {
        assert_eq!(ranks.len(), 2, "domain {d}");
        assert!(ranks[0] < 4 && ranks[1] >= 4, "domain {d}: {ranks:?}");
    }
}

/// The multithreaded pass written as plainly as §3.3.3 words it (with
/// our gathering rule), in quadratic time, with the same tie-breaks as
/// `group_processes`.
fn naive_group(
    threads: &[Slotted],
    doms: &Domains,
    filled: &[Vec<Option<u64>>],
) -> Vec<Vec<Option<u64>>> {
    let by_id: HashMap<u64, &Slotted> = threads.iter().map(|t| (t.thread, t)).collect();
    let mut grid = filled.to_vec();
    let order: Vec<u64> = filled.iter().flatten().flatten().copied().collect();
    let find = |grid: &[Vec<Option<u64>>], t: u64| -> (usize, usize) {
        for (core, slots) in grid.iter().enumerate() {
            if let Some(slot) = slots.iter().position(|&x| x == Some(t)) {
                return (core, slot);
            }
        }
        unreachable!()
    };
    for (r, &a) in order.iter().enumerate() {
        let pa = by_id[&a].process;
        let da = doms.domain_of(find(&grid, a).0);
        for class in Class::ALL {
            loop {
                let b = order[r + 1..]
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| by_id[*t].process == pa && by_id[*t].class == class)
                    .map(|(k, &t)| (doms.domain_of(find(&grid, t).0), k, t))
                    .filter(|&(d, _, _)| d != da)
                    .min();
                let c = grid
                    .iter()
                    .enumerate()
                    .filter(|(core, _)| doms.domain_of(*core) == da)
                    .flat_map(|(core, slots)| {
                        slots
                            .iter()
                            .enumerate()
                            .map(move |(slot, t)| (core, slot, *t))
                    })
                    .filter_map(|(core, slot, t)| {
                        let th = by_id[&t?];
                        (th.process != pa && th.class == class).then_some((th.process, core, slot))
                    })
                    .min();
                let (Some((db, _, b)), Some((pc, cc, cs))) = (b, c) else {
                    break;
                };
                // Same-process threads in a domain, any class.
                let count = |grid: &[Vec<Option<u64>>], d: usize, p: i64| {
                    grid.iter()
                        .enumerate()
                        .filter(|(core, _)| doms.domain_of(*core) == d)
                        .flat_map(|(_, slots)| slots.iter().flatten())
                        .filter(|t| by_id[*t].process == p)
                        .count()
                };
                let gain = count(&grid, da, pa) + 1 + count(&grid, db, pc) + 1;
                let loss = count(&grid, db, pa) + count(&grid, da, pc);
                if gain <= loss {
                    break;
                }
                let (bc, bs) = find(&grid, b);
                let ct = grid[cc][cs];
                grid[cc][cs] = Some(b);
                grid[bc][bs] = ct;
            }
        }
    }
    grid
}

fn arb_case() -> impl Strategy<Value = (Domains, Vec<Slotted>)> {
    prop::collection::vec(1usize..=8, 1..=8).prop_flat_map(|per| {
        let cores: usize = per.iter().sum();
        let class = prop_oneof![Just(T), Just(DV), Just(D)];
        let old = prop::option::of(
            // Occasionally a core the machine no longer has.
            (0..cores + 1, class.clone()).prop_map(|(core, class)| OldPlace { core, class }),
        );
        let thread = (class, 0i64..5, old);
        (
            Just(Domains {
                cores_per_domain: per,
            }),
            prop::collection::vec(thread, 0..=3 * cores).prop_map(|rows| {
                rows.into_iter()
                    .enumerate()
                    .map(|(i, (class, process, old))| Slotted {
                        thread: 1000 + i as u64,
                        process,
                        class,
                        old,
                        home: None,
                    })
                    .collect()
            }),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn solve_invariants((doms, threads) in arb_case()) {
        let s = solve(&threads, &doms);
        let cores = doms.cores();
        let n = threads.len();
        let per_core = n.div_ceil(cores).max(1);
        let by_id: HashMap<u64, &Slotted> = threads.iter().map(|t| (t.thread, t)).collect();

        // Shapes: one slot per thread, at most T per core, the
        // classes of the input.
        prop_assert_eq!(s.layout.len(), cores);
        prop_assert_eq!(s.layout.iter().map(Vec::len).sum::<usize>(), n);
        prop_assert!(s.layout.iter().all(|l| l.len() <= per_core));
        let mut want: Vec<Class> = threads.iter().map(|t| t.class).collect();
        let mut got: Vec<Class> = s.layout.iter().flatten().copied().collect();
        want.sort();
        got.sort();
        prop_assert_eq!(want, got);
        for grid in [&s.initial, &s.filled, &s.final_] {
            prop_assert_eq!(grid.len(), cores);
            for (core, slots) in grid.iter().enumerate() {
                prop_assert_eq!(slots.len(), s.layout[core].len());
            }
        }

        // Every thread exactly once, in a slot of its class.
        for grid in [&s.filled, &s.final_] {
            let mut seen = HashMap::new();
            for (core, slots) in grid.iter().enumerate() {
                for (slot, t) in slots.iter().enumerate() {
                    let t = t.expect("every slot is filled");
                    prop_assert_eq!(by_id[&t].class, s.layout[core][slot]);
                    prop_assert!(seen.insert(t, (core, slot)).is_none());
                }
            }
            prop_assert_eq!(seen.len(), n);
        }

        // Initial shape: kept threads sit on their old core, are still
        // there after filling, and each (core, class) keeps as many as
        // it can.
        let eligible = |t: &Slotted, core: usize, class: Class| {
            t.old.is_some_and(|o| o.core == core && o.class == t.class) && t.class == class
        };
        for (core, slots) in s.initial.iter().enumerate() {
            for (slot, t) in slots.iter().enumerate() {
                if let Some(t) = t {
                    let th = by_id[t];
                    prop_assert!(eligible(th, core, th.class));
                    prop_assert_eq!(s.filled[core][slot], Some(*t));
                }
            }
            for class in Class::ALL {
                let room = s.layout[core].iter().filter(|&&c| c == class).count();
                let want = threads.iter().filter(|t| eligible(t, core, class)).count();
                let kept = slots
                    .iter()
                    .flatten()
                    .filter(|t| by_id[t].class == class)
                    .count();
                prop_assert_eq!(kept, room.min(want), "core {} class {:?}", core, class);
            }
        }
        // An eligible thread that was not kept was displaced: its
        // class's slots on its old core all went to other eligible
        // threads.
        for t in &threads {
            let Some(old) = t.old else { continue };
            if old.core >= cores || old.class != t.class {
                continue;
            }
            let kept_here = s.initial[old.core].contains(&Some(t.thread));
            let room = s.layout[old.core].iter().filter(|&&c| c == t.class).count();
            let taken = s.initial[old.core]
                .iter()
                .flatten()
                .filter(|o| by_id[o].class == t.class)
                .count();
            prop_assert!(kept_here || taken == room);
        }

        // The indexed multithreaded pass does what the plain one does.
        prop_assert_eq!(&s.final_, &naive_group(&threads, &doms, &s.filled));
    }

    #[test]
    fn di_places_every_thread_once((doms, threads) in arb_case()) {
        let ids: Vec<u64> = threads.iter().map(|t| t.thread).collect();
        let got = distributed_intensity(&ids, &doms);
        let cores = doms.cores();
        let per_core = ids.len().div_ceil(cores).max(1);
        prop_assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), ids);
        let mut load = vec![0; cores];
        for &(_, core) in &got {
            prop_assert!(core < cores);
            load[core] += 1;
        }
        prop_assert!(load.iter().all(|&l| l <= per_core));
    }
}
