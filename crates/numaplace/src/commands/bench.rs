//! `numaplace bench`: seed 000's micro-benchmark (§2.2, Fig. 3) on this
//! machine, one run as the arguments say or one of the paper's experiments
//! (Fig. 4a-c, 5a-c): a pair of placements compared over a sweep, the
//! second's run time normalised to the first's, as the paper plots them.
//! The benchmark itself is `numaplace_linux::microbench`.

use std::collections::BTreeMap;

use anyhow::Result;
use numaplace_linux::actuate::thread_affinity;
use numaplace_linux::microbench::{self, Config, ENTRY_BYTES, Length, MemoryPolicy, WORD_BYTES};
use numaplace_linux::{SysRoot, TopologySource, discover};
use numaplace_model::{CpuSet, Node, Topology};
use serde::Serialize;

use crate::cli::BenchArgs;
use crate::commands::InputError;
use crate::report::topology::bytes;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// Loops per thread when neither --loops nor --seconds is given.
const DEFAULT_LOOPS: u64 = 100;

/// The machine as this process may use it.
pub(crate) struct Machine {
    /// The topology restricted to the CPUs this process may run on.
    topo: Topology,
    /// Every CPU numaplace sees on the machine.
    all: CpuSet,
}

impl Machine {
    fn host() -> Result<Machine> {
        let full = discover(&TopologySource::Sysfs(SysRoot::host()))?;
        let allowed = thread_affinity(0, 1024)?;
        let topo = full.restrict(&allowed).map_err(|e| InputError(e.0))?;
        Ok(Machine {
            all: full.span().clone(),
            topo,
        })
    }
}

pub fn run(args: &BenchArgs) -> Result<()> {
    let machine = Machine::host()?;
    match &args.experiment {
        Some(name) => experiment::run(name, args, &machine.topo),
        None => single(args, &machine),
    }
}

/// The JSON of one run: what was asked, then the report.
#[derive(Serialize)]
struct SingleJson<'a> {
    working_set_bytes: u64,
    shared_bytes: u64,
    memory: String,
    #[serde(flatten)]
    report: &'a microbench::Report,
}

fn single(args: &BenchArgs, m: &Machine) -> Result<()> {
    let cfg = config(args, m)?;
    let report = microbench::run(&cfg)?;
    if args.json {
        let out = SingleJson {
            working_set_bytes: cfg.working_set,
            shared_bytes: cfg.shared,
            memory: describe_memory(&cfg.memory),
            report: &report,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render_single(&cfg, &report));
    }
    Ok(())
}

/// Checks the arguments against the machine and makes the run's config.
fn config(args: &BenchArgs, m: &Machine) -> Result<Config, InputError> {
    let working_set = size_arg("--working-set", &args.working_set, ENTRY_BYTES)?;
    let shared = size_arg("--shared", &args.shared, WORD_BYTES)?;
    let memory = memory_arg(&args.memory_node, &m.topo)?;
    let cpus = thread_cpus(args, m)?;
    let length = length_arg(args.loops, args.seconds)?;
    let need = working_set.saturating_mul(cpus.len() as u64) + shared;
    check_fits(&m.topo, &memory, need)?;
    Ok(Config {
        cpus,
        working_set,
        shared,
        memory,
        length,
        seed: args.seed,
    })
}

/// A size argument, which must be a whole number of `unit`-byte pieces.
fn size_arg(flag: &str, text: &str, unit: u64) -> Result<u64, InputError> {
    let n = numaplace_sim::scenario::parse_size(text)
        .map_err(|e| InputError(format!("{flag} {text}: {e}")))?;
    if n % unit != 0 {
        let what = if unit == ENTRY_BYTES {
            "the list's entries are 64-byte cache lines"
        } else {
            "the shared area is 8-byte words"
        };
        return Err(InputError(format!(
            "{flag} {text}: {n} bytes is not a multiple of {unit} ({what})"
        )));
    }
    Ok(n)
}

