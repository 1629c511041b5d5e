//! What a PMU would sample and what \[Symbiosis-Bloom\]'s hardware would record:
//! data addresses per thread (drawn from the page model), and the
//! counting-Bloom-filter signatures of each last-level cache, fed by a
//! thinned stream of each thread's accesses (\[Symbiosis-Bloom\] §3.1).
//!
//! The signature model runs the real mechanism of [`crate::bloom`]: a
//! set-associative LRU cache per LLC, and the threads' access streams
//! interleaved as they co-run. Each step is cut into ticks; on a CPU that
//! k threads time-share, each runs one k-th of the step (its quantum) and
//! is switched out at its end, which is when the hardware records its
//! running bit vector.
//!
//! Simulating every access would cost more than the rest of the model
//! together, so the system is scaled down by a factor S: the cache keeps
//! its associativity but has 1/S of its sets (at most [`MODEL_LINES`]
//! lines), every working set is 1/S of its size, and each step feeds
//! `accesses_per_step` accesses per LLC, shared by the threads in
//! proportion to their LLC access rates. For the uniform and the
//! power-law (independent-reference) patterns, occupancy and overlap
//! depend on sizes relative to the cache, which the scaling keeps; filter
//! entries then count lines of the scaled cache.

use super::*;
use crate::bloom::{CacheGeometry, SharedCache, SignatureConfig, SwitchOutRecord};
use crate::workload::Pattern;
use numaplace_model::{AddressSample, CacheSignature};

/// Ticks a step is cut into for interleaving co-running streams.
const TICKS_PER_STEP: usize = 32;
/// Lines of the scaled-down cache model at most.
pub(super) const MODEL_LINES: u64 = 8192;

pub(super) struct SignatureModel {
    caches: Vec<SharedCache>,
    /// Per dense CPU: its LLC and its index among the LLC's CPUs.
    slot: Vec<(usize, usize)>,
    accesses_per_step: usize,
    /// The scale-down factor S of each LLC.
    scale: Vec<u64>,
    /// Latest record per thread (index into `World::threads`), with the
    /// CPU it was taken on.
    records: BTreeMap<usize, (usize, SwitchOutRecord)>,
    /// Per CPU, the thread that ran last (its filter holds that thread).
    last_on_cpu: Vec<Option<usize>>,
    /// Position of each thread's sweep of its shared area, bytes.
    cursor: BTreeMap<usize, u64>,
    rng: Rng,
}

/// A line of a region of `lines` lines drawn by the thread's access
/// pattern: uniform, or the independent-reference model whose popularity
/// `p(r) ∝ r^−(1+α)` gives the power law of misses `M(C) ∝ C^−α`, ranks
/// scattered over the region by a multiplicative hash.
fn draw_line(rng: &mut Rng, pattern: Pattern, lines: u64) -> u64 {
    let lines = lines.max(1);
    match pattern {
        Pattern::Uniform => (rng.unit() * lines as f64) as u64 % lines,
        Pattern::PowerLaw { alpha, .. } => {
            let a = alpha.max(0.05);
            let n = lines as f64;
            let u = rng.unit();
            let rank = (1.0 - u * (1.0 - n.powf(-a))).powf(-1.0 / a);
            let r = (rank as u64).saturating_sub(1) % lines;
            r.wrapping_mul(0x9e37_79b9_7f4a_7c15) % lines
        }
    }
}

