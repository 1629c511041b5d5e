//! The daemon's configuration file (TOML). Every key has a default; a
//! key numaplace does not know is an error, not a silent no-op. A missing
//! default file means defaults; a missing file named with `--config` is an
//! error.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use numaplace_policy::auto::AutoParams;
use numaplace_policy::engine::EngineConfig;
use numaplace_policy::{PolicyKind, Scope};

use crate::error::InputError;

mod hosts;
pub use hosts::{KubernetesSection, VmsSection};

/// Where `numaplace run` looks when no `--config` is given.
pub(crate) const DEFAULT_PATH: &str = "/etc/numaplace/numaplace.toml";

/// The config file (`/etc/numaplace/numaplace.toml`): its top-level keys
/// and one field per table; every key has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Time between rounds, e.g. "1s"; the policy's own default when unset
    /// (numad-like: 5s, as numad's `-i 5:15`; the others: 1s).
    pub interval: Option<String>,
    /// Decide and journal, apply nothing.
    pub dry_run: bool,
    /// Only these CPUs are numaplace's to place onto (kernel list syntax).
    pub cpus: Option<String>,
    /// The decision journal (JSON lines); none if unset.
    pub journal: Option<PathBuf>,
    /// Where original affinities are kept until they are restored.
    pub state: PathBuf,
    /// The policy; `default_policy()` (`auto`) when the file has no
    /// `[policy]` table.
    pub policy: PolicyKind,
    /// Whether the policy was named (a `[policy]` table, or `--policy` on
    /// top), rather than the default: said at start, so an operator sees
    /// which policy runs and why.
    #[serde(skip)]
    pub policy_named: bool,
    /// `[scope]`: the processes numaplace may touch (none by default).
    pub scope: Scope,
    /// `[engine]`: limits and rules of the loop that applies decisions.
    pub engine: EngineConfig,
    /// `[metrics]`: the Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// `[perf]`: raw event encodings for counters perf has no name for.
    pub perf: PerfSection,
    /// `[vms]`: where libvirt's and QEMU's state is found.
    pub vms: VmsSection,
    /// `[guest_hints]`: the guests' hint channels.
    pub guest_hints: GuestHintsSection,
    /// `[machine]`: a machine file `numaplace calibrate` wrote.
    pub machine: MachineSection,
    /// `[kubernetes]`: the kubelet's checkpoint files.
    pub kubernetes: KubernetesSection,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: None,
            dry_run: false,
            cpus: None,
            journal: None,
            state: PathBuf::from("/var/lib/numaplace/state.json"),
            policy: default_policy(),
            policy_named: false,
            scope: Scope::default(),
            engine: EngineConfig::default(),
            metrics: MetricsConfig::default(),
            perf: PerfSection::default(),
            vms: VmsSection::default(),
            guest_hints: GuestHintsSection::default(),
            kubernetes: KubernetesSection::default(),
            machine: MachineSection::default(),
        }
    }
}

/// The policy of `run`, `advise` and `replay --config` when neither
/// `--policy` nor the config's `[policy]` names one: `auto`, which keeps a
/// move only if the processes in scope got faster (`docs/policies.md`).
/// `default` (Linux's placement left alone) must be named.
pub(crate) fn default_policy() -> PolicyKind {
    PolicyKind::Auto(AutoParams::default())
}

/// How a start-up line names the policy: `auto (the default: ...)` when
/// nothing named it.
pub fn describe_policy(c: &Config) -> String {
    if c.policy_named {
        c.policy.name().to_string()
    } else {
        format!(
            "{} (the default: neither --policy nor the config's [policy] names one; \
             --policy default leaves Linux's placement alone)",
            c.policy.name()
        )
    }
}

/// `[metrics]`: the endpoint serving `/metrics` and `/state`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// `127.0.0.1:9464`, `[::1]:9464` or `unix:/run/numaplace/metrics.sock`;
    /// off when unset. Only loopback addresses are accepted.
    pub listen: Option<String>,
    /// Whether a TCP listener answers `GET /state` (what `top --connect`
    /// reads: the processes in scope with their names and pids) besides
    /// `/metrics`. Off: on loopback every local user can connect, which
    /// would show them processes `/proc`'s hidepid hides. The UNIX socket
    /// (mode 0600) always serves it.
    pub state_over_tcp: bool,
}

