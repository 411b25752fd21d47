//! The reference's test list for the low-priority lane (behaviour-spec §15.6), on a manual
//! clock.

use super::headers::{Claim, Unified};
use super::lane::{
    Answer, DEFAULT_MAX_WAIT_MS, DEFAULT_RETRY_AFTER_MS, Decision, EndReason, Lane, OptIn, Via,
    Waits, wait_ceiling,
};

/// Now, in ms; the five-hour window resets an hour later.
const NOW: u64 = 1_800_000_000_000;
const RESET_S: u64 = NOW / 1_000 + 3_600;
const LANE: OptIn = OptIn {
    low_priority_lane: true,
    auto_limit_reset: false,
};
const BOTH: OptIn = OptIn {
    low_priority_lane: true,
    auto_limit_reset: true,
};

fn h(pairs: &[(&str, &str)]) -> Unified {
    let full: Vec<(String, &str)> = pairs
        .iter()
        .map(|(n, v)| (format!("anthropic-ratelimit-unified-{n}"), *v))
        .collect();
    Unified::from_pairs(full.iter().map(|(n, v)| (n.as_str(), *v)))
}

/// A five-hour wall answer with a slow offer.
fn wall() -> Unified {
    let reset = RESET_S.to_string();
    h(&[
        ("status", "rejected"),
        ("reset", &reset),
        ("representative-claim", "five_hour"),
        ("slow-offer", "treatment"),
    ])
}

fn answer(status: u16, unified: &Unified, sent_slow: bool) -> Answer<'_> {
    Answer {
        status,
        unified,
        sent_slow,
    }
}

/// A lane accepted at `NOW`.
fn active() -> Lane {
    let mut l = Lane::default();
    assert!(l.try_activate(&wall(), NOW));
    l
}

fn on(l: &mut Lane, status: u16, u: &Unified, at: u64) -> Decision {
    l.handle(
        LANE,
        answer(status, u, true),
        at,
        &mut Waits::default(),
        None,
        0.5,
    )
}

fn retry(delay_ms: u64, via: Via) -> Decision {
    Decision::Retry { delay_ms, via }
}

#[test]
fn both_opt_ins_default_off_and_an_opted_out_account_is_left_alone() {
    assert_eq!(OptIn::default(), OptIn::default());
    assert!(!OptIn::default().low_priority_lane && !OptIn::default().auto_limit_reset);
    let mut l = Lane::default();
    let d = l.handle(
        OptIn::default(),
        answer(429, &wall(), false),
        NOW,
        &mut Waits::default(),
        None,
        0.5,
    );
    assert_eq!(d, Decision::None);
    assert_eq!(l.active_until(NOW), None);
}

#[test]
fn activation_needs_a_treatment_offer_and_a_future_reset() {
    let mut l = Lane::default();
    assert_eq!(l.active_until(NOW), None, "idle until the first wall");
    let reset = RESET_S.to_string();
    let past = (NOW / 1_000 - 1).to_string();
    let control = h(&[("slow-offer", "control"), ("reset", &reset)]);
    let no_reset = h(&[("slow-offer", "treatment")]);
    let past_reset = h(&[("slow-offer", "treatment"), ("reset", &past)]);
    for refused in [&control, &no_reset, &past_reset] {
        assert!(!l.try_activate(refused, NOW), "{refused:?}");
    }
    assert!(l.try_activate(&wall(), NOW));
    assert_eq!(l.active_until(NOW), Some(RESET_S));
    assert_eq!(
        (l.retry_after_ms, l.max_wait_ms),
        (DEFAULT_RETRY_AFTER_MS, DEFAULT_MAX_WAIT_MS)
    );
    assert_eq!(
        (DEFAULT_RETRY_AFTER_MS, DEFAULT_MAX_WAIT_MS),
        (20_000, 1_200_000)
    );
    let before = l.clone();
    assert!(
        !l.try_activate(&wall(), NOW + 5),
        "accepting again is a no-op"
    );
    assert_eq!(l, before);
}

#[test]
fn hints_are_clamped_and_the_lane_expires_a_minute_after_the_reset() {
    let mut u = wall();
    u.slow_retry_after = Some(1.0);
    u.slow_max_wait = Some(999_999.0);
    let mut l = Lane::default();
    assert!(l.try_activate(&u, NOW));
    assert_eq!(l.retry_after_ms, 5_000, "floor");
    assert_eq!(l.max_wait_ms, 6 * 3_600_000, "ceiling");
    let end = RESET_S * 1_000 + 60_000;
    assert_eq!(l.active_until(end - 1), Some(RESET_S));
    assert_eq!(l.active_until(end), None);
    assert_eq!(l.last_end, Some((EndReason::Reset, end)));
}

