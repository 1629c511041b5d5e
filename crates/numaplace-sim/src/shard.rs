//! A sweep split over machines: `compare --random N --shard K/M` runs the
//! cases whose index (mixes first, then the shipped scenarios) is K - 1
//! modulo M and writes their outcomes as a [`Shard`]; `numaplace merge`
//! joins the M shards into the report `compare` prints unsharded, the same
//! to the byte. Every run of a sweep depends only on its case, policy and
//! seed, so a case's outcome is the same whichever shard ran it; dealing
//! the cases round-robin spreads the heavy ones (large machines come
//! anywhere in a seed range) over the shards.

use serde::{Deserialize, Serialize};

use crate::sweep::{CaseOutcome, Sweep};

/// The format of a shard file; a merge refuses another.
pub const FORMAT: u32 = 1;

/// One shard of a sweep: what `compare --random N --shard K/M --json`
/// writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shard {
    /// [`FORMAT`].
    pub numaplace_shard: u32,
    /// Which shard, 1 to `count`.
    pub index: usize,
    /// Shards the sweep was split into.
    pub count: usize,
    /// The sweep, as the command line and version that ran it say: shards
    /// of one sweep carry the same text, and only they are merged.
    pub sweep: String,
    /// Cases in the whole sweep.
    pub cases_total: usize,
    /// The policies, in the order of each outcome's columns.
    pub policies: Vec<String>,
    /// The seeds each case ran on.
    pub seeds: Vec<u64>,
    /// The worlds' mismatch, percent, where there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch_percent: Option<f64>,
    /// Worst cases named per policy.
    pub worst: usize,
    /// Its cases' outcomes, each with its index in the whole sweep.
    pub cases: Vec<(usize, CaseOutcome)>,
}

/// `K/M` as a shard: K from 1 to M; an error saying what is wrong.
pub fn parse_spec(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard {text:?}: give K/M, shard K of M, 1 <= K <= M (e.g. 2/4)");
    let (k, m) = text.split_once('/').ok_or_else(bad)?;
    let k: usize = k.trim().parse().map_err(|_| bad())?;
    let m: usize = m.trim().parse().map_err(|_| bad())?;
    if k == 0 || m == 0 || k > m {
        return Err(bad());
    }
    Ok((k, m))
}

/// Whether case `index` of a sweep is shard `k`'s of `m`.
pub fn holds(index: usize, k: usize, m: usize) -> bool {
    m > 0 && index % m == k.wrapping_sub(1)
}

/// The report of the whole sweep from its shards (any order): refused
/// unless they are shards of one sweep, each once, together every case.
pub fn merge(mut shards: Vec<Shard>) -> Result<Sweep, String> {
    // The first shard's header (its cases left out), that every other
    // must match.
    let Some(first) = shards.first().map(|s| Shard {
        cases: Vec::new(),
        ..s.clone()
    }) else {
        return Err("no shard to merge: name every shard file of the sweep".into());
    };
    if let Some(s) = shards.iter().find(|s| s.numaplace_shard != FORMAT) {
        return Err(format!(
            "shard {}/{} is of format {}, this numaplace reads {FORMAT}: merge with the version \
             that wrote it",
            s.index, s.count, s.numaplace_shard
        ));
    }
    let (count, total) = (first.count, first.cases_total);
    let first = &first;
    let same = |s: &Shard| {
        s.sweep == first.sweep
            && s.count == count
            && s.cases_total == total
            && s.policies == first.policies
            && s.seeds == first.seeds
            && s.mismatch_percent == first.mismatch_percent
            && s.worst == first.worst
    };
    if let Some(s) = shards.iter().find(|s| !same(s)) {
        return Err(format!(
            "shard {}/{} is of another sweep ({:?}) than shard {}/{} ({:?}): merge the shards of \
             one sweep only",
            s.index, s.count, s.sweep, first.index, first.count, first.sweep
        ));
    }
    shards.sort_by_key(|s| s.index);
    let have: Vec<usize> = shards.iter().map(|s| s.index).collect();
    let want: Vec<usize> = (1..=count).collect();
    if have != want {
        let missing: Vec<String> = (want.iter())
            .filter(|k| !have.contains(k))
            .map(|k| format!("{k}/{count}"))
            .collect();
        let twice: Vec<String> = (have.windows(2))
            .filter(|w| w[0] == w[1])
            .map(|w| format!("{}/{count}", w[0]))
            .collect();
        return Err(format!(
            "the shards do not make the sweep once: missing {}, given twice {}",
            list(&missing),
            list(&twice)
        ));
    }
    let (policies, seeds, mismatch, worst) = (
        first.policies.clone(),
        first.seeds.clone(),
        first.mismatch_percent,
        first.worst,
    );
    let mut cases: Vec<Option<CaseOutcome>> = vec![None; total];
    for s in shards {
        for (i, c) in s.cases {
            if !holds(i, s.index, count) || i >= total {
                return Err(format!(
                    "shard {}/{count} holds case {i}, which is not its: the file was changed",
                    s.index
                ));
            }
            if c.mean_runtime_s.len() != policies.len() {
                return Err(format!(
                    "shard {}/{count}, case {}: {} run times for {} policies",
                    s.index,
                    c.name,
                    c.mean_runtime_s.len(),
                    policies.len()
                ));
            }
            cases[i] = Some(c);
        }
    }
    let cases: Option<Vec<CaseOutcome>> = cases.into_iter().collect();
    let cases = cases.ok_or("a shard lacks some of its cases: the file was cut short")?;
    Sweep::of(policies, seeds, mismatch, worst, cases)
}