impl World {
    /// Keep counting-Bloom-filter signatures of every LLC (\[Symbiosis-Bloom\]), fed
    /// with `accesses_per_step` sampled accesses per LLC and step.
    pub fn enable_signatures(
        &mut self,
        config: SignatureConfig,
        accesses_per_step: usize,
    ) -> Result<(), String> {
        let t = &self.machine.topology;
        let mut caches = Vec::new();
        let mut scale = Vec::new();
        for (l, llc) in t.llcs().iter().enumerate() {
            let cache = llc.cache.map(|c| &t.caches()[c]);
            let size = t.llc_size(l).unwrap_or(0);
            let ways = cache.map_or(16, |c| if c.ways > 0 { c.ways as u32 } else { 16 });
            let lines = size / 64;
            let s = (lines / MODEL_LINES).max(1).next_power_of_two();
            let sets = (lines / s / u64::from(ways)).max(1);
            scale.push(s);
            let geometry = CacheGeometry::from_size(sets * u64::from(ways) * 64, ways, 64)
                .map_err(|e| format!("LLC {l} of {size} bytes: {e}"))?;
            caches.push(
                SharedCache::with_signatures(geometry, llc.span.len(), config.clone())
                    .map_err(|e| format!("LLC {l}: {e}"))?,
            );
        }
        let mut slot = vec![(0, 0); t.cpus().len()];
        for (l, llc) in t.llcs().iter().enumerate() {
            for (k, c) in llc.span.iter().enumerate() {
                if let Some(cpu) = t.cpu_by_os_id(c) {
                    slot[cpu.id] = (l, k);
                }
            }
        }
        self.signatures = Some(SignatureModel {
            caches,
            slot,
            accesses_per_step,
            scale,
            records: BTreeMap::new(),
            last_on_cpu: vec![None; t.cpus().len()],
            cursor: BTreeMap::new(),
            rng: Rng::new(self.seed ^ 0x5151_5151),
        });
        Ok(())
    }

    /// Feeds one step of co-running access streams to the signature model.
    pub(super) fn feed_signatures(&mut self, active: &[usize], speeds: &[Speed], load: &[u32]) {
        let Some(sig) = self.signatures.as_mut() else {
            return;
        };
        // Per CPU, the threads that time-share it, in a fixed order.
        let mut on_cpu: Vec<Vec<(usize, f64)>> = vec![Vec::new(); load.len()];
        for (&t, s) in active.iter().zip(speeds) {
            if let Some(c) = self.threads[t].cpu {
                let share = 1.0 / load[c].max(1) as f64;
                // LLC accesses while running: uncore requests + shared writes.
                let rate = s.ips / share * (s.uncore_per_instr + s.transfers_per_instr);
                on_cpu[c].push((t, rate));
            }
        }
        let mut llc_rate = vec![0.0; sig.caches.len()];
        for (c, v) in on_cpu.iter().enumerate() {
            for &(_, r) in v {
                llc_rate[sig.slot[c].0] += r / v.len() as f64;
            }
        }
        let mut carry = vec![0.0f64; self.threads.len()];
        for tick in 0..TICKS_PER_STEP {
            for (c, v) in on_cpu.iter().enumerate() {
                if v.is_empty() {
                    continue;
                }
                let (t, rate) = v[tick * v.len() / TICKS_PER_STEP];
                let (l, core) = sig.slot[c];
                if let Some(prev) = sig.last_on_cpu[c].filter(|&prev| prev != t) {
                    if let Some(s) = sig.caches[l].signatures_mut() {
                        sig.records.insert(prev, (c, s.switch_out_record(core)));
                    }
                }
                sig.last_on_cpu[c] = Some(t);
                let want = sig.accesses_per_step as f64 * rate
                    / llc_rate[l].max(1e-9)
                    / TICKS_PER_STEP as f64
                    + carry[t];
                let n = want.floor();
                carry[t] = want - n;
                let th = &self.threads[t];
                let spec = &self.workload.apps[th.app];
                let m = th.model(spec, &self.spin);
                let base = PRIVATE_BASE + th.index as u64 * PRIVATE_STRIDE;
                let lines = (m.working_set / 64 / sig.scale[l]).max(1);
                let shared_lines = spec.shared_bytes / 64 / sig.scale[l];
                let shared_part =
                    if m.shared_writes_pki > 0.0 && shared_lines > 0 && th.index < spec.sharers {
                        m.shared_writes_pki / (m.shared_writes_pki + m.uncore_pki).max(1e-9)
                    } else {
                        0.0
                    };
                for _ in 0..n as usize {
                    let addr = if sig.rng.unit() < shared_part {
                        let cur = sig.cursor.entry(t).or_insert(0);
                        *cur = (*cur + 64) % (shared_lines * 64).max(64);
                        SHARED_BASE + *cur
                    } else {
                        base + 64 * draw_line(&mut sig.rng, m.pattern, lines)
                    };
                    sig.caches[l].access(core, addr);
                }
            }
        }
    }

