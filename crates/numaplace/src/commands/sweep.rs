//! `compare --random N`: every policy over generated mixes and the shipped
//! scenarios, the robustness report; `--shard K/M` runs one shard of it and
//! `numaplace merge` joins the shards into the same report
//! (`numaplace_sim::shard`).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use numaplace_policy::PolicyKind;
use numaplace_sim::scenario;
use numaplace_sim::shard::{self, Shard};
use numaplace_sim::sweep::{Case, Sweep, SweepOptions, run_cases, sweep};

use numaplace::cli::{CompareArgs, MergeArgs};
use numaplace::duration::parse_duration;
use numaplace::error::InputError;

/// `compare --random N`: every policy over generated mixes (and the
/// shipped scenarios with --shipped), the robustness report; with
/// `--shard K/M`, shard K's cases only, their outcomes as JSON.
pub(crate) fn sweep_cmd(args: &CompareArgs, n: u64) -> Result<()> {
    let shard = args
        .shard
        .as_deref()
        .map(shard::parse_spec)
        .transpose()
        .map_err(InputError)?;
    let interval = args
        .sim
        .interval
        .as_deref()
        .map(|d| parse_duration(d, "--interval").map_err(InputError))
        .transpose()?;
    let mut names = args.policy_names();
    if !names.iter().any(|n| n == "default") {
        names.insert(0, "default".into());
    }
    let mut policies = Vec::new();
    for name in &names {
        let kind =
            PolicyKind::from_name(name).map_err(|e| InputError(format!("--policies: {e}")))?;
        if matches!(kind, PolicyKind::Static(_)) {
            return Err(InputError(
                "--policies: static holds one scenario's oracle placement, which generated mixes \
                 do not have: leave it out of --random"
                    .into(),
            )
            .into());
        }
        policies.push(kind);
    }
    let Some(end) = args.seed.checked_add(n) else {
        return Err(InputError(format!(
            "--seed {} with --random {n}: the mix seeds would pass 2^64 - 1",
            args.seed
        ))
        .into());
    };
    let Some(seed_end) = args.first_seed.checked_add(args.seeds) else {
        return Err(InputError("--first-seed with --seeds passes 2^64 - 1".into()).into());
    };
    let workers = match args.jobs {
        Some(0) => return Err(InputError("--jobs: at least 1".into()).into()),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut cases = Vec::new();
    for seed in args.seed..end {
        cases.push(Case::mix(seed).map_err(|e| anyhow::anyhow!("generated mix {seed}: {e}"))?);
    }
    if args.shipped {
        for name in scenario::BUILTIN {
            cases.push(Case::shipped(name).map_err(|e| anyhow::anyhow!("{name}: {e}"))?);
        }
    }
    if cases.is_empty() {
        return Err(InputError("--random 0 without --shipped: nothing to run".into()).into());
    }
    let opts = SweepOptions {
        policies,
        seeds: (args.first_seed..seed_end).collect(),
        interval,
        workers,
        worst: 3,
        numa_balancing: args.sim.numa_balancing,
        memory_mover: args.sim.memory_mover.unwrap_or_default(),
        manage_kernel_balancing: !args.sim.keep_kernel_balancing,
        mismatch: args.sim.mismatch,
        oracle_budget: args.oracle.then_some(args.oracle_budget),
    };
    if let Some((k, m)) = shard {
        return shard_cmd(&cases, &opts, (k, m), &sweep_key(args, n, &opts));
    }
    if !args.no_report {
        prepare_dir(&args.worst_dir)?;
    }
    let start = Instant::now();
    let bar = Progress::new(start);
    let report = sweep(&cases, &opts, &|done, total| bar.show(done, total)).map_err(InputError)?;
    bar.finish();
    let took = start.elapsed();
    show(
        &report,
        &cases,
        args.sim.json,
        !args.no_report,
        &args.worst_dir,
    )?;
    // The sweep's speed, the number its benchmark reads.
    let runs = cases.len() * opts.policies.len() * opts.seeds.len();
    numaplace::output::say!(
        "({:.1} s of wall time on {workers} workers: {runs} runs, {:.1} cases a minute)",
        took.as_secs_f64(),
        60.0 * cases.len() as f64 / took.as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// What makes shards one sweep: every option that changes a case's
/// outcome or the report, and the version that ran it.
fn sweep_key(args: &CompareArgs, n: u64, opts: &SweepOptions) -> String {
    let names: Vec<&str> = opts.policies.iter().map(|p| p.name()).collect();
    format!(
        "compare --random {n} --seed {}{} --seeds {:?} --policies {} --interval {:?} \
         --numa-balancing {:?} --memory-mover {:?} --manage-kernel-balancing {} --mismatch {:?} \
         --oracle-budget {:?}; numaplace {}",
        args.seed,
        if args.shipped { " --shipped" } else { "" },
        opts.seeds,
        names.join(","),
        opts.interval,
        opts.numa_balancing,
        opts.memory_mover,
        opts.manage_kernel_balancing,
        opts.mismatch,
        opts.oracle_budget,
        env!("CARGO_PKG_VERSION")
    )
}

/// `--shard K/M`: the cases of shard K run, their outcomes printed as a
/// shard (JSON) for `numaplace merge`.
fn shard_cmd(cases: &[Case], opts: &SweepOptions, (k, m): (usize, usize), key: &str) -> Result<()> {
    let (index, held): (Vec<usize>, Vec<Case>) = (cases.iter().cloned().enumerate())
        .filter(|(i, _)| shard::holds(*i, k, m))
        .unzip();
    let start = Instant::now();
    let bar = Progress::new(start);
    let outcomes = if held.is_empty() {
        Vec::new()
    } else {
        run_cases(&held, opts, &|done, total| bar.show(done, total)).map_err(InputError)?
    };
    bar.finish();
    let out = Shard {
        numaplace_shard: shard::FORMAT,
        index: k,
        count: m,
        sweep: key.to_string(),
        cases_total: cases.len(),
        policies: opts.policies.iter().map(|p| p.name().to_string()).collect(),
        seeds: opts.seeds.clone(),
        mismatch_percent: opts.mismatch,
        worst: opts.worst,
        cases: index.into_iter().zip(outcomes).collect(),
    };
    println!("{}", numaplace::output::json::pretty(&out)?);
    numaplace::output::say!(
        "shard {k}/{m}: {} of the {} cases in {:.1} s; `numaplace merge` joins the {m} shard files",
        out.cases.len(),
        cases.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `numaplace merge SHARD...`: the shards of one sweep joined into the
/// report `compare --random` prints.
pub(crate) fn merge_cmd(args: &MergeArgs) -> Result<()> {
    let mut shards = Vec::with_capacity(args.shards.len());
    for path in &args.shards {
        shards.push(read_shard(path)?);
    }
    let report = shard::merge(shards).map_err(InputError)?;
    let mut cases = Vec::new();
    if !args.no_report {
        prepare_dir(&args.worst_dir)?;
        cases = cases_of(&report)?;
    }
    show(&report, &cases, args.json, !args.no_report, &args.worst_dir)
}

/// One shard file, read whole (a regular file of at most
/// `SHARD_MAX_BYTES`) and parsed.
fn read_shard(path: &Path) -> Result<Shard> {
    let bounded =
        numaplace_io::bounded::read_to_string(path, numaplace_io::bounded::SHARD_MAX_BYTES)
            .map_err(|e| InputError(format!("{}: cannot read the shard: {e}", path.display())))?;
    serde_json::from_str(&bounded).map_err(|e| {
        InputError(format!(
            "{}: not a shard `compare --random N --shard K/M` wrote: {e}",
            path.display()
        ))
        .into()
    })
}

/// The cases of a merged report again, for the worst mixes' files: a
/// generated mix from its seed, a shipped scenario by name.
fn cases_of(report: &Sweep) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for c in &report.cases {
        let case = match c.name.strip_prefix("mix:").map(str::parse::<u64>) {
            Some(Ok(seed)) => Case::mix(seed),
            _ => Case::shipped(&c.name),
        };
        cases.push(case.map_err(|e| anyhow::anyhow!("{}: {e}", c.name))?);
    }
    Ok(cases)
}

/// Prints `report` (JSON or the table) and, with `files`, writes the worst
/// mixes to `dir`.
fn show(report: &Sweep, cases: &[Case], json: bool, files: bool, dir: &Path) -> Result<()> {
    let written = if files {
        write_worst(dir, cases, report)?
    } else {
        Vec::new()
    };
    if json {
        println!("{}", numaplace::output::json::pretty(report)?);
    } else {
        print!("{}", report.table());
    }
    if !written.is_empty() {
        numaplace::output::say!(
            "worst mixes: {} files in {} (run one with --scenario FILE)",
            written.len(),
            dir.display()
        );
    }
    Ok(())
}

/// The directory for the worst mixes: made if missing, refused if it is
/// not a directory (or a link to one).
fn prepare_dir(dir: &Path) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(InputError(format!(
            "--worst-dir {}: exists and is not a directory: name a directory (it is made if missing)",
            dir.display()
        ))
        .into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)
            .with_context(|| format!("--worst-dir: cannot make {}", dir.display())),
        Err(e) => Err(anyhow::anyhow!("--worst-dir {}: {e}", dir.display())),
    }
}

/// Each policy's worst generated mixes that were slower than default, as
/// scenario files headed by what was measured. Returns the files.
fn write_worst(
    dir: &Path,
    cases: &[numaplace_sim::sweep::Case],
    report: &numaplace_sim::sweep::Sweep,
) -> Result<Vec<std::path::PathBuf>> {
    let mut written = Vec::new();
    for r in &report.summary {
        for (rank, (name, change)) in r.worst_cases.iter().enumerate() {
            if *change <= 1.0 {
                continue;
            }
            let Some(case) = cases.iter().find(|c| &c.name == name) else {
                continue;
            };
            let Some(text) = &case.text else {
                continue; // a shipped scenario: named in the table
            };
            let file = dir.join(format!(
                "{}-{}-{}.toml",
                r.policy,
                rank + 1,
                name.replace(':', "-")
            ));
            let head = format!(
                "# {} was {change:+.1} % against default here (seeds {:?}, numaplace {}).\n",
                r.policy,
                report.seeds,
                env!("CARGO_PKG_VERSION")
            );
            numaplace::files::write_atomically(&file, &(head + text), 0o644)?;
            written.push(file);
        }
    }
    Ok(written)
}

/// Progress on stderr: a bar on a terminal; off one (a batch job's log), a
/// line at each tenth of the runs, each with the time left at the pace so
/// far.
struct Progress {
    start: Instant,
    tty: bool,
    last: std::sync::Mutex<(Instant, usize)>,
}

impl Progress {
    fn new(start: Instant) -> Progress {
        use std::io::IsTerminal;
        Progress {
            start,
            tty: std::io::stderr().is_terminal(),
            last: std::sync::Mutex::new((start, 0)),
        }
    }

    fn show(&self, done: usize, total: usize) {
        let now = Instant::now();
        let tenth = 10 * done / total.max(1);
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let due = if self.tty {
                done == total || now.duration_since(last.0).as_millis() >= 200
            } else {
                tenth > last.1
            };
            if !due {
                return;
            }
            *last = (now, tenth);
        }
        let secs = now.duration_since(self.start).as_secs_f64();
        let eta = if done > 0 {
            secs * (total - done) as f64 / done as f64
        } else {
            0.0
        };
        if !self.tty {
            numaplace::output::say!(
                "{done}/{total} runs ({} %), {secs:.0} s, about {eta:.0} s left",
                100 * done / total.max(1)
            );
            return;
        }
        let width = 40;
        let filled = width * done / total.max(1);
        eprint!(
            "\r[{}{}] {done}/{total} runs, {secs:.0} s, about {eta:.0} s left ",
            "=".repeat(filled),
            " ".repeat(width - filled)
        );
        let _ = std::io::stderr().flush();
    }

    fn finish(&self) {
        if self.tty {
            eprint!("\r{}\r", " ".repeat(78));
        }
    }
}