/// `--memory-node`: a node that exists and has memory, `local` or
/// `interleave` (over every node with memory).
fn memory_arg(text: &str, topo: &Topology) -> Result<MemoryPolicy, InputError> {
    match text.trim() {
        "local" => return Ok(MemoryPolicy::Local),
        "interleave" => {
            let nodes = topo.nodes().iter().filter(|n| n.memory > 0);
            return Ok(MemoryPolicy::Interleave(nodes.map(|n| n.os_id).collect()));
        }
        _ => {}
    }
    let id: u32 = text.trim().parse().map_err(|_| {
        InputError(format!(
            "--memory-node {text:?}: give a node number, `local` or `interleave`"
        ))
    })?;
    let node = node_arg("--memory-node", id, topo)?;
    if node.memory == 0 {
        return Err(InputError(format!(
            "--memory-node {id}: node {id} has no memory"
        )));
    }
    Ok(MemoryPolicy::Node(id))
}

fn node_arg<'t>(flag: &str, id: u32, topo: &'t Topology) -> Result<&'t Node, InputError> {
    topo.node_by_os_id(id).ok_or_else(|| {
        let ids: CpuSet = topo.nodes().iter().map(|n| n.os_id).collect();
        InputError(format!(
            "{flag}: node {id} does not exist; this machine has nodes {ids}"
        ))
    })
}

fn length_arg(loops: Option<u64>, seconds: Option<f64>) -> Result<Length, InputError> {
    match (loops, seconds) {
        (Some(0), _) => Err(InputError("--loops 0: at least one loop".into())),
        (Some(n), _) => Ok(Length::Loops(n)),
        (None, Some(s)) if !(s.is_finite() && s > 0.0) => Err(InputError(format!(
            "--seconds {s}: give a positive number of seconds"
        ))),
        (None, Some(s)) => Ok(Length::Seconds(s)),
        (None, None) => Ok(Length::Loops(DEFAULT_LOOPS)),
    }
}

/// Refuses a run that needs more memory than where it is to go.
fn check_fits(topo: &Topology, memory: &MemoryPolicy, need: u64) -> Result<(), InputError> {
    let (have, place) = match memory {
        MemoryPolicy::Node(n) => (
            topo.node_by_os_id(*n).map_or(0, |n| n.memory),
            format!("node {n}"),
        ),
        _ => (topo.total_memory(), "this machine".to_string()),
    };
    if have > 0 && need > have {
        return Err(InputError(format!(
            "the run needs {} (threads x working set + shared area) but {place} has {}",
            bytes(need),
            bytes(have)
        )));
    }
    Ok(())
}

/// One CPU per thread: from --cpus, --nodes, or the first allowed CPUs.
fn thread_cpus(args: &BenchArgs, m: &Machine) -> Result<Vec<u32>, InputError> {
    if args.threads == Some(0) {
        return Err(InputError("--threads 0: at least one thread".into()));
    }
    let n = args.threads.unwrap_or(1);
    let (cpus, from) = match (&args.cpus, &args.nodes) {
        (Some(list), _) => return listed_cpus(list, args.threads, m),
        (None, Some(list)) => (
            node_cpus(list, args.pack, &m.topo)?,
            format!("--nodes {list}"),
        ),
        (None, None) => (core_order(&m.topo, m.topo.span()), "this process".into()),
    };
    if cpus.len() < n {
        return Err(InputError(format!(
            "--threads {n}: one CPU per thread, and {from} may use {} CPUs",
            cpus.len()
        )));
    }
    Ok(cpus[..n].to_vec())
}

/// `--cpus`: CPUs of the machine this process may run on, one per thread.
fn listed_cpus(list: &str, threads: Option<usize>, m: &Machine) -> Result<Vec<u32>, InputError> {
    let set: CpuSet = list
        .parse()
        .map_err(|e| InputError(format!("--cpus: {e}")))?;
    for c in set.iter() {
        if !m.all.contains(c) {
            return Err(InputError(format!(
                "--cpus {list}: CPU {c} is not one of this machine's CPUs ({})",
                m.all
            )));
        }
        if !m.topo.span().contains(c) {
            return Err(InputError(format!(
                "--cpus {list}: CPU {c} is not allowed to this process (it may use {})",
                m.topo.span()
            )));
        }
    }
    match threads {
        Some(n) if n != set.len() => Err(InputError(format!(
            "--cpus {list} names {} CPUs for --threads {n}: give one CPU per thread",
            set.len()
        ))),
        _ => Ok(set.iter().collect()),
    }
}

