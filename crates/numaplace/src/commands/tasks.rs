//! `numaplace tasks`.

use std::thread::sleep;
use std::time::Instant;

use anyhow::{Context, Result};
use numaplace_linux::guest_hints::GuestHints;
use numaplace_linux::{CollectOptions, Collector, SysRoot};
use numaplace_model::scope::{glob, in_subtree};
use numaplace_model::{GroupKind, Snapshot, TaskGroup};

use numaplace::cli::{TaskFilterArgs, TasksArgs};
use numaplace::config::Config;
use numaplace::duration::parse_duration;
use numaplace::error::InputError;
use numaplace::report;

pub(crate) fn run(args: &TasksArgs) -> Result<()> {
    let interval = parse_duration(&args.interval, "--interval").map_err(InputError)?;
    validate(&args.filter)?;
    numaplace_linux::guest_hints::validate_patterns(&args.guest_hints)
        .map_err(|e| InputError(e.replace("[guest_hints] sockets", "--guest-hints")))?;
    let root = numaplace::machine::root_of(args.root.as_deref())?;
    let rates = !interval.is_zero() && root.is_host();
    // While the kernel balances between nodes, its hinting faults say per
    // thread which node its memory accesses go to (the ACCESSES column).
    let balancing = numaplace_linux::balancing::NumaBalancing::read(&root);
    let mut collector = Collector::new(
        root.clone(),
        CollectOptions {
            memory: true,
            counters: rates,
            machine: false,
            samples: false,
        },
    );
    collector.set_numa_faults(balancing.balances_between_nodes());
    // VMs whose vCPU threads carry no names, where the daemon's config
    // says to look (libvirt's status files by default). A viewer: the
    // daemon's own file, unreadable or broken, is said and done without.
    let config = match &args.config {
        Some(path) => Config::load(Some(path))?,
        None => Config::load(None).unwrap_or_else(|e| {
            tracing::warn!("{e:#}; VMs are looked for as its defaults say");
            Config::default()
        }),
    };
    collector.set_vm_sources(Some(config.vms.sources(config.vms.libvirt_unreachable())));
    if root.is_host() {
        collector.set_kubelet(config.kubernetes.files());
    }
    let mut snap = collector.collect().context("reading tasks")?;
    let mut hints = (!args.guest_hints.is_empty())
        .then(|| GuestHints::new(SysRoot::host(), args.guest_hints.clone()));
    let mut hint_notes = Vec::new();
    if let Some(h) = hints.as_mut() {
        // The first poll connects; the guests' messages come during the wait.
        hint_notes.extend(h.poll(&snap, Instant::now()).notes);
    }
    if rates || hints.is_some() {
        sleep(interval);
        snap = collector.collect().context("reading tasks")?;
    }
    if let Some(h) = hints.as_mut() {
        let round = h.poll(&snap, Instant::now());
        hint_notes.extend(round.notes);
        snap.guest_hints = round.hints;
        for path in h.silent() {
            let pending = h.pending_bytes(&path);
            if pending > 0 {
                hint_notes.push(format!(
                    "guest hints: {}: {pending} bytes came during --interval {} but no whole \
                     line (each message ends with a newline: is the guest's sender `numaplace \
                     guest`?)",
                    path.display(),
                    args.interval
                ));
                continue;
            }
            hint_notes.push(format!(
                "guest hints: {}: connected, but nothing came during --interval {} (is \
                 `numaplace guest` running in the VM? is another numaplace reading this socket? \
                 QEMU serves one client at a time)",
                path.display(),
                args.interval
            ));
        }
    }
    let groups: Vec<&TaskGroup> = snap
        .groups
        .iter()
        .filter(|g| keep(&args.filter, g, &snap))
        .collect();
    if args.json {
        let pids: Vec<i32> = groups.iter().map(|g| g.pid).collect();
        println!(
            "{}",
            numaplace::output::json::pretty(&select(&snap, &pids))?
        );
        return Ok(());
    }
    let mut notes: Vec<String> = collector.missing_signals().to_vec();
    notes.extend(hint_notes);
    if !rates {
        notes.push(
            "one round only: no CPU share, counters or page fault rates (give --interval)".into(),
        );
    }
    let gaps = collector.gaps();
    if gaps.denied > 0 {
        let what_to_do = if numaplace_linux::probe::is_root() {
            // Root is refused too where a security module or a mount
            // option (hidepid, a user namespace's /proc) says so.
            "even as root: a security module, /proc's hidepid or another namespace's tasks"
        } else {
            "run as root to see every task"
        };
        notes.push(format!(
            "{} file{} could not be read (permission denied; {what_to_do})",
            gaps.denied,
            if gaps.denied == 1 { "" } else { "s" }
        ));
    }
    print!("{}", report::tasks::render(&snap, &groups, &notes));
    print!("{}", left_alone(&root, &snap, &groups));
    Ok(())
}

