//! libvirt's status XML of its running QEMU domains: the domain's name,
//! QEMU's pid and the host thread of each vCPU, without talking to QEMU.
//!
//! libvirt holds each domain's QMP monitor itself, and QEMU's monitor
//! serves one client at a time, so numaplace does not connect to it; the
//! same facts are in the status file libvirt keeps for the domain while
//! it runs (read here from libvirt's source):
//!
//! - where: `cfg->stateDir`, `RUNSTATEDIR "/libvirt/qemu"` for the
//!   privileged daemon (`virQEMUDriverConfigNew`, src/qemu/qemu_conf.c),
//!   one `NAME.xml` per running domain, written (mode 0600) on every
//!   change of its state and removed when it stops;
//! - what: the root `<domstatus state=... reason=... pid=QEMU_PID>`
//!   (`virDomainObjFormat`, src/conf/domain_conf.c), holding the private
//!   data of the QEMU driver, whose `<vcpus><vcpu id='N' pid='TID'/>...`
//!   lists every online vCPU with the thread QEMU reported for it
//!   (`qemuDomainObjPrivateXMLFormatVcpus`, src/qemu/qemu_domain.c; older
//!   libvirt wrote `<vcpu pid='TID'/>` without `id`, in index order), then
//!   the live definition `<domain type='kvm|qemu'><name>NAME</name>...`.
//!
//! The file is trusted only as far as its place says: a regular file (no
//! symlink followed) owned by root (or by this process's user) and
//! writable by no one else, in a directory likewise. What it says of a
//! process is checked against the process by `vm::discover`.

use std::collections::BTreeSet;

use numaplace_model::CpuSet;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::sysroot::SysRoot;

/// libvirt's state directory for QEMU, under the root.
pub const STATE_DIR: &str = "run/libvirt/qemu";
/// A status file: a domain with hundreds of vCPUs and devices is tens of KB.
pub const MAX_STATUS_BYTES: u64 = 4 << 20;
/// Status files read in one round.
pub const MAX_DOMAINS: usize = 4096;
/// XML nodes in one status file.
const MAX_NODES: u32 = 1 << 20;
/// vCPUs of one domain (libvirt's own limit is 4096 for x86 q35).
const MAX_VCPUS: usize = 16384;
/// The longest domain name accepted.
const MAX_NAME_BYTES: usize = 1024;

/// What a status file says of a running domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainStatus {
    /// The domain's name (`<domain><name>`).
    pub name: String,
    /// QEMU's pid (`<domstatus pid=...>`).
    pub pid: i32,
    /// `running`, `paused`, ... (`<domstatus state=...>`).
    pub state: String,
    /// The domain type, `kvm` or `qemu` (TCG).
    pub domain_type: Option<String>,
    /// `(vCPU index, host thread)` of each online vCPU, by index.
    pub vcpus: Vec<(u32, i32)>,
    /// The domain's UUID (`<domain><uuid>`), what `virsh` is given.
    pub uuid: Option<String>,
    /// How the live definition places the domain's threads and memory.
    pub placement: Placement,
}

/// What a domain's live definition says of where its threads and memory
/// go: whoever wrote it (its owner, or numaplace's own live pins, which
/// libvirt writes there too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// `<vcpu placement='auto'>`: libvirt asked numad (numaplace's own
    /// `numad -w` answer) where to start it; the advice is a starting
    /// point, the domain numaplace's to re-place.
    pub auto: bool,
    /// `<vcpu cpuset='...'>` with static placement: the CPUs of every
    /// vCPU and emulator thread not pinned otherwise.
    pub cpuset: Option<CpuSet>,
    /// `<cputune><vcpupin vcpu='N' cpuset='...'>`, by vCPU.
    pub vcpupins: Vec<(u32, CpuSet)>,
    /// `<cputune><emulatorpin cpuset='...'>`.
    pub emulatorpin: Option<CpuSet>,
    /// `<numatune><memory mode='...'>`: `strict`, `preferred`,
    /// `interleave`, `restrictive`; `None` without a `<numatune>`.
    pub memory_mode: Option<String>,
    /// `<numatune><memory nodeset='...'>` without `placement='auto'`: nodes
    /// someone chose (its owner, or numaplace's own live change).
    pub memory_nodeset_static: bool,
}