/// `--nodes`: the nodes' allowed CPUs, round-robin over the nodes
/// (spread) or node after node (pack).
fn node_cpus(list: &str, pack: bool, topo: &Topology) -> Result<Vec<u32>, InputError> {
    let ids: CpuSet = list
        .parse()
        .map_err(|e| InputError(format!("--nodes: {e}")))?;
    let mut per_node = Vec::new();
    for id in ids.iter() {
        let node = node_arg("--nodes", id, topo)?;
        if node.span.is_empty() {
            return Err(InputError(format!(
                "--nodes {list}: node {id} has no CPU this process may use"
            )));
        }
        per_node.push(core_order(topo, &node.span));
    }
    if pack {
        return Ok(per_node.concat());
    }
    let longest = per_node.iter().map(Vec::len).max().unwrap_or(0);
    Ok((0..longest)
        .flat_map(|i| per_node.iter().filter_map(move |cpus| cpus.get(i).copied()))
        .collect())
}

/// The CPUs of `set` ordered so that separate cores come before second
/// hardware threads of a core already used.
pub(crate) fn core_order(topo: &Topology, set: &CpuSet) -> Vec<u32> {
    let mut ranked: Vec<(usize, u32)> = set
        .iter()
        .filter_map(|c| {
            let core = &topo.cores()[topo.cpu_by_os_id(c)?.core];
            let rank = core
                .span
                .iter()
                .filter(|&s| s < c && set.contains(s))
                .count();
            Some((rank, c))
        })
        .collect();
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, c)| c).collect()
}

pub(crate) fn describe_memory(m: &MemoryPolicy) -> String {
    match m {
        MemoryPolicy::Node(n) => format!("node {n}"),
        MemoryPolicy::Local => "local".into(),
        MemoryPolicy::Interleave(set) => format!("interleave {set}"),
    }
}

/// Pages per node as `N0 1024 N1 12` (or `-`).
fn pages(p: &BTreeMap<u32, u64>) -> String {
    if p.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> = p.iter().map(|(n, c)| format!("N{n} {c}")).collect();
    parts.join(" ")
}

fn render_single(cfg: &Config, r: &microbench::Report) -> String {
    use std::fmt::Write;
    let length = match cfg.length {
        Length::Loops(n) => format!("{n} loops"),
        Length::Seconds(s) => format!("{s} s"),
    };
    let mut out = format!(
        "seed 000 micro-benchmark (Fig. 3): {} thread(s), {} list each ({} entries), \
         {} shared ({} words), memory {}, {length}\n",
        cfg.cpus.len(),
        bytes(cfg.working_set),
        r.entries_per_thread,
        bytes(cfg.shared),
        r.shared_words,
        describe_memory(&cfg.memory),
    );
    out.push_str("thread  CPU  ran on (node)    seconds   loops      hops/s  list pages by node\n");
    for t in &r.threads {
        let seen: Vec<String> = t
            .ran_on
            .iter()
            .map(|s| format!("{} ({})", s.cpu, s.node))
            .collect();
        let _ = writeln!(
            out,
            "{:>6}  {:>3}  {:<14} {:>9.4}  {:>6}  {:>10.3e}  {}",
            t.thread,
            t.cpu,
            seen.join(","),
            t.seconds,
            t.loops,
            t.hops_per_second,
            pages(&t.private_pages)
        );
    }
    let _ = writeln!(
        out,
        "mean thread run time {:.4} s; {:.3e} hops/s over all threads; shared area pages by node: {}",
        r.mean_seconds,
        r.hops_per_second,
        pages(&r.shared_pages)
    );
    out
}

mod experiment {
    //! Seed 000's experiments (§2.2.1, §2.2.2; Fig. 4a-c, 5a-c) on this
    //! machine's topology. The paper's machine had two sockets, each one
    //! node with one 12 MiB LLC and 4 cores; here "node 0" is the first
    //! node with CPUs and memory (the home node), "the other socket" the
    //! package of the node farthest from it, and "an LLC" a last-level
    //! cache domain as `numaplace topology` shows it.

    use super::*;

    /// List hops plus shared adds per thread per point at scale 1: about
    /// 1-4 s for a list far larger than the LLC. Seed 000 ran 1000 loops,
    /// whatever the size; loops here follow this budget instead, the same
    /// for both placements of a point.
    const BUDGET: f64 = (1u64 << 25) as f64;
    /// The scale --quick implies.
    const QUICK_SCALE: f64 = 1.0 / 32.0;

