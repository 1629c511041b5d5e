//! `crowd THREADS [CHURN_PER_SEC SECONDS]`: keeps THREADS parked threads
//! alive; with CHURN_PER_SEC, also creates and ends that many short-lived
//! threads a second for SECONDS, then exits. Prints `ready <pid>` once the
//! crowd is up. For the daemon's overhead and churn tests.

use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn usage() -> ! {
    eprintln!("usage: crowd THREADS [CHURN_PER_SEC SECONDS]");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
