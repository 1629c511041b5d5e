//! Cache and memory-bandwidth monitoring through Linux resctrl
//! (`Documentation/filesystems/resctrl.rst`, formerly
//! `Documentation/arch/x86/resctrl.rst`): Intel RDT CMT/MBM, AMD PQoS.
//!
//! **Read-only.** This module never creates, removes or writes resctrl
//! groups, `tasks` files or schemata; it reads what an administrator (or a
//! later, separate writer) set up.
//!
//! [`Resctrl::probe`] says once whether monitoring can be read, and if not,
//! why ([`ResctrlStatus`]): resctrl must be mounted at `/sys/fs/resctrl`
//! (`mount -t resctrl resctrl /sys/fs/resctrl`, seen in `/proc/mounts`)
//! and offer L3 monitoring (`info/L3_MON/mon_features`).
//!
//! Groups read ([`ResctrlGroup`], named by their path under the mount):
//! the root group `/`, its monitor groups `/mon_groups/<m>`, each control
//! group `/<c>`, and its monitor groups `/<c>/mon_groups/<m>`. A control
//! group's (and the root group's) counts **include** those of its monitor
//! groups, as the kernel sums them; callers adding groups up must not add a
//! monitor group to its parent.
//!
//! For each group and each L3 domain `mon_data/mon_L3_<XX>` (XX: the L3
//! cache id, decimal) a [`ResctrlReading`] holds:
//! - `llc_occupancy`: bytes of L3 the group holds now (instantaneous);
//! - `mbm_total_bytes`, `mbm_local_bytes`: bytes of memory traffic since the
//!   counter began (cumulative; derive rates with [`mbm_delta`]).
//!
//! A file reading `Unavailable`, `Error` or (in `mbm_event` counter
//! assignment mode) `Unassigned` gives `None`, as does an absent event file
//! (the event is not supported). On Sub-NUMA Cluster systems the
//! `mon_sub_L3_<YY>` subdirectories are not read: the `mon_L3_<XX>` files
//! already hold their sum for the L3 cache.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::sysroot::{ReadError, SysRoot};

/// Where resctrl must be mounted, relative to the root.
pub const RESCTRL_DIR: &str = "sys/fs/resctrl";
/// The mount table read to tell a mounted resctrl from an empty directory.
pub const MOUNTS: &str = "proc/mounts";

/// The monitoring event files read in each `mon_L3_<XX>` directory.
pub const LLC_OCCUPANCY: &str = "llc_occupancy";
/// Memory bandwidth to all memory, bytes.
pub const MBM_TOTAL_BYTES: &str = "mbm_total_bytes";
/// Memory bandwidth to local memory, bytes.
pub const MBM_LOCAL_BYTES: &str = "mbm_local_bytes";