    /// The signatures for the snapshot: each running thread's latest
    /// switch-out record, or, for one that has had its CPU to itself since,
    /// its running bit vector now.
    pub(super) fn signature_records(&self) -> BTreeMap<i32, CacheSignature> {
        let mut out = BTreeMap::new();
        let Some(sig) = self.signatures.as_ref() else {
            return out;
        };
        let topo = &self.machine.topology;
        for (t, th) in self.threads.iter().enumerate() {
            if !th.alive || th.done {
                continue;
            }
            let live = th.cpu.filter(|&c| sig.last_on_cpu[c] == Some(t));
            let (cpu, record) = match (live, sig.records.get(&t)) {
                (Some(c), _) => {
                    let (l, core) = sig.slot[c];
                    let Some(s) = sig.caches[l].signatures() else {
                        continue;
                    };
                    let rbv = s.running_bit_vector(core);
                    let n = topo.llcs()[l].span.len();
                    let rec = SwitchOutRecord {
                        core,
                        occupancy_weight: crate::bloom::CacheSignatures::occupancy_weight(&rbv),
                        symbiosis: (0..n).map(|k| s.symbiosis(&rbv, k)).collect(),
                    };
                    (c, rec)
                }
                (None, Some((c, rec))) => (*c, rec.clone()),
                (None, None) => continue,
            };
            let (l, _) = sig.slot[cpu];
            let span: Vec<u32> = topo.llcs()[l].span.iter().collect();
            let entries = sig.caches[l].signatures().map_or(0, |s| s.entries()) as u32;
            out.insert(
                th.tid,
                CacheSignature {
                    cpu: topo.cpus()[cpu].os_id,
                    occupancy_weight: record.occupancy_weight,
                    // Every CPU of the cache, its own included: §3.3.2
                    // uses the self-core value too.
                    symbiosis: span
                        .iter()
                        .zip(&record.symbiosis)
                        .map(|(c, s)| (*c, *s))
                        .collect(),
                    entries,
                },
            );
        }
        out
    }

    /// Data addresses a PMU would have sampled from each running thread:
    /// `per_thread` per interval, from its private working set (by its
    /// pattern) or its shared area, in proportion to its LLC misses and
    /// shared writes; the node is where the model keeps that page.
    pub(super) fn address_samples(
        &mut self,
        per_thread: usize,
    ) -> BTreeMap<i32, Vec<AddressSample>> {
        let mut out = BTreeMap::new();
        if per_thread == 0 {
            return out;
        }
        let topo = &self.machine.topology;
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if !th.alive || th.done || th.cpu.is_none() {
                continue;
            }
            let app = &self.apps[th.app];
            let spec = &self.workload.apps[th.app];
            let m = th.model(spec, &self.spin);
            let s = th.last_speed;
            let shared_weight = if spec.shared_bytes > 0 {
                s.transfers_per_instr
            } else {
                0.0
            };
            let private_weight = s.llc_miss_per_instr;
            if shared_weight + private_weight <= 0.0 {
                continue;
            }
            let mut v = Vec::with_capacity(per_thread);
            for _ in 0..per_thread {
                let rng = &mut self.sample_rng;
                let shared = rng.unit() * (shared_weight + private_weight) < shared_weight;
                let (address, pages) = if shared {
                    let lines = spec.shared_bytes / 64;
                    (
                        SHARED_BASE + 64 * (rng.unit() * lines as f64) as u64,
                        &app.shared_pages,
                    )
                } else {
                    let base = PRIVATE_BASE + th.index as u64 * PRIVATE_STRIDE;
                    (
                        base + 64 * draw_line(rng, m.pattern, m.working_set / 64),
                        &th.pages,
                    )
                };
                let total: f64 = pages.iter().sum();
                let mut pick = rng.unit() * total;
                let mut node = None;
                for (n, p) in pages.iter().enumerate() {
                    if pick < *p {
                        node = Some(topo.nodes()[n].os_id);
                        break;
                    }
                    pick -= p;
                }
                v.push(AddressSample {
                    address,
                    node,
                    write: shared,
                });
            }
            out.insert(th.tid, v);
        }
        out
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::workload::{AppSpec, LinuxModel, Phase, ThreadModel};

