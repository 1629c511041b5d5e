//! `numaplace exec`: on this host, the command really executed (same pid,
//! exit status and signal passed through, its CPUs and memory policy read
//! from its own /proc), the shell's 126/127 and numaplace's own 125; on
//! real 2- and 4-node machines' sysfs snapshots, the choice (`--dry-run
//! --json --sysfs-root`). The 2-node QEMU guest runs it for real
//! (qemu_guest_exec).

use crate::common;
use crate::snapshot;

use std::os::unix::process::ExitStatusExt as _;
use std::process::Command;

use common::{numaplace, repo_root, text};
use serde_json::Value;
use snapshot::Machine;

/// `numaplace exec ARGS` with stdout and stderr.
fn exec(args: &[&str]) -> std::process::Output {
    let mut all = vec!["exec"];
    all.extend_from_slice(args);
    numaplace(&all)
}

/// A `Key:\tvalue` line of a status file.
fn field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {key} in {status}"))
        .trim()
        .to_string()
}

/// The list's ids (kernel list syntax).
fn ids(list: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        out.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap());
    }
    out
}

/// The first node of this host with memory.
fn first_node() -> u32 {
    let text = std::fs::read_to_string("/sys/devices/system/node/has_memory")
        .or_else(|_| std::fs::read_to_string("/sys/devices/system/node/online"))
        .unwrap();
    ids(&text)[0]
}

fn host_nodes() -> usize {
    ids(&std::fs::read_to_string("/sys/devices/system/node/online").unwrap()).len()
}

const SHOW: &str =
    "grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status; head -1 /proc/self/numa_maps";

#[test]
fn the_command_runs_within_the_callers_cpus() {
    let o = exec(&["--cpus", "1", "--", "sh", "-c", SHOW]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let mine = std::fs::read_to_string("/proc/self/status").unwrap();
    let (cpus, theirs) = (
        ids(&field(&out, "Cpus_allowed_list")),
        ids(&field(&mine, "Cpus_allowed_list")),
    );
    assert!(!cpus.is_empty() && cpus.iter().all(|c| theirs.contains(c)));
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err}");
    assert!(err.starts_with("numaplace: exec sh: "), "{err}");
    if host_nodes() == 1 {
        // Nothing to place: the command's CPUs and policy are the caller's.
        assert_eq!(cpus, theirs);
        assert!(err.contains("one NUMA node"), "{err}");
        let line = out.lines().last().unwrap();
        assert!(line.split_whitespace().nth(1) == Some("default"), "{out}");
    }
}

#[test]
fn given_nodes_set_the_memory_policy_numactl_would() {
    let n = first_node().to_string();
    for (flag, word) in [
        (None, format!("prefer:{n}")),
        (Some("--membind"), format!("bind:{n}")),
        (Some("--interleave"), format!("interleave:{n}")),
    ] {
        let mut args = vec!["--nodes", &n, "--quiet"];
        args.extend(flag);
        args.extend(["--", "sh", "-c", SHOW]);
        let o = exec(&args);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{flag:?}: {}", text(&o.stderr));
        assert!(o.stderr.is_empty(), "--quiet: {}", text(&o.stderr));
        // Every mapping of the command carries it (numa_maps' first).
        let line = out.lines().last().unwrap();
        assert_eq!(line.split_whitespace().nth(1), Some(word.as_str()), "{out}");
        let node_cpus =
            std::fs::read_to_string(format!("/sys/devices/system/node/node{n}/cpulist")).unwrap();
        let mine = std::fs::read_to_string("/proc/self/status").unwrap();
        let want: Vec<u32> = ids(&node_cpus)
            .into_iter()
            .filter(|c| ids(&field(&mine, "Cpus_allowed_list")).contains(c))
            .collect();
        assert_eq!(ids(&field(&out, "Cpus_allowed_list")), want, "{out}");
    }
}

