//! The one collector of what is wrong with a config: every problem with where it is, so that
//! `ringside check` reports them all in one run, not just the first.

use super::Problem;

#[derive(Debug, Default)]
pub(super) struct Problems(pub(super) Vec<Problem>);

impl Problems {
    pub(super) fn add(&mut self, at: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            at: at.into(),
            message: message.into(),
        });
    }

    /// Record a problem when `v` is outside `lo..=hi`.
    pub(super) fn in_range<T: PartialOrd + std::fmt::Display + Copy>(
        &mut self,
        at: &str,
        v: T,
        lo: T,
        hi: T,
    ) {
        if v < lo || v > hi {
            self.add(at, format!("{v} is out of range ({lo} to {hi})"));
        }
    }

    /// The same, returning `v` clamped into the range (so resolving can go on).
    pub(super) fn clamped(&mut self, at: &str, v: u64, lo: u64, hi: u64) -> u64 {
        self.in_range(at, v, lo, hi);
        v.clamp(lo, hi)
    }
}
