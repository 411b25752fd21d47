//! The low-priority lane of one Claude subscription account (`low_priority_lane = true`): at
//! the five-hour usage wall Anthropic may offer to keep serving the account at lower priority.
//! Accepting means retrying the same account at once with `anthropic-usage-limit: slow`, and
//! sending that header on every request of the account while the lane lasts; a busy slot or a
//! 529 is waited out (its hint, ±30 % jitter, within the request's own budget); the lane ends
//! for the reasons the provider gives, at the announced reset (plus a minute), or when waiting
//! would outlast its cap, and only then does the 429 reach the ordinary cooldown path. An
//! account on the lane is never cooled.
//!
//! Plain data on a manual clock: the caller gives the time and the random draw, owns the
//! per-request wait record, and performs the limit reset (`reset.rs`) when asked to.

use super::headers::{Claim, Offer, SlowStatus, Unified};

/// The slot retry-after when the provider gives none, and its clamp.
pub const DEFAULT_RETRY_AFTER_MS: u64 = 20_000;
const RETRY_AFTER_CLAMP_MS: (u64, u64) = (5_000, 600_000);
/// The longest a request waits on the lane when the provider says nothing, and its clamp.
pub const DEFAULT_MAX_WAIT_MS: u64 = 20 * 60_000;
const MAX_WAIT_CLAMP_MS: (u64, u64) = (60_000, 6 * 3_600_000);
/// Every wait is spread by this much either way.
const JITTER: f64 = 0.3;
/// The lane ends this long after the announced reset, if nothing ended it before.
pub const RESET_GRACE_MS: u64 = 60_000;
/// A success whose five-hour reset is this much past the lane's: the window rolled over.
const ROLLOVER_TOLERANCE_S: u64 = 60;
/// After giving up on the maximum wait, the lane is not accepted again for this long.
const COOL_OFF_MS: u64 = 10 * 60_000;
/// "Budget spent" is remembered until the announced reset, at most this long.
const BUDGET_MEMORY_CAP_MS: u64 = 8 * 24 * 3_600_000;
/// A request's waits stop this far short of its own deadline.
pub const SAFETY_MARGIN_MS: u64 = 5_000;

/// Why the lane ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The announced reset came (plus the grace), or a success showed the window rolled over.
    Reset,
    /// The weekly limit is reached too.
    Weekly,
    /// The lane's own budget is spent (remembered until its reset).
    Budget,
    /// The provider turned the lane off.
    Off,
    Ineligible,
    /// A wall answer without a lane status: the lane no longer holds.
    Wall,
    /// Waiting would have outlasted the cap (then 10 minutes before accepting again).
    MaxWait,
    /// Extra usage (overage) is being billed instead.
    ExtraUsage,
    Operator,
}

impl EndReason {
    /// Every reason, in the order of their counters.
    pub const ALL: [EndReason; 9] = [
        EndReason::Reset,
        EndReason::Weekly,
        EndReason::Budget,
        EndReason::Off,
        EndReason::Ineligible,
        EndReason::Wall,
        EndReason::MaxWait,
        EndReason::ExtraUsage,
        EndReason::Operator,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Reset => "reset",
            EndReason::Weekly => "weekly",
            EndReason::Budget => "budget",
            EndReason::Off => "off",
            EndReason::Ineligible => "ineligible",
            EndReason::Wall => "wall",
            EndReason::MaxWait => "max_wait",
            EndReason::ExtraUsage => "extra_usage",
            EndReason::Operator => "operator",
        }
    }

    pub fn index(self) -> usize {
        EndReason::ALL.iter().position(|&r| r == self).unwrap_or(0)
    }
}

/// Why a request is sent to the same account again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    LimitReset,
    LowPriorityAccepted,
    SlotBusy,
    CapacityBusy,
    /// Not the lane's: an OAuth account's access token was refreshed after a 401.
    TokenRefreshed,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::LimitReset => "limit-reset",
            Via::LowPriorityAccepted => "low-priority-accepted",
            Via::SlotBusy => "slot-busy",
            Via::CapacityBusy => "capacity-busy",
            Via::TokenRefreshed => "token-refreshed",
        }
    }
}

/// What to do with an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing for the lane: the answer goes on as usual.
    None,
    /// At the wall with the weekly reset opted in: claim it (`reset.rs`), then call
    /// [`Lane::after_limit_reset`].
    TryLimitReset,
    /// Send the request to the same account again after `delay_ms`.
    Retry { delay_ms: u64, via: Via },
    /// The lane ended; the answer goes on to the ordinary path.
    Ended(EndReason),
}

/// A connection's opt-ins (both off by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptIn {
    pub low_priority_lane: bool,
    pub auto_limit_reset: bool,
}

impl OptIn {
    pub fn any(self) -> bool {
        self.low_priority_lane || self.auto_limit_reset
    }
}

/// One answer as the lane sees it.
#[derive(Clone, Copy, Debug)]
pub struct Answer<'a> {
    pub status: u16,
    pub unified: &'a Unified,
    /// The request was sent with the slow header.
    pub sent_slow: bool,
}

