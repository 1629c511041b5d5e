//! `numaplace guest`: the agent run inside a VM (\[Rao13\] §4.3 without a
//! modified guest kernel). The work is in numaplace-linux's
//! `guest_hints::agent`; this wires it to a port and a clock.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use numaplace_linux::guest_hints::agent::{HintPort, PinnedThreads, Sent, find_port, online_cpus};
use numaplace_linux::guest_hints::protocol::{MAX_INTERVAL_MS, MIN_INTERVAL_MS, round_message};
use numaplace_linux::procfs::ProcReader;
use numaplace_model::CpuSet;

use numaplace::cli::GuestArgs;
use numaplace::duration::parse_duration;
use numaplace::error::InputError;
use numaplace::machine::root_of;

/// Where the messages go.
enum Out {
    Port(HintPort),
    Stdout,
}

impl Out {
    fn send(&mut self, text: &str) -> std::io::Result<Sent> {
        match self {
            Out::Port(p) => p.send(text),
            Out::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(text.as_bytes())?;
                o.flush()?;
                Ok(Sent::All)
            }
        }
    }
}

pub(crate) fn run(args: &GuestArgs) -> Result<()> {
    let interval = parse_duration(&args.interval, "--interval").map_err(InputError)?;
    let ms = u32::try_from(interval.as_millis()).unwrap_or(u32::MAX);
    if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&ms) {
        return Err(InputError(format!(
            "--interval {}: give {MIN_INTERVAL_MS} ms to {} s",
            args.interval,
            MAX_INTERVAL_MS / 1000
        ))
        .into());
    }
    if args.rounds == Some(0) {
        return Err(InputError("--rounds 0: give 1 or more, or leave it out".into()).into());
    }
    let root = root_of(args.root.as_deref())?;
    let mut out = match args.device.as_deref() {
        Some(p) if p.as_os_str() == "-" => Out::Stdout,
        Some(p) => Out::Port(HintPort::open(p).map_err(|e| InputError(e.to_string()))?),
        None => {
            let path = find_port(&root, &args.port).map_err(|e| InputError(e.to_string()))?;
            Out::Port(HintPort::open(&path).map_err(|e| InputError(e.to_string()))?)
        }
    };
    if let Out::Port(p) = &out {
        tracing::info!(
            "sending hints on {} every {:?}",
            p.path().display(),
            interval
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let procs = ProcReader::new(root.clone());
    let mut pinned = PinnedThreads::new();
    let mut before = CpuSet::new();
    let mut next = Instant::now();
    let mut seq = 0u64;
    let mut online = online_cpus(&root).context("reading the guest's CPUs")?;
    loop {
        seq += 1;
        // CPUs can be hot-plugged: read each round.
        match online_cpus(&root) {
            Ok(o) => online = o,
            Err(e) => tracing::warn!("{e}; keeping the last online CPUs {online}"),
        }
        let now = match pinned.scan(&procs, &online) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("reading the tasks failed, nothing tagged this round: {e}");
                CpuSet::new()
            }
        };
        let last = args.rounds.is_some_and(|n| seq >= n) || stop.load(Ordering::Relaxed);
        // On the way out, clear everything: the paper's clear at exit.
        let now = if stop.load(Ordering::Relaxed) {
            CpuSet::new()
        } else {
            now
        };
        let text = round_message(seq, ms, &online, &before, &now);
        match out.send(&text) {
            Ok(Sent::All) => tracing::debug!("sent: {}", text.trim_end()),
            Ok(Sent::NotNow) => tracing::debug!("the host does not read the port now; dropped"),
            Ok(Sent::Part) => tracing::debug!("the port took part of the message"),
            Err(e) => tracing::warn!("writing the hints failed: {e}"),
        }
        if before != now {
            tracing::info!(
                "vCPUs tagged: {} ({} pinned user threads)",
                if now.is_empty() {
                    "none".into()
                } else {
                    now.to_string()
                },
                pinned.threads()
            );
        }
        before = now;
        if last {
            return Ok(());
        }
        next += interval;
        while !stop.load(Ordering::Relaxed) && Instant::now() < next {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(100)));
        }
        if Instant::now() > next + interval {
            next = Instant::now();
        }
    }
}
