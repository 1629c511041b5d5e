//! `/proc/<pid>/task/<tid>/status`: `Key:\tvalue` lines.
//!
//! The `Name:` line is the comm escaped by the kernel (`\n` as `\\n`), so
//! it is never used for the name here: read `comm` or `stat` for that.

use numaplace_model::CpuSet;

use super::error::ParseError;

const FILE: &str = "status";

/// The fields of a task's `status` that numaplace uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStatus {
    /// The process (thread group) id.
    pub tgid: i32,
    /// The task's own id (the tid for a thread).
    pub pid: i32,
    /// The parent's process id (`PPid`).
    pub ppid: i32,
    /// CPUs the task may run on (`Cpus_allowed_list`).
    pub cpus_allowed: CpuSet,
    /// NUMA nodes the task may allocate from (`Mems_allowed_list`), node ids.
    pub mems_allowed: CpuSet,
    /// Resident set size in KiB; `None` for kernel threads (no `VmRSS`).
    pub vm_rss_kb: Option<u64>,
    /// Times it gave up its CPU to wait; `None` where not written.
    pub voluntary_ctxt_switches: Option<u64>,
    /// Times it was switched out while runnable; `None` where not written.
    pub nonvoluntary_ctxt_switches: Option<u64>,
}

/// Parses the contents of a `status` file. `Tgid`, `Pid`, `PPid`,
/// `Cpus_allowed_list` and `Mems_allowed_list` are required (every kernel
/// since 2.6.26 writes them); the rest is optional. Unknown lines are
/// ignored; the first of a repeated key wins.
pub fn parse_status(text: &str) -> Result<TaskStatus, ParseError> {
    let mut tgid = None;
    let mut pid = None;
    let mut ppid = None;
    let mut cpus = None;
    let mut mems = None;
    let mut rss = None;
    let mut vol = None;
    let mut nonvol = None;

    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "Tgid" => set(&mut tgid, || int(value, "Tgid"))?,
            "Pid" => set(&mut pid, || int(value, "Pid"))?,
            "PPid" => set(&mut ppid, || int(value, "PPid"))?,
            "Cpus_allowed_list" => set(&mut cpus, || list(value, "Cpus_allowed_list"))?,
            "Mems_allowed_list" => set(&mut mems, || list(value, "Mems_allowed_list"))?,
            "VmRSS" => set(&mut rss, || kb(value, "VmRSS"))?,
            "voluntary_ctxt_switches" => set(&mut vol, || int(value, "voluntary_ctxt_switches"))?,
            "nonvoluntary_ctxt_switches" => {
                set(&mut nonvol, || int(value, "nonvoluntary_ctxt_switches"))?
            }
            _ => {}
        }
    }

    let missing = |field| ParseError::MissingField { file: FILE, field };
    Ok(TaskStatus {
        tgid: tgid.ok_or_else(|| missing("Tgid"))?,
        pid: pid.ok_or_else(|| missing("Pid"))?,
        ppid: ppid.ok_or_else(|| missing("PPid"))?,
        cpus_allowed: cpus.ok_or_else(|| missing("Cpus_allowed_list"))?,
        mems_allowed: mems.ok_or_else(|| missing("Mems_allowed_list"))?,
        vm_rss_kb: rss,
        voluntary_ctxt_switches: vol,
        nonvoluntary_ctxt_switches: nonvol,
    })
}

/// Fills `slot` from `parse` unless it already holds a value.
fn set<T>(
    slot: &mut Option<T>,
    parse: impl FnOnce() -> Result<T, ParseError>,
) -> Result<(), ParseError> {
    if slot.is_none() {
        *slot = Some(parse()?);
    }
    Ok(())
}

fn int<T: std::str::FromStr>(value: &str, field: &'static str) -> Result<T, ParseError> {
    value
        .parse()
        .map_err(|_| ParseError::invalid(FILE, field, value, "a decimal integer"))
}

/// `1624 kB` -> 1624.
fn kb(value: &str, field: &'static str) -> Result<u64, ParseError> {
    value
        .strip_suffix("kB")
        .and_then(|n| n.trim_end().parse().ok())
        .ok_or_else(|| ParseError::invalid(FILE, field, value, "a size like `1624 kB`"))
}

