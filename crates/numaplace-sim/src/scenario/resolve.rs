//! From the checked raw form to a [`Workload`]: the scenario's keys, the
//! simulated Linux, each app and its phases (their thread models, with the
//! inheritance rules, are `thread_model.rs`), and the checks against the
//! machine.

use super::*;

/// Threads of every application together, after copies: with MAX_APPS
/// apps of MAX_THREADS threads a file could still ask for 16 M threads.
const MAX_TOTAL_THREADS: u64 = 100_000;

pub(super) fn parse_named(
    text: &str,
    origin: &str,
    default_name: &str,
) -> Result<Workload, ScenarioError> {
    let cx = Ctx { text, origin };
    let raw: RawScenario = toml::from_str(text).map_err(|e| cx.toml_error(&e))?;

    let name = match &raw.name {
        Some(v) => cx.name(v, "name")?,
        None => default_name.to_string(),
    };
    let description = match &raw.description {
        Some(v) => cx.string(v, "description", "a description")?.to_string(),
        None => String::new(),
    };
    let machine_hint = format!(
        "one of {}, or \"synthetic:LEVELS\" (hwloc's synthetic syntax, e.g. \"synthetic:pack:2 numa:2 l3:1 core:8 pu:2\", optionally with memory-only:N)",
        PRESETS.join(", ")
    );
    let Some(mv) = &raw.machine else {
        return Err(cx.err(
            None,
            Some("machine".into()),
            format!("missing: give the machine preset to simulate, {machine_hint}"),
        ));
    };
    let machine_name = cx.string(mv, "machine", "a machine preset")?;
    let machine = Machine::preset(machine_name).map_err(|e| match e {
        crate::MachineError::UnknownPreset(_) => cx.bad(
            mv,
            "machine",
            format!("unknown machine preset {machine_name:?}: use {machine_hint}"),
        ),
        e => cx.bad(mv, "machine", e.to_string()),
    })?;
    let step_ms = match &raw.step_ms {
        Some(v) => cx.bounded(v, "step_ms", MIN_STEP_MS, false, Some(MAX_STEP_MS))?,
        None => 10.0,
    };
    let max_seconds = match &raw.max_seconds {
        Some(v) => cx.bounded(v, "max_seconds", 0.0, true, Some(MAX_SECONDS))?,
        None => 3600.0,
    };
    // Each step costs the model a pass over every thread: bounded, so a
    // scenario cannot make the simulator run for ever.
    let steps = max_seconds * 1000.0 / step_ms;
    if steps > MAX_STEPS {
        let v = raw.step_ms.as_ref().or(raw.max_seconds.as_ref());
        return Err(cx.err(
            v.map(|v| v.span()),
            Some("step_ms".into()),
            format!(
                "step_ms = {step_ms} with max_seconds = {max_seconds} makes {steps:.0} model steps: must be at most {MAX_STEPS:.0} (raise step_ms or lower max_seconds)"
            ),
        ));
    }
    let mismatch_percent = match &raw.mismatch_percent {
        Some(v) => {
            let x = cx.number(v, "mismatch_percent")?;
            crate::machine::check_mismatch(x).map_err(|e| cx.bad(v, "mismatch_percent", e))?;
            Some(x)
        }
        None => None,
    };
    let linux = match &raw.linux {
        Some(l) => linux(&cx, l.get_ref())?,
        None => LinuxModel::default(),
    };
    if raw.app.is_empty() {
        return Err(cx.err(
            None,
            Some("app".into()),
            "no [[app]] table: a scenario runs at least one application".into(),
        ));
    }

    let mut apps = Vec::new();
    // Expanded names, with where they come from, for the uniqueness check.
    let mut names: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut total_threads = 0u64;
    for (i, a) in raw.app.iter().enumerate() {
        let expanded = app(&cx, i, a, &machine, max_seconds)?;
        if apps.len() + expanded.len() > MAX_APPS {
            return Err(cx.err(
                Some(a.span()),
                Some(format!("app[{i}]")),
                format!(
                    "the scenario has more than {MAX_APPS} applications (copies counted): must be 1..={MAX_APPS}"
                ),
            ));
        }
        let name_v = a.get_ref().name.as_ref().expect("checked in app()");
        total_threads += expanded.iter().map(|s| u64::from(s.threads)).sum::<u64>();
        if total_threads > MAX_TOTAL_THREADS {
            return Err(cx.missing(
                a.span(),
                &format!("app[{i}]"),
                format!(
                    "the applications up to here have {total_threads} threads (copies included): \
                     a scenario may have at most {MAX_TOTAL_THREADS}; lower threads or copies"
                ),
            ));
        }
        for spec in &expanded {
            if let Some(j) = names.get(&spec.name) {
                return Err(cx.bad(
                    name_v,
                    &format!("app[{i}].name"),
                    format!(
                        "app name {:?} is already used by app[{j}] (copies > 1 are named NAME.0, NAME.1, ...): give each app a unique name",
                        spec.name
                    ),
                ));
            }
            names.insert(spec.name.clone(), i);
        }
        apps.extend(expanded);
    }

    Ok(Workload {
        name,
        description,
        machine: machine.name.clone(),
        apps,
        step_ms,
        max_seconds,
        mismatch_percent,
        linux,
    })
}

