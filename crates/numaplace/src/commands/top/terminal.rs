//! The terminal in the view's mode (raw, alternate screen, cursor hidden)
//! and put back as it was on every way out: a return, an error, a panic
//! (the hook restores before the message is printed) and SIGINT / SIGTERM /
//! SIGHUP (flags the loop checks between frames, so it returns normally).

use std::io::{Stdout, stdout};
use std::os::fd::AsFd as _;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use numaplace_linux::probe::{self, Input};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// Puts the terminal back; safe to call more than once.
pub(crate) fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), LeaveAlternateScreen, Show);
}

/// The terminal in the view's mode; dropped, it is put back.
pub(crate) struct Screen {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    pub(crate) fn enter() -> Result<Screen> {
        // A panic anywhere (a bug in the view, a thread) leaves the
        // terminal usable and its message readable.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        enable_raw_mode().context(
            "putting the terminal in raw mode (is stdout a terminal? --once prints one frame without one)",
        )?;
        let screen = Screen {
            terminal: Terminal::new(CrosstermBackend::new(stdout()))
                .context("opening the terminal")?,
        };
        execute!(stdout(), EnterAlternateScreen, Hide).context("switching screens")?;
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// A flag SIGINT, SIGTERM and SIGHUP set. In raw mode a typed Ctrl-C is a
/// key, not a signal; these come from `kill` or a closed terminal.
pub(crate) fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    Ok(stop)
}

/// Waits up to `timeout` for input on stdin, the terminal the view reads.
/// Asked before crossterm's own poll, which on a hung-up terminal reads
/// end-of-file over and over without returning (the view then spun at a
/// whole CPU, its SIGHUP flag never looked at).
pub(crate) fn wait_for_input(timeout: std::time::Duration) -> Input {
    probe::wait_for_input(std::io::stdin().as_fd(), timeout)
}