/// Why libvirt's status files could not be used.
#[derive(Debug, Error)]
pub enum LibvirtError {
    #[error("{path}: {source}")]
    /// A status file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    #[error("{path}: not trusted: {why}")]
    /// A status file numaplace does not trust.
    Untrusted {
        /// The file.
        path: PathBuf,
        /// The reason, in words.
        why: String,
    },
    #[error("{path}: not a libvirt status file: {why}")]
    /// A status file that does not parse.
    Malformed {
        /// The file.
        path: PathBuf,
        /// The reason, in words.
        why: String,
    },
}

/// Parses a status file's text.
pub fn parse_status(text: &str) -> Result<DomainStatus, String> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: false,
        nodes_limit: MAX_NODES,
    };
    let doc = roxmltree::Document::parse_with_options(text, opts).map_err(|e| e.to_string())?;
    let root = doc.root_element();
    if root.tag_name().name() != "domstatus" {
        return Err(format!(
            "the root element is <{}>, not <domstatus>",
            root.tag_name().name()
        ));
    }
    let pid: i32 = root
        .attribute("pid")
        .ok_or("<domstatus> has no pid")?
        .parse()
        .ok()
        .filter(|&p| p > 0)
        .ok_or("<domstatus pid> is no process id")?;
    let state = root.attribute("state").unwrap_or("").to_string();
    let domain = root
        .children()
        .find(|n| n.has_tag_name("domain"))
        .ok_or("no <domain> inside <domstatus>")?;
    let name = domain
        .children()
        .find(|n| n.has_tag_name("name"))
        .and_then(|n| n.text())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .ok_or("the <domain> has no <name>")?;
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a domain name of {} bytes, more than {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    let mut vcpus = Vec::new();
    if let Some(list) = root.children().find(|n| n.has_tag_name("vcpus")) {
        for (i, v) in list
            .children()
            .filter(|n| n.has_tag_name("vcpu"))
            .enumerate()
        {
            if vcpus.len() == MAX_VCPUS {
                return Err(format!("more than {MAX_VCPUS} vCPUs"));
            }
            // Without `id` (libvirt before 2.2): the position is the index.
            let index = match v.attribute("id") {
                Some(id) => id.parse().map_err(|_| format!("vcpu id {id:?}"))?,
                None => u32::try_from(i).map_err(|_| "too many vCPUs")?,
            };
            let tid = v
                .attribute("pid")
                .and_then(|p| p.parse::<i32>().ok())
                .filter(|&t| t > 0)
                .ok_or_else(|| format!("vcpu {index} has no thread id"))?;
            vcpus.push((index, tid));
        }
    }
    vcpus.sort_unstable();
    let mut seen = BTreeSet::new();
    if let Some(&(i, _)) = vcpus.iter().find(|(i, _)| !seen.insert(*i)) {
        return Err(format!("vcpu {i} is listed twice"));
    }
    let uuid = domain
        .children()
        .find(|n| n.has_tag_name("uuid"))
        .and_then(|n| n.text())
        .map(str::trim)
        .filter(|u| is_uuid(u))
        .map(str::to_string);
    Ok(DomainStatus {
        name: name.to_string(),
        pid,
        state,
        domain_type: domain.attribute("type").map(str::to_string),
        vcpus,
        uuid,
        placement: placement(domain)?,
    })
}

