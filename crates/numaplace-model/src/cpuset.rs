//! `CpuSet`: a set of kernel CPU ids, in the kernel's two text forms.
//!
//! * list syntax, as in `/sys/devices/system/cpu/online` or `Cpus_allowed_list`:
//!   `0-3,8,10-11`; parsing also takes the kernel's strided groups `0-15:2/4`
//!   (`bitmap_parselist`: in each group of 4 starting at 0, the first 2);
//! * mask syntax, as in `/sys/devices/system/node/node0/cpumap` or `Cpus_allowed`:
//!   comma-separated 32-bit hexadecimal words, most significant first,
//!   `00000000,00000f0f`.
//!
//! Ids are the kernel's (`sched_setaffinity` takes them), never dense indexes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Largest CPU id accepted from text: the kernel's `NR_CPUS` tops out at 8192
/// (`CONFIG_NR_CPUS_RANGE_END`), so anything above is a typo, not a machine.
pub const MAX_CPU_ID: u32 = 8191;

/// A set of kernel CPU ids. Equality is set equality.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    /// Bit `i % 64` of word `i / 64` is CPU `i`. No trailing zero words.
    words: Vec<u64>,
}

/// Why a cpuset text was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSetParseError {
    /// The text, cut to a readable length.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for CpuSetParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid cpuset {:?}: {} (expected a CPU list like 0-3,8,10-11)",
            self.input, self.reason
        )
    }
}

