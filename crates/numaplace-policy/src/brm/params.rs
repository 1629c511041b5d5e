//! BRM's parameters (`[policy]` with `name = "brm"`): the candidates'
//! tags, the seed of the draws, the reset period, and their ranges.

use serde::{Deserialize, Serialize};

use crate::within;

/// BRM's parameters (`[policy]` with `name = "brm"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    default,
    deny_unknown_fields,
    rename_all = "kebab-case",
    remote = "Self"
)]
pub struct BrmParams {
    /// Threads whose name, or whose process's name, matches one of these
    /// patterns (`*`, `?`) are candidates: the configuration's tag, where
    /// the paper's guest kernel tags vCPUs (§4.3).
    pub comms: Vec<String>,
    /// Virtual machines' vCPU threads are candidates.
    pub vcpus: bool,
    /// Threads sending more uncore requests per second than this are
    /// candidates (§8's non-intrusive inference). By default 5 million a
    /// second: a memory-bound thread (30 L2 misses per 1000 instructions
    /// at 0.3 billion instructions a second sends about 9 million), a
    /// compute-bound one about 1 million.
    pub min_uncore_requests_per_s: Option<f64>,
    /// Where a VM's guest sends hints (`numaplace guest`), they decide
    /// which of its vCPUs are candidates: the hinted ones, while hinted
    /// (§4.3's tags).
    pub guest_hints: bool,
    /// Seed of the random draws (the paper's TSC digits, §5).
    pub seed: u64,
    /// A thread forgets its per-node penalties after a number of rounds
    /// drawn from this range, inclusive (§4.2 gives no figure).
    pub reset_min_rounds: u32,
    /// See `reset_min_rounds`.
    pub reset_max_rounds: u32,
}

impl Default for BrmParams {
    fn default() -> Self {
        BrmParams {
            comms: Vec::new(),
            vcpus: true,
            min_uncore_requests_per_s: Some(5e6),
            guest_hints: true,
            seed: 1,
            // 10 to 30 s at the default 100 ms interval. A reset costs a
            // trip: on two nodes the probability climbs by one a round, so
            // a thread leaves after about 14 rounds and takes as long to
            // come back from a worse node; with resets every 100 rounds or
            // more that is under a tenth of its time, and a phase change is
            // still noticed within half a minute. Random, so threads do
            // not all explore in the same round.
            reset_min_rounds: 100,
            reset_max_rounds: 300,
        }
    }
}

/// The most rounds between resets of a thread's penalties.
pub const MAX_RESET_ROUNDS: u32 = 1_000_000;
/// The most name patterns BRM matches every thread against.
pub const MAX_COMMS: usize = 1024;

/// Every parameter's range; the message names the key, the value and the
/// range. The serde conversion calls it, so config, replay and simulator
/// all check them.
impl crate::Params for BrmParams {
    fn validate(&self) -> Result<(), String> {
        let check = || {
            within(
                "reset-max-rounds",
                self.reset_max_rounds,
                1,
                MAX_RESET_ROUNDS,
            )?;
            within(
                "reset-min-rounds",
                self.reset_min_rounds,
                1,
                self.reset_max_rounds,
            )
            .map_err(|e| format!("{e} (at most reset-max-rounds)"))?;
            if let Some(r) = self.min_uncore_requests_per_s {
                if !(r.is_finite() && r >= 0.0) {
                    return Err(format!(
                        "min-uncore-requests-per-s = {r}: must be a finite number, 0 or more"
                    ));
                }
            }
            if self.comms.len() > MAX_COMMS {
                return Err(format!(
                    "comms has {} patterns: must be 0..={MAX_COMMS}",
                    self.comms.len()
                ));
            }
            Ok(())
        };
        check().map_err(|e| format!("brm: {e}"))
    }
}

checked_params!(BrmParams);
