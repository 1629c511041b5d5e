//! SIGHUP: the daemon reads its configuration again (the file, with the
//! command line's flags on top, as at start) and goes on with what may
//! change while it runs: the scope (its rules and exclusions), the
//! policy's parameters, the interval and the engine's limits. What it
//! pinned stays pinned and is put back when it stops, as before. A config
//! that does not load (a syntax error, an unknown key, a bad value) leaves
//! the running one in place, and the log says why; settings that only a
//! restart can change (the policy itself, the CPUs, the dry run, the
//! journal, the state file, the metrics listener, the machine file, ...)
//! are said to need one and kept as they were.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use numaplace_linux::balancing::NumaBalancing;
use numaplace_linux::live::LiveControl;
use numaplace_policy::engine::Reconfigure;

use super::settings::{Settings, engine_config, settings};
use super::signals::Signals;
use crate::cli::RunArgs;
use crate::config::Config;
use crate::report::engine::describe_scope;

/// What the running daemon was started with, and what it reloads.
pub(super) struct Reloader<'a> {
    args: &'a RunArgs,
    /// The configuration running now (the reloadable parts as last
    /// reloaded, the others as at start).
    pub(super) config: Config,
    pub(super) interval: Duration,
    balancing: NumaBalancing,
    /// Where the live reading takes a new interval and memory scope.
    pub(super) control: Option<Arc<LiveControl>>,
}

