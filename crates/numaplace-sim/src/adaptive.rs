//! \[Bae12\] in the simulator: the Fig. 4
//! benchmark suite as 8-vcore VMs, runs in the local and the interleaved
//! mapping with the page model on, and the training of §5.2's models
//! (what `numaplace train` runs).
//!
//! Fig. 4 gives only each benchmark's class, so every benchmark here is
//! one of `classes-westmere.toml`'s three class VMs (canneal, apsi,
//! mgrid) with its working set, shared area, shared writes and core CPI
//! varied within the class (the values are ours, not measured).

use numaplace_policy::adaptive::fit::ridge;
use numaplace_policy::adaptive::mapping::layout;
use numaplace_policy::adaptive::metrics::{PageMetrics, page_metrics};
use numaplace_policy::adaptive::models::PerformanceModel;
use numaplace_policy::adaptive::{Class, Classifier, Mapping, Models, PowerModel};

use crate::machine::Machine;
use crate::scenario;
use crate::workload::Workload;
use crate::world::World;
use crate::world::pages::PageSetConfig;

/// Which suite a benchmark is from (§2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// SPEC CPU2006.
    Spec,
    /// PARSEC.
    Parsec,
}

/// One Fig. 4 benchmark as a one-VM workload.
#[derive(Debug, Clone)]
pub struct Benchmark {
    /// Its name in \[Bae12\]'s figures.
    pub name: &'static str,
    /// The suite it comes from.
    pub suite: Suite,
    /// Its class in Fig. 4.
    pub class: u8,
    /// The scenario that runs it.
    pub workload: Workload,
}

/// (name, suite, Fig. 4 class, private MiB, shared KiB, shared writes
/// pki, core CPI).
const FIG4: [(&str, Suite, u8, u64, u64, f64, f64); 22] = [
    ("ammp", Suite::Spec, 1, 2, 0, 0.0, 0.8),
    ("apsi", Suite::Spec, 1, 2, 0, 0.0, 0.9),
    ("art", Suite::Spec, 1, 3, 0, 0.0, 0.7),
    ("blackscholes", Suite::Parsec, 2, 4, 1024, 0.5, 0.9),
    ("bodytrack-pthread", Suite::Parsec, 2, 8, 2048, 1.5, 0.8),
    ("bodytrack-omp", Suite::Parsec, 1, 2, 0, 0.0, 0.9),
    ("canneal", Suite::Parsec, 0, 64, 1024, 0.2, 0.5),
    ("equake", Suite::Spec, 0, 48, 1024, 0.1, 0.6),
    ("facesim", Suite::Parsec, 2, 16, 2048, 1.0, 0.9),
    ("ferret", Suite::Parsec, 1, 3, 0, 0.0, 0.8),
    ("fluidanimate-pthread", Suite::Parsec, 1, 2, 0, 0.0, 0.7),
    ("fluidanimate-icc", Suite::Parsec, 2, 6, 1024, 2.0, 0.9),
    ("fma-3d", Suite::Spec, 2, 8, 2048, 0.8, 1.0),
    ("freqmine", Suite::Parsec, 2, 12, 1024, 1.0, 0.9),
    ("galgel", Suite::Spec, 2, 10, 2048, 1.2, 0.8),
    ("raytrace", Suite::Parsec, 2, 8, 4096, 1.0, 0.9),
    ("streamcluster", Suite::Parsec, 0, 96, 512, 0.3, 0.5),
    ("swaptions", Suite::Parsec, 2, 2, 512, 0.5, 1.0),
    ("swim-gcc", Suite::Spec, 2, 16, 2048, 0.6, 0.9),
    ("swim-icc", Suite::Spec, 0, 32, 1024, 0.1, 0.7),
    ("mgrid", Suite::Spec, 2, 8, 2048, 1.0, 0.9),
    ("wupwise", Suite::Spec, 1, 3, 0, 0.0, 0.9),
];