/// One request's waits on the lane: from its first wait after acceptance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waits {
    first_at_ms: Option<u64>,
    pub attempts: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Active {
    resets_at_s: u64,
    accepted_at_ms: u64,
}

/// One account's lane.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    active: Option<Active>,
    pub retry_after_ms: u64,
    pub max_wait_ms: u64,
    /// Served on the lane, and served at standard priority while it was on.
    pub served: u64,
    pub served_standard: u64,
    /// The provider's last word on how much of the lane's budget is used (0 … 1).
    pub budget_utilization: Option<f64>,
    cooling_off_until_ms: u64,
    budget_spent_until_ms: u64,
    /// The last end and when.
    pub last_end: Option<(EndReason, u64)>,
}

impl Default for Lane {
    fn default() -> Self {
        Lane {
            active: None,
            retry_after_ms: DEFAULT_RETRY_AFTER_MS,
            max_wait_ms: DEFAULT_MAX_WAIT_MS,
            served: 0,
            served_standard: 0,
            budget_utilization: None,
            cooling_off_until_ms: 0,
            budget_spent_until_ms: 0,
            last_end: None,
        }
    }
}

/// The wait ceiling of a request with `left_ms` of its budget left (none: unbounded).
pub fn wait_ceiling(left_ms: Option<u64>) -> Option<i64> {
    left_ms.map(|l| l as i64 - SAFETY_MARGIN_MS as i64)
}

impl Lane {
    /// The lane's announced reset (epoch seconds) while it is on, after the lazy expiry.
    pub fn active_until(&mut self, now_ms: u64) -> Option<u64> {
        self.expire(now_ms);
        self.active.map(|a| a.resets_at_s)
    }

    /// When the lane was accepted, while it is on.
    pub fn accepted_at(&self) -> Option<u64> {
        self.active.map(|a| a.accepted_at_ms)
    }

    /// Until when the lane is refused after a `max_wait` end, and after a spent budget.
    pub fn refused_until(&self) -> (u64, u64) {
        (self.cooling_off_until_ms, self.budget_spent_until_ms)
    }

    fn expire(&mut self, now_ms: u64) {
        if let Some(a) = self.active
            && now_ms >= (a.resets_at_s * 1_000).saturating_add(RESET_GRACE_MS)
        {
            self.end(EndReason::Reset, now_ms);
        }
    }

    /// End the lane (an operator's, or the provider's reason).
    pub fn end(&mut self, reason: EndReason, now_ms: u64) {
        self.active = None;
        self.served = 0;
        self.served_standard = 0;
        if reason == EndReason::MaxWait {
            self.cooling_off_until_ms = now_ms + COOL_OFF_MS;
        }
        self.last_end = Some((reason, now_ms));
    }

    /// Accept the slow offer of a wall answer, if it may be: a `treatment` offer, a reset
    /// announced in the future, no spent budget and no cool-off. Accepting again is a no-op.
    pub fn try_activate(&mut self, u: &Unified, now_ms: u64) -> bool {
        self.expire(now_ms);
        let resets = u.window_reset().filter(|&s| s * 1_000 > now_ms);
        let allowed = self.active.is_none()
            && u.slow_offer == Some(Offer::Treatment)
            && now_ms >= self.budget_spent_until_ms
            && now_ms >= self.cooling_off_until_ms;
        let (true, Some(resets_at_s)) = (allowed, resets) else {
            return false;
        };
        self.retry_after_ms = DEFAULT_RETRY_AFTER_MS;
        self.max_wait_ms = DEFAULT_MAX_WAIT_MS;
        self.hints(u);
        self.served = 0;
        self.served_standard = 0;
        self.active = Some(Active {
            resets_at_s,
            accepted_at_ms: now_ms,
        });
        true
    }

    fn hints(&mut self, u: &Unified) {
        let clamp = |s: f64, (lo, hi): (u64, u64)| ((s * 1_000.0).round() as u64).clamp(lo, hi);
        if let Some(s) = u.slow_retry_after {
            self.retry_after_ms = clamp(s, RETRY_AFTER_CLAMP_MS);
        }
        if let Some(s) = u.slow_max_wait {
            self.max_wait_ms = clamp(s, MAX_WAIT_CLAMP_MS);
        }
        if u.slow_budget_utilization.is_some() {
            self.budget_utilization = u.slow_budget_utilization;
        }
    }

