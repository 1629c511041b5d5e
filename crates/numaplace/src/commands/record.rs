//! `numaplace record` and `numaplace replay`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use numaplace_linux::{CollectOptions, Collector, Recorder, Replay, TopologySource, discover};
use numaplace_model::RecordHeader;

use crate::cli::{RecordArgs, ReplayArgs};
use crate::commands::InputError;
use crate::commands::tasks::root_of;
use crate::duration::parse_duration;

pub fn record(args: &RecordArgs) -> Result<()> {
    let interval = parse_duration(&args.interval, "--interval").map_err(InputError)?;
    if interval < Duration::from_millis(10) {
        return Err(InputError(format!("--interval {}: at least 10ms", args.interval)).into());
    }
    let duration = args
        .duration
        .as_deref()
        .map(|d| parse_duration(d, "--duration").map_err(InputError))
        .transpose()?;
    let root = root_of(args.root.as_deref())?;
    let topology = discover(&TopologySource::Sysfs(root.clone()))?;
    let mut collector = Collector::new(
        root,
        CollectOptions {
            memory: !args.no_memory,
            counters: true,
            machine: true,
            samples: false,
        },
    );
    for m in collector.missing_signals() {
        tracing::warn!("not recorded: {m}");
    }
    let header = RecordHeader {
        format: RecordHeader::FORMAT.into(),
        version: RecordHeader::VERSION,
        writer: env!("CARGO_PKG_VERSION").into(),
        interval_ns: interval.as_nanos() as u64,
        topology,
        missing_signals: collector.missing_signals().to_vec(),
    };
    let mut recorder = Recorder::create(&args.output, &header, args.force)?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let start = Instant::now();
    let mut next = start;
    let mut rounds = 0u64;
    loop {
        let snap = collector.collect().context("collecting")?;
        recorder.write(&snap)?;
        rounds += 1;
        next += interval;
        let done = duration.is_some_and(|d| next.duration_since(start) > d);
        if done || stop.load(Ordering::Relaxed) {
            break;
        }
        // Deadline-driven: a slow round shortens the next wait, never
        // drifts the schedule; sleep in slices so a signal ends it soon.
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    recorder.finish()?;
    eprintln!(
        "numaplace: recorded {rounds} snapshots to {}",
        args.output.display()
    );
    Ok(())
}

pub fn replay(args: &ReplayArgs) -> Result<()> {
    let replay = Replay::open(&args.file)?;
    let h = replay.header().clone();
    if !args.json {
        println!(
            "{}: written by numaplace {}, format {}, interval {:.3}s, machine: {} CPUs, {} nodes",
            args.file.display(),
            h.writer,
            h.version,
            h.interval_ns as f64 / 1e9,
            h.topology.cpus().len(),
            h.topology.nodes().len()
        );
        for m in &h.missing_signals {
            println!("not recorded: {m}");
        }
    }
    let mut n = 0;
    for snap in replay {
        let snap = snap?;
        n += 1;
        if args.json {
            println!("{}", serde_json::to_string(&snap)?);
        } else {
            let vms = snap
                .groups
                .iter()
                .filter(|g| numaplace_linux::collect::is_vm(g))
                .count();
            println!(
                "#{:<5} +{:>8.3}s  {:>5} processes ({vms} VMs), {:>6} threads, {:>6} with counters",
                snap.seq,
                snap.interval_ns as f64 / 1e9,
                snap.groups.len(),
                snap.tasks.len(),
                snap.counters.len()
            );
        }
    }
    if !args.json {
        println!("{n} snapshots");
    }
    Ok(())
}
