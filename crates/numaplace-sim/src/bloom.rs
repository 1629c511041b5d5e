//! The cache-signature hardware of \[Symbiosis-Bloom\], modelled bit for bit so the
//! simulator can drive it with address streams and read what the hardware
//! would report at each context switch.
//!
//! The pieces, in the paper's words:
//!
//! - a shared cache ([`SharedCache`]): set-associative, LRU, that tells the
//!   signature logic which line it filled and which line it replaced;
//! - one counting Bloom filter per shared cache ([`CacheSignatures`],
//!   \[Symbiosis-Bloom\] §2.4, §3.1): a single counter array describing every tracked
//!   line resident in the cache, plus one bit vector per core, the *core
//!   filter* (CF), recording which filter entries that core's misses
//!   filled, and a *last filter* (LF) per core, the CF as it stood when the
//!   current application was switched in;
//! - at a context switch out of a core, the *running bit vector*
//!   (RBV = CF minus LF), whose number of ones is the application's
//!   *occupancy weight*, and whose XOR with each core's CF gives one
//!   *symbiosis* value per core (§3.1, §3.2);
//! - the hash from a line to a filter entry ([`HashKind`], §5.3), and the
//!   tracking of only a sample of the cache sets (§5.5).
//!
//! The signature model keeps no per-line state beyond what the hardware holds:
//! counters and bit vectors only, so aliasing and stale CF bits behave as
//! the paper describes (a CF bit survives its line's eviction until every
//! line hashed to that counter has gone).

use numaplace_model::snapshot::xor_fold;
use std::fmt;

use serde::{Deserialize, Serialize};

mod cache;

pub use cache::{Access, SharedCache};

// ---------------------------------------------------------------------------
// Bit vectors
// ---------------------------------------------------------------------------

/// A fixed-length bit vector stored in `u64` words: the CF, LF and RBV.
///
/// Bits past `len` are kept at zero, so counts and comparisons need no
/// masking. Binary operations require equal lengths and panic otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct BitVec {
    words: Vec<u64>,
    len: usize,
}

impl BitVec {
    /// `len` bits, all zero.
    pub fn zeros(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// `len` bits with the given positions set (test and tooling helper).
    pub fn from_ones(len: usize, ones: impl IntoIterator<Item = usize>) -> Self {
        let mut v = Self::zeros(len);
        for i in ones {
            v.set(i);
        }
        v
    }

    /// Parses a string of `0` and `1` (bit 0 first); other characters
    /// (spaces, `_`) are ignored. Handy for hand-made vectors in tests.
    pub fn from_bit_str(s: &str) -> Self {
        let bits: Vec<bool> = s
            .chars()
            .filter_map(|c| match c {
                '0' => Some(false),
                '1' => Some(true),
                _ => None,
            })
            .collect();
        Self::from_ones(
            bits.len(),
            bits.iter().enumerate().filter(|(_, b)| **b).map(|(i, _)| i),
        )
    }

    /// Bits it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bit `i`.
    pub fn get(&self, i: usize) -> bool {
        assert!(i < self.len, "bit {i} out of range {}", self.len);
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Sets bit `i`.
    pub fn set(&mut self, i: usize) {
        assert!(i < self.len, "bit {i} out of range {}", self.len);
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Clears bit `i`.
    pub fn clear(&mut self, i: usize) {
        assert!(i < self.len, "bit {i} out of range {}", self.len);
        self.words[i / 64] &= !(1 << (i % 64));
    }

    /// Clears every bit.
    pub fn clear_all(&mut self) {
        self.words.fill(0);
    }

    /// Number of ones (a hardware population count).
    pub fn count_ones(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// `self AND NOT other`: the bits of `self` that `other` lacks.
    pub fn and_not(&self, other: &Self) -> Self {
        self.zip(other, |a, b| a & !b)
    }

    /// `self XOR other`.
    pub fn xor(&self, other: &Self) -> Self {
        self.zip(other, |a, b| a ^ b)
    }

    /// Number of ones in `self XOR other`, without building the vector.
    pub fn xor_count_ones(&self, other: &Self) -> u32 {
        self.check_len(other);
        self.words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum()
    }

    /// Makes `self` a copy of `other` (same length), reusing the storage.
    pub fn copy_from(&mut self, other: &Self) {
        self.check_len(other);
        self.words.copy_from_slice(&other.words);
    }

    /// Positions of the ones, ascending.
    pub fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + b)
            })
        })
    }

    fn zip(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        self.check_len(other);
        Self {
            words: self
                .words
                .iter()
                .zip(&other.words)
                .map(|(&a, &b)| f(a, b))
                .collect(),
            len: self.len,
        }
    }

    fn check_len(&self, other: &Self) {
        assert_eq!(self.len, other.len, "bit vectors of different lengths");
    }
}

