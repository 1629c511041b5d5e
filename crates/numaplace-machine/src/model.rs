//! The contention model: given where each running thread is and where its
//! memory lives, how fast does each go? One call solves one time step to a
//! fixed point (rates depend on speeds, latencies on rates). Every equation
//! is in `docs/simulator.md` with the source of its constants; the
//! numbering there (M1-M8) is used in the comments here. M8, what a
//! thread's time slices cost it in cache refills, is `model/slices.rs`.

use serde::Serialize;

use crate::machine::{Machine, Param};
use crate::thread::{Pattern, ThreadModel};
pub use llc::MAX_CORUN_COMBINATIONS;
use llc::{Corun, Scratch};

/// Bytes per cache line (all presets).
pub const LINE: f64 = 64.0;

/// Which contention mechanisms the model applies: all of them, unless a
/// study switches one off to see what it contributes (\[Blagodurov11\] Fig. 5
/// splits a degradation into cache, memory controller, interconnect and
/// remote latency this way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mechanisms {
    /// Threads on one LLC split it (M2); off: each has it to itself.
    pub cache_sharing: bool,
    /// Loaded latency of memory controllers (M3); off: unloaded.
    pub controller_queueing: bool,
    /// Loaded latency of the interconnect (M3); off: unloaded.
    pub link_queueing: bool,
    /// Remote nodes cost more than the local one (M3); off: every node
    /// answers at the local latency.
    pub remote_latency: bool,
    /// A thread that time-shares its CPU re-fetches, at each switch-in,
    /// what the threads that ran while it was out evicted from its caches
    /// (M8); off, or with `cache_sharing` off: a switch costs nothing.
    pub slice_refill: bool,
}

impl Default for Mechanisms {
    fn default() -> Self {
        Mechanisms {
            cache_sharing: true,
            controller_queueing: true,
            link_queueing: true,
            remote_latency: true,
            slice_refill: true,
        }
    }
}

/// Constants of the model that no preset publishes, with their sources.
#[derive(Debug, Clone, Serialize)]
pub struct Constants {
    /// The contention mechanisms applied (all, but in a study).
    pub mechanisms: Mechanisms,
    /// Utilisation at which the curve is capped (M3).
    pub utilisation_cap: f64,
    /// Two busy SMT siblings each run their core work this much slower (M6).
    pub smt_slowdown: Param,
    /// Address translation of a uniformly random walk (M5): the cost per
    /// access is `walk_ns · max(0, 1 − reach / W)`.
    pub translation_reach_bytes: Param,
    /// The cost of one page walk beyond that reach, ns (`walk_ns` above).
    pub walk_ns: Param,
    /// A modified line taken from the SMT sibling (M4).
    pub hitm_smt_ns: Param,
    /// Time a thread is stalled per 4 KiB page of its memory migrated
    /// (M7).
    pub page_migration_us: Param,
    /// Time a NUMA hinting fault costs the thread that takes it (automatic
    /// NUMA balancing, `world/autonuma.rs`).
    pub hinting_fault_us: Param,
    /// Time the scanner spends per page it marks (`change_prot_numa`),
    /// charged to the process's first running thread.
    pub numa_scan_ns_per_page: Param,
    /// Cycles per instruction of a rank spinning at a barrier in MPI's
    /// progress loop (`ThreadModel::spin`; `docs/simulator.md`, "MPI
    /// jobs").
    pub spin_cpi: Param,
    /// CFS's target latency before its scaling with the number of CPUs
    /// (M8): the period in which every runnable thread of a CPU runs once.
    pub sched_latency_ms: Param,
    /// CFS's minimum preemption granularity before the same scaling (M8):
    /// no slice is shorter.
    pub sched_min_granularity_ms: Param,
}

