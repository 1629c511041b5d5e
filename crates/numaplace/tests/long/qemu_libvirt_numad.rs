//! libvirt itself asking numaplace for a placement: a domain with
//! `<vcpu placement='auto'>` started by Debian's libvirt (its embedded QEMU
//! driver, `virt-qemu-run`, the same domain-start code as libvirtd's:
//! qemuProcessPrepareDomainNUMAPlacement), with `/usr/bin/numad` being the
//! package's wrapper (`packaging/numad`) in front of this build's binary.
//!
//! Nothing on the host changes: the test runs in a private mount namespace
//! (`unshare --mount`) where an overlay puts `numad` into `/usr/bin` and a
//! copy of `/etc/passwd` has the `libvirt-qemu` user libvirt's QEMU driver
//! insists on looking up (Debian's libvirt-daemon-system would create it).
//! Needs root, `virt-qemu-run` (libvirt-daemon-driver-qemu) and QEMU;
//! `./setup.sh test` runs it with the QEMU tests.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{repo_root, require_program, text};

/// The domain: one vCPU, 64 MiB (libvirt asks `numad -w 1:64`), nothing to
/// boot (SeaBIOS keeps it running), TCG.
const DOMAIN: &str = "<domain type='qemu'>
  <name>numaplace-auto</name>
  <memory unit='KiB'>65536</memory>
  <vcpu placement='auto'>1</vcpu>
  <numatune><memory mode='strict' placement='auto'/></numatune>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices>
</domain>
";

/// Runs in the private mount namespace with the work directory as $1:
/// the overlay and the passwd copy, the domain started, its status XML
/// and QEMU's allowed CPUs copied out once it runs, then stopped.
const IN_NAMESPACE: &str = r#"#!/bin/sh
set -eu
d=$1
mount --bind "$d/passwd" /etc/passwd
mount --bind "$d/group" /etc/group
mount -t overlay overlay -o "lowerdir=/usr/bin,upperdir=$d/up,workdir=$d/work" /usr/bin
virt-qemu-run -r "$d/root" "$d/dom.xml" >"$d/run.log" 2>&1 &
pid=$!
status="$d/root/run/qemu/numaplace-auto.xml"
i=0
while [ "$i" -lt 600 ] && kill -0 "$pid" 2>/dev/null; do
    if [ -s "$d/root/run/qemu/numaplace-auto.pid" ] && [ -f "$status" ]; then
        cp "$status" "$d/status.xml"
        qemu=$(cat "$d/root/run/qemu/numaplace-auto.pid")
        grep '^Cpus_allowed_list' "/proc/$qemu/status" >"$d/qemu-cpus" || true
        break
    fi
    sleep 0.1
    i=$((i + 1))
done
kill "$pid" 2>/dev/null || true
wait "$pid" || true
"#;

/// Sets up the work directory with `numad` (a shim logging its arguments,
/// then running `answer`, where `{dir}` is the work directory) and runs the
/// domain; returns the directory.
fn run_domain(answer: &str) -> tempfile::TempDir {
    require_program("virt-qemu-run", "libvirt-daemon-driver-qemu");
    require_program("qemu-system-x86_64", "qemu-system-x86");
    require_program("unshare", "util-linux");
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "needs root (mount namespaces)");
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let write = |rel: &str, body: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt as _;
        let f = p.join(rel);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, body).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    for (file, line) in [
        (
            "passwd",
            "libvirt-qemu:x:64055:64055:libvirt qemu:/var/lib/libvirt:/usr/sbin/nologin\n",
        ),
        ("group", "libvirt-qemu:x:64055:\n"),
    ] {
        let mut body = std::fs::read_to_string(Path::new("/etc").join(file)).unwrap();
        if !body.lines().any(|l| l.starts_with("libvirt-qemu:")) {
            body.push_str(line);
        }
        write(file, &body, 0o644);
    }
    // The packaged layout: the wrapper beside ../../bin/numaplace.
    let wrapper = std::fs::read_to_string(repo_root().join("packaging/numad")).unwrap();
    write("np/usr/lib/numaplace/numad", &wrapper, 0o755);
    std::fs::create_dir_all(p.join("np/usr/bin")).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_numaplace"),
        p.join("np/usr/bin/numaplace"),
    )
    .unwrap();
    let shim = format!(
        "#!/bin/sh\necho \"$*\" >>{}/numad-args\n{}\n",
        p.display(),
        answer.replace("{dir}", &p.display().to_string())
    );
    write("up/numad", &shim, 0o755);
    std::fs::create_dir_all(p.join("work")).unwrap();
    // The embedded driver's config: QEMU as root, its output to a file
    // (no virtlogd).
    write(
        "root/etc/qemu.conf",
        "user = \"root\"\ngroup = \"root\"\nstdio_handler = \"file\"\n",
        0o644,
    );
    write("dom.xml", DOMAIN, 0o644);
    write("in-namespace.sh", IN_NAMESPACE, 0o755);
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private"])
        .arg(p.join("in-namespace.sh"))
        .arg(p)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "unshare: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    d
}

