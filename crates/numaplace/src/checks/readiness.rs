//! doctor's exit status, for a readiness probe: 0 only when every signal
//! and interface the configured policy (and the engine running it) reads
//! works here, [`NOT_READY`] otherwise.

use super::{Check, Row, Status};
use crate::config::Config;

/// The exit status when something the configured policy reads does not
/// work here (missing, off, or only in part). 1 and 2 stay numaplace's
/// usual ones: an error, a bad argument or config.
pub const NOT_READY: u8 = 3;

/// What the configured policy and the engine under it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reads {
    /// The policy's name (`auto`, `dino`, ...).
    pub policy: &'static str,
    /// Whether it places anything (every policy but `default`): then the
    /// engine needs the topology, pinning, page moves and memory per node.
    pub places: bool,
    /// Whether it may switch `kernel.numa_balancing`: `auto`, with
    /// `[engine] manage_kernel_balancing` and `[scope] all = true`.
    pub switches_kernel_balancing: bool,
}

impl Reads {
    /// What the policy `config` names reads and does.
    pub fn of(config: &Config) -> Reads {
        let policy = config.policy.name();
        Reads {
            policy,
            places: policy != "default",
            switches_kernel_balancing: policy == "auto"
                && config.engine.manage_kernel_balancing
                && config.scope.all,
        }
    }

    /// Whether `check` is one this policy reads. The task iterator never
    /// is: without it the engine reads the same from `/proc`, only slower;
    /// nor is numastat, which no policy needs to place.
    pub fn needs(&self, check: &Check) -> bool {
        match check.id.as_str() {
            "topology" => true,
            "pinning" | "moving-memory" | "memory-per-node" => self.places,
            "kernel-balancing-switch" => self.switches_kernel_balancing,
            // numad-like and auto rank nodes by it where it is there, and
            // as numad does where it is not.
            "task-iterator" | "numastat" => false,
            _ => check.used_by.iter().any(|p| p == self.policy),
        }
    }
}

/// The rows the policy needs that do not work here.
pub(crate) fn not_ready(rows: &[Row]) -> Vec<&Row> {
    rows.iter()
        .filter(|r| r.needed && r.check.status != Status::Ok)
        .collect()
}

/// 0 when every needed row works, [`NOT_READY`] otherwise.
pub fn exit_status(rows: &[Row]) -> u8 {
    if not_ready(rows).is_empty() {
        0
    } else {
        NOT_READY
    }
}

/// The report's last line: whether the policy has what it reads, and the
/// exit status that says it.
pub(crate) fn verdict(rows: &[Row], reads: &Reads) -> String {
    let not = not_ready(rows);
    if not.is_empty() {
        format!(
            "{} has everything it reads here (exit status 0)",
            reads.policy
        )
    } else {
        let ids: Vec<&str> = not.iter().map(|r| r.check.id.as_str()).collect();
        format!(
            "{} reads what does not fully work here: {} (exit status {NOT_READY})",
            reads.policy,
            ids.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, status: Status, used_by: &[&str], reads: &Reads) -> Row {
        let check = Check {
            id: id.into(),
            name: id.into(),
            status,
            source: "here".into(),
            fix: None,
            used_by: used_by.iter().map(|s| s.to_string()).collect(),
        };
        Row {
            needed: reads.needs(&check),
            check,
            caps: None,
        }
    }

    fn reads(policy: &'static str) -> Reads {
        Reads {
            policy,
            places: policy != "default",
            switches_kernel_balancing: false,
        }
    }

    #[test]
    fn a_signal_only_other_policies_read_does_not_fail_the_probe() {
        let r = reads("numad-like");
        let rows = vec![
            row("topology", Status::Ok, &[], &r),
            row("pinning", Status::Ok, &[], &r),
            row("samples", Status::Missing, &["dino", "auto"], &r),
            row("task-iterator", Status::Partial, &[], &r),
            row("energy", Status::Missing, &[], &r),
        ];
        assert_eq!(exit_status(&rows), 0);
        assert!(verdict(&rows, &r).ends_with("(exit status 0)"));
    }

    #[test]
    fn a_signal_the_policy_reads_fails_it_and_is_named() {
        let r = reads("dino");
        let rows = vec![
            row("topology", Status::Ok, &[], &r),
            row("samples", Status::Missing, &["dino", "auto"], &r),
            row("llc-miss-rate", Status::Partial, &["dino"], &r),
            row("cpi", Status::Missing, &["auto"], &r),
        ];
        assert_eq!(exit_status(&rows), NOT_READY);
        let v = verdict(&rows, &r);
        assert!(
            v.contains(": samples, llc-miss-rate (exit status 3)"),
            "{v}"
        );
    }

    #[test]
    fn only_a_placing_policy_needs_pinning_and_only_auto_the_sysctl() {
        let pinning_partial = |r: &Reads| {
            exit_status(&[
                row("pinning", Status::Partial, &[], r),
                row("kernel-balancing-switch", Status::Missing, &["auto"], r),
            ])
        };
        assert_eq!(pinning_partial(&reads("default")), 0);
        assert_eq!(pinning_partial(&reads("static")), NOT_READY);
        let switch_refused = |r: &Reads| {
            exit_status(&[row(
                "kernel-balancing-switch",
                Status::Missing,
                &["auto"],
                r,
            )])
        };
        let mut auto = reads("auto");
        assert_eq!(
            switch_refused(&auto),
            0,
            "auto leaves the sysctl alone unless its scope is every process"
        );
        auto.switches_kernel_balancing = true;
        assert_eq!(switch_refused(&auto), NOT_READY);
    }

    #[test]
    fn reads_follow_the_config() {
        let mut c = Config::default();
        assert_eq!(Reads::of(&c).policy, "auto");
        assert!(!Reads::of(&c).switches_kernel_balancing);
        c.scope.all = true;
        assert!(Reads::of(&c).switches_kernel_balancing);
        c.engine.manage_kernel_balancing = false;
        assert!(!Reads::of(&c).switches_kernel_balancing);
        c.policy = numaplace_policy::registry::PolicyKind::from_name("default").unwrap();
        assert!(!Reads::of(&c).places);
    }
}
