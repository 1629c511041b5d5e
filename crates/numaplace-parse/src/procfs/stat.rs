//! `/proc/<pid>/task/<tid>/stat`: one line, `pid (comm) state ppid ...`.
//!
//! The command name is whatever the task set (`prctl(PR_SET_NAME)`,
//! `pthread_setname_np`): up to 15 bytes that may hold spaces, parentheses
//! and newlines. It is the bytes between the first `(` and the *last* `)`;
//! splitting the line on whitespace first is the classic bug.

use super::error::{ParseError, shorten};

const FILE: &str = "stat";

/// The fields of a task's `stat` that numaplace uses. Field numbers are
/// those of proc(5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStat {
    /// (1) The task id (for a thread, its tid).
    pub pid: i32,
    /// (2) The command name; bytes that are not UTF-8 kept as
    /// `numaplace_model::task::name_from_bytes` says. Untrusted.
    pub comm: String,
    /// (3) One-letter state: `R`, `S`, `D`, `T`, `t`, `Z`, `X`, `I`, ...
    pub state: char,
    /// (4) Parent's pid.
    pub ppid: i32,
    /// (9) The kernel's `PF_*` flags of the task.
    pub flags: u32,
    /// (10, 12) Minor and major page faults of this task (of the whole
    /// process in `/proc/<pid>/stat`).
    pub min_flt: u64,
    /// See `min_flt`: the major ones, which read from disk.
    pub maj_flt: u64,
    /// (14) User time, clock ticks.
    pub utime: u64,
    /// (15) System time, clock ticks.
    pub stime: u64,
    /// (20) Threads in the process.
    pub num_threads: i64,
    /// (22) Start time, clock ticks since boot. With the tid, it identifies
    /// a task across pid reuse.
    pub start_time: u64,
    /// (39) The CPU the task last ran on; `None` if the kernel did not write
    /// the field.
    pub processor: Option<u32>,
}

/// Fields after the comm, counted from field 3 (state).
const STATE: usize = 0;
const PPID: usize = 4 - 3;
const FLAGS: usize = 9 - 3;
/// `PF_KTHREAD` (include/linux/sched.h): the task is a kernel thread.
const PF_KTHREAD: u32 = 0x0020_0000;
const MINFLT: usize = 10 - 3;
const MAJFLT: usize = 12 - 3;
const UTIME: usize = 14 - 3;
const STIME: usize = 15 - 3;
const NUM_THREADS: usize = 20 - 3;
const START_TIME: usize = 22 - 3;
const PROCESSOR: usize = 39 - 3;

/// Parses the contents of a `stat` file.
///
/// Refuses a line cut before field 22 (start time), and any line without
/// the final newline the kernel always writes (a read cut inside a number
/// would otherwise pass). Field 39 (processor) is optional. Extra trailing
/// fields (newer kernels) are ignored.
pub fn parse_stat(bytes: &[u8]) -> Result<TaskStat, ParseError> {
    let malformed = |what: &str| ParseError::Malformed {
        file: FILE,
        what: what.to_string(),
    };
    let open = bytes
        .iter()
        .position(|&b| b == b'(')
        .ok_or_else(|| malformed("no '(' opening the command name"))?;
    let close = bytes
        .iter()
        .rposition(|&b| b == b')')
        .filter(|&c| c > open)
        .ok_or_else(|| malformed("no ')' closing the command name"))?;

    let pid_text = std::str::from_utf8(&bytes[..open])
        .map_err(|_| malformed("the pid before '(' is not text"))?;
    let pid = parse_num::<i32>(pid_text.trim(), "pid")?;
    let comm = numaplace_model::task::name_from_bytes(&bytes[open + 1..close]);

    let rest = std::str::from_utf8(&bytes[close + 1..])
        .map_err(|_| malformed("the fields after the command name are not text"))?;
    if !rest.is_empty() && !rest.starts_with(' ') {
        return Err(malformed("no space after the command name"));
    }
    // Fields 3 to 39, no more: read for every thread every round, so no
    // allocation for the ~50 fields of a whole line.
    let mut fields = [""; PROCESSOR + 1];
    let mut found = 0;
    for (slot, f) in fields.iter_mut().zip(rest.split_ascii_whitespace()) {
        *slot = f;
        found += 1;
    }
    if found <= START_TIME {
        return Err(ParseError::Truncated {
            file: FILE,
            found,
            needed: START_TIME + 1,
            field: "starttime (22)",
        });
    }

    if !rest.ends_with('\n') {
        return Err(ParseError::Unterminated { file: FILE });
    }

    let mut state_chars = fields[STATE].chars();
    let state = match (state_chars.next(), state_chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => c,
        _ => {
            return Err(ParseError::invalid(
                FILE,
                "state (3)",
                fields[STATE],
                "one letter",
            ));
        }
    };

    Ok(TaskStat {
        pid,
        comm,
        state,
        ppid: parse_num(fields[PPID], "ppid (4)")?,
        flags: parse_num(fields[FLAGS], "flags (9)")?,
        min_flt: parse_num(fields[MINFLT], "minflt (10)")?,
        maj_flt: parse_num(fields[MAJFLT], "majflt (12)")?,
        utime: parse_num(fields[UTIME], "utime (14)")?,
        stime: parse_num(fields[STIME], "stime (15)")?,
        num_threads: parse_num(fields[NUM_THREADS], "num_threads (20)")?,
        start_time: parse_num(fields[START_TIME], "starttime (22)")?,
        processor: if found > PROCESSOR {
            Some(parse_num(fields[PROCESSOR], "processor (39)")?)
        } else {
            None
        },
    })
}