impl std::error::Error for CpuSetParseError {}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set of CPUs `0..n`.
    pub fn first_n(n: u32) -> Self {
        (0..n).collect()
    }

    /// Adds `cpu`.
    pub fn insert(&mut self, cpu: u32) {
        let (w, b) = (cpu as usize / 64, cpu % 64);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << b;
    }

    /// Takes `cpu` out, if it is there.
    pub fn remove(&mut self, cpu: u32) {
        let (w, b) = (cpu as usize / 64, cpu % 64);
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1 << b);
        }
        self.trim();
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        let (w, b) = (cpu as usize / 64, cpu % 64);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// How many CPUs the set holds.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Lowest CPU id in the set.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// Highest CPU id in the set.
    pub fn last(&self) -> Option<u32> {
        let top = self.words.last()?;
        Some((self.words.len() as u32 - 1) * 64 + 63 - top.leading_zeros())
    }

    /// CPU ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(i as u32 * 64 + b)
            })
        })
    }

    /// The CPUs in either set.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().max(other.words.len());
        let words = (0..n).map(|i| self.word(i) | other.word(i)).collect();
        CpuSet::from_words(words)
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().min(other.words.len());
        let words = (0..n).map(|i| self.word(i) & other.word(i)).collect();
        CpuSet::from_words(words)
    }

    /// The CPUs in this set and not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let words = (0..self.words.len())
            .map(|i| self.word(i) & !other.word(i))
            .collect();
        CpuSet::from_words(words)
    }

    /// Whether every CPU of this set is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        (0..self.words.len()).all(|i| self.word(i) & !other.word(i) == 0)
    }

    /// Whether the sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        let n = self.words.len().min(other.words.len());
        (0..n).any(|i| self.word(i) & other.word(i) != 0)
    }

    fn word(&self, i: usize) -> u64 {
        self.words.get(i).copied().unwrap_or(0)
    }

    fn from_words(words: Vec<u64>) -> CpuSet {
        let mut s = CpuSet { words };
        s.trim();
        s
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Parses the kernel's list syntax. An empty (or all-blank) text is the
    /// empty set, as the kernel writes it for a CPU-less node's `cpulist`;
    /// user input that must name CPUs goes through [`FromStr`], which refuses it.
    pub fn parse_list(text: &str) -> Result<CpuSet, CpuSetParseError> {
        let err = |reason: String| CpuSetParseError {
            input: text.to_string(),
            reason,
        };
        let mut set = CpuSet::new();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(set);
        }
        for group in trimmed.split(',') {
            let group = group.trim();
            if group.is_empty() {
                return Err(err("empty item between commas".into()));
            }
            let (range, stride) = match group.split_once(':') {
                Some((r, s)) => (r, Some(s)),
                None => (group, None),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (parse_id(a).map_err(&err)?, parse_id(b).map_err(&err)?),
                None => {
                    let id = parse_id(range).map_err(&err)?;
                    (id, id)
                }
            };
            if lo > hi {
                return Err(err(format!("range {lo}-{hi} runs backwards")));
            }
            let (used, size) = match stride {
                None => (1, 1),
                Some(s) => {
                    let (u, g) = s
                        .split_once('/')
                        .ok_or_else(|| err(format!("stride {s:?} is not USED/GROUP")))?;
                    let (u, g) = (parse_id(u).map_err(&err)?, parse_id(g).map_err(&err)?);
                    if u == 0 || g == 0 || u > g {
                        return Err(err(format!("stride {u}/{g} needs 0 < used <= group")));
                    }
                    (u, g)
                }
            };
            let mut cpu = lo;
            while cpu <= hi {
                if (cpu - lo) % size < used {
                    set.insert(cpu);
                }
                cpu += 1;
            }
        }
        Ok(set)
    }

    /// Formats in the kernel's list syntax (`0-3,8,10-11`; empty set: ``).
    pub fn to_list_string(&self) -> String {
        self.to_string()
    }

    /// Parses the kernel's mask syntax: comma-separated hexadecimal words of
    /// 32 bits, most significant first (`ff,00000000` is CPUs 32-39). A `0x`
    /// prefix on a word is accepted, as hwloc writes it.
    pub fn parse_mask(text: &str) -> Result<CpuSet, CpuSetParseError> {
        let err = |reason: String| CpuSetParseError {
            input: text.to_string(),
            reason,
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(err(
                "empty mask (the kernel writes at least one word)".into()
            ));
        }
        let chunks: Vec<&str> = trimmed.split(',').collect();
        let mut set = CpuSet::new();
        for (i, chunk) in chunks.iter().rev().enumerate() {
            let digits = chunk
                .trim()
                .strip_prefix("0x")
                .unwrap_or(chunk.trim())
                .to_string();
            if digits.is_empty() || digits.len() > 8 {
                return Err(err(format!(
                    "mask word {chunk:?} must have 1 to 8 hexadecimal digits"
                )));
            }
            let word = u32::from_str_radix(&digits, 16)
                .map_err(|_| err(format!("mask word {chunk:?} is not hexadecimal")))?;
            for b in 0..32 {
                if word & (1 << b) != 0 {
                    let cpu = i as u64 * 32 + b;
                    if cpu > MAX_CPU_ID as u64 {
                        return Err(err(format!("CPU {cpu} is above {MAX_CPU_ID}")));
                    }
                    set.insert(cpu as u32);
                }
            }
        }
        Ok(set)
    }

    /// Formats in the kernel's mask syntax with as few 32-bit words as hold
    /// the set (at least one): `00000000` for the empty set.
    pub fn to_mask_string(&self) -> String {
        let nwords = self.last().map_or(1, |l| l as usize / 32 + 1);
        self.to_mask_string_words(nwords)
    }

    /// Formats in mask syntax with exactly `nwords` words if the set fits,
    /// as the kernel pads to `nr_cpu_ids`.
    pub fn to_mask_string_words(&self, nwords: usize) -> String {
        let need = self.last().map_or(1, |l| l as usize / 32 + 1);
        let n = nwords.max(need);
        (0..n)
            .rev()
            .map(|i| {
                let w = (self.word(i / 2) >> ((i % 2) * 32)) as u32;
                format!("{w:08x}")
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn parse_id(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let id: u32 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a CPU number"))?;
    if id > MAX_CPU_ID {
        return Err(format!("CPU {id} is above {MAX_CPU_ID}"));
    }
    Ok(id)
}

impl FromStr for CpuSet {
    type Err = CpuSetParseError;

    /// User input: the list syntax, and it must name at least one CPU.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let set = CpuSet::parse_list(s)?;
        if set.is_empty() {
            return Err(CpuSetParseError {
                input: s.to_string(),
                reason: "it names no CPU".into(),
            });
        }
        Ok(set)
    }
}

impl fmt::Display for CpuSet {
    /// The kernel's list syntax.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.iter().peekable();
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&(hi + 1)) {
                hi = it.next().unwrap_or(hi);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut s = CpuSet::new();
        for cpu in iter {
            s.insert(cpu);
        }
        s
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CpuSet::parse_list(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[u32]) -> CpuSet {
        ids.iter().copied().collect()
    }

    #[test]
    fn list_syntax_examples() {
        let s = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(s, set(&[0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(s.to_string(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse_list("\n").unwrap(), CpuSet::new());
        assert_eq!(CpuSet::new().to_string(), "");
        assert_eq!(CpuSet::parse_list("5").unwrap().to_string(), "5");
        assert_eq!(CpuSet::parse_list("64-65,127-128").unwrap().len(), 4);
    }

    #[test]
    fn kernel_strided_groups() {
        // bitmap_parselist: "0-15:2/4" is 0,1,4,5,8,9,12,13.
        let s = CpuSet::parse_list("0-15:2/4").unwrap();
        assert_eq!(s.to_string(), "0-1,4-5,8-9,12-13");
    }

    #[test]
    fn list_syntax_errors_name_the_problem() {
        for (bad, why) in [
            ("3-1", "backwards"),
            ("a", "not a CPU number"),
            ("1,,2", "empty item"),
            ("0-3:5/4", "0 < used"),
            ("9000", "above"),
        ] {
            let e = CpuSet::parse_list(bad).unwrap_err();
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        let e = "".parse::<CpuSet>().unwrap_err();
        assert!(e.to_string().contains("names no CPU"), "{e}");
    }

    #[test]
    fn mask_syntax_examples() {
        let s = CpuSet::parse_mask("00000000,00000f0f").unwrap();
        assert_eq!(s.to_string(), "0-3,8-11");
        assert_eq!(s.to_mask_string(), "00000f0f");
        assert_eq!(s.to_mask_string_words(2), "00000000,00000f0f");
        let hi = CpuSet::parse_mask("ff,00000000").unwrap();
        assert_eq!(hi.to_string(), "32-39");
        assert_eq!(hi.to_mask_string(), "000000ff,00000000");
        assert_eq!(CpuSet::parse_mask("0x00000003").unwrap(), set(&[0, 1]));
        assert_eq!(CpuSet::new().to_mask_string(), "00000000");
        assert!(CpuSet::parse_mask("").is_err());
        assert!(CpuSet::parse_mask("xyz").is_err());
        assert!(CpuSet::parse_mask("123456789").is_err());
    }

    #[test]
    fn set_algebra() {
        let a = set(&[0, 1, 2, 70]);
        let b = set(&[2, 3, 70]);
        assert_eq!(a.union(&b), set(&[0, 1, 2, 3, 70]));
        assert_eq!(a.intersection(&b), set(&[2, 70]));
        assert_eq!(a.difference(&b), set(&[0, 1]));
        assert!(set(&[2, 70]).is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(a.intersects(&b));
        assert_eq!(a.first(), Some(0));
        assert_eq!(a.last(), Some(70));
        let mut c = a.clone();
        c.remove(70);
        assert_eq!(c.last(), Some(2));
        assert_eq!(c, set(&[0, 1, 2]));
    }

    #[test]
    fn serde_uses_list_syntax() {
        let s = set(&[0, 1, 2, 5]);
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, "\"0-2,5\"");
        let back: CpuSet = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
    }
}