    /// One experiment laid out on this machine.
    pub(super) struct Plan {
        pub name: &'static str,
        pub title: String,
        pub labels: [&'static str; 2],
        pub x_label: &'static str,
        pub placements: String,
        pub memory: MemoryPolicy,
        /// Work per point relative to [`BUDGET`].
        pub weight: f64,
        pub notes: Vec<String>,
        pub points: Vec<Point>,
    }

    /// One point of the sweep: its two placements (the second absent when
    /// the machine cannot host it).
    #[derive(Debug, Clone)]
    pub(super) struct Point {
        pub x: String,
        /// Per thread.
        pub working_set: u64,
        pub shared: u64,
        pub first: Vec<u32>,
        pub second: Option<Vec<u32>>,
    }

    /// Where the paper's roles fall on this machine.
    struct Layout<'t> {
        topo: &'t Topology,
        home: &'t Node,
        home_pkg: usize,
        remote: Option<&'t Node>,
        other_pkg: Option<usize>,
    }

    impl<'t> Layout<'t> {
        fn new(topo: &'t Topology) -> Layout<'t> {
            let home = (topo.cpu_nodes().find(|n| n.memory > 0))
                .or_else(|| topo.cpu_nodes().next())
                .expect("a machine has a node with CPUs");
            let pkg_of = |n: &Node| topo.cpu_by_os_id(n.span.first().unwrap()).unwrap().package;
            let home_pkg = pkg_of(home);
            let remote = (topo.cpu_nodes().filter(|n| n.id != home.id)).max_by_key(|n| {
                let far = topo.distance(home.id, n.id);
                (pkg_of(n) != home_pkg, far, std::cmp::Reverse(n.os_id))
            });
            let other_pkg = remote.map(pkg_of).filter(|&p| p != home_pkg).or_else(|| {
                (topo.packages().iter())
                    .find(|p| p.id != home_pkg && !p.span.is_empty())
                    .map(|p| p.id)
            });
            Layout {
                topo,
                home,
                home_pkg,
                remote,
                other_pkg,
            }
        }

        /// `span`'s CPUs: the home node's first, then the remote node's,
        /// then the rest, each with separate cores first.
        fn ordered(&self, span: &CpuSet) -> Vec<u32> {
            let home = span.intersection(&self.home.span);
            let remote = self
                .remote
                .map_or_else(CpuSet::new, |r| span.intersection(&r.span));
            let rest = span.difference(&home).difference(&remote);
            [home, remote, rest]
                .iter()
                .flat_map(|s| core_order(self.topo, s))
                .collect()
        }

        fn package(&self, p: usize) -> Vec<u32> {
            self.ordered(&self.topo.packages()[p].span)
        }

        fn node_memory(&self) -> MemoryPolicy {
            MemoryPolicy::Node(self.home.os_id)
        }

        /// "has 1" / "has 1 with CPUs" for the messages.
        fn node_count(&self) -> String {
            let (all, with) = (self.topo.nodes().len(), self.topo.cpu_nodes().count());
            if all == with {
                format!("has {with}")
            } else {
                format!("has {with} with CPUs")
            }
        }

        /// A size `need` fits if it takes at most half of the home node.
        fn too_big(&self, need: u64) -> Option<String> {
            let have = self.home.memory;
            (have > 0 && need > have / 2).then(|| {
                format!(
                    "needs {} on node {}, more than half of its {}",
                    bytes(need),
                    self.home.os_id,
                    bytes(have)
                )
            })
        }
    }

    /// `n` threads, half on `a`'s first CPUs and half on `b`'s.
    fn split(n: usize, a: &[u32], b: &[u32]) -> Vec<u32> {
        a[..n / 2].iter().chain(&b[..n - n / 2]).copied().collect()
    }

    /// Threads both placements can hold: at most `want`, all of them in
    /// one domain of `one` CPUs and, when there is a second domain, half
    /// in each (then an even number).
    pub(super) fn fit(want: usize, one: usize, two: Option<(usize, usize)>) -> usize {
        let mut n = want.min(one);
        if let Some((a, b)) = two {
            let split = (2 * a.min(b)).min(n);
            if split >= 2 {
                n = split - split % 2;
            }
        }
        n.max(1)
    }

