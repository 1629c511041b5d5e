//! `numaplace simulate`, `numaplace compare` and `numaplace scenarios`: the
//! policies on a simulated machine.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use numaplace_policy::PolicyKind;
use numaplace_sim::compare::{CompareOptions, compare};
use numaplace_sim::run::{Driver, RunOptions, run};
use numaplace_sim::{Machine, Workload, oracle_search, report, scenario};

use numaplace::cli::{CompareArgs, SimArgs, SimulateArgs};
use numaplace::duration::parse_duration;
use numaplace::error::InputError;
use numaplace::machine;

/// The scenario and the machine it runs on.
fn setup(args: &SimArgs) -> Result<(Workload, Machine, Option<std::time::Duration>)> {
    if let Some(p) = &args.report {
        numaplace::files::check_output(p, "--report")?;
    }
    let workload = scenario::resolve(&args.scenario)?;
    let machine = if args.machine.as_deref() == Some("host") {
        let t = machine::load(&numaplace::cli::MachineArgs::default())?;
        Machine::generic("host", t)
    } else if let Some(name) = args
        .machine
        .as_deref()
        .filter(|n| n.ends_with(".json") || n.contains('/'))
    {
        Machine::load(Path::new(name)).map_err(|e| InputError(format!("--machine: {e}")))?
    } else if let Some(name) = &args.machine {
        Machine::preset(name).map_err(|e| {
            InputError(format!(
                "--machine: {e}, host for this machine, or a machine file (.json) from numaplace calibrate"
            ))
        })?
    } else if args.topology.sysfs_root.is_some()
        || args.topology.xml.is_some()
        || args.topology.synthetic.is_some()
    {
        let t = machine::load(&args.topology)?;
        let name = t.source().to_string();
        Machine::generic(&name, t)
    } else {
        Machine::preset(&workload.machine)
            .map_err(|e| InputError(format!("scenario {}: {e}", workload.name)))?
    };
    workload.check_machine(&machine).map_err(|e| {
        InputError(format!(
            "scenario {} does not fit machine {}: {e}",
            workload.name, machine.name
        ))
    })?;
    let interval = args
        .interval
        .as_deref()
        .map(|d| parse_duration(d, "--interval").map_err(InputError))
        .transpose()?;
    Ok((workload, machine, interval))
}

/// The policy of this name. `static` without a placement of its own
/// holds the oracle's (`oracle_search::best_static_in`), searched in the world
/// `world`'s seed and mismatch draw.
fn policy(
    name: &str,
    machine: &Machine,
    workload: &Workload,
    budget: usize,
    world: &RunOptions,
) -> Result<PolicyKind> {
    let kind = PolicyKind::from_name(name).map_err(|e| InputError(e.to_string()))?;
    Ok(match kind {
        PolicyKind::Static(p) if p.pins.is_empty() && p.memory.is_empty() => {
            let best = oracle_search::best_static_in(machine, workload, budget, 1, world).map_err(
                |e| {
                    InputError(format!(
                        "static: the oracle found no placement to hold: {e}"
                    ))
                },
            )?;
            PolicyKind::Static(oracle_search::static_params(machine, workload, &best))
        }
        k => k,
    })
}

pub(crate) fn simulate(args: &SimulateArgs) -> Result<()> {
    let (workload, machine, interval) = setup(&args.sim)?;
    let world = RunOptions {
        seed: args.seed,
        mismatch: args.sim.mismatch,
        ..RunOptions::default()
    };
    let kind = policy(
        &args.policy,
        &machine,
        &workload,
        args.oracle_budget,
        &world,
    )?;
    let mut journal = match &args.journal {
        Some(p) => {
            numaplace::files::check_output(p, "--journal")?;
            let f = numaplace::files::open_output(p, "--journal", false, 0o644)?;
            Some(std::io::BufWriter::new(f))
        }
        None => None,
    };
    let mut journal_error = None;
    let opts = RunOptions {
        seed: args.seed,
        interval,
        trace: args.sim.report.is_some(),
        numa_balancing: args.sim.numa_balancing,
        memory_mover: args.sim.memory_mover.unwrap_or_default(),
        manage_kernel_balancing: !args.sim.keep_kernel_balancing,
        mismatch: args.sim.mismatch,
        ..RunOptions::default()
    };
    let r = run(
        &machine,
        &workload,
        Driver::Policy(&kind),
        &opts,
        &mut |e| {
            let Some(j) = journal.as_mut().filter(|_| journal_error.is_none()) else {
                return;
            };
            if let Err(err) = numaplace::output::json::to_writer(&mut *j, e)
                .map_err(std::io::Error::from)
                .and_then(|_| j.write_all(b"\n"))
            {
                journal_error = Some(err);
            }
        },
    );
    if let Some(e) = journal_error {
        return Err(e).context("writing the journal");
    }
    if let Some(mut j) = journal {
        j.flush().context("writing the journal")?;
    }
    if let Some(path) = &args.sim.report {
        numaplace::files::write_atomically(
            path,
            &report::run_html(&r, &workload.description),
            0o644,
        )?;
        numaplace::output::say!("report: {}", path.display());
    }
    if args.sim.json {
        let mut r = r;
        r.trace = None;
        println!("{}", numaplace::output::json::pretty(&r)?);
        return Ok(());
    }
    println!(
        "{} on {}, policy {}, seed {}: {} after {:.1} s simulated",
        workload.name,
        machine.name,
        r.policy,
        r.seed,
        if r.finished {
            "finished"
        } else {
            "stopped at the time limit"
        },
        r.makespan_s
    );
    if let Some(p) = numaplace_sim::run::mismatch(&workload, &opts) {
        println!(
            "world: each machine parameter drawn within ±{p} % of the machine the policy sees \
             (seed {})",
            r.seed
        );
    }
    println!(
        "{:<20} {:>4} {:>10} {:>10}",
        "application", "run", "start s", "runtime s"
    );
    for a in &r.runs {
        println!(
            "{:<20} {:>4} {:>10.2} {:>10}",
            numaplace_model::task::printable(&a.app),
            a.run,
            a.start_s,
            a.runtime_s().map_or("-".to_string(), |x| format!("{x:.2}"))
        );
    }
    println!(
        "mean runtime {} s; thread migrations {} ({} across nodes), pages migrated {}; uncore penalty {:.0} cycles, LLC MPKI {:.1}{}",
        r.mean_runtime_s()
            .map_or("-".to_string(), |x| format!("{x:.2}")),
        r.thread_migrations,
        r.node_migrations,
        r.pages_migrated,
        r.uncore_penalty_cycles,
        r.llc_mpki,
        r.energy_j
            .map(|e| format!(
                "; energy {:.1} kJ, mean power {:.1} W",
                e / 1000.0,
                r.mean_power_w.unwrap_or(0.0)
            ))
            .unwrap_or_default()
    );
    Ok(())
}

