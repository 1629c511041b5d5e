//! The Debian package (`./setup.sh deb`): the files an operator gets, with
//! their modes, the conffile, the unit, and that installing it starts
//! nothing. Ignored by the plain run, which does not build the package:
//! `./setup.sh test` builds it, then runs this with `--ignored`.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::{repo_root, require_program, text};

/// The package `./setup.sh deb` left in the target directory.
fn package() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let dir = target.join("debian");
    let want = format!("numaplace_{}-1_", env!("CARGO_PKG_VERSION"));
    let found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}: build the package first (./setup.sh deb)",
                dir.display()
            )
        })
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&want) && n.ends_with(".deb")
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "want one {want}*.deb in {}: {found:?}",
        dir.display()
    );
    found.into_iter().next().unwrap()
}

fn dpkg_deb(args: &[&str]) -> String {
    let o = Command::new("dpkg-deb")
        .args(args)
        .output()
        .expect("run dpkg-deb");
    assert!(o.status.success(), "dpkg-deb {args:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

/// File path (without the leading `./`) -> mode string, for every regular
/// file in the package.
fn files(deb: &str) -> BTreeMap<String, String> {
    dpkg_deb(&["-c", deb])
        .lines()
        .filter(|l| l.starts_with('-'))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cols[1], "0/0", "owned by root: {l}");
            let path = cols.last().unwrap().trim_start_matches("./").to_string();
            (path, cols[0].to_string())
        })
        .collect()
}

