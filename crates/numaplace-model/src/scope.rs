//! Which processes the daemon may touch. Empty means nothing: the daemon
//! acts only on what its configuration names, or on everything with
//! `all`. Kernel threads are never in scope.

use serde::{Deserialize, Serialize};

use crate::{GroupKind, Snapshot, TaskGroup};

/// The most entries in each of a scope's lists.
pub const MAX_RULES: usize = 1024;
/// The longest comm pattern (a comm is at most 15 bytes; `*` and `?` add).
pub const MAX_PATTERN_BYTES: usize = 256;

/// The config's `[scope]`: which processes numaplace may act on. Empty
/// (the default), it names none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scope {
    /// Every user process.
    pub all: bool,
    /// These process ids.
    pub pids: Vec<i32>,
    /// Processes whose name, or a thread's, matches one of these patterns
    /// (`*`, `?`). Names are what processes call themselves: scope by
    /// cgroup where that matters.
    pub comms: Vec<String>,
    /// Processes in these cgroup v2 subtrees (`/system.slice/db.service`).
    pub cgroups: Vec<String>,
    /// Virtual machines (QEMU/KVM processes with vCPU threads).
    pub vms: bool,
    /// Processes never in scope, whatever the rules above say: a
    /// workload's opt-out.
    #[serde(skip_serializing_if = "Exclude::is_empty")]
    pub exclude: Exclude,
}

/// `[scope.exclude]`: processes the scope never takes in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Exclude {
    /// These process ids.
    pub pids: Vec<i32>,
    /// Processes whose name, or a thread's, matches one of these patterns
    /// (`*`, `?`).
    pub comms: Vec<String>,
    /// Processes in these cgroup v2 subtrees; a pattern with `*` or `?`
    /// matches the process's cgroup or any cgroup above it
    /// (`/kubepods.slice/*/kubepods-*-pod1234*.slice`).
    pub cgroups: Vec<String>,
    /// Virtual machines by name (`*`, `?`): libvirt's domain name, QEMU's
    /// `-name guest=`.
    pub vms: Vec<String>,
}

impl Exclude {
    /// Whether it excludes nothing.
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
            && self.comms.is_empty()
            && self.cgroups.is_empty()
            && self.vms.is_empty()
    }

    /// Whether it takes this process out.
    pub fn matches(&self, g: &TaskGroup, s: &Snapshot) -> bool {
        if self.is_empty() {
            return false;
        }
        if self.pids.contains(&g.pid) {
            return true;
        }
        if let GroupKind::Vm { name: Some(n), .. } = &g.kind {
            if self.vms.iter().any(|p| glob(p, n)) {
                return true;
            }
        }
        if let Some(cg) = &g.cgroup {
            if self.cgroups.iter().any(|p| cgroup_matches(p, cg)) {
                return true;
            }
        }
        !self.comms.is_empty() && names(g, s).any(|n| self.comms.iter().any(|p| glob(p, n)))
    }
}

/// A cgroup rule: a plain path holds its subtree; a pattern matches the
/// cgroup or one above it.
fn cgroup_matches(rule: &str, path: &str) -> bool {
    if !rule.contains(['*', '?']) {
        return in_subtree(rule, path);
    }
    let mut at = path.trim_end_matches('/');
    loop {
        if glob(rule, at) {
            return true;
        }
        match at.rfind('/') {
            Some(0) | None => return glob(rule, "/"),
            Some(i) => at = &at[..i],
        }
    }
}

/// A process's name and its threads' names.
fn names<'a>(g: &'a TaskGroup, s: &'a Snapshot) -> impl Iterator<Item = &'a str> {
    std::iter::once(g.comm.as_str()).chain(
        g.threads
            .iter()
            .filter_map(|&t| s.task(t))
            .map(|t| t.comm.as_str()),
    )
}

impl Scope {
    /// Whether the scope names nothing at all.
    pub fn is_empty(&self) -> bool {
        !self.all
            && !self.vms
            && self.pids.is_empty()
            && self.comms.is_empty()
            && self.cgroups.is_empty()
    }

    /// Checks the scope's own values; the message says what to fix.
    pub fn validate(&self) -> Result<(), String> {
        // The exclusions' lists are checked as the rules' are (the
        // scope built here excludes nothing: no recursion).
        let x = &self.exclude;
        if !x.is_empty() {
            Scope {
                pids: x.pids.clone(),
                comms: x.comms.iter().chain(&x.vms).cloned().collect(),
                cgroups: (x.cgroups.iter())
                    .map(|c| c.replace(['*', '?'], "x"))
                    .collect(),
                ..Scope::default()
            }
            .validate()
            .map_err(|e| e.replacen("scope", "scope exclude", 1))?;
        }
        if let Some(p) = self.pids.iter().find(|&&p| p <= 0) {
            return Err(format!("scope pid {p}: process ids are positive"));
        }
        if let Some(c) = self.cgroups.iter().find(|c| !c.starts_with('/')) {
            return Err(format!(
                "scope cgroup {c:?}: give a cgroup v2 path from the hierarchy's root, like /system.slice"
            ));
        }
        if let Some(c) = self.comms.iter().find(|c| c.is_empty()) {
            return Err(format!("scope comm pattern {c:?} is empty"));
        }
        // Every round matches every thread's name against every pattern:
        // the counts are bounded so a config cannot make a round take
        // minutes (and SIGTERM wait for it).
        for (what, n) in [
            ("pids", self.pids.len()),
            ("comms", self.comms.len()),
            ("cgroups", self.cgroups.len()),
        ] {
            if n > MAX_RULES {
                return Err(format!(
                    "scope {what} has {n} entries: must be 0..={MAX_RULES}"
                ));
            }
        }
        if let Some(c) = self.comms.iter().find(|c| c.len() > MAX_PATTERN_BYTES) {
            return Err(format!(
                "scope comm pattern of {} bytes: must be 1..={MAX_PATTERN_BYTES} bytes",
                c.len()
            ));
        }
        if let Some(c) = self.cgroups.iter().find(|c| {
            c.split('/').any(|part| part == ".." || part == ".")
                || c.contains('\0')
                || c.len() > 4096
        }) {
            return Err(format!(
                "scope cgroup {c:?}: give a plain path from the hierarchy's root, without . or .. parts"
            ));
        }
        Ok(())
    }

