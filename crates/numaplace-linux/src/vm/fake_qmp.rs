//! A QMP server for tests: a real UNIX socket in a temporary directory,
//! served by a thread of the test process that answers as told.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use serde_json::{Value, json};

/// How the fake server behaves.
#[derive(Clone)]
pub(super) enum Behaviour {
    /// A well-behaved QEMU with these vCPUs `(index, tid, node)`, this
    /// name and accelerator; an event comes before each reply.
    Good {
        vcpus: Vec<(u32, i32, Option<u32>)>,
        name: Option<String>,
        kvm: bool,
    },
    /// Greets, then answers `query-cpus-fast` with a QMP error.
    ErrorReply,
    /// Sends this text and keeps the connection open.
    Say(String),
    /// Accepts and says nothing.
    Silent,
    /// Greets, then says nothing more.
    SilentAfterGreeting,
    /// Sends megabytes without a newline.
    FloodOneLine,
    /// Greets, then sends endless short events.
    FloodEvents,
}

pub(super) const GREETING: &str = r#"{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": ""}, "capabilities": ["oob"]}}"#;

/// A fake QMP server on `dir/name`, serving one client.
pub(super) struct FakeQmp {
    pub path: PathBuf,
    handle: Option<JoinHandle<()>>,
}

impl FakeQmp {
    pub(super) fn start(dir: &Path, name: &str, behaviour: Behaviour) -> FakeQmp {
        let path = dir.join(name);
        let listener = UnixListener::bind(&path).unwrap();
        let handle = std::thread::spawn(move || {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            serve(stream, &behaviour);
        });
        FakeQmp {
            path,
            handle: Some(handle),
        }
    }
}

impl Drop for FakeQmp {
    fn drop(&mut self) {
        // The client is gone by now: the server's next read or write fails.
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn send(s: &mut UnixStream, v: &Value) -> std::io::Result<()> {
    s.write_all(format!("{v}\r\n").as_bytes())
}

fn serve(mut stream: UnixStream, b: &Behaviour) {
    let hold = |s: &UnixStream| {
        // Until the client hangs up.
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
        }
    };
    match b {
        Behaviour::Silent => return hold(&stream),
        Behaviour::Say(text) => {
            let _ = stream.write_all(text.as_bytes());
            return hold(&stream);
        }
        Behaviour::FloodOneLine => {
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..16 {
                if stream.write_all(&chunk).is_err() {
                    return;
                }
            }
            return hold(&stream);
        }
        _ => {}
    }
    let _ = stream.write_all(format!("{GREETING}\r\n").as_bytes());
    match b {
        Behaviour::SilentAfterGreeting => return hold(&stream),
        Behaviour::FloodEvents => {
            // Large events, so that the client's work per byte is small
            // and the flood outruns its deadline on any machine.
            let pad = "x".repeat(60_000);
            let ev = json!({"event": "RTC_CHANGE", "data": {"pad": pad}, "timestamp": {"seconds": 1, "microseconds": 2}});
            let chunk = format!("{ev}\r\n").repeat(16);
            while stream.write_all(chunk.as_bytes()).is_ok() {}
            return;
        }
        _ => {}
    }
    let reader = BufReader::new(stream.try_clone().unwrap());
    for line in reader.lines() {
        let Ok(line) = line else { return };
        let Ok(req) = serde_json::from_str::<Value>(&line) else {
            return;
        };
        let id = req.get("id").cloned().unwrap_or(Value::Null);
        let cmd = req["execute"].as_str().unwrap_or("").to_string();
        let reply = match (b, cmd.as_str()) {
            (_, "qmp_capabilities") => json!({"return": {}, "id": id}),
            (Behaviour::ErrorReply, "query-cpus-fast") => {
                json!({"error": {"class": "CommandNotFound", "desc": "The command query-cpus-fast has not been found"}, "id": id})
            }
            (Behaviour::Good { vcpus, .. }, "query-cpus-fast") => {
                let list: Vec<Value> = vcpus
                    .iter()
                    .map(|&(i, tid, node)| {
                        let mut props = json!({"core-id": 0, "thread-id": 0, "socket-id": i});
                        if let Some(n) = node {
                            props["node-id"] = json!(n);
                        }
                        json!({"cpu-index": i, "qom-path": format!("/machine/unattached/device[{i}]"), "thread-id": tid, "props": props, "target": "x86_64"})
                    })
                    .collect();
                json!({"return": list, "id": id})
            }
            (Behaviour::Good { name: Some(n), .. }, "query-name") => {
                json!({"return": {"name": n}, "id": id})
            }
            (Behaviour::Good { name: None, .. }, "query-name") => json!({"return": {}, "id": id}),
            (Behaviour::Good { kvm, .. }, "query-kvm") => {
                json!({"return": {"enabled": kvm, "present": true}, "id": id})
            }
            _ => {
                json!({"error": {"class": "CommandNotFound", "desc": format!("The command {cmd} has not been found")}, "id": id})
            }
        };
        let ev = json!({"event": "STOP", "timestamp": {"seconds": 1, "microseconds": 2}});
        if send(&mut stream, &ev).is_err() || send(&mut stream, &reply).is_err() {
            return;
        }
    }
}
