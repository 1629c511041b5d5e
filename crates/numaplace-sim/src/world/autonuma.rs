//! The simulated kernel's automatic NUMA balancing (`kernel.numa_balancing=1`),
//! both halves, after `kernel/sched/fair.c` and `mm/memory.c`:
//!
//! - **Scanning** (`task_numa_work`): a process's first scan comes
//!   `numa_balancing_scan_delay_ms` after it starts; each scan marks the next
//!   `numa_balancing_scan_size_mb` of its resident memory. The scan period
//!   starts at the delay and adapts at the end of each pass over the address
//!   space (`update_task_scan_period`): mostly local faults slow it down, mostly
//!   remote private ones speed it up, within `task_scan_min` / `task_scan_max`
//!   (the sysctls divided by the windows its resident memory needs, and never
//!   faster than 2,560 MB of scanning a second). Memory under an explicit
//!   policy (bound, interleaved) is not scanned.
//! - **Hinting faults** (`do_numa_page`, `task_numa_fault`): every marked page
//!   a thread touches faults once, costing it `hinting_fault_us`; the fault
//!   counts for the page's node and the thread's. A page moves to the faulting
//!   thread's node only if its previous fault came from that node too, or it
//!   had none (`should_numa_migrate_memory`'s two-stage filter); a shared page
//!   of a numa group also only where the group runs more than it keeps memory
//!   (its 3/4 hysteresis, or 3x the CPU use).
//! - **Task placement** (`task_numa_placement`, `task_numa_migrate`): at the
//!   end of each pass a thread's fault counts halve and take the new ones; its
//!   preferred node is the one with the most (its numa group's, for threads
//!   sharing memory). A thread away from it moves to an idle CPU there, or
//!   swaps with a thread there when that improves the two together
//!   (`task_numa_compare`, with the group's 1/16 hysteresis), and tries again
//!   at each scan while it stays away. A thread of a group spread over several
//!   active nodes (a third of the maximum faults or more) stays on any of
//!   them. The load balancer does not move a thread off its preferred node
//!   for noise or SMT (`migrate_degrades_locality`; `linux.rs`).
//!
//! The state is kept per region, not per page: the share of a region's pages
//! whose last fault came from each node, which is what the two-stage filter
//! reads in expectation.

use super::*;

/// `MAX_SCAN_WINDOW` in `kernel/sched/fair.c`: MB of PTEs scanned a second
/// at most.
const MAX_SCAN_WINDOW_MB: f64 = 2560.0;
/// `NUMA_PERIOD_SLOTS`, `NUMA_PERIOD_THRESHOLD`: the scan period moves in
/// tenths; 7 tenths of local faults keep it where it is.
const PERIOD_SLOTS: f64 = 10.0;
const PERIOD_THRESHOLD: f64 = 7.0;
/// `ACTIVE_NODE_FRACTION`: a node with more than a third of a group's
/// busiest node's faults is one it actively runs on.
const ACTIVE_NODE_FRACTION: f64 = 3.0;

/// A process's scanner (the kernel keeps it in the `mm`).
#[derive(Debug, Clone)]
pub(super) struct Scan {
    /// When the next scan is due, simulated seconds.
    next_s: f64,
    /// `numa_scan_period`, ms.
    period_ms: f64,
    /// How far this pass over the address space got, 0..1.
    pos: f64,
    /// Faults of this pass: on pages already local, on remote ones;
    /// private and shared.
    local: f64,
    remote: f64,
    private: f64,
    shared: f64,
    /// Share of the shared area's pages whose last hinting fault came from
    /// each node (the rest never faulted).
    shared_last: Vec<f64>,
}

impl Scan {
    pub(super) fn new(now: f64, nodes: usize, delay_ms: f64) -> Scan {
        Scan {
            next_s: now + delay_ms / 1000.0,
            period_ms: delay_ms,
            pos: 0.0,
            local: 0.0,
            remote: 0.0,
            private: 0.0,
            shared: 0.0,
            shared_last: vec![0.0; nodes],
        }
    }
}