// ---------------------------------------------------------------------------
// Hash functions (§5.3)
// ---------------------------------------------------------------------------

/// How a cache line picks its filter entry (\[Symbiosis-Bloom\] §5.3). The paper uses
/// one hash function, not several (§3.1): more would fill the small
/// vectors with ones sooner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HashKind {
    /// Cut the block address into pieces as wide as the index and XOR the
    /// pieces together. The paper's recommendation for cost and quality.
    ///
    /// Open detail, our choice: all 64 bits of the block address are
    /// folded, the top piece being narrower when 64 is not a multiple of
    /// the index width.
    #[default]
    Xor,
    /// [`HashKind::Xor`], then the index is complemented and its bits put
    /// in reverse order.
    ///
    /// Both steps are one-to-one on the index, so this hash groups lines
    /// into entries exactly as `Xor` does and yields the same occupancy
    /// weights and symbiosis values; only the entry positions move. That
    /// is consistent with the paper finding the two indistinguishable.
    XorInverseReverse,
    /// The block address modulo the filter size (its low index bits).
    Modulo,
    /// No hashing: one filter entry per tracked cache line (its sampled
    /// set and way), so a CF is the core's exact footprint in the tracked
    /// part of the cache. The filter must have at least as many entries as
    /// tracked lines; [`CacheSignatures::new`] checks this.
    PresenceBits,
}

/// What the hash sees of a cache line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineKey {
    /// The block (line) address, byte address divided by the line size,
    /// with the set-index bits that sampling leaves constant squeezed out
    /// (see [`CacheSignatures`]). With every set tracked it is the block
    /// address itself.
    pub block: u64,
    /// The line's position among the tracked lines: rank of its set among
    /// the sampled sets times the associativity, plus its way. Only
    /// [`HashKind::PresenceBits`] uses it.
    pub slot: u64,
}

impl HashKind {
    /// The filter entry of `line` in a filter of `2^index_bits` entries
    /// (`1 <= index_bits <= 32`).
    pub fn index(self, line: LineKey, index_bits: u32) -> usize {
        debug_assert!((1..=32).contains(&index_bits));
        let mask = (1u64 << index_bits) - 1;
        let i = match self {
            HashKind::Xor => xor_fold(line.block, index_bits),
            HashKind::XorInverseReverse => {
                let inverted = !xor_fold(line.block, index_bits) & mask;
                inverted.reverse_bits() >> (64 - index_bits)
            }
            HashKind::Modulo => line.block & mask,
            HashKind::PresenceBits => line.slot & mask,
        };
        i as usize
    }
}

// ---------------------------------------------------------------------------
// Configuration and errors
// ---------------------------------------------------------------------------

/// Shape of a set-associative cache. Sets and line size are powers of two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheGeometry {
    /// Sets of the cache (a power of two).
    pub sets: u32,
    /// Ways of each set.
    pub ways: u32,
    /// Line size, bytes.
    pub line: u32,
}

impl CacheGeometry {
    /// The shared L2 of the paper's Core 2 Duo (\[Symbiosis-Bloom\] §2.3.2, §4.2):
    /// 4 MiB, 16 ways, 64-byte lines, hence 4096 sets.
    pub const CORE2DUO_L2: Self = Self {
        sets: 4096,
        ways: 16,
        line: 64,
    };

    /// Checked constructor.
    pub fn new(sets: u32, ways: u32, line: u32) -> Result<Self, BloomError> {
        let g = Self { sets, ways, line };
        g.validate()?;
        Ok(g)
    }

    /// The geometry of a cache of `size` bytes.
    pub fn from_size(size: u64, ways: u32, line: u32) -> Result<Self, BloomError> {
        let per_set = u64::from(ways) * u64::from(line);
        if size.checked_rem(per_set) != Some(0) || size / per_set > u64::from(u32::MAX) {
            return Err(BloomError::Geometry(format!(
                "{size} bytes is not a whole number of {ways}-way sets of {line}-byte lines"
            )));
        }
        Self::new((size / per_set) as u32, ways, line)
    }

