//! The `anthropic-ratelimit-unified-*` response headers a Claude subscription (OAuth) account
//! is answered with, read into plain data. Names are matched case-insensitively; a number must
//! be finite and not negative, else it is absent; an offer other than `treatment` or `control`
//! is absent; a slow status Ringside does not know reads as `Unrecognized`.

/// The request header that puts a request in the low-priority lane.
pub const SLOW_HEADER: (&str, &str) = ("anthropic-usage-limit", "slow");

const PREFIX: &str = "anthropic-ratelimit-unified-";

/// The slow lane's offer on a usage-wall answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    Treatment,
    Control,
}

/// What the lane's `slow-status` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowStatus {
    Active,
    NotNeeded,
    SlotBusy,
    WeeklyLimit,
    BudgetExhausted,
    Ineligible,
    Off,
    Unrecognized,
}

impl SlowStatus {
    fn parse(v: &str) -> SlowStatus {
        match v.trim() {
            "active" => SlowStatus::Active,
            "not_needed" => SlowStatus::NotNeeded,
            "slot_busy" => SlowStatus::SlotBusy,
            "weekly_limit" => SlowStatus::WeeklyLimit,
            "budget_exhausted" => SlowStatus::BudgetExhausted,
            "ineligible" => SlowStatus::Ineligible,
            "off" => SlowStatus::Off,
            _ => SlowStatus::Unrecognized,
        }
    }
}

/// The unified rate-limit headers of one answer (every field absent when not sent).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unified {
    /// `status`: `rejected` is the usage wall.
    pub status: Option<String>,
    /// `reset`: when the five-hour window resets (epoch seconds).
    pub reset: Option<u64>,
    pub reset_5h: Option<u64>,
    pub reset_7d: Option<u64>,
    /// `representative-claim`: which window the wall is (`five_hour`, `seven_day`, …).
    pub claim: Option<String>,
    pub overage_status: Option<String>,
    pub overage_in_use: Option<bool>,
    pub slow_offer: Option<Offer>,
    pub slow_status: Option<SlowStatus>,
    /// Seconds.
    pub slow_retry_after: Option<f64>,
    /// Seconds.
    pub slow_max_wait: Option<f64>,
    /// 0 … 1.
    pub slow_budget_utilization: Option<f64>,
    /// Epoch seconds.
    pub slow_budget_reset: Option<u64>,
}

fn number(v: &str) -> Option<f64> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
}

impl Unified {
    /// Read the headers from `(name, value)` pairs (a response head's, or a test's list).
    pub fn read<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Unified {
        let mut u = Unified::default();
        for (name, value) in headers {
            let Some(prefix) = name.get(..PREFIX.len()) else {
                continue;
            };
            if !prefix.eq_ignore_ascii_case(PREFIX) {
                continue;
            }
            let field = name[PREFIX.len()..].to_ascii_lowercase();
            let secs = || number(value).map(|n| n as u64);
            match field.as_str() {
                "status" => u.status = Some(value.trim().to_string()),
                "reset" => u.reset = secs(),
                "5h-reset" => u.reset_5h = secs(),
                "7d-reset" => u.reset_7d = secs(),
                "representative-claim" => u.claim = Some(value.trim().to_string()),
                "overage-status" => u.overage_status = Some(value.trim().to_string()),
                "overage-in-use" => {
                    u.overage_in_use = match value.trim() {
                        "true" => Some(true),
                        "false" => Some(false),
                        _ => None,
                    }
                }
                "slow-offer" => {
                    u.slow_offer = match value.trim() {
                        "treatment" => Some(Offer::Treatment),
                        "control" => Some(Offer::Control),
                        _ => None,
                    }
                }
                "slow-status" => u.slow_status = Some(SlowStatus::parse(value)),
                "slow-retry-after" => u.slow_retry_after = number(value),
                "slow-max-wait" => u.slow_max_wait = number(value),
                "slow-budget-utilization" => u.slow_budget_utilization = number(value),
                "slow-budget-reset" => u.slow_budget_reset = secs(),
                _ => {}
            }
        }
        u
    }

    /// Whether this answer is at the usage wall: `status: rejected`, or a slow offer made.
    pub fn at_wall(&self) -> bool {
        self.status.as_deref() == Some("rejected") || self.slow_offer.is_some()
    }

    /// Whether any unified header that names the wall was sent (a 429 without them is an
    /// ordinary burst limit).
    pub fn names_the_wall(&self) -> bool {
        self.claim.is_some() || self.overage_status.is_some()
    }

    /// The announced five-hour reset: `reset`, else `5h-reset`.
    pub fn window_reset(&self) -> Option<u64> {
        self.reset.or(self.reset_5h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_case_insensitively_and_bad_values_are_absent() {
        let u = Unified::read([
            ("Anthropic-Ratelimit-Unified-Status", "rejected"),
            ("anthropic-ratelimit-unified-reset", "1800000000"),
            ("ANTHROPIC-RATELIMIT-UNIFIED-SLOW-OFFER", "treatment"),
            ("anthropic-ratelimit-unified-slow-status", "slot_busy"),
            ("anthropic-ratelimit-unified-slow-retry-after", "12.5"),
            ("anthropic-ratelimit-unified-slow-max-wait", "-3"),
            ("anthropic-ratelimit-unified-slow-budget-utilization", "NaN"),
            ("anthropic-ratelimit-unified-overage-in-use", "yes"),
            ("content-type", "application/json"),
        ]);
        assert_eq!(u.status.as_deref(), Some("rejected"));
        assert_eq!(u.reset, Some(1_800_000_000));
        assert_eq!(u.slow_offer, Some(Offer::Treatment));
        assert_eq!(u.slow_status, Some(SlowStatus::SlotBusy));
        assert_eq!(u.slow_retry_after, Some(12.5));
        assert_eq!(u.slow_max_wait, None, "negative");
        assert_eq!(u.slow_budget_utilization, None, "not finite");
        assert_eq!(u.overage_in_use, None);
        assert!(u.at_wall());
        let bogus = Unified::read([
            ("anthropic-ratelimit-unified-slow-offer", "maybe"),
            ("anthropic-ratelimit-unified-slow-status", "sleeping"),
        ]);
        assert_eq!(bogus.slow_offer, None);
        assert_eq!(bogus.slow_status, Some(SlowStatus::Unrecognized));
        assert_eq!(Unified::read([]).slow_status, None);
        assert!(!Unified::read([]).at_wall());
    }
}
