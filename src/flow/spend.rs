//! Spend per tenant: tokens and micro-dollars per UTC day and per UTC month, against the budgets
//! of `[[tenants]]`, across every connection, provider and core (a fallback or another key is
//! never a way around a tenant's budget). A fixed, lock-free table of atomics keyed by the
//! tenant's id, like the minute quotas (`flow::tenant`).
//!
//! Admission reserves the request's estimate on every budgeted period while what was spent and
//! reserved there is still under the budget (so a tenant's last request may end a little over
//! it, never a burst of requests); the request's end settles the reservation with what the
//! provider billed (`Hold::settle`), and a request that ends otherwise gives it back.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// A tenant's budgets (0 = none), tokens and micro-dollars.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Budget {
    pub tokens_per_day: u64,
    pub tokens_per_month: u64,
    pub micro_usd_per_day: u64,
    pub micro_usd_per_month: u64,
}

impl Budget {
    pub fn any(&self) -> bool {
        self.limits().iter().any(|(_, l)| *l > 0)
    }

    /// Each budget with its name, in the ledger's counter order.
    pub fn limits(&self) -> [(Limit, u64); 4] {
        [
            (Limit::TokensPerDay, self.tokens_per_day),
            (Limit::UsdPerDay, self.micro_usd_per_day),
            (Limit::TokensPerMonth, self.tokens_per_month),
            (Limit::UsdPerMonth, self.micro_usd_per_month),
        ]
    }
}

/// Which budget a refusal names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    TokensPerDay,
    UsdPerDay,
    TokensPerMonth,
    UsdPerMonth,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::TokensPerDay => "tokens_per_day",
            Limit::UsdPerDay => "usd_per_day",
            Limit::TokensPerMonth => "tokens_per_month",
            Limit::UsdPerMonth => "usd_per_month",
        }
    }

    pub fn monthly(self) -> bool {
        matches!(self, Limit::TokensPerMonth | Limit::UsdPerMonth)
    }
}

/// A budget is spent: which, and when its period starts again (ms from now).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exhausted {
    pub limit: Limit,
    pub retry_ms: u64,
}

const DAY_MS: u64 = 86_400_000;
const SLOTS: usize = 1024;

/// One tenant's counters: [day tokens, day micro-dollars, month tokens, month micro-dollars],
/// each under the period it counts (a day's or a month's number).
#[derive(Debug, Default)]
struct Ledger {
    id: AtomicU64,
    day: AtomicU64,
    month: AtomicU64,
    used: [AtomicU64; 4],
    /// Micro-dollars billed since the process started (never reset: the metric's counter).
    billed: AtomicU64,
}

/// The periods `now` (Unix ms) falls in: its day and its month (months since year 0).
pub fn periods(now: u64) -> (u64, u64) {
    let day = now / DAY_MS;
    let (y, m, _) = civil(day as i64);
    (day, (y as u64) * 12 + (m as u64 - 1))
}

/// When the day and the month of `now` end (Unix ms).
pub fn period_ends(now: u64) -> (u64, u64) {
    let day = now / DAY_MS;
    let (y, m, _) = civil(day as i64);
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (
        (day + 1) * DAY_MS,
        days_from_civil(ny, nm, 1) as u64 * DAY_MS,
    )
}

/// Year, month, day of a day number since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Every tenant's ledger, shared by the cores.
#[derive(Debug)]
pub struct Ledgers {
    slots: Box<[Ledger]>,
}

impl Default for Ledgers {
    fn default() -> Self {
        Ledgers {
            slots: (0..SLOTS).map(|_| Ledger::default()).collect(),
        }
    }
}

/// A request's reservation on its tenant's ledger, given back when dropped unsettled.
#[derive(Debug)]
pub struct Hold {
    ledgers: &'static Ledgers,
    slot: usize,
    day: u64,
    month: u64,
    /// What was reserved on each counter.
    reserved: [u64; 4],
}

/// What one request spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub tokens: u64,
    pub micro_usd: u64,
}

impl Spent {
    /// In the ledger's counter order: day tokens, day micro-dollars, month tokens, month
    /// micro-dollars.
    pub fn counters(self) -> [u64; 4] {
        [self.tokens, self.micro_usd, self.tokens, self.micro_usd]
    }
}

impl Ledgers {
    /// The slots a tenant's id may be in, in the order they are claimed.
    fn probe(id: u64) -> impl Iterator<Item = usize> {
        let start = id.max(1) as usize % SLOTS;
        (0..SLOTS).map(move |k| (start + k) % SLOTS)
    }

    /// The tenant's slot (claimed on first sight); `None` when the table is full.
    fn slot(&self, id: u64) -> Option<usize> {
        let id = id.max(1);
        Self::probe(id).find(
            |&i| match self.slots[i].id.compare_exchange(0, id, AcqRel, Acquire) {
                Ok(_) => true,
                Err(cur) => cur == id,
            },
        )
    }

    /// The tenant's ledger, if it has one: slots are never given back, so it lies before the
    /// first free slot of its probe (a request's warning reads it: a step or two, not a scan).
    fn find(&self, id: u64) -> Option<&Ledger> {
        let id = id.max(1);
        Self::probe(id)
            .map(|i| &self.slots[i])
            .take_while(|l| l.id.load(Acquire) != 0)
            .find(|l| l.id.load(Acquire) == id)
    }

