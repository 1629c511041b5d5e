//! Balanced graph partitioning for the interference-graph algorithms of
//! \[Symbiosis-Bloom\] §3.3.2-3.3.4: split the nodes of a weighted undirected graph
//! into parts of given sizes so that the weight of the edges between parts
//! (the cut) is as small as possible.
//!
//! The seed solves the two-way MIN-CUT with an SDP solver and reaches more
//! than two cores "by hierarchically using the MIN-CUT algorithm" (§3.3.2).
//! We do the same hierarchy, with our own solvers where the paper names a
//! library:
//!
//! - up to `exact_limit` nodes, every balanced split is tried, so the cut
//!   is the minimum (for 4 processes on 2 cores, the three pairings of
//!   §4.2's Table 1);
//! - beyond, the Kernighan-Lin heuristic (pairwise swaps from an initial
//!   split, passes repeated while a prefix of swaps lowers the cut), which
//!   is not guaranteed optimal.
//!
//! Weights may be negative: a negative edge rewards cutting it, which is
//! how the policy asks to keep two tasks *apart* (in different LLC domains).

/// A symmetric weight matrix over `n` nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    n: usize,
    w: Vec<f64>,
}

impl Graph {
    /// `n` nodes, no edges.
    pub fn new(n: usize) -> Graph {
        Graph {
            n,
            w: vec![0.0; n * n],
        }
    }

    /// Its nodes.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether it has no nodes.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Sets the undirected edge `a`-`b` (both directions) to `x`.
    pub fn set(&mut self, a: usize, b: usize, x: f64) {
        if a != b {
            self.w[a * self.n + b] = x;
            self.w[b * self.n + a] = x;
        }
    }

    /// The weight of the edge between `a` and `b`.
    pub fn get(&self, a: usize, b: usize) -> f64 {
        self.w[a * self.n + b]
    }

    /// Weight of the edges between `a` and `b`.
    pub fn cut(&self, a: &[usize], b: &[usize]) -> f64 {
        a.iter()
            .map(|&x| b.iter().map(|&y| self.get(x, y)).sum::<f64>())
            .sum()
    }

    /// Weight of the edges inside `part`.
    pub fn within(&self, part: &[usize]) -> f64 {
        let mut s = 0.0;
        for (i, &x) in part.iter().enumerate() {
            for &y in &part[i + 1..] {
                s += self.get(x, y);
            }
        }
        s
    }
}

/// Splits `nodes` into `counts.len()` parts of `counts[i]` nodes each
/// (`counts` must sum to `nodes.len()`), by recursive bisection: the
/// first half of the parts against the second, then each half again.
pub fn partition(
    g: &Graph,
    nodes: &[usize],
    counts: &[usize],
    exact_limit: usize,
) -> Vec<Vec<usize>> {
    debug_assert_eq!(counts.iter().sum::<usize>(), nodes.len());
    match counts.len() {
        0 => Vec::new(),
        1 => vec![nodes.to_vec()],
        n => {
            let mid = n / 2;
            let k: usize = counts[..mid].iter().sum();
            let (a, b) = bisect(g, nodes, k, exact_limit);
            let mut out = partition(g, &a, &counts[..mid], exact_limit);
            out.extend(partition(g, &b, &counts[mid..], exact_limit));
            out
        }
    }
}

/// Splits `nodes` into `k` and `nodes.len() - k` nodes with the smallest
/// cut found: exact up to `exact_limit` nodes, Kernighan-Lin beyond.
pub fn bisect(
    g: &Graph,
    nodes: &[usize],
    k: usize,
    exact_limit: usize,
) -> (Vec<usize>, Vec<usize>) {
    let n = nodes.len();
    if k == 0 || k >= n {
        let (a, b) = nodes.split_at(k.min(n));
        return (a.to_vec(), b.to_vec());
    }
    let side = if n <= exact_limit {
        exact(g, nodes, k)
    } else {
        kernighan_lin(g, nodes, k)
    };
    let a = nodes
        .iter()
        .zip(&side)
        .filter(|(_, s)| **s)
        .map(|(x, _)| *x)
        .collect();
    let b = nodes
        .iter()
        .zip(&side)
        .filter(|(_, s)| !**s)
        .map(|(x, _)| *x)
        .collect();
    (a, b)
}