fn linux(cx: &Ctx<'_>, l: &RawLinux) -> Result<LinuxModel, ScenarioError> {
    let mut m = LinuxModel::default();
    if let Some(v) = &l.balance_interval_ms {
        m.balance_interval_ms = cx.positive(v, "linux.balance_interval_ms")?;
    }
    if let Some(v) = &l.migrate_probability {
        m.migrate_probability =
            cx.bounded(v, "linux.migrate_probability", 0.0, false, Some(1.0))?;
    }
    if let Some(v) = &l.numa_balancing {
        m.numa_balancing = cx.boolean(v, "linux.numa_balancing")?;
    }
    if let Some(v) = &l.numa_balancing_mib_per_s {
        return Err(cx.bad(
            v,
            "linux.numa_balancing_mib_per_s",
            "is gone: automatic NUMA balancing now scans as the kernel does; set \
             numa_balancing_scan_size_mb and numa_balancing_scan_period_min_ms (the kernel's \
             sysctls) instead"
                .into(),
        ));
    }
    let ms = |v: &Raw, key: &str, into: &mut f64| -> Result<(), ScenarioError> {
        if let Some(v) = v {
            *into = cx.positive(v, key)?;
        }
        Ok(())
    };
    ms(
        &l.numa_balancing_scan_delay_ms,
        "linux.numa_balancing_scan_delay_ms",
        &mut m.numa_balancing_scan_delay_ms,
    )?;
    ms(
        &l.numa_balancing_scan_period_min_ms,
        "linux.numa_balancing_scan_period_min_ms",
        &mut m.numa_balancing_scan_period_min_ms,
    )?;
    ms(
        &l.numa_balancing_scan_period_max_ms,
        "linux.numa_balancing_scan_period_max_ms",
        &mut m.numa_balancing_scan_period_max_ms,
    )?;
    ms(
        &l.numa_balancing_scan_size_mb,
        "linux.numa_balancing_scan_size_mb",
        &mut m.numa_balancing_scan_size_mb,
    )?;
    if m.numa_balancing_scan_period_max_ms < m.numa_balancing_scan_period_min_ms {
        let v = l
            .numa_balancing_scan_period_max_ms
            .as_ref()
            .or(l.numa_balancing_scan_period_min_ms.as_ref())
            .expect("one of them was set");
        return Err(cx.bad(
            v,
            "linux.numa_balancing_scan_period_max_ms",
            "is below numa_balancing_scan_period_min_ms: the longest period between scans \
             cannot be shorter than the shortest"
                .into(),
        ));
    }
    Ok(m)
}

/// `0-3` or `5` for `0..n`.
fn id_range(n: usize) -> String {
    match n {
        0 => "none".into(),
        1 => "0".into(),
        _ => format!("0-{}", n - 1),
    }
}