impl Default for Constants {
    fn default() -> Self {
        use crate::machine::Source::*;
        let p = |value, source| Param { value, source };
        Constants {
            mechanisms: Mechanisms::default(),
            utilisation_cap: 0.95,
            smt_slowdown: p(
                1.6,
                Assumed("two hyperthreads give about 1.25x one core's throughput".into()),
            ),
            translation_reach_bytes: p(
                10.0 * 1024.0 * 1024.0,
                Derived(
                    "fitted with walk_ns to [Rao13] Fig. 4a: a remote pointer chase is 1.26x local at 16 MiB, 1.44x at 256 MiB".into(),
                ),
            ),
            walk_ns: p(
                41.6,
                Derived("fitted with translation_reach_bytes to [Rao13] Fig. 4a".into()),
            ),
            hitm_smt_ns: p(5.0, Assumed("a line in the shared L1/L2 of the core".into())),
            page_migration_us: p(
                2.0,
                Assumed("move_pages copies a 4 KiB page and remaps it: about 2 µs".into()),
            ),
            hinting_fault_us: p(
                1.0,
                Assumed(
                    "a NUMA hinting fault is a minor fault that restores one PTE \
                     (do_numa_page): about 1 µs with the trap"
                        .into(),
                ),
            ),
            numa_scan_ns_per_page: p(
                10.0,
                Assumed(
                    "change_prot_numa rewrites one PTE per page and flushes the TLB once \
                     per range: about 10 ns a page"
                        .into(),
                ),
            ),
            spin_cpi: p(
                1.0,
                Assumed(
                    "MPI's progress loop (Open MPI's opal_progress, MPICH's busy poll) \
                     loads a few flags that stay in the L1, compares and branches: about one \
                     instruction per cycle, nothing to the uncore"
                        .into(),
                ),
            ),
            sched_latency_ms: p(
                6.0,
                Published(
                    "kernel/sched/fair.c (CFS, until EEVDF replaced it in v6.6): \
                     normalized_sysctl_sched_latency = 6000000ULL ns, times \
                     1 + ilog2(min(online CPUs, 8)) (get_update_sysctl_factor, \
                     SCHED_TUNABLESCALING_LOG, the default); earlier CFS kernels, \
                     [Symbiosis-Bloom]'s 2.6.2x among them, had 20 ms"
                        .into(),
                ),
            ),
            sched_min_granularity_ms: p(
                0.75,
                Published(
                    "kernel/sched/fair.c (CFS): normalized_sysctl_sched_min_granularity \
                     = 750000ULL ns, scaled alike; the 2.6.2x kernels had 4 ms"
                        .into(),
                ),
            ),
        }
    }
}

/// One running thread, as the step sees it.
#[derive(Debug, Clone)]
pub struct Runner<'a> {
    /// Dense CPU id.
    pub cpu: usize,
    /// Fraction of the CPU it gets (1/k when k threads share it).
    pub share: f64,
    /// How it computes and touches memory in its current phase.
    pub model: &'a ThreadModel,
    /// Fraction of its private pages on each node (dense ids; sums to 1).
    pub pages: &'a [f64],
    /// The application instance it belongs to (sharing happens within
    /// one).
    pub group: usize,
    /// Bytes of the application's shared area.
    pub shared_bytes: u64,
    /// Whether this thread uses the shared area (the first `sharers`
    /// threads of its application do).
    pub shares: bool,
    /// Instructions per second from the previous step (warm start; 0 if
    /// none).
    pub prev_ips: f64,
}

/// What the model says about one thread for this step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Speed {
    /// Instructions per wall-clock second (its CPU share included).
    pub ips: f64,
    /// Cycles per instruction while it runs.
    pub cpi: f64,
    /// Uncore (L2-miss) requests and LLC misses per instruction (the
    /// misses averaged over its instructions in its co-runner
    /// combinations, M2).
    pub uncore_per_instr: f64,
    /// LLC misses per instruction, averaged the same way.
    pub llc_miss_per_instr: f64,
    /// Its LLC share, bytes (averaged over its running time in its
    /// co-runner combinations, M2).
    pub llc_share: f64,
    /// Average latency of its memory accesses, ns (0 if none).
    pub memory_ns: f64,
    /// Uncore penalty of \[Rao13\] §3.1: average uncore latency per request
    /// divided by the memory-level parallelism, cycles.
    pub uncore_penalty_cycles: f64,
    /// Cache-line transfers of shared data per instruction.
    pub transfers_per_instr: f64,
}

