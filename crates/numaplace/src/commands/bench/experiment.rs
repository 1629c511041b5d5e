//! \[Rao13\]'s experiments (§2.2.1, §2.2.2; Fig. 4a-c, 5a-c) on this
//! machine's topology. The paper's machine had two sockets, each one
//! node with one 12 MiB LLC and 4 cores; here "node 0" is the first
//! node with CPUs and memory (the home node), "the other socket" the
//! package of the node farthest from it, and "an LLC" a last-level
//! cache domain as `numaplace topology` shows it.

use super::*;

/// List hops plus shared adds per thread per point at scale 1: about
/// 1-4 s for a list far larger than the LLC. \[Rao13\] ran 1000 loops,
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
            "data locality ([Rao13] §2.2.1, Fig. 4a): 1 thread, memory bound to node {}, no sharing",
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
            "LLC contention ([Rao13] §2.2.1, Fig. 4b): {n} threads, memory local to each, no sharing"
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
            "data sharing ([Rao13] §2.2.1, Fig. 4c): no private data, one shared cache line on node {}",
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
            "{what} ([Rao13] §2.2.2, Fig. {}): {n} threads, memory bound to node {}",
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

pub(super) fn run(name: &str, args: &BenchArgs, topo: &Topology) -> Result<()> {
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
        println!("{}", numaplace::output::json::pretty(&out)?);
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
        "work per thread and point: about {budget:.0} list hops and shared adds ([Rao13]: \
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