    /// Whether the scope takes in this process (any rule may match).
    pub fn matches(&self, g: &TaskGroup, s: &Snapshot) -> bool {
        if g.is_kernel() || self.exclude.matches(g, s) {
            return false;
        }
        if self.all || self.pids.contains(&g.pid) {
            return true;
        }
        if self.vms && matches!(g.kind, GroupKind::Vm { .. }) {
            return true;
        }
        if let Some(cg) = &g.cgroup {
            if self.cgroups.iter().any(|p| in_subtree(p, cg)) {
                return true;
            }
        }
        !self.comms.is_empty() && names(g, s).any(|n| self.comms.iter().any(|p| glob(p, n)))
    }
}

/// `path` is `prefix` or below it, component-wise (`/a` holds `/a/b`, not `/ab`).
pub fn in_subtree(prefix: &str, path: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    prefix.is_empty()
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|r| r.starts_with('/'))
}

/// Shell-style wildcard match: `*` any run, `?` one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {

    /// `[scope.exclude]` takes a process out whatever rule takes it in: by
    /// pid, name, cgroup (a subtree, or a pattern matching it or a cgroup
    /// above it) or VM name.
    #[test]
    fn exclusions_take_processes_out() {
        use crate::TaskGroup;
        let group = |pid: i32, comm: &str, cgroup: &str, vm: Option<&str>| TaskGroup {
            pid,
            start_time: 1,
            comm: comm.into(),
            cmdline: vec![comm.into()],
            cgroup: Some(cgroup.into()),
            kind: match vm {
                Some(n) => GroupKind::Vm {
                    name: Some(n.into()),
                    accel: "KVM".into(),
                    evidence: "test".into(),
                },
                None => GroupKind::Process,
            },
            threads: vec![pid],
            memory: None,
        };
        let s = Snapshot::default();
        let mut scope = Scope {
            all: true,
            ..Scope::default()
        };
        scope.exclude = Exclude {
            pids: vec![7],
            comms: vec!["backup*".into()],
            cgroups: vec![
                "/system.slice/db.service".into(),
                "/kubepods.slice/*/kubepods-*-pod1234*.slice".into(),
            ],
            vms: vec!["prod-*".into()],
        };
        scope.validate().unwrap();
        for (g, out) in [
            (group(7, "x", "/a", None), true),
            (group(8, "backupd", "/a", None), true),
            (
                group(9, "db", "/system.slice/db.service/worker", None),
                true,
            ),
            (group(10, "db2", "/system.slice/db.service2", None), false),
            (
                group(
                    11,
                    "app",
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_ab.slice/cri-1.scope",
                    None,
                ),
                true,
            ),
            (
                group(12, "qemu", "/machine.slice/x", Some("prod-web")),
                true,
            ),
            (
                group(13, "qemu", "/machine.slice/y", Some("test-web")),
                false,
            ),
        ] {
            assert_eq!(!scope.matches(&g, &s), out, "{} {:?}", g.pid, g.cgroup);
        }
        scope.exclude.cgroups = vec!["/a/../b".into()];
        let e = scope.validate().unwrap_err();
        assert!(e.starts_with("scope exclude cgroup"), "{e}");
    }
    use super::*;

    #[test]
    fn wildcards() {
        assert!(glob("postgres*", "postgres: writer"));
        assert!(glob("*KVM", "CPU 0/KVM"));
        assert!(glob("CPU ?/TCG", "CPU 3/TCG"));
        assert!(!glob("CPU ?/TCG", "CPU 12/TCG"));
        assert!(glob("a*b*c", "aXXbYYc"));
        assert!(!glob("a*b", "ac"));
        assert!(glob("*", ""));
    }

    #[test]
    fn cgroup_subtrees() {
        assert!(in_subtree("/system.slice", "/system.slice/foo.service"));
        assert!(in_subtree("/system.slice/", "/system.slice"));
        assert!(!in_subtree("/system.slice", "/system.slicer"));
        assert!(in_subtree("/", "/anything"));
    }

    #[test]
    fn validation() {
        assert!(Scope::default().is_empty());
        assert!(
            Scope {
                pids: vec![0],
                ..Scope::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            Scope {
                cgroups: vec!["x".into()],
                ..Scope::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            Scope {
                all: true,
                ..Scope::default()
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn hostile_scopes_are_refused_with_the_range() {
        let many = Scope {
            comms: (0..500_000).map(|i| format!("p{i}*")).collect(),
            ..Scope::default()
        };
        let e = many.validate().unwrap_err();
        assert!(
            e.contains("comms has 500000 entries: must be 0..=1024"),
            "{e}"
        );
        for bad in ["/../../etc", "/a/./b", "/a/.."] {
            let s = Scope {
                cgroups: vec![bad.into()],
                ..Scope::default()
            };
            assert!(
                s.validate().unwrap_err().contains("without . or .."),
                "{bad}"
            );
        }
        let s = Scope {
            cgroups: vec!["/system.slice/a..b.service".into()],
            ..Scope::default()
        };
        assert!(s.validate().is_ok());
    }
}