/// The machine-wide state of a step.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Load {
    /// Memory controller utilisation per node, 0-1.
    pub node_utilisation: Vec<f64>,
    /// Interconnect utilisation per ordered package pair (row-major).
    pub link_utilisation: Vec<f64>,
    /// Fixed-point iterations the step's solve took.
    pub iterations: u32,
}

/// Traffic that is not the threads' own misses: page copies of
/// migrations (M7), bytes per second per node and per ordered package pair.
#[derive(Debug, Clone, Default)]
pub struct Background {
    /// Bytes per second on each node's memory controller (dense ids).
    pub node_bytes_per_s: Vec<f64>,
    /// Bytes per second on each ordered package pair's link (row-major).
    pub link_bytes_per_s: Vec<f64>,
}

/// Solves steps; keeps its buffers between calls.
#[derive(Debug)]
pub struct Solver {
    /// The model's constants it solves with.
    pub constants: Constants,
    ghz: f64,
    l2_bytes: Vec<f64>,
    /// Per core, its L2 when that is private (below the LLC), else 0: the
    /// private level a switch-in refills from the LLC (M8).
    private_l2_bytes: Vec<f64>,
    llc_bytes: Vec<f64>,
    cpu_core: Vec<usize>,
    cpu_llc: Vec<usize>,
    cpu_node: Vec<usize>,
    cpu_package: Vec<usize>,
    node_package: Vec<usize>,
    nodes: usize,
    packages: usize,
    latency: Vec<f64>,
    node_bw: f64,
    link_bw: f64,
    hitm_same: f64,
    hitm_cross: f64,
    llc_hit_ns: f64,
    queueing_k_ns: f64,
    /// The fixed point is reached when no thread's speed changed by more
    /// than this fraction in an iteration: 1e-7 for the simulator's world;
    /// a predictor comparing placements may settle for less.
    pub tolerance: f64,
    /// Where every CPU of an LLC runs one thread all the time (one
    /// co-runner combination, the same for each of them), split the LLC
    /// once for all of them instead of once per thread: the same shares up
    /// to rounding, in `O(m)` water-fills fewer. Off for the simulator's
    /// world, whose results stay bit for bit; on for `auto`'s predictor.
    pub split_once: bool,
    /// Iterations at the start that take each thread's new speed whole
    /// rather than half way (the rest are damped, against oscillation
    /// through the shared queues): 0 for the simulator's world; a solve
    /// started near its answer (a placement one move from one solved)
    /// gets there in fewer iterations with one.
    pub full_steps: u32,
    scratch: Scratch,
    corun: Vec<Corun>,
}

