//! \[Bae12\] §3 and §5.2: the three workload
//! classes and the machine-specific thresholds that separate them.

use serde::{Deserialize, Serialize};

use super::metrics::PageMetrics;

/// §3's classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Class {
    /// Class 0, HighCacheMissRate: many distinct pages, contention at main
    /// memory; local usually best.
    HighCacheMissRate,
    /// Class 1, LowCacheCoherencyTraffic: few writes to pages other vcores
    /// write; interleaved usually best.
    LowCacheCoherencyTraffic,
    /// Class 2, Other: no clear winner.
    Other,
}

impl Class {
    /// Every class, in the order of the paper's Fig. 4.
    pub const ALL: [Class; 3] = [
        Class::HighCacheMissRate,
        Class::LowCacheCoherencyTraffic,
        Class::Other,
    ];

    /// The paper's number.
    pub fn number(self) -> u8 {
        match self {
            Class::HighCacheMissRate => 0,
            Class::LowCacheCoherencyTraffic => 1,
            Class::Other => 2,
        }
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Class::HighCacheMissRate => "HighCacheMissRate",
            Class::LowCacheCoherencyTraffic => "LowCacheCoherencyTraffic",
            Class::Other => "Other",
        };
        write!(f, "class {} ({name})", self.number())
    }
}

/// The classifier's machine constants (§5.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Classifier {
    /// LastLevelCacheSize, bytes (one socket's LLC).
    pub llc_bytes: u64,
    /// PG, the page size, bytes.
    pub page_size: u64,
    /// PGUtil, the average number of memory operations per page; a
    /// machine constant calibrated with the training runs (the paper's
    /// machine gave threshold_class0 = 8000, §5.2).
    pub pg_util: f64,
    /// threshold_class1 on the mean of s_wm and s_ww: 1 % in §5.2.
    pub threshold_class1: f64,
}

impl Classifier {
    /// §5.2: threshold_class0 = LastLevelCacheSize /
    /// ((PG · PGUtil) · (NTh − SR · (NTh − 1))), NTh the threads, SR the
    /// sharing ratio of accessed pages.
    pub fn threshold_class0(&self, threads: usize, sharing: f64) -> f64 {
        let nth = threads.max(1) as f64;
        let sr = sharing.clamp(0.0, 1.0);
        let pages_per_thread = nth - sr * (nth - 1.0);
        self.llc_bytes as f64 / (self.page_size as f64 * self.pg_util * pages_per_thread)
    }

    /// §5.2: class 0 if the mean of r_am and r_aw is above
    /// threshold_class0 (SR the mean of s_am and s_aw); otherwise class 1
    /// if the mean of s_wm and s_ww is below threshold_class1; otherwise
    /// class 2. (§5.3's pseudocode sums the two instead of averaging;
    /// §5.2's text, followed here, averages.)
    pub fn classify(&self, m: &PageMetrics, threads: usize) -> Class {
        let access = (m.r_am + m.r_aw) / 2.0;
        let sharing = (m.s_am + m.s_aw) / 2.0;
        if access > self.threshold_class0(threads, sharing) {
            Class::HighCacheMissRate
        } else if (m.s_wm + m.s_ww) / 2.0 < self.threshold_class1 {
            Class::LowCacheCoherencyTraffic
        } else {
            Class::Other
        }
    }

    /// Checks the constants, naming what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.llc_bytes == 0 || self.page_size == 0 {
            return Err("classifier: llc_bytes and page_size must be positive".into());
        }
        if !(self.pg_util.is_finite() && self.pg_util > 0.0) {
            return Err(format!(
                "classifier: pg_util {} must be a positive number",
                self.pg_util
            ));
        }
        if !(0.0..=1.0).contains(&self.threshold_class1) {
            return Err(format!(
                "classifier: threshold_class1 {} must be a fraction in [0, 1]",
                self.threshold_class1
            ));
        }
        Ok(())
    }
}
