//! `numaplace top` as an operator sees it: a dry-run daemon placing a busy
//! test process, and `top --connect` on its metrics socket in a detached
//! tmux session of a fixed size, driven with `send-keys` and read with
//! `capture-pane`. Skipped, with a message, where tmux is not installed
//! (`./setup.sh test` installs it).

use crate::common;

use common::{numaplace, text};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The test process's first thread on CPU 0, every round: a fixed
/// placement, so the decision and its reason do not depend on what else
/// runs on this machine.
const PIN_PYTHON_TO_CPU_0: &str = "[policy]\nname = \"static\"\n[[policy.pins]]\nprocess = \"python3\"\nthread = 0\ncpus = \"0\"\n";

/// The test process: three threads spinning (Python's lock lets about one
/// run at a time) beside its main thread, four in all.
const BUSY_THREADS: &str = "import threading\n\
def spin():\n    while True:\n        pass\n\
for _ in range(3):\n    threading.Thread(target=spin, daemon=True).start()\n\
threading.Event().wait()\n";

/// A child killed when dropped, so a failing test leaves nothing running.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A tmux server of this test's own (`-L`), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new() -> Tmux {
        // One server per test: tests of this file run at once.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Tmux {
            socket: format!("numaplace-top-test-{}-{n}", std::process::id()),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let o = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            o.status.success(),
            "tmux {args:?}: {}",
            text(&o.stderr).trim()
        );
        o
    }

    /// A detached session of 120x40 running `command` under sh.
    fn session(&self, name: &str, command: &str) {
        self.run(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "40",
            command,
        ]);
    }

    fn capture(&self, name: &str) -> String {
        text(&self.run(&["capture-pane", "-p", "-t", name]).stdout)
    }

    fn keys(&self, name: &str, keys: &str) {
        self.run(&["send-keys", "-t", name, keys]);
    }

    fn format(&self, name: &str, f: &str) -> String {
        text(&self.run(&["display-message", "-p", "-t", name, f]).stdout)
            .trim()
            .to_string()
    }

    /// The pane once `f` holds for it; fails with the pane after 30 s.
    fn wait_for(&self, name: &str, what: &str, f: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let pane = self.capture(name);
            if f(&pane) {
                return pane;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "timed out waiting for {what}; the pane:\n{pane}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

fn tmux_present() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Single-quoted for sh.
fn quoted(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// Keeps the pane as the text of the report (`--nocapture` shows it).
fn keep(dir: &Path, name: &str, pane: &str) {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cli_top-{name}.txt"));
    let _ = std::fs::write(&out, pane);
    let _ = dir;
    eprintln!("--- {name} ({}) ---\n{pane}", out.display());
}

#[test]
fn top_shows_the_daemons_nodes_groups_and_decisions_under_tmux() {
    if !tmux_present() {
        eprintln!(
            "SKIPPED: tmux is not installed; this test drives numaplace top in tmux (Debian: apt-get install tmux, or ./setup.sh test)"
        );
        return;
    }
    common::require_program("python3", "python3");
    let busy = Killed(
        Command::new("python3")
            .args(["-c", BUSY_THREADS])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = busy.0.id().to_string();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("np.toml");
    std::fs::write(&config, PIN_PYTHON_TO_CPU_0).unwrap();
    let sock = dir.path().join("metrics.sock");
    let listen = format!("unix:{}", sock.display());
    let daemon = Killed(
        Command::new(env!("CARGO_BIN_EXE_numaplace"))
            .args([
                "run",
                "--dry-run",
                "--cpus",
                "0",
                "--interval",
                "200ms",
                "--pid",
                &pid,
                "--metrics",
                &listen,
            ])
            .arg("--config")
            .arg(&config)
            .arg("--state")
            .arg(dir.path().join("state.json"))
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // --once, for scripts: one frame once the daemon has decided.
    let start = Instant::now();
    let once = loop {
        let o = numaplace(&["top", "--connect", &listen, "--once", "--size", "120x30"]);
        if o.status.success() && text(&o.stdout).contains(&format!("*{pid}")) {
            break text(&o.stdout);
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no frame with the test process from --once: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(once.contains("policy static"), "{once}");

    let tmux = Tmux::new();
    let bin = quoted(Path::new(env!("CARGO_BIN_EXE_numaplace")));
    // After top: its exit status and the terminal's modes, then a pause
    // that keeps the pane to read.
    let after = "echo \"top exited $?\"; echo \"modes: $(stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' ')\"; sleep 60";
    tmux.session(
        "view",
        &format!("{bin} top --connect {listen} --interval 300ms; {after}"),
    );
    // The test process's row: in scope (*), its name, its four threads.
    let row = |p: &str| {
        p.lines()
            .find(|l| l.contains(&format!("*{pid} ")))
            .map(str::to_string)
    };
    let groups = tmux.wait_for("view", "the nodes and the test process", |p| {
        // Busy CPUs once the view has two rounds: "x.xx of 1" (--cpus 0).
        p.contains("NODE")
            && p.contains(" of 1 ")
            && p.contains("policy static")
            && row(p).is_some_and(|r| r.contains(" python3 ") && r.contains(" process 4 "))
    });
    keep(dir.path(), "groups", &groups);
    assert!(groups.contains("CPUS BUSY"), "{groups}");
    assert!(groups.contains("memory bandwidth:"), "{groups}");
    assert_eq!(
        tmux.format("view", "#{alternate_on}"),
        "1",
        "top in the alternate screen"
    );

    // Another pane: the decisions with their reasons.
    tmux.keys("view", "Tab");
    let decisions = tmux.wait_for("view", "a decision with its reason", |p| {
        p.contains("decisions:") && p.contains("because static placement")
    });
    keep(dir.path(), "decisions", &decisions);
    // From the CPUs it has (nothing is applied) to those proposed.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let cpus = (status.lines())
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    assert!(
        decisions.contains(&format!(
            "python3 (pid {pid}): pin thread {pid} from CPUs {cpus} to CPUs 0"
        )),
        "{decisions}"
    );
    assert!(decisions.contains("-> not applied"), "{decisions}");

    // Sorting and pausing say so in the view.
    tmux.keys("view", "g");
    tmux.keys("view", "n");
    tmux.wait_for("view", "sorting by name", |p| p.contains("by name"));
    tmux.keys("view", "Space");
    tmux.wait_for("view", "the pause", |p| p.contains("paused"));

    tmux.keys("view", "q");
    let after_q = tmux.wait_for("view", "top to exit on q", |p| p.contains("modes: "));
    keep(dir.path(), "after-q", &after_q);
    assert!(after_q.contains("top exited 0"), "{after_q}");
    assert!(
        after_q.contains("modes: icanon echo"),
        "the terminal back in canonical mode with echo: {after_q}"
    );
    assert!(
        !after_q.contains("CPUS BUSY"),
        "the view is gone: {after_q}"
    );
    assert_eq!(tmux.format("view", "#{alternate_on}"), "0");
    assert_eq!(tmux.format("view", "#{cursor_flag}"), "1", "cursor shown");

    // The daemon stops: the view says so and goes on; SIGTERM ends it and
    // puts the terminal back.
    let pidfile = dir.path().join("top.pid");
    tmux.session(
        "gone",
        &format!(
            "sh -c 'echo $$ > {}; exec {bin} top --connect {listen} --interval 300ms'; {after}",
            pidfile.display()
        ),
    );
    tmux.wait_for("gone", "the view", |p| p.contains(&format!("*{pid}")));
    drop(daemon);
    let gone = tmux.wait_for("gone", "the daemon reported not answering", |p| {
        p.contains("daemon not answering")
    });
    keep(dir.path(), "daemon-gone", &gone);
    let top_pid = std::fs::read_to_string(&pidfile).unwrap();
    let killed = Command::new("kill")
        .args(["-TERM", top_pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let after_term = tmux.wait_for("gone", "top to exit on SIGTERM", |p| p.contains("modes: "));
    assert!(after_term.contains("top exited 0"), "{after_term}");
    assert!(after_term.contains("modes: icanon echo"), "{after_term}");
    assert_eq!(tmux.format("gone", "#{alternate_on}"), "0");
}

/// A terminal smaller than the view says so instead of drawing a mess;
/// Ctrl-C quits.
#[test]
fn a_terminal_too_small_says_so() {
    if !tmux_present() {
        eprintln!("SKIPPED: tmux is not installed (Debian: apt-get install tmux)");
        return;
    }
    let tmux = Tmux::new();
    let dir = tempfile::tempdir().unwrap();
    // Nobody listens there: the view says the daemon is not answering,
    // but first that the terminal is too small.
    let sock = dir.path().join("nobody.sock");
    let bin = quoted(Path::new(env!("CARGO_BIN_EXE_numaplace")));
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "small",
        "-x",
        "40",
        "-y",
        "10",
        &format!("{bin} top --connect unix:{}; sleep 60", sock.display()),
    ]);
    let pane = tmux.wait_for("small", "the size message", |p| {
        p.contains("terminal too small")
    });
    assert!(pane.contains("40x10"), "{pane}");
    // In raw mode a typed Ctrl-C is a key; it quits as q does.
    tmux.keys("small", "C-c");
    tmux.wait_for("small", "top to exit", |p| {
        !p.contains("terminal too small")
    });
}

/// A peer on the daemon's socket that is not numaplace (a local user who
/// took the port or socket while the daemon was down) answers `GET /state`
/// with terminal controls in every string: a pane title (OSC 2), a
/// clipboard write (OSC 52), a screen clear and a C1 CSI. `top --connect`,
/// interactive and `--once`, shows them as escaped text: the pane keeps
/// its title, its screen and an empty clipboard. The same bytes sent raw
/// to a second pane do change its title and clipboard, so the checks can
/// fail.
#[test]
fn a_hostile_peer_leaves_the_pane_title_screen_and_clipboard_as_they_were() {
    if !tmux_present() {
        eprintln!("SKIPPED: tmux is not installed (Debian: apt-get install tmux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("peer.sock");
    let raw = dir.path().join("raw.txt");
    let peer = dir.path().join("peer.py");
    std::fs::write(
        &peer,
        r#"import json, os, socket, sys, threading
bad = "\x1b]2;owned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\u009b31m\u202ex"
open(sys.argv[2], "w").write(bad + "\n")
row = {"round": 1, "time_unix_ns": 1, "pid": 1, "label": bad,
       "action": bad, "reason": bad, "outcome": bad}
state = {"format": 1, "policy": bad, "applies": True, "round": 1,
         "time_unix_ns": 1, "interval_ns": 1, "nodes": [], "bandwidth": [],
         "groups": [], "groups_left_out": 0, "decisions": [row] * 3}
body = json.dumps(state).encode()
l = socket.socket(socket.AF_UNIX)
l.bind(sys.argv[1]); l.listen(16)
def answer(c):
    try:
        c.recv(4096)
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    c.close()
while True:
    c, _ = l.accept()
    threading.Thread(target=answer, args=(c,), daemon=True).start()
"#,
    )
    .unwrap();
    let _peer = Killed(
        Command::new("python3")
            .arg(&peer)
            .arg(&sock)
            .arg(&raw)
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while !(sock.exists() && raw.exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the peer did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let tmux = Tmux::new();
    let bin = quoted(Path::new(env!("CARGO_BIN_EXE_numaplace")));
    let listen = format!("unix:{}", sock.display());
    // Title and clipboard as an application would set them: OSC 52 makes
    // a tmux buffer only with set-clipboard on.
    let before = "printf '\\033]2;title-before\\007'; echo MARKER-BEFORE";
    tmux.session(
        "view",
        &format!(
            "{before}; {bin} top --connect {listen} --interval 300ms; \
             {bin} top --connect {listen} --once --size 100x20; echo \"once exited $?\"; sleep 60"
        ),
    );
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    tmux.session("raw", &format!("{before}; cat {}; sleep 60", quoted(&raw)));

    // The control: the same bytes sent raw set the title and clipboard,
    // and clear the screen.
    let start = Instant::now();
    while tmux.format("raw", "#{pane_title}") != "owned" {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the raw bytes did not set the control pane's title: {:?}",
            tmux.format("raw", "#{pane_title}")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let raw_pane = tmux.capture("raw");
    assert!(!raw_pane.contains("MARKER-BEFORE"), "{raw_pane}");
    let buffers = text(&tmux.run(&["list-buffers"]).stdout);
    assert!(
        buffers.contains("evil"),
        "the raw OSC 52 made no buffer: {buffers:?}"
    );
    tmux.run(&["delete-buffer"]);

    // top: the controls shown as text, nothing acted on.
    let frame = tmux.wait_for("view", "top's frame with the peer's decisions", |p| {
        p.contains("owned") && p.contains("policy")
    });
    keep(dir.path(), "hostile-peer", &frame);
    assert!(frame.contains("\\x1b]2;owned"), "{frame}");
    assert_eq!(tmux.format("view", "#{pane_title}"), "title-before");
    tmux.keys("view", "q");
    let after = tmux.wait_for("view", "--once after top", |p| p.contains("once exited"));
    keep(dir.path(), "hostile-peer-after", &after);
    assert!(after.contains("once exited 0"), "{after}");
    assert!(
        after.contains("MARKER-BEFORE"),
        "the screen was cleared: {after}"
    );
    assert!(after.contains("\\x1b]52;c;"), "{after}");
    assert_eq!(tmux.format("view", "#{pane_title}"), "title-before");
    let buffers = text(&tmux.run(&["list-buffers"]).stdout);
    assert!(
        buffers.is_empty(),
        "a clipboard write got through: {buffers:?}"
    );
}

/// The terminal hangs up under the view (its window closed: here its tmux
/// server killed): `top` ends instead of spinning on a terminal that reads
/// end-of-file for ever (it did, at a whole CPU, until killed).
#[test]
fn top_ends_when_its_terminal_hangs_up() {
    if !tmux_present() {
        eprintln!("SKIPPED: tmux is not installed (Debian: apt-get install tmux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("hangup-nobody.sock");
    let bin = quoted(Path::new(env!("CARGO_BIN_EXE_numaplace")));
    let tmux = Tmux::new();
    tmux.session(
        "hangup",
        &format!(
            "{bin} top --connect unix:{} --interval 300ms",
            sock.display()
        ),
    );
    tmux.wait_for("hangup", "the view", |p| p.contains("daemon not answering"));
    let pid = tmux.format("hangup", "#{pane_pid}");
    let alive = |pid: &str| Path::new(&format!("/proc/{pid}")).exists();
    assert!(alive(&pid), "no pane process {pid:?}");
    drop(tmux);
    let start = Instant::now();
    while alive(&pid) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "top (pid {pid}) still runs 10 s after its terminal hung up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
