//! `numaplace exec`: start a command placed where numaplace advises, as
//! `numactl --cpunodebind --preferred` starts one: the nodes chosen
//! ([`choice`]), the CPU affinity and memory policy set on this thread
//! (`numaplace_linux::launch`), then `execvp`: the command takes
//! numaplace's place, its pid, signals and exit status.
//!
//! Exit status, as coreutils' wrappers (env, nice, timeout) give it: the
//! command's own once it runs; 127 when it is not found, 126 when it is
//! found but cannot be executed (as a shell); 125 when numaplace itself
//! refused (a bad argument) or failed before running it, so that a batch
//! script can tell numaplace's failure from its job's.

pub(crate) mod choice;

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;

use anyhow::{Context as _, Result};
use numaplace_linux::launch::{self, ExecError, MemoryPolicy};
use numaplace_linux::procfs::ProcReader;
use numaplace_linux::{SysRoot, TopologySource, discover};
use numaplace_model::Topology;
use numaplace_model::task::{name_from_bytes, printable};
use numaplace_policy::preplacement::Request;
use serde::Serialize;

use self::choice::{Allowed, Choice, MemoryMode, Source, choose, parse_nodes};
use numaplace::cli::ExecArgs;
use numaplace::error::InputError;
use numaplace::machine_room::{BadCpuCount, MachineRoom, parse_cpu_count};

/// numaplace's own failure, before the command ran.
pub(crate) const FAILED: u8 = 125;

/// The policies whose advice `exec` follows: for a process not yet
/// started, both are numad's pre-placement.
const POLICIES: [&str; 2] = ["auto", "numad-like"];

pub(crate) fn run(args: &ExecArgs) -> Result<()> {
    let program = args.command.first().ok_or_else(|| {
        InputError("no command given: numaplace exec [OPTIONS] -- COMMAND [ARGS]".into())
    })?;
    if program.is_empty() {
        return Err(InputError(
            "the command is an empty string: give a program name or path after --".into(),
        )
        .into());
    }
    let name = printable(&name_from_bytes(program.as_bytes()));
    let mode = match (args.membind, args.interleave) {
        (true, _) => MemoryMode::Bind,
        (_, true) => MemoryMode::Interleave,
        _ => MemoryMode::Preferred,
    };
    let req = request(args)?;
    let root = match &args.sysfs_root {
        Some(dir) => SysRoot::new(dir)?,
        None => SysRoot::host(),
    };
    let topology = discover(&TopologySource::Sysfs(root.clone()))?;
    let allowed = allowed(&root, &topology)?;
    let source = source(args, &root, &topology, &allowed, req)?;
    // A snapshot's kernel is not this one: taken as having it (5.15+).
    let preferred_many = |nodes: &numaplace_model::CpuSet| {
        !root.is_host() || launch::preferred_many_supported(nodes)
    };
    let choice = choose(&topology, &source, &allowed, mode, preferred_many)?;
    if args.dry_run {
        return print_choice(args, &choice);
    }
    if choice.placed {
        apply(&choice)?;
    }
    if !args.quiet {
        numaplace::output::say!("numaplace: exec {name}: {}", choice.reason);
    }
    let e = launch::exec(program, &args.command[1..]);
    Err(e.into())
}

/// `--cpus` and `--memory` as a pre-placement request.
fn request(args: &ExecArgs) -> Result<Request, InputError> {
    let cpus = parse_cpu_count(&args.cpus).map_err(|e| {
        InputError(format!(
            "--cpus {:?}: {}; give how many CPUs the command keeps busy, e.g. 1, 4 or 2.5",
            args.cpus,
            match e {
                BadCpuCount::NotANumber => "not a number",
                BadCpuCount::Zero => "a command uses at least one CPU",
                BadCpuCount::TooMany => "more than 65535",
            }
        ))
    })?;
    let memory = match &args.memory {
        None => 0,
        Some(text) => numaplace_sim::scenario::parse_size(text)
            .map_err(|e| InputError(format!("--memory {text}: {e}")))?,
    };
    Ok(Request { cpus, memory })
}