/// A thread's NUMA fault statistics (`numa_faults` in its task).
#[derive(Debug, Clone)]
pub(super) struct TaskFaults {
    /// Decayed faults per node of the faulting page, and per node the
    /// thread ran on.
    mem: Vec<f64>,
    cpu: Vec<f64>,
    /// This pass's.
    mem_new: Vec<f64>,
    cpu_new: Vec<f64>,
    pub(super) preferred: Option<usize>,
    /// Share of its private pages whose last fault came from each node.
    last: Vec<f64>,
}

impl TaskFaults {
    /// The decayed memory-side faults per node (dense id), what a live
    /// host reads as the `task_private` + `task_shared` of each
    /// `numa_faults` line of the task's `sched`.
    pub(super) fn memory(&self) -> &[f64] {
        &self.mem
    }

    pub(super) fn new(nodes: usize) -> TaskFaults {
        TaskFaults {
            mem: vec![0.0; nodes],
            cpu: vec![0.0; nodes],
            mem_new: vec![0.0; nodes],
            cpu_new: vec![0.0; nodes],
            preferred: None,
            last: vec![0.0; nodes],
        }
    }
}

/// 1000 × the share of `faults` on `node` (`task_weight`, `group_weight`).
fn weight(faults: &[f64], node: usize) -> f64 {
    let total: f64 = faults.iter().sum();
    if total > 0.0 {
        1000.0 * faults[node] / total
    } else {
        0.0
    }
}

/// After a scan of `f` of a region from `node`: the share of its pages
/// whose last fault came from each node.
fn remember(last: &mut [f64], f: f64, from: &[f64]) {
    for (l, x) in last.iter_mut().zip(from) {
        *l = (1.0 - f) * *l + f * x;
    }
}

impl World {
    /// One step of automatic NUMA balancing: every process whose scan is
    /// due scans.
    pub(super) fn numa_balancing(&mut self) {
        // The kernel turns it on only where there are several nodes
        // (`check_numabalancing_enable`).
        if self.machine.topology.nodes().len() < 2 {
            return;
        }
        for ai in 0..self.apps.len() {
            if self.apps[ai].status != AppStatus::Running
                || self.workload.apps[ai].memory != MemoryPlacement::FirstTouch
                || self.time + 1e-12 < self.apps[ai].scan.next_s
            {
                continue;
            }
            self.numa_scan(ai);
        }
    }

    /// Threads of `ai` running now.
    fn running(&self, ai: usize) -> Vec<usize> {
        self.apps[ai]
            .threads
            .iter()
            .copied()
            .filter(|&t| {
                let th = &self.threads[t];
                th.alive && !th.done && th.cpu.is_some()
            })
            .collect()
    }

    /// Whether `t` belongs to its process's numa group: the threads that
    /// fault on each other's pages, the sharers of a shared area.
    fn in_group(&self, t: usize) -> bool {
        let th = &self.threads[t];
        let spec = &self.workload.apps[th.app];
        spec.shared_bytes > 0 && spec.sharers > 1 && th.index < spec.sharers
    }

    /// The numa group's faults of `t` (memory side, CPU side), summed over
    /// its members; `None` outside a group.
    fn group_faults(&self, t: usize) -> Option<(Vec<f64>, Vec<f64>)> {
        if !self.in_group(t) {
            return None;
        }
        let nodes = self.threads[t].numa.mem.len();
        let (mut mem, mut cpu) = (vec![0.0; nodes], vec![0.0; nodes]);
        for &m in &self.apps[self.threads[t].app].threads {
            if self.in_group(m) {
                for n in 0..nodes {
                    mem[n] += self.threads[m].numa.mem[n];
                    cpu[n] += self.threads[m].numa.cpu[n];
                }
            }
        }
        Some((mem, cpu))
    }