impl Solver {
    /// A solver for machine `m` with `constants`.
    pub fn new(m: &Machine, constants: Constants) -> Solver {
        let t = &m.topology;
        let l2_bytes = t
            .cores()
            .iter()
            .map(|c| t.core_cache(c.id, 2).map_or(0.0, |c| c.size as f64))
            .collect();
        let private_l2_bytes = t
            .cores()
            .iter()
            .map(|c| match t.core_cache(c.id, 2) {
                Some(l2) if t.llcs()[c.llc].cache != Some(l2.id) => l2.size as f64,
                _ => 0.0,
            })
            .collect();
        let llc_bytes = (0..t.llcs().len())
            .map(|l| t.llc_size(l).unwrap_or(0) as f64)
            .collect();
        let node_package = t.nodes().iter().map(|n| n.package.unwrap_or(0)).collect();
        Solver {
            constants,
            ghz: m.params.ghz.value,
            l2_bytes,
            private_l2_bytes,
            llc_bytes,
            cpu_core: t.cpus().iter().map(|c| c.core).collect(),
            cpu_llc: t.cpus().iter().map(|c| c.llc).collect(),
            cpu_node: t.cpus().iter().map(|c| c.node).collect(),
            cpu_package: t.cpus().iter().map(|c| c.package).collect(),
            node_package,
            nodes: t.nodes().len(),
            packages: t.packages().len(),
            latency: m.params.latency_ns.clone(),
            node_bw: m.params.node_bandwidth_gbs.value,
            link_bw: m.params.link_bandwidth_gbs.value,
            hitm_same: m.params.hitm_same_socket_ns.value,
            hitm_cross: m.params.hitm_cross_socket_ns.value,
            llc_hit_ns: m.params.llc_hit_ns.value,
            queueing_k_ns: m.params.queueing_k_ns.value,
            tolerance: 1e-7,
            split_once: false,
            full_steps: 0,
            scratch: Scratch::default(),
            corun: Vec::new(),
        }
    }

    /// The machine's clock, GHz (cycles per ns).
    pub fn ghz(&self) -> f64 {
        self.ghz
    }

    /// The dense id of the node dense CPU `cpu` belongs to.
    pub fn cpu_node(&self, cpu: usize) -> usize {
        self.cpu_node[cpu]
    }

    /// Address-translation cost per uncore request of a uniformly random
    /// walk over `ws` bytes (M5). Beyond the TLBs' reach nearly every
    /// access walks the page table, and the walk grows dearer as the table
    /// outgrows the caches; the saturating form `walk · (1 − R/W)` has the
    /// two constants fitted to \[Rao13\] Fig. 4a.
    fn translation_ns(&self, ws: f64) -> f64 {
        let c = &self.constants;
        c.walk_ns.value * (1.0 - c.translation_reach_bytes.value / ws).max(0.0)
    }

