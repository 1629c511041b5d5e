//! The policies by name, with their parameters: what `--policy` and the
//! config file's `[policy]` table choose from.

use serde::{Deserialize, Serialize};

use crate::adaptive::{AdaptiveMapping, AdaptiveParams};
use crate::auto::{Auto, AutoParams};
use crate::brm::{Brm, BrmParams};
use crate::dino::{DiParams, Dino, DinoParams, DistributedIntensity};
use crate::numad::{NumadLike, NumadParams};
use crate::static_placement::{StaticParams, StaticPlacement};
use crate::symbiosis::{Symbiosis, SymbiosisParams};
use crate::{DefaultPolicy, Policy};

/// The one table of policies: from it come [`PolicyKind`] (the serde enum
/// a config's `[policy]` table is read into, its variants documented),
/// [`PolicyKind::NAMES`], [`PolicyKind::from_name`], [`PolicyKind::name`]
/// and [`PolicyKind::build`]. Each row: the doc, the variant and its
/// parameters' type (if any), the name, and how to build the policy from
/// the parameters `p`.
macro_rules! policies {
    ($( $(#[doc = $doc:literal])* $variant:ident $(($params:ty))? = $name:literal, |$p:ident| $build:expr; )*) => {
        /// A policy and its parameters. In TOML: `[policy]` with `name = "..."`
        /// and the policy's own keys beside it.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "name", rename_all = "kebab-case")]
        // A config value, made once per run: its size does not matter.
        #[allow(clippy::large_enum_variant)]
        pub enum PolicyKind {
            $( $(#[doc = $doc])* $variant $(($params))?, )*
        }

        impl PolicyKind {
            /// Every policy's name, in the order `--help` lists them.
            pub const NAMES: [&'static str; [$($name),*].len()] = [$($name),*];

            /// The policy of this name with its default parameters.
            pub fn from_name(name: &str) -> Result<PolicyKind, UnknownPolicy> {
                match name {
                    $( $name => Ok(PolicyKind::$variant $((<$params>::default()))?), )*
                    other => Err(UnknownPolicy(other.to_string())),
                }
            }

            /// The policy's name, as `--policy` and `[policy] name` take it.
            pub fn name(&self) -> &'static str {
                match self {
                    $( PolicyKind::$variant { .. } => $name, )*
                }
            }

            /// Checks the parameters' ranges ([`crate::Params`]); the
            /// message names the key and what it may be.
            pub fn validate(&self) -> Result<(), String> {
                match self {
                    $( policies!(@bind $variant p $($params)?) => policies!(@check p $($params)?), )*
                }
            }

            /// A fresh policy of this kind.
            pub fn build(&self) -> Box<dyn Policy> {
                match self {
                    $( policies!(@bind $variant $p $($params)?) => $build, )*
                }
            }
        }
    };
    (@bind $variant:ident $p:ident $params:ty) => { PolicyKind::$variant($p) };
    (@bind $variant:ident $p:ident) => { PolicyKind::$variant };
    (@check $p:ident $params:ty) => { <$params as crate::Params>::validate($p) };
    (@check $p:ident) => { Ok(()) };
}

policies! {
    /// Leave Linux alone: no action ever.
    Default = "default", |p| Box::new(DefaultPolicy::default());
    /// Leave placement to the kernel's automatic NUMA balancing
    /// (`kernel.numa_balancing=1`, on by default in the distributions):
    /// no action ever; the simulator runs its Linux with balancing on, and
    /// the daemon says whether the kernel has it on.
    Autonuma = "autonuma", |p| Box::new(DefaultPolicy { autonuma: true });
    /// numad's documented behaviour: put each big process on the node with
    /// the most free CPU and memory, move its memory there, look again
    /// rarely.
    NumadLike(NumadParams) = "numad-like", |p| Box::new(NumadLike::new(p.clone()));
    /// A fixed placement (by hand, or the simulator's oracle): listed
    /// threads pinned to listed CPUs, listed processes' memory on listed
    /// nodes, held every round.
    Static(StaticParams) = "static", |p| Box::new(StaticPlacement::new(p.clone()));
    /// Distributed Intensity (\[Blagodurov11\] §3.1): threads sorted by LLC miss
    /// rate spread over the memory domains every second; memory stays.
    DiPlain = "di-plain", |p| Box::new(DistributedIntensity::plain());
    /// DI-Plain with memory following the threads (\[Blagodurov11\] §3.2).
    DiMigrate(DiParams) = "di-migrate", |p| Box::new(DistributedIntensity::migrate(p.clone()));
    /// DINO (\[Blagodurov11\] §3.3): classes with hysteresis, a placement layout
    /// that avoids superfluous migrations, an application's threads kept
    /// together, memory following its threads without ping-pong.
    Dino(DinoParams) = "dino", |p| Box::new(Dino::new(p.clone()));
    /// Bias Random vCPU Migration (\[Rao13\] §4): candidate threads (VM
    /// vCPUs, tagged names, or heavy uncore users) moved at random, biased
    /// towards the node where the system-wide uncore penalty was lowest.
    Brm(BrmParams) = "brm", |p| Box::new(Brm::new(p.clone()));
    /// Symbiotic scheduling (\[Symbiosis-Bloom\] §3.3): tasks grouped onto cores and
    /// LLC domains from cache-footprint signatures (occupancy weight,
    /// symbiosis) by weight sorting or a min-cut of the interference graph.
    Symbiosis(SymbiosisParams) = "symbiosis", |p| Box::new(Symbiosis::new(p.clone()));
    /// Adaptive local / interleaved vcore mapping (\[Bae12\] §4-§5): page
    /// metrics, classifier, per-class models, voting with confidence,
    /// probing the other mapping when unsure, overhead ceiling; objective
    /// performance, power or energy.
    AdaptiveMapping(AdaptiveParams) = "adaptive-mapping", |p| Box::new(AdaptiveMapping::new(p.clone()));
    /// What an operator runs: the other policies' algorithms as moves, each
    /// move an experiment kept only if the groups in scope got faster,
    /// rolled back otherwise; counter-free moves only where nothing is
    /// counted (`auto/`).
    Auto(AutoParams) = "auto", |p| Box::new(Auto::new(p.clone()));
}

impl PolicyKind {
    /// Hands over the files the parameters name (`adaptive-mapping`'s
    /// coefficient file), each read by `read`: the caller reads them (the
    /// config's reader, with its size bound), the policy crate does no
    /// I/O. Call it once the config is read, before
    /// [`PolicyKind::validate`], which refuses a file not handed over.
    pub fn read_files(
        &mut self,
        read: impl FnOnce(&std::path::Path) -> std::io::Result<String>,
    ) -> Result<(), String> {
        match self {
            PolicyKind::AdaptiveMapping(p) => match p.unread_coefficients() {
                Some(path) => {
                    let text = read(path);
                    p.read_coefficients(text)
                }
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

/// A `--policy` name numaplace does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl std::fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown policy {:?}: numaplace has {}",
            self.0,
            PolicyKind::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownPolicy {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;

    #[test]
    fn names_round_trip() {
        for n in PolicyKind::NAMES {
            let k = PolicyKind::from_name(n).unwrap();
            assert_eq!(k.name(), n);
            assert_eq!(k.build().name(), n);
        }
        assert_eq!(
            PolicyKind::from_name("static").unwrap(),
            PolicyKind::Static(StaticParams::default())
        );
        let e = PolicyKind::from_name("dino2").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown policy \"dino2\": numaplace has default, autonuma, numad-like, static, di-plain, di-migrate, dino, brm, symbiosis, adaptive-mapping, auto"
        );
    }

    /// A policy that reads a signal says what it does without it, and one
    /// that does not read it says nothing: the daemon's start-up warnings
    /// name exactly the policy's blind spots on this machine.
    #[test]
    fn every_policy_says_what_it_does_without_the_signals_it_reads() {
        use crate::Signal;
        for n in PolicyKind::NAMES {
            let p = PolicyKind::from_name(n).unwrap().build();
            let needs = p.needs();
            let said = |s: Signal| p.without(s).inspect(|w| assert!(w.len() > 40, "{n}: {w}"));
            assert_eq!(said(Signal::Samples).is_some(), needs.samples, "{n}");
            let mut counted = Signal::ALL.into_iter().filter(|s| !s.counters().is_empty());
            assert_eq!(counted.any(|s| said(s).is_some()), needs.counters, "{n}");
        }
        let d = PolicyKind::from_name("adaptive-mapping").unwrap().build();
        assert!(d.without(Signal::Samples).unwrap().contains("never votes"));
        assert!(d.without(Signal::LlcMissRate).is_none());
        let di = PolicyKind::from_name("di-plain").unwrap().build();
        assert!(di.without(Signal::Samples).is_none());
    }

    /// Nonsense parameters are refused where they are read (the serde
    /// conversion every reader uses: config, replay header, simulator),
    /// each with the key, the value and the range.
    #[test]
    fn dino_and_brm_parameters_out_of_range_are_refused_with_the_range() {
        let parse =
            |json: &str| serde_json::from_str::<PolicyKind>(json).map_err(|e| e.to_string());
        for (bad, says) in [
            (
                r#"{"name":"dino","hysteresis-window":100000000000}"#,
                "hysteresis-window = 100000000000: must be 1..=10000",
            ),
            (
                r#"{"name":"dino","hysteresis-window":0}"#,
                "hysteresis-window = 0: must be 1..=10000",
            ),
            (
                r#"{"name":"dino","hysteresis-needed":11}"#,
                "hysteresis-needed = 11: must be 1..=10",
            ),
            (
                r#"{"name":"dino","window-pages":0}"#,
                "window-pages = 0: must be 1..=",
            ),
            (r#"{"name":"dino","devil-mpki":-5}"#, "devil-mpki -5"),
            (
                r#"{"name":"dino","devil-mpki":50,"super-devil-mpki":10}"#,
                "must be above devil-mpki",
            ),
            (
                r#"{"name":"brm","reset-min-rounds":400}"#,
                "reset-min-rounds = 400: must be 1..=300",
            ),
            (
                r#"{"name":"brm","reset-min-rounds":0,"reset-max-rounds":0}"#,
                "reset-max-rounds = 0: must be 1..=",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // NaN cannot be written in JSON; checked on the values themselves.
        let mut d = DinoParams::default();
        d.thresholds.devil_mpki = f64::NAN;
        assert!(d.validate().unwrap_err().contains("devil-mpki NaN"));
        let b = BrmParams {
            min_uncore_requests_per_s: Some(f64::NAN),
            ..BrmParams::default()
        };
        assert!(
            b.validate()
                .unwrap_err()
                .contains("min-uncore-requests-per-s = NaN")
        );
        // The defaults and edge values are fine.
        assert!(parse(r#"{"name":"dino","hysteresis-window":1,"hysteresis-needed":1}"#).is_ok());
        assert!(parse(r#"{"name":"brm","reset-min-rounds":5,"reset-max-rounds":5}"#).is_ok());
        assert!(
            DinoParams::default().validate().is_ok() && BrmParams::default().validate().is_ok()
        );
    }
}