/// One `[[app]]` table, expanded to its copies.
fn app(
    cx: &Ctx<'_>,
    i: usize,
    raw: &Spanned<RawApp>,
    machine: &Machine,
    max_seconds: f64,
) -> Result<Vec<AppSpec>, ScenarioError> {
    let a = raw.get_ref();
    let prefix = format!("app[{i}]");
    let path = |k: &str| format!("{prefix}.{k}");
    let span = raw.span();

    let Some(name_v) = &a.name else {
        return Err(cx.missing(
            span,
            &path("name"),
            "missing: every [[app]] needs a name, like name = \"mcf\"".into(),
        ));
    };
    let name = cx.name(name_v, &path("name"))?;
    let kind = match &a.kind {
        None => AppKind::Process,
        Some(v) => app_kind(cx, v, &path("kind"))?,
    };
    let threads = match &a.threads {
        Some(v) => cx.count(
            v,
            &path("threads"),
            "threads of the application",
            MAX_THREADS,
        )?,
        None => 1,
    };
    let copies = match &a.copies {
        Some(v) => cx.count(
            v,
            &path("copies"),
            "identical copies of the application",
            MAX_COPIES,
        )?,
        None => 1,
    };
    let memory = match &a.memory {
        None => MemoryPlacement::FirstTouch,
        Some(v) => memory_placement(cx, v, &path("memory"), machine)?,
    };
    let cpus = match &a.cpus {
        None => None,
        Some(v) => Some(app_cpus(cx, v, &path("cpus"), machine, threads)?),
    };
    let cpus_by_cgroup = match &a.cpus_by {
        None => false,
        Some(v) => cpus_by(cx, v, &path("cpus_by"), cpus.is_some())?,
    };
    let start_s = match &a.start_s {
        Some(v) => {
            let s = cx.non_negative(v, &path("start_s"))?;
            if s >= max_seconds {
                return Err(cx.bad(
                    v,
                    &path("start_s"),
                    format!(
                        "starts at {s} s, not before max_seconds = {max_seconds}: it would never run; start it earlier or raise max_seconds"
                    ),
                ));
            }
            s
        }
        None => 0.0,
    };
    let runs = match &a.runs {
        Some(v) => cx.count(v, &path("runs"), "runs back to back", MAX_RUNS)?,
        None => 1,
    };
    let shared_bytes = match &a.shared {
        Some(v) => cx.size(v, &path("shared"), false)?,
        None => 0,
    };
    let sharers = match &a.sharers {
        Some(v) => {
            let n = cx.count(
                v,
                &path("sharers"),
                "threads that use the shared area",
                MAX_THREADS,
            )?;
            if n > threads {
                return Err(cx.bad(
                    v,
                    &path("sharers"),
                    format!(
                        "{n} sharers but the application has {threads} threads: give at most {threads}"
                    ),
                ));
            }
            n
        }
        None => threads,
    };

    let phases = phases(cx, a, &prefix, span, shared_bytes)?;
    let (rank_skew, barrier) = job_keys(cx, a, &prefix, copies)?;
    // A job structure only where the scenario asks for one: copies
    // without it stay identical, independent applications.
    let job = |rank: u32| {
        (rank_skew > 0.0 || barrier != Barrier::None).then(|| Job {
            name: name.clone(),
            rank,
            ranks: copies,
            rank_skew,
            barrier,
        })
    };
    let spec = |name: String, rank: u32| {
        let factor = Job::work_factor(rank, copies, rank_skew);
        AppSpec {
            name,
            kind,
            threads,
            phases: phases
                .iter()
                .map(|p| Phase {
                    instructions: p.instructions * factor,
                    model: p.model.clone(),
                })
                .collect(),
            shared_bytes,
            sharers,
            memory,
            cpus: cpus.clone(),
            cpus_by_cgroup,
            start_s,
            runs,
            job: job(rank),
        }
    };
    Ok(if copies == 1 {
        vec![spec(name.clone(), 0)]
    } else {
        (0..copies)
            .map(|c| spec(format!("{name}.{c}"), c))
            .collect()
    })
}