/// The 22 benchmarks of Fig. 4.
pub fn fig4_suite() -> Vec<Benchmark> {
    let base = scenario::builtin("classes-westmere")
        .expect("classes-westmere is built in")
        .expect("classes-westmere parses");
    FIG4.iter()
        .map(|&(name, suite, class, mib, shared_kib, sw, cpi)| {
            let mut app = base.apps[class as usize].clone();
            app.name = format!("{name}-class{class}");
            app.start_s = 0.0;
            app.shared_bytes = shared_kib << 10;
            for p in &mut app.phases {
                p.model.working_set = mib << 20;
                p.model.shared_writes_pki = sw;
                p.model.cpi_core = cpi;
            }
            Benchmark {
                name,
                suite,
                class,
                workload: Workload {
                    name: format!("fig4-{name}"),
                    description: format!("[Bae12] Fig. 4 {name} (class {class}), 8 vcores"),
                    apps: vec![app],
                    ..base.clone()
                },
            }
        })
        .collect()
}

/// One run of a benchmark bound in one mapping.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Mean run time, simulated seconds.
    pub runtime_s: f64,
    /// Energy, joules, from the machine's power model.
    pub energy_j: f64,
    /// Mean power, watts.
    pub power_w: f64,
    /// Mean of the probes taken every 2 s.
    pub metrics: PageMetrics,
}

/// Dense CPU ids of the mapping for the workload's only app, its memory's
/// package first.
pub fn mapping_cpus(m: &Machine, w: &Workload, mapping: Mapping) -> Vec<usize> {
    let t = &m.topology;
    let prefer: Vec<usize> = match w.apps[0].memory {
        crate::workload::MemoryPlacement::Node(n) => t
            .nodes()
            .get(n as usize)
            .and_then(|n| n.package)
            .into_iter()
            .collect(),
        _ => Vec::new(),
    };
    let l = layout(
        t,
        mapping,
        w.apps[0].threads as usize,
        &prefer,
        &numaplace_model::CpuSet::new(),
    )
    .expect("the VM fits");
    l.cpus
        .iter()
        .map(|&k| t.cpu_by_os_id(k).expect("a CPU of the machine").id)
        .collect()
}

/// Runs `w` bound in `mapping` with the page model on.
pub fn measure(m: &Machine, w: &Workload, mapping: Mapping, seed: u64) -> Measured {
    let mut world = World::new(m.clone(), w.clone(), seed);
    world.bind(vec![mapping_cpus(m, w, mapping)]);
    world.enable_page_sets(PageSetConfig::default());
    world.set_samples_per_interval(0);
    let mut probes = Vec::new();
    let mut next = 2.0;
    loop {
        world.start_due();
        if world.time() + 1e-9 >= next {
            let s = world.snapshot();
            let mut tasks: Vec<_> = s
                .tasks
                .iter()
                .filter(|t| s.page_sets.contains_key(&t.tid))
                .collect();
            tasks.sort_by_key(|t| (t.vcpu, t.tid));
            let sets: Vec<_> = tasks.iter().map(|t| &s.page_sets[&t.tid]).collect();
            if sets.len() == w.apps[0].threads as usize {
                probes.push(page_metrics(&sets));
            }
            next += 2.0;
        }
        if world.finished() || world.time() >= w.max_seconds {
            break;
        }
        world.advance();
    }
    let runtime_s = world.app_runs()[0].runtime_s().unwrap_or(world.time());
    let energy_j = world.totals().energy_j;
    Measured {
        runtime_s,
        energy_j,
        power_w: energy_j / world.time().max(1e-9),
        metrics: PageMetrics::mean(&probes).unwrap_or_default(),
    }
}

/// A benchmark measured in both mappings.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The benchmark.
    pub name: &'static str,
    /// The seed of both runs.
    pub seed: u64,
    /// Under the local mapping.
    pub local: Measured,
    /// Under the interleaved mapping.
    pub interleaved: Measured,
}

impl Pair {
    /// Interleaved / local run time: the performance models' target.
    pub fn ratio(&self) -> f64 {
        self.interleaved.runtime_s / self.local.runtime_s
    }
}

