//! The `anthropic-ratelimit-unified-*` headers a Claude subscription (OAuth) account is
//! answered with, read into plain data without allocating: the usage wall's status, windows,
//! overage and low-priority (slow) lane. Names are matched in any case; a number must be finite
//! and not negative, else it is absent; an offer other than `treatment` or `control` is absent;
//! a slow status Ringside does not know reads as `Unrecognized`. `RateLimits::read_with` reads
//! these in the same pass as the rest of the head's limits.

use super::parse::number;

const PREFIX: &str = "anthropic-ratelimit-unified-";

/// Every name [`Unified`] reads (for the head's names mask).
pub const HEADERS: [&str; 13] = [
    "anthropic-ratelimit-unified-status",
    "anthropic-ratelimit-unified-reset",
    "anthropic-ratelimit-unified-5h-reset",
    "anthropic-ratelimit-unified-7d-reset",
    "anthropic-ratelimit-unified-representative-claim",
    "anthropic-ratelimit-unified-overage-status",
    "anthropic-ratelimit-unified-overage-in-use",
    "anthropic-ratelimit-unified-slow-offer",
    "anthropic-ratelimit-unified-slow-status",
    "anthropic-ratelimit-unified-slow-retry-after",
    "anthropic-ratelimit-unified-slow-max-wait",
    "anthropic-ratelimit-unified-slow-budget-utilization",
    "anthropic-ratelimit-unified-slow-budget-reset",
];

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

/// Which window a wall is (`representative-claim`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    FiveHour,
    SevenDay,
    /// A window Ringside does not know (`seven_day_opus`, …): not the five-hour one.
    Other,
}

impl Claim {
    fn parse(v: &str) -> Claim {
        match v.trim() {
            "five_hour" => Claim::FiveHour,
            "seven_day" => Claim::SevenDay,
            _ => Claim::Other,
        }
    }
}

/// The unified rate-limit headers of one answer (every field absent when not sent).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Unified {
    /// `status: rejected`: the usage wall.
    pub rejected: bool,
    /// `reset`: when the five-hour window resets (epoch seconds).
    pub reset: Option<u64>,
    pub reset_5h: Option<u64>,
    pub reset_7d: Option<u64>,
    /// `representative-claim`: which window the wall is.
    pub claim: Option<Claim>,
    /// Whether `overage-status` was sent (its value does not change what Ringside does).
    pub overage_status_sent: bool,
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

impl Unified {
    /// Read `(name, value)` pairs (a test's list; a head is read by `RateLimits::read_with`).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Unified {
        let mut u = Unified::default();
        for (name, value) in pairs {
            u.take(name, value);
        }
        u
    }

    /// Take one header if it is one of [`HEADERS`]; whether it was.
    pub fn take(&mut self, name: &str, value: &str) -> bool {
        let Some(field) = name
            .get(..PREFIX.len())
            .filter(|p| p.eq_ignore_ascii_case(PREFIX))
            .and_then(|_| name.get(PREFIX.len()..))
        else {
            return false;
        };
        let is = |f: &str| field.eq_ignore_ascii_case(f);
        let secs = || number(value).map(|n| n as u64);
        if is("status") {
            self.rejected = value.trim() == "rejected";
        } else if is("reset") {
            self.reset = secs();
        } else if is("5h-reset") {
            self.reset_5h = secs();
        } else if is("7d-reset") {
            self.reset_7d = secs();
        } else if is("representative-claim") {
            self.claim = Some(Claim::parse(value));
        } else if is("overage-status") {
            self.overage_status_sent = true;
        } else if is("overage-in-use") {
            self.overage_in_use = match value.trim() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            };
        } else {
            return self.take_slow(field, value);
        }
        true
    }

    /// The slow lane's headers (`slow-*`).
    fn take_slow(&mut self, field: &str, value: &str) -> bool {
        let is = |f: &str| field.eq_ignore_ascii_case(f);
        if is("slow-offer") {
            self.slow_offer = match value.trim() {
                "treatment" => Some(Offer::Treatment),
                "control" => Some(Offer::Control),
                _ => None,
            };
        } else if is("slow-status") {
            self.slow_status = Some(SlowStatus::parse(value));
        } else if is("slow-retry-after") {
            self.slow_retry_after = number(value);
        } else if is("slow-max-wait") {
            self.slow_max_wait = number(value);
        } else if is("slow-budget-utilization") {
            self.slow_budget_utilization = number(value);
        } else if is("slow-budget-reset") {
            self.slow_budget_reset = number(value).map(|n| n as u64);
        } else {
            return false;
        }
        true
    }

    /// Whether this answer is at the usage wall: `status: rejected`, or a slow offer made.
    pub fn at_wall(&self) -> bool {
        self.rejected || self.slow_offer.is_some()
    }

    /// Whether any unified header that names the wall was sent (a 429 without them is an
    /// ordinary burst limit).
    pub fn names_the_wall(&self) -> bool {
        self.claim.is_some() || self.overage_status_sent
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
        let u = Unified::from_pairs([
            ("Anthropic-Ratelimit-Unified-Status", "rejected"),
            ("anthropic-ratelimit-unified-reset", "1800000000"),
            ("ANTHROPIC-RATELIMIT-UNIFIED-SLOW-OFFER", "treatment"),
            ("anthropic-ratelimit-unified-slow-status", "slot_busy"),
            ("anthropic-ratelimit-unified-slow-retry-after", "12.5"),
            ("anthropic-ratelimit-unified-slow-max-wait", "-3"),
            ("anthropic-ratelimit-unified-slow-budget-utilization", "NaN"),
            ("anthropic-ratelimit-unified-overage-in-use", "yes"),
            (
                "anthropic-ratelimit-unified-representative-claim",
                "seven_day_opus",
            ),
            ("content-type", "application/json"),
        ]);
        assert!(u.rejected);
        assert_eq!(u.reset, Some(1_800_000_000));
        assert_eq!(u.slow_offer, Some(Offer::Treatment));
        assert_eq!(u.slow_status, Some(SlowStatus::SlotBusy));
        assert_eq!(u.slow_retry_after, Some(12.5));
        assert_eq!(u.slow_max_wait, None, "negative");
        assert_eq!(u.slow_budget_utilization, None, "not finite");
        assert_eq!(u.overage_in_use, None);
        assert_eq!(u.claim, Some(Claim::Other));
        assert!(u.at_wall() && u.names_the_wall());
        let bogus = Unified::from_pairs([
            ("anthropic-ratelimit-unified-slow-offer", "maybe"),
            ("anthropic-ratelimit-unified-slow-status", "sleeping"),
            ("anthropic-ratelimit-unified-status", "allowed"),
        ]);
        assert_eq!(bogus.slow_offer, None);
        assert_eq!(bogus.slow_status, Some(SlowStatus::Unrecognized));
        assert!(!bogus.at_wall());
        assert_eq!(Unified::from_pairs([]), Unified::default());
    }

    #[test]
    fn every_listed_name_is_taken_and_nothing_else() {
        for name in HEADERS {
            assert!(Unified::default().take(name, "1"), "{name}");
            assert!(
                Unified::default().take(&name.to_ascii_uppercase(), "1"),
                "{name}"
            );
        }
        let mut u = Unified::default();
        for other in [
            "anthropic-ratelimit-unified-",
            "anthropic-ratelimit-unified-slow-",
            "anthropic-ratelimit-requests-limit",
            "x",
        ] {
            assert!(!u.take(other, "1"), "{other}");
        }
    }
}
