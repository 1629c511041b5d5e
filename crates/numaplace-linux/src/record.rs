//! Recordings: a header line then one snapshot per line, as JSON lines.
//!
//! ```text
//! {"format":"numaplace-record","version":1,"writer":"0.1.0","interval_ns":...,"topology":{...}}
//! {"seq":0,"time_unix_ns":...,"tasks":[...],...}
//! {"seq":1,...}
//! ```
//! A recording holds every process's command line: it is created mode 0600
//! and never overwrites an existing file unless asked to. A recording cut
//! short (the recorder was killed mid-line) replays up to its last whole
//! line and says so.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use numaplace_model::{RecordHeader, Snapshot};
use thiserror::Error;

/// Why a recording could not be written or read.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("{path}: already exists (choose another file, or pass --force to overwrite it)")]
    /// The file to record to exists (and no `--force`).
    Exists {
        /// The recording.
        path: PathBuf,
    },
    #[error(
        "{path}: not a regular file (a FIFO, a device or a directory); a recording is written \
         only to a regular file"
    )]
    /// The file is not a regular file.
    NotRegular {
        /// The recording.
        path: PathBuf,
    },
    #[error("{path}: cannot {action}")]
    /// Reading or writing it failed.
    Io {
        /// The recording.
        path: PathBuf,
        /// What was being done (`create it`, `write to it`).
        action: &'static str,
        /// The error.
        source: io::Error,
    },
    #[error("{path}: empty file, not a numaplace recording")]
    /// The recording is empty.
    Empty {
        /// The recording.
        path: PathBuf,
    },
    #[error("{path}: not a numaplace recording: {detail}")]
    /// Its first line is not a recording's header.
    NotARecording {
        /// The recording.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    #[error(
        "{path}: recorded by a newer numaplace (format version {found}; this one reads up to {supported}): upgrade numaplace to replay it"
    )]
    /// A newer numaplace wrote it.
    NewerVersion {
        /// The recording.
        path: PathBuf,
        /// The version it says.
        found: u32,
        /// The newest this numaplace reads.
        supported: u32,
    },
    #[error("{path}:{line}: bad snapshot: {detail}")]
    /// A snapshot line that does not parse.
    BadLine {
        /// The recording.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        detail: String,
    },
}

/// Writes a recording.
pub struct Recorder {
    path: PathBuf,
    out: BufWriter<File>,
}

