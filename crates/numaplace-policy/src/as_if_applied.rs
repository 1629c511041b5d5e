//! Changes taken as made without being made, and shown in the snapshots
//! that follow: a replay's pins and memory moves (a recording shows the
//! threads where they really ran), and a dry run's proposals (the live
//! host shows them where they are, since nothing was applied). Without it
//! a policy would find each change undone the next round and ask for it
//! again, round after round (or, through the engine, take a thread for one
//! that chose its own CPUs).
//!
//! A pin makes the thread's allowed CPUs the pin, and its last CPU one of
//! them if it was elsewhere. A memory move takes anonymous memory from the
//! process's other nodes (in proportion to what each holds) to the
//! target, up to the pages asked for, and every later snapshot shows the
//! process's memory per node with the moves made so far laid over what
//! was read. Which pages moved is not known (a `MoveWindow` moves its page
//! count, wherever they were), and memory the process allocates later is
//! placed as read. A change of the kernel's automatic NUMA balancing shows
//! as the setting asked for. What the threads did (CPU time, counters,
//! sampled addresses) stays as read.
//!
//! Where the world itself shows what a change touched change otherwise
//! (someone pinned the thread, the operator set `kernel.numa_balancing`),
//! that change is dropped and the world's wins, as the daemon would see
//! it. Everything is kept by [`TaskId`], so a thread or process gone is
//! forgotten and one that takes its reused id inherits nothing.

use std::collections::{BTreeMap, HashMap, HashSet};

use numaplace_model::world::{Actuator, AffinityError};
use numaplace_model::{Action, CpuSet, NodeMemory, Outcome, PageCounts, Snapshot, TaskId};

/// Pins, memory moves and the kernel's balancing setting taken as made,
/// laid over each snapshot that follows ([`AsIfApplied::show`]).
#[derive(Debug)]
pub struct AsIfApplied {
    page_size: u64,
    /// Per thread: the pin, and the affinity the world showed when it was
    /// made.
    pins: HashMap<TaskId, (CpuSet, CpuSet)>,
    /// The affinity of every thread in the snapshot last shown, before
    /// the pins (what a pin made now replaces).
    seen: HashMap<TaskId, CpuSet>,
    /// Per process, its moves in order: (node, bytes); consecutive moves
    /// to one node are one entry.
    moves: HashMap<TaskId, Vec<(u32, u64)>>,
    /// Per process, anonymous bytes per node as last shown (with the
    /// moves), updated by the moves of the round.
    anon: HashMap<TaskId, BTreeMap<u32, u64>>,
    /// The kernel's balancing between nodes as set here, and as the world
    /// showed it when it was set.
    balancing: Option<(bool, Option<bool>)>,
    /// The kernel's balancing as the snapshot last shown read it.
    seen_balancing: Option<bool>,
}

/// Moves up to `bytes` of anonymous memory from the other nodes of `anon`
/// to `to`, from each in proportion to what it holds; returns the bytes
/// moved.
fn shift(anon: &mut BTreeMap<u32, u64>, to: u32, bytes: u64) -> u64 {
    let elsewhere: u64 = anon.iter().filter(|(n, _)| **n != to).map(|(_, b)| b).sum();
    let want = bytes.min(elsewhere);
    if want == 0 {
        return 0;
    }
    let mut moved = 0;
    let others: Vec<u32> = anon.keys().copied().filter(|&n| n != to).collect();
    for (i, n) in others.iter().enumerate() {
        let have = anon[n];
        let take = if i + 1 == others.len() {
            (want - moved).min(have)
        } else {
            ((want as u128 * have as u128) / elsewhere as u128) as u64
        };
        *anon.get_mut(n).expect("listed") -= take;
        moved += take;
    }
    *anon.entry(to).or_default() += moved;
    moved
}

impl AsIfApplied {
    /// `page_size`: bytes per page, for the page counts of memory moves.
    pub fn new(page_size: u64) -> AsIfApplied {
        AsIfApplied {
            page_size: page_size.max(1),
            pins: HashMap::new(),
            seen: HashMap::new(),
            moves: HashMap::new(),
            anon: HashMap::new(),
            balancing: None,
            seen_balancing: None,
        }
    }