    /// A one-thread application of working set `ws` (also the world's
    /// other tests' builder).
    pub(in crate::world) fn app(
        name: &str,
        ws: u64,
        uncore_pki: f64,
        memory: MemoryPlacement,
    ) -> AppSpec {
        AppSpec {
            name: name.into(),
            kind: AppKind::Process,
            threads: 1,
            phases: vec![Phase {
                instructions: 1e12,
                model: ThreadModel {
                    cpi_core: 1.0,
                    uncore_pki,
                    working_set: ws,
                    pattern: Pattern::PowerLaw {
                        llc_mpki: uncore_pki / 2.0,
                        alpha: 0.5,
                    },
                    mlp: 1.0,
                    shared_writes_pki: 0.0,
                },
            }],
            shared_bytes: 0,
            sharers: 1,
            memory,
            cpus: None,
            cpus_by_cgroup: false,
            start_s: 0.0,
            runs: 1,
            job: None,
        }
    }

    /// A world of `apps` on a preset, each thread bound to its CPUs.
    pub(in crate::world) fn world(
        machine: &str,
        apps: Vec<AppSpec>,
        cpus: Vec<Vec<usize>>,
    ) -> World {
        let w = Workload {
            name: "t".into(),
            description: String::new(),
            machine: machine.into(),
            apps,
            step_ms: 10.0,
            max_seconds: 100.0,
            mismatch_percent: None,
            linux: LinuxModel::default(),
        };
        let mut world = World::new(Machine::preset(machine).unwrap(), w, 1);
        world.bind(cpus);
        world
    }

    #[test]
    fn a_cache_hog_fills_more_of_the_signature_than_a_small_program() {
        let mut w = world(
            "core2duo",
            vec![
                app("hog", 64 << 20, 40.0, MemoryPlacement::FirstTouch),
                app("small", 256 << 10, 5.0, MemoryPlacement::FirstTouch),
            ],
            vec![vec![0], vec![1]],
        );
        w.enable_signatures(SignatureConfig::default(), 8192)
            .unwrap();
        w.start_due();
        for _ in 0..100 {
            w.advance();
        }
        let s = w.snapshot();
        assert_eq!(s.signatures.len(), 2, "{:?}", s.signatures);
        let by_name = |n: &str| {
            let g = s.groups.iter().find(|g| g.comm == n).unwrap();
            s.signatures[&g.threads[0]].clone()
        };
        let (hog, small) = (by_name("hog"), by_name("small"));
        assert!(
            hog.occupancy_weight > 4 * small.occupancy_weight,
            "{hog:?} {small:?}"
        );
        assert!(hog.occupancy_weight <= hog.entries);
        // Both CPUs of the shared L2 are named, the own one too (§3.3.2).
        assert_eq!(
            hog.symbiosis.keys().copied().collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(hog.cpu, 0);
    }

    #[test]
    fn time_sharing_threads_are_recorded_at_switch_out() {
        let mut w = world(
            "core2duo",
            vec![
                app("a", 8 << 20, 30.0, MemoryPlacement::FirstTouch),
                app("b", 8 << 20, 30.0, MemoryPlacement::FirstTouch),
            ],
            vec![vec![0], vec![0]],
        );
        w.enable_signatures(SignatureConfig::default(), 4096)
            .unwrap();
        w.start_due();
        for _ in 0..20 {
            w.advance();
        }
        let s = w.snapshot();
        assert_eq!(s.signatures.len(), 2);
        assert!(
            s.signatures
                .values()
                .all(|r| r.cpu == 0 && r.occupancy_weight > 0)
        );
    }

    #[test]
    fn sampled_addresses_fall_in_the_threads_memory_on_its_node() {
        let mut w = world(
            "westmere-2s",
            vec![app("remote", 64 << 20, 30.0, MemoryPlacement::Node(1))],
            vec![vec![0]],
        );
        w.start_due();
        for _ in 0..10 {
            w.advance();
        }
        let s = w.snapshot();
        let samples = s.samples.values().next().unwrap();
        assert_eq!(samples.len(), 32);
        for a in samples {
            assert!(a.address >= PRIVATE_BASE && a.address < PRIVATE_BASE + (64 << 20));
            assert_eq!(a.node, Some(1));
            assert!(!a.write);
        }
        // Without signatures enabled, none are reported.
        assert!(s.signatures.is_empty());
    }
}
