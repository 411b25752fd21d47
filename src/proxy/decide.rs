//! The attempt loop's decisions, as pure functions of data and the time: no sockets, no core.
//! `when_nothing_usable` says whether to wait out the earliest short recovery or give up;
//! `after_failure` says what a judged failure leads to. Both are unit-tested on plain values.

use crate::audit::Decision;
use crate::resilience::Exclusion;
use crate::resilience::budget::Budget;
use crate::resilience::classify::{Reason, Verdict};
use crate::resilience::jitter;

/// A little past the earliest recovery, so that the retry finds the timer expired.
const WAIT_SLACK_MS: u64 = 5;

/// Waiters on one recovery wake spread over up to a quarter of their wait, at most this long:
/// the first to go finds out whether the limit is over, and if it is not, its failure cools the
/// candidate again before the rest wake (they wait again instead of all failing at once).
const MAX_STAGGER_MS: u64 = 500;

/// The request's deadline in ms from now: the operator's (the route's, else the default), which
/// a client may shorten with `x-ringside-deadline-ms` (`asked`), and lengthen only with a key
/// of scope `overrides` (`may_extend`).
pub fn deadline_ms(operator_ms: u64, asked: Option<u64>, may_extend: bool) -> u64 {
    match asked {
        Some(ms) if may_extend => ms,
        Some(ms) => ms.min(operator_ms),
        None => operator_ms,
    }
}

/// What to do when no candidate can be tried now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Sleep this long, then select again.
    Wait(u64),
    /// Nothing will come free within the budget: answer the client now.
    GiveUp,
}

/// Wait for the earliest exclusion that may be waited out (a short cooldown, never quota, auth,
/// not-found or a breaker), if the budget allows that wait plus an attempt after it. `seed`
/// (the request's own) spreads the wake-ups of requests waiting for the same recovery.
///
/// A wait decided on ends early, to look again, when another exclusion's time comes sooner:
/// an open breaker is not waited for, but its provider answering a probe can free a sibling
/// key long before the cooldown the request waits for (measured: requests waiting 14 s for
/// one key's cooldown while its sibling served again after 0.1 s).
pub fn when_nothing_usable<'a>(
    excluded: impl IntoIterator<Item = &'a Exclusion>,
    budget: &Budget,
    now: u64,
    seed: u64,
) -> Idle {
    let (mut earliest, mut sooner) = (None::<u64>, u64::MAX);
    for e in excluded {
        let Some(ms) = e.remaining_ms() else {
            continue;
        };
        sooner = sooner.min(ms);
        if e.waitable() {
            earliest = Some(earliest.map_or(ms, |w| w.min(ms)));
        }
    }
    let Some(ms) = earliest else {
        return Idle::GiveUp;
    };
    let wait = ms + WAIT_SLACK_MS;
    let staggered = wait + jitter::up_to((ms / 4).min(MAX_STAGGER_MS), seed);
    let fits = if budget.can_wait(staggered, now) {
        staggered
    } else if budget.can_wait(wait, now) {
        wait
    } else {
        return Idle::GiveUp;
    };
    if sooner < ms {
        Idle::Wait(fits.min(sooner + WAIT_SLACK_MS))
    } else {
        Idle::Wait(fits)
    }
}