fn read(d: &tempfile::TempDir, rel: &str) -> String {
    std::fs::read_to_string(d.path().join(rel)).unwrap_or_default()
}

/// A node list as the kernel writes it, expanded.
fn expand(list: &str) -> Vec<u32> {
    list.trim()
        .split(',')
        .filter(|r| !r.is_empty())
        .flat_map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()
        })
        .collect()
}

#[test]
#[ignore = "starts a libvirt domain under QEMU as root: ./setup.sh test runs it"]
fn libvirt_places_a_domain_where_numaplace_says() {
    let d = run_domain("exec {dir}/np/usr/lib/numaplace/numad \"$@\"");
    let log = read(&d, "run.log");
    // libvirt asked exactly as virnuma.c formats it: 1 vCPU, 65536 KiB / 1024.
    assert_eq!(read(&d, "numad-args"), "-w 1:64\n", "{log}");
    assert!(!log.contains("cannot start VM"), "{log}");
    // The domain's status keeps the advice libvirt parsed:
    // <numad nodeset='...' cpuset='...'/>.
    let status = read(&d, "status.xml");
    let numad = status
        .lines()
        .find(|l| l.trim_start().starts_with("<numad "))
        .unwrap_or_else(|| panic!("no <numad> in the status: {status}\n{log}"));
    let attr = |name: &str| {
        let at = numad.find(&format!("{name}='")).unwrap() + name.len() + 2;
        numad[at..].split('\'').next().unwrap().to_string()
    };
    let nodes = expand(&attr("nodeset"));
    assert!(!nodes.is_empty(), "{numad}");
    // libvirt's CPUs for the advice are those nodes' CPUs ...
    let mut want: Vec<u32> = nodes
        .iter()
        .flat_map(|n| {
            expand(
                &std::fs::read_to_string(format!("/sys/devices/system/node/node{n}/cpulist"))
                    .unwrap(),
            )
        })
        .collect();
    want.sort_unstable();
    assert_eq!(expand(&attr("cpuset")), want, "{numad}");
    // ... and QEMU runs on them.
    let cpus = read(&d, "qemu-cpus");
    let cpus = cpus
        .strip_prefix("Cpus_allowed_list:")
        .unwrap_or_else(|| panic!("QEMU's CPUs: {cpus:?}\n{log}"));
    assert_eq!(expand(cpus), want);
}

#[test]
#[ignore = "starts a libvirt domain under QEMU as root: ./setup.sh test runs it"]
fn libvirt_refuses_an_answer_it_cannot_parse() {
    // The control: the same start, numad answering what virBitmapParse
    // refuses, fails, so the run above really went through the parser.
    let d = run_domain("echo '0-x'");
    let log = read(&d, "run.log");
    assert_eq!(read(&d, "numad-args"), "-w 1:64\n", "{log}");
    assert!(log.contains("Failed to parse bitmap '0-x"), "{log}");
    assert!(read(&d, "status.xml").is_empty());
}
