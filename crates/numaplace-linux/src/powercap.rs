//! Package energy from the powercap RAPL zones
//! (`Documentation/power/powercap/powercap.rst`).
//!
//! Zones are read from `/sys/class/powercap/intel-rapl:<N>` (top level:
//! `package-<N>`, `package-<N>-die-<M>` on multi-die parts, `psys` for the
//! platform) and their subzones `intel-rapl:<N>:<M>` (`core`, `uncore`,
//! `dram`). AMD Zen processors appear through the same `intel_rapl_msr`
//! driver as `intel-rapl` zones (since Linux 5.11), as `package-<N>` with a
//! `core` subzone. Other control types (`intel-rapl-mmio`, which repeats
//! the package counter through MMIO, `dtpm`, ...) are not read, so a
//! package is never counted twice.
//!
//! Each zone's `energy_uj` is a cumulative count of microjoules that wraps
//! to zero after `max_energy_range_uj`; [`energy_delta`] turns two readings
//! into the energy between them. Since Linux 5.10 `energy_uj` is readable
//! only by root (the PLATYPUS power side channel, CVE-2020-8694);
//! [`Rapl::probe`] says so when that is why it cannot be read.
//!
//! Read-only: power limits are neither read nor written here.

use std::fs;
use std::io;
use std::path::PathBuf;

use thiserror::Error;

use crate::sysroot::{ReadError, SysRoot};

/// Where the powercap zones are listed, relative to the root.
pub const POWERCAP_DIR: &str = "sys/class/powercap";
/// The control type whose zones are read.
pub const RAPL_CONTROL_TYPE: &str = "intel-rapl";

/// A powercap read failed; every variant names the path.
#[derive(Debug, Error)]
pub enum PowercapError {
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
    #[error("{path}: expected a count of microjoules, found {value:?}")]
    /// A file's value is not a number.
    Parse {
        /// The file or directory.
        path: PathBuf,
        /// What it holds.
        value: String,
    },
}

/// Whether package energy can be read, and why not.
#[derive(Debug)]
pub enum RaplStatus {
    /// RAPL zones to read.
    Available(Rapl),
    /// No `sys/class/powercap` (kernel without CONFIG_POWERCAP, or a
    /// virtual machine).
    NoPowercap {
        /// Where powercap was looked for.
        path: PathBuf,
    },
    /// powercap exists but holds no `intel-rapl:<N>` zone; `others` lists
    /// what it does hold.
    NoRaplZones {
        /// Where powercap was looked for.
        path: PathBuf,
        /// The zones it holds.
        others: Vec<String>,
    },
    /// A zone's `energy_uj` cannot be read (root-only since Linux 5.10).
    EnergyUnreadable {
        /// Where powercap was looked for.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Another file could not be read or made no sense.
    Unreadable(PowercapError),
}

impl RaplStatus {
    /// The zones, if available.
    pub fn available(&self) -> Option<&Rapl> {
        match self {
            RaplStatus::Available(r) => Some(r),
            _ => None,
        }
    }

    /// The same, by value.
    pub fn into_available(self) -> Option<Rapl> {
        match self {
            RaplStatus::Available(r) => Some(r),
            _ => None,
        }
    }