/// "a, b" or "none".
fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(name: &str, t: [f64; 2]) -> CaseOutcome {
        CaseOutcome {
            name: name.into(),
            machine: "m".into(),
            threads: 2,
            mean_runtime_s: t.to_vec(),
            runtime_s: t.iter().map(|x| vec![*x]).collect(),
            vs_default_percent: vec![0.0, 100.0 * (t[1] / t[0] - 1.0)],
            vs_linux_percent: Vec::new(),
            oracle_runtime_s: None,
        }
    }

    /// Five cases dealt over `m` shards.
    fn shards(m: usize) -> Vec<Shard> {
        let all: Vec<CaseOutcome> = (0..5)
            .map(|i| outcome(&format!("mix:{i}"), [10.0, 9.0 + i as f64 * 0.5]))
            .collect();
        (1..=m)
            .map(|k| Shard {
                numaplace_shard: FORMAT,
                index: k,
                count: m,
                sweep: "--random 5".into(),
                cases_total: 5,
                policies: vec!["default".into(), "dino".into()],
                seeds: vec![0],
                mismatch_percent: None,
                worst: 3,
                cases: (all.iter().cloned().enumerate())
                    .filter(|(i, _)| holds(*i, k, m))
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn shards_merged_in_any_order_give_the_whole_sweep() {
        let whole = merge(shards(1)).unwrap();
        let mut three = shards(3);
        three.reverse();
        let merged = merge(three).unwrap();
        assert_eq!(merged.cases, whole.cases);
        assert_eq!(
            serde_json::to_string(&merged).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
        // Through the file and back, to the byte.
        let text: Vec<String> = shards(3)
            .iter()
            .map(|s| serde_json::to_string_pretty(s).unwrap())
            .collect();
        let read: Vec<Shard> = text
            .iter()
            .map(|t| serde_json::from_str(t).unwrap())
            .collect();
        assert_eq!(
            serde_json::to_string(&merge(read).unwrap()).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
    }

    #[test]
    fn a_merge_refuses_what_is_not_one_sweep_once() {
        let mut missing = shards(3);
        missing.remove(1);
        let e = merge(missing).unwrap_err();
        assert!(e.contains("missing 2/3") && e.contains("twice none"), "{e}");
        let mut twice = shards(3);
        twice[2] = twice[0].clone();
        let e = merge(twice).unwrap_err();
        assert!(e.contains("missing 3/3") && e.contains("twice 1/3"), "{e}");
        let mut other = shards(2);
        other[1].sweep = "--random 6".into();
        assert!(merge(other).unwrap_err().contains("another sweep"));
        let mut moved = shards(2);
        let c = moved[1].cases.remove(0);
        moved[0].cases.push(c);
        assert!(merge(moved).unwrap_err().contains("not its"));
        let mut short = shards(2);
        short[0].cases.pop();
        assert!(merge(short).unwrap_err().contains("cut short"));
        let mut newer = shards(1);
        newer[0].numaplace_shard = FORMAT + 1;
        assert!(merge(newer).unwrap_err().contains("format"));
        assert!(merge(Vec::new()).unwrap_err().contains("no shard"));
    }

    #[test]
    fn a_shard_spec_is_k_of_m() {
        assert_eq!(parse_spec("2/4"), Ok((2, 4)));
        assert_eq!(parse_spec(" 1 / 1 "), Ok((1, 1)));
        for bad in ["0/4", "5/4", "2", "a/b", "1/0", "-1/2", ""] {
            assert!(parse_spec(bad).unwrap_err().contains("K/M"), "{bad}");
        }
        let dealt: Vec<usize> = (0..8).filter(|&i| holds(i, 2, 3)).collect();
        assert_eq!(dealt, [1, 4, 7]);
    }
}