/// The job keys of an `[[app]]` table: `rank_skew` (0 ≤ skew < 1, and
/// more than 0 only with copies > 1) and `barrier` (`"none"` or
/// `"phase"`).
fn job_keys(
    cx: &Ctx<'_>,
    a: &RawApp,
    prefix: &str,
    copies: u32,
) -> Result<(f64, Barrier), ScenarioError> {
    let path = |k: &str| format!("{prefix}.{k}");
    let rank_skew = match &a.rank_skew {
        Some(v) => {
            let s = cx.bounded(v, &path("rank_skew"), 0.0, false, Some(1.0))?;
            if s >= 1.0 {
                return Err(cx.bad(
                    v,
                    &path("rank_skew"),
                    format!(
                        "{s} would leave rank 0 no work: the ranks run 1 - rank_skew to 1 + rank_skew of each phase, so give 0 <= rank_skew < 1"
                    ),
                ));
            }
            if s > 0.0 && copies < 2 {
                return Err(cx.bad(
                    v,
                    &path("rank_skew"),
                    "spreads work over the ranks of a job, its copies, and this app has one: set copies (like copies = 16) or remove rank_skew".into(),
                ));
            }
            s
        }
        None => 0.0,
    };
    let barrier = match &a.barrier {
        None => Barrier::None,
        Some(v) => match cx.string(v, &path("barrier"), "\"none\" or \"phase\"")? {
            "none" => Barrier::None,
            "phase" => Barrier::Phase,
            other => {
                return Err(cx.bad(
                    v,
                    &path("barrier"),
                    format!("unknown barrier {other:?}: use \"none\" or \"phase\""),
                ));
            }
        },
    };
    Ok((rank_skew, barrier))
}

/// `memory = "first-touch" | "interleave" | "node:N"`, N a node of the machine.
fn memory_placement(
    cx: &Ctx<'_>,
    v: &Spanned<Value>,
    p: &str,
    machine: &Machine,
) -> Result<MemoryPlacement, ScenarioError> {
    let nodes = machine.topology.nodes().len();
    let allowed = "use \"first-touch\", \"interleave\", \"interleave:LIST\" or \"node:N\"";
    Ok(match cx.string(v, p, "a memory placement")? {
        "first-touch" => MemoryPlacement::FirstTouch,
        "interleave" => MemoryPlacement::Interleave,
        s if s.starts_with("interleave:") => {
            let list = &s["interleave:".len()..];
            let set: CpuSet = list.trim().parse().map_err(|e| {
                cx.bad(
                    v,
                    p,
                    format!(
                        "{s:?}: LIST of interleave:LIST must be node numbers like 0,1 or 0-3: {e}"
                    ),
                )
            })?;
            if set.is_empty() {
                return Err(cx.bad(v, p, format!("{s:?}: interleave over no node")));
            }
            if let Some(n) = set.iter().find(|&n| n >= 64) {
                return Err(cx.bad(
                    v,
                    p,
                    format!("{s:?}: interleave:LIST takes nodes 0-63, not {n}"),
                ));
            }
            if let Some(n) = set.iter().find(|&n| n as usize >= nodes) {
                return Err(cx.bad(
                    v,
                    p,
                    format!(
                        "node {n} does not exist: {} has nodes {}",
                        machine.name,
                        id_range(nodes)
                    ),
                ));
            }
            MemoryPlacement::InterleaveNodes(set.iter().fold(0u64, |m, n| m | 1 << n))
        }
        s => {
            let Some(n) = s.strip_prefix("node:") else {
                return Err(cx.bad(v, p, format!("unknown memory placement {s:?}: {allowed}")));
            };
            let n: u32 = n.trim().parse().map_err(|_| {
                cx.bad(
                    v,
                    p,
                    format!("{s:?}: N of node:N must be a node number, like node:0"),
                )
            })?;
            if n as usize >= nodes {
                return Err(cx.bad(
                    v,
                    p,
                    format!(
                        "node {n} does not exist: {} has nodes {}",
                        machine.name,
                        id_range(nodes)
                    ),
                ));
            }
            MemoryPlacement::Node(n)
        }
    })
}

/// `cpus_by = "taskset" | "cgroup"`: whether the app's `cpus` are its
/// cgroup's cpuset (`true`) or its own choice; a cgroup needs the `cpus`
/// (`has_cpus`) it confines the app to.
fn cpus_by(
    cx: &Ctx<'_>,
    v: &Spanned<Value>,
    p: &str,
    has_cpus: bool,
) -> Result<bool, ScenarioError> {
    match cx.string(v, p, "\"taskset\" or \"cgroup\"")? {
        "taskset" => Ok(false),
        "cgroup" if has_cpus => Ok(true),
        "cgroup" => Err(cx.bad(
            v,
            p,
            "a cgroup confines an application to CPUs: give them with cpus = \"0-3\", or drop \
             cpus_by"
                .into(),
        )),
        other => Err(cx.bad(
            v,
            p,
            format!(
                "unknown cpus_by {other:?}: use \"taskset\" (the app chose its CPUs: left alone) \
                 or \"cgroup\" (its cgroup's cpuset: placed within it)"
            ),
        )),
    }
}