    /// What to do with an answer of the account. `ceiling_ms`: the request's budget left less
    /// the safety margin ([`wait_ceiling`]); `r`: a uniform draw in [0, 1] for the jitter.
    pub fn handle(
        &mut self,
        opt: OptIn,
        a: Answer<'_>,
        now_ms: u64,
        waits: &mut Waits,
        ceiling_ms: Option<i64>,
        r: f64,
    ) -> Decision {
        self.expire(now_ms);
        if self.active.is_none() {
            let opted = opt.low_priority_lane || opt.auto_limit_reset;
            if a.status != 429 || !opted || !a.unified.at_wall() {
                return Decision::None;
            }
            let blames_five_hour = a.unified.claim.is_none_or(|c| c == Claim::FiveHour);
            if opt.auto_limit_reset && blames_five_hour {
                return Decision::TryLimitReset;
            }
            return self.accept(opt, a.unified, now_ms);
        }
        if !a.sent_slow {
            // A sibling sent before the lane was accepted: it joins the lane now.
            return if a.status == 429 && a.unified.at_wall() {
                Decision::Retry {
                    delay_ms: 0,
                    via: Via::LowPriorityAccepted,
                }
            } else {
                Decision::None
            };
        }
        self.hints(a.unified);
        match a.status {
            429 => self.on_429(a.unified, now_ms, waits, ceiling_ms, r),
            529 if matches!(a.unified.slow_status, None | Some(SlowStatus::Active)) => {
                self.wait(Via::CapacityBusy, now_ms, waits, ceiling_ms, r)
            }
            _ => self.on_other(a.unified, now_ms, waits),
        }
    }

    /// After the limit reset was tried: granted, retry at full speed; else the lane, if opted.
    pub fn after_limit_reset(
        &mut self,
        granted: bool,
        opt: OptIn,
        u: &Unified,
        now_ms: u64,
    ) -> Decision {
        if granted {
            return Decision::Retry {
                delay_ms: 0,
                via: Via::LimitReset,
            };
        }
        self.accept(opt, u, now_ms)
    }

    fn accept(&mut self, opt: OptIn, u: &Unified, now_ms: u64) -> Decision {
        if opt.low_priority_lane && self.try_activate(u, now_ms) {
            Decision::Retry {
                delay_ms: 0,
                via: Via::LowPriorityAccepted,
            }
        } else {
            Decision::None
        }
    }

    fn on_429(
        &mut self,
        u: &Unified,
        now_ms: u64,
        waits: &mut Waits,
        ceiling_ms: Option<i64>,
        r: f64,
    ) -> Decision {
        let overage = u.overage_in_use == Some(true);
        let reason = match u.slow_status {
            Some(SlowStatus::Ineligible) if overage => Some(EndReason::ExtraUsage),
            Some(SlowStatus::WeeklyLimit) => Some(EndReason::Weekly),
            Some(SlowStatus::BudgetExhausted) => {
                let announced = u.slow_budget_reset.or(u.reset_7d).map(|s| s * 1_000);
                let cap = now_ms + BUDGET_MEMORY_CAP_MS;
                self.budget_spent_until_ms = announced.map_or(cap, |t| t.min(cap));
                Some(EndReason::Budget)
            }
            Some(SlowStatus::Off) => Some(EndReason::Off),
            Some(SlowStatus::Ineligible) => Some(EndReason::Ineligible),
            Some(SlowStatus::SlotBusy) => {
                return self.wait(Via::SlotBusy, now_ms, waits, ceiling_ms, r);
            }
            None if u.names_the_wall() => Some(EndReason::Wall),
            _ => None,
        };
        match reason {
            Some(reason) => {
                self.end(reason, now_ms);
                Decision::Ended(reason)
            }
            None => Decision::None,
        }
    }

    fn on_other(&mut self, u: &Unified, now_ms: u64, waits: &mut Waits) -> Decision {
        let resets_at = self.active.map_or(0, |a| a.resets_at_s);
        if u.reset_5h
            .is_some_and(|r| r >= resets_at + ROLLOVER_TOLERANCE_S)
        {
            self.end(EndReason::Reset, now_ms);
            return Decision::Ended(EndReason::Reset);
        }
        match u.slow_status {
            Some(SlowStatus::Active) => {
                self.served += 1;
                *waits = Waits::default();
            }
            Some(SlowStatus::NotNeeded) => {
                self.served_standard += 1;
                *waits = Waits::default();
            }
            Some(SlowStatus::Ineligible) if u.overage_in_use == Some(true) => {
                self.end(EndReason::ExtraUsage, now_ms);
                return Decision::Ended(EndReason::ExtraUsage);
            }
            _ => {}
        }
        Decision::None
    }

    /// Wait out a busy slot or capacity, or give up when that would outlast the cap.
    fn wait(
        &mut self,
        via: Via,
        now_ms: u64,
        waits: &mut Waits,
        ceiling_ms: Option<i64>,
        r: f64,
    ) -> Decision {
        let first = *waits.first_at_ms.get_or_insert(now_ms);
        let waited = now_ms.saturating_sub(first);
        let cap = match ceiling_ms {
            Some(c) => self.max_wait_ms.min(c.max(0) as u64),
            None => self.max_wait_ms,
        };
        if waited >= cap {
            self.end(EndReason::MaxWait, now_ms);
            return Decision::Ended(EndReason::MaxWait);
        }
        let spread = 1.0 + (2.0 * r.clamp(0.0, 1.0) - 1.0) * JITTER;
        let delay = (self.retry_after_ms as f64 * spread).round().max(0.0) as u64;
        waits.attempts += 1;
        Decision::Retry {
            delay_ms: delay.min(cap - waited),
            via,
        }
    }
}
