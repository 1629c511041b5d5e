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

/// Writes one line to stderr; a failure is counted, not raised. Public
/// for [`say!`]'s expansion in the binary.
#[doc(hidden)]
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    let mut e = std::io::stderr().lock();
    if writeln!(e, "{args}").is_err() {
        LOST.fetch_add(1, Ordering::Relaxed);
    }
}

/// Lines of stderr lost so far (`/metrics`: numaplace_log_lines_lost_total).
pub(crate) fn lost_lines() -> u64 {
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
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {
        $crate::output::stderr_line(format_args!($($t)*))
    };
}
pub use crate::say;

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

/// JSON as numaplace writes it: serde_json's, with every character that
/// could act on a terminal escaped as `\uXXXX` (C1 controls such as U+009B,
/// which some terminals read as CSI; DEL; the bidirectional and invisible
/// format characters of [`numaplace_model::task::is_bidi_or_invisible`]).
/// serde_json escapes only U+0000-U+001F; a process names its own threads,
/// and `tasks --json | less` or a `cat` of a journal must not let it move
/// the cursor or reorder what is shown. Any JSON reader gets the same
/// strings back.
pub mod json {
    use serde::Serialize;
    use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};
    use std::io;

    /// Pretty JSON (`--json` answers).
    pub fn pretty<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
        let mut out = Vec::new();
        write(&mut out, value, Escaping(PrettyFormatter::new()))?;
        Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
    }

    /// One line of JSON (a journal entry, a recorded snapshot).
    pub fn line<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
        let mut out = Vec::new();
        to_writer(&mut out, value)?;
        Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
    }

    /// [`line()`], straight into a writer.
    pub fn to_writer<W: io::Write, T: Serialize + ?Sized>(
        w: W,
        value: &T,
    ) -> serde_json::Result<()> {
        write(w, value, Escaping(CompactFormatter))
    }

    fn write<W: io::Write, F: Formatter, T: Serialize + ?Sized>(
        w: W,
        value: &T,
        f: Escaping<F>,
    ) -> serde_json::Result<()> {
        value.serialize(&mut serde_json::Serializer::with_formatter(w, f))
    }

    fn escaped(c: char) -> bool {
        c.is_control() || numaplace_model::task::is_bidi_or_invisible(c)
    }

    /// A formatter that escapes [`escaped`] characters and leaves the rest
    /// to `F`.
    struct Escaping<F>(F);

    impl<F: Formatter> Formatter for Escaping<F> {
        fn write_string_fragment<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            fragment: &str,
        ) -> io::Result<()> {
            let mut start = 0;
            for (i, c) in fragment.char_indices() {
                if escaped(c) {
                    w.write_all(&fragment.as_bytes()[start..i])?;
                    // Every such character is in the Basic Multilingual
                    // Plane: one \u escape each.
                    write!(w, "\\u{:04x}", c as u32)?;
                    start = i + c.len_utf8();
                }
            }
            w.write_all(&fragment.as_bytes()[start..])
        }

        fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.0.begin_array(w)
        }
        fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.0.end_array(w)
        }
        fn begin_array_value<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> io::Result<()> {
            self.0.begin_array_value(w, first)
        }
        fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.0.end_array_value(w)
        }
        fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.0.begin_object(w)
        }
        fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.0.end_object(w)
        }
        fn begin_object_key<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> io::Result<()> {
            self.0.begin_object_key(w, first)
        }
        fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.0.end_object_key(w)
        }
        fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.0.begin_object_value(w)
        }
        fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.0.end_object_value(w)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn characters_that_act_on_a_terminal_are_escaped_and_read_back_the_same() {
            let names = vec![
                "csi\u{9b}2J".to_string(),
                "rtl\u{202e}gpj.exe".to_string(),
                "del\u{7f}".to_string(),
                "plain ünïcode 名前".to_string(),
                "esc\u{1b}]2;x\u{7}".to_string(),
            ];
            for text in [pretty(&names).unwrap(), line(&names).unwrap()] {
                for c in ['\u{9b}', '\u{202e}', '\u{7f}', '\u{1b}', '\u{7}'] {
                    assert!(!text.contains(c), "{c:?} raw in {text:?}");
                }
                assert!(
                    text.contains("\\u009b") && text.contains("\\u202e"),
                    "{text}"
                );
                assert!(text.contains("plain ünïcode 名前"), "{text}");
                let back: Vec<String> = serde_json::from_str(&text).unwrap();
                assert_eq!(back, names);
            }
            assert!(
                pretty(&names).unwrap().contains("\n  "),
                "pretty stays pretty"
            );
        }
    }
}