    fn scan_limits(&self, rss_pages: f64) -> (f64, f64) {
        let l = &self.workload.linux;
        let window = l.numa_balancing_scan_size_mb * 1048576.0 / PAGE;
        let windows = (rss_pages / window).ceil().max(1.0);
        let floor = 1000.0 / (MAX_SCAN_WINDOW_MB / l.numa_balancing_scan_size_mb).max(1.0);
        let min = (l.numa_balancing_scan_period_min_ms / windows).max(floor);
        let max = (l.numa_balancing_scan_period_max_ms / windows).max(min);
        (min, max)
    }

    /// One scan window of process `ai`, the hinting faults it brings, and
    /// at the end of a pass the placement of its threads.
    fn numa_scan(&mut self, ai: usize) {
        let nodes = self.machine.topology.nodes().len();
        let running = self.running(ai);
        let private: f64 = self.apps[ai]
            .threads
            .iter()
            .map(|&t| self.threads[t].pages.iter().sum::<f64>())
            .sum();
        let rss = private + self.apps[ai].shared_pages.iter().sum::<f64>();
        let window = self.workload.linux.numa_balancing_scan_size_mb * 1048576.0 / PAGE;
        let scan = &self.apps[ai].scan;
        let f = if rss > 0.0 {
            (window / rss).min(1.0 - scan.pos).max(0.0)
        } else {
            1.0 - scan.pos
        };
        let c = &self.solver.constants;
        let (fault_ns, scan_ns) = (
            c.hinting_fault_us.value * 1e3,
            c.numa_scan_ns_per_page.value,
        );
        if let Some(&first) = running.first() {
            self.threads[first].stall_ns += f * rss * scan_ns;
        }
        // Private pages: each running thread faults on the marked part of
        // its own, and they move to its node past the two-stage filter.
        for &t in &running {
            let here = self.solver.cpu_node(self.threads[t].cpu.expect("running"));
            let pages = self.threads[t].pages.clone();
            let total: f64 = pages.iter().sum();
            if total <= 0.0 {
                continue;
            }
            let faults = f * total;
            let last = &self.threads[t].numa.last;
            let unset = (1.0 - last.iter().sum::<f64>()).max(0.0);
            let passes = (unset + last[here]).min(1.0);
            let away = f * (total - pages[here]);
            let moved = self.move_pages_of(t, here, (away * passes).floor());
            self.totals.pages_migrated += moved as u64;
            self.totals.balancing_pages_migrated += moved as u64;
            self.totals.hinting_faults += faults as u64;
            self.totals.hinting_faults_local += (f * pages[here]) as u64;
            let th = &mut self.threads[t];
            th.stall_ns += faults * fault_ns;
            // A fault counts for the node the page is on after it (`task_numa_fault`).
            let kept = if away > 0.0 { 1.0 - moved / away } else { 1.0 };
            for (n, (x, &p)) in th.numa.mem_new.iter_mut().zip(&pages).enumerate() {
                *x += if n == here {
                    f * p + moved
                } else {
                    f * p * kept
                };
            }
            th.numa.cpu_new[here] += faults;
            let mut from = vec![0.0; nodes];
            from[here] = 1.0;
            remember(&mut th.numa.last, f, &from);
            let s = &mut self.apps[ai].scan;
            s.local += f * pages[here];
            s.remote += away;
            s.private += faults;
        }
        self.scan_shared(ai, &running, f, fault_ns);
        let s = &mut self.apps[ai].scan;
        s.pos += f;
        if s.pos >= 1.0 - 1e-9 {
            s.pos = 0.0;
            self.numa_placement(ai, rss);
        }
        for &t in &running {
            self.numa_migrate_preferred(t, rss);
        }
        let s = &mut self.apps[ai].scan;
        s.next_s = self.time + s.period_ms / 1000.0;
    }

