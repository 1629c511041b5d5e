//! Memory-intensity classes with hysteresis (\[Blagodurov11\] §3.3.2-3.3.3): a
//! thread is a turtle, a devil or a super-devil by its LLC misses per 1000
//! instructions, and changes class only after spending most of its recent
//! intervals in the new one, so that a spike does not move it.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::layout::Class;

/// Class boundaries, LLC misses per 1000 instructions. §3.3.2 chose 2 and
/// 100 for its machine and says other machines want their own, found from
/// how degradation follows the miss rate there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Thresholds {
    /// At or above this, a devil (below: a turtle).
    pub devil_mpki: f64,
    /// Above this, a super-devil.
    pub super_devil_mpki: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            devil_mpki: 2.0,
            super_devil_mpki: 100.0,
        }
    }
}

impl Thresholds {
    /// The class of a thread with `mpki` LLC misses per 1000 instructions.
    pub fn classify(&self, mpki: f64) -> Class {
        if mpki > self.super_devil_mpki {
            Class::SuperDevil
        } else if mpki >= self.devil_mpki {
            Class::Devil
        } else {
            Class::Turtle
        }
    }

    /// The thresholds' own values make sense; the message says what to fix.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.devil_mpki.is_finite() && self.devil_mpki >= 0.0) {
            return Err(format!(
                "devil-mpki {}: give a number of misses per 1000 instructions, 0 or more",
                self.devil_mpki
            ));
        }
        if !(self.super_devil_mpki.is_finite() && self.super_devil_mpki > self.devil_mpki) {
            return Err(format!(
                "super-devil-mpki {} must be above devil-mpki {}",
                self.super_devil_mpki, self.devil_mpki
            ));
        }
        Ok(())
    }
}

/// A thread's class over time: it moves to a new class only when at
/// least `needed` of its last `window` intervals were in that class (§3.3.3:
/// 7 of the last 10).
#[derive(Debug, Clone)]
pub struct Hysteresis {
    recent: VecDeque<Class>,
    current: Class,
    window: usize,
    needed: usize,
}

impl Hysteresis {
    /// A thread first seen in class `first` starts there.
    pub fn new(first: Class, window: usize, needed: usize) -> Hysteresis {
        let mut recent = VecDeque::with_capacity(window);
        recent.push_back(first);
        Hysteresis {
            recent,
            current: first,
            window: window.max(1),
            needed: needed.clamp(1, window.max(1)),
        }
    }

    /// The class the thread is in now.
    pub fn current(&self) -> Class {
        self.current
    }

    /// Records one interval's class and returns the thread's class now.
    pub fn observe(&mut self, c: Class) -> Class {
        if self.recent.len() == self.window {
            self.recent.pop_front();
        }
        self.recent.push_back(c);
        if c != self.current && self.recent.iter().filter(|&&x| x == c).count() >= self.needed {
            self.current = c;
        }
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_boundaries() {
        let t = Thresholds::default();
        assert_eq!(t.classify(0.0), Class::Turtle);
        assert_eq!(t.classify(1.99), Class::Turtle);
        assert_eq!(t.classify(2.0), Class::Devil);
        assert_eq!(t.classify(100.0), Class::Devil);
        assert_eq!(t.classify(100.1), Class::SuperDevil);
        assert!(t.validate().is_ok());
        let bad = Thresholds {
            devil_mpki: 5.0,
            super_devil_mpki: 5.0,
        };
        assert!(bad.validate().unwrap_err().contains("must be above"));
    }

    #[test]
    fn a_class_changes_after_seven_of_the_last_ten_intervals() {
        let mut h = Hysteresis::new(Class::Turtle, 10, 7);
        // Six devil intervals are not enough (the first one seen counts
        // as a turtle interval).
        for _ in 0..6 {
            assert_eq!(h.observe(Class::Devil), Class::Turtle);
        }
        assert_eq!(h.observe(Class::Devil), Class::Devil);
        // A spike back to turtle changes nothing.
        assert_eq!(h.observe(Class::Turtle), Class::Devil);
        assert_eq!(h.observe(Class::Turtle), Class::Devil);
        // Alternating never reaches 7 of 10 for the other class.
        let mut h = Hysteresis::new(Class::Turtle, 10, 7);
        for k in 0..40 {
            let c = if k % 2 == 0 {
                Class::Devil
            } else {
                Class::Turtle
            };
            assert_eq!(h.observe(c), Class::Turtle);
        }
    }
}
