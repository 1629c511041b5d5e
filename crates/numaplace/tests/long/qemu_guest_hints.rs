//! \[Rao13\] §4.3 end to end: a QEMU guest on this host (TCG, 2 vCPUs,
//! `-name guest=...,debug-threads=on`) with a virtio-serial port whose host
//! end is a UNIX socket, `numaplace guest` running in it, and a program
//! pinned to vCPU 1 there (tests/vm/guest-hints-initramfs.sh). On the host,
//! `numaplace tasks --vms --guest-hints SOCKET` must name vCPU 1 of that VM
//! (and only it) as hinted, the daemon (dry run, BRM) must log the same;
//! once the pinned program ends the hint must clear. Then the guest floods
//! the port with /dev/urandom: the daemon's rounds go on, and the garbage
//! is reported once and ignored. Boots QEMU, so it is
//! ignored by default; `.ci/run` runs it with `--ignored`.

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{repo_root, require_program, text};
use numaplace_model::{GroupKind, Snapshot};

const VM_NAME: &str = "np-hints";
/// Boot, module loading and the agent's first rounds under TCG.
const PINNED_WITHIN: Duration = Duration::from_secs(240);
/// How long the host waits for a hint to show or to clear.
const HINT_WITHIN: Duration = Duration::from_secs(60);

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The console's lines, as they come.
fn console(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().expect("QEMU's stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let line = line.trim_end_matches('\r').to_string();
            eprintln!("guest| {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_for(rx: &mpsc::Receiver<String>, marker: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(marker) => return,
            Ok(l) if l.contains("@@NUMAPLACE-VM-EXIT=") => panic!("the guest ended: {l}"),
            Ok(_) => {}
            Err(e) => panic!("no {marker} on the guest's console within {within:?}: {e}"),
        }
    }
}

fn say(stdin: &mut ChildStdin, line: &str) {
    stdin
        .write_all(format!("{line}\n").as_bytes())
        .and_then(|()| stdin.flush())
        .expect("write to the guest's console");
}

/// `tasks --vms --json` with the socket: the VM's hinted vCPUs (`None`:
/// its guest's hints are not live), and the table for the log.
fn hinted(pid: i32, socket: &str) -> Option<BTreeSet<u32>> {
    let args = [
        "tasks",
        "--vms",
        "--interval",
        "2s",
        "--guest-hints",
        socket,
    ];
    let o = common::numaplace(&[&args[..], &["--json"]].concat());
    assert!(o.status.success(), "tasks failed: {}", text(&o.stderr));
    let snap: Snapshot = serde_json::from_slice(&o.stdout).expect("a snapshot");
    let vm = snap
        .groups
        .iter()
        .find(|g| g.pid == pid)
        .unwrap_or_else(|| panic!("QEMU (pid {pid}) is not listed: {}", text(&o.stdout)));
    assert!(
        matches!(&vm.kind, GroupKind::Vm { name: Some(n), .. } if n == VM_NAME),
        "{:?}",
        vm.kind
    );
    let h = snap.guest_hints.get(&pid).cloned();
    let table = common::numaplace(&args);
    eprintln!("{}", text(&table.stdout));
    h
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + HINT_WITHIN;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {HINT_WITHIN:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
#[ignore = "boots QEMU: .ci/run runs it with --ignored"]
fn a_guest_pinning_a_program_to_vcpu_1_hints_that_vcpu_until_it_ends() {
    require_program("qemu-system-x86_64", "qemu-system-x86");
    let root = repo_root();
    let dir = tempfile::tempdir().unwrap();
    let initrd = dir.path().join("hints.cpio.gz");
    let o = Command::new(root.join("tests/vm/guest-hints-initramfs.sh"))
        .arg(&initrd)
        .current_dir(&root)
        .output()
        .expect("run guest-hints-initramfs.sh");
    assert!(o.status.success(), "initramfs: {}", text(&o.stderr));
    let socket = dir.path().join("hints.sock");
    let socket_s = socket.to_str().unwrap().to_string();

    let mut child = Command::new("qemu-system-x86_64")
        .args(["-name", &format!("guest={VM_NAME},debug-threads=on")])
        .args(["-machine", "pc", "-accel", "tcg", "-cpu", "max"])
        .args(["-m", "512M", "-smp", "2"])
        .arg("-kernel")
        .arg(root.join("tests/vm/work/vmlinuz"))
        .arg("-initrd")
        .arg(&initrd)
        .args(["-append", "console=ttyS0 panic=-1 quiet"])
        .args(["-nographic", "-no-reboot", "-net", "none"])
        .args([
            "-chardev",
            &format!("socket,id=hints,path={socket_s},server=on,wait=off"),
            "-device",
            "virtio-serial-pci",
            "-device",
            "virtserialport,chardev=hints,name=org.numaplace.hints.0",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start qemu-system-x86_64");
    let pid = child.id() as i32;
    let lines = console(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    let _qemu = KillOnDrop(child);

    wait_for(&lines, "@@HINTS-PINNED@@", PINNED_WITHIN);
    until("vCPU 1 hinted", || {
        hinted(pid, &socket_s) == Some(BTreeSet::from([1]))
    });

    // The daemon (dry run, BRM, on this one-node host: nothing to move)
    // takes the same hint into its rounds.
    let cfg = dir.path().join("np.toml");
    std::fs::write(
        &cfg,
        format!(
            "dry_run = true\n[policy]\nname = \"brm\"\n[scope]\nvms = true\n\
             [guest_hints]\nsockets = [\"{}/*.sock\"]\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let d = common::numaplace(&[
        "-v",
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--interval",
        "1s",
        "--rounds",
        "5",
    ]);
    let log = text(&d.stderr);
    eprintln!("daemon:\n{log}");
    assert!(d.status.success(), "the daemon failed: {log}");
    let want = format!("guest hints: vm:{VM_NAME} (pid {pid}): the guest speaks; vCPUs hinted: 1");
    assert!(log.contains(&want), "wanted {want:?} in the daemon's log");

    say(&mut stdin, "unpin");
    wait_for(&lines, "@@HINTS-UNPINNED@@", HINT_WITHIN);
    until("the hint cleared", || {
        hinted(pid, &socket_s) == Some(BTreeSet::new())
    });
    // A guest that floods its port with garbage: the daemon's rounds go on
    // (five, one a second), the guest's hints are ignored, and each kind of
    // trouble is said once.
    say(&mut stdin, "flood");
    wait_for(&lines, "@@HINTS-FLOODING", HINT_WITHIN);
    let t0 = Instant::now();
    let d = common::numaplace(&[
        "-v",
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--interval",
        "1s",
        "--rounds",
        "5",
    ]);
    let took = t0.elapsed();
    let log = text(&d.stderr);
    eprintln!("daemon under a flood ({took:.1?}):\n{log}");
    assert!(d.status.success(), "the daemon failed: {log}");
    assert!(
        took < Duration::from_secs(60),
        "five 1 s rounds took {took:?} under the flood"
    );
    let refused = log.matches("refused and ignored").count();
    assert_eq!(refused, 1, "garbage said once: {log}");
    assert!(
        log.matches("its hints are ignored while it does").count() <= 1,
        "a flood said at most once: {log}"
    );
    say(&mut stdin, "done");
    wait_for(&lines, "@@NUMAPLACE-VM-EXIT=0@@", HINT_WITHIN);
}