impl TaskStat {
    /// Whether the task is a kernel thread (`PF_KTHREAD`): numaplace never
    /// changes one, neither when it places nor when it restores.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
}

fn parse_num<T: std::str::FromStr>(text: &str, field: &'static str) -> Result<T, ParseError> {
    text.parse().map_err(|_| ParseError::InvalidField {
        file: FILE,
        field,
        value: shorten(text),
        expected: "a decimal integer",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cat /proc/self/stat` on the development VM (Linux 6.18, x86_64).
    const CAT_SELF: &[u8] = b"20537 (cat) R 20535 20535 18209 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 145153 3133440 362 18446744073709551615 94427664003072 94427664022953 140735313128496 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94427664038960 94427664040576 94428397969408 140735313136353 140735313136373 140735313136373 140735313137643 0\n";

    /// A kernel thread's stat from the same host (`/proc/2/stat`): zero
    /// addresses, no memory.
    const KTHREADD: &[u8] = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 22 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    /// The rest of a stat line after the comm, for building odd names.
    const TAIL: &str = " S 1 1 1 0 -1 4194560 10 0 0 0 7 3 0 0 20 0 4 0 98765 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    fn with_comm(comm: &[u8]) -> Vec<u8> {
        let mut line = b"4242 (".to_vec();
        line.extend_from_slice(comm);
        line.push(b')');
        line.extend_from_slice(TAIL.as_bytes());
        line
    }

    #[test]
    fn parses_a_real_capture() {
        let s = parse_stat(CAT_SELF).unwrap();
        assert_eq!(
            s,
            TaskStat {
                pid: 20537,
                comm: "cat".into(),
                state: 'R',
                ppid: 20535,
                flags: 4194304,
                min_flt: 100,
                maj_flt: 0,
                utime: 0,
                stime: 0,
                num_threads: 1,
                start_time: 145153,
                processor: Some(1),
            }
        );
        let k = parse_stat(KTHREADD).unwrap();
        assert_eq!((k.pid, k.comm.as_str(), k.state), (2, "kthreadd", 'S'));
        assert!(k.is_kernel_thread() && !s.is_kernel_thread());
        assert_eq!(
            (k.ppid, k.stime, k.start_time, k.processor),
            (0, 0, 22, Some(1))
        );
    }

    #[test]
    fn comm_with_spaces_parens_and_newlines() {
        for comm in [
            "a b",
            "x) R 1 2 (y",
            "))",
            "((",
            ")",
            "(",
            "",
            "line\nbreak",
            "np) x(y",
            "tab\there ",
        ] {
            let s = parse_stat(&with_comm(comm.as_bytes())).unwrap();
            assert_eq!(s.comm, comm);
            assert_eq!((s.pid, s.state, s.ppid), (4242, 'S', 1), "comm {comm:?}");
            assert_eq!((s.utime, s.stime, s.num_threads), (7, 3, 4));
            assert_eq!((s.start_time, s.processor), (98765, Some(1)));
        }
    }

    #[test]
    fn comm_that_is_not_utf8_keeps_its_bytes() {
        let s = parse_stat(&with_comm(b"caf\xe9")).unwrap();
        assert_eq!(s.comm, "caf\u{10ffe9}");
        assert_eq!(numaplace_model::task::printable(&s.comm), "caf\\xe9");
    }

    #[test]
    fn processor_is_optional_but_starttime_is_not() {
        // Cut after field 22 (start time): accepted, no processor.
        let line = "7 (w) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 777\n";
        let s = parse_stat(line.as_bytes()).unwrap();
        assert_eq!((s.start_time, s.processor), (777, None));

        let e = parse_stat(b"7 (w) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0").unwrap_err();
        assert!(matches!(e, ParseError::Truncated { found: 19, .. }), "{e}");
        assert!(e.to_string().contains("truncated"), "{e}");

        for cut in [
            &CAT_SELF[..30],
            &CAT_SELF[..70],
            b"20537 (cat)",
            b"20537 (cat) ",
        ] {
            let e = parse_stat(cut).unwrap_err();
            assert!(matches!(e, ParseError::Truncated { .. }), "{e}");
        }
        // Cut after field 22, even inside a number: no final newline.
        for end in [80, 90, CAT_SELF.len() - 3, CAT_SELF.len() - 1] {
            let e = parse_stat(&CAT_SELF[..end]).unwrap_err();
            assert_eq!(e, ParseError::Unterminated { file: "stat" });
            assert!(e.to_string().contains("cut short"), "{e}");
        }
        // Cut inside the command name: no closing parenthesis.
        let e = parse_stat(&CAT_SELF[..10]).unwrap_err();
        assert!(matches!(e, ParseError::Malformed { .. }), "{e}");
    }

    #[test]
    fn refuses_what_is_not_a_stat_line() {
        for bad in [
            &b""[..],
            b"\n",
            b"garbage",
            b"12 cat) R",
            b"12 (cat R 1",
            b")12 (",
            b"x (cat) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 777",
            b"-99999999999 (cat) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 777",
            b"1 (cat)R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 777",
            b"1 (cat) RR 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 777",
            b"1 (cat) 5 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 777",
            b"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 -5 6 0 0 20 0 1 0 777",
            b"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 77x7",
            b"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 777 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 -1",
            b"\xff (cat) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 777",
            b"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 \xff",
        ] {
            // Refused for what is wrong, not only for the missing newline.
            let mut line = bad.to_vec();
            line.push(b'\n');
            for text in [bad, &line] {
                let e = parse_stat(text);
                assert!(e.is_err(), "accepted {:?}", String::from_utf8_lossy(text));
            }
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse_stat(b"1 (cat) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 77x7\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "stat: starttime (22): \"77x7\" is not a decimal integer"
        );
    }
}