/// A UUID as libvirt prints it: 32 hex digits, dashes between.
pub(crate) fn is_uuid(u: &str) -> bool {
    u.len() == 36
        && u.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// The live definition's `<vcpu>`, `<cputune>` and `<numatune>`.
fn placement(domain: roxmltree::Node<'_, '_>) -> Result<Placement, String> {
    fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, tag: &str) -> Option<roxmltree::Node<'a, 'i>> {
        n.children().find(|c| c.has_tag_name(tag))
    }
    let cpus = |n: roxmltree::Node<'_, '_>, what: &str| -> Result<Option<CpuSet>, String> {
        n.attribute("cpuset")
            .map(|c| CpuSet::parse_list(c).map_err(|e| format!("{what} cpuset {c:?}: {e}")))
            .transpose()
    };
    let mut p = Placement::default();
    if let Some(v) = child(domain, "vcpu") {
        p.auto = v.attribute("placement") == Some("auto");
        if !p.auto {
            p.cpuset = cpus(v, "<vcpu>")?;
        }
    }
    if let Some(tune) = child(domain, "cputune") {
        for pin in tune.children().filter(|c| c.has_tag_name("vcpupin")) {
            let vcpu = pin
                .attribute("vcpu")
                .and_then(|v| v.parse().ok())
                .ok_or("a <vcpupin> without a vcpu number")?;
            if p.vcpupins.len() == MAX_VCPUS {
                return Err(format!("more than {MAX_VCPUS} <vcpupin>"));
            }
            if let Some(c) = cpus(pin, "<vcpupin>")? {
                p.vcpupins.push((vcpu, c));
            }
        }
        if let Some(e) = child(tune, "emulatorpin") {
            p.emulatorpin = cpus(e, "<emulatorpin>")?;
        }
    }
    let memory = child(domain, "numatune").and_then(|t| child(t, "memory"));
    p.memory_mode = memory.map(|m| m.attribute("mode").unwrap_or("strict").to_string());
    p.memory_nodeset_static = memory.is_some_and(|m| {
        m.attribute("nodeset").is_some() && m.attribute("placement") != Some("auto")
    });
    Ok(p)
}

/// A status file found in the state directory, with what identifies its
/// version (a rewrite is a new inode: libvirt writes a temporary file and
/// renames it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusFile {
    /// Its path.
    pub path: PathBuf,
    /// Its inode.
    pub ino: u64,
    /// Its modification time (seconds, nanoseconds).
    pub mtime: (i64, i64),
    /// Its size, bytes.
    pub size: u64,
}

