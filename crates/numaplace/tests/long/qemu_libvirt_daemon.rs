//! numaplace placing libvirt's domains through libvirt, in the 2-node QEMU
//! guest with a real libvirtd (tests/vm/guest-libvirt-numaplace.sh, which
//! runs tests/vm/libvirt-numaplace-test.sh in guest-libvirt-bed.sh's
//! guest): a `placement='auto'` domain started through numaplace's
//! `numad -w` is re-placed by `numaplace run` with `virsh vcpupin` and
//! `emulatorpin` and its memory moved with `numatune --nodeset` (virsh
//! shows numaplace's CPUs and node, the pages are there), SIGTERM puts
//! libvirt's placement back, and so do `kill -9` and a restart; a domain whose owner
//! wrote a `<vcpupin>` is left alone, and `advise` says why. Boots QEMU
//! with nested TCG domains, so it is ignored by default; `.ci/run` runs it
//! with `--ignored`. Needs libvirt-daemon, libvirt-daemon-driver-qemu and
//! libvirt-clients on the host.

use crate::common;

use common::{require_program, run_guest_script};
use serde_json::Value;

#[test]
#[ignore = "boots QEMU with libvirtd inside: .ci/run runs it with --ignored"]
fn libvirts_domains_are_placed_through_libvirt_and_given_back() {
    // libvirtd is in /usr/sbin, which a user's PATH may lack.
    assert!(
        std::path::Path::new("/usr/sbin/libvirtd").is_file(),
        "/usr/sbin/libvirtd not found: this test needs it (Debian: apt-get install libvirt-daemon)"
    );
    require_program("virsh", "libvirt-clients");
    let text = run_guest_script("guest-libvirt-numaplace.sh", &[]);
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the guest's JSON does not parse: {e}\n{text}"));
    let failed = v["failed"].as_array().expect("failed");
    assert!(
        failed.is_empty(),
        "checks failed in the guest: {failed:?}\n{v:#}"
    );
    // numad's answer (numaplace's): one node, or both where the guest
    // was too busy for one to hold 2 vCPUs; libvirt placed the domain
    // there, numaplace moved it to one node through libvirt (node 1, or
    // node 0 where libvirt chose node 1).
    let node = v["numad_node"].as_str().unwrap();
    let (home, target, tnode) = match node {
        "0" => ("0-1", "2-3", "1"),
        "1" => ("2-3", "0-1", "0"),
        "0-1" => ("0-3", "2-3", "1"),
        other => panic!("numad's node {other:?}: {v:#}"),
    };
    assert_eq!(v["target"], target);
    // Each: the vCPUs' and the emulator's CPUs, the memory nodes.
    assert_eq!(
        v["libvirt_cpus"],
        format!("0:{home} 1:{home} e:{home} m:{node}")
    );
    let placed = format!("0:{target} 1:{target} e:{target} m:{tnode}");
    let pct = v["pages_on_target_pct"].as_u64().unwrap();
    assert!(pct >= 90, "{pct} % of QEMU's pages moved: {v:#}");
    assert_eq!(v["placed"], placed.as_str(), "{v:#}");
    assert_eq!(v["placed_again"], placed.as_str(), "{v:#}");
    // libvirt's placement back: after SIGTERM, and after kill -9 + restart.
    assert_eq!(v["after_sigterm"], v["libvirt_cpus"], "{v:#}");
    assert_eq!(v["after_restart"], v["libvirt_cpus"], "{v:#}");
    let journal = v["journal"].as_str().unwrap();
    assert!(
        journal.contains("\"outcome\":\"done\"") || journal.contains("\"done\""),
        "no pin journalled as done: {journal}"
    );
    let advise = v["advise_owned"].as_str().unwrap();
    assert!(
        advise.contains(
            "libvirt domain owned holds its placement: its owner pinned it in libvirt's XML \
             (<vcpupin vcpu='0' cpuset='1'>)"
        ),
        "{advise}"
    );
}