#[test]
fn the_command_takes_numaplaces_place() {
    // Same pid: the shell's $$ is the pid numaplace was started with.
    let child = Command::new(env!("CARGO_BIN_EXE_numaplace"))
        .args(["exec", "-q", "--", "sh", "-c", "echo $$"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    assert_eq!(text(&o.stdout).trim(), pid.to_string());
    // Exit status and death by signal pass straight through.
    let o = exec(&["-q", "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7));
    let o = exec(&["-q", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.signal(), Some(libc::SIGTERM), "{:?}", o.status);
    // The command's own arguments, `--` and options included, untouched.
    let o = exec(&[
        "-q",
        "sh",
        "-c",
        "printf '%s|' \"$@\"",
        "x",
        "-a",
        "--",
        "--b",
    ]);
    assert_eq!(text(&o.stdout), "-a|--|--b|");
}

#[test]
fn a_command_not_found_or_not_executable_exits_as_in_a_shell() {
    let o = exec(&["-q", "--", "numaplace-no-such-command"]);
    assert_eq!(o.status.code(), Some(127));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("numaplace-no-such-command: command not found"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let o = exec(&["-q", "--", script.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(126), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("chmod +x"));
    let o = exec(&["-q", "--", "/nonexistent/dir/cmd"]);
    assert_eq!(o.status.code(), Some(127), "{}", text(&o.stderr));
}

#[test]
fn numaplaces_own_refusals_exit_125_in_one_line() {
    for (args, why) in [
        (&["--nodes", "x", "--", "true"][..], "--nodes \"x\""),
        (
            &["--nodes", "999", "--", "true"],
            "node 999 is not on this machine",
        ),
        (&["--nodes", "", "--", "true"], "no node named"),
        (
            &["--policy", "dino", "--", "true"],
            "give auto (the default) or numad-like",
        ),
        (&["--cpus", "0", "--", "true"], "at least one CPU"),
        (
            &["--cpus", "two", "--", "true"],
            "--cpus \"two\": not a number",
        ),
        (&["--memory", "lots", "--", "true"], "--memory lots"),
        (&["--", ""], "empty string"),
    ] {
        let o = exec(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // clap's own usage errors too: no command, an unknown option.
    for args in [
        &[][..],
        &["--bogus", "--", "true"],
        &["--json", "--", "true"],
    ] {
        let o = exec(args);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {}", text(&o.stderr));
    }
    // Other commands keep exit status 2 for usage errors.
    assert_eq!(numaplace(&["topology", "--bogus"]).status.code(), Some(2));
    assert_eq!(numaplace(&["exec", "--help"]).status.code(), Some(0));
}

/// `exec --dry-run --json --sysfs-root` on a snapshot: the choice.
fn choice(m: &Machine, args: &[&str]) -> Value {
    let root = m.root.to_str().unwrap();
    let mut all = vec!["--dry-run", "--json", "--sysfs-root", root];
    all.extend_from_slice(args);
    all.extend(["--", "./job", "--input", "x"]);
    let o = exec(&all);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["command"], serde_json::json!(["./job", "--input", "x"]));
    v
}

/// Two QEMU nodes: node 0 CPUs 0-1, node 1 CPUs 2-3.
#[test]
fn on_two_nodes_the_advice_is_numads() {
    let m = Machine::new(
        &repo_root().join("tests/fixtures/qemu-2node.tar.xz"),
        &[300, 420],
    );
    let v = choice(&m, &["--cpus", "1", "--memory", "200M"]);
    assert_eq!(
        (&v["placed"], &v["nodes"], &v["cpus"], &v["memory_policy"]),
        (
            &Value::Bool(true),
            &"1".into(),
            &"2-3".into(),
            &"prefer:1".into()
        ),
        "{v}"
    );
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains("auto: numad's pre-placement of 1 CPU and 200 MiB"),
        "{reason}"
    );
    // Three CPUs need both nodes: memory preferred on both.
    let v = choice(&m, &["--cpus", "3", "--policy", "numad-like"]);
    assert_eq!(
        (&v["nodes"], &v["cpus"]),
        (&"0-1".into(), &"0-3".into()),
        "{v}"
    );
    assert_eq!(v["memory_policy"], "prefer (many):0-1");
    // --nodes overrides the advice.
    let v = choice(&m, &["--nodes", "0", "--membind"]);
    assert_eq!(
        (&v["cpus"], &v["memory_policy"]),
        (&"0-1".into(), &"bind:0".into())
    );
    // More than the machine: every node, said.
    let v = choice(&m, &["--cpus", "2", "--memory", "2G"]);
    assert_eq!(v["nodes"], "0-1");
    assert!(v["reason"].as_str().unwrap().contains("every node"), "{v}");
}

/// Four QEMU nodes in a square 0-1-3-2-0 (16 one hop, 22 across).
#[test]
fn on_four_nodes_two_nodes_are_neighbours() {
    let m = Machine::new(
        &repo_root().join("tests/fixtures/qemu-4node.tar.xz"),
        &[200, 220, 180, 240],
    );
    let v = choice(&m, &["--cpus", "1", "--memory", "64M"]);
    assert_eq!(
        (&v["nodes"], &v["memory_policy"]),
        (&"3".into(), &"prefer:3".into())
    );
    let v = choice(&m, &["--cpus", "3"]);
    let nodes = ids(v["nodes"].as_str().unwrap());
    assert_eq!(nodes.len(), 2, "{v}");
    assert_eq!(m.distance(nodes[0] as usize, nodes[1] as usize), 16, "{v}");
    let v = choice(&m, &["--nodes", "0,3", "--interleave"]);
    assert_eq!(v["memory_policy"], "interleave:0,3");
    let o = exec(&[
        "--dry-run",
        "--sysfs-root",
        m.root.to_str().unwrap(),
        "--nodes",
        "4",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        text(&o.stderr).contains("give nodes among 0-3"),
        "{}",
        text(&o.stderr)
    );
}
