//! Algorithm 1 of \[Rao13\] as BRM keeps it per thread: the moving
//! average of the uncore penalty, the system-wide penalty of a round, the
//! per-node table with its update, pick and reset, and the seeded draws.

/// BRM's draws: numaplace-model's seeded xoshiro256** generator, reduced
/// by modulo as Algorithm 1's `random() mod 100` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng(numaplace_model::rng::Rng);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(numaplace_model::rng::Rng::new(seed))
    }

    /// A number in `0..n` (`n` > 0); the bias of the modulo is below 2^-57
    /// for the small `n` used here.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }

    /// Algorithm 1's `random() mod 100`.
    pub fn draw(&mut self) -> u8 {
        self.below(100) as u8
    }

    /// A number in `lo..=hi` (either order).
    pub fn between(&mut self, lo: u32, hi: u32) -> u32 {
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        lo + self.below(u64::from(hi - lo) + 1) as u32
    }
}

/// The reset period grows up to 2^3 = 8 times while explorations keep
/// confirming a thread's node.
pub const MAX_BACKOFF: u32 = 3;

/// How much higher than another node's record this node's must be to
/// count as higher in [`ThreadState::update`].
pub const NOISE_MARGIN: f64 = 0.05;
/// §5's moving average: a new sample weighs 1/8; the first is taken as is.
pub fn ewma(old: Option<f64>, sample: f64) -> f64 {
    match old {
        Some(o) => (7.0 * o + sample) / 8.0,
        None => sample,
    }
}

/// The system-wide penalty of a round from the candidates' averages and
/// the uncore requests each sent this interval: their mean weighted by
/// requests, i.e. stall cycles over requests for the candidates together.
///
/// Weighted rather than a plain mean because it measures what the
/// candidates lose: a thread that sends a thousand times more requests
/// stalls a thousand times more for the same penalty, and an almost idle
/// thread's penalty (a few requests, a noisy ratio) should not sway the
/// decisions of the busy ones. `None` when no request was counted.
pub fn system_penalty(samples: impl IntoIterator<Item = (f64, u64)>) -> Option<f64> {
    let (mut stalls, mut requests) = (0.0, 0.0);
    for (penalty, r) in samples {
        stalls += penalty * r as f64;
        requests += r as f64;
    }
    (requests > 0.0).then(|| stalls / requests)
}

/// Whether a recorded penalty is higher than another, a node never
/// measured (`None`) counting as lowest: Algorithm 1 starts the table at
/// zero, which is what makes a thread try every node.
fn higher(a: Option<f64>, b: Option<f64>) -> bool {
    higher_by(a, b, 0.0)
}

/// [`higher`] by more than a fraction `margin` of the lower value.
fn higher_by(a: Option<f64>, b: Option<f64>, margin: f64) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a > b * (1.0 + margin),
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Algorithm 1's `BiasRandomPick`: move when the draw (0..100) is below the
/// probability. Probability 0 never moves, 100 always does.
pub fn bias_random_pick(prob: u8, draw: u8) -> bool {
    draw < prob
}

/// What BRM remembers of one candidate thread (Algorithm 1's fields of a
/// vCPU). Nodes are numbered as the policy's domains: the machine's nodes
/// with CPUs numaplace may use, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadState {
    /// Its own uncore penalty, moving average, cycles.
    pub ewma: Option<f64>,
    /// The node the samples in `ewma` were taken on.
    pub sampled_on: Option<usize>,
    /// Per node, the system-wide penalty recorded when it last ran there;
    /// `None`: never, or not since the last reset.
    pub unc: Vec<Option<f64>>,
    /// Probability of migrating, percent, 0..=100.
    pub prob: u8,
    /// The node a move goes to.
    pub bias: usize,
    /// The policy round at which `unc` is forgotten.
    pub reset_at: u64,
    /// The node it was on at its last reset, to tell whether the
    /// exploration since then changed where it runs.
    pub reset_node: Option<usize>,
    /// Doublings of the reset period: one more each time a reset finds the
    /// thread where the previous one left it, none once it has moved.
    pub backoff: u32,
}

