//! Test helper: allocate anonymous memory bound to one NUMA node and hold it.
//!
//! Usage: `alloc_on_node NODE MIB`
//!
//! Maps MIB MiB of private anonymous memory, binds it to NODE with
//! `mbind(MPOL_BIND)`, touches every page (so the kernel allocates them, on
//! NODE), prints `ready <pid>` on stdout and sleeps until killed. Used by the
//! QEMU guest-memory test (tests/vm/guest-memory-test.sh), which then checks
//! that `numaplace tasks --pid <pid>` reports the memory on NODE.
//!
//! Exit status 2 on bad arguments or when the kernel refuses the binding
//! (e.g. NODE is not an online node), 1 when the mapping itself fails.

use std::process::ExitCode;

#[path = "support/mod.rs"]
mod support;

/// `MPOL_BIND` from `<linux/mempolicy.h>`.
const MPOL_BIND: libc::c_int = 2;
/// Bits in the node mask handed to the kernel (libnuma's default, too).
const MASK_BITS: usize = 1024;
const BITS_PER_WORD: usize = libc::c_ulong::BITS as usize;

const USAGE: &str = "usage: alloc_on_node NODE MIB\n  \
    NODE  NUMA node id to bind the memory to (0..1023)\n  \
    MIB   MiB of anonymous memory to allocate and touch (> 0)";

fn parse_args() -> Result<(usize, usize), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 1 && (args[0] == "-h" || args[0] == "--help") {
        return Err(String::new());
    }
    let [node, mib] = args.as_slice() else {
        return Err(format!(
            "expected 2 arguments (NODE MIB), got {}",
            args.len()
        ));
    };
    let node: usize = node
        .parse()
        .map_err(|_| format!("NODE '{node}' is not a node id (a whole number)"))?;
    if node >= MASK_BITS {
        return Err(format!(
            "NODE {node} is out of range (0..{})",
            MASK_BITS - 1
        ));
    }
    let mib = support::parse_mib(mib)?;
    Ok((node, mib))
}

fn main() -> ExitCode {
    let (node, mib) = match parse_args() {
        Ok(v) => v,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("alloc_on_node: error: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (addr, len) = match support::map_mib("alloc_on_node", mib) {
        Ok(mapped) => mapped,
        Err(status) => return status,
    };

    let mut mask = [0 as libc::c_ulong; MASK_BITS / BITS_PER_WORD];
    mask[node / BITS_PER_WORD] |= 1 << (node % BITS_PER_WORD);
    // The kernel reads `maxnode - 1` bits (a historical off-by-one that
    // libnuma also compensates for), hence the + 1.
    // SAFETY: addr/len is the mapping made above; mask outlives the call and
    // holds MASK_BITS bits.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len as libc::c_ulong,
            MPOL_BIND as libc::c_ulong,
            mask.as_ptr(),
            (MASK_BITS + 1) as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        let hint = match err.raw_os_error() {
            Some(libc::EINVAL) => " (is the node online? see /sys/devices/system/node/)",
            Some(libc::ENOSYS) => " (kernel built without NUMA support)",
            _ => "",
        };
        eprintln!("alloc_on_node: error: mbind(MPOL_BIND, node {node}) failed: {err}{hint}");
        return ExitCode::from(2);
    }

    support::touch_pages(addr, len);
    support::announce_ready_and_wait()
}