/// Every benchmark in both mappings over `seeds`, on `workers` threads.
pub fn measure_pairs(
    m: &Machine,
    benches: &[Benchmark],
    seeds: &[u64],
    workers: usize,
) -> Vec<Pair> {
    let jobs: Vec<(usize, u64)> = (0..benches.len())
        .flat_map(|b| seeds.iter().map(move |&s| (b, s)))
        .collect();
    crate::run::parallel(jobs, workers, |(b, seed)| {
        let w = &benches[b].workload;
        Pair {
            name: benches[b].name,
            seed,
            local: measure(m, w, Mapping::Local, seed),
            interleaved: measure(m, w, Mapping::Interleaved, seed),
        }
    })
}

/// The classifier numaplace trains with: §5.2's formula on the machine's
/// LLC, a 4 KiB page, PGUtil 0.1 (which puts the threshold between the
/// simulator's class-1 and class-0 page counts) and the paper's 1 %.
pub fn classifier_for(m: &Machine) -> Classifier {
    Classifier {
        llc_bytes: m.topology.llc_size(0).unwrap_or(12 << 20),
        page_size: crate::world::PAGE as u64,
        pg_util: 0.1,
        threshold_class1: 0.01,
    }
}

/// Ridge penalty per row on standardised metrics ([`ridge`]).
pub const RIDGE: f64 = 1.0;

/// Classes with fewer distinct training benchmarks than this borrow the
/// rows of §5.3's pooled model (classes 0 and 1 together; all for 2).
pub const MIN_BENCHMARKS_PER_CLASS: usize = 4;

/// Fits §5.2's models to measured pairs: per class (by the classifier on
/// the metrics measured in that mapping) and per mapping, least squares
/// of the interleaved / local ratio on the eight metrics. The power model
/// is the machine preset's (Fig. 7 for westmere-2s).
pub fn train(m: &Machine, pairs: &[Pair], source: &str) -> Result<Models, String> {
    let classifier = classifier_for(m);
    let threads = 8;
    let mut performance = Vec::new();
    for mapping in [Mapping::Local, Mapping::Interleaved] {
        let rows: Vec<(Class, &'static str, [f64; 8], f64)> = pairs
            .iter()
            .map(|p| {
                let mm = if mapping == Mapping::Local {
                    &p.local
                } else {
                    &p.interleaved
                };
                (
                    classifier.classify(&mm.metrics, threads),
                    p.name,
                    mm.metrics.features(),
                    p.ratio(),
                )
            })
            .collect();
        for class in Class::ALL {
            let benches = |cs: &[Class]| {
                let mut names: Vec<_> = rows
                    .iter()
                    .filter(|r| cs.contains(&r.0))
                    .map(|r| r.1)
                    .collect();
                names.sort_unstable();
                names.dedup();
                names.len()
            };
            let own = [class];
            let pooled: &[Class] = if class == Class::Other {
                &Class::ALL
            } else {
                &[Class::HighCacheMissRate, Class::LowCacheCoherencyTraffic]
            };
            let use_classes: &[Class] = if benches(&own) >= MIN_BENCHMARKS_PER_CLASS {
                &own
            } else {
                pooled
            };
            let (xs, ys): (Vec<Vec<f64>>, Vec<f64>) = rows
                .iter()
                .filter(|r| use_classes.contains(&r.0))
                .map(|r| (r.2.to_vec(), r.3))
                .unzip();
            let mut model = ridge(&xs, &ys, RIDGE).map_err(|e| {
                format!("{class} measured {mapping}: {e} (no training run fell in it)")
            })?;
            let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            model.range = Some((lo, hi));
            performance.push(PerformanceModel {
                class: class.number(),
                measured_in: mapping,
                model,
            });
        }
    }
    let power = m
        .params
        .power
        .as_ref()
        .map_or(PowerModel::FIG7, |p| PowerModel {
            r2: None,
            ..p.clone()
        });
    let models = Models {
        format: Models::FORMAT.into(),
        version: Models::VERSION,
        machine: m.name.clone(),
        source: source.to_string(),
        classifier,
        performance,
        power,
    };
    models.validate().map_err(|e| e.to_string())?;
    Ok(models)
}