    /// Loaded latency above the unloaded one, ns (M3).
    fn queueing_ns(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, self.constants.utilisation_cap);
        self.queueing_k_ns * u / (1.0 - u)
    }

    /// Solves one step. `out` gets one [`Speed`] per runner.
    pub fn solve(
        &mut self,
        runners: &[Runner<'_>],
        background: &Background,
        out: &mut Vec<Speed>,
    ) -> Load {
        let n = runners.len();
        out.clear();
        out.resize(n, Speed::default());
        let mut load = Load {
            node_utilisation: vec![0.0; self.nodes],
            link_utilisation: vec![0.0; self.packages * self.packages],
            iterations: 0,
        };
        if n == 0 {
            return load;
        }
        // SMT: is the sibling hardware thread busy? (M6)
        let mut core_busy = vec![0u32; self.l2_bytes.len()];
        let mut cpu_busy = vec![false; self.cpu_core.len()];
        for r in runners {
            if !cpu_busy[r.cpu] {
                cpu_busy[r.cpu] = true;
                core_busy[self.cpu_core[r.cpu]] += 1;
            }
        }
        let mut ips: Vec<f64> = runners
            .iter()
            .map(|r| {
                if r.prev_ips > 0.0 {
                    r.prev_ips
                } else {
                    r.share * self.ghz * 1e9 / r.model.cpi_core.max(0.1)
                }
            })
            .collect();
        let mut share = vec![0.0; n];
        let mut a = vec![0.0; n];
        let mut mu = vec![0.0; n];
        // M2's co-runner combinations, per runner a range of `corun`.
        let mut corun = std::mem::take(&mut self.corun);
        let mut sc = std::mem::take(&mut self.scratch);
        let mut ranges = vec![(0, 0); n];
        let mut node_lines = vec![0.0; self.nodes];
        let mut link_lines = vec![0.0; self.packages * self.packages];
        for (i, r) in runners.iter().enumerate() {
            a[i] = self.uncore_per_instr(r);
        }
        for iter in 0..200 {
            load.iterations = iter + 1;
            // M2: per co-runner combination, LLC shares by access rate,
            // capped at the working set, the excess shared among the
            // others (water-filling), and the misses per instruction.
            corun.clear();
            for l in 0..self.llc_bytes.len() {
                self.split_llc(l, runners, &ips, &mut sc, &mut corun, &mut ranges);
            }
            for i in 0..n {
                let (lo, hi) = ranges[i];
                share[i] = corun[lo..hi].iter().map(|k| k.p * k.share).sum();
                // Misses per instruction for the loads: per instruction
                // over the combinations as the last speeds weighed them
                // (M5), the time-weighted mean on the first iteration.
                mu[i] = if iter == 0 || hi - lo == 1 {
                    corun[lo..hi].iter().map(|k| k.p * k.mu).sum()
                } else {
                    out[i].llc_miss_per_instr
                };
            }
            // M3: memory controller and link loads.
            node_lines.iter_mut().for_each(|x| *x = 0.0);
            link_lines.iter_mut().for_each(|x| *x = 0.0);
            for (x, b) in node_lines.iter_mut().zip(&background.node_bytes_per_s) {
                *x = b / LINE;
            }
            for (x, b) in link_lines.iter_mut().zip(&background.link_bytes_per_s) {
                *x = b / LINE;
            }
            for (i, r) in runners.iter().enumerate() {
                let rate = ips[i] * mu[i];
                let from = self.cpu_package[r.cpu];
                for (node, &f) in r.pages.iter().enumerate() {
                    if f <= 0.0 {
                        continue;
                    }
                    node_lines[node] += rate * f;
                    let to = self.node_package[node];
                    if to != from {
                        link_lines[to * self.packages + from] += rate * f;
                    }
                }
            }
            for (u, lines) in load.node_utilisation.iter_mut().zip(&node_lines) {
                *u = lines * LINE / (self.node_bw * 1e9);
            }
            for (u, lines) in load.link_utilisation.iter_mut().zip(&link_lines) {
                *u = lines * LINE / (self.link_bw * 1e9);
            }
            // M4-M6: time per instruction, and the new speeds.
            let mut change: f64 = 0.0;
            for (i, r) in runners.iter().enumerate() {
                let (lo, hi) = ranges[i];
                let s = self.speed(
                    i,
                    r,
                    runners,
                    a[i],
                    &corun[lo..hi],
                    share[i],
                    &load,
                    &core_busy,
                );
                let step = if iter < self.full_steps { 1.0 } else { 0.5 };
                let new = (1.0 - step) * ips[i] + step * s.ips;
                change = change.max((new - ips[i]).abs() / new.max(1.0));
                ips[i] = new;
                out[i] = s;
            }
            if change < self.tolerance {
                break;
            }
        }
        for (o, ips) in out.iter_mut().zip(ips) {
            o.ips = ips;
        }
        self.corun = corun;
        self.scratch = sc;
        load
    }

    #[allow(clippy::too_many_arguments)]
    fn speed(
        &self,
        i: usize,
        r: &Runner<'_>,
        runners: &[Runner<'_>],
        a: f64,
        corun: &[Corun],
        share: f64,
        load: &Load,
        core_busy: &[u32],
    ) -> Speed {
        let m = r.model;
        let node = self.cpu_node[r.cpu];
        let pkg = self.cpu_package[r.cpu];
        // M3: memory latency over the nodes holding its pages.
        let mut mem_ns = 0.0;
        for (n, &f) in r.pages.iter().enumerate() {
            if f <= 0.0 {
                continue;
            }
            let mech = &self.constants.mechanisms;
            let mut l = if mech.remote_latency {
                self.latency[node * self.nodes + n]
            } else {
                self.latency[node * self.nodes + node]
            };
            if mech.controller_queueing {
                l += self.queueing_ns(load.node_utilisation[n]);
            }
            let to = self.node_package[n];
            if to != pkg && mech.link_queueing {
                l += self.queueing_ns(load.link_utilisation[to * self.packages + pkg]);
            }
            mem_ns += f * l;
        }
        let translation = match m.pattern {
            Pattern::Uniform => self.translation_ns(m.working_set as f64),
            Pattern::PowerLaw { .. } => 0.0,
        };
        // M4: coherence. Sharers sweep the shared area in step (a convoy:
        // they start each sweep together and the slowest sets the pace), so
        // each write finds its word last written by each other sharer in
        // turn and waits for the line to come from every one of them: the
        // sum of the transfer latencies to the others (SMT sibling, same
        // socket, other socket), each weighted by the time that sharer is
        // on a CPU. A sharer time-sharing this thread's CPU leaves the line
        // in the same cache.
        let mut transfers = 0.0;
        let mut share_ns = 0.0;
        if m.shared_writes_pki > 0.0 && r.shared_bytes > 0 && r.shares {
            let w = m.shared_writes_pki / 1000.0;
            let mut wait = 0.0;
            let mut present = 0.0;
            for (j, o) in runners.iter().enumerate() {
                if j == i
                    || o.group != r.group
                    || !o.shares
                    || o.model.shared_writes_pki <= 0.0
                    || o.cpu == r.cpu
                {
                    continue;
                }
                let t = if self.cpu_core[o.cpu] == self.cpu_core[r.cpu] {
                    self.constants.hitm_smt_ns.value
                } else if self.cpu_package[o.cpu] == pkg {
                    self.hitm_same
                } else {
                    self.hitm_cross
                };
                wait += o.share * t;
                present += o.share;
            }
            transfers = w * present.min(1.0);
            share_ns = w * wait;
        }
        // M6: SMT.
        let smt = if core_busy[self.cpu_core[r.cpu]] > 1 {
            self.constants.smt_slowdown.value
        } else {
            1.0
        };
        let core_ns = m.cpi_core * smt / self.ghz;
        // M5: uncore latency per request; stalls overlap by the MLP.
        let mlp = m.mlp.max(1.0);
        let stall_of = |mu: f64| {
            if a > 0.0 {
                let uncore_ns = ((a - mu) * self.llc_hit_ns + mu * mem_ns) / a + translation;
                a * uncore_ns / mlp
            } else {
                0.0
            }
        };
        // M2: the thread spends fraction `p` of its running time in each
        // co-runner combination, at `1 / ns(mu)` instructions per ns
        // there; its misses per instruction are the mean over its
        // instructions, which (time per instruction being affine in `mu`)
        // gives exactly the harmonic mean of the combinations' speeds.
        let mu = match corun {
            [one] => one.mu,
            _ => {
                let (mut num, mut den) = (0.0, 0.0);
                for k in corun {
                    let q = k.p / (core_ns + share_ns + stall_of(k.mu));
                    num += q * k.mu;
                    den += q;
                }
                if den > 0.0 { num / den } else { 0.0 }
            }
        };
        let stall_ns = stall_of(mu);
        let ns_per_instr = core_ns + stall_ns + share_ns;
        let cpi = ns_per_instr * self.ghz;
        Speed {
            ips: r.share * 1e9 / ns_per_instr,
            cpi,
            uncore_per_instr: a,
            llc_miss_per_instr: mu,
            llc_share: share,
            memory_ns: mem_ns,
            // Atomic adds to shared lines are demand requests (RFOs) too.
            uncore_penalty_cycles: if a + transfers > 0.0 {
                (stall_ns + share_ns) / (a + transfers) * self.ghz
            } else {
                0.0
            },
            transfers_per_instr: transfers,
        }
    }
}

mod llc;
mod slices;
#[cfg(test)]
mod tests;