/// `[perf]`: the encodings of BRM's uncore pair (\[Rao13\] §3.1) where
/// neither sysfs nor libpfm4 names them on this CPU, as perf writes raw
/// events: `event=0x60,umask=0x01,cmask=1` for the core PMU, or
/// `cpu/event=0x60,umask=0x01,cmask=1/`. Each is checked against the PMU's
/// format files when the counters open; a bad one leaves that counter
/// unavailable, with the reason (`numaplace doctor` shows it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerfSection {
    /// Cycles with at least one outstanding demand data read (t').
    pub uncore_occupancy: Option<String>,
    /// Demand data reads that left the core (lambda).
    pub uncore_requests: Option<String>,
}

/// The longest raw encoding accepted (a perf event string is a few dozen
/// bytes).
const MAX_ENCODING_BYTES: usize = 256;

impl PerfSection {
    fn validate(&self) -> Result<(), String> {
        for (key, v) in [
            ("uncore_occupancy", &self.uncore_occupancy),
            ("uncore_requests", &self.uncore_requests),
        ] {
            if let Some(v) = v {
                if v.trim().is_empty()
                    || v.len() > MAX_ENCODING_BYTES
                    || !v.chars().all(|c| c.is_ascii_graphic())
                {
                    return Err(format!(
                        "[perf] {key} = {v:?}: give a raw event as perf writes it, at most \
                         {MAX_ENCODING_BYTES} printable ASCII characters without spaces, like \
                         \"event=0x60,umask=0x01,cmask=1\""
                    ));
                }
            }
        }
        Ok(())
    }

    /// The encodings, for the collector.
    pub(crate) fn encodings(&self) -> numaplace_linux::perf::UncoreEncodings {
        numaplace_linux::perf::UncoreEncodings {
            occupancy: self.uncore_occupancy.clone(),
            requests: self.uncore_requests.clone(),
        }
    }
}

/// `[guest_hints]`: the host ends of the VMs' virtio-serial ports on which
/// `numaplace guest` tells which vCPUs run threads that pinned themselves
/// (\[Rao13\] §4.3's tags; BRM's candidates).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuestHintsSection {
    /// Paths of the ports' UNIX sockets, `*` and `?` within a component;
    /// none by default. Each socket counts only if the process serving it
    /// is a VM numaplace recognises.
    pub sockets: Vec<String>,
}

impl GuestHintsSection {
    /// A reader of the sockets, or `None` when no pattern is given.
    pub fn reader(&self) -> Option<numaplace_linux::guest_hints::GuestHints> {
        (!self.sockets.is_empty()).then(|| {
            numaplace_linux::guest_hints::GuestHints::new(
                numaplace_linux::SysRoot::host(),
                self.sockets.clone(),
            )
        })
    }
}

/// `[machine]`: the machine file `numaplace calibrate` wrote on this host
/// (its latencies, bandwidths and clock, measured), which `auto`'s
/// predictor fits its model with; unset, the model runs on generic
/// parameters for the topology it reads (docs/policies.md, "auto", "The
/// predictor").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MachineSection {
    /// The machine file, e.g. `/etc/numaplace/machine.json`.
    pub file: Option<PathBuf>,
}