    /// The marked part of the shared area: each page faults once, from a
    /// sharer chosen in proportion (they sweep it alike), and moves to that
    /// sharer's node if its previous fault came from there too and the
    /// group's rule lets it.
    fn scan_shared(&mut self, ai: usize, running: &[usize], f: f64, fault_ns: f64) {
        let nodes = self.apps[ai].shared_pages.len();
        let sharers: Vec<usize> = running
            .iter()
            .copied()
            .filter(|&t| self.threads[t].index < self.workload.apps[ai].sharers)
            .collect();
        let total: f64 = self.apps[ai].shared_pages.iter().sum();
        if sharers.is_empty() || total <= 0.0 {
            return;
        }
        let k = sharers.len() as f64;
        let mut p = vec![0.0; nodes];
        for &t in &sharers {
            p[self.solver.cpu_node(self.threads[t].cpu.expect("running"))] += 1.0 / k;
        }
        let pages = self.apps[ai].shared_pages.clone();
        let group = self.group_faults(sharers[0]);
        let last = self.apps[ai].scan.shared_last.clone();
        let unset = (1.0 - last.iter().sum::<f64>()).max(0.0);
        let allowed = |dst: usize, src: usize| -> bool {
            let Some((mem, cpu)) = &group else {
                return true;
            };
            if cpu.iter().sum::<f64>() <= 0.0 {
                return true;
            }
            cpu[dst] > cpu[src] * ACTIVE_NODE_FRACTION
                || cpu[dst] * mem[src] * 3.0 > cpu[src] * mem[dst] * 4.0
        };
        let mut moved_to = vec![0.0; nodes];
        let mut moved_from = vec![0.0; nodes];
        for dst in (0..nodes).filter(|&n| p[n] > 0.0) {
            for src in (0..nodes).filter(|&m| m != dst) {
                let filter = if allowed(dst, src) {
                    unset + last[dst]
                } else {
                    0.0
                };
                let take = f * pages[src] * p[dst] * filter.min(1.0);
                moved_to[dst] += take;
                moved_from[src] += take;
            }
        }
        let from_total = moved_from.iter().sum::<f64>().max(1e-9);
        for (n, &to) in moved_to.iter().enumerate().filter(|x| *x.1 > 0.0) {
            for (m, &from) in moved_from.iter().enumerate().filter(|x| x.0 != n) {
                let part = to * from / from_total;
                if part > 0.0 {
                    self.charge_copy(m, n, part);
                }
            }
        }
        let a = &mut self.apps[ai];
        for n in 0..nodes {
            a.shared_pages[n] += moved_to[n] - moved_from[n];
        }
        let migrated: f64 = moved_to.iter().sum();
        self.totals.pages_migrated += migrated.round() as u64;
        self.totals.balancing_pages_migrated += migrated.round() as u64;
        let faults = f * total;
        self.totals.hinting_faults += faults as u64;
        let local = (0..nodes).map(|n| f * pages[n] * p[n]).sum::<f64>();
        self.totals.hinting_faults_local += local as u64;
        let s = &mut a.scan;
        s.local += local;
        s.remote += faults - local;
        if sharers.len() > 1 {
            s.shared += faults;
        } else {
            s.private += faults;
        }
        remember(&mut s.shared_last, f, &p);
        // Each sharer takes its part of the faults, and of the migration
        // copies' stalls.
        let per = faults / k;
        let copy_ns = migrated / k * self.solver.constants.page_migration_us.value * 1e3;
        for &t in &sharers {
            let here = self.solver.cpu_node(self.threads[t].cpu.expect("running"));
            let th = &mut self.threads[t];
            th.stall_ns += per * fault_ns + copy_ns;
            for (x, &p) in th.numa.mem_new.iter_mut().zip(&pages) {
                *x += f * p / k;
            }
            th.numa.cpu_new[here] += per;
        }
    }

