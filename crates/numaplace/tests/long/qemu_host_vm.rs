//! A real QEMU process on this host is listed as a VM, with its vCPU
//! threads; a process that merely names a thread like a vCPU is not. Starts
//! `qemu-system-x86_64` (stopped with `-S`, TCG: no KVM needed), so it is
//! ignored by default; `.ci/run` runs it with `--ignored`.

use crate::common;

use common::require_program;
use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use numaplace_model::{GroupKind, Snapshot};

const VM_NAME: &str = "np-test-vm";
const THREADS_TIMEOUT: Duration = Duration::from_secs(20);

fn numaplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run numaplace")
}

fn snapshot(args: &[&str]) -> (Snapshot, String) {
    let o = numaplace(args);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "numaplace {args:?} failed ({}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let snap = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("numaplace {args:?} printed no Snapshot JSON: {e}\n{text}"));
    (snap, text)
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn qemu_is_a_vm_and_a_thread_name_alone_is_not() {
    require_program("qemu-system-x86_64", "qemu-system-x86");
    let start = Instant::now();

    // An impostor in this very process: a thread named like a KVM vCPU.
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let impostor = std::thread::Builder::new()
        .name("CPU 0/KVM".into())
        .spawn(move || {
            let _ = stop_rx.recv();
        })
        .expect("spawn the impostor thread");

    let child = Command::new("qemu-system-x86_64")
        .args([
            "-name",
            &format!("guest={VM_NAME},debug-threads=on"),
            "-machine",
            "pc",
            "-accel",
            "tcg",
            "-smp",
            "2",
            "-m",
            "64M",
            "-display",
            "none",
            "-nodefaults",
            "-S",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start qemu-system-x86_64");
    let mut qemu = common::KillOnDrop(child);
    let pid = qemu.0.id();

    // QEMU names its vCPU threads `CPU <n>/TCG` (debug-threads=on).
    let want = ["CPU 0/TCG", "CPU 1/TCG"];
    let deadline = Instant::now() + THREADS_TIMEOUT;
    let vcpu_tids: BTreeMap<u32, i32> = loop {
        if let Some(status) = qemu.0.try_wait().expect("poll qemu") {
            let mut err = String::new();
            if let Some(mut e) = qemu.0.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("qemu-system-x86_64 exited early ({status}): {err}");
        }
        let names = common::thread_names(pid);
        let found: BTreeMap<u32, i32> = names
            .iter()
            .filter_map(|(&tid, comm)| want.iter().position(|w| w == comm).map(|n| (n as u32, tid)))
            .collect();
        if found.len() == want.len() {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "QEMU (pid {pid}) did not show threads {want:?} within {THREADS_TIMEOUT:?}; \
             its threads: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "QEMU pid {pid} has vCPU threads {vcpu_tids:?} after {:.1?}",
        start.elapsed()
    );

    let (snap, text) = snapshot(&["tasks", "--vms", "--interval", "0", "--json"]);
    let vms: Vec<_> = snap
        .groups
        .iter()
        .filter(|g| matches!(&g.kind, GroupKind::Vm { name: Some(n), .. } if n == VM_NAME))
        .collect();
    assert_eq!(vms.len(), 1, "want one VM named {VM_NAME}:\n{text}");
    let vm = vms[0];
    assert_eq!(
        vm.pid as u32, pid,
        "the {VM_NAME} VM is not our QEMU:\n{text}"
    );
    assert_eq!(
        vm.kind,
        GroupKind::Vm {
            name: Some(VM_NAME.into()),
            accel: "TCG".into(),
            evidence: "qemu executable".into(),
        },
        "{text}"
    );
    let seen: BTreeMap<u32, i32> = snap
        .tasks
        .iter()
        .filter(|t| t.tgid == vm.pid)
        .filter_map(|t| t.vcpu.map(|n| (n, t.tid)))
        .collect();
    assert_eq!(seen, vcpu_tids, "vCPU index -> tid of {VM_NAME}:\n{text}");
    for tid in vcpu_tids.values() {
        assert!(
            vm.threads.contains(tid),
            "thread {tid} not in the VM's group:\n{text}"
        );
    }

    // The impostor: not among the VMs, and a plain process when asked for.
    let me = std::process::id() as i32;
    assert!(
        snap.groups.iter().all(|g| g.pid != me),
        "the test process (pid {me}), which only names a thread \"CPU 0/KVM\", is listed as a VM:\n{text}"
    );
    let fake_tid = common::thread_names(me as u32)
        .into_iter()
        .find_map(|(tid, comm)| (comm == "CPU 0/KVM").then_some(tid))
        .expect("the impostor thread carries its name");
    let (own, text) = snapshot(&[
        "tasks",
        "--pid",
        &me.to_string(),
        "--interval",
        "0",
        "--json",
    ]);
    let group = own
        .group(me)
        .unwrap_or_else(|| panic!("numaplace --pid {me} does not list the test process:\n{text}"));
    assert_eq!(group.kind, GroupKind::Process, "{text}");
    let task = own
        .task(fake_tid)
        .unwrap_or_else(|| panic!("thread {fake_tid} (\"CPU 0/KVM\") not listed:\n{text}"));
    assert_eq!(task.comm, "CPU 0/KVM", "{text}");
    assert_eq!(
        task.vcpu, None,
        "an impostor thread got a vCPU index:\n{text}"
    );

    drop(stop_tx);
    impostor.join().expect("impostor thread");
    drop(qemu);
    eprintln!("qemu_host_vm took {:.1?}", start.elapsed());
}
