//! The binary's own output, under one rule: writing it never panics.
//!
//! - Lines for people on stderr go through [`say!`]: a write that fails (a
//!   closed pipe, a log shipper restarting, a full disk) is counted and
//!   dropped, never fatal, so a daemon whose stderr goes away still stops
//!   cleanly and puts back what it changed. The logger (`tracing`) writes
//!   through [`QuietStderr`], which does the same (tracing-subscriber would
//!   otherwise report its failed write with `eprint!`, which panics).
//! - Output on stdout (`println!`, a command's answer): a failed write
//!   (`>/dev/full`, a file on a full disk) ends the command with exit
//!   status 1 and one line on stderr saying why ([`stdout_errors_exit_1`]),
//!   instead of Rust's panic. A closed pipe still ends it by SIGPIPE, as
//!   any Unix filter (main.rs); the daemon writes nothing on stdout.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Lines of stderr lost to a failed write.
static LOST: AtomicU64 = AtomicU64::new(0);

/// Writes one line to stderr; a failure is counted, not raised.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    let mut e = std::io::stderr().lock();
    if writeln!(e, "{args}").is_err() {
        LOST.fetch_add(1, Ordering::Relaxed);
    }
}

/// Lines of stderr lost so far (`/metrics`: numaplace_log_lines_lost_total).
pub fn lost_lines() -> u64 {
    LOST.load(Ordering::Relaxed)
}

/// Stderr for the logger: a failed write is counted and reported as done.
pub struct QuietStderr;

impl Write for QuietStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if std::io::stderr().write_all(buf).is_err() {
            LOST.fetch_add(1, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// `eprintln!` that never panics ([`stderr_line`]).
macro_rules! say {
    ($($t:tt)*) => {
        $crate::output::stderr_line(format_args!($($t)*))
    };
}
pub(crate) use say;

/// Turns the standard library's panic on a failed write to stdout into
/// exit status 1 and one line naming the error; any other panic is
/// reported as before.
pub fn stdout_errors_exit_1() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // The standard library's message is formatted: a String payload.
        let payload = info.payload();
        let message = (payload.downcast_ref::<String>().map(String::as_str))
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if let Some(why) = message.and_then(|m| m.strip_prefix("failed printing to stdout: ")) {
            stderr_line(format_args!(
                "numaplace: error: cannot write the output to standard output: {why}"
            ));
            std::process::exit(1);
        }
        default(info);
    }));
}