/// What a judged failure leads to: a request the upstream refused as malformed is passed through
/// and tried nowhere else, and so is a context overflow unless the route has a target with a
/// larger context window (`larger_context`: the request is too long for this model, whichever
/// key sends it); otherwise the next candidate, or the end when no attempt is left.
pub fn after_failure(verdict: &Verdict, budget: &Budget, larger_context: bool) -> Decision {
    if !verdict.retryable || (verdict.reason == Reason::ContextOverflow && !larger_context) {
        Decision::PassThrough
    } else if budget.attempts_left() == 0 {
        Decision::Fail
    } else {
        Decision::Next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resilience::classify::{Reason, by_status, transport};
    use crate::resilience::cooldown::Terminal;

    fn verdict(status: u16) -> Verdict {
        let mut v = transport(false);
        v.status = status;
        v.reason = by_status(status);
        v.retryable = v.reason != Reason::BadRequest;
        v
    }

    #[test]
    fn waits_for_the_earliest_short_recovery_that_fits() {
        // 3 attempts, deadline 10 s from t=0, at most 2 s of waiting.
        let b = Budget::new(3, 0, 10_000, 2_000);
        let excluded = [
            Exclusion::Cooling {
                reason: Some(Reason::RateLimited),
                ms: 900,
            },
            Exclusion::Cooling {
                reason: Some(Reason::Overloaded),
                ms: 400,
            },
            Exclusion::Tried,
        ];
        let Idle::Wait(ms) = when_nothing_usable(&excluded, &b, 0, 7) else {
            panic!("waits");
        };
        assert!(
            (405..=505).contains(&ms),
            "{ms}: 400 + slack + a stagger of up to 100"
        );
    }

    #[test]
    fn a_wait_looks_again_when_an_open_breaker_may_have_cleared() {
        let b = Budget::new(3, 0, 600_000, 30_000);
        let cooling = Exclusion::Cooling {
            reason: Some(Reason::Overloaded),
            ms: 14_000,
        };
        let excluded = [cooling.clone(), Exclusion::BreakerOpen { ms: 250 }];
        assert_eq!(when_nothing_usable(&excluded, &b, 0, 7), Idle::Wait(255));
        // Whether to wait at all is still the cooldown's question: a budget that cannot wait
        // 14 s gives up at once, and a breaker alone is never waited for.
        let short = Budget::new(3, 0, 600_000, 10_000);
        assert_eq!(when_nothing_usable(&excluded, &short, 0, 7), Idle::GiveUp);
        assert_eq!(when_nothing_usable(&excluded[1..], &b, 0, 7), Idle::GiveUp);
        // A later timer changes nothing.
        let later = [cooling, Exclusion::BreakerOpen { ms: 20_000 }];
        let Idle::Wait(ms) = when_nothing_usable(&later, &b, 0, 7) else {
            panic!("waits");
        };
        assert!((14_005..=14_505).contains(&ms), "{ms}");
    }

    #[test]
    fn never_waits_for_quota_a_terminal_state_or_a_breaker() {
        let b = Budget::new(3, 0, 600_000, 600_000);
        let excluded = [
            Exclusion::Cooling {
                reason: Some(Reason::QuotaExhausted),
                ms: 100,
            },
            Exclusion::Terminal(Terminal::Banned),
            Exclusion::BreakerOpen { ms: 50 },
        ];
        assert_eq!(when_nothing_usable(&excluded, &b, 0, 7), Idle::GiveUp);
    }

    #[test]
    fn gives_up_at_the_budget_edges() {
        let short = [Exclusion::Cooling {
            reason: Some(Reason::RateLimited),
            ms: 1_000,
        }];
        // The wait cap: 1,005 ms does not fit in 1,000.
        assert_eq!(
            when_nothing_usable(&short, &Budget::new(3, 0, 60_000, 1_000), 0, 7),
            Idle::GiveUp
        );
        assert_eq!(
            when_nothing_usable(&short, &Budget::new(3, 0, 60_000, 1_005), 0, 7),
            Idle::Wait(1_005)
        );
        // The deadline: the retry must still start before it.
        assert_eq!(
            when_nothing_usable(&short, &Budget::new(3, 0, 1_005, 60_000), 0, 7),
            Idle::GiveUp
        );
        assert_eq!(
            when_nothing_usable(&short, &Budget::new(3, 0, 1_006, 60_000), 0, 7),
            Idle::Wait(1_005)
        );
        // No attempt left: nothing to wait for.
        let mut spent = Budget::new(1, 0, 60_000, 60_000);
        assert!(spent.try_attempt(0));
        assert_eq!(when_nothing_usable(&short, &spent, 0, 7), Idle::GiveUp);
        // Nothing excluded at all.
        assert_eq!(
            when_nothing_usable(&[], &Budget::new(3, 0, 60_000, 60_000), 0, 7),
            Idle::GiveUp
        );
    }

    #[test]
    fn waiters_on_one_recovery_wake_spread_out() {
        let b = Budget::new(3, 0, 600_000, 600_000);
        let cooling = [Exclusion::Cooling {
            reason: Some(Reason::RateLimited),
            ms: 2_000,
        }];
        let wakes: std::collections::BTreeSet<u64> = (0..64)
            .map(|seed| match when_nothing_usable(&cooling, &b, 0, seed) {
                Idle::Wait(ms) => ms,
                Idle::GiveUp => panic!("waits"),
            })
            .collect();
        assert!(
            wakes.iter().all(|ms| (2_005..=2_505).contains(ms)),
            "{wakes:?}"
        );
        assert!(wakes.len() > 32, "spread, not one instant: {wakes:?}");
        // A stagger never costs the wait itself: without room for it, the plain wait.
        let tight = Budget::new(3, 0, 2_006, 600_000);
        assert_eq!(
            when_nothing_usable(&cooling, &tight, 0, 1),
            Idle::Wait(2_005)
        );
    }

    #[test]
    fn a_client_shortens_its_deadline_and_lengthens_it_only_with_overrides() {
        assert_eq!(deadline_ms(600_000, None, false), 600_000);
        assert_eq!(deadline_ms(600_000, Some(1_000), false), 1_000);
        assert_eq!(deadline_ms(300, Some(60_000), false), 300);
        assert_eq!(deadline_ms(300, Some(60_000), true), 60_000);
    }

    #[test]
    fn a_failure_leads_on_passes_through_or_ends() {
        let mut b = Budget::new(2, 0, 60_000, 0);
        assert!(b.try_attempt(0));
        assert_eq!(after_failure(&verdict(429), &b, false), Decision::Next);
        assert_eq!(
            after_failure(&verdict(400), &b, false),
            Decision::PassThrough
        );
        // A context overflow: passed through after one attempt, unless a larger window waits.
        assert_eq!(
            after_failure(&verdict(413), &b, false),
            Decision::PassThrough
        );
        assert_eq!(after_failure(&verdict(413), &b, true), Decision::Next);
        assert!(b.try_attempt(0));
        assert_eq!(after_failure(&verdict(503), &b, false), Decision::Fail);
        // A bad request is passed through even on the last attempt.
        assert_eq!(
            after_failure(&verdict(400), &b, false),
            Decision::PassThrough
        );
    }
}
