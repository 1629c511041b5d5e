//! The shared cache the signature hardware watches: set-associative,
//! true LRU, telling which line each access filled and which it
//! replaced (\[Symbiosis-Bloom\] §2.4).

use super::*;

/// Outcome of one access to a [`SharedCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The line was there.
    Hit,
    /// The line was filled; `evicted` is the block address (byte address
    /// divided by the line size) of the line it replaced, if the way held
    /// one.
    Miss {
        /// The block address of the line replaced, if any.
        evicted: Option<u64>,
    },
}

/// A set-associative, true-LRU cache shared by several cores, optionally
/// with the signature hardware attached. Flat vectors, one linear scan of
/// the set's ways per access.
#[derive(Clone, Debug)]
pub struct SharedCache {
    geometry: CacheGeometry,
    cores: usize,
    line_shift: u32,
    set_mask: u64,
    /// Block address held by each (set, way), row-major by set.
    tags: Vec<u64>,
    /// Time of last use of each way; 0 means the way is empty.
    stamps: Vec<u64>,
    /// Core whose miss filled each way.
    owners: Vec<u16>,
    clock: u64,
    hits: u64,
    misses: u64,
    signatures: Option<CacheSignatures>,
}

impl SharedCache {
    /// An empty cache without signatures.
    pub fn new(geometry: CacheGeometry, cores: usize) -> Result<Self, BloomError> {
        geometry.validate()?;
        if cores == 0 || cores > usize::from(u16::MAX) {
            return Err(BloomError::Cores(cores));
        }
        let lines = geometry.lines() as usize;
        Ok(Self {
            geometry,
            cores,
            line_shift: geometry.line.trailing_zeros(),
            set_mask: u64::from(geometry.sets - 1),
            tags: vec![0; lines],
            stamps: vec![0; lines],
            owners: vec![0; lines],
            clock: 0,
            hits: 0,
            misses: 0,
            signatures: None,
        })
    }

    /// An empty cache with signature hardware built from `config`.
    pub fn with_signatures(
        geometry: CacheGeometry,
        cores: usize,
        config: SignatureConfig,
    ) -> Result<Self, BloomError> {
        let mut cache = Self::new(geometry, cores)?;
        cache.signatures = Some(CacheSignatures::new(geometry, cores, config)?);
        Ok(cache)
    }

    /// Its sets and ways.
    pub fn geometry(&self) -> CacheGeometry {
        self.geometry
    }

    /// Cores that share it.
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// The signature hardware attached, if any.
    pub fn signatures(&self) -> Option<&CacheSignatures> {
        self.signatures.as_ref()
    }

    /// For context switches ([`CacheSignatures::context_switch_out`]).
    pub fn signatures_mut(&mut self) -> Option<&mut CacheSignatures> {
        self.signatures.as_mut()
    }

    /// Accesses that hit, so far.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Accesses that missed, so far.
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// Access to byte address `addr` by `core`.
    #[inline]
    pub fn access(&mut self, core: usize, addr: u64) -> Access {
        self.access_block(core, addr >> self.line_shift)
    }

    /// Access to block address `block` (byte address >> log2 line) by
    /// `core`. Hits only refresh LRU order; misses fill the least recently
    /// used way (an empty one first) and drive the signatures.
    #[inline]
    pub fn access_block(&mut self, core: usize, block: u64) -> Access {
        assert!(core < self.cores, "core {core} of {}", self.cores);
        let ways = self.geometry.ways as usize;
        let base = (block & self.set_mask) as usize * ways;
        self.clock += 1;
        let tags = &self.tags[base..base + ways];
        let stamps = &mut self.stamps[base..base + ways];
        let mut victim = 0;
        let mut oldest = u64::MAX;
        for (w, (&tag, stamp)) in tags.iter().zip(stamps.iter_mut()).enumerate() {
            if tag == block && *stamp != 0 {
                *stamp = self.clock;
                self.hits += 1;
                return Access::Hit;
            }
            if *stamp < oldest {
                oldest = *stamp;
                victim = w;
            }
        }
        self.misses += 1;
        let slot = base + victim;
        let evicted = (oldest != 0).then_some(self.tags[slot]);
        if let Some(sig) = &mut self.signatures {
            if let Some(old) = evicted {
                sig.on_evict(old, victim as u32);
            }
            sig.on_insert(core, block, victim as u32);
        }
        self.tags[slot] = block;
        self.stamps[slot] = self.clock;
        self.owners[slot] = core as u16;
        Access::Miss { evicted }
    }

    /// Whether block `block` is resident (no LRU update).
    pub fn contains_block(&self, block: u64) -> bool {
        let ways = self.geometry.ways as usize;
        let base = (block & self.set_mask) as usize * ways;
        (base..base + ways).any(|i| self.stamps[i] != 0 && self.tags[i] == block)
    }

    /// Resident lines filled by `core`'s misses: the exact footprint the
    /// signatures approximate.
    pub fn resident_lines(&self, core: usize) -> usize {
        self.stamps
            .iter()
            .zip(&self.owners)
            .filter(|&(&s, &o)| s != 0 && usize::from(o) == core)
            .count()
    }
}