#[test]
fn an_idle_account_accepts_the_lane_at_a_wall_429_only() {
    let mut l = Lane::default();
    assert_eq!(
        on(&mut l, 429, &wall(), NOW),
        retry(0, Via::LowPriorityAccepted)
    );
    assert_eq!(l.active_until(NOW), Some(RESET_S));
    let mut burst = Lane::default();
    assert_eq!(
        on(&mut burst, 429, &Unified::default(), NOW),
        Decision::None
    );
    assert_eq!(burst.active_until(NOW), None);
}

#[test]
fn the_limit_reset_is_tried_first_and_the_lane_is_the_fallback() {
    let mut l = Lane::default();
    let mut w = Waits::default();
    let d = l.handle(BOTH, answer(429, &wall(), false), NOW, &mut w, None, 0.5);
    assert_eq!(d, Decision::TryLimitReset);
    assert_eq!(
        l.after_limit_reset(true, BOTH, &wall(), NOW),
        retry(0, Via::LimitReset)
    );
    assert_eq!(l.active_until(NOW), None, "granted: full speed, no lane");
    assert_eq!(
        l.after_limit_reset(false, BOTH, &wall(), NOW),
        retry(0, Via::LowPriorityAccepted),
        "a failed (or throwing) claim falls back to the lane"
    );
    let mut weekly = wall();
    weekly.claim = Some(Claim::SevenDay);
    let mut l = Lane::default();
    let d = l.handle(BOTH, answer(429, &weekly, false), NOW, &mut w, None, 0.5);
    assert_eq!(
        d,
        retry(0, Via::LowPriorityAccepted),
        "no claim for a weekly wall"
    );
}

#[test]
fn on_the_lane_successes_are_counted_and_the_lane_stays() {
    let mut l = active();
    assert_eq!(
        on(&mut l, 200, &h(&[("slow-status", "active")]), NOW),
        Decision::None
    );
    let standard = h(&[("slow-status", "not_needed")]);
    assert_eq!(on(&mut l, 200, &standard, NOW), Decision::None);
    assert_eq!((l.served, l.served_standard), (1, 1));
    assert!(l.active_until(NOW).is_some());
}

#[test]
fn a_busy_slot_is_waited_out_with_jitter() {
    let mut l = active();
    let busy = h(&[("slow-status", "slot_busy")]);
    let mut w = Waits::default();
    let d = l.handle(LANE, answer(429, &busy, true), NOW, &mut w, None, 0.5);
    assert_eq!(d, retry(20_000, Via::SlotBusy));
    let d = l.handle(
        LANE,
        answer(429, &busy, true),
        NOW + 20_000,
        &mut w,
        None,
        1.0,
    );
    assert_eq!(d, retry(26_000, Via::SlotBusy), "+30 %");
    assert_eq!(w.attempts, 2);
    let cap = NOW + DEFAULT_MAX_WAIT_MS;
    let d = l.handle(LANE, answer(429, &busy, true), cap, &mut w, None, 0.5);
    assert_eq!(d, Decision::Ended(EndReason::MaxWait));
    assert!(!l.try_activate(&wall(), cap + 10 * 60_000 - 1), "cool-off");
    assert!(l.try_activate(&wall(), cap + 10 * 60_000));
}

#[test]
fn capacity_529_is_waited_out() {
    let mut l = active();
    assert_eq!(
        on(&mut l, 529, &Unified::default(), NOW),
        retry(20_000, Via::CapacityBusy)
    );
}

#[test]
fn the_providers_verdicts_end_the_lane() {
    for (status, reason) in [
        ("weekly_limit", EndReason::Weekly),
        ("budget_exhausted", EndReason::Budget),
        ("off", EndReason::Off),
        ("ineligible", EndReason::Ineligible),
    ] {
        let mut l = active();
        let d = on(&mut l, 429, &h(&[("slow-status", status)]), NOW);
        assert_eq!(d, Decision::Ended(reason), "{status}");
        assert_eq!(l.active_until(NOW), None);
    }
    let over = |v: &str| h(&[("slow-status", "ineligible"), ("overage-in-use", v)]);
    let mut l = active();
    assert_eq!(
        on(&mut l, 429, &over("true"), NOW),
        Decision::Ended(EndReason::ExtraUsage)
    );
    let mut l = active();
    assert_eq!(
        on(&mut l, 429, &over("false"), NOW),
        Decision::Ended(EndReason::Ineligible)
    );
}