    /// Lays the changes taken so far over `s`, the world's next snapshot;
    /// forgets those of threads and processes gone, and those the world
    /// shows changed otherwise.
    pub fn show(&mut self, s: &mut Snapshot) {
        self.show_memory(s);
        self.seen = s
            .tasks
            .iter()
            .map(|t| (t.id(), t.allowed_cpus.clone()))
            .collect();
        let alive = &self.seen;
        self.pins.retain(|id, _| alive.contains_key(id));
        for t in &mut s.tasks {
            let Some((pin, then)) = self.pins.get(&t.id()) else {
                continue;
            };
            if t.allowed_cpus != *then {
                // Changed in the world itself: the real change wins.
                self.pins.remove(&t.id());
                continue;
            }
            t.allowed_cpus = pin.clone();
            if t.last_cpu.is_none_or(|c| !pin.contains(c)) {
                t.last_cpu = pin.first();
            }
        }
        self.seen_balancing = s.machine.numa_balancing;
        match self.balancing {
            Some((_, then)) if then != s.machine.numa_balancing => self.balancing = None,
            Some((on, _)) => s.machine.numa_balancing = Some(on),
            None => {}
        }
    }

    fn show_memory(&mut self, s: &mut Snapshot) {
        let alive: HashSet<TaskId> = s.groups.iter().map(|g| g.id()).collect();
        self.moves.retain(|id, _| alive.contains(id));
        self.anon.clear();
        for g in &mut s.groups {
            let id = g.id();
            let Some(memory) = g.memory.as_mut() else {
                continue;
            };
            let mut anon: BTreeMap<u32, u64> = memory.iter().map(|(n, m)| (*n, m.anon)).collect();
            for &(to, bytes) in self.moves.get(&id).into_iter().flatten() {
                shift(&mut anon, to, bytes);
            }
            for (n, b) in &anon {
                memory.entry(*n).or_insert_with(NodeMemory::default).anon = *b;
            }
            self.anon.insert(id, anon);
        }
    }

    /// The pin taken for `task` where there is one, else its affinity in
    /// the snapshot last shown; `None`: not in it.
    pub fn affinity(&self, task: TaskId) -> Option<&CpuSet> {
        self.pins
            .get(&task)
            .map(|(pin, _)| pin)
            .or_else(|| self.seen.get(&task))
    }

    /// Takes a pin as made; false where the thread was not in the
    /// snapshot last shown (gone).
    fn pin(&mut self, task: TaskId, cpus: &CpuSet) -> bool {
        let Some(then) = self.seen.get(&task) else {
            return false;
        };
        self.pins.insert(task, (cpus.clone(), then.clone()));
        true
    }

    /// Takes a memory move as made: up to `pages` pages (all there are
    /// elsewhere where `None`); `None` where the process's memory was not
    /// in the snapshot last shown.
    fn move_memory(&mut self, process: TaskId, to: u32, pages: Option<u64>) -> Option<PageCounts> {
        let anon = self.anon.get_mut(&process)?;
        let page = self.page_size;
        let already = anon.get(&to).copied().unwrap_or(0) / page;
        let moved = shift(anon, to, pages.map_or(u64::MAX, |p| p.saturating_mul(page))) / page;
        if moved > 0 {
            let list = self.moves.entry(process).or_default();
            match list.last_mut() {
                Some((n, b)) if *n == to => *b += moved * page,
                _ => list.push((to, moved * page)),
            }
        }
        Some(PageCounts {
            moved,
            already,
            busy: 0,
            failed: 0,
        })
    }

    /// Takes the kernel's automatic NUMA balancing between nodes as turned
    /// `on` (or off).
    fn kernel_balancing(&mut self, on: bool) {
        self.balancing = Some((on, self.seen_balancing));
    }

    /// Takes `action` as carried out, whatever kind it is; what became of
    /// it as if it had been: done, the pages a memory move moved, or gone
    /// (its thread or process was not in the snapshot last shown).
    pub fn take(&mut self, action: &Action) -> Outcome {
        let pages = |p: Option<PageCounts>| p.map_or(Outcome::Gone, Outcome::Pages);
        match action {
            Action::Pin { task, cpus, .. } => {
                if self.pin(*task, cpus) {
                    Outcome::Done
                } else {
                    Outcome::Gone
                }
            }
            Action::MoveMemory {
                process,
                to_node,
                max_pages,
            } => pages(self.move_memory(*process, *to_node, *max_pages)),
            Action::MoveWindow {
                process,
                to_node,
                pages_before,
                pages_after,
                ..
            } => {
                let n = pages_before + pages_after + 1;
                pages(self.move_memory(*process, *to_node, Some(n)))
            }
            Action::KernelBalancing { on } => {
                self.kernel_balancing(*on);
                Outcome::Done
            }
        }
    }
}

