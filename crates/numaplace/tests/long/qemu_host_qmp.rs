//! A real QEMU on this host, started WITHOUT `debug-threads=on` (its
//! threads are all `qemu-system-x86`, so their names say nothing), is
//! listed by `numaplace tasks --vms` through the QMP socket its config
//! names: every vCPU with the thread QEMU runs it in, and the guest's
//! name. The truth is asked of QEMU itself on a second QMP socket, by a
//! few lines of client written here, not numaplace's. TCG, stopped with
//! `-S`: no KVM and no guest kernel needed. Ignored by default; `.ci/run`
//! runs it with `--ignored`.

use crate::common;

use common::require_program;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use numaplace_model::{GroupKind, Snapshot};

const VM_NAME: &str = "np-qmp-vm";
const VCPUS: u32 = 3;
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// QEMU's own answer to `query-cpus-fast` on `path`: vCPU index -> thread.
fn truth(path: &Path) -> BTreeMap<u32, i32> {
    let mut s = UnixStream::connect(path).expect("connect to the truth socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let reply = |r: &mut BufReader<UnixStream>| loop {
        let mut line = String::new();
        r.read_line(&mut line).expect("a line from QEMU");
        let v: serde_json::Value = serde_json::from_str(&line).expect("QEMU speaks JSON");
        if v.get("event").is_none() {
            return v;
        }
    };
    assert!(reply(&mut r).get("QMP").is_some(), "greeting");
    s.write_all(b"{\"execute\": \"qmp_capabilities\"}\n")
        .unwrap();
    assert!(reply(&mut r).get("return").is_some());
    s.write_all(b"{\"execute\": \"query-cpus-fast\"}\n")
        .unwrap();
    let v = reply(&mut r);
    v["return"]
        .as_array()
        .unwrap_or_else(|| panic!("query-cpus-fast: {v}"))
        .iter()
        .map(|c| {
            (
                c["cpu-index"].as_u64().unwrap() as u32,
                c["thread-id"].as_i64().unwrap() as i32,
            )
        })
        .collect()
}

fn numaplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run numaplace")
}

#[test]
#[ignore = "starts QEMU: .ci/run runs it with --ignored"]
fn qemu_without_thread_names_is_found_through_its_qmp_socket() {
    require_program("qemu-system-x86_64", "qemu-system-x86");
    let start = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("numaplace.qmp");
    let check = dir.path().join("truth.sock");
    let child = Command::new("qemu-system-x86_64")
        .args([
            "-name",
            &format!("guest={VM_NAME}"),
            "-machine",
            "pc",
            "-accel",
            "tcg",
            "-smp",
            &VCPUS.to_string(),
            "-m",
            "64M",
            "-display",
            "none",
            "-nodefaults",
            "-S",
            "-qmp",
            &format!("unix:{},server=on,wait=off", ours.display()),
            "-qmp",
            &format!("unix:{},server=on,wait=off", check.display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start qemu-system-x86_64");
    let mut qemu = common::KillOnDrop(child);
    let pid = qemu.0.id();
    let deadline = Instant::now() + START_TIMEOUT;
    while !(ours.exists() && check.exists()) {
        if let Some(status) = qemu.0.try_wait().expect("poll qemu") {
            let mut err = String::new();
            if let Some(mut e) = qemu.0.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("qemu-system-x86_64 exited early ({status}): {err}");
        }
        assert!(
            Instant::now() < deadline,
            "QEMU made no QMP sockets within {START_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let want = truth(&check);
    assert_eq!(want.len(), VCPUS as usize, "QEMU's own answer: {want:?}");
    let names = common::thread_names(pid);
    eprintln!("QEMU pid {pid}: vCPU -> thread {want:?}; its threads {names:?}");
    for tid in want.values() {
        assert!(
            names.contains_key(tid),
            "thread {tid} not in /proc/{pid}/task"
        );
    }
    assert!(
        names.values().all(|c| !c.starts_with("CPU ")),
        "without debug-threads no thread is named like a vCPU: {names:?}"
    );

    let config = dir.path().join("numaplace.toml");
    std::fs::write(
        &config,
        format!(
            "[vms]\nqmp = [\"{}\"]\nlibvirt = false\n",
            dir.path().join("*.qmp").display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let o = numaplace(&[
        "tasks",
        "--vms",
        "--interval",
        "0",
        "--json",
        "--config",
        config,
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "numaplace tasks failed ({}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let snap: Snapshot =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("no Snapshot JSON ({e}):\n{text}"));
    let vm = snap
        .group(pid as i32)
        .unwrap_or_else(|| panic!("QEMU (pid {pid}) not among the VMs:\n{text}"));
    assert_eq!(
        vm.kind,
        GroupKind::Vm {
            name: Some(VM_NAME.into()),
            accel: "TCG".into(),
            evidence: format!("qmp {} (qemu executable)", ours.display()),
        },
        "{text}"
    );
    let seen: BTreeMap<u32, i32> = snap
        .tasks
        .iter()
        .filter(|t| t.tgid == pid as i32)
        .filter_map(|t| t.vcpu.map(|n| (n, t.tid)))
        .collect();
    assert_eq!(
        seen, want,
        "vCPU index -> thread, numaplace vs QEMU:\n{text}"
    );
    let listed: BTreeSet<i32> = vm.threads.iter().copied().collect();
    let proc: BTreeSet<i32> = common::thread_names(pid).keys().copied().collect();
    assert!(
        want.values()
            .all(|t| listed.contains(t) && proc.contains(t)),
        "{listed:?} {proc:?}"
    );

    // QEMU's monitor serves one client at a time: while another holds
    // numaplace's socket, the VM is not found, numaplace says why, and the
    // wait is bounded (the exchange's deadline, well under a second).
    {
        let mut holder = UnixStream::connect(&ours).expect("hold numaplace's socket");
        holder
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut greeting = [0u8; 16];
        holder
            .read_exact(&mut greeting)
            .expect("QEMU greets the holder");
        let o = numaplace(&[
            "tasks",
            "--vms",
            "--interval",
            "0",
            "--json",
            "--config",
            config,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{err}");
        let snap: Snapshot = serde_json::from_str(&text).unwrap();
        assert!(snap.group(pid as i32).is_none(), "{text}");
        eprintln!("while another client holds the socket:\n{err}");
        assert!(
            err.contains("numaplace.qmp") && err.contains("one client at a time"),
            "{err}"
        );
    }

    // Without the config, nothing names it a VM: QMP found it.
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "[vms]\nlibvirt = false\n").unwrap();
    let o = numaplace(&[
        "tasks",
        "--vms",
        "--interval",
        "0",
        "--json",
        "--config",
        empty.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    let snap: Snapshot = serde_json::from_str(&text).unwrap();
    assert!(snap.group(pid as i32).is_none(), "{text}");

    // The table, as an operator sees it.
    let o = numaplace(&["tasks", "--vms", "--interval", "0", "--config", config]);
    let table = String::from_utf8_lossy(&o.stdout);
    eprintln!("{table}");
    assert!(table.contains(&format!("vm:{VM_NAME} (TCG)")), "{table}");
    for (i, tid) in &want {
        let line = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&tid.to_string()))
            .unwrap_or_else(|| panic!("thread {tid} not in the table:\n{table}"));
        assert!(line.contains(&format!("vcpu{i}")), "{line}");
    }
    drop(qemu);
    eprintln!("qemu_host_qmp took {:.1?}", start.elapsed());
}
