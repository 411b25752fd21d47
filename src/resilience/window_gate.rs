//! The opt-in provider window gate: `threshold` failures within `window_ms` close the provider
//! for `cooldown_ms` after the last one; a success clears the window.

use serde::Serialize;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GateProfile {
    pub threshold: u32,
    pub window_ms: u64,
    pub cooldown_ms: u64,
}

/// Opt-in provider window gate: `threshold` failures within `window_ms` close the provider
/// for `cooldown_ms` after the last one; a success clears the window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WindowGate {
    failures: VecDeque<u64>,
}

impl WindowGate {
    const KEEP: usize = 200;

    pub fn on_failure(&mut self, at: u64, p: &GateProfile) {
        self.failures.push_back(at);
        while self.failures.front().is_some_and(|&t| t + p.window_ms < at)
            || self.failures.len() > Self::KEEP
        {
            self.failures.pop_front();
        }
    }

    pub fn on_success(&mut self) {
        self.failures.clear();
    }

    /// Remaining closed time, if closed.
    pub fn closed_for(&self, now: u64, p: &GateProfile) -> Option<u64> {
        let last = *self.failures.back()?;
        let recent = self
            .failures
            .iter()
            .filter(|&&t| t + p.window_ms >= last)
            .count();
        if recent < p.threshold as usize {
            return None;
        }
        let end = last + p.cooldown_ms;
        (end > now).then(|| end - now)
    }

    pub fn count(&self) -> usize {
        self.failures.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_gate() {
        let p = GateProfile {
            threshold: 3,
            window_ms: 10_000,
            cooldown_ms: 5_000,
        };
        let mut g = WindowGate::default();
        g.on_failure(0, &p);
        g.on_failure(4_000, &p);
        assert_eq!(g.closed_for(4_000, &p), None);
        g.on_failure(20_000, &p); // the first two fell out of the window
        assert_eq!(g.closed_for(20_000, &p), None);
        g.on_failure(21_000, &p);
        g.on_failure(22_000, &p);
        assert_eq!(g.closed_for(23_000, &p), Some(4_000));
        assert_eq!(g.closed_for(27_000, &p), None);
        g.on_failure(28_000, &p);
        assert!(g.closed_for(28_000, &p).is_some());
        g.on_success();
        assert_eq!(g.closed_for(28_000, &p), None);
    }
}