/// An actuator whose actions answered [`Outcome::NotApplied`] (a dry
/// run's) are taken as made by `as_if`, so the next rounds show them; the
/// engine's dry-run mode ([`crate::engine::Engine::as_if_applied`]).
pub(crate) struct Proposing<'a> {
    pub inner: &'a mut dyn Actuator,
    pub as_if: &'a mut AsIfApplied,
}

impl Actuator for Proposing<'_> {
    fn apply(&mut self, action: &Action) -> Outcome {
        let o = self.inner.apply(action);
        if o == Outcome::NotApplied {
            self.as_if.take(action);
        }
        o
    }

    fn affinity(&self, task: TaskId, tgid: i32) -> Result<CpuSet, AffinityError> {
        self.inner.affinity(task, tgid)
    }

    fn kernel_balancing_value(&self) -> Option<Result<u32, String>> {
        self.inner.kernel_balancing_value()
    }

    fn set_kernel_balancing_value(&mut self, value: u32) -> Result<(), String> {
        self.inner.set_kernel_balancing_value(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_takes_from_the_other_nodes_in_proportion() {
        let mut anon: BTreeMap<u32, u64> = [(0, 300), (1, 100), (2, 0)].into();
        assert_eq!(shift(&mut anon, 2, 200), 200);
        assert_eq!(anon, [(0, 150), (1, 50), (2, 200)].into());
        // More than there is elsewhere: all of it.
        assert_eq!(shift(&mut anon, 1, 1000), 350);
        assert_eq!(anon, [(0, 0), (1, 400), (2, 0)].into());
        assert_eq!(shift(&mut anon, 1, 10), 0);
        // A node it has nothing on yet.
        assert_eq!(shift(&mut anon, 3, 7), 7);
        assert_eq!(anon[&3] + anon[&1], 400);
        // Rounding never moves more than asked.
        let mut odd: BTreeMap<u32, u64> = [(0, 1), (1, 1), (2, 1)].into();
        assert_eq!(shift(&mut odd, 2, 1), 1);
        assert_eq!(odd.values().sum::<u64>(), 3);
    }

    /// A pin shows until the thread is seen with other CPUs than it had
    /// when pinned, or gone; a thread with the same tid and another start
    /// time is another thread.
    #[test]
    fn a_pin_shows_until_its_thread_changes_or_goes() {
        let id = TaskId {
            tid: 7,
            start_time: 70,
        };
        let snapshot = |start_time: u64, cpus: &str| {
            let mut s = Snapshot::default();
            s.tasks.push(numaplace_model::Task {
                tid: 7,
                tgid: 7,
                start_time,
                comm: "t".into(),
                state: 'R',
                last_cpu: Some(0),
                allowed_cpus: CpuSet::parse_list(cpus).unwrap(),
                allowed_mems: CpuSet::default(),
                confined_cpus: None,
                manager: None,
                utime: 0,
                stime: 0,
                vcpu: None,
            });
            s
        };
        let shown = |as_if: &mut AsIfApplied, s: &Snapshot| {
            let mut s = s.clone();
            as_if.show(&mut s);
            (s.tasks[0].allowed_cpus.to_string(), s.tasks[0].last_cpu)
        };
        let mut as_if = AsIfApplied::new(4096);
        let before = snapshot(70, "0-3");
        shown(&mut as_if, &before);
        assert!(as_if.pin(id, &CpuSet::parse_list("2-3").unwrap()));
        assert_eq!(shown(&mut as_if, &before), ("2-3".into(), Some(2)));
        assert_eq!(shown(&mut as_if, &before), ("2-3".into(), Some(2)));
        // Another thread with the tid: its own CPUs, and the pin is gone.
        assert_eq!(
            shown(&mut as_if, &snapshot(71, "0-3")),
            ("0-3".into(), Some(0))
        );
        assert_eq!(shown(&mut as_if, &before), ("0-3".into(), Some(0)));
        // Pinned again, then it set its own CPUs: its own, for good.
        assert!(as_if.pin(id, &CpuSet::parse_list("2-3").unwrap()));
        assert_eq!(shown(&mut as_if, &snapshot(70, "1")), ("1".into(), Some(0)));
        assert_eq!(shown(&mut as_if, &before), ("0-3".into(), Some(0)));
        // Not in the snapshot last shown: not taken.
        let gone = TaskId {
            tid: 8,
            start_time: 80,
        };
        assert!(!as_if.pin(gone, &CpuSet::parse_list("1").unwrap()));
    }
}