    /// The end of a pass (`task_numa_placement`, `update_task_scan_period`):
    /// fault counts decay and take the pass's; each thread's preferred node
    /// follows; the scan period adapts to how local the faults were.
    fn numa_placement(&mut self, ai: usize, rss: f64) {
        let ids = self.apps[ai].threads.clone();
        for &t in &ids {
            let n = &mut self.threads[t].numa;
            for i in 0..n.mem.len() {
                n.mem[i] = n.mem[i] / 2.0 + n.mem_new[i];
                n.cpu[i] = n.cpu[i] / 2.0 + n.cpu_new[i];
                n.mem_new[i] = 0.0;
                n.cpu_new[i] = 0.0;
            }
        }
        for &t in &ids {
            let faults = match self.group_faults(t) {
                Some((mem, _)) => mem,
                None => self.threads[t].numa.mem.clone(),
            };
            let (best, max) = faults
                .iter()
                .enumerate()
                .fold((0, 0.0), |b, (i, &x)| if x > b.1 { (i, x) } else { b });
            if max > 0.0 {
                self.threads[t].numa.preferred = Some(best);
            }
        }
        let (min, max) = self.scan_limits(rss);
        let s = &mut self.apps[ai].scan;
        if s.local + s.shared <= 0.0 {
            s.period_ms = (s.period_ms * 2.0).min(max);
        } else {
            let slot = (s.period_ms / PERIOD_SLOTS).ceil();
            let ratio = (s.local * PERIOD_SLOTS / (s.local + s.remote).max(1e-9)).floor();
            let diff = if ratio >= PERIOD_THRESHOLD {
                (ratio - PERIOD_THRESHOLD).max(1.0) * slot
            } else {
                let d = -(PERIOD_THRESHOLD - ratio) * slot;
                let private = (s.private * PERIOD_SLOTS / (s.private + s.shared + 1.0)).ceil();
                (d * private / PERIOD_SLOTS).trunc()
            };
            s.period_ms = (s.period_ms + diff).clamp(min, max);
        }
        s.local = 0.0;
        s.remote = 0.0;
        s.private = 0.0;
        s.shared = 0.0;
    }