    /// `Ok` where the geometry is one the signatures can be built for.
    pub fn validate(&self) -> Result<(), BloomError> {
        if !self.sets.is_power_of_two() || !self.line.is_power_of_two() || self.ways == 0 {
            return Err(BloomError::Geometry(format!(
                "{} sets x {} ways x {} B: sets and line size must be powers of two, ways at least 1",
                self.sets, self.ways, self.line
            )));
        }
        Ok(())
    }

    /// Number of lines.
    pub fn lines(&self) -> u64 {
        u64::from(self.sets) * u64::from(self.ways)
    }

    /// Capacity, bytes.
    pub fn size(&self) -> u64 {
        self.lines() * u64::from(self.line)
    }
}

/// How the signature hardware is built.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SignatureConfig {
    /// How a line's address picks its filter entry.
    pub hash: HashKind,
    /// Fraction of the cache sets tracked, in `(0, 1]`: 1 tracks every
    /// set, 0.25 is the paper's option to cut the hardware to a quarter
    /// (§5.5). Tracked sets are spread evenly: with 0.25, sets 0, 4, 8, …
    pub sample_fraction: f64,
    /// The filter has `2^index_bits` entries (CF, LF and counters alike).
    /// `None`: as many as tracked lines, rounded up to a power of two,
    /// which is the paper's sizing (§5.5).
    pub index_bits: Option<u32>,
    /// Width of each counter, 1 to 8 bits; the paper costs its hardware
    /// with 3 (§5.5). A counter that reaches its maximum sticks there,
    /// as in a counting Bloom filter: no longer incremented nor
    /// decremented, so its CF bits are never cleared again.
    pub counter_bits: u8,
    /// Also clear the LF bits when a counter drops to zero. The paper only
    /// says the CFs are cleared (§3.1); `false` follows it. With `false`,
    /// an entry set in the LF, emptied, then refilled by the new
    /// application is missing from that application's RBV.
    pub clear_last_filters: bool,
}

impl Default for SignatureConfig {
    fn default() -> Self {
        Self {
            hash: HashKind::Xor,
            sample_fraction: 1.0,
            index_bits: None,
            counter_bits: 3,
            clear_last_filters: false,
        }
    }
}

/// A cache or signature configuration that cannot be built.
#[derive(Clone, Debug, PartialEq)]
pub enum BloomError {
    /// The cache's geometry, and why.
    Geometry(String),
    /// A number of cores the signatures cannot hold.
    Cores(usize),
    /// A share of sampled sets outside (0, 1].
    SampleFraction(f64),
    /// A filter index width out of range.
    IndexBits(u32),
    /// A counter width out of range.
    CounterBits(u8),
    /// Fewer filter entries than lines tracked.
    PresenceBitsTooFew {
        /// Filter entries.
        entries: u64,
        /// Lines of the sampled sets.
        tracked_lines: u64,
    },
}

impl fmt::Display for BloomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BloomError::Geometry(m) => write!(f, "cache geometry: {m}"),
            BloomError::Cores(n) => write!(f, "{n} cores: give between 1 and 65535"),
            BloomError::SampleFraction(x) => {
                write!(f, "sample_fraction {x}: give a fraction in (0, 1]")
            }
            BloomError::IndexBits(b) => write!(f, "index_bits {b}: give 1 to 32"),
            BloomError::CounterBits(b) => write!(f, "counter_bits {b}: give 1 to 8"),
            BloomError::PresenceBitsTooFew {
                entries,
                tracked_lines,
            } => write!(
                f,
                "presence bits need one entry per tracked line: {entries} entries for \
                 {tracked_lines} lines; raise index_bits or leave it unset"
            ),
        }
    }
}

impl std::error::Error for BloomError {}

// ---------------------------------------------------------------------------
// The signature hardware (§3.1)
// ---------------------------------------------------------------------------

const NOT_SAMPLED: u32 = u32::MAX;

/// What the OS keeps of an application when it leaves a core (§3.2): the
/// core, the occupancy weight and one symbiosis value per core — never
/// the bit vectors themselves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchOutRecord {
    /// The core it left.
    pub core: usize,
    /// Its occupancy weight: the ones in its running bit vector (§3.1).
    pub occupancy_weight: u32,
    /// Indexed by core, the application's own core included (§3.3.2 uses
    /// that one too).
    pub symbiosis: Vec<u32>,
}

