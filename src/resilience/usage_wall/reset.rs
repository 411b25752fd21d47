//! The weekly limit reset of a Claude subscription account (`auto_limit_reset = true`): at a
//! five-hour wall, ask the usage status whether the once-a-week reset is offered, claim it,
//! and retry at full speed. This is the memo around those two calls, plain data on a manual
//! clock: a reset granted in the last minute answers siblings without I/O, a "not before" time
//! keeps failed or refused attempts from repeating (15 minutes, a week once spent, or the time
//! the provider announces). The calls themselves, and one of them in flight per account at a
//! time, belong to the caller.

/// Siblings within this long after a granted reset are told it was granted.
const RECENT_MS: u64 = 60_000;
/// After a failure or a refusal, the next attempt waits this long.
const BACK_OFF_MS: u64 = 15 * 60_000;
/// Once spent, the reset is not tried again for this long (unless an earlier time is said).
const SPENT_MS: u64 = 7 * 24 * 3_600_000;
/// The usage status call's and the claim's time limits.
pub const STATUS_TIMEOUT_MS: u64 = 5_000;
pub const CLAIM_TIMEOUT_MS: u64 = 25_000;

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Granted to a sibling within the last minute: no call made.
    RecentReset,
    /// The "not before" time is still ahead: no call made.
    MemoSkip,
    /// The usage status could not be read.
    NoStatus,
    /// Not offered now (ineligible, the control arm, or used up).
    NotOffered,
    /// No organization to claim for.
    NoOrganization,
    RateLimited,
    AuthError,
    Error,
    /// The claim's own answers.
    Reset,
    AlreadyUsed,
    NotLimited,
    Ineligible,
    Unavailable,
}

impl Outcome {
    /// Whether the account may be retried at full speed.
    pub fn granted(self) -> bool {
        matches!(
            self,
            Outcome::RecentReset | Outcome::Reset | Outcome::NotLimited
        )
    }
}

/// The reset offer in the usage status (`juniper_tide`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Offer {
    pub eligible: bool,
    /// `control` or `reset`.
    pub arm: Option<String>,
    pub available: bool,
    /// Epoch seconds.
    pub next_available_at: Option<u64>,
    pub resets_per_week: u64,
}

impl Offer {
    /// From the usage status body: `None` when it has no readable offer (`eligible` must be a
    /// boolean).
    pub fn read(body: &serde_json::Value) -> Option<Offer> {
        let j = &body["juniper_tide"];
        let eligible = j["eligible"].as_bool()?;
        let at = &j["next_available_at"];
        let next_available_at = at.as_u64().or_else(|| {
            let t = humantime::parse_rfc3339_weak(at.as_str()?).ok()?;
            Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
        });
        Some(Offer {
            eligible,
            arm: j["arm"].as_str().map(str::to_string),
            available: j["available"].as_bool().unwrap_or(false),
            next_available_at,
            resets_per_week: j["resets_per_week"].as_u64().unwrap_or(1),
        })
    }

    pub fn offered(&self) -> bool {
        self.eligible && self.arm.as_deref() == Some("reset") && self.available
    }
}

/// One account's memo.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memo {
    recent_until_ms: u64,
    not_before_ms: u64,
    /// The last attempt's outcome and when.
    pub last: Option<(Outcome, u64)>,
}

impl Memo {
    /// Before any call: `Some` when the memo answers on its own.
    pub fn before_calls(&mut self, now_ms: u64) -> Option<Outcome> {
        let o = if now_ms < self.recent_until_ms {
            Outcome::RecentReset
        } else if now_ms < self.not_before_ms {
            Outcome::MemoSkip
        } else {
            return None;
        };
        self.last = Some((o, now_ms));
        Some(o)
    }

    /// "Not before": the announced time if it is ahead, else `now + fallback`.
    fn hold(&mut self, now_ms: u64, announced_s: Option<u64>, fallback_ms: u64) {
        self.not_before_ms = announced_s
            .map(|s| s * 1_000)
            .filter(|&t| t > now_ms)
            .unwrap_or(now_ms + fallback_ms);
    }

    fn ended(&mut self, o: Outcome, now_ms: u64) -> Outcome {
        self.last = Some((o, now_ms));
        o
    }

    /// After the usage status call: `Ok` when the reset is offered (go on to claim it).
    pub fn after_status(&mut self, now_ms: u64, offer: Option<&Offer>) -> Result<(), Outcome> {
        match offer {
            None => {
                self.hold(now_ms, None, BACK_OFF_MS);
                Err(self.ended(Outcome::NoStatus, now_ms))
            }
            Some(o) if !o.offered() => {
                self.hold(now_ms, o.next_available_at, BACK_OFF_MS);
                Err(self.ended(Outcome::NotOffered, now_ms))
            }
            Some(_) => Ok(()),
        }
    }

    /// No organization id in the config and none from the lookup.
    pub fn no_organization(&mut self, now_ms: u64) -> Outcome {
        self.hold(now_ms, None, BACK_OFF_MS);
        self.ended(Outcome::NoOrganization, now_ms)
    }

    /// After the claim: its HTTP status and body (`{"result": …}`), or `None` when the call
    /// failed (a throwing claim counts as an error).
    pub fn after_claim(
        &mut self,
        now_ms: u64,
        reply: Option<(u16, &serde_json::Value)>,
        next_available_at: Option<u64>,
    ) -> Outcome {
        let o = match reply {
            None => Outcome::Error,
            Some((429, _)) => Outcome::RateLimited,
            Some((401 | 403, _)) => Outcome::AuthError,
            Some((s, _)) if !(200..300).contains(&s) => Outcome::Error,
            Some((_, body)) => match body["result"].as_str() {
                Some("reset") => Outcome::Reset,
                Some("already_used") => Outcome::AlreadyUsed,
                Some("not_limited") => Outcome::NotLimited,
                Some("ineligible") => Outcome::Ineligible,
                _ => Outcome::Unavailable,
            },
        };
        let spent = o.granted() || o == Outcome::AlreadyUsed;
        self.hold(
            now_ms,
            next_available_at,
            if spent { SPENT_MS } else { BACK_OFF_MS },
        );
        if o.granted() {
            self.recent_until_ms = now_ms + RECENT_MS;
        }
        self.ended(o, now_ms)
    }
}