/// The status files in libvirt's state directory under `root`: empty if
/// there is none (no libvirt); an error if the directory is not trusted
/// or cannot be read.
pub fn status_files(root: &SysRoot) -> Result<Vec<StatusFile>, LibvirtError> {
    let dir = root.join(STATE_DIR);
    let meta = match fs::symlink_metadata(&dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(LibvirtError::Io { path: dir, source }),
    };
    if !meta.is_dir() {
        return Err(LibvirtError::Untrusted {
            path: dir,
            why: "not a directory (a symlink is not followed)".into(),
        });
    }
    trusted_owner(&dir, &meta)?;
    let entries = fs::read_dir(&dir).map_err(|source| LibvirtError::Io {
        path: dir.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.ends_with(".xml") || name.starts_with('.') {
            continue;
        }
        let Ok(m) = entry.metadata() else { continue };
        if !m.is_file() {
            continue;
        }
        if out.len() == MAX_DOMAINS {
            tracing::warn!(
                "{}: more than {MAX_DOMAINS} status files; the others are not read",
                dir.display()
            );
            break;
        }
        out.push(StatusFile {
            path: entry.path(),
            ino: m.ino(),
            mtime: (m.mtime(), m.mtime_nsec()),
            size: m.size(),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Reads and parses one status file: not through a symlink, a regular
/// file with a trusted owner and mode, at most [`MAX_STATUS_BYTES`].
pub fn read_status(path: &Path) -> Result<DomainStatus, LibvirtError> {
    let io_err = |source| LibvirtError::Io {
        path: path.to_path_buf(),
        source,
    };
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err)?;
    let meta = f.metadata().map_err(io_err)?;
    if !meta.is_file() {
        return Err(LibvirtError::Untrusted {
            path: path.to_path_buf(),
            why: "not a regular file".into(),
        });
    }
    trusted_owner(path, &meta)?;
    let mut bytes = Vec::new();
    f.take(MAX_STATUS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    let malformed = |why: String| LibvirtError::Malformed {
        path: path.to_path_buf(),
        why,
    };
    if bytes.len() as u64 > MAX_STATUS_BYTES {
        return Err(malformed(format!("larger than {MAX_STATUS_BYTES} bytes")));
    }
    let text = String::from_utf8(bytes).map_err(|_| malformed("not UTF-8".into()))?;
    parse_status(&text).map_err(malformed)
}

/// Owned by root (or by this process's user, for a test tree) and
/// writable by no one else.
fn trusted_owner(path: &Path, meta: &fs::Metadata) -> Result<(), LibvirtError> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let why = if meta.uid() != 0 && meta.uid() != me {
        format!("owned by uid {}, not root", meta.uid())
    } else if meta.mode() & 0o022 != 0 {
        format!(
            "mode {:o}: writable by others than its owner",
            meta.mode() & 0o7777
        )
    } else {
        return Ok(());
    };
    Err(LibvirtError::Untrusted {
        path: path.to_path_buf(),
        why,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A status file as libvirt writes it (the shape of libvirt's
    /// tests/qemustatusxml2xmldata/*-in.xml, cut to what matters here).
    pub(crate) const STATUS: &str = "<domstatus state='running' reason='booted' pid='4100'>
  <taint flag='high-privileges'/>
  <monitor path='/var/lib/libvirt/qemu/domain-3-web/monitor.sock' type='unix'/>
  <vcpus>
    <vcpu id='0' pid='4105'/>
    <vcpu id='1' pid='4106'/>
    <vcpu id='3' pid='4108'/>
  </vcpus>
  <qemuCaps>
    <flag name='kvm'/>
  </qemuCaps>
  <libDir path='/var/lib/libvirt/qemu/domain-3-web'/>
  <domain type='kvm' id='3'>
    <name>web</name>
    <uuid>c7a5fdbd-edaf-9455-926a-d65c16db1809</uuid>
    <vcpu placement='static' current='3'>4</vcpu>
    <devices>
      <emulator>/usr/bin/qemu-system-x86_64</emulator>
    </devices>
  </domain>
</domstatus>
";

    #[test]
    fn a_status_file_gives_name_pid_and_vcpu_threads() {
        let s = parse_status(STATUS).unwrap();
        assert_eq!(
            s,
            DomainStatus {
                name: "web".into(),
                pid: 4100,
                state: "running".into(),
                domain_type: Some("kvm".into()),
                vcpus: vec![(0, 4105), (1, 4106), (3, 4108)],
                uuid: Some("c7a5fdbd-edaf-9455-926a-d65c16db1809".into()),
                placement: Placement::default(),
            }
        );
        // libvirt before 2.2: no id, the position is the index.
        let old = STATUS
            .replace(" id='0'", "")
            .replace(" id='1'", "")
            .replace(" id='3'", "");
        assert_eq!(
            parse_status(&old).unwrap().vcpus,
            vec![(0, 4105), (1, 4106), (2, 4108)]
        );
        // A domain that has not reported its threads yet: no vCPUs.
        let none = STATUS.replace("<vcpus>", "<x>").replace("</vcpus>", "</x>");
        assert!(parse_status(&none).unwrap().vcpus.is_empty());
    }

    #[test]
    fn a_status_file_says_how_the_domain_is_pinned() {
        let set = |l: &str| CpuSet::parse_list(l).unwrap();
        let pinned = STATUS.replace(
            "<vcpu placement='static' current='3'>4</vcpu>",
            "<vcpu placement='static' cpuset='0-7' current='3'>4</vcpu>
    <cputune>
      <vcpupin vcpu='0' cpuset='2'/>
      <vcpupin vcpu='1' cpuset='3-4'/>
      <emulatorpin cpuset='0-1'/>
    </cputune>
    <numatune><memory mode='interleave' nodeset='0-1'/></numatune>",
        );
        assert_eq!(
            parse_status(&pinned).unwrap().placement,
            Placement {
                auto: false,
                cpuset: Some(set("0-7")),
                vcpupins: vec![(0, set("2")), (1, set("3-4"))],
                emulatorpin: Some(set("0-1")),
                memory_mode: Some("interleave".into()),
                memory_nodeset_static: true,
            }
        );
        // numad's advice: placement='auto', a numatune without a mode is
        // strict.
        let auto = STATUS.replace(
            "<vcpu placement='static' current='3'>4</vcpu>",
            "<vcpu placement='auto' current='3'>4</vcpu>
    <numatune><memory placement='auto'/></numatune>",
        );
        let p = parse_status(&auto).unwrap().placement;
        assert!(
            p.auto && p.cpuset.is_none() && p.vcpupins.is_empty(),
            "{p:?}"
        );
        assert_eq!(p.memory_mode.as_deref(), Some("strict"));
        assert!(!p.memory_nodeset_static);
        // A UUID that is not one is not kept (it would be given to virsh).
        let odd = STATUS.replace("c7a5fdbd-edaf-9455-926a-d65c16db1809", "--help");
        assert_eq!(parse_status(&odd).unwrap().uuid, None);
        let bad = STATUS.replace(
            "<vcpu placement='static' current='3'>4</vcpu>",
            "<vcpu>4</vcpu><cputune><vcpupin cpuset='1'/></cputune>",
        );
        assert!(parse_status(&bad).unwrap_err().contains("vcpupin"));
    }

    #[test]
    fn malformed_status_files_say_what_is_wrong() {
        for (text, want) in [
            ("<domain/>".to_string(), "not <domstatus>"),
            (STATUS.replace(" pid='4100'", ""), "no pid"),
            (STATUS.replace("pid='4100'", "pid='-3'"), "no process id"),
            (STATUS.replace("<name>web</name>", ""), "no <name>"),
            (
                STATUS.replace("pid='4106'", "pid='x'"),
                "vcpu 1 has no thread id",
            ),
            (STATUS.replace("id='3'", "id='1'"), "vcpu 1 is listed twice"),
            (
                STATUS.replace(
                    "<name>web</name>",
                    &format!("<name>{}</name>", "n".repeat(2000)),
                ),
                "2000 bytes",
            ),
            ("not xml".into(), ""),
            (format!("<!DOCTYPE x [<!ENTITY a 'b'>]>{STATUS}"), ""),
        ] {
            let e = parse_status(&text).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    fn tree() -> (tempfile::TempDir, SysRoot, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/devices/system/cpu")).unwrap();
        let dir = d.path().join(STATE_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let root = SysRoot::new(d.path()).unwrap();
        (d, root, dir)
    }

    fn chmod(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn status_files_are_read_only_from_a_trusted_place() {
        let (_d, root, dir) = tree();
        chmod(&dir, 0o700);
        std::fs::write(dir.join("web.xml"), STATUS).unwrap();
        std::fs::write(dir.join("web.pid"), "4100").unwrap();
        std::fs::create_dir(dir.join("channel")).unwrap();
        chmod(&dir.join("web.xml"), 0o600);
        let files = status_files(&root).unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(read_status(&files[0].path).unwrap().name, "web");

        // Writable by others: refused, file or directory.
        chmod(&dir.join("web.xml"), 0o666);
        let e = read_status(&files[0].path).unwrap_err().to_string();
        assert!(e.contains("writable by others"), "{e}");
        chmod(&dir.join("web.xml"), 0o600);
        chmod(&dir, 0o777);
        let e = status_files(&root).unwrap_err().to_string();
        assert!(e.contains("mode 777"), "{e}");
        chmod(&dir, 0o700);

        // A symlink is not followed.
        std::os::unix::fs::symlink(dir.join("web.xml"), dir.join("link.xml")).unwrap();
        assert!(read_status(&dir.join("link.xml")).is_err());
        assert_eq!(status_files(&root).unwrap().len(), 1);

        // Too large.
        let big = format!("{STATUS}<!--{}-->", "x".repeat(MAX_STATUS_BYTES as usize));
        std::fs::write(dir.join("big.xml"), big).unwrap();
        let e = read_status(&dir.join("big.xml")).unwrap_err().to_string();
        assert!(e.contains("larger than"), "{e}");
    }

    proptest::proptest! {
        /// A status file cut and spliced anywhere either parses into a
        /// domain whose facts hold (a pid, vCPUs by index, each once) or
        /// is refused: never a panic.
        #[test]
        fn spliced_status_files_parse_or_are_refused(
            at in 0..STATUS.len(),
            cut in 0usize..40,
            junk in "[<>'=/ a-z0-9\"]{0,12}",
        ) {
            let end = (at + cut).min(STATUS.len());
            let text = format!("{}{junk}{}", &STATUS[..at], &STATUS[end..]);
            if let Ok(s) = parse_status(&text) {
                proptest::prop_assert!(s.pid > 0 && !s.name.is_empty());
                proptest::prop_assert!(s.vcpus.windows(2).all(|w| w[0].0 < w[1].0));
                proptest::prop_assert!(s.vcpus.iter().all(|&(_, t)| t > 0));
            }
        }
    }

    #[test]
    fn no_libvirt_is_no_domain() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/devices/system/cpu")).unwrap();
        let root = SysRoot::new(d.path()).unwrap();
        assert!(status_files(&root).unwrap().is_empty());
    }
}