    pub(super) fn parse(name: &str) -> Result<Fig, InputError> {
        Ok(match name {
            "fig4a" => Fig::A4,
            "fig4b" => Fig::B4,
            "fig4c" => Fig::C4,
            "fig5a" => Fig::A5,
            "fig5b" => Fig::B5,
            "fig5c" => Fig::C5,
            _ => {
                return Err(InputError(format!(
                    "--experiment {name:?}: one of fig4a, fig4b, fig4c, fig5a, fig5b, fig5c"
                )));
            }
        })
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Fig {
        A4,
        B4,
        C4,
        A5,
        B5,
        C5,
    }

    pub(super) fn plan(fig: Fig, topo: &Topology, quick: bool) -> Plan {
        let l = Layout::new(topo);
        let pick = |full: &[u64], short: &[u64]| if quick { short.to_vec() } else { full.to_vec() };
        match fig {
            Fig::A4 => locality(&l, pick(&[1, 4, 8, 12, 16, 32, 64, 128, 256], &[1, 16, 64])),
            Fig::B4 => llc(
                &l,
                pick(&[4, 8, 16, 32, 64, 128, 256, 512, 1024], &[4, 16, 64]),
            ),
            Fig::C4 => sharing(&l, pick(&[2, 4, 8], &[2, 4])),
            Fig::A5 | Fig::B5 | Fig::C5 => sockets(fig, &l, quick),
        }
    }

    /// Points over working sets (MiB, aggregate over `threads`), skipping
    /// those too big for the home node.
    fn sweep_sizes(
        l: &Layout,
        mibs: &[u64],
        threads: usize,
        shared: u64,
        cases: (&[u32], Option<&[u32]>),
        notes: &mut Vec<String>,
    ) -> Vec<Point> {
        let mut points = Vec::new();
        for &mib in mibs {
            let per = (mib * MIB / threads as u64) / ENTRY_BYTES * ENTRY_BYTES;
            if let Some(why) = l.too_big(per * threads as u64 + shared) {
                notes.push(format!("skipped {mib} MiB: {why}"));
                continue;
            }
            points.push(Point {
                x: format!("{mib} MiB"),
                working_set: per,
                shared,
                first: cases.0.to_vec(),
                second: cases.1.map(<[u32]>::to_vec),
            });
        }
        points
    }

    /// Fig. 4a (§2.2.1): one thread, its memory on the home node; Local
    /// runs it there, Remote on the farthest other node.
    fn locality(l: &Layout, mibs: Vec<u64>) -> Plan {
        let local = vec![l.ordered(&l.home.span)[0]];
        let remote = l.remote.map(|r| vec![core_order(l.topo, &r.span)[0]]);
        let mut notes = Vec::new();
        let mut placements = format!("Local = CPU {} (node {})", local[0], l.home.os_id);
        match (&remote, l.remote) {
            (Some(cpus), Some(r)) => {
                placements += &format!("; Remote = CPU {} (node {})", cpus[0], r.os_id)
            }
            _ => notes.push(format!(
                "fig4a needs two NUMA nodes; this machine {}: running the local case only",
                l.node_count()
            )),
        }
        let points = sweep_sizes(l, &mibs, 1, 0, (&local, remote.as_deref()), &mut notes);
        Plan {
            name: "fig4a",
            title: format!(
                "data locality (seed 000 §2.2.1, Fig. 4a): 1 thread, memory bound to node {}, no sharing",
                l.home.os_id
            ),
            labels: ["Local", "Remote"],
            x_label: "working set",
            placements,
            memory: l.node_memory(),
            weight: 1.0,
            notes,
            points,
        }
    }

    /// Fig. 4b (§2.2.1): 4 threads, no sharing, each thread's memory on
    /// its own node; all in one LLC domain, or 2 + 2 in two (in different
    /// packages if there are).
    fn llc(l: &Layout, mibs: Vec<u64>) -> Plan {
        let t = l.topo;
        let a_id = t.cpu_by_os_id(l.ordered(&l.home.span)[0]).unwrap().llc;
        let b_id = (t
            .llcs()
            .iter()
            .filter(|c| c.id != a_id && !c.span.is_empty()))
        .max_by_key(|c| {
            let other_pkg = c.package != t.llcs()[a_id].package;
            (other_pkg, c.span.len(), std::cmp::Reverse(c.id))
        });
        let a = l.ordered(&t.llcs()[a_id].span);
        let b = b_id.map(|c| l.ordered(&c.span));
        let n = fit(4, a.len(), b.as_ref().map(|b| (a.len(), b.len())));
        let mut notes = Vec::new();
        if b.is_none() {
            notes.push(format!(
                "fig4b needs two LLC domains; this machine has {}: running the sharing-LLC case only",
                t.llcs().len()
            ));
        }
        if n < 4 {
            notes.push(format!(
                "fig4b uses 4 threads; here {n} fit (one LLC domain has {} CPUs this process may use{}): running {n}",
                a.len(),
                b.as_ref().map_or(String::new(), |b| format!(", the other {}", b.len()))
            ));
        }
        let first = a[..n].to_vec();
        let second = b.filter(|_| n >= 2).map(|b| split(n, &a, &b));
        let placements = pair("sharing LLC", &first, "separate LLC", second.as_deref());
        let points = sweep_sizes(l, &mibs, n, 0, (&first, second.as_deref()), &mut notes);
        Plan {
            name: "fig4b",
            title: format!(
                "LLC contention (seed 000 §2.2.1, Fig. 4b): {n} threads, memory local to each, no sharing"
            ),
            labels: ["sharing LLC", "separate LLC"],
            x_label: "aggregate WS",
            placements,
            memory: MemoryPolicy::Local,
            weight: 1.0,
            notes,
            points,
        }
    }

    /// Fig. 4c (§2.2.1): no private data, one shared cache line; threads
    /// all in the home package, or half there and half in another.
    fn sharing(l: &Layout, counts: Vec<u64>) -> Plan {
        let p = l.package(l.home_pkg);
        let q = l.other_pkg.map(|o| l.package(o));
        let mut notes = Vec::new();
        if q.is_none() {
            notes.push(format!(
                "fig4c needs two sockets (packages); this machine has {}: running the within-socket case only",
                l.topo.packages().len()
            ));
        }
        let mut points = Vec::new();
        for n in counts.into_iter().map(|n| n as usize) {
            if n > p.len() {
                notes.push(format!(
                    "skipped {n} threads: the home package has {} CPUs this process may use",
                    p.len()
                ));
                continue;
            }
            let second = q
                .as_ref()
                .filter(|q| n / 2 <= q.len())
                .map(|q| split(n, &p, q));
            if q.is_some() && second.is_none() {
                notes.push(format!(
                    "{n} threads: too few CPUs in the other package to run across sockets"
                ));
            }
            points.push(Point {
                x: format!("{n} threads"),
                working_set: 0,
                shared: 64,
                first: p[..n].to_vec(),
                second,
            });
        }
        Plan {
            name: "fig4c",
            title: format!(
                "data sharing (seed 000 §2.2.1, Fig. 4c): no private data, one shared cache line on node {}",
                l.home.os_id
            ),
            labels: ["within socket", "across sockets"],
            x_label: "threads",
            placements: match &q {
                Some(q) => format!(
                    "within socket = the first of CPUs {}; across sockets = half of them, half of {}",
                    list(&p),
                    list(q)
                ),
                None => format!("within socket = the first of CPUs {}", list(&p)),
            },
            memory: l.node_memory(),
            // A contended atomic add costs about as much as a miss to
            // DRAM, and every thread's add waits for the others': 1/8.
            weight: 1.0 / 8.0,
            notes,
            points,
        }
    }

    /// Fig. 5a-c (§2.2.2): 4 threads, memory on the home node; Intra-S in
    /// the home package, Inter-S 2 + 2 over two packages.
    fn sockets(fig: Fig, l: &Layout, quick: bool) -> Plan {
        let p = l.package(l.home_pkg);
        let q = l.other_pkg.map(|o| l.package(o));
        let n = fit(4, p.len(), q.as_ref().map(|q| (p.len(), q.len())));
        let name = match fig {
            Fig::A5 => "fig5a",
            Fig::B5 => "fig5b",
            _ => "fig5c",
        };
        let mut notes = Vec::new();
        if q.is_none() {
            notes.push(format!(
                "{name} needs two sockets (packages); this machine has {}: running the Intra-S case only",
                l.topo.packages().len()
            ));
        }
        if n < 4 {
            notes.push(format!(
                "{name} uses 4 threads; here {n} fit in each placement: running {n}"
            ));
        }
        let first = p[..n].to_vec();
        let second = q.filter(|_| n >= 2).map(|q| split(n, &p, &q));
        let cases = (&first[..], second.as_deref());
        let (what, x_label, points) = match fig {
            Fig::A5 => {
                let mibs: &[u64] = if quick {
                    &[4, 16, 64]
                } else {
                    &[4, 8, 16, 32, 64, 128, 256]
                };
                (
                    "locality and LLC contention, no sharing",
                    "aggregate WS",
                    sweep_sizes(l, mibs, n, 0, cases, &mut notes),
                )
            }
            Fig::B5 => {
                let kibs: &[u64] = if quick {
                    &[0, 32, 256]
                } else {
                    &[0, 4, 8, 16, 32, 64, 128, 256, 1024]
                };
                let per = 16 * MIB / n as u64 / ENTRY_BYTES * ENTRY_BYTES;
                let points = (kibs.iter())
                    .map(|&k| Point {
                        x: format!("{k} KiB"),
                        working_set: per,
                        shared: k * KIB,
                        first: first.clone(),
                        second: second.clone(),
                    })
                    .collect();
                (
                    "LLC contention against sharing, 16 MiB aggregate",
                    "shared area",
                    points,
                )
            }
            _ => {
                let mibs: &[u64] = if quick {
                    &[4, 16, 64]
                } else {
                    &[4, 8, 16, 24, 32, 64, 128, 256]
                };
                (
                    "all three factors, 128 KiB shared",
                    "aggregate WS",
                    sweep_sizes(l, mibs, n, 128 * KIB, cases, &mut notes),
                )
            }
        };
        Plan {
            name,
            title: format!(
                "{what} (seed 000 §2.2.2, Fig. {}): {n} threads, memory bound to node {}",
                &name[3..],
                l.home.os_id
            ),
            labels: ["Intra-S", "Inter-S"],
            x_label,
            placements: pair("Intra-S", &first, "Inter-S", second.as_deref()),
            memory: l.node_memory(),
            weight: 1.0,
            notes,
            points,
        }
    }

    /// "A = CPUs 0,1; B = CPUs 0,2" (B left out when absent).
    fn pair(a: &str, first: &[u32], b: &str, second: Option<&[u32]>) -> String {
        let mut s = format!("{a} = CPUs {}", list(first));
        if let Some(c) = second {
            s += &format!("; {b} = CPUs {}", list(c));
        }
        s
    }

    fn list(cpus: &[u32]) -> String {
        let v: Vec<String> = cpus.iter().map(u32::to_string).collect();
        v.join(",")
    }

    /// Loops so that a thread does about `budget` hops and adds.
    pub(super) fn loops_for(p: &Point, budget: f64) -> u64 {
        let per_loop = (p.working_set / ENTRY_BYTES + p.shared / WORD_BYTES).max(1);
        ((budget / per_loop as f64).round() as u64).max(1)
    }

    /// One placement's result at one point.
    #[derive(Serialize)]
    struct Measured {
        cpus: Vec<u32>,
        mean_seconds: f64,
        /// Pages of the lists and the shared area per node.
        pages: BTreeMap<u32, u64>,
        report: microbench::Report,
    }

    #[derive(Serialize)]
    struct Row<'p> {
        x: &'p str,
        threads: usize,
        working_set_bytes: u64,
        shared_bytes: u64,
        loops: u64,
        first: Measured,
        second: Option<Measured>,
        /// Second's mean run time over the first's.
        ratio: Option<f64>,
    }