/// What this process may use: its own affinity and cpuset's nodes (from
/// its `status`); on another machine's snapshot, all of it.
fn allowed(root: &SysRoot, topology: &Topology) -> Result<Allowed> {
    if !root.is_host() {
        return Ok(Allowed {
            cpus: topology.span().clone(),
            mems: topology.nodes().iter().map(|n| n.os_id).collect(),
        });
    }
    // The main thread: the one that sets the policy and executes.
    let me = std::process::id() as i32;
    let status = ProcReader::new(root.clone())
        .status(me, me)
        .context("reading this process's CPUs and memory nodes")?;
    Ok(Allowed {
        cpus: status.cpus_allowed,
        mems: status.mems_allowed,
    })
}

/// Where the nodes come from: --nodes, one node, or the advice (read only
/// then: the CPUs' idle time takes 200 ms to sample).
fn source(
    args: &ExecArgs,
    root: &SysRoot,
    topology: &Topology,
    allowed: &Allowed,
    req: Request,
) -> Result<Source> {
    if let Some(list) = &args.nodes {
        let nodes = parse_nodes(list, topology)?;
        return Ok(Source::Given {
            list: list.clone(),
            nodes,
        });
    }
    if !POLICIES.contains(&args.policy.as_str()) {
        return Err(InputError(format!(
            "--policy {}: exec places a command that has not started, which only numad's \
             pre-placement can advise: give auto (the default) or numad-like, or --nodes",
            printable(&args.policy)
        ))
        .into());
    }
    if topology.nodes().len() == 1 {
        return Ok(Source::OneNode);
    }
    let room = MachineRoom::of(root, topology.clone())?;
    let advised = room.confined_to(&allowed.cpus, &allowed.mems).advise(&req);
    Ok(Source::Advised {
        policy: args.policy.clone(),
        req,
        advised,
    })
}

/// Sets the choice on this thread: the memory policy, then the affinity.
fn apply(choice: &Choice) -> Result<()> {
    if let Some(policy) = &choice.memory_policy {
        if *policy != MemoryPolicy::Default {
            launch::set_memory_policy(policy)
                .context("setting the command's memory policy (the nodes may have gone offline)")?;
        }
    }
    launch::set_cpu_affinity(&choice.cpus)
        .context("setting the command's CPUs (they may have gone offline)")?;
    Ok(())
}

/// `--dry-run`: the choice on stdout, as a line or as JSON.
fn print_choice(args: &ExecArgs, choice: &Choice) -> Result<()> {
    let command: Vec<String> = args
        .command
        .iter()
        .map(|a| name_from_bytes(a.as_bytes()))
        .collect();
    if args.json {
        #[derive(Serialize)]
        struct DryRun<'a> {
            command: &'a [String],
            #[serde(flatten)]
            choice: &'a Choice,
        }
        let text = numaplace::output::json::pretty(&DryRun {
            command: &command,
            choice,
        })?;
        println!("{text}");
    } else {
        let shown: Vec<String> = command.iter().map(|a| printable(a)).collect();
        println!("would run {}: {}", shown.join(" "), choice.reason);
    }
    Ok(())
}

/// The exit status of `numaplace exec` that failed with `e`.
pub(crate) fn exit_code(e: &anyhow::Error) -> u8 {
    match e.downcast_ref::<ExecError>() {
        Some(e) => e.status,
        None => FAILED,
    }
}

/// The arguments name `exec` as the command (options before it are
/// global flags such as -v, which take no value).
pub(crate) fn is_exec(args: &[OsString]) -> bool {
    args.iter()
        .skip(1)
        .find(|a| !a.as_bytes().starts_with(b"-"))
        == Some(&OsString::from("exec"))
}
