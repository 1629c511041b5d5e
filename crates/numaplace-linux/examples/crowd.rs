//! `crowd THREADS [CHURN_PER_SEC SECONDS]`: keeps THREADS parked threads
//! alive; with CHURN_PER_SEC, also creates and ends that many short-lived
//! threads a second for SECONDS, then exits. Prints `ready <pid>` once the
//! crowd is up. For the daemon's overhead and churn tests.
//!
//! `crowd --busy PERIOD_MS THREADS`: THREADS threads that run instead, each
//! waking every PERIOD_MS (at its own phase) to do about 20 µs of work, so
//! that every one of them ran between two of the daemon's rounds.

use std::hint::black_box;
use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn usage() -> ! {
    eprintln!("usage: crowd THREADS [CHURN_PER_SEC SECONDS] | crowd --busy PERIOD_MS THREADS");
    std::process::exit(2);
}

/// THREADS threads waking every `period` to work a little, forever.
fn busy(threads: usize, period: Duration) -> ! {
    for i in 0..threads {
        let phase = period.mul_f64(i as f64 / threads as f64);
        std::thread::Builder::new()
            .name(format!("crowd-busy-{i}"))
            .stack_size(64 * 1024)
            .spawn(move || {
                let mut next = Instant::now() + phase;
                let mut x = i as u64;
                loop {
                    for _ in 0..20_000 {
                        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                    next += period;
                    let now = Instant::now();
                    if next <= now {
                        next = now + period;
                    }
                    std::thread::sleep(next - now);
                }
            })
            .unwrap_or_else(|e| {
                eprintln!("crowd: cannot start thread {i}: {e}");
                std::process::exit(1)
            });
    }
    println!("ready {}", std::process::id());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--busy") {
        let num = |i: usize| -> u64 {
            args.get(i)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| usage())
        };
        if args.len() != 3 {
            usage();
        }
        busy(num(2) as usize, Duration::from_millis(num(1).max(1)));
    }
    let num = |i: usize| -> u64 {
        args.get(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| usage())
    };
    if args.is_empty() || args.len() == 2 || args.len() > 3 {
        usage();
    }
    let threads = num(0) as usize;
    let release = Arc::new(Barrier::new(threads + 1));
    let mut parked = Vec::with_capacity(threads);
    for i in 0..threads {
        let r = Arc::clone(&release);
        parked.push(
            std::thread::Builder::new()
                .name(format!("crowd-{i}"))
                .stack_size(64 * 1024)
                .spawn(move || {
                    r.wait();
                })
                .unwrap_or_else(|e| {
                    eprintln!("crowd: cannot start thread {i}: {e}");
                    std::process::exit(1)
                }),
        );
    }
    println!("ready {}", std::process::id());
    let _ = std::io::stdout().flush();
    if args.len() == 3 {
        let (rate, secs) = (num(1).max(1), num(2));
        let gap = Duration::from_secs_f64(1.0 / rate as f64);
        let start = Instant::now();
        let mut next = start;
        let mut made = 0u64;
        while start.elapsed() < Duration::from_secs(secs) {
            let h = std::thread::Builder::new()
                .name("crowd-churn".into())
                .stack_size(64 * 1024)
                .spawn(|| std::thread::sleep(Duration::from_millis(2)))
                .expect("spawn a churn thread");
            drop(h); // detached: it ends by itself
            made += 1;
            next += gap;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        eprintln!("crowd: churned {made} threads in {secs} s");
        release.wait();
        for h in parked {
            let _ = h.join();
        }
    } else {
        loop {
            std::thread::park();
        }
    }
}