    #[derive(Serialize)]
    struct Json<'p> {
        experiment: &'static str,
        title: &'p str,
        labels: [&'static str; 2],
        x_label: &'static str,
        placements: &'p str,
        memory: String,
        notes: &'p [String],
        points: Vec<Row<'p>>,
    }

    pub fn run(name: &str, args: &BenchArgs, topo: &Topology) -> Result<()> {
        let fig = parse(name)?;
        let scale = match args.scale {
            Some(s) if !(s.is_finite() && s > 0.0) => {
                return Err(InputError(format!("--scale {s}: give a positive factor")).into());
            }
            Some(s) => s,
            None if args.quick => QUICK_SCALE,
            None => 1.0,
        };
        let plan = plan(fig, topo, args.quick);
        let budget = BUDGET * scale * plan.weight;
        if !args.json {
            print_header(&plan, budget);
        }
        let mut rows = Vec::new();
        for p in &plan.points {
            let row = measure_point(&plan, p, budget, args.seed)?;
            if !args.json {
                println!("{}", render_row(&row));
            }
            rows.push(row);
        }
        if args.json {
            let out = Json {
                experiment: plan.name,
                title: &plan.title,
                labels: plan.labels,
                x_label: plan.x_label,
                placements: &plan.placements,
                memory: describe_memory(&plan.memory),
                notes: &plan.notes,
                points: rows,
            };
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Ok(())
    }

    fn measure_point<'p>(plan: &Plan, p: &'p Point, budget: f64, seed: u64) -> Result<Row<'p>> {
        let loops = loops_for(p, budget);
        let one = |cpus: &Vec<u32>| -> Result<Measured> {
            let report = microbench::run(&Config {
                cpus: cpus.clone(),
                working_set: p.working_set,
                shared: p.shared,
                memory: plan.memory.clone(),
                length: Length::Loops(loops),
                seed,
            })?;
            let mut pages = report.shared_pages.clone();
            for t in &report.threads {
                for (&n, &c) in &t.private_pages {
                    *pages.entry(n).or_insert(0) += c;
                }
            }
            Ok(Measured {
                cpus: cpus.clone(),
                mean_seconds: report.mean_seconds,
                pages,
                report,
            })
        };
        let first = one(&p.first)?;
        let second = p.second.as_ref().map(one).transpose()?;
        let ratio = second.as_ref().map(|s| s.mean_seconds / first.mean_seconds);
        Ok(Row {
            x: &p.x,
            threads: p.first.len(),
            working_set_bytes: p.working_set,
            shared_bytes: p.shared,
            loops,
            first,
            second,
            ratio,
        })
    }

