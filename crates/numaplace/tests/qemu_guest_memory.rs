//! Memory placement seen from inside a 2-node QEMU guest: a process binds
//! 64 MiB to node 1 (`alloc_on_node 1 64`) and `numaplace tasks --pid` must
//! report it there. Boots QEMU (tests/vm/guest-memory-test.sh), so it is
//! ignored by default; `.ci/run` runs it with `--ignored`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use numaplace_model::{GroupKind, Snapshot};

const MIB: u64 = 1 << 20;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// Fails the test (never skips it) when a program it needs is missing.
fn require_program(name: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{name} not found on PATH: this test boots a QEMU guest and needs it \
         (Debian: apt-get install {package})"
    );
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn memory_bound_to_node_1_is_reported_on_node_1() {
    require_program("qemu-system-x86_64", "qemu-system-x86");
    let root = repo_root();
    let script = root.join("tests/vm/guest-memory-test.sh");
    let dir = tempfile::tempdir().expect("temp dir");
    let json_path = dir.path().join("guest-snapshot.json");

    let start = Instant::now();
    let out = Command::new(&script)
        .arg(&json_path)
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let log = String::from_utf8_lossy(&out.stderr);
    eprintln!("{log}");
    eprintln!("guest-memory-test.sh took {:.1?}", start.elapsed());
    assert!(
        out.status.success(),
        "{} failed ({}); its output is above",
        script.display(),
        out.status
    );

    let text = std::fs::read_to_string(&json_path).expect("the script's JSON output");
    let snap: Snapshot = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("numaplace's JSON from the guest does not parse: {e}\n{text}"));

    let group = snap
        .groups
        .iter()
        .find(|g| g.cmdline.first().map(String::as_str) == Some("alloc_on_node"))
        .unwrap_or_else(|| panic!("no alloc_on_node process in the guest's snapshot:\n{text}"));
    assert_eq!(group.kind, GroupKind::Process, "{text}");
    assert_eq!(group.cmdline, ["alloc_on_node", "1", "64"], "{text}");
    let memory = group
        .memory
        .as_ref()
        .unwrap_or_else(|| panic!("no per-node memory for pid {}:\n{text}", group.pid));
    let anon = |node: u32| memory.get(&node).map_or(0, |m| m.anon);
    assert!(
        anon(1) >= 60 * MIB,
        "node 1 holds {} bytes of anonymous memory of pid {}, want >= 60 MiB: {memory:?}",
        anon(1),
        group.pid
    );
    assert!(
        anon(0) < 16 * MIB,
        "node 0 holds {} bytes of anonymous memory of pid {}, want < 16 MiB: {memory:?}",
        anon(0),
        group.pid
    );
}