#[test]
fn the_requests_own_deadline_bounds_every_wait() {
    let busy = h(&[("slow-status", "slot_busy")]);
    let mut l = active();
    let mut w = Waits::default();
    let ceiling = Some(8_000);
    let d = l.handle(LANE, answer(429, &busy, true), NOW, &mut w, ceiling, 0.5);
    assert_eq!(d, retry(8_000, Via::SlotBusy));
    let d = l.handle(
        LANE,
        answer(429, &busy, true),
        NOW + 8_000,
        &mut w,
        ceiling,
        0.5,
    );
    assert_eq!(d, Decision::Ended(EndReason::MaxWait));
    let mut l = active();
    let d = l.handle(
        LANE,
        answer(429, &busy, true),
        NOW,
        &mut Waits::default(),
        Some(0),
        0.5,
    );
    assert_eq!(d, Decision::Ended(EndReason::MaxWait), "ceiling 0");
    // 13 s left less the 5 s margin.
    assert_eq!(wait_ceiling(Some(13_000)), Some(8_000));
    assert_eq!(wait_ceiling(None), None);
    let mut l = active();
    let mut w = Waits::default();
    let late = NOW + DEFAULT_MAX_WAIT_MS - 1;
    l.handle(LANE, answer(429, &busy, true), NOW, &mut w, None, 0.5);
    let d = l.handle(LANE, answer(429, &busy, true), late, &mut w, None, 0.5);
    assert_eq!(
        d,
        retry(1, Via::SlotBusy),
        "no ceiling: the provider's max wait"
    );
}

#[test]
fn a_spent_budget_is_remembered_until_its_reset() {
    let mut l = active();
    let reset = (NOW / 1_000 + 7_200).to_string();
    let spent = h(&[
        ("slow-status", "budget_exhausted"),
        ("slow-budget-reset", &reset),
    ]);
    assert_eq!(
        on(&mut l, 429, &spent, NOW),
        Decision::Ended(EndReason::Budget)
    );
    let until = (NOW / 1_000 + 7_200) * 1_000;
    assert_eq!(l.refused_until().1, until);
    let mut later = wall();
    later.reset = Some(NOW / 1_000 + 90_000);
    assert!(!l.try_activate(&later, until - 1));
    assert!(l.try_activate(&later, until));
    // Without an announced reset: at most eight days.
    let mut l = active();
    on(&mut l, 429, &h(&[("slow-status", "budget_exhausted")]), NOW);
    assert_eq!(l.refused_until().1, NOW + 8 * 24 * 3_600_000);
}

#[test]
fn a_wall_without_a_lane_status_ends_it_and_a_burst_429_does_not() {
    let mut l = active();
    let weekly = h(&[
        ("status", "rejected"),
        ("representative-claim", "seven_day"),
    ]);
    assert_eq!(
        on(&mut l, 429, &weekly, NOW),
        Decision::Ended(EndReason::Wall)
    );
    let mut l = active();
    assert_eq!(on(&mut l, 429, &Unified::default(), NOW), Decision::None);
    assert!(l.active_until(NOW).is_some());
}

#[test]
fn a_success_shows_the_window_rolled_over_or_extra_usage() {
    let mut l = active();
    let rolled = (RESET_S + 60).to_string();
    let d = on(&mut l, 200, &h(&[("5h-reset", &rolled)]), NOW);
    assert_eq!(d, Decision::Ended(EndReason::Reset));
    let mut l = active();
    let early = (RESET_S + 59).to_string();
    assert_eq!(
        on(&mut l, 200, &h(&[("5h-reset", &early)]), NOW),
        Decision::None
    );
    let extra = h(&[("slow-status", "ineligible"), ("overage-in-use", "true")]);
    assert_eq!(
        on(&mut l, 200, &extra, NOW),
        Decision::Ended(EndReason::ExtraUsage)
    );
}

#[test]
fn a_sibling_that_raced_the_activation_joins_the_lane() {
    let mut l = active();
    let mut w = Waits::default();
    let d = l.handle(LANE, answer(429, &wall(), false), NOW, &mut w, None, 0.5);
    assert_eq!(d, retry(0, Via::LowPriorityAccepted));
    assert!(l.active_until(NOW).is_some(), "the lane survives");
    let ok = h(&[("slow-status", "active")]);
    let d = l.handle(LANE, answer(200, &ok, false), NOW, &mut w, None, 0.5);
    assert_eq!(d, Decision::None);
    assert_eq!(l.served, 0, "not counted");
    let d = l.handle(LANE, answer(429, &wall(), true), NOW, &mut w, None, 0.5);
    assert_eq!(d, Decision::Ended(EndReason::Wall), "sent with the header");
}

#[test]
fn each_connection_has_its_own_lane_and_an_operator_can_end_it() {
    let (mut a, b) = (active(), Lane::default());
    let mut b = b;
    assert_eq!(b.active_until(NOW), None);
    a.end(EndReason::Operator, NOW);
    assert_eq!(a.last_end, Some((EndReason::Operator, NOW)));
    assert!(
        a.try_activate(&wall(), NOW),
        "no cool-off after an operator's end"
    );
}