    fn print_header(plan: &Plan, budget: f64) {
        let [a, b] = plan.labels;
        println!("{}: {}", plan.name, plan.title);
        println!("placements: {}", plan.placements);
        println!(
            "work per thread and point: about {budget:.0} list hops and shared adds (seed 000: \
             1000 loops); time: the mean of the threads' run times; ratio: {b} / {a}"
        );
        for n in &plan.notes {
            println!("{n}");
        }
        println!(
            "{:<13} {:>8} {:>14} {:>14} {:>7}  pages by node ({a} / {b})",
            plan.x_label,
            "loops",
            format!("{a} s"),
            format!("{b} s"),
            "ratio",
        );
    }

    fn render_row(r: &Row) -> String {
        let (second, ratio) = match (&r.second, r.ratio) {
            (Some(s), Some(q)) => (format!("{:.4}", s.mean_seconds), format!("{q:.3}")),
            _ => ("-".into(), "-".into()),
        };
        format!(
            "{:<13} {:>8} {:>14.4} {:>14} {:>7}  {} / {}",
            r.x,
            r.loops,
            r.first.mean_seconds,
            second,
            ratio,
            share(&r.first.pages),
            r.second.as_ref().map_or("-".into(), |s| share(&s.pages)),
        )
    }

    /// Pages per node as `N0` (all there) or `N0 52% N1 48%`.
    fn share(p: &BTreeMap<u32, u64>) -> String {
        let total: u64 = p.values().sum();
        match p.len() {
            0 => "-".into(),
            1 => format!("N{}", p.keys().next().unwrap()),
            _ => (p.iter())
                .map(|(n, c)| format!("N{n} {:.0}%", 100.0 * *c as f64 / total as f64))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::experiment::{Fig, fit, loops_for, parse, plan};
    use super::*;

    fn synthetic(desc: &str) -> Topology {
        discover(&TopologySource::Synthetic(desc.into())).unwrap()
    }

    fn machine(desc: &str) -> Machine {
        let topo = synthetic(desc);
        Machine {
            all: topo.span().clone(),
            topo,
        }
    }

    fn args(extra: &[&str]) -> BenchArgs {
        use clap::Parser;
        let mut argv = vec!["numaplace", "bench"];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Bench(a) => a,
            other => panic!("{other:?}"),
        }
    }

    fn err(extra: &[&str], m: &Machine) -> String {
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
        let narrow = Machine {
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
}