impl<'a> Reloader<'a> {
    pub(super) fn new(args: &'a RunArgs, s: &Settings, balancing: NumaBalancing) -> Reloader<'a> {
        Reloader {
            args,
            config: s.config.clone(),
            interval: s.interval,
            balancing,
            control: None,
        }
    }

    /// The file reloaded from, for the log.
    fn file(&self) -> String {
        match &self.args.choice.config {
            Some(f) => f.display().to_string(),
            None => "the configuration".into(),
        }
    }

    /// Reads the configuration again: what the engine goes on with, or
    /// `None` where nothing it runs with changed or the new one does not
    /// load (each said in the log).
    pub(super) fn reload(&mut self) -> Option<Reconfigure> {
        let file = self.file();
        let new = match settings(self.args) {
            Ok(new) => new,
            Err(e) => {
                tracing::warn!(
                    "SIGHUP: {file} not reloaded: {e:#}; numaplace goes on with the \
                     configuration it had (fix the file and send SIGHUP again)"
                );
                return None;
            }
        };
        if new.config.scope.is_empty() {
            tracing::warn!(
                "SIGHUP: {file} not reloaded: its scope names nothing; numaplace goes on with \
                 the scope it had ({}). To stop placing, stop numaplace: it puts back what it \
                 changed",
                describe_scope(&self.config.scope)
            );
            return None;
        }
        let restart = needs_restart(&self.config, &new.config);
        if !restart.is_empty() {
            tracing::warn!(
                "SIGHUP: {file}: {} changed, which only a restart applies: kept as they were",
                restart.join(", ")
            );
        }
        let mut said = Vec::new();
        if new.config.scope != self.config.scope {
            said.push(format!("scope: {}", describe_scope(&new.config.scope)));
            self.config.scope = new.config.scope.clone();
        }
        let same_policy = new.config.policy.name() == self.config.policy.name();
        let policy = if same_policy && new.config.policy != self.config.policy {
            said.push(format!(
                "{} parameters (the policy starts over: what it learned is dropped, what it \
                 pinned stays)",
                self.config.policy.name()
            ));
            self.config.policy = new.config.policy.clone();
            Some(new.policy())
        } else {
            None
        };
        if new.config.engine != self.config.engine {
            said.push("[engine] limits".into());
            self.config.engine = new.config.engine.clone();
        }
        if new.interval != self.interval {
            said.push(format!("interval {:?}", new.interval));
            self.interval = new.interval;
            if let Some(c) = &self.control {
                c.set_interval(new.interval);
            }
        }
        if said.is_empty() {
            tracing::info!("SIGHUP: {file} reloaded: nothing numaplace runs with changed");
            return None;
        }
        if let Some(c) = &self.control {
            c.set_memory_scope(self.config.scope.clone());
        }
        tracing::info!(
            "SIGHUP: {file} reloaded, from the next round: {}",
            said.join("; ")
        );
        Some(Reconfigure {
            scope: self.config.scope.clone(),
            policy,
            config: engine_config(&self.config, self.balancing),
        })
    }
}

/// The settings that differ between `old` and `new` and that only a
/// restart applies, by their names in the file.
fn needs_restart(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if old.policy.name() != new.policy.name() {
        out.push(format!(
            "the policy ({} -> {})",
            old.policy.name(),
            new.policy.name()
        ));
    }
    let fields: [(&str, bool); 10] = [
        ("dry_run", old.dry_run != new.dry_run),
        ("cpus", old.cpus != new.cpus),
        ("journal", old.journal != new.journal),
        ("state", old.state != new.state),
        ("[metrics]", old.metrics != new.metrics),
        ("[perf]", old.perf != new.perf),
        ("[vms]", old.vms != new.vms),
        ("[guest_hints]", old.guest_hints != new.guest_hints),
        ("[machine]", old.machine != new.machine),
        ("[kubernetes]", old.kubernetes != new.kubernetes),
    ];
    out.extend(
        fields
            .into_iter()
            .filter(|(_, changed)| *changed)
            .map(|(name, _)| name.to_string()),
    );
    out
}

/// How the wait of a service whose scope names nothing ended.
pub(super) enum Waited {
    /// SIGTERM or SIGINT.
    Stopped,
    /// SIGHUP with a configuration whose scope names something: the
    /// settings to start with.
    Scope(Box<Settings>),
}

/// The service with a config whose scope names nothing: says so, places
/// nothing, and waits for SIGTERM, or for SIGHUP with a scope. Nothing
/// runs yet, so the new configuration is taken whole, except what the
/// start has set up already (the state file, the dry run, the metrics
/// listener, libvirt's access), which only a restart changes.
pub(super) fn wait_for_a_scope(reloader: &Reloader<'_>, signals: &Signals) -> Waited {
    let (stop, hup) = (&signals.stop, &signals.hup);
    let file = reloader.file();
    tracing::warn!(
        "{file}: the [scope] table names nothing, so numaplace places nothing: name processes, \
         cgroups or VMs there (see the comments in the file) and send SIGHUP \
         (`systemctl reload numaplace`)"
    );
    loop {
        if stop.load(Ordering::Relaxed) {
            crate::output::say!(
                "numaplace: stopped; the scope named nothing, so nothing was changed"
            );
            return Waited::Stopped;
        }
        if hup.swap(false, Ordering::Relaxed) {
            match settings(reloader.args) {
                Err(e) => tracing::warn!(
                    "SIGHUP: {file} not reloaded: {e:#}; numaplace goes on waiting for a scope"
                ),
                Ok(new) if new.config.scope.is_empty() => {
                    tracing::warn!("SIGHUP: {file} reloaded; its scope still names nothing")
                }
                Ok(mut new) => {
                    let old = &reloader.config;
                    let mut kept = Vec::new();
                    if new.config.state != old.state {
                        kept.push("state");
                        new.config.state = old.state.clone();
                    }
                    if new.config.dry_run != old.dry_run {
                        kept.push("dry_run");
                        new.config.dry_run = old.dry_run;
                    }
                    if new.config.metrics != old.metrics {
                        kept.push("[metrics]");
                        new.config.metrics = old.metrics.clone();
                    }
                    if new.config.vms != old.vms {
                        kept.push("[vms]");
                        new.config.vms = old.vms.clone();
                    }
                    if !kept.is_empty() {
                        tracing::warn!(
                            "SIGHUP: {file}: {} changed, which only a restart applies: kept as \
                             they were",
                            kept.join(", ")
                        );
                    }
                    tracing::info!(
                        "SIGHUP: {file} reloaded: placing {}",
                        describe_scope(&new.config.scope)
                    );
                    return Waited::Scope(Box::new(new));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_only_a_restart_applies_is_named() {
        let old = Config::parse("").unwrap();
        let mut new = Config::parse("dry_run = true\ninterval = \"2s\"\n").unwrap();
        new.scope.all = true;
        // The interval and the scope reload; the dry run does not.
        assert_eq!(needs_restart(&old, &new), vec!["dry_run".to_string()]);
        let other = Config::parse("[policy]\nname = \"dino\"\n").unwrap();
        let said = needs_restart(&old, &other);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("the policy ("), "{said:?}");
        assert!(needs_restart(&old, &old.clone()).is_empty());
    }
}