    /// Why energy is not available, in words for a log line and what to
    /// do about it; `None` when it is.
    pub fn reason(&self) -> Option<String> {
        Some(match self {
            RaplStatus::Available(_) => return None,
            RaplStatus::NoPowercap { path } => format!(
                "no RAPL energy counters: {} does not exist (kernel without powercap, \
                 or a virtual machine)",
                path.display()
            ),
            RaplStatus::NoRaplZones { path, others } => format!(
                "no RAPL energy counters: {} has no {RAPL_CONTROL_TYPE}:<N> zone{}; \
                 load the intel_rapl_msr module (Intel, or AMD Zen on Linux 5.11+)",
                path.display(),
                if others.is_empty() {
                    String::new()
                } else {
                    format!(" (only {})", others.join(", "))
                }
            ),
            RaplStatus::EnergyUnreadable { path, source }
                if source.kind() == io::ErrorKind::PermissionDenied =>
            {
                format!(
                    "cannot read RAPL energy: {}: permission denied; since Linux 5.10 \
                     energy_uj is readable only by root (PLATYPUS, CVE-2020-8694): run as \
                     root or grant read access to the energy_uj files",
                    path.display()
                )
            }
            RaplStatus::EnergyUnreadable { path, source } => {
                format!("cannot read RAPL energy: {}: {source}", path.display())
            }
            RaplStatus::Unreadable(e) => format!("cannot read RAPL zones: {e}"),
        })
    }
}

/// One RAPL zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaplZone {
    /// The zone's directory name, e.g. `intel-rapl:0` or `intel-rapl:0:1`.
    pub zone: String,
    /// Its `name`, e.g. `package-0`, `psys`, `core`, `dram`.
    pub name: String,
    /// The enclosing zone of a subzone (`intel-rapl:0` for `intel-rapl:0:1`).
    pub parent: Option<String>,
    /// Where `energy_uj` wraps to zero.
    pub max_energy_range_uj: u64,
    /// The package id of a `package-<N>` or `package-<N>-die-<M>` zone.
    pub package: Option<u32>,
    /// The die id of a `package-<N>-die-<M>` zone.
    pub die: Option<u32>,
}

/// One zone's cumulative energy counter, raw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnergyReading {
    /// The zone's directory name (`intel-rapl:0`).
    pub zone: String,
    /// Its `name` (`package-0`, `dram`).
    pub name: String,
    /// Its counter, microjoules.
    pub energy_uj: u64,
}

/// The readable RAPL zones of a machine.
#[derive(Debug, Clone)]
pub struct Rapl {
    dir: PathBuf,
    zones: Vec<RaplZone>,
}

impl Rapl {
    /// Lists the zones under `root` and checks each one's `energy_uj` can
    /// be read now.
    pub fn probe(root: &SysRoot) -> RaplStatus {
        let dir = root.join(POWERCAP_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return RaplStatus::NoPowercap { path: dir };
            }
            Err(source) => {
                return RaplStatus::Unreadable(PowercapError::List { path: dir, source });
            }
        };
        let mut ids = Vec::new();
        let mut others = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(source) => {
                    return RaplStatus::Unreadable(PowercapError::List { path: dir, source });
                }
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            match parse_zone_id(&name) {
                Some(id) => ids.push((id, name)),
                None => others.push(name),
            }
        }
        if ids.is_empty() {
            others.sort();
            return RaplStatus::NoRaplZones { path: dir, others };
        }
        ids.sort();
        let mut zones = Vec::with_capacity(ids.len());
        for ((pkg, sub), zone) in ids {
            let read = |file: &str| root.read(&format!("{POWERCAP_DIR}/{zone}/{file}"));
            let energy = root.join(&format!("{POWERCAP_DIR}/{zone}/energy_uj"));
            match fs::read_to_string(&energy) {
                Ok(text) => {
                    if let Err(value) = parse_uj(&text) {
                        return RaplStatus::Unreadable(PowercapError::Parse {
                            path: energy,
                            value,
                        });
                    }
                }
                Err(source) => {
                    return RaplStatus::EnergyUnreadable {
                        path: energy,
                        source,
                    };
                }
            }
            let name = match read("name") {
                Ok(n) => n.trim().to_owned(),
                Err(e) => return RaplStatus::Unreadable(e.into()),
            };
            let max_energy_range_uj = match read("max_energy_range_uj") {
                Ok(text) => match parse_uj(&text) {
                    Ok(v) => v,
                    Err(value) => {
                        return RaplStatus::Unreadable(PowercapError::Parse {
                            path: root.join(&format!("{POWERCAP_DIR}/{zone}/max_energy_range_uj")),
                            value,
                        });
                    }
                },
                Err(e) => return RaplStatus::Unreadable(e.into()),
            };
            let (package, die) = match parse_package_name(&name) {
                Some((p, d)) => (Some(p), d),
                None => (None, None),
            };
            zones.push(RaplZone {
                parent: sub.map(|_| format!("{RAPL_CONTROL_TYPE}:{pkg}")),
                zone,
                name,
                max_energy_range_uj,
                package,
                die,
            });
        }
        RaplStatus::Available(Rapl { dir, zones })
    }

    /// The zones, top-level zones and subzones in id order
    /// (`intel-rapl:0`, `intel-rapl:0:0`, `intel-rapl:1`, ...).
    pub fn zones(&self) -> &[RaplZone] {
        &self.zones
    }

    /// The zone named by its directory, e.g. `intel-rapl:0`.
    pub fn zone(&self, zone: &str) -> Option<&RaplZone> {
        self.zones.iter().find(|z| z.zone == zone)
    }

    /// The zones of whole packages (`package-<N>`, `package-<N>-die-<M>`),
    /// not subzones; several per package on multi-die parts.
    pub fn package_zones(&self) -> impl Iterator<Item = &RaplZone> {
        self.zones
            .iter()
            .filter(|z| z.parent.is_none() && z.package.is_some())
    }

    /// Every zone's `energy_uj` now, in [`Rapl::zones`] order.
    pub fn read(&self) -> Result<Vec<EnergyReading>, PowercapError> {
        self.zones
            .iter()
            .map(|z| {
                let path = self.dir.join(&z.zone).join("energy_uj");
                let text = fs::read_to_string(&path).map_err(|source| ReadError {
                    path: path.clone(),
                    source,
                })?;
                let energy_uj =
                    parse_uj(&text).map_err(|value| PowercapError::Parse { path, value })?;
                Ok(EnergyReading {
                    zone: z.zone.clone(),
                    name: z.name.clone(),
                    energy_uj,
                })
            })
            .collect()
    }
}