/// A resctrl read failed; every variant names the path.
#[derive(Debug, Error)]
pub enum ResctrlError {
    #[error(transparent)]
    /// A file could not be read.
    Read(#[from] ReadError),
    #[error("cannot list {path}")]
    /// A directory could not be listed.
    List {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    #[error("{path}: {what}, found {value:?}")]
    /// A file's value is not what resctrl writes.
    Parse {
        /// The file or directory.
        path: PathBuf,
        /// What was expected.
        what: &'static str,
        /// What was found.
        value: String,
    },
}

/// Whether resctrl monitoring can be read, and why not.
#[derive(Debug)]
pub enum ResctrlStatus {
    /// Mounted, with L3 monitoring: what it offers.
    Available(Resctrl),
    /// No `resctrl` filesystem at `/sys/fs/resctrl` in `proc/mounts`.
    NotMounted {
        /// The mount table read.
        mounts: PathBuf,
    },
    /// The root has no `proc/mounts` (a snapshot taken without it), so
    /// whether resctrl was mounted cannot be told.
    NoMountTable {
        /// The mount table read.
        mounts: PathBuf,
    },
    /// resctrl is mounted, but not where we read it.
    MountedElsewhere {
        /// Where it is mounted.
        mount_point: String,
    },
    /// Mounted, but without L3 monitoring (allocation only, or a CPU
    /// without CMT/MBM): `info/L3_MON/mon_features` is absent or empty.
    NoL3Monitoring {
        /// The file that lists the monitoring features.
        mon_features: PathBuf,
    },
    /// `proc/mounts` or `mon_features` exists but could not be read.
    Unreadable(ResctrlError),
}

impl ResctrlStatus {
    /// resctrl, if available.
    pub fn available(&self) -> Option<&Resctrl> {
        match self {
            ResctrlStatus::Available(r) => Some(r),
            _ => None,
        }
    }

    /// The same, by value.
    pub fn into_available(self) -> Option<Resctrl> {
        match self {
            ResctrlStatus::Available(r) => Some(r),
            _ => None,
        }
    }

    /// Why monitoring is not available, in words for a log line and what
    /// to do about it; `None` when it is.
    pub fn reason(&self) -> Option<String> {
        Some(match self {
            ResctrlStatus::Available(_) => return None,
            ResctrlStatus::NotMounted { mounts } => format!(
                "resctrl is not mounted ({} lists no resctrl filesystem at /{RESCTRL_DIR}); \
                 on a CPU with RDT/PQoS monitoring, mount it with \
                 `mount -t resctrl resctrl /{RESCTRL_DIR}`",
                mounts.display()
            ),
            ResctrlStatus::NoMountTable { mounts } => format!(
                "cannot tell whether resctrl is mounted: {} does not exist",
                mounts.display()
            ),
            ResctrlStatus::MountedElsewhere { mount_point } => format!(
                "resctrl is mounted at {mount_point}, not /{RESCTRL_DIR}; mount it there too"
            ),
            ResctrlStatus::NoL3Monitoring { mon_features } => format!(
                "resctrl is mounted but offers no L3 monitoring ({} is absent or empty): \
                 the CPU or kernel lacks CMT/MBM",
                mon_features.display()
            ),
            ResctrlStatus::Unreadable(e) => {
                format!("cannot tell whether resctrl monitoring is available: {e}")
            }
        })
    }
}

/// A mounted resctrl with L3 monitoring.
#[derive(Debug, Clone)]
pub struct Resctrl {
    dir: PathBuf,
    mon_features: Vec<String>,
}

/// What kind of resctrl group a directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResctrlGroupKind {
    /// The default group at the mount point (`/`); its counts include its
    /// monitor groups.
    Root,
    /// A CTRL_MON group (`/<c>`); its counts include its monitor groups.
    Control,
    /// A MON group under `parent` (`/mon_groups/<m>`, `/<c>/mon_groups/<m>`).
    Monitor {
        /// The control group it is under (`/` for the root's).
        parent: String,
    },
}

/// One group: `name` is its path under the mount (`/`, `/c1`,
/// `/c1/mon_groups/m1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResctrlGroup {
    /// Its path under the mount point (`/`, `/c1/mon_groups/m1`).
    pub name: String,
    /// What kind of group.
    pub kind: ResctrlGroupKind,
}

/// One group's monitoring counters in one L3 domain, raw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResctrlReading {
    /// The group's path under the mount, as in [`ResctrlGroup::name`].
    pub group: String,
    /// The L3 cache id of `mon_L3_<XX>`.
    pub domain: u32,
    /// Bytes of L3 occupied now.
    pub llc_occupancy: Option<u64>,
    /// Cumulative bytes of all memory traffic.
    pub mbm_total_bytes: Option<u64>,
    /// Cumulative bytes of traffic to the local node's memory.
    pub mbm_local_bytes: Option<u64>,
}

