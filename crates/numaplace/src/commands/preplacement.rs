//! `numaplace advise --numad-w NCPUS[:MB]`: numad's pre-placement query,
//! answered from numaplace's own view of the machine, for libvirt.
//!
//! libvirt's contract (src/util/virnuma.c, virNumaGetAutoPlacementAdvice;
//! src/qemu/qemu_process.c, qemuProcessPrepareDomainNUMAPlacement): it
//! runs `NUMAD -w VCPUS:MIB` (NUMAD fixed at build time, `/usr/bin/numad`
//! in Debian's libvirt0), the memory being the domain's total in KiB
//! divided by 1024 and rounded up; it takes the whole of stdout and parses
//! it with virBitmapParse (a node list such as `0-1,3`, blanks and the
//! trailing newline skipped); it fails the domain's start on a non-zero
//! exit, quoting stderr in its error. numad prints the list and a newline
//! (`fprintf(stdout, "%s\n", buf)`), so does this.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};
use numaplace_linux::cpu_idle::sample_idle;
use numaplace_linux::nodes::read_node_available;
use numaplace_linux::{SysRoot, TopologySource, discover};
use numaplace_model::CpuSet;
use numaplace_policy::preplacement::{self, Request};

use crate::commands::InputError;

/// How long each CPU's idle time is sampled. numad sleeps 2 s between its
/// two reads; libvirt waits for the answer while a domain starts, and a
/// fifth of a second is 20 clock ticks per CPU, a 5 % resolution.
const SAMPLE: Duration = Duration::from_millis(200);

/// More vCPUs than libvirt can ask for (its count is an unsigned short).
const MAX_CPUS: f64 = 65_535.0;

pub fn run(w: &str, sysfs_root: Option<&Path>) -> Result<()> {
    let req = parse_request(w)?;
    let root = match sysfs_root {
        Some(dir) => SysRoot::new(dir)?,
        None => SysRoot::host(),
    };
    let topology = discover(&TopologySource::Sysfs(root.clone()))?;
    let idle = sample_idle(&root, SAMPLE).context("the CPUs' idle time")?;
    if idle.values().all(Option::is_none) {
        tracing::info!(
            "{}: the CPU times did not move over {SAMPLE:?} (a snapshot?): every CPU counts as idle",
            root.join("proc/stat").display()
        );
    }
    let memory = read_node_available(&root);
    if memory.is_empty() {
        return Err(InputError(format!(
            "{}: no node's meminfo could be read: numaplace cannot tell where memory is free",
            root.join("sys/devices/system/node").display()
        ))
        .into());
    }
    let rooms = preplacement::rooms(&topology, &idle, &memory);
    let advice = preplacement::advise(&topology, &rooms, &req);
    if !advice.fits {
        let cpus: f64 = rooms.iter().map(|r| r.cpus_free).sum();
        let mib: u64 = rooms.iter().map(|r| r.memory_free >> 20).sum();
        crate::output::say!(
            "numaplace: warning: {w}: more than the machine has free ({cpus:.1} idle CPUs, \
             {mib} MiB free memory); advising every node, as numad does"
        );
    }
    let list: CpuSet = advice.nodes.iter().copied().collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", list.to_list_string()).context("writing the node list")?;
    out.flush().context("writing the node list")?;
    Ok(())
}

/// numad's `-w` argument: `NCPUS[:MB]`, NCPUS a positive number of CPUs
/// (numad takes hundredths: `2.5`), MB MiB of memory (0 or absent: CPUs
/// only, as numad).
pub fn parse_request(w: &str) -> Result<Request, InputError> {
    let bad = |why: &str| {
        InputError(format!(
            "--numad-w {w:?}: {why}; give NCPUS[:MB], e.g. 4:8192 for 4 vCPUs and 8192 MiB, \
             as libvirt passes numad -w"
        ))
    };
    let (cpus, mib) = match w.split_once(':') {
        Some((c, m)) => (c, Some(m)),
        None => (w, None),
    };
    let decimal = |s: &str| {
        let (int, frac) = s.split_once('.').unwrap_or((s, "0"));
        !int.is_empty()
            && !frac.is_empty()
            && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    };
    if !decimal(cpus) {
        return Err(bad("NCPUS is not a number"));
    }
    let cpus: f64 = cpus.parse().map_err(|_| bad("NCPUS is not a number"))?;
    if cpus <= 0.0 {
        return Err(bad("a VM has at least one vCPU"));
    }
    if cpus > MAX_CPUS {
        return Err(bad("more vCPUs than libvirt can ask for (65535)"));
    }
    let memory = match mib {
        None => 0,
        Some(m) if !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()) => m
            .parse::<u64>()
            .ok()
            .and_then(|m| m.checked_mul(1 << 20))
            .ok_or_else(|| bad("MB is more memory than can be counted in bytes"))?,
        Some(_) => return Err(bad("MB is not a whole number of MiB")),
    };
    Ok(Request { cpus, memory })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_libvirt_and_numad_write() {
        let r = parse_request("4:8192").unwrap();
        assert_eq!((r.cpus, r.memory), (4.0, 8192 << 20));
        let r = parse_request("2.5").unwrap();
        assert_eq!((r.cpus, r.memory), (2.5, 0));
        assert_eq!(parse_request("1:0").unwrap().memory, 0);
    }

    #[test]
    fn refuses_what_is_not_a_request() {
        for (w, why) in [
            ("", "NCPUS is not a number"),
            ("four:8", "NCPUS is not a number"),
            ("-1:8", "NCPUS is not a number"),
            (" 4:8", "NCPUS is not a number"),
            ("4.:8", "NCPUS is not a number"),
            ("0:1024", "at least one vCPU"),
            ("0.00", "at least one vCPU"),
            ("70000:1", "65535"),
            ("4:", "not a whole number"),
            ("4:1.5", "not a whole number"),
            ("4:8:9", "not a whole number"),
            ("4:18446744073709551615", "more memory than can be counted"),
        ] {
            let e = parse_request(w).unwrap_err().to_string();
            assert!(e.contains(why), "{w:?}: {e}");
            assert!(e.contains("NCPUS[:MB]") && !e.contains('\n'), "{e}");
        }
    }
}
