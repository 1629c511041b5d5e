//! The signals the daemon answers: SIGINT and SIGTERM stop it (after
//! putting back what it changed), SIGHUP reloads its configuration.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};

/// The flags the daemon's signals set; the loop looks at them between
/// rounds.
pub(crate) struct Signals {
    /// Set by SIGINT and SIGTERM: the loop ends at the next check.
    pub(crate) stop: Arc<AtomicBool>,
    /// Set by SIGHUP: the configuration is read again after the round.
    pub(crate) hup: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers. SIGHUP's would by default end the daemon
    /// without restoring anything.
    pub(crate) fn install() -> Result<Signals> {
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, Arc::clone(&stop))
                .context("installing signal handlers")?;
        }
        let hup = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&hup))
            .context("installing signal handlers")?;
        Ok(Signals { stop, hup })
    }
}