impl Resctrl {
    /// Finds out whether monitoring can be read under `root`.
    pub fn probe(root: &SysRoot) -> ResctrlStatus {
        let mounts = match root.read_optional(MOUNTS) {
            Ok(Some(s)) => s,
            Ok(None) => {
                return ResctrlStatus::NoMountTable {
                    mounts: root.join(MOUNTS),
                };
            }
            Err(e) => return ResctrlStatus::Unreadable(e.into()),
        };
        let points = resctrl_mount_points(&mounts);
        let wanted = format!("/{RESCTRL_DIR}");
        if !points.iter().any(|p| p == &wanted) {
            return match points.into_iter().next() {
                Some(mount_point) => ResctrlStatus::MountedElsewhere { mount_point },
                None => ResctrlStatus::NotMounted {
                    mounts: root.join(MOUNTS),
                },
            };
        }
        let rel = format!("{RESCTRL_DIR}/info/L3_MON/mon_features");
        let mon_features = match root.read_optional(&rel) {
            Ok(Some(s)) => parse_mon_features(&s),
            Ok(None) => Vec::new(),
            Err(e) => return ResctrlStatus::Unreadable(e.into()),
        };
        if mon_features.is_empty() {
            return ResctrlStatus::NoL3Monitoring {
                mon_features: root.join(&rel),
            };
        }
        ResctrlStatus::Available(Resctrl {
            dir: root.join(RESCTRL_DIR),
            mon_features,
        })
    }

    /// The mount's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The events the kernel monitors (`info/L3_MON/mon_features`), e.g.
    /// `llc_occupancy`, `mbm_total_bytes`, `mbm_local_bytes`.
    pub fn mon_features(&self) -> &[String] {
        &self.mon_features
    }

    /// The groups that exist now: root, its monitor groups, each control
    /// group and its monitor groups, sorted by name within each level.
    pub fn groups(&self) -> Result<Vec<ResctrlGroup>, ResctrlError> {
        let mut groups = vec![ResctrlGroup {
            name: "/".to_owned(),
            kind: ResctrlGroupKind::Root,
        }];
        self.push_monitor_groups("/", &mut groups)?;
        for c in subdirs(&self.dir)? {
            if matches!(c.as_str(), "info" | "mon_groups" | "mon_data") {
                continue;
            }
            let dir = self.dir.join(&c);
            if !dir.join("tasks").exists() && !dir.join("mon_data").exists() {
                continue;
            }
            let name = format!("/{c}");
            groups.push(ResctrlGroup {
                name: name.clone(),
                kind: ResctrlGroupKind::Control,
            });
            self.push_monitor_groups(&name, &mut groups)?;
        }
        Ok(groups)
    }

    fn push_monitor_groups(
        &self,
        parent: &str,
        groups: &mut Vec<ResctrlGroup>,
    ) -> Result<(), ResctrlError> {
        for m in subdirs(&self.group_dir(parent).join("mon_groups"))? {
            groups.push(ResctrlGroup {
                name: format!("{}/mon_groups/{m}", parent.trim_end_matches('/')),
                kind: ResctrlGroupKind::Monitor {
                    parent: parent.to_owned(),
                },
            });
        }
        Ok(())
    }

    fn group_dir(&self, group: &str) -> PathBuf {
        self.dir.join(group.trim_start_matches('/'))
    }

    /// Every group's readings, per group then per L3 domain.
    pub fn read(&self) -> Result<Vec<ResctrlReading>, ResctrlError> {
        let mut out = Vec::new();
        for g in self.groups()? {
            out.extend(self.read_group(&g.name)?);
        }
        Ok(out)
    }

    /// One group's readings, one per L3 domain, by domain. A group removed
    /// since it was listed gives no readings rather than an error.
    pub fn read_group(&self, group: &str) -> Result<Vec<ResctrlReading>, ResctrlError> {
        let mon_data = self.group_dir(group).join("mon_data");
        let mut domains: Vec<(u32, PathBuf)> = subdirs(&mon_data)?
            .into_iter()
            .filter_map(|d| Some((parse_l3_domain(&d)?, mon_data.join(d))))
            .collect();
        domains.sort_by_key(|(id, _)| *id);
        domains
            .into_iter()
            .map(|(domain, dir)| {
                Ok(ResctrlReading {
                    group: group.to_owned(),
                    domain,
                    llc_occupancy: read_counter(&dir.join(LLC_OCCUPANCY))?,
                    mbm_total_bytes: read_counter(&dir.join(MBM_TOTAL_BYTES))?,
                    mbm_local_bytes: read_counter(&dir.join(MBM_LOCAL_BYTES))?,
                })
            })
            .collect()
    }