impl Config {
    /// Reads `path`, or the default file if `path` is `None` (absent:
    /// defaults).
    pub fn load(path: Option<&Path>) -> Result<Config> {
        let (path, explicit) = match path {
            Some(p) => (p.to_path_buf(), true),
            None => (PathBuf::from(DEFAULT_PATH), false),
        };
        let text = match numaplace_io::bounded::read_to_string(
            &path,
            numaplace_io::bounded::CONFIG_MAX_BYTES,
        ) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok(Config::default());
            }
            Err(e) => {
                return Err(InputError(format!(
                    "{}: cannot read the config file: {e}",
                    path.display()
                ))
                .into());
            }
        };
        Self::parse(&text).map_err(|e| {
            // `FILE:LINE:COLUMN: what` where the error has a place.
            let sep = if e.starts_with(|c: char| c.is_ascii_digit()) {
                ":"
            } else {
                ": "
            };
            InputError(format!("{}{sep}{e}", path.display())).into()
        })
    }

    /// Parses and checks a config: every policy's parameters
    /// ([`PolicyKind::validate`]; DINO's, BRM's and symbiosis' already in
    /// their serde conversion, which calls the same checks) and the
    /// scope's values and counts.
    pub fn parse(text: &str) -> Result<Config, String> {
        let mut c: Config = toml::from_str(text).map_err(|e| one_line(text, &e))?;
        // Read again as a plain table (the text parsed above, at most
        // CONFIG_MAX_BYTES): whether `[policy]` is there at all.
        c.policy_named = toml::from_str::<toml::Table>(text)
            .map_err(|e| one_line(text, &e))?
            .contains_key("policy");
        // Files the policy's parameters name (a coefficient file) are
        // read here, with the config's size bound.
        c.policy
            .read_files(|path| {
                numaplace_io::bounded::read_to_string(path, numaplace_io::bounded::CONFIG_MAX_BYTES)
            })
            .map_err(|e| format!("[policy] {e}"))?;
        c.policy
            .validate()
            .map_err(|e| format!("[policy] {}: {e}", c.policy.name()))?;
        c.scope.validate()?;
        c.engine.validate()?;
        c.perf.validate()?;
        c.vms.validate()?;
        c.kubernetes.validate()?;
        numaplace_linux::guest_hints::validate_patterns(&c.guest_hints.sockets)?;
        Ok(c)
    }
}