/// `compare` of one scenario (`compare --random` is `sweep.rs`'s).
pub(crate) fn compare_cmd(args: &CompareArgs) -> Result<()> {
    let (workload, machine, interval) = setup(&args.sim)?;
    let names = args.policy_names();
    let mut policies = Vec::new();
    for n in &names {
        if n.is_empty() {
            return Err(InputError("--policies: an empty name in the list".into()).into());
        }
        let world = RunOptions {
            seed: args.first_seed,
            mismatch: args.sim.mismatch,
            ..RunOptions::default()
        };
        policies.push(policy(n, &machine, &workload, args.oracle_budget, &world)?);
    }
    if args.seeds == 0 {
        return Err(InputError("--seeds: at least 1".into()).into());
    }
    let Some(end) = args.first_seed.checked_add(args.seeds) else {
        return Err(InputError(format!(
            "--first-seed {} with --seeds {}: the seeds would pass 2^64 - 1",
            args.first_seed, args.seeds
        ))
        .into());
    };
    let workers = match args.jobs {
        Some(0) => return Err(InputError("--jobs: at least 1".into()).into()),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let opts = CompareOptions {
        policies,
        seeds: (args.first_seed..end).collect(),
        oracle: !args.no_oracle,
        oracle_budget: args.oracle_budget,
        interval,
        workers,
        numa_balancing: args.sim.numa_balancing,
        memory_mover: args.sim.memory_mover.unwrap_or_default(),
        manage_kernel_balancing: !args.sim.keep_kernel_balancing,
        mismatch: args.sim.mismatch,
    };
    let start = Instant::now();
    let c = compare(&machine, &workload, &opts);
    let took = start.elapsed();
    let report_path = match (&args.sim.report, args.no_report) {
        (_, true) => None,
        (Some(p), false) => Some(p.clone()),
        (None, false) => Some(std::path::PathBuf::from("numaplace-report.html")),
    };
    if let Some(path) = &report_path {
        numaplace::files::write_atomically(path, &report::html(&c), 0o644)?;
    }
    if args.sim.json {
        let mut c = c;
        for r in &mut c.examples {
            r.trace = None;
        }
        println!("{}", numaplace::output::json::pretty(&c)?);
    } else {
        print!("{}", report::table(&c));
        if args.per_app {
            print!("{}", report::per_app_table(&c));
        }
        numaplace::output::say!("({:.1} s of wall time)", took.as_secs_f64());
    }
    if let Some(path) = &report_path {
        numaplace::output::say!("report: {}", path.display());
    }
    Ok(())
}

pub(crate) fn scenarios() -> Result<()> {
    println!("{:<22} {:<24} description", "scenario", "machine");
    for name in scenario::BUILTIN {
        let w = scenario::builtin(name)
            .expect("every listed scenario is built in")
            .with_context(|| format!("built-in scenario {name}"))?;
        let first = w.description.lines().next().unwrap_or("");
        let mark = if *name == scenario::DEFAULT {
            " (default)"
        } else {
            ""
        };
        println!("{:<22} {:<24} {first}", format!("{name}{mark}"), w.machine);
    }
    println!("\nA scenario file (TOML, see docs/scenarios.md) runs with --scenario FILE.");
    Ok(())
}

/// `numaplace generate SEED`: a generated mix's scenario file.
pub(crate) fn generate(args: &numaplace::cli::GenerateArgs) -> Result<()> {
    let m = numaplace_sim::generate::mix(args.seed);
    match &args.out {
        Some(path) => {
            numaplace::files::check_output(path, "--out")?;
            numaplace::files::write_atomically(path, &m.text, 0o644)?;
            numaplace::output::say!("{}: {}", path.display(), m.name);
        }
        None => print!("{}", m.text),
    }
    Ok(())
}