/// The microjoules used between two readings of a zone's `energy_uj`,
/// taking `cur < prev` as **one** wrap of the counter past `max_range`
/// (the zone's `max_energy_range_uj`): `max_range - prev + cur`.
///
/// Two wraps in one interval cannot be told from one, so sample more often
/// than `max_range` / the zone's highest power: with the common range of
/// about 262 kJ (a 32-bit counter of 61 µJ units) that is every few
/// minutes for a 1 kW package. The result may be up to one energy unit
/// short across a wrap. A `prev` beyond `max_range` (readings from
/// different zones, or a changed range) is taken as a counter restart and
/// gives `cur`. Never panics.
pub fn energy_delta(prev: u64, cur: u64, max_range: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else if prev <= max_range {
        (max_range - prev).saturating_add(cur)
    } else {
        cur
    }
}

/// The `(package, subzone)` numbers of a zone directory named
/// `intel-rapl:<N>` or `intel-rapl:<N>:<M>`.
pub fn parse_zone_id(dir_name: &str) -> Option<(u32, Option<u32>)> {
    let rest = dir_name
        .strip_prefix(RAPL_CONTROL_TYPE)?
        .strip_prefix(':')?;
    let mut parts = rest.split(':');
    let top = parts.next()?.parse().ok()?;
    let sub = parts.next().map(str::parse).transpose().ok()?;
    parts.next().is_none().then_some((top, sub))
}

/// The package (and die) id of a zone named `package-<N>` or
/// `package-<N>-die-<M>`.
pub fn parse_package_name(name: &str) -> Option<(u32, Option<u32>)> {
    let rest = name.trim().strip_prefix("package-")?;
    match rest.split_once("-die-") {
        Some((p, d)) => Some((p.parse().ok()?, Some(d.parse().ok()?))),
        None => Some((rest.parse().ok()?, None)),
    }
}

