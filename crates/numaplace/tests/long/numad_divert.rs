//! docs/deploy.md's way of putting numaplace where libvirt runs numad,
//! run as written: on a machine with a numad, the local diversion and the
//! link; then `numad -w` is numaplace's and every other numad command line
//! still the real numad's; then the package's postrm puts it all back.
//!
//! In a private mount namespace with overlays on /usr/bin, /usr/lib and
//! /var/lib/dpkg, so the host's files and dpkg database do not change.
//! Needs root and unshare; `./setup.sh test` runs it with the long tests.

use crate::common;

use std::process::Command;

use common::{repo_root, require_program, text};

/// The commands of deploy.md's "Letting libvirt run numaplace as numad",
/// without their `sudo`: the first sh block after that heading.
fn documented_commands() -> Vec<String> {
    let doc = std::fs::read_to_string(repo_root().join("docs/deploy.md")).unwrap();
    let section = doc
        .split("### Letting libvirt run numaplace as numad")
        .nth(1)
        .expect("deploy.md has the section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block");
    block
        .lines()
        .filter_map(|l| l.strip_prefix("sudo "))
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .collect()
}

const IN_NAMESPACE: &str = r#"#!/bin/sh
set -eu
d=$1
for t in usr/bin usr/lib var/lib/dpkg; do
    mkdir -p "$d/up/$t" "$d/work/$t"
    mount -t overlay overlay -o "lowerdir=/$t,upperdir=$d/up/$t,workdir=$d/work/$t" "/$t"
done
# A stand-in for Debian's numad, recording how it is run.
printf '#!/bin/sh\necho "real numad $*" >>%s/log\n' "$d" >/usr/bin/numad
chmod 755 /usr/bin/numad
# The package's two files.
mkdir -p /usr/lib/numaplace
cp "$d/wrapper" /usr/lib/numaplace/numad
chmod 755 /usr/lib/numaplace/numad
ln -sf "$d/numaplace" /usr/bin/numaplace
# deploy.md's commands.
sh -eu "$d/documented.sh"
/usr/bin/numad -w 1:64 >"$d/advice"
/usr/bin/numad -i 15
dpkg-divert --list /usr/bin/numad >"$d/diverted"
# dpkg -r numaplace: the files go, then the postrm runs.
rm /usr/lib/numaplace/numad /usr/bin/numaplace
sh -eu "$d/postrm" remove
dpkg-divert --list /usr/bin/numad >"$d/after-diverted"
if [ -L /usr/bin/numad ]; then echo link >"$d/after-kind"; else echo file >"$d/after-kind"; fi
[ -e /usr/bin/numad.distrib ] && echo yes >"$d/distrib-left" || true
/usr/bin/numad -V
"#;

#[test]
#[ignore = "mounts overlays in a private namespace as root: ./setup.sh test runs it"]
fn the_documented_divert_serves_libvirt_keeps_numad_and_is_undone_by_postrm() {
    require_program("unshare", "util-linux");
    require_program("dpkg-divert", "dpkg");
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "needs root (mount namespaces)");
    let commands = documented_commands();
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert!(
        commands[0].starts_with("dpkg-divert --local --rename"),
        "{commands:?}"
    );
    assert!(
        commands[1].starts_with("ln -s /usr/lib/numaplace/numad"),
        "{commands:?}"
    );

    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let copy = |from: std::path::PathBuf, to: &str| std::fs::copy(from, p.join(to)).unwrap();
    copy(repo_root().join("packaging/numad"), "wrapper");
    copy(repo_root().join("packaging/debian/postrm"), "postrm");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_numaplace"), p.join("numaplace")).unwrap();
    std::fs::write(p.join("documented.sh"), commands.join("\n") + "\n").unwrap();
    std::fs::write(p.join("in-namespace.sh"), IN_NAMESPACE).unwrap();
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh"])
        .arg(p.join("in-namespace.sh"))
        .arg(p)
        .output()
        .unwrap();
    let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
    assert!(
        o.status.success(),
        "{}{}\nlog: {}",
        text(&o.stdout),
        text(&o.stderr),
        read("log")
    );

    // While diverted: -w is numaplace's node list ...
    let advice = read("advice");
    assert!(
        advice.ends_with('\n')
            && advice
                .trim()
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b',' || b == b'-'),
        "{advice:?}"
    );
    assert!(!advice.trim().is_empty());
    assert!(
        read("diverted").contains("local diversion of /usr/bin/numad to /usr/bin/numad.distrib"),
        "{}",
        read("diverted")
    );
    // ... and the rest the real numad's; after the postrm, numad is the
    // real one again at its own path, with no diversion left.
    assert_eq!(read("log"), "real numad -i 15\nreal numad -V\n");
    assert!(
        read("after-diverted").trim().is_empty(),
        "{}",
        read("after-diverted")
    );
    assert_eq!(read("after-kind"), "file\n");
    assert_eq!(read("distrib-left"), "", "numad.distrib renamed back");
}
