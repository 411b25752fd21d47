use super::*;

fn ledgers() -> &'static Ledgers {
    Box::leak(Box::default())
}

/// 2026-12-05 12:00 UTC.
const NOON: u64 = 1_796_472_000_000;

#[test]
fn days_and_months_end_at_midnight_utc() {
    let (day, month) = periods(NOON);
    assert_eq!(day, NOON / DAY_MS);
    assert_eq!(month, 2026 * 12 + 11);
    let (day_end, month_end) = period_ends(NOON);
    assert_eq!(day_end - NOON, 12 * 3_600_000);
    // 2027-01-01 00:00 UTC.
    assert_eq!(month_end, 1_798_761_600_000);
    assert_eq!(periods(month_end).1, 2027 * 12);
    // A leap year's February: 29 days.
    let feb = days_from_civil(2028, 2, 1) as u64 * DAY_MS;
    assert_eq!(period_ends(feb).1 - feb, 29 * DAY_MS);
}

#[test]
fn the_request_that_reaches_the_budget_is_the_last_one_served() {
    let l = ledgers();
    let budget = Budget {
        tokens_per_day: 80,
        ..Budget::default()
    };
    let estimate = Spent {
        tokens: 10,
        micro_usd: 0,
    };
    let bill = Spent {
        tokens: 17,
        micro_usd: 40,
    };
    for _ in 0..5 {
        let hold = l.reserve(7, &budget, estimate, NOON).expect("under budget");
        hold.settle(bill, NOON);
    }
    assert_eq!(l.spent(7, NOON), [85, 200, 85, 200]);
    let refused = l.reserve(7, &budget, estimate, NOON).expect_err("spent");
    assert_eq!(refused.limit, Limit::TokensPerDay);
    assert_eq!(refused.retry_ms, 12 * 3_600_000);
    // Another tenant is not touched; the next day starts over.
    assert!(l.reserve(8, &budget, estimate, NOON).is_ok());
    assert!(l.reserve(7, &budget, estimate, NOON + DAY_MS).is_ok());
}

#[test]
fn an_unsettled_request_gives_its_reservation_back() {
    let l = ledgers();
    let budget = Budget {
        micro_usd_per_month: 1_000,
        ..Budget::default()
    };
    let estimate = Spent {
        tokens: 100,
        micro_usd: 900,
    };
    let hold = l.reserve(1, &budget, estimate, NOON).expect("first");
    assert_eq!(l.spent(1, NOON)[3], 900);
    drop(hold);
    assert_eq!(l.spent(1, NOON), [0; 4]);
    // Reservations of running requests count: a burst does not all pass.
    let a = l.reserve(1, &budget, estimate, NOON).expect("first");
    let b = l.reserve(1, &budget, estimate, NOON).expect("still under");
    let c = l.reserve(1, &budget, estimate, NOON);
    assert_eq!(c.map(drop).map_err(|e| e.limit), Err(Limit::UsdPerMonth));
    drop((a, b));
}

#[test]
fn many_threads_overshoot_by_at_most_one_request_each() {
    let l = ledgers();
    let budget = Budget {
        tokens_per_day: 1_000,
        ..Budget::default()
    };
    let served = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..500 {
                    let est = Spent {
                        tokens: 10,
                        micro_usd: 0,
                    };
                    if let Ok(h) = l.reserve(3, &budget, est, NOON) {
                        served.fetch_add(1, Relaxed);
                        h.settle(est, NOON);
                    }
                }
            });
        }
    });
    let spent = l.spent(3, NOON)[0];
    assert!((1_000..1_000 + 4 * 10).contains(&spent), "{spent}");
    assert_eq!(served.load(Relaxed) * 10, spent);
}

#[test]
fn reset_and_restore_put_a_tenants_periods_where_they_should_be() {
    let l = ledgers();
    let (day, month) = periods(NOON);
    l.restore(9, day, month, [50, 60, 70, 80], NOON);
    assert_eq!(l.spent(9, NOON), [50, 60, 70, 80]);
    // Yesterday's day counters are not today's; the month's still are.
    l.restore(10, day - 1, month, [50, 60, 70, 80], NOON);
    assert_eq!(l.spent(10, NOON), [0, 0, 70, 80]);
    l.reset(9);
    assert_eq!(l.spent(9, NOON), [0; 4]);
}