/// A TOML error as one line, `LINE:COLUMN: what`, instead of toml's
/// multi-line snippet (a parameter out of range is reported at its table's
/// header, where its serde conversion runs).
fn one_line(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().trim_end().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let (line, column) = numaplace_sim::scenario::line_col(text, span.start);
            format!("{line}:{column}: {what}")
        }
        None => what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[machine] file` names calibrate's file for auto's predictor;
    /// unset by default; another key in the table is refused.
    #[test]
    fn machine_file_is_read() {
        assert_eq!(Config::default().machine.file, None);
        let c = Config::parse("[machine]\nfile = \"/etc/numaplace/machine.json\"\n").unwrap();
        assert_eq!(
            c.machine.file.as_deref(),
            Some(Path::new("/etc/numaplace/machine.json"))
        );
        let e = Config::parse("[machine]\npreset = \"westmere-2s\"\n").unwrap_err();
        assert!(e.contains("unknown field `preset`"), "{e}");
    }

    /// `[perf]` gives the uncore pair's encodings to the collector; junk,
    /// an empty value or an unknown key is refused with the key.
    #[test]
    fn perf_encodings_are_read_and_checked() {
        let c = Config::parse(
            "[perf]\nuncore_occupancy = \"event=0x60,umask=0x01,cmask=1\"\nuncore_requests = \"cpu/event=0xb0,umask=0x01/\"\n",
        )
        .unwrap();
        let e = c.perf.encodings();
        assert_eq!(
            e.occupancy.as_deref(),
            Some("event=0x60,umask=0x01,cmask=1")
        );
        assert_eq!(e.requests.as_deref(), Some("cpu/event=0xb0,umask=0x01/"));
        assert_eq!(Config::parse("").unwrap().perf.encodings().occupancy, None);
        for (bad, want) in [
            (
                "[perf]\nuncore_occupancy = \"\"\n",
                "[perf] uncore_occupancy",
            ),
            (
                "[perf]\nuncore_requests = \"event=0x60 umask=1\"\n",
                "[perf] uncore_requests",
            ),
            (
                "[perf]\nuncore_cycles = \"event=0x3c\"\n",
                "unknown field `uncore_cycles`",
            ),
        ] {
            let e = Config::parse(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
        let long = format!("[perf]\nuncore_occupancy = \"{}\"\n", "e".repeat(300));
        assert!(Config::parse(&long).unwrap_err().contains("at most 256"));
    }

    /// `[vms]`: QMP socket patterns, checked where the config is read;
    /// libvirt's status files read unless turned off.
    #[test]
    fn vms_sources_are_read_and_checked() {
        let c = Config::parse("").unwrap();
        assert!(c.vms.libvirt && c.vms.qmp.is_empty());
        let c = Config::parse(
            "[vms]\nqmp = [\"/run/qemu/*.qmp\", \"/var/lib/vm/web.sock\"]\nlibvirt = false\n",
        )
        .unwrap();
        let s = c.vms.sources(None);
        assert_eq!(s.qmp, ["/run/qemu/*.qmp", "/var/lib/vm/web.sock"]);
        assert!(!s.libvirt && !s.place_owner_pinned);
        let c = Config::parse("[vms]\nlibvirt_pinned = \"place\"\n").unwrap();
        let s = c.vms.sources(Some("virsh not found".into()));
        assert!(s.place_owner_pinned);
        assert_eq!(s.libvirt_unreachable.as_deref(), Some("virsh not found"));
        assert_eq!(c.vms.virsh().program(), std::path::Path::new("virsh"));
        for (bad, want) in [
            (
                "[vms]\nqmp = [\"qemu.sock\"]\n",
                "[vms] qmp \"qemu.sock\": not an absolute path",
            ),
            (
                "[vms]\nqmp = [\"/run/*/qmp\"]\n",
                "wildcards outside the last component",
            ),
            ("[vms]\nqmp = \"/run/x.qmp\"\n", "invalid type"),
            ("[vms]\nsockets = []\n", "unknown field `sockets`"),
            (
                "[vms]\nlibvirt_pinned = \"yes\"\n",
                "[vms] libvirt_pinned = \"yes\": give \"leave\"",
            ),
            ("[vms]\nvirsh = \"--help\"\n", "[vms] virsh = \"--help\""),
            ("[vms]\nlibvirt_uri = \"\"\n", "[vms] libvirt_uri = \"\""),
        ] {
            let e = Config::parse(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
        let many: Vec<String> = (0..65).map(|i| format!("\"/run/q{i}.qmp\"")).collect();
        let e = Config::parse(&format!("[vms]\nqmp = [{}]\n", many.join(", "))).unwrap_err();
        assert!(e.contains("65 patterns, at most 64"), "{e}");
    }

    /// `[kubernetes]`: the kubelet's checkpoint by default, another path,
    /// or none.
    #[test]
    fn kubernetes_is_read_and_checked() {
        let c = Config::parse("").unwrap();
        assert_eq!(
            c.kubernetes.cpu_manager_state(),
            Some(PathBuf::from("/var/lib/kubelet/cpu_manager_state"))
        );
        assert_eq!(
            c.kubernetes.files().memory_manager_state,
            Some(PathBuf::from("/var/lib/kubelet/memory_manager_state"))
        );
        assert!(!c.kubernetes.place_guaranteed);
        let c = Config::parse(
            "[kubernetes]\ncpu_manager_state = \"\"\nmemory_manager_state = \"\"\n\
             place_guaranteed = true\n",
        )
        .unwrap();
        assert_eq!(c.kubernetes.cpu_manager_state(), None);
        assert_eq!(c.kubernetes.files().memory_manager_state, None);
        assert!(c.kubernetes.files().place_guaranteed);
        let e = Config::parse("[kubernetes]\ncpu_manager_state = \"state\"\n").unwrap_err();
        assert!(e.contains("give an absolute path"), "{e}");
        let e = Config::parse("[kubernetes]\nmemory_manager_state = \"m\"\n").unwrap_err();
        assert!(
            e.contains("memory_manager_state = \"m\": give an absolute path"),
            "{e}"
        );
    }

    /// `[guest_hints] sockets`: patterns of absolute paths, checked where
    /// the config is read.
    #[test]
    fn guest_hint_sockets_are_read_and_checked() {
        let c = Config::parse(
            "[guest_hints]\nsockets = [\"/var/lib/libvirt/qemu/channel/target/domain-*/org.numaplace.hints.0\"]\n",
        )
        .unwrap();
        assert_eq!(c.guest_hints.sockets.len(), 1);
        assert!(c.guest_hints.reader().is_some());
        assert!(Config::parse("").unwrap().guest_hints.reader().is_none());
        for (bad, want) in [
            (
                "[guest_hints]\nsockets = [\"x/*.sock\"]\n",
                "not an absolute path",
            ),
            ("[guest_hints]\nsockets = [\"/a/../b\"]\n", ".. component"),
            ("[guest_hints]\nsocket = []\n", "unknown field `socket`"),
        ] {
            let e = Config::parse(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    /// TOML's errors are one line with the place, not its snippet.
    #[test]
    fn errors_are_one_line_with_line_and_column() {
        let e = Config::parse("interval = \"2s\"\n[scope]\nfoo = 1\n").unwrap_err();
        assert!(e.starts_with("3:1: unknown field `foo`"), "{e}");
        let e = Config::parse("[policy]\nname = \"dino\"\nwindow-pages = 0\n").unwrap_err();
        assert!(e.starts_with("1:1: dino: window-pages = 0"), "{e}");
        assert!(!e.contains('|'), "{e}");
    }

    #[test]
    fn full_config() {
        let c = Config::parse(
            r#"
            interval = "2s"
            cpus = "0-7"
            journal = "/var/log/numaplace/journal.jsonl"
            [policy]
            name = "numad-like"
            min_memory_mib = 512
            [scope]
            cgroups = ["/machine.slice"]
            vms = true
            [engine]
            migrate_mib_per_sec = 128
            [metrics]
            listen = "127.0.0.1:9464"
            "#,
        )
        .unwrap();
        assert_eq!(c.interval.as_deref(), Some("2s"));
        let PolicyKind::NumadLike(p) = &c.policy else {
            panic!("{:?}", c.policy)
        };
        assert_eq!(p.min_memory_mib, 512);
        assert_eq!(p.cooldown_secs, 60);
        assert!(c.scope.vms);
        assert_eq!(c.engine.migrate_mib_per_sec, 128);
    }

    #[test]
    fn unknown_keys_and_policies_are_errors() {
        let e = Config::parse("intervall = \"1s\"").unwrap_err();
        assert!(e.contains("unknown field `intervall`"), "{e}");
        let e = Config::parse("[policy]\nname = \"dino2\"").unwrap_err();
        assert!(e.contains("dino2"), "{e}");
        let e = Config::parse("[policy]\nname = \"numad-like\"\nmin_memory = 3").unwrap_err();
        assert!(e.contains("min_memory"), "{e}");
        let e = Config::parse("[scope]\npid = [1]").unwrap_err();
        assert!(e.contains("unknown field `pid`"), "{e}");
    }

    #[test]
    fn memory_mover_names_and_a_clear_error() {
        use numaplace_policy::engine::MemoryMover;
        assert_eq!(
            Config::parse("").unwrap().engine.memory_mover,
            MemoryMover::WhereKernelCannot
        );
        for (name, want) in [
            ("numaplace", MemoryMover::Numaplace),
            ("kernel", MemoryMover::Kernel),
            ("where-kernel-cannot", MemoryMover::WhereKernelCannot),
        ] {
            let c = Config::parse(&format!("[engine]\nmemory_mover = \"{name}\"")).unwrap();
            assert_eq!(c.engine.memory_mover, want);
            assert_eq!(want.name(), name);
        }
        let e = Config::parse("[engine]\nmemory_mover = \"both\"").unwrap_err();
        assert!(
            e.contains("unknown variant `both`")
                && e.contains("`numaplace`, `kernel`, `where-kernel-cannot`"),
            "{e}"
        );
        // Whether the kernel balances is read at start, never configured.
        let e = Config::parse("[engine]\nkernel_balancing = true").unwrap_err();
        assert!(e.contains("unknown field `kernel_balancing`"), "{e}");
    }

    /// Every shipped example parses; the systemd unit runs `numaplace run`
    /// with a config file that parses.
    #[test]
    fn shipped_examples_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            match path.extension().and_then(|e| e.to_str()) {
                Some("toml") => {
                    let c =
                        Config::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    c.scope.validate().unwrap();
                    if let Some(i) = &c.interval {
                        crate::duration::parse_duration(i, "interval").unwrap();
                    }
                    seen += 1;
                }
                Some("service") => {
                    let exec = text
                        .lines()
                        .find_map(|l| l.strip_prefix("ExecStart="))
                        .unwrap_or_else(|| panic!("{}: no ExecStart", path.display()));
                    assert!(exec.contains("numaplace run --config "), "{exec}");
                    assert!(text.contains("[Service]") && text.contains("[Install]"));
                    seen += 1;
                }
                _ => {}
            }
        }
        assert!(seen >= 2, "examples/ should hold a config and a unit");
    }

    /// The Debian package's /etc/numaplace/numaplace.toml: it parses, and
    /// its scope names nothing, so the service places nothing until the
    /// operator names what it may touch.
    #[test]
    fn packaged_config_parses_and_names_no_scope() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/numaplace.toml");
        let c = Config::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(c.scope.is_empty(), "{:?}", c.scope);
        // Its [policy] is commented out: the default, auto.
        assert_eq!(c.policy, default_policy());
        assert_eq!(c.policy.name(), "auto");
        assert!(!c.policy_named);
        assert!(!c.dry_run);
        assert_eq!(c.state, PathBuf::from("/var/lib/numaplace/state.json"));
    }

    /// Parameters out of range are refused where the config is read,
    /// naming the key and its range (they once reached the policy: an
    /// allocation of 10^11 slots, NaN thresholds, an inverted range).
    #[test]
    fn policy_parameters_out_of_range_are_refused() {
        for (text, want) in [
            (
                "[policy]\nname = \"dino\"\nhysteresis-window = 100000000000\n",
                "hysteresis-window = 100000000000: must be 1..=10000",
            ),
            (
                "[policy]\nname = \"dino\"\nhysteresis-window = 0\n",
                "hysteresis-window = 0: must be 1..=10000",
            ),
            (
                "[policy]\nname = \"dino\"\nhysteresis-needed = 11\n",
                "hysteresis-needed = 11: must be 1..=10",
            ),
            (
                "[policy]\nname = \"dino\"\nwindow-pages = 0\n",
                "window-pages = 0",
            ),
            (
                "[policy]\nname = \"dino\"\ndevil-mpki = nan\n",
                "devil-mpki NaN",
            ),
            (
                "[policy]\nname = \"dino\"\ndevil-mpki = -5\n",
                "devil-mpki -5",
            ),
            (
                "[policy]\nname = \"dino\"\nsuper-devil-mpki = 1\n",
                "super-devil-mpki 1 must be above devil-mpki 2",
            ),
            (
                "[policy]\nname = \"brm\"\nreset-min-rounds = 9\nreset-max-rounds = 3\n",
                "reset-min-rounds = 9: must be 1..=3",
            ),
            (
                "[policy]\nname = \"brm\"\nreset-min-rounds = 0\nreset-max-rounds = 0\n",
                "reset-max-rounds = 0",
            ),
            (
                "[policy]\nname = \"brm\"\nmin-uncore-requests-per-s = nan\n",
                "min-uncore-requests-per-s = NaN",
            ),
            (
                "[policy]\nname = \"numad-like\"\ncooldown_secs = 9223372036854775807\n",
                "cooldown_secs = 9223372036854775807: must be 0..=86400",
            ),
            (
                "[policy]\nname = \"auto\"\nmeasure-rounds = 0\n",
                "measure-rounds = 0: must be 1..=100",
            ),
        ] {
            // DINO's and BRM's are refused in their serde conversion (a
            // TOML error), the others by PolicyKind::validate.
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: wanted {want:?} in {e}");
        }
        for name in PolicyKind::NAMES {
            let c = Config::parse(&format!("[policy]\nname = \"{name}\"\n")).unwrap();
            assert_eq!(c.policy.name(), name, "defaults are valid");
        }
    }

    /// No `[policy]` table: `auto`, said to be the default; `default`
    /// (Linux left alone) only when named.
    #[test]
    fn the_policy_is_auto_unless_one_is_named() {
        for text in ["", "[scope]\nall = true\n", "interval = \"2s\"\n"] {
            let c = Config::parse(text).unwrap();
            assert_eq!(c.policy.name(), "auto", "{text:?}");
            assert!(!c.policy_named, "{text:?}");
            assert!(
                describe_policy(&c).starts_with("auto (the default"),
                "{text:?}"
            );
        }
        assert_eq!(Config::default().policy.name(), "auto");
        let c = Config::parse("[policy]\nname = \"default\"\n").unwrap();
        assert_eq!(c.policy, PolicyKind::Default);
        assert!(c.policy_named);
        assert_eq!(describe_policy(&c), "default");
        let c = Config::parse("[policy]\nname = \"auto\"\n").unwrap();
        assert!(c.policy_named);
        assert_eq!(describe_policy(&c), "auto");
        // A [policy] table without a name is an error, not the default.
        let e = Config::parse("[policy]\n").unwrap_err();
        assert!(e.contains("name"), "{e}");
    }

    #[test]
    fn missing_files() {
        assert!(Config::load(Some(Path::new("/nonexistent/np.toml"))).is_err());
    }

    mod hostile {
        use super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("0".to_string()),
                Just("-5".to_string()),
                Just("1".to_string()),
                Just("100000000000".to_string()),
                Just("9223372036854775807".to_string()),
                Just("nan".to_string()),
                Just("inf".to_string()),
                Just("1e-300".to_string()),
                Just("true".to_string()),
                Just("\"/../../etc\"".to_string()),
                Just("\"1s\"".to_string()),
                Just("\"0-8191\"".to_string()),
                Just("[\"x*\"]".to_string()),
                Just("[-1]".to_string()),
                any::<i64>().prop_map(|i| i.to_string()),
                any::<f64>().prop_map(|f| format!("{f:e}")),
            ]
        }

        const POLICY_KEYS: [&str; 13] = [
            "guest-hints",
            "devil-mpki",
            "super-devil-mpki",
            "hysteresis-window",
            "hysteresis-needed",
            "window-pages",
            "reset-min-rounds",
            "reset-max-rounds",
            "min-uncore-requests-per-s",
            "seed",
            "exact-limit",
            "min_memory_mib",
            "live-filter-bits",
        ];
        const SCOPE_KEYS: [&str; 5] = ["all", "pids", "comms", "cgroups", "vms"];

        fn config_text() -> impl Strategy<Value = String> {
            (
                prop::sample::select(PolicyKind::NAMES.to_vec()),
                proptest::collection::btree_map(0..POLICY_KEYS.len(), value(), 0..4),
                proptest::collection::btree_map(0..SCOPE_KEYS.len(), value(), 0..3),
            )
                .prop_map(|(name, policy, scope)| {
                    let mut t = format!("[policy]\nname = \"{name}\"\n");
                    for (k, v) in policy {
                        t.push_str(&format!("{} = {v}\n", POLICY_KEYS[k]));
                    }
                    t.push_str("[scope]\n");
                    for (k, v) in scope {
                        t.push_str(&format!("{} = {v}\n", SCOPE_KEYS[k]));
                    }
                    t
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            /// Any config either loads with its values in range, or is
            /// refused as an input error (exit 2) in one line: never a
            /// panic.
            #[test]
            fn any_config_loads_or_is_refused_with_exit_2(text in config_text()) {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("c.toml");
                std::fs::write(&path, &text).unwrap();
                match Config::load(Some(&path)) {
                    Ok(c) => {
                        if let Err(e) = c.scope.validate() {
                            prop_assert!(!e.contains('\n'));
                        }
                        let _ = c.policy.build();
                    }
                    Err(e) => {
                        prop_assert_eq!(crate::error::exit_code(&e), 2);
                        prop_assert!(!format!("{e:#}").contains('\n'), "{e:#}");
                    }
                }
            }
        }
    }
}