/// Parses an `energy_uj` or `max_energy_range_uj` file. `Err` holds the
/// text that was not a count.
pub fn parse_uj(text: &str) -> Result<u64, String> {
    let t = text.trim();
    t.parse().map_err(|_| t.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANGE: u64 = 262_143_328_850;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
        dir
    }

    fn zone(dir: &tempfile::TempDir, zone: &str, name: &str, energy: Option<&str>) {
        let z = dir.path().join(POWERCAP_DIR).join(zone);
        fs::create_dir_all(&z).unwrap();
        fs::write(z.join("name"), format!("{name}\n")).unwrap();
        fs::write(z.join("max_energy_range_uj"), format!("{RANGE}\n")).unwrap();
        if let Some(e) = energy {
            fs::write(z.join("energy_uj"), e).unwrap();
        }
    }

    fn two_packages() -> tempfile::TempDir {
        let t = tree();
        // The control type directory is not a zone.
        fs::create_dir_all(t.path().join(POWERCAP_DIR).join("intel-rapl")).unwrap();
        zone(&t, "intel-rapl:0", "package-0", Some("1000\n"));
        zone(&t, "intel-rapl:0:0", "core", Some("400\n"));
        zone(&t, "intel-rapl:0:1", "dram", Some("300\n"));
        zone(&t, "intel-rapl:1", "package-1", Some("2000\n"));
        zone(&t, "intel-rapl:1:0", "dram", Some("500\n"));
        zone(&t, "intel-rapl:10", "psys", Some("9\n"));
        zone(&t, "intel-rapl-mmio:0", "package-0", Some("1000\n"));
        t
    }

    #[test]
    fn lists_zones_and_subzones() {
        let t = two_packages();
        let r = Rapl::probe(&SysRoot::new(t.path()).unwrap())
            .into_available()
            .unwrap();
        let ids: Vec<_> = r.zones().iter().map(|z| z.zone.as_str()).collect();
        assert_eq!(
            ids,
            [
                "intel-rapl:0",
                "intel-rapl:0:0",
                "intel-rapl:0:1",
                "intel-rapl:1",
                "intel-rapl:1:0",
                "intel-rapl:10"
            ]
        );
        let dram = r.zone("intel-rapl:1:0").unwrap();
        assert_eq!(dram.parent.as_deref(), Some("intel-rapl:1"));
        assert_eq!((dram.package, dram.max_energy_range_uj), (None, RANGE));
        let pkgs: Vec<_> = r.package_zones().map(|z| (z.package, z.die)).collect();
        assert_eq!(pkgs, [(Some(0), None), (Some(1), None)]);
        assert_eq!(r.zone("intel-rapl:10").unwrap().package, None);

        let readings = r.read().unwrap();
        assert_eq!(readings.len(), 6);
        assert_eq!(
            readings[0],
            EnergyReading {
                zone: "intel-rapl:0".into(),
                name: "package-0".into(),
                energy_uj: 1000
            }
        );
        assert_eq!(readings[4].name, "dram");

        // A counter that went bad after probing is an error naming its file.
        fs::write(
            t.path().join(POWERCAP_DIR).join("intel-rapl:1/energy_uj"),
            "x\n",
        )
        .unwrap();
        let e = r.read().unwrap_err().to_string();
        assert!(
            e.contains("intel-rapl:1/energy_uj") && e.contains("\"x\""),
            "{e}"
        );
    }

    #[test]
    fn says_why_there_is_no_energy() {
        let t = tree();
        let s = Rapl::probe(&SysRoot::new(t.path()).unwrap());
        assert!(matches!(s, RaplStatus::NoPowercap { .. }), "{s:?}");
        assert!(
            s.reason()
                .unwrap()
                .contains("class/powercap does not exist")
        );

        zone(&t, "intel-rapl-mmio:0", "package-0", Some("1\n"));
        let s = Rapl::probe(&SysRoot::new(t.path()).unwrap());
        let why = s.reason().unwrap();
        assert!(
            why.contains("only intel-rapl-mmio:0") && why.contains("intel_rapl_msr"),
            "{why}"
        );

        // energy_uj missing.
        zone(&t, "intel-rapl:0", "package-0", None);
        let s = Rapl::probe(&SysRoot::new(t.path()).unwrap());
        assert!(matches!(s, RaplStatus::EnergyUnreadable { .. }), "{s:?}");
        assert!(s.reason().unwrap().contains("intel-rapl:0/energy_uj"));

        // A directory in its place.
        fs::create_dir(t.path().join(POWERCAP_DIR).join("intel-rapl:0/energy_uj")).unwrap();
        let s = Rapl::probe(&SysRoot::new(t.path()).unwrap());
        assert!(matches!(s, RaplStatus::EnergyUnreadable { .. }), "{s:?}");

        // Permission denied (cannot be emulated as root): the hint.
        let s = RaplStatus::EnergyUnreadable {
            path: "/sys/class/powercap/intel-rapl:0/energy_uj".into(),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        assert!(s.reason().unwrap().contains("root"));

        // Garbage in max_energy_range_uj.
        let t = tree();
        zone(&t, "intel-rapl:0", "package-0", Some("5\n"));
        fs::write(
            t.path()
                .join(POWERCAP_DIR)
                .join("intel-rapl:0/max_energy_range_uj"),
            "?",
        )
        .unwrap();
        let s = Rapl::probe(&SysRoot::new(t.path()).unwrap());
        assert!(s.reason().unwrap().contains("max_energy_range_uj"), "{s:?}");
    }

    #[test]
    fn energy_delta_handles_one_wrap() {
        assert_eq!(energy_delta(1000, 1500, RANGE), 500);
        assert_eq!(energy_delta(1000, 1000, RANGE), 0);
        assert_eq!(energy_delta(RANGE - 100, 50, RANGE), 150);
        assert_eq!(energy_delta(RANGE, 0, RANGE), 0);
        // Inconsistent input: taken as a restart, no panic.
        assert_eq!(energy_delta(RANGE + 5, 7, RANGE), 7);
        assert_eq!(energy_delta(u64::MAX, 0, u64::MAX), 0);
        assert_eq!(energy_delta(5, 3, 0), 3);
    }

    #[test]
    fn parsers() {
        assert_eq!(parse_zone_id("intel-rapl:0"), Some((0, None)));
        assert_eq!(parse_zone_id("intel-rapl:1:2"), Some((1, Some(2))));
        for bad in [
            "intel-rapl",
            "intel-rapl-mmio:0",
            "intel-rapl:",
            "intel-rapl:0:1:2",
            "intel-rapl:x",
        ] {
            assert_eq!(parse_zone_id(bad), None, "{bad}");
        }
        assert_eq!(parse_package_name("package-3\n"), Some((3, None)));
        assert_eq!(parse_package_name("package-0-die-1"), Some((0, Some(1))));
        assert_eq!(parse_package_name("psys"), None);
        assert_eq!(parse_package_name("package-x"), None);
        assert_eq!(parse_uj(" 42\n"), Ok(42));
        assert_eq!(parse_uj(""), Err(String::new()));
    }

    #[test]
    fn multi_die_packages() {
        let t = tree();
        zone(&t, "intel-rapl:0", "package-0-die-0", Some("1\n"));
        zone(&t, "intel-rapl:1", "package-0-die-1", Some("2\n"));
        let r = Rapl::probe(&SysRoot::new(t.path()).unwrap())
            .into_available()
            .unwrap();
        let pkgs: Vec<_> = r.package_zones().map(|z| (z.package, z.die)).collect();
        assert_eq!(pkgs, [(Some(0), Some(0)), (Some(0), Some(1))]);
    }

    #[test]
    fn live_host_probe_says_why_not_or_reads() {
        let s = Rapl::probe(&SysRoot::host());
        match &s {
            RaplStatus::Available(r) => {
                r.read().unwrap();
            }
            RaplStatus::Unreadable(e) => panic!("probing the host failed: {e}"),
            _ => {
                let why = s.reason().unwrap();
                eprintln!("RAPL on this host: {why}");
                assert!(!why.is_empty());
            }
        }
    }
}