/// Every `k`-subset in lexicographic order; the first with the smallest
/// cut wins, so ties go to the split that keeps the given order.
fn exact(g: &Graph, nodes: &[usize], k: usize) -> Vec<bool> {
    let n = nodes.len();
    let mut idx: Vec<usize> = (0..k).collect();
    let mut best = (f64::INFINITY, vec![false; n]);
    let mut side = vec![false; n];
    loop {
        side.fill(false);
        for &i in &idx {
            side[i] = true;
        }
        let mut c = 0.0;
        for i in 0..n {
            if side[i] {
                for j in 0..n {
                    if !side[j] {
                        c += g.get(nodes[i], nodes[j]);
                    }
                }
            }
        }
        if c < best.0 - 1e-12 {
            best = (c, side.clone());
        }
        // Next combination.
        let mut i = k;
        while i > 0 && idx[i - 1] == n - k + i - 1 {
            i -= 1;
        }
        if i == 0 {
            break;
        }
        idx[i - 1] += 1;
        for j in i..k {
            idx[j] = idx[j - 1] + 1;
        }
    }
    best.1
}

/// Kernighan-Lin: start from the first `k` nodes against the rest, then
/// in each pass swap, one pair at a time, the unlocked pair with the
/// largest gain (possibly negative), lock it, and keep the prefix of swaps
/// with the largest total gain; stop when no prefix gains.
fn kernighan_lin(g: &Graph, nodes: &[usize], k: usize) -> Vec<bool> {
    let n = nodes.len();
    let mut side: Vec<bool> = (0..n).map(|i| i < k).collect();
    let w = |i: usize, j: usize| g.get(nodes[i], nodes[j]);
    for _pass in 0..2 * n {
        // D = external - internal cost of each node.
        let mut d: Vec<f64> = (0..n)
            .map(|i| {
                (0..n)
                    .filter(|&j| j != i)
                    .map(|j| {
                        if side[i] != side[j] {
                            w(i, j)
                        } else {
                            -w(i, j)
                        }
                    })
                    .sum()
            })
            .collect();
        let mut locked = vec![false; n];
        let mut swaps = Vec::new();
        let mut gains = Vec::new();
        for _ in 0..k.min(n - k) {
            let mut best: Option<(f64, usize, usize)> = None;
            for a in (0..n).filter(|&a| side[a] && !locked[a]) {
                for b in (0..n).filter(|&b| !side[b] && !locked[b]) {
                    let gain = d[a] + d[b] - 2.0 * w(a, b);
                    if best.is_none_or(|(g0, _, _)| gain > g0 + 1e-12) {
                        best = Some((gain, a, b));
                    }
                }
            }
            let Some((gain, a, b)) = best else { break };
            locked[a] = true;
            locked[b] = true;
            swaps.push((a, b));
            gains.push(gain);
            // Update D as if a and b had swapped sides.
            for x in (0..n).filter(|&x| !locked[x]) {
                let (wa, wb) = (w(x, a), w(x, b));
                if side[x] {
                    d[x] += 2.0 * wa - 2.0 * wb;
                } else {
                    d[x] += 2.0 * wb - 2.0 * wa;
                }
            }
        }
        let (mut best_k, mut best_sum, mut sum) = (0, 0.0, 0.0);
        for (i, g) in gains.iter().enumerate() {
            sum += g;
            if sum > best_sum + 1e-9 {
                best_sum = sum;
                best_k = i + 1;
            }
        }
        if best_k == 0 {
            break;
        }
        for &(a, b) in &swaps[..best_k] {
            side[a] = false;
            side[b] = true;
        }
    }
    side
}

/// `total` items dealt to parts in proportion to `caps` (their cores),
/// the remainders going to the largest fractional shares, ties to the
/// earlier part. Capacities only weigh: a part may get more items than its
/// capacity (then its cores time-share, which is the point of §3.3).
pub fn proportional_counts(total: usize, caps: &[usize]) -> Vec<usize> {
    let sum: usize = caps.iter().sum();
    if sum == 0 {
        return vec![0; caps.len()];
    }
    let mut counts: Vec<usize> = caps.iter().map(|c| total * c / sum).collect();
    let mut rest = total - counts.iter().sum::<usize>();
    // Largest remainders first, ties to the earlier part.
    let mut order: Vec<usize> = (0..caps.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((total * caps[i]) % sum));
    for &i in order.iter().cycle() {
        if rest == 0 {
            break;
        }
        counts[i] += 1;
        rest -= 1;
    }
    counts
}