/// The threads of the shown processes no policy may place, and why
/// (`advise`'s closing lines); empty where there are none, or where the
/// machine's topology cannot be read (said in one line).
fn left_alone(root: &SysRoot, snap: &Snapshot, groups: &[&TaskGroup]) -> String {
    let source = numaplace_linux::TopologySource::Sysfs(root.clone());
    let topology = match numaplace_linux::discover_repaired(&source) {
        Ok(d) => d.topology,
        Err(e) => return format!("(which threads no policy may place is not said: {e})\n"),
    };
    let scope = numaplace_policy::Scope {
        pids: groups.iter().map(|g| g.pid).collect(),
        ..Default::default()
    };
    // Any policy: who is left alone is the engine's rule, not a policy's.
    let policy = numaplace_policy::PolicyKind::from_name("static")
        .map(|k| k.build())
        .expect("the static policy is registered");
    let engine = numaplace_policy::engine::Engine::new(policy, scope, Default::default());
    numaplace::report::engine::describe_left_alone(&engine.left_alone(&topology, snap))
}

fn validate(f: &TaskFilterArgs) -> Result<()> {
    if let Some(bad) = f.select.pid.iter().find(|&&p| p <= 0) {
        return Err(InputError(format!("--pid {bad}: process ids are positive")).into());
    }
    if let Some(bad) = f.select.cgroup.iter().find(|c| !c.starts_with('/')) {
        return Err(InputError(format!(
            "--cgroup {bad:?}: give a cgroup v2 path from the hierarchy's root, like /system.slice"
        ))
        .into());
    }
    Ok(())
}

/// The snapshot reduced to the given processes and their threads.
fn select(s: &Snapshot, pids: &[i32]) -> Snapshot {
    let groups: Vec<TaskGroup> = s
        .groups
        .iter()
        .filter(|g| pids.contains(&g.pid))
        .cloned()
        .collect();
    let tids: std::collections::BTreeSet<i32> = groups
        .iter()
        .flat_map(|g| g.threads.iter().copied())
        .collect();
    Snapshot {
        tasks: s
            .tasks
            .iter()
            .filter(|t| tids.contains(&t.tid))
            .cloned()
            .collect(),
        counters: s
            .counters
            .iter()
            .filter(|(t, _)| tids.contains(t))
            .map(|(&t, c)| (t, c.clone()))
            .collect(),
        samples: s
            .samples
            .iter()
            .filter(|(t, _)| tids.contains(t))
            .map(|(&t, v)| (t, v.clone()))
            .collect(),
        signatures: s
            .signatures
            .iter()
            .filter(|(t, _)| tids.contains(t))
            .map(|(&t, v)| (t, v.clone()))
            .collect(),
        numa_faults: s
            .numa_faults
            .iter()
            .filter(|(t, _)| tids.contains(t))
            .map(|(&t, v)| (t, v.clone()))
            .collect(),
        guest_hints: s
            .guest_hints
            .iter()
            .filter(|(p, _)| pids.contains(p))
            .map(|(&p, h)| (p, h.clone()))
            .collect(),
        explicit_mempolicy: s
            .explicit_mempolicy
            .iter()
            .copied()
            .filter(|p| pids.contains(p))
            .collect(),
        page_faults: s
            .page_faults
            .iter()
            .filter(|(p, _)| pids.contains(p))
            .map(|(&p, f)| (p, *f))
            .collect(),
        groups,
        ..s.clone()
    }
}

/// Whether a group passes the filter. Each kind of filter given must
/// match (pid, name, cgroup); within a kind, any value may.
pub(crate) fn keep(f: &TaskFilterArgs, g: &TaskGroup, s: &Snapshot) -> bool {
    if !f.kernel && g.is_kernel() {
        return false;
    }
    if f.select.vms && !matches!(g.kind, GroupKind::Vm { .. }) {
        return false;
    }
    if !f.select.pid.is_empty() && !f.select.pid.contains(&g.pid) {
        return false;
    }
    if !f.select.comm.is_empty() {
        let names = std::iter::once(g.comm.as_str()).chain(
            g.threads
                .iter()
                .filter_map(|&t| s.task(t))
                .map(|t| t.comm.as_str()),
        );
        let mut names = names;
        if !names.any(|n| f.select.comm.iter().any(|p| glob(p, n))) {
            return false;
        }
    }
    if !f.select.cgroup.is_empty() {
        let Some(cg) = &g.cgroup else { return false };
        if !f.select.cgroup.iter().any(|p| in_subtree(p, cg)) {
            return false;
        }
    }
    true
}