    /// The thread ids in a group's `tasks` file (`None` if the group has
    /// none, e.g. it was removed). Note the root group lists every thread
    /// not in another control group.
    pub fn tasks(&self, group: &str) -> Result<Option<Vec<u32>>, ResctrlError> {
        let path = self.group_dir(group).join("tasks");
        let Some(text) = read_optional(&path)? else {
            return Ok(None);
        };
        parse_tasks(&text)
            .map(Some)
            .map_err(|value| ResctrlError::Parse {
                path,
                what: "expected one thread id per line",
                value,
            })
    }
}

/// The bytes moved between two readings of a cumulative MBM counter, or
/// `None` if either reading is missing or the counter went backwards (it
/// was reset: the group was removed and made again, its RMID or assigned
/// counter changed). The kernel widens the hardware counter so it does not
/// wrap in practice; a decrease is never taken for a wrap.
pub fn mbm_delta(prev: Option<u64>, cur: Option<u64>) -> Option<u64> {
    cur?.checked_sub(prev?)
}

/// Parses one monitoring event file: a decimal byte count, or `None` for
/// the kernel's `Unavailable`, `Error` and `Unassigned`. `Err` holds the
/// text that was neither.
pub fn parse_counter(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    match t {
        "Unavailable" | "Error" | "Unassigned" => Ok(None),
        _ => t.parse().map(Some).map_err(|_| t.to_owned()),
    }
}

/// Parses a `tasks` file: one thread id per line. `Err` holds the first
/// line that is not one.
pub fn parse_tasks(text: &str) -> Result<Vec<u32>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.parse().map_err(|_| l.to_owned()))
        .collect()
}

/// Parses `info/L3_MON/mon_features`: one event name per line.
pub fn parse_mon_features(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// The mount points of `resctrl` filesystems in a `/proc/mounts` text.
pub fn resctrl_mount_points(mounts: &str) -> Vec<String> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, point, fstype) = (f.next()?, f.next()?, f.next()?);
            (fstype == "resctrl").then(|| point.replace("\\040", " "))
        })
        .collect()
}

/// The L3 cache id of a `mon_data` entry named `mon_L3_<XX>`.
pub fn parse_l3_domain(name: &str) -> Option<u32> {
    name.strip_prefix("mon_L3_")?.parse().ok()
}

fn read_counter(path: &Path) -> Result<Option<u64>, ResctrlError> {
    let Some(text) = read_optional(path)? else {
        return Ok(None);
    };
    parse_counter(&text).map_err(|value| ResctrlError::Parse {
        path: path.to_owned(),
        what: "expected a byte count, Unavailable, Error or Unassigned",
        value,
    })
}

fn read_optional(path: &Path) -> Result<Option<String>, ResctrlError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ReadError {
            path: path.to_owned(),
            source,
        }
        .into()),
    }
}