    /// Start the slot's periods over where `now` is in new ones.
    fn roll(&self, i: usize, now: u64) -> (u64, u64) {
        let (day, month) = periods(now);
        let l = &self.slots[i];
        for (period, now_is, counters) in [(&l.day, day, [0, 1]), (&l.month, month, [2, 3])] {
            let seen = period.load(Acquire);
            if seen != now_is
                && period
                    .compare_exchange(seen, now_is, AcqRel, Acquire)
                    .is_ok()
            {
                for c in counters {
                    l.used[c].store(0, Release);
                }
            }
        }
        (day, month)
    }

    /// Reserve `estimate` for tenant `id` at `now` (Unix ms) while every budget it has is
    /// still under its limit; `Err` names the first one spent.
    pub fn reserve(
        &'static self,
        id: u64,
        budget: &Budget,
        estimate: Spent,
        now: u64,
    ) -> Result<Hold, Exhausted> {
        let Some(slot) = self.slot(id) else {
            // A full table: the tenant goes uncounted rather than refused.
            return Ok(self.empty_hold(0, now));
        };
        let (day, month) = self.roll(slot, now);
        let mut hold = Hold {
            ledgers: self,
            slot,
            day,
            month,
            reserved: [0; 4],
        };
        let ask = estimate.counters();
        for (c, (limit, max)) in budget.limits().into_iter().enumerate() {
            if max == 0 {
                continue;
            }
            let took = self.slots[slot].used[c]
                .fetch_update(AcqRel, Acquire, |n| (n < max).then_some(n + ask[c]));
            if took.is_err() {
                // (`hold` gives back what it reserved so far when dropped.)
                let (day_end, month_end) = period_ends(now);
                let end = if limit.monthly() { month_end } else { day_end };
                return Err(Exhausted {
                    limit,
                    retry_ms: end.saturating_sub(now),
                });
            }
            hold.reserved[c] = ask[c];
        }
        Ok(hold)
    }

    fn empty_hold(&'static self, slot: usize, now: u64) -> Hold {
        let (day, month) = periods(now);
        Hold {
            ledgers: self,
            slot,
            day,
            month,
            reserved: [0; 4],
        }
    }

    /// What tenant `id` spent in the periods of `now`: day tokens, day micro-dollars, month
    /// tokens, month micro-dollars (reservations of requests still running included).
    pub fn spent(&self, id: u64, now: u64) -> [u64; 4] {
        let Some(l) = self.find(id) else {
            return [0; 4];
        };
        let (day, month) = periods(now);
        let current = [day, day, month, month];
        let seen = [&l.day, &l.day, &l.month, &l.month].map(|p| p.load(Acquire));
        std::array::from_fn(|c| {
            if seen[c] == current[c] {
                l.used[c].load(Acquire)
            } else {
                0
            }
        })
    }

    /// The budget of `budget` tenant `id` has spent the most of, when that is 80 % or more:
    /// its share in percent (capped at 255).
    pub fn warning(&self, id: u64, budget: &Budget, now: u64) -> Option<(u8, Limit)> {
        let used = self.spent(id, now);
        budget
            .limits()
            .into_iter()
            .zip(used)
            .filter(|((_, max), _)| *max > 0)
            .map(|((limit, max), n)| ((n.saturating_mul(100) / max).min(255) as u8, limit))
            .max_by_key(|(p, _)| *p)
            .filter(|(p, _)| *p >= 80)
    }

    /// Micro-dollars tenant `id` was billed since the process started.
    pub fn billed(&self, id: u64) -> u64 {
        self.find(id).map_or(0, |l| l.billed.load(Acquire))
    }

    /// Start tenant `id`'s current periods over (the admin API's reset).
    pub fn reset(&self, id: u64) {
        if let Some(l) = self.find(id) {
            for c in &l.used {
                c.store(0, Release);
            }
        }
    }

    /// Put back what a restart found saved: the counters of the periods `now` is in.
    pub fn restore(&self, id: u64, day: u64, month: u64, used: [u64; 4], now: u64) {
        let Some(i) = self.slot(id) else {
            return;
        };
        let (today, this_month) = self.roll(i, now);
        let current = [day == today, month == this_month];
        let l = &self.slots[i];
        for (c, v) in used.into_iter().enumerate() {
            if current[c / 2] {
                l.used[c].fetch_max(v, AcqRel);
            }
        }
    }
}

impl Hold {
    /// What it reserved on each counter, and the periods (day, month) it reserved them in.
    pub fn reserved(&self) -> ([u64; 4], (u64, u64)) {
        (self.reserved, (self.day, self.month))
    }

    /// The request spent `actual`: it replaces the reservation (in the periods the request
    /// started in; a period that began since counts it as its own).
    pub fn settle(mut self, actual: Spent, now: u64) {
        self.ledgers.slots[self.slot]
            .billed
            .fetch_add(actual.micro_usd, AcqRel);
        self.replace(actual.counters(), now);
    }

    /// Take the reservation back and count `add` instead, on each counter: the reservation
    /// only where its period still runs (one that began since was started over without it).
    fn replace(&mut self, add: [u64; 4], now: u64) {
        let (day, month) = self.ledgers.roll(self.slot, now);
        let same = [day == self.day, month == self.month];
        let l = &self.ledgers.slots[self.slot];
        for (c, add) in add.into_iter().enumerate() {
            let back = if same[c / 2] { self.reserved[c] } else { 0 };
            if back != 0 || add != 0 {
                let _ = l.used[c].fetch_update(AcqRel, Acquire, |n| {
                    Some(n.saturating_sub(back).saturating_add(add))
                });
            }
        }
        self.reserved = [0; 4];
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.reserved != [0; 4] {
            self.replace([0; 4], crate::clock::unix_ms());
        }
    }
}

#[cfg(test)]
mod tests;