#[test]
#[ignore = "needs the package: ./setup.sh deb (./setup.sh test runs it)"]
fn package_holds_the_binary_unit_config_man_pages_and_completions() {
    require_program("dpkg-deb", "dpkg");
    let deb = package();
    let deb = deb.to_str().unwrap();
    let got = files(deb);

    // The man pages are the binary's own: one per visible command.
    let man = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(["manpages", man.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut pages: Vec<String> = std::fs::read_dir(man.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    assert!(pages.len() >= 10, "{pages:?}");

    let mut want: BTreeMap<String, String> = [
        ("usr/bin/numaplace", "-rwxr-xr-x"),
        ("etc/numaplace/numaplace.toml", "-rw-r--r--"),
        ("usr/lib/systemd/system/numaplace.service", "-rw-r--r--"),
        ("usr/share/doc/numaplace/README.md", "-rw-r--r--"),
        ("usr/share/doc/numaplace/deploy.md", "-rw-r--r--"),
        ("usr/lib/numaplace/numad", "-rwxr-xr-x"),
        ("usr/share/doc/numaplace/copyright", "-rw-r--r--"),
        (
            "usr/share/doc/numaplace/examples/numaplace.toml",
            "-rw-r--r--",
        ),
        (
            "usr/share/bash-completion/completions/numaplace",
            "-rw-r--r--",
        ),
        ("usr/share/zsh/vendor-completions/_numaplace", "-rw-r--r--"),
        (
            "usr/share/fish/vendor_completions.d/numaplace.fish",
            "-rw-r--r--",
        ),
    ]
    .into_iter()
    .map(|(p, m)| (p.to_string(), m.to_string()))
    .collect();
    for p in &pages {
        want.insert(format!("usr/share/man/man1/{p}.gz"), "-rw-r--r--".into());
    }
    assert_eq!(got, want, "the package's files and modes");

    // Control: name, version, the shared libraries it links.
    let control = dpkg_deb(&["-f", deb]);
    assert!(control.contains("Package: numaplace\n"), "{control}");
    let version = format!("Version: {}-1\n", env!("CARGO_PKG_VERSION"));
    assert!(control.contains(&version), "{control}");
    assert!(
        control.contains("libhwloc"),
        "Depends names libhwloc: {control}"
    );
    assert!(
        control.contains("Recommends: libpfm4"),
        "Recommends names libpfm4 (loaded at run time): {control}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let ctl = tmp.path().join("DEBIAN");
    let root = tmp.path().join("root");
    dpkg_deb(&["-e", deb, ctl.to_str().unwrap()]);
    dpkg_deb(&["-x", deb, root.to_str().unwrap()]);

    // The config is a conffile (an operator's edits survive upgrades), is
    // the repository's packaging/numaplace.toml, and names no scope.
    let conffiles = std::fs::read_to_string(ctl.join("conffiles")).unwrap();
    assert!(
        conffiles
            .lines()
            .any(|l| l == "/etc/numaplace/numaplace.toml"),
        "{conffiles}"
    );
    let shipped = std::fs::read(root.join("etc/numaplace/numaplace.toml")).unwrap();
    assert_eq!(
        shipped,
        std::fs::read(repo_root().join("packaging/numaplace.toml")).unwrap()
    );

    // The unit runs the packaged binary on the packaged config.
    let unit =
        std::fs::read_to_string(root.join("usr/lib/systemd/system/numaplace.service")).unwrap();
    assert!(
        unit.lines()
            .any(|l| l == "ExecStart=/usr/bin/numaplace run --config /etc/numaplace/numaplace.toml"),
        "{unit}"
    );

    // Installing starts and enables nothing: the only enable is for a unit
    // the operator had enabled before (an upgrade), the only restart a
    // try-restart of one already running.
    let postinst = std::fs::read_to_string(ctl.join("postinst")).unwrap();
    let lines: Vec<&str> = postinst.lines().map(str::trim).collect();
    for (i, l) in lines.iter().enumerate() {
        assert!(
            !l.contains("invoke start") && !l.contains("systemctl start"),
            "{postinst}"
        );
        assert!(!l.contains("$_dh_action"), "{postinst}");
        if l.starts_with("deb-systemd-helper enable") {
            assert!(
                lines[..i]
                    .iter()
                    .rev()
                    .find(|l| l.starts_with("if "))
                    .is_some_and(|l| l.contains("was-enabled")),
                "enable outside a was-enabled check: {postinst}"
            );
        }
    }

    // The packaged binary says its version and commit.
    let o = Command::new(root.join("usr/bin/numaplace"))
        .arg("--version")
        .output()
        .unwrap();
    let v = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        v.starts_with(&format!("numaplace {} (git ", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
}

/// The package extracted into a temporary directory: (dir, control, root).
fn extracted() -> (tempfile::TempDir, PathBuf, PathBuf) {
    require_program("dpkg-deb", "dpkg");
    let deb = package();
    let deb = deb.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let ctl = tmp.path().join("DEBIAN");
    let root = tmp.path().join("root");
    dpkg_deb(&["-e", deb, ctl.to_str().unwrap()]);
    dpkg_deb(&["-x", deb, root.to_str().unwrap()]);
    (tmp, ctl, root)
}

/// `/usr/lib/numaplace/numad` as libvirt runs numad (`numad -w
/// VCPUS:MIB`, src/util/virnuma.c): the packaged binary's node list on
/// stdout, as numad prints it. Any other numad command line is refused in
/// one line (no real numad diverted here), so is a bad request.
#[test]
#[ignore = "needs the package: ./setup.sh deb (./setup.sh test runs it)"]
fn packaged_numad_wrapper_answers_libvirts_query() {
    let (tmp, _ctl, root) = extracted();
    let numad = root.join("usr/lib/numaplace/numad");
    // The repository's wrapper, which the libvirt and divert tests run.
    assert_eq!(
        std::fs::read(&numad).unwrap(),
        std::fs::read(repo_root().join("packaging/numad")).unwrap()
    );
    let is_node_list = |s: &str| {
        s.ends_with('\n')
            && s.lines().count() == 1
            && !s.trim().is_empty()
            && s.trim().split(',').all(|r| {
                r.split('-').count() <= 2
                    && r.split('-')
                        .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
    };
    for args in [&["-w", "1:64"][..], &["-w1:64"]] {
        let o = Command::new(&numad).args(args).output().unwrap();
        let out = text(&o.stdout);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
        assert!(is_node_list(&out), "{args:?}: {out:?}");
        for r in out.trim().split(',') {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
            for n in a..=b {
                let dir = format!("/sys/devices/system/node/node{n}");
                assert!(std::path::Path::new(&dir).is_dir(), "{out:?}: no {dir}");
            }
        }
    }
    for args in [&["-w", "0:64"][..], &["-i", "15"], &[]] {
        let o = Command::new(&numad).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o.stdout));
        assert_eq!(
            text(&o.stderr).lines().count(),
            1,
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    // The message for a numad command line it does not answer says why.
    let o = Command::new(&numad).args(["-i", "15"]).output().unwrap();
    assert!(
        text(&o.stderr).contains("only 'numad -w"),
        "{}",
        text(&o.stderr)
    );

    // Copied anywhere else, it says where it belongs instead of running
    // some other numaplace.
    let stray = tmp.path().join("numad");
    std::fs::copy(&numad, &stray).unwrap();
    let o = Command::new(&stray).args(["-w", "1:64"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("/usr/lib/numaplace"),
        "{}",
        text(&o.stderr)
    );
}

/// The postrm undoes deploy.md's libvirt steps and only those: the link
/// to the wrapper and the local diversion; the systemd part is still
/// there; the script is valid sh.
#[test]
#[ignore = "needs the package: ./setup.sh deb (./setup.sh test runs it)"]
fn postrm_removes_only_the_numad_link_it_documents() {
    let (_tmp, ctl, _root) = extracted();
    let postrm = ctl.join("postrm");
    let text_of = std::fs::read_to_string(&postrm).unwrap();
    let o = Command::new("sh").arg("-n").arg(&postrm).output().unwrap();
    assert!(o.status.success(), "sh -n postrm: {}", text(&o.stderr));
    assert!(
        !text_of.contains("#DEBHELPER#"),
        "the token is replaced: {text_of}"
    );
    assert!(
        text_of.contains("deb-systemd-helper"),
        "cargo-deb's systemd part is kept: {text_of}"
    );
    assert!(
        text_of.contains(r#"[ "$(readlink "$link")" = /usr/lib/numaplace/numad ]"#),
        "only our own link is removed: {text_of}"
    );
    assert!(
        text_of.contains("dpkg-divert --local --rename --remove /usr/bin/numad"),
        "{text_of}"
    );
    // Both halves are what deploy.md tells the operator to do.
    let doc = std::fs::read_to_string(repo_root().join("docs/deploy.md")).unwrap();
    assert!(
        doc.contains(
            "dpkg-divert --local --rename --divert /usr/bin/numad.distrib --add /usr/bin/numad"
        ),
        "deploy.md"
    );
    assert!(
        doc.contains("ln -s /usr/lib/numaplace/numad /usr/bin/numad"),
        "deploy.md"
    );
}