/// The names of the directories in `dir`, sorted; none if `dir` is absent.
fn subdirs(dir: &Path) -> Result<Vec<String>, ResctrlError> {
    let list_err = |source| ResctrlError::List {
        path: dir.to_owned(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(list_err(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(list_err)?;
        if !entry.path().is_dir() {
            continue;
        }
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTED: &str = "sysfs /sys sysfs rw 0 0\n\
                           resctrl /sys/fs/resctrl resctrl rw,relatime 0 0\n";

    struct Tree {
        dir: tempfile::TempDir,
    }

    impl Tree {
        fn new(mounts: Option<&str>) -> Tree {
            let dir = tempfile::tempdir().unwrap();
            fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
            if let Some(m) = mounts {
                fs::create_dir_all(dir.path().join("proc")).unwrap();
                fs::write(dir.path().join(MOUNTS), m).unwrap();
            }
            Tree { dir }
        }
        fn file(&self, rel: &str, text: &str) -> &Self {
            let p = self.dir.path().join(RESCTRL_DIR).join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
            self
        }
        fn mon(&self, group: &str, domain: &str, occ: &str, total: &str, local: &str) -> &Self {
            let d = format!("{group}mon_data/mon_L3_{domain}");
            self.file(&format!("{d}/llc_occupancy"), occ)
                .file(&format!("{d}/mbm_total_bytes"), total)
                .file(&format!("{d}/mbm_local_bytes"), local)
        }
        fn root(&self) -> SysRoot {
            SysRoot::new(self.dir.path()).unwrap()
        }
    }

    fn features(t: &Tree) {
        t.file(
            "info/L3_MON/mon_features",
            "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n",
        );
    }

    #[test]
    fn not_mounted_without_a_resctrl_mount() {
        // The directory exists but proc/mounts has no resctrl: an empty
        // mount point, not a mounted filesystem.
        let t = Tree::new(Some("sysfs /sys sysfs rw 0 0\n"));
        features(&t);
        let s = Resctrl::probe(&t.root());
        assert!(matches!(s, ResctrlStatus::NotMounted { .. }), "{s:?}");
        assert!(s.reason().unwrap().contains("mount -t resctrl"));

        let t = Tree::new(None);
        let s = Resctrl::probe(&t.root());
        assert!(matches!(s, ResctrlStatus::NoMountTable { .. }), "{s:?}");
        let why = s.reason().unwrap();
        assert!(why.contains("proc/mounts does not exist"), "{why}");

        let t = Tree::new(Some("resctrl /mnt/rdt resctrl rw 0 0\n"));
        let s = Resctrl::probe(&t.root());
        assert!(s.reason().unwrap().contains("/mnt/rdt"), "{s:?}");
    }

    #[test]
    fn mounted_without_l3_monitoring() {
        let t = Tree::new(Some(MOUNTED));
        t.file("info/L3/cbm_mask", "7ff\n");
        let s = Resctrl::probe(&t.root());
        assert!(matches!(s, ResctrlStatus::NoL3Monitoring { .. }), "{s:?}");
        assert!(s.reason().unwrap().contains("mon_features"));

        // A directory where mon_features should be: unreadable, not a panic.
        let t = Tree::new(Some(MOUNTED));
        fs::create_dir_all(
            t.dir
                .path()
                .join(RESCTRL_DIR)
                .join("info/L3_MON/mon_features"),
        )
        .unwrap();
        let s = Resctrl::probe(&t.root());
        assert!(matches!(s, ResctrlStatus::Unreadable(_)), "{s:?}");
        assert!(s.reason().unwrap().contains("mon_features"));
    }

    #[test]
    fn reads_root_control_and_monitor_groups() {
        let t = Tree::new(Some(MOUNTED));
        features(&t);
        t.file("tasks", "1\n2\n3\n")
            .mon("", "00", "1048576\n", "5000\n", "4000\n")
            .mon("", "01", "0\n", "Unavailable\n", "Error\n")
            .mon("mon_groups/m1/", "00", "4096\n", "100\n", "90\n")
            .file("mon_groups/m1/tasks", "2\n")
            .file("c1/tasks", "7\n8\n")
            .file("c1/schemata", "L3:0=7ff;1=7ff\n")
            .mon("c1/", "00", "Unavailable\n", "77\n", "Unassigned\n")
            .mon("c1/mon_groups/m2/", "00", "8\n", "9\n", "10\n")
            .file("c1/mon_groups/m2/tasks", "8\n")
            // SNC sub-node directories are not domains of their own.
            .file("mon_data/mon_L3_00/mon_sub_L3_01/llc_occupancy", "1\n");
        let r = Resctrl::probe(&t.root()).into_available().unwrap();
        assert_eq!(r.mon_features().len(), 3);

        let names: Vec<_> = r.groups().unwrap().into_iter().map(|g| g.name).collect();
        assert_eq!(names, ["/", "/mon_groups/m1", "/c1", "/c1/mon_groups/m2"]);
        assert_eq!(
            r.groups().unwrap()[3].kind,
            ResctrlGroupKind::Monitor {
                parent: "/c1".into()
            }
        );

        let all = r.read().unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!(
            all[1],
            ResctrlReading {
                group: "/".into(),
                domain: 1,
                llc_occupancy: Some(0),
                mbm_total_bytes: None,
                mbm_local_bytes: None,
            }
        );
        assert_eq!(all[0].llc_occupancy, Some(1 << 20));
        assert_eq!(all[2].group, "/mon_groups/m1");
        let c1 = &all[3];
        assert_eq!(
            (c1.llc_occupancy, c1.mbm_total_bytes, c1.mbm_local_bytes),
            (None, Some(77), None)
        );
        assert_eq!(all[4].mbm_local_bytes, Some(10));

        assert_eq!(r.tasks("/").unwrap(), Some(vec![1, 2, 3]));
        assert_eq!(r.tasks("/c1").unwrap(), Some(vec![7, 8]));
        assert_eq!(r.tasks("/c1/mon_groups/m2").unwrap(), Some(vec![8]));
        assert_eq!(r.tasks("/gone").unwrap(), None);
        assert_eq!(r.read_group("/gone").unwrap(), vec![]);
    }

    #[test]
    fn bad_files_are_errors_naming_the_path() {
        let t = Tree::new(Some(MOUNTED));
        features(&t);
        t.mon("", "00", "lots\n", "1\n", "1\n")
            .file("tasks", "1\nx\n");
        let r = Resctrl::probe(&t.root()).into_available().unwrap();
        let e = r.read().unwrap_err().to_string();
        assert!(
            e.contains("mon_L3_00/llc_occupancy") && e.contains("lots"),
            "{e}"
        );
        let e = r.tasks("/").unwrap_err().to_string();
        assert!(e.contains("resctrl/tasks") && e.contains("\"x\""), "{e}");

        // An event file that is a directory cannot be read.
        let t = Tree::new(Some(MOUNTED));
        features(&t);
        fs::create_dir_all(
            t.dir
                .path()
                .join(RESCTRL_DIR)
                .join("mon_data/mon_L3_00/llc_occupancy"),
        )
        .unwrap();
        let r = Resctrl::probe(&t.root()).into_available().unwrap();
        let e = r.read().unwrap_err().to_string();
        assert!(e.contains("llc_occupancy"), "{e}");
    }

    #[test]
    fn parsers() {
        assert_eq!(parse_counter("123\n"), Ok(Some(123)));
        for s in ["Unavailable\n", "Error\n", "Unassigned\n"] {
            assert_eq!(parse_counter(s), Ok(None));
        }
        assert_eq!(parse_counter("-1"), Err("-1".into()));
        assert_eq!(parse_l3_domain("mon_L3_07"), Some(7));
        assert_eq!(parse_l3_domain("mon_MB_00"), None);
        assert_eq!(resctrl_mount_points(MOUNTED), ["/sys/fs/resctrl"]);
        assert_eq!(parse_tasks(""), Ok(vec![]));
    }

    #[test]
    fn mbm_delta_is_none_across_a_reset() {
        assert_eq!(mbm_delta(Some(100), Some(250)), Some(150));
        assert_eq!(mbm_delta(Some(100), Some(100)), Some(0));
        assert_eq!(mbm_delta(Some(250), Some(100)), None);
        assert_eq!(mbm_delta(None, Some(100)), None);
        assert_eq!(mbm_delta(Some(100), None), None);
    }

    #[test]
    fn live_host_probe_says_why_not_or_reads() {
        let s = Resctrl::probe(&SysRoot::host());
        match &s {
            ResctrlStatus::Available(r) => {
                r.read().unwrap();
            }
            ResctrlStatus::Unreadable(e) => panic!("probing the host failed: {e}"),
            _ => {
                let why = s.reason().unwrap();
                eprintln!("resctrl on this host: {why}");
                assert!(!why.is_empty());
            }
        }
    }
}
