//! Test helper: a multi-threaded process whose memory starts on node 0 but
//! whose threads may run anywhere.
//!
//! Usage: `numa_hog MIB THREADS`
//!
//! Pins itself to node 0's CPUs (`/sys/devices/system/node/node0/cpulist`),
//! maps MIB MiB of private anonymous memory and has THREADS threads touch
//! every page of it (each its own share), so first touch places the pages
//! on node 0. Then every thread (the main one too) puts its affinity back to
//! what the process had at start, `ready <pid>` is printed on stdout, and the
//! threads read their share of the memory in a loop until the process is
//! killed. Used by the QEMU daemon test (tests/vm/guest-daemon-test.sh):
//! `numaplace run --policy numad-like` must then move the threads and the
//! pages to another node. The affinity is put back on purpose: numaplace
//! leaves alone a thread whose affinity is narrower than the machine when it
//! first sees it.
//!
//! Exit status 2 on bad arguments, 1 when the machine refuses (no node 0,
//! mmap or an affinity call fails).

use std::process::ExitCode;

#[path = "support/mod.rs"]
mod support;
use std::sync::{Arc, Barrier};

const USAGE: &str = "usage: numa_hog MIB THREADS\n  \
    MIB      MiB of anonymous memory to allocate on node 0 and keep reading (> 0)\n  \
    THREADS  threads that touch and then read it (1..=256)";

const NODE0_CPULIST: &str = "/sys/devices/system/node/node0/cpulist";

fn parse_args() -> Result<(usize, usize), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 1 && (args[0] == "-h" || args[0] == "--help") {
        return Err(String::new());
    }
    let [mib, threads] = args.as_slice() else {
        return Err(format!(
            "expected 2 arguments (MIB THREADS), got {}",
            args.len()
        ));
    };
    let mib = support::parse_mib(mib)?;
    let threads: usize = threads
        .parse()
        .map_err(|_| format!("THREADS '{threads}' is not a whole number"))?;
    if !(1..=256).contains(&threads) {
        return Err(format!("THREADS {threads} is out of range (1..=256)"));
    }
    Ok((mib, threads))
}

/// Parses a kernel CPU list (`0-1,4,6-7`).
fn parse_cpulist(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let lo: usize = lo.parse().map_err(|_| format!("bad CPU list '{text}'"))?;
        let hi: usize = hi.parse().map_err(|_| format!("bad CPU list '{text}'"))?;
        if hi < lo || hi >= libc::CPU_SETSIZE as usize {
            return Err(format!("bad CPU list '{text}'"));
        }
        cpus.extend(lo..=hi);
    }
    if cpus.is_empty() {
        return Err(format!("CPU list '{}' is empty", text.trim()));
    }
    Ok(cpus)
}

/// The calling thread's affinity.
fn get_affinity() -> std::io::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; all zeroes is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most size_of::<cpu_set_t>() bytes.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(set)
}

/// Sets the calling thread's affinity.
fn set_affinity(set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: the kernel reads size_of::<cpu_set_t>() bytes from `set`.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn cpu_set_of(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: as in get_affinity.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c < CPU_SETSIZE (checked by parse_cpulist).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// The share of the mapping one thread owns.
#[derive(Clone, Copy)]
struct Share {
    addr: usize,
    len: usize,
    page: usize,
}

fn touch(s: Share) {
    let base = s.addr as *mut u8;
    for off in (0..s.len).step_by(s.page) {
        // SAFETY: off < len, inside this thread's share of the writable
        // mapping, which is never unmapped.
        unsafe { base.add(off).write_volatile(1) };
    }
}

/// Reads the share forever, one word per cache line.
fn read_forever(s: Share) -> ! {
    let base = s.addr as *const u64;
    let words = s.len / 8;
    let mut sum = 0u64;
    loop {
        for i in (0..words).step_by(8) {
            // SAFETY: i < len / 8: inside this thread's share of the mapping.
            sum = sum.wrapping_add(unsafe { base.add(i).read_volatile() });
        }
        std::hint::black_box(sum);
    }
}

fn fail(msg: String) -> ExitCode {
    eprintln!("numa_hog: error: {msg}");
    ExitCode::from(1)
}

fn main() -> ExitCode {
    let (mib, nthreads) = match parse_args() {
        Ok(v) => v,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("numa_hog: error: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let len = mib << 20;

    let original = match get_affinity() {
        Ok(s) => s,
        Err(e) => return fail(format!("sched_getaffinity failed: {e}")),
    };
    let node0 = match std::fs::read_to_string(NODE0_CPULIST) {
        Ok(t) => t,
        Err(e) => {
            return fail(format!(
                "cannot read {NODE0_CPULIST}: {e} (a kernel without NUMA, or no node 0?)"
            ));
        }
    };
    let node0 = match parse_cpulist(&node0) {
        Ok(c) => c,
        Err(e) => return fail(format!("{NODE0_CPULIST}: {e}")),
    };
    // Threads created from now on inherit node 0's CPUs.
    if let Err(e) = set_affinity(&cpu_set_of(&node0)) {
        return fail(format!("pinning to node 0's CPUs {node0:?} failed: {e}"));
    }

    let addr = match support::map_anonymous(len) {
        Ok(a) => a,
        Err(err) => {
            return fail(format!("mmap of {mib} MiB failed: {err}"));
        }
    };
    let page = numaplace_linux::sysconf::page_size() as usize;

    // Shares: whole pages, the last thread takes the remainder.
    let pages = len / page;
    let per = pages / nthreads;
    let shares: Vec<Share> = (0..nthreads)
        .map(|i| {
            let first = i * per;
            let n = if i + 1 == nthreads {
                pages - first
            } else {
                per
            };
            Share {
                addr: addr as usize + first * page,
                len: n * page,
                page,
            }
        })
        .collect();

    // Touched, then restored: the barrier makes sure every thread has put
    // its affinity back before `ready` is printed.
    let done = Arc::new(Barrier::new(nthreads + 1));
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    for (i, share) in shares.into_iter().enumerate() {
        let done = Arc::clone(&done);
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("hog-{i}"))
            .spawn(move || {
                touch(share);
                if let Err(e) = set_affinity(&original) {
                    let _ = tx.send(format!("thread {i}: restoring the affinity failed: {e}"));
                }
                done.wait();
                read_forever(share)
            });
        if let Err(e) = spawned {
            return fail(format!("cannot start thread {i}: {e}"));
        }
    }
    drop(tx);
    if let Err(e) = set_affinity(&original) {
        return fail(format!("restoring the main thread's affinity failed: {e}"));
    }
    done.wait();
    if let Ok(msg) = rx.try_recv() {
        return fail(msg);
    }

    support::announce_ready_and_wait()
}