/// The counting-Bloom-filter signatures of one shared cache (\[Symbiosis-Bloom\]
/// §3.1): one counter array for the cache, a core filter (CF) and a last
/// filter (LF) per core.
///
/// What the hardware does:
///
/// - a miss from core `c` fills a line: its counter goes up by one and
///   bit `i` of `CF[c]` is set ([`CacheSignatures::on_insert`]);
/// - a line is replaced: its counter goes down by one and, on reaching
///   zero, bit `i` is cleared in every core's CF
///   ([`CacheSignatures::on_evict`]);
/// - an application leaves core `c`: RBV = `CF[c] AND NOT LF[c]`, then
///   `LF[c] := CF[c]` for the one coming in
///   ([`CacheSignatures::context_switch_out`]).
///
/// Only lines in sampled sets reach the filter (§5.5). Sampling leaves
/// some set-index bits constant in every tracked line, which would waste
/// filter entries under the address hashes; so, our choice where the paper
/// is silent, the hash sees the block address with the set index replaced
/// by the set's rank among the sampled sets (`tag × sampled_sets + rank`).
/// With every set sampled that is the block address unchanged.
#[derive(Clone, Debug)]
pub struct CacheSignatures {
    config: SignatureConfig,
    geometry: CacheGeometry,
    index_bits: u32,
    set_shift: u32,
    /// Rank of each set among the sampled ones, or `NOT_SAMPLED`.
    set_rank: Vec<u32>,
    sampled_sets: u32,
    counters: Vec<u8>,
    counter_max: u8,
    core_filters: Vec<BitVec>,
    last_filters: Vec<BitVec>,
    saturations: u64,
}

