//! One budget per client request: attempts (retries, fallbacks and model switches together), an
//! absolute deadline, and a cap on the total time spent waiting out cooldowns. Ringside is the
//! single retry owner; nothing else retries on its own.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Budget {
    pub max_attempts: u32,
    pub attempts: u32,
    /// Monotonic ms.
    pub started: u64,
    pub deadline: u64,
    pub max_wait_ms: u64,
    pub waited_ms: u64,
}

/// Read `x-ringside-deadline-ms`: milliseconds from now, or an absolute Unix time in ms.
/// Returns the relative budget in ms, clamped to [1 ms, 24 h].
pub fn parse_deadline_header(v: &str, now_unix_ms: u64) -> Option<u64> {
    let n: u64 = v.trim().parse().ok()?;
    let rel = if n > 1_000_000_000_000 {
        n.checked_sub(now_unix_ms)?
    } else {
        n
    };
    Some(rel.clamp(1, 86_400_000))
}

impl Budget {
    pub fn new(max_attempts: u32, now: u64, deadline_ms: u64, max_wait_ms: u64) -> Self {
        Budget {
            max_attempts: max_attempts.max(1),
            attempts: 0,
            started: now,
            deadline: now.saturating_add(deadline_ms),
            max_wait_ms,
            waited_ms: 0,
        }
    }

    pub fn attempts_left(&self) -> u32 {
        self.max_attempts.saturating_sub(self.attempts)
    }

    pub fn time_left(&self, now: u64) -> u64 {
        self.deadline.saturating_sub(now)
    }

    pub fn expired(&self, now: u64) -> bool {
        now >= self.deadline
    }

    /// Take one attempt if any is left and time remains.
    pub fn try_attempt(&mut self, now: u64) -> bool {
        if self.attempts_left() == 0 || self.expired(now) {
            return false;
        }
        self.attempts += 1;
        true
    }

    /// Give back the attempt just taken: the request goes to the same account again on the
    /// word of its usage wall, which bounds those sends itself.
    pub fn refund_attempt(&mut self) {
        self.attempts = self.attempts.saturating_sub(1);
    }

    /// Whether a wait of `ms` fits: an attempt must remain after it, the total wait stays
    /// within its cap (inclusive), and the deadline leaves room for the attempt itself.
    pub fn can_wait(&self, ms: u64, now: u64) -> bool {
        self.attempts_left() > 0
            && self.waited_ms.saturating_add(ms) <= self.max_wait_ms
            && now.saturating_add(ms) < self.deadline
    }

    pub fn waited(&mut self, ms: u64) {
        self.waited_ms = self.waited_ms.saturating_add(ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_bounded() {
        let mut b = Budget::new(3, 0, 10_000, 5_000);
        assert!(b.try_attempt(0));
        assert!(b.try_attempt(1));
        assert!(b.try_attempt(2));
        assert!(!b.try_attempt(3));
        assert_eq!(b.attempts, 3);
        assert_eq!(Budget::new(0, 0, 1, 0).max_attempts, 1);
    }

    #[test]
    fn deadline_stops_attempts_and_waits() {
        let mut b = Budget::new(5, 1_000, 2_000, 60_000);
        assert_eq!(b.time_left(1_500), 1_500);
        assert!(b.can_wait(1_999 - 1, 1_000));
        assert!(!b.can_wait(2_000, 1_000), "no room left for the attempt");
        assert!(!b.try_attempt(3_000));
    }

    #[test]
    fn total_wait_is_capped_inclusive() {
        let mut b = Budget::new(5, 0, 1_000_000, 3_000);
        assert!(
            b.can_wait(3_000, 0),
            "a wait that exactly spends the cap is allowed"
        );
        b.waited(2_000);
        assert!(b.can_wait(1_000, 0));
        assert!(!b.can_wait(1_001, 0));
        let mut spent = Budget::new(1, 0, 1_000_000, 3_000);
        spent.try_attempt(0);
        assert!(!spent.can_wait(10, 0), "no attempt left to wait for");
    }

    #[test]
    fn deadline_header() {
        assert_eq!(parse_deadline_header("1500", 0), Some(1_500));
        assert_eq!(parse_deadline_header("0", 0), Some(1));
        assert_eq!(
            parse_deadline_header("1755779005000", 1_755_779_000_000),
            Some(5_000)
        );
        assert_eq!(
            parse_deadline_header("1755778000000", 1_755_779_000_000),
            None
        );
        assert_eq!(parse_deadline_header("99999999999", 0), Some(86_400_000));
        assert_eq!(parse_deadline_header("soon", 0), None);
        assert_eq!(parse_deadline_header("-5", 0), None);
    }
}
