//! `/proc/<pid>/cgroup`: `hierarchy-id:controllers:path` lines; the unified
//! (v2) hierarchy is the line `0::<path>`.

/// The cgroups a process belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupInfo {
    /// The path in the unified (v2) hierarchy (`/system.slice/foo.service`),
    /// if the process is in one. A removed cgroup keeps the kernel's
    /// ` (deleted)` suffix.
    pub v2_path: Option<String>,
    /// The v1 hierarchies: (controllers, path), e.g. (`cpu,cpuacct`, `/`)
    /// or (`name=systemd`, `/user.slice`), in the kernel's order.
    pub v1: Vec<(String, String)>,
}

/// Parses a `cgroup` file. Never fails: lines without the
/// `id:controllers:path` shape are skipped. The path is everything after
/// the second colon, so paths holding colons survive.
pub fn parse_cgroup(text: &str) -> CgroupInfo {
    let mut info = CgroupInfo::default();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if id == "0" && controllers.is_empty() {
            if info.v2_path.is_none() {
                info.v2_path = Some(path.to_string());
            }
        } else {
            info.v1.push((controllers.to_string(), path.to_string()));
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cat /proc/self/cgroup` on the development VM: hybrid v1 + v2.
    const HYBRID: &str = "9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/bdee59ce45f92055c78846be09717c09
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
";

    #[test]
    fn hybrid_capture() {
        let c = parse_cgroup(HYBRID);
        assert_eq!(c.v2_path.as_deref(), Some("/"));
        assert_eq!(c.v1.len(), 9);
        assert_eq!(c.v1[0], ("name=systemd".into(), "/".into()));
        assert_eq!(
            c.v1[5],
            (
                "memory".into(),
                "/process_api/bdee59ce45f92055c78846be09717c09".into()
            )
        );
    }

    #[test]
    fn unified_only_and_odd_paths() {
        let c = parse_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n");
        assert_eq!(
            c.v2_path.as_deref(),
            Some("/user.slice/user-1000.slice/session-2.scope")
        );
        assert!(c.v1.is_empty());

        let c = parse_cgroup("0::/machine.slice/a:b c (deleted)\n");
        assert_eq!(c.v2_path.as_deref(), Some("/machine.slice/a:b c (deleted)"));

        let c = parse_cgroup("4:cpu,cpuacct:/docker/abc\n");
        assert_eq!(c.v1, [("cpu,cpuacct".into(), "/docker/abc".into())]);
        assert_eq!(c.v2_path, None);
    }

    #[test]
    fn garbage_is_skipped() {
        assert_eq!(parse_cgroup(""), CgroupInfo::default());
        let c = parse_cgroup("garbage\n::\nx::/a\n:cpu:/b\n0:/only-two\n0::/real\n0::/second\n");
        assert_eq!(c.v2_path.as_deref(), Some("/real"));
        assert!(c.v1.is_empty(), "{:?}", c.v1);
    }
}