impl CacheSignatures {
    /// Signature hardware for a cache of `geometry` shared by `cores`
    /// cores.
    pub fn new(
        geometry: CacheGeometry,
        cores: usize,
        config: SignatureConfig,
    ) -> Result<Self, BloomError> {
        geometry.validate()?;
        if cores == 0 || cores > usize::from(u16::MAX) {
            return Err(BloomError::Cores(cores));
        }
        let f = config.sample_fraction;
        if !(f > 0.0 && f <= 1.0) {
            return Err(BloomError::SampleFraction(f));
        }
        if !(1..=8).contains(&config.counter_bits) {
            return Err(BloomError::CounterBits(config.counter_bits));
        }
        // Set s is sampled when ceil((s+1)·f) > ceil(s·f): evenly spread,
        // set 0 always included, exactly every set when f = 1.
        let mut set_rank = vec![NOT_SAMPLED; geometry.sets as usize];
        let mut sampled_sets = 0u32;
        for (s, rank) in set_rank.iter_mut().enumerate() {
            if ((s + 1) as f64 * f).ceil() > (s as f64 * f).ceil() {
                *rank = sampled_sets;
                sampled_sets += 1;
            }
        }
        let tracked_lines = u64::from(sampled_sets) * u64::from(geometry.ways);
        let index_bits = match config.index_bits {
            Some(b) if (1..=32).contains(&b) => b,
            Some(b) => return Err(BloomError::IndexBits(b)),
            None => tracked_lines
                .next_power_of_two()
                .trailing_zeros()
                .clamp(1, 32),
        };
        let entries = 1u64 << index_bits;
        if config.hash == HashKind::PresenceBits && entries < tracked_lines {
            return Err(BloomError::PresenceBitsTooFew {
                entries,
                tracked_lines,
            });
        }
        let n = entries as usize;
        Ok(Self {
            counter_max: ((1u16 << config.counter_bits) - 1) as u8,
            config,
            geometry,
            index_bits,
            set_shift: geometry.sets.trailing_zeros(),
            set_rank,
            sampled_sets,
            counters: vec![0; n],
            core_filters: vec![BitVec::zeros(n); cores],
            last_filters: vec![BitVec::zeros(n); cores],
            saturations: 0,
        })
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &SignatureConfig {
        &self.config
    }

    /// The cache it watches.
    pub fn geometry(&self) -> CacheGeometry {
        self.geometry
    }

    /// Cores sharing the cache, one core filter each.
    pub fn cores(&self) -> usize {
        self.core_filters.len()
    }

    /// Filter entries (bits per CF, LF, RBV; counters).
    pub fn entries(&self) -> usize {
        self.counters.len()
    }

    /// Bits of a filter index.
    pub fn index_bits(&self) -> u32 {
        self.index_bits
    }

    /// Sets whose lines the filters track.
    pub fn sampled_sets(&self) -> u32 {
        self.sampled_sets
    }

    /// Whether set `set` is one of them.
    pub fn is_sampled(&self, set: u32) -> bool {
        self.set_rank[set as usize] != NOT_SAMPLED
    }

    /// The filter entry of the line holding block `block` in way `way`, or
    /// `None` when its set is not sampled.
    #[inline]
    pub fn filter_index(&self, block: u64, way: u32) -> Option<usize> {
        let set = (block & u64::from(self.geometry.sets - 1)) as usize;
        let rank = self.set_rank[set];
        if rank == NOT_SAMPLED {
            return None;
        }
        let key = match self.config.hash {
            HashKind::PresenceBits => LineKey {
                block: 0,
                slot: u64::from(rank) * u64::from(self.geometry.ways) + u64::from(way),
            },
            _ => LineKey {
                block: (block >> self.set_shift)
                    .wrapping_mul(u64::from(self.sampled_sets))
                    .wrapping_add(u64::from(rank)),
                slot: 0,
            },
        };
        Some(self.config.hash.index(key, self.index_bits))
    }

    /// A miss from `core` filled block `block` into way `way` (§3.1).
    #[inline]
    pub fn on_insert(&mut self, core: usize, block: u64, way: u32) {
        let Some(i) = self.filter_index(block, way) else {
            return;
        };
        let c = &mut self.counters[i];
        if *c == self.counter_max {
            self.saturations += 1;
        } else {
            *c += 1;
        }
        self.core_filters[core].set(i);
    }

    /// The line holding block `block` in way `way` was replaced (§3.1).
    #[inline]
    pub fn on_evict(&mut self, block: u64, way: u32) {
        let Some(i) = self.filter_index(block, way) else {
            return;
        };
        let c = &mut self.counters[i];
        if *c == self.counter_max {
            return; // stuck
        }
        debug_assert!(*c > 0, "eviction of a line never inserted");
        *c = c.saturating_sub(1);
        if *c == 0 {
            for cf in &mut self.core_filters {
                cf.clear(i);
            }
            if self.config.clear_last_filters {
                for lf in &mut self.last_filters {
                    lf.clear(i);
                }
            }
        }
    }

    /// The RBV `core` would report now (CF AND NOT LF), without a switch.
    pub fn running_bit_vector(&self, core: usize) -> BitVec {
        self.core_filters[core].and_not(&self.last_filters[core])
    }

    /// The application on `core` is switched out (§3.1, Fig. 7(b)):
    /// returns its RBV and snapshots the CF into the LF for the next one.
    pub fn context_switch_out(&mut self, core: usize) -> BitVec {
        let rbv = self.running_bit_vector(core);
        self.last_filters[core].copy_from(&self.core_filters[core]);
        rbv
    }

    /// Occupancy weight: the ones in an RBV (§3.1, §3.3.1).
    pub fn occupancy_weight(rbv: &BitVec) -> u32 {
        rbv.count_ones()
    }

    /// Symbiosis of an RBV with `core`: the ones in RBV XOR CF[core]
    /// (§3.1). High means the two footprints use different entries.
    pub fn symbiosis(&self, rbv: &BitVec, core: usize) -> u32 {
        rbv.xor_count_ones(&self.core_filters[core])
    }

    /// [`Self::context_switch_out`] reduced to what the OS keeps (§3.2).
    pub fn switch_out_record(&mut self, core: usize) -> SwitchOutRecord {
        let rbv = self.context_switch_out(core);
        SwitchOutRecord {
            core,
            occupancy_weight: Self::occupancy_weight(&rbv),
            symbiosis: (0..self.cores()).map(|c| self.symbiosis(&rbv, c)).collect(),
        }
    }

    /// Core `core`'s filter (CF).
    pub fn core_filter(&self, core: usize) -> &BitVec {
        &self.core_filters[core]
    }

    /// Core `core`'s last filter (LF).
    pub fn last_filter(&self, core: usize) -> &BitVec {
        &self.last_filters[core]
    }

    /// The counter of filter entry `index`.
    pub fn counter(&self, index: usize) -> u8 {
        self.counters[index]
    }

    /// Sum of all counters: the tracked resident lines while no counter
    /// has saturated.
    pub fn counter_total(&self) -> u64 {
        self.counters.iter().map(|&c| u64::from(c)).sum()
    }

    /// Insertions that found their counter at its maximum.
    pub fn saturation_events(&self) -> u64 {
        self.saturations
    }

    /// Counters stuck at their maximum.
    pub fn saturated_counters(&self) -> usize {
        self.counters
            .iter()
            .filter(|&&c| c == self.counter_max)
            .count()
    }
}

#[cfg(test)]
mod tests;
