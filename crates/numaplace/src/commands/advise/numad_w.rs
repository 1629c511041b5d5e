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

use anyhow::{Context as _, Result};
use numaplace_linux::SysRoot;
use numaplace_policy::preplacement::Request;

use numaplace::error::InputError;
use numaplace::machine_room::{BadCpuCount, MachineRoom, parse_cpu_count};

pub(super) fn run(w: &str, sysfs_root: Option<&Path>) -> Result<()> {
    let req = parse_request(w)?;
    let root = match sysfs_root {
        Some(dir) => SysRoot::new(dir)?,
        None => SysRoot::host(),
    };
    let advised = MachineRoom::read(&root)?.advise(&req);
    if !advised.advice.fits {
        numaplace::output::say!(
            "numaplace: warning: {w}: more than the machine has free ({}); advising every \
             node, as numad does",
            advised.free_in_words()
        );
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", advised.nodes().to_list_string()).context("writing the node list")?;
    out.flush().context("writing the node list")?;
    Ok(())
}

/// numad's `-w` argument: `NCPUS[:MB]`, NCPUS a positive number of CPUs
/// (numad takes hundredths: `2.5`), MB MiB of memory (0 or absent: CPUs
/// only, as numad).
pub(super) fn parse_request(w: &str) -> Result<Request, InputError> {
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
    let cpus = parse_cpu_count(cpus).map_err(|e| {
        bad(match e {
            BadCpuCount::NotANumber => "NCPUS is not a number",
            BadCpuCount::Zero => "a VM has at least one vCPU",
            BadCpuCount::TooMany => "more vCPUs than libvirt can ask for (65535)",
        })
    })?;
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