fn list(value: &str, field: &'static str) -> Result<CpuSet, ParseError> {
    CpuSet::parse_list(value).map_err(|source| ParseError::List {
        file: FILE,
        field,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cat /proc/self/status` on the development VM (Linux 6.18, x86_64,
    /// 2 CPUs, 1 node).
    const CAT_SELF: &str = "Name:\tcat
Umask:\t0022
State:\tR (running)
Tgid:\t20538
Ngid:\t0
Pid:\t20538
PPid:\t20535
TracerPid:\t0
Uid:\t0\t0\t0\t0
Gid:\t0\t0\t0\t0
FDSize:\t256
Groups:\t 
NStgid:\t20538
NSpid:\t20538
NSpgid:\t20535
NSsid:\t18209
Kthread:\t0
VmPeak:\t    3060 kB
VmSize:\t    3060 kB
VmLck:\t       0 kB
VmPin:\t       0 kB
VmHWM:\t    1624 kB
VmRSS:\t    1624 kB
RssAnon:\t     112 kB
RssFile:\t    1512 kB
RssShmem:\t       0 kB
VmData:\t     360 kB
VmStk:\t     132 kB
VmExe:\t      20 kB
VmLib:\t    1528 kB
VmPTE:\t      40 kB
VmSwap:\t       0 kB
HugetlbPages:\t       0 kB
CoreDumping:\t0
THP_enabled:\t1
untag_mask:\t0xffffffffffffffff
Threads:\t1
SigQ:\t0/96365
SigPnd:\t0000000000000000
ShdPnd:\t0000000000000000
SigBlk:\t0000000000000000
SigIgn:\t0000000000000000
SigCgt:\t0000000000000000
CapInh:\t0000000000000000
CapPrm:\t000001fffeffffff
CapEff:\t000001fffeffffff
CapBnd:\t000001fffeffffff
CapAmb:\t0000000000000000
NoNewPrivs:\t0
Seccomp:\t0
Seccomp_filters:\t0
Speculation_Store_Bypass:\tvulnerable
SpeculationIndirectBranch:\talways enabled
Cpus_allowed:\t3
Cpus_allowed_list:\t0-1
Mems_allowed:\t00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000001
Mems_allowed_list:\t0
voluntary_ctxt_switches:\t0
nonvoluntary_ctxt_switches:\t0
";

    /// The kernel thread `kthreadd` (`/proc/2/status`), same host: no Vm* lines.
    const KTHREADD: &str = "Name:\tkthreadd
Umask:\t0022
State:\tS (sleeping)
Tgid:\t2
Ngid:\t0
Pid:\t2
PPid:\t0
TracerPid:\t0
Uid:\t0\t0\t0\t0
Gid:\t0\t0\t0\t0
FDSize:\t64
Groups:\t 
NStgid:\t2
NSpid:\t2
NSpgid:\t0
NSsid:\t0
Kthread:\t1
Threads:\t1
SigQ:\t0/96365
SigPnd:\t0000000000000000
ShdPnd:\t0000000000000000
SigBlk:\t0000000000000000
SigIgn:\tffffffffffffffff
SigCgt:\t0000000000000000
CapInh:\t0000000000000000
CapPrm:\t000001ffffffffff
CapEff:\t000001ffffffffff
CapBnd:\t000001ffffffffff
CapAmb:\t0000000000000000
NoNewPrivs:\t0
Seccomp:\t0
Seccomp_filters:\t0
Speculation_Store_Bypass:\tvulnerable
SpeculationIndirectBranch:\talways enabled
Cpus_allowed:\t3
Cpus_allowed_list:\t0-1
Mems_allowed:\t00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000001
Mems_allowed_list:\t0
voluntary_ctxt_switches:\t65
nonvoluntary_ctxt_switches:\t0
";

    #[test]
    fn parses_a_real_capture() {
        let s = parse_status(CAT_SELF).unwrap();
        assert_eq!((s.tgid, s.pid, s.ppid), (20538, 20538, 20535));
        assert_eq!(s.cpus_allowed, CpuSet::parse_list("0-1").unwrap());
        assert_eq!(s.mems_allowed, CpuSet::parse_list("0").unwrap());
        assert_eq!(s.vm_rss_kb, Some(1624));
        assert_eq!(s.voluntary_ctxt_switches, Some(0));
        assert_eq!(s.nonvoluntary_ctxt_switches, Some(0));
    }

    #[test]
    fn kernel_threads_have_no_rss() {
        let s = parse_status(KTHREADD).unwrap();
        assert_eq!((s.tgid, s.pid, s.ppid, s.vm_rss_kb), (2, 2, 0, None));
        assert_eq!(s.voluntary_ctxt_switches, Some(65));
    }

    #[test]
    fn a_thread_of_a_big_machine() {
        let text = "Name:\tworker\\nPid:\\t1\nTgid:\t500\nPid:\t512\nPPid:\t1\n\
                    Cpus_allowed_list:\t0-15,32-47\nMems_allowed_list:\t0-1,3\n";
        let s = parse_status(text).unwrap();
        assert_eq!((s.tgid, s.pid), (500, 512));
        assert_eq!(s.cpus_allowed.len(), 32);
        assert_eq!(s.mems_allowed.iter().collect::<Vec<_>>(), [0, 1, 3]);
        assert_eq!(s.voluntary_ctxt_switches, None);
    }

    #[test]
    fn missing_and_bad_fields_are_named() {
        let without = |key: &str| {
            CAT_SELF
                .lines()
                .filter(|l| !l.starts_with(&format!("{key}:")))
                .collect::<Vec<_>>()
                .join("\n")
        };
        for key in [
            "Tgid",
            "Pid",
            "PPid",
            "Cpus_allowed_list",
            "Mems_allowed_list",
        ] {
            let e = parse_status(&without(key)).unwrap_err();
            assert_eq!(e.to_string(), format!("status: no {key} line"));
        }
        let bad = CAT_SELF.replace("Cpus_allowed_list:\t0-1", "Cpus_allowed_list:\t1-0");
        let e = parse_status(&bad).unwrap_err();
        assert!(
            e.to_string().starts_with("status: Cpus_allowed_list: "),
            "{e}"
        );
        let bad = CAT_SELF.replace("VmRSS:\t    1624 kB", "VmRSS:\t    1624 MB");
        let e = parse_status(&bad).unwrap_err();
        assert!(e.to_string().contains("VmRSS"), "{e}");
        let bad = CAT_SELF.replace("PPid:\t20535", "PPid:\tparent");
        assert!(parse_status(&bad).is_err());
        assert!(parse_status("").is_err());
        assert!(parse_status("garbage\n\n:::").is_err());
    }
}