/// `kind = "process" | "vm"`.
fn app_kind(cx: &Ctx<'_>, v: &Spanned<Value>, p: &str) -> Result<AppKind, ScenarioError> {
    match cx.string(v, p, "\"process\" or \"vm\"")? {
        "process" => Ok(AppKind::Process),
        "vm" => Ok(AppKind::Vm),
        other => Err(cx.bad(
            v,
            p,
            format!("unknown kind {other:?}: use \"process\" or \"vm\""),
        )),
    }
}

/// `cpus = "0-3"`: the machine's CPUs (dense ids), enough for `threads`.
fn app_cpus(
    cx: &Ctx<'_>,
    v: &Spanned<Value>,
    p: &str,
    machine: &Machine,
    threads: u32,
) -> Result<CpuSet, ScenarioError> {
    let ncpus = machine.topology.cpus().len();
    let text = cx.string(v, p, "a CPU list like \"0-3\"")?;
    let set = CpuSet::from_str(text).map_err(|e| cx.bad(v, p, e.to_string()))?;
    if let Some(bad) = set.iter().find(|&c| c as usize >= ncpus) {
        return Err(cx.bad(
            v,
            p,
            format!(
                "CPU {bad} does not exist: {} has CPUs {} (dense ids)",
                machine.name,
                id_range(ncpus)
            ),
        ));
    }
    if threads as usize > set.len() {
        return Err(cx.bad(
            v,
            p,
            format!(
                "more threads than a cpuset can hold: {threads} threads on cpus {text:?} ({} CPUs); widen cpus or lower threads",
                set.len()
            ),
        ));
    }
    Ok(set)
}

/// An app's phases: its one implicit phase (`instructions` in the
/// `[[app]]` table) or its `[[app.phase]]` tables, each thread model
/// inheriting the app's keys.
fn phases(
    cx: &Ctx<'_>,
    a: &RawApp,
    prefix: &str,
    span: Range<usize>,
    shared_bytes: u64,
) -> Result<Vec<Phase>, ScenarioError> {
    let path = |k: &str| format!("{prefix}.{k}");
    let app_model = partial_model(cx, a.model_keys(), prefix)?;
    let mut phases = Vec::new();
    if a.phase.is_empty() {
        let Some(iv) = &a.instructions else {
            return Err(cx.missing(
                span,
                &path("instructions"),
                "missing: give instructions per thread and run (like instructions = 1e11) or [[app.phase]] tables".into(),
            ));
        };
        let instructions = cx.positive(iv, &path("instructions"))?;
        let at = ModelAt {
            table_span: span.clone(),
            prefix,
            in_phase: false,
            shared_bytes,
            shared_path: &path("shared"),
        };
        let model = thread_model(cx, &app_model, &PartialModel::default(), &at)?;
        phases.push(Phase {
            instructions,
            model,
        });
    } else {
        if let Some(iv) = &a.instructions {
            return Err(cx.bad(
                iv,
                &path("instructions"),
                "instructions is given both here and in [[app.phase]]: with phases, give instructions in each phase only".into(),
            ));
        }
        for (j, ph) in a.phase.iter().enumerate() {
            let pprefix = format!("{prefix}.phase[{j}]");
            let p = ph.get_ref();
            let Some(iv) = &p.instructions else {
                return Err(cx.missing(
                    ph.span(),
                    &format!("{pprefix}.instructions"),
                    "missing: every [[app.phase]] needs its instructions per thread, like instructions = 5e10".into(),
                ));
            };
            let instructions = cx.positive(iv, &format!("{pprefix}.instructions"))?;
            let phase_model = partial_model(cx, p.model_keys(), &pprefix)?;
            let at = ModelAt {
                table_span: ph.span(),
                prefix: &pprefix,
                in_phase: true,
                shared_bytes,
                shared_path: &path("shared"),
            };
            let model = thread_model(cx, &app_model, &phase_model, &at)?;
            phases.push(Phase {
                instructions,
                model,
            });
        }
    }

    Ok(phases)
}