impl Recorder {
    /// Refuses, before any recording starts, an output that exists and is
    /// not a regular file (a FIFO, a device, a directory); a symlink is
    /// refused when opened.
    pub fn check_output(path: &Path) -> Result<(), RecordError> {
        if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file() && !m.is_symlink()) {
            return Err(RecordError::NotRegular {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Creates `path` (mode 0600; refused if it exists and `overwrite` is
    /// false; a symlink in its place is never followed) and writes the header.
    pub fn create(
        path: &Path,
        header: &RecordHeader,
        overwrite: bool,
    ) -> Result<Recorder, RecordError> {
        let mut opts = OpenOptions::new();
        // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) rather
        // than hanging in open(); anything but a regular file is refused.
        opts.write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
        Self::check_output(path)?;
        if overwrite {
            opts.create(true).truncate(true);
        } else {
            opts.create_new(true);
        }
        let file = opts.open(path).map_err(|source| {
            if source.kind() == io::ErrorKind::AlreadyExists {
                RecordError::Exists {
                    path: path.to_path_buf(),
                }
            } else {
                RecordError::Io {
                    path: path.to_path_buf(),
                    action: "create it",
                    source,
                }
            }
        })?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(RecordError::NotRegular {
                path: path.to_path_buf(),
            });
        }
        let mut r = Recorder {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
        };
        if let Err(e) = r.write_line(header) {
            // Not even the header fit (a full disk): no empty or cut file
            // is left behind in the recording's name.
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(r)
    }

    /// Appends one snapshot and flushes it, so a killed recorder leaves
    /// every finished round on disk.
    pub fn write(&mut self, snapshot: &Snapshot) -> Result<(), RecordError> {
        self.write_line(snapshot)
    }

    fn write_line<T: serde::Serialize>(&mut self, value: &T) -> Result<(), RecordError> {
        let io_err = |source| RecordError::Io {
            path: self.path.clone(),
            action: "write to it",
            source,
        };
        // io::Error::from keeps a write error as it is (other() would
        // say it twice: serde's message, then its source's).
        serde_json::to_writer(&mut self.out, value).map_err(|e| io_err(io::Error::from(e)))?;
        self.out.write_all(b"\n").map_err(io_err)?;
        self.out.flush().map_err(io_err)
    }

    /// Flushes and syncs the file.
    pub fn finish(mut self) -> Result<(), RecordError> {
        let path = self.path.clone();
        self.out.flush().map_err(|source| RecordError::Io {
            path: path.clone(),
            action: "write to it",
            source,
        })?;
        self.out
            .get_ref()
            .sync_all()
            .map_err(|source| RecordError::Io {
                path,
                action: "sync it",
                source,
            })
    }
}

/// Reads a recording back: the header, then the snapshots in order.
pub struct Replay {
    path: PathBuf,
    header: RecordHeader,
    reader: BufReader<File>,
    line_no: usize,
    /// Set when the last line was cut short.
    truncated: bool,
}

impl Replay {
    /// Opens the recording at `path` and reads its header.
    pub fn open(path: &Path) -> Result<Replay, RecordError> {
        // A regular file only (never a device or FIFO), and every line
        // bounded: `/dev/zero` is not a recording.
        let file = numaplace_io::bounded::open_regular(path).map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            action: "open it",
            source,
        })?;
        let mut reader = BufReader::new(file);
        let first = match next_line(&mut reader) {
            None => {
                return Err(RecordError::Empty {
                    path: path.to_path_buf(),
                });
            }
            Some(l) => l.map_err(|source| RecordError::Io {
                path: path.to_path_buf(),
                action: "read it",
                source,
            })?,
        };
        let header = parse_header(path, &first)?;
        Ok(Replay {
            path: path.to_path_buf(),
            header,
            reader,
            line_no: 1,
            truncated: false,
        })
    }

    /// The recording's header.
    pub fn header(&self) -> &RecordHeader {
        &self.header
    }

    /// Whether the recording ended in a partial line (it was cut short).
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

/// The next line of a recording, at most
/// [`numaplace_io::bounded::RECORD_LINE_MAX_BYTES`] long.
fn next_line(r: &mut BufReader<File>) -> Option<std::io::Result<String>> {
    let mut line = String::new();
    match numaplace_io::bounded::read_line(
        r,
        &mut line,
        numaplace_io::bounded::RECORD_LINE_MAX_BYTES,
    ) {
        Ok(true) => Some(Ok(line)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

fn parse_header(path: &Path, line: &str) -> Result<RecordHeader, RecordError> {
    let not = |detail: String| RecordError::NotARecording {
        path: path.to_path_buf(),
        detail,
    };
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| not(format!("the first line is not JSON ({e})")))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(RecordHeader::FORMAT) {
        return Err(not(format!(
            "the first line lacks \"format\": \"{}\"",
            RecordHeader::FORMAT
        )));
    }
    let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
    if version > RecordHeader::VERSION as u64 {
        return Err(RecordError::NewerVersion {
            path: path.to_path_buf(),
            found: version.min(u32::MAX as u64) as u32,
            supported: RecordHeader::VERSION,
        });
    }
    let header: RecordHeader =
        serde_json::from_value(value).map_err(|e| not(format!("bad header: {e}")))?;
    if header.interval_ns == 0 {
        return Err(not(
            "the header's interval_ns is 0: a recording is taken at an interval".into(),
        ));
    }
    Ok(header)
}

/// Whether a snapshot agrees with its recording's header: each thread
/// once, on a CPU Linux can number. A file that contradicts its own header
/// was not written by `numaplace record` (or was edited). A CPU within
/// Linux's range that the header's machine lacks is taken: a CPU taken
/// offline since, or a recording made by a numaplace that saw only its own
/// cgroup's CPUs (before 6805e3a).
fn agrees(_header: &RecordHeader, s: &Snapshot) -> Result<(), String> {
    let mut seen = std::collections::HashSet::with_capacity(s.tasks.len());
    for t in &s.tasks {
        if !seen.insert(t.tid) {
            return Err(format!(
                "thread {} is listed twice in one snapshot; give a recording numaplace wrote",
                t.tid
            ));
        }
        if let Some(cpu) = t.last_cpu {
            if cpu > numaplace_model::cpuset::MAX_CPU_ID {
                return Err(format!(
                    "thread {} last ran on CPU {cpu}, beyond Linux's CPU numbers (0 to {}); give \
                     a recording numaplace wrote",
                    t.tid,
                    numaplace_model::cpuset::MAX_CPU_ID
                ));
            }
        }
    }
    Ok(())
}

/// A recording as the engine's telemetry: its snapshots in order, until
/// its last line.
impl numaplace_model::world::Telemetry for Replay {
    type Error = RecordError;

    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, RecordError> {
        self.next().transpose()
    }
}

impl Iterator for Replay {
    type Item = Result<Snapshot, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let line = match next_line(&mut self.reader)? {
                Ok(l) => l,
                Err(source) => {
                    return Some(Err(RecordError::Io {
                        path: self.path.clone(),
                        action: "read it",
                        source,
                    }));
                }
            };
            self.line_no += 1;
            if line.trim().is_empty() {
                continue;
            }
            return match serde_json::from_str::<Snapshot>(&line) {
                Ok(s) => Some(agrees(&self.header, &s).map(|()| s).map_err(|detail| {
                    RecordError::BadLine {
                        path: self.path.clone(),
                        line: self.line_no,
                        detail,
                    }
                })),
                // A cut-short last line (EOF inside the JSON) ends the
                // replay; anything else is a bad file.
                Err(e) if e.is_eof() => {
                    self.truncated = true;
                    tracing::warn!(
                        "{}:{}: the recording ends in a partial line (cut short?); replayed up to the line before",
                        self.path.display(),
                        self.line_no
                    );
                    None
                }
                Err(e) => Some(Err(RecordError::BadLine {
                    path: self.path.clone(),
                    line: self.line_no,
                    detail: e.to_string(),
                })),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    use numaplace_model::*;

    use super::*;

    fn header() -> RecordHeader {
        RecordHeader {
            format: RecordHeader::FORMAT.into(),
            version: RecordHeader::VERSION,
            writer: "test".into(),
            interval_ns: 1_000_000_000,
            topology: Topology::synthetic("pack:2 numa:1 core:2 pu:1").unwrap(),
            missing_signals: vec!["instructions: no PMU".into()],
        }
    }

    fn snapshot(seq: u64) -> Snapshot {
        let task = Task {
            tid: 42,
            tgid: 42,
            start_time: 1000 + seq,
            comm: "a) b\n(c".into(),
            state: 'R',
            last_cpu: Some(1),
            allowed_cpus: CpuSet::parse_list("0-3").unwrap(),
            allowed_mems: CpuSet::parse_list("0-1").unwrap(),
            confined_cpus: None,
            manager: None,
            utime: 5,
            stime: 6,
            vcpu: None,
        };
        let mut counters = BTreeMap::new();
        counters.insert(
            42,
            CounterDeltas {
                values: [(Counter::TaskClock, 123)].into_iter().collect(),
                enabled_ns: 10,
                running_ns: 5,
            },
        );
        Snapshot {
            seq,
            time_unix_ns: 7,
            interval_ns: 1_000,
            tasks: vec![task],
            groups: vec![TaskGroup {
                pid: 42,
                start_time: 1000,
                comm: "x".into(),
                cmdline: vec!["x".into(), "--flag".into()],
                cgroup: Some("/a.slice".into()),
                kind: GroupKind::Vm {
                    name: Some("web".into()),
                    accel: "KVM".into(),
                    evidence: "kvm-vcpu fds".into(),
                },
                threads: vec![42],
                memory: Some(
                    [(
                        1,
                        NodeMemory {
                            anon: 4096,
                            file: 0,
                            huge: 2 << 20,
                        },
                    )]
                    .into_iter()
                    .collect(),
                ),
            }],
            counters,
            machine: MachineReadings::default(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn record_then_replay_yields_identical_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut rec = Recorder::create(&path, &header(), false).unwrap();
        let written: Vec<Snapshot> = (0..3).map(snapshot).collect();
        for s in &written {
            rec.write(s).unwrap();
        }
        rec.finish().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let replay = Replay::open(&path).unwrap();
        assert_eq!(replay.header(), &header());
        let read: Vec<Snapshot> = replay.map(Result::unwrap).collect();
        assert_eq!(read, written);
    }

    #[test]
    fn refuses_to_overwrite_or_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, "keep").unwrap();
        let e = Recorder::create(&path, &header(), false).err().unwrap();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");

        let target = dir.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(Recorder::create(&link, &header(), true).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn bad_recordings_are_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let e = Replay::open(&write("empty", "")).err().unwrap();
        assert!(e.to_string().contains("empty file"), "{e}");
        let e = Replay::open(&write("junk", "hello\n")).err().unwrap();
        assert!(e.to_string().contains("not JSON"), "{e}");
        let e = Replay::open(&write("other", "{\"a\":1}\n")).err().unwrap();
        assert!(e.to_string().contains("lacks \"format\""), "{e}");
        let newer = serde_json::to_string(&header())
            .unwrap()
            .replace("\"version\":1", "\"version\":9");
        let e = Replay::open(&write("newer", &format!("{newer}\n")))
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("format version 9; this one reads up to 1"),
            "{e}"
        );

        // A cut-short last line: the whole lines replay, then it stops.
        let h = serde_json::to_string(&header()).unwrap();
        let s0 = serde_json::to_string(&snapshot(0)).unwrap();
        let s1 = serde_json::to_string(&snapshot(1)).unwrap();
        let p = write("cut", &format!("{h}\n{s0}\n{}", &s1[..s1.len() / 2]));
        let mut r = Replay::open(&p).unwrap();
        assert_eq!(r.next().unwrap().unwrap(), snapshot(0));
        assert!(r.next().is_none());
        assert!(r.truncated());

        // A garbage line in the middle is an error naming the line.
        let p = write("garbage", &format!("{h}\n{s0}\n[1,2]\n{s1}\n"));
        let mut r = Replay::open(&p).unwrap();
        r.next().unwrap().unwrap();
        let e = r.next().unwrap().unwrap_err();
        assert!(e.to_string().contains(":3: bad snapshot"), "{e}");
    }
}