impl ThreadState {
    /// A thread first seen on node `here` of `nodes`.
    pub fn new(nodes: usize, here: usize, reset_at: u64) -> ThreadState {
        ThreadState {
            ewma: None,
            sampled_on: None,
            unc: vec![None; nodes],
            prob: 0,
            bias: here,
            reset_at,
            reset_node: None,
            backoff: 0,
        }
    }

    /// Takes one sample of the thread's penalty, measured on node `here`;
    /// returns the new average. The average starts again when the thread
    /// has changed nodes: it smooths the noise of one placement, and
    /// samples from the node it left say nothing of the one it is on.
    pub fn observe(&mut self, here: usize, sample: f64) -> f64 {
        if self.sampled_on != Some(here) {
            self.ewma = None;
            self.sampled_on = Some(here);
        }
        let e = ewma(self.ewma, sample);
        self.ewma = Some(e);
        e
    }

    /// Forgets the per-node penalties when `round` has reached the reset
    /// deadline, and draws the next deadline. Returns whether it did.
    pub fn maybe_reset(
        &mut self,
        round: u64,
        here: usize,
        rng: &mut Rng,
        lo: u32,
        hi: u32,
    ) -> bool {
        if round < self.reset_at {
            return false;
        }
        self.unc.fill(None);
        self.backoff = if self.reset_node == Some(here) {
            (self.backoff + 1).min(MAX_BACKOFF)
        } else {
            0
        };
        self.reset_node = Some(here);
        let period = u64::from(rng.between(lo, hi).max(1)) << self.backoff;
        self.reset_at = round + period;
        true
    }

    /// Algorithm 1's `Update`: the system-wide penalty `global` is recorded
    /// for node `here`, then compared with every other node's record.
    ///
    /// We follow the paper's per-node loop. The slides (\[Rao13-slides\]) state
    /// Update another way: find the node of lowest record (argmin); if the
    /// current node is above it, probability +1, else probability −1 and
    /// bias := current node. That differs in three ways: the probability
    /// moves by one step per update, not one per node compared (on eight
    /// nodes the paper's form climbs up to seven times faster when this
    /// node is the worst, and falls as fast when it is the best); the bias
    /// is set to the current node when the current node is the lowest; and
    /// the if-branch never sets the bias to the argmin, so as printed a
    /// bias could never point anywhere but where the thread already is,
    /// which looks like an omission in the slide. The paper's form is
    /// complete as printed (its `vnc` is a misprint of `unc`), scales its
    /// urge to move with how many nodes look better, and is what the
    /// evaluation ran; so we implement it.
    ///
    /// One consequence we keep: the paper never points the bias back at the
    /// current node, so a bias chosen when another node looked better stays
    /// while the probability decays by one per node each round. A move to
    /// it then is one more exploration: the thread records that node afresh
    /// and comes back if it was worse.
    ///
    /// One departure, measured in the simulator
    /// (docs/results/2026-11-22-brm.md): this
    /// node's record must exceed another's by more than [`NOISE_MARGIN`]
    /// to count as higher. A record is the whole system's penalty at one
    /// moment; differences of a few percent between two of them are as
    /// likely to come from other threads' moves as from the node.
    pub fn update(&mut self, here: usize, global: f64) {
        self.update_within(here, global, |_| true);
    }

    /// [`update`](Self::update) comparing this node only with the nodes
    /// `reach` allows (issue 16: on a machine of many nodes, the few
    /// nearest the process's memory, `brm/reach.rs`). A node outside it
    /// neither raises the probability nor draws the bias, and a bias left
    /// outside it falls back to `here`: the thread stays.
    pub fn update_within(&mut self, here: usize, global: f64, reach: impl Fn(usize) -> bool) {
        self.unc[here] = Some(global);
        if !reach(self.bias) {
            self.bias = here;
        }
        for i in 0..self.unc.len() {
            if i == here || !reach(i) {
                continue;
            }
            if higher_by(self.unc[here], self.unc[i], NOISE_MARGIN) {
                self.prob = (self.prob + 1).min(100);
                if higher(self.unc[self.bias], self.unc[i]) {
                    self.bias = i;
                }
            } else {
                self.prob = self.prob.saturating_sub(1);
            }
        }
    }
}