    /// `numa_migrate_preferred` / `task_numa_migrate`: a thread away from
    /// its preferred node moves to an idle CPU there or swaps with a
    /// thread there, whichever improves the faults' locality most.
    fn numa_migrate_preferred(&mut self, t: usize, rss: f64) {
        let Some(dst) = self.threads[t].numa.preferred else {
            return;
        };
        let Some(src_cpu) = self.threads[t].cpu else {
            return;
        };
        let src = self.solver.cpu_node(src_cpu);
        if src == dst {
            return;
        }
        let group = self.group_faults(t);
        if let Some((_, cpu)) = &group {
            let max = cpu.iter().copied().fold(0.0, f64::max);
            let active = cpu
                .iter()
                .filter(|&&x| x * ACTIVE_NODE_FRACTION > max)
                .count();
            if active > 1 && cpu[src] * ACTIVE_NODE_FRACTION > max {
                // Spread over several nodes and on one of them: it stays.
                return;
            }
        }
        let own = &self.threads[t].numa.mem;
        let taskimp = weight(own, dst) - weight(own, src);
        let imp = match &group {
            Some((mem, _)) => weight(mem, dst) - weight(mem, src),
            None => taskimp,
        };
        let load = self.cpu_load();
        let topo = &self.machine.topology;
        let idle_core = |c: usize| {
            topo.cores()[topo.cpus()[c].core]
                .cpus
                .iter()
                .all(|&x| load[x] == 0)
        };
        let allowed = self.threads[t].allowed.clone();
        let any_idle_core = allowed.iter().any(|c| idle_core(c as usize));
        let mut best: Option<(f64, usize, Option<usize>)> = None;
        for c in (0..topo.cpus().len()).filter(|&c| self.solver.cpu_node(c) == dst) {
            if !allowed.contains(c as u32) {
                continue;
            }
            let on: Vec<usize> = (0..self.threads.len())
                .filter(|&o| {
                    let th = &self.threads[o];
                    th.alive && !th.done && th.cpu == Some(c)
                })
                .collect();
            let (score, with) = match on.as_slice() {
                [] => {
                    // The load balancer would take it off a busy core while
                    // a whole core is idle.
                    if any_idle_core && !idle_core(c) {
                        continue;
                    }
                    (imp, None)
                }
                [o] if load[src_cpu] == 1 => {
                    let o = *o;
                    if !self.threads[o].allowed.contains(src_cpu as u32) {
                        continue;
                    }
                    let theirs = &self.threads[o].numa.mem;
                    let same = self.threads[o].app == self.threads[t].app
                        && self.in_group(o) == self.in_group(t);
                    let score = if same {
                        let s = taskimp + weight(theirs, src) - weight(theirs, dst);
                        if group.is_some() { s - s / 16.0 } else { s }
                    } else {
                        let theirs = match self.group_faults(o) {
                            Some((mem, _)) => mem,
                            None => theirs.clone(),
                        };
                        imp + weight(&theirs, src) - weight(&theirs, dst)
                    };
                    (score, Some(o))
                }
                _ => continue,
            };
            if score > best.map_or(0.0, |b| b.0) {
                best = Some((score, c, with));
            }
        }
        let Some((_, c, with)) = best else {
            return;
        };
        self.move_thread(t, c);
        if let Some(o) = with {
            self.move_thread(o, src_cpu);
        }
        self.totals.numa_task_moves += 1;
        // The kernel rescans soon to see whether it is placed well now.
        let ai = self.threads[t].app;
        let (min, _) = self.scan_limits(rss);
        self.apps[ai].scan.period_ms = min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{AppSpec, LinuxModel, Phase, ThreadModel};

    /// `apps` single-thread pointer chases of 256 MiB each on `machine`,
    /// bound at launch to `cpus` (dense ids), with balancing on or off;
    /// run one step.
    fn world(machine: &str, cpus: &[usize], memory: MemoryPlacement, balancing: bool) -> World {
        let w = Workload {
            name: "t".into(),
            description: String::new(),
            machine: machine.into(),
            apps: (0..cpus.len())
                .map(|i| AppSpec {
                    name: format!("chase{i}"),
                    kind: AppKind::Process,
                    threads: 1,
                    phases: vec![Phase {
                        instructions: 1e13,
                        model: ThreadModel::microbench(256 << 20, 0),
                    }],
                    shared_bytes: 0,
                    sharers: 1,
                    memory,
                    cpus: None,
                    cpus_by_cgroup: false,
                    start_s: 0.0,
                    runs: 1,
                    job: None,
                })
                .collect(),
            step_ms: 10.0,
            max_seconds: 1000.0,
            mismatch_percent: None,
            linux: LinuxModel {
                numa_balancing: balancing,
                migrate_probability: 0.0,
                ..LinuxModel::default()
            },
        };
        let mut world = World::new(Machine::preset(machine).unwrap(), w, 3);
        world.bind(cpus.iter().map(|&c| vec![c]).collect());
        world.start_due();
        world.advance();
        world
    }

    /// Pins thread `k` to `cpus` (kernel list), as a NUMA-agnostic
    /// scheduler or an operator might.
    fn pin(w: &mut World, k: usize, cpus: &str) {
        let s = w.snapshot();
        let t = &s.tasks[k];
        let o = w.apply(&Action::Pin {
            task: t.id(),
            tgid: t.tgid,
            cpus: cpus.parse().unwrap(),
        });
        assert_eq!(o, Outcome::Done);
    }

    fn run(w: &mut World, secs: f64) {
        for _ in 0..(secs * 100.0).round() as usize {
            w.advance();
        }
    }

    /// MiB of application `k`'s memory on each node.
    fn mib(w: &mut World, k: usize) -> Vec<f64> {
        let s = w.snapshot();
        let mem = s.groups[k].memory.as_ref().unwrap();
        (0..2u32)
            .map(|n| mem[&n].total() as f64 / 1048576.0)
            .collect()
    }

    fn node_of(w: &World, k: usize) -> usize {
        w.solver.cpu_node(w.threads[k].cpu.unwrap())
    }

    /// `sysctl kernel.numa_balancing=1` on a process that ran without it:
    /// its first scan is long due, so it is scanned at once, and its
    /// memory follows a moved thread as if it had been on all along;
    /// turned off again, the faults stop.
    #[test]
    fn balancing_turned_on_and_off_mid_run() {
        let mut w = world("westmere-2s", &[0], MemoryPlacement::FirstTouch, false);
        run(&mut w, 2.5);
        pin(&mut w, 0, "8");
        run(&mut w, 1.0);
        assert_eq!(w.totals().hinting_faults, 0);
        assert_eq!(w.snapshot().machine.numa_balancing, Some(false));
        assert_eq!(
            w.apply(&Action::KernelBalancing { on: true }),
            Outcome::Done
        );
        assert_eq!(w.snapshot().machine.numa_balancing, Some(true));
        w.advance();
        assert!(w.totals().hinting_faults > 0, "scanned at once");
        run(&mut w, 5.0);
        let m = mib(&mut w, 0);
        assert!(m[0] < 1.0 && (m[1] - 256.0).abs() < 1.0, "{m:?}");
        assert_eq!(
            w.apply(&Action::KernelBalancing { on: false }),
            Outcome::Done
        );
        let faults = w.totals().hinting_faults;
        run(&mut w, 3.0);
        assert_eq!(w.totals().hinting_faults, faults, "no scans while off");
        assert_eq!(w.totals().numa_balancing_changes, 2);
        assert_eq!(
            w.apply(&Action::KernelBalancing { on: false }),
            Outcome::Done
        );
        assert_eq!(w.totals().numa_balancing_changes, 2, "already off");
    }

    /// The guest measurement (issue 17): a thread moved to the other node
    /// has all its 256 MiB follow within 5 s. Here it ran on node 0 for
    /// 2.5 s first, so its pages' last faults name node 0 and the
    /// two-stage filter holds them one scan before they move.
    #[test]
    fn memory_follows_a_pinned_thread_within_five_seconds_not_at_the_first_fault() {
        let mut w = world("westmere-2s", &[0], MemoryPlacement::FirstTouch, true);
        run(&mut w, 2.5);
        assert_eq!(mib(&mut w, 0), vec![256.0, 0.0]);
        assert!(
            w.totals().hinting_faults >= 65536,
            "{}",
            w.totals().hinting_faults
        );
        assert_eq!(w.totals().pages_migrated, 0);
        pin(&mut w, 0, "8");
        // The next scan only records faults from node 1.
        let first = w.apps[0].scan.next_s;
        while w.time() < first + 0.005 {
            w.advance();
        }
        assert_eq!(
            mib(&mut w, 0),
            vec![256.0, 0.0],
            "the first fault from node 1 moves nothing"
        );
        let left = 5.0 - (w.time() - 2.51);
        run(&mut w, left);
        let m = mib(&mut w, 0);
        assert!(
            m[0] < 1.0 && (m[1] - 256.0).abs() < 1.0,
            "{m:?} at {}",
            w.time()
        );
        // Without balancing nothing moves; under an explicit policy the
        // kernel does not even scan.
        let mut w = world("westmere-2s", &[0], MemoryPlacement::FirstTouch, false);
        pin(&mut w, 0, "8");
        run(&mut w, 5.0);
        assert_eq!(mib(&mut w, 0), vec![256.0, 0.0]);
        let mut w = world("westmere-2s", &[0], MemoryPlacement::Node(0), true);
        pin(&mut w, 0, "8");
        run(&mut w, 5.0);
        assert_eq!(mib(&mut w, 0), vec![256.0, 0.0]);
        assert_eq!(w.totals().hinting_faults, 0);
    }

    /// The signal a live host reads from `/proc/PID/task/TID/sched`: the
    /// snapshot's hinting faults per node say where the thread's memory
    /// accesses go, first node 0, then (its memory moved after it) node 1;
    /// none without balancing; memory under an explicit policy is listed.
    #[test]
    fn snapshots_carry_the_hinting_faults_per_node() {
        let mut w = world("westmere-2s", &[0], MemoryPlacement::FirstTouch, true);
        run(&mut w, 2.5);
        let s = w.snapshot();
        let tid = s.tasks[0].tid;
        let f = &s.numa_faults[&tid];
        assert_eq!(f.main_node().map(|(n, _)| n), Some(0), "{f:?}");
        assert!(f.main_node().unwrap().1 > 0.99, "{f:?}");
        assert!(s.explicit_mempolicy.is_empty());
        pin(&mut w, 0, "8");
        run(&mut w, 8.0);
        let s = w.snapshot();
        let f = &s.numa_faults[&tid];
        assert_eq!(f.main_node().map(|(n, _)| n), Some(1), "{f:?}");
        assert_eq!(f.preferred_node, Some(1), "{f:?}");

        let mut w = world("westmere-2s", &[0], MemoryPlacement::FirstTouch, false);
        run(&mut w, 2.5);
        assert!(w.snapshot().numa_faults.is_empty());
        let mut w = world("westmere-2s", &[0], MemoryPlacement::Node(0), true);
        run(&mut w, 1.0);
        let s = w.snapshot();
        assert!(s.explicit_mempolicy.contains(&s.groups[0].pid));
    }

    /// The task half: a thread the scheduler took away from its memory
    /// goes back to an idle core beside it, and the memory stays.
    #[test]
    fn a_thread_goes_back_to_its_memory_on_an_idle_core() {
        let mut w = world("westmere-2s", &[0], MemoryPlacement::FirstTouch, true);
        run(&mut w, 1.5);
        // Moved to node 1, then free to go anywhere again.
        pin(&mut w, 0, "8");
        pin(&mut w, 0, "0-23");
        assert_eq!(node_of(&w, 0), 1);
        run(&mut w, 3.0);
        assert_eq!(node_of(&w, 0), 0, "back beside its memory");
        assert!(w.totals().numa_task_moves >= 1);
        assert_eq!(w.totals().pages_migrated, 0, "its memory did not move");
        assert_eq!(mib(&mut w, 0), vec![256.0, 0.0]);
    }

    /// Two threads each on the other's memory node, on a machine with no
    /// idle CPU: they swap (`task_numa_compare`), and no page moves.
    #[test]
    fn two_threads_on_each_others_nodes_swap() {
        let m = "synthetic:pack:2 numa:1 l3:1 core:1 pu:1";
        let mut w = world(m, &[0, 1], MemoryPlacement::FirstTouch, true);
        run(&mut w, 1.5);
        // Swap them by hand, then let them go anywhere.
        pin(&mut w, 0, "1");
        pin(&mut w, 1, "0");
        pin(&mut w, 0, "0-1");
        pin(&mut w, 1, "0-1");
        assert_eq!((node_of(&w, 0), node_of(&w, 1)), (1, 0));
        run(&mut w, 3.0);
        assert_eq!((node_of(&w, 0), node_of(&w, 1)), (0, 1), "swapped back");
        assert_eq!(w.totals().numa_task_moves, 1);
        assert_eq!(w.totals().pages_migrated, 0);
    }

    /// The scan period: a process whose faults are all local scans less
    /// and less often, up to `task_scan_max`.
    #[test]
    fn local_faults_slow_the_scanner_down_to_its_maximum() {
        let mut w = world("westmere-2s", &[0], MemoryPlacement::FirstTouch, true);
        let mut periods = Vec::new();
        for _ in 0..60 {
            run(&mut w, 10.0);
            periods.push(w.apps[0].scan.period_ms);
        }
        assert!(periods.windows(2).all(|p| p[1] >= p[0]), "{periods:?}");
        // 256 MiB is one window: the sysctl's 60 s.
        assert_eq!(*periods.last().unwrap(), 60000.0);
        let faults = w.totals().hinting_faults as f64;
        // Far fewer faults than one pass a second over 600 s would take.
        assert!(faults < 65536.0 * 100.0, "{faults}");
    }
}
