//! Connection cooldown: one credential out of rotation for a bounded time while the provider's
//! other credentials keep serving; terminal states (banned, expired, credits exhausted) until an
//! operator resets them.
//!
//! The state merges like a join-semilattice so that cores can replicate it by events in any
//! order: the latest failure record wins (ties: the higher level) and brings its `until` (equal
//! records: the later `until`), `ok_at` takes the maximum, a terminal status is sticky, and an
//! operator reset raises the epoch, which discards everything older.
//!
//! A cooldown for the provider's own trouble (a 5xx, an overload, a timeout, a refused
//! connection) ends as soon as a later success shows the key serving again, a probe's
//! (`proxy::prober`) or a request's: recovery follows the provider, not the timer.

use super::classify::{Reason, Verdict};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Terminal {
    Banned,
    Expired,
    CreditsExhausted,
}

/// How a connection escalates (its provider's profile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CooldownProfile {
    pub base_ms: u64,
    pub max_ms: u64,
    pub max_level: u8,
    /// Quota exhaustion without any reset hint.
    pub quota_ms: u64,
    /// Auth failures (401) tolerated before the connection is `expired`.
    pub auth_retries: u8,
    /// Consecutive rejections (403) before the connection is `banned`.
    pub rejections_to_ban: u8,
    /// Jitter on computed cooldowns, ± percent (`resilience.jitter`).
    pub jitter_pct: u8,
}

/// How widely a provider is in trouble (`resilience::Tables::trouble`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trouble {
    pub breaker_open: bool,
    /// Every usable key of the provider is down for the provider's trouble.
    pub every_key_down: bool,
}

/// The most recent failure of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Failure {
    pub at: u64,
    pub level: u8,
    pub status: u16,
    /// Why. A reason this build does not know (written by a newer fleet member, or a newer
    /// build into the store) reads as none: the cooldown's times still hold, not dropped
    /// with the whole state during a rolling upgrade.
    #[serde(default, deserialize_with = "super::reason::known_or_none")]
    pub reason: Option<Reason>,
    pub auth_failures: u8,
    pub rejections: u8,
    /// After the first byte went to the client (`Verdict::mid_stream`).
    #[serde(default)]
    pub mid_stream: bool,
    /// The upstream said how long to wait (a header's hint): its word, not a guess.
    #[serde(default)]
    pub hinted: bool,
}

/// One connection's resilience state; also the replication event (a full snapshot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ConnState {
    pub epoch: u32,
    /// Not usable before this (monotonic ms).
    pub until: u64,
    pub last: Failure,
    /// Last success (monotonic ms): clears level and counters of older failures.
    pub ok_at: u64,
    /// Last probe answer that lifted the cooldown (`proxy::prober`): ends it, but keeps the
    /// level, so a key that answers probes and fails requests backs off all the same.
    #[serde(default)]
    pub probe_ok_at: u64,
    pub terminal: Option<Terminal>,
}

impl ConnState {
    /// Backoff level in force (a later success cleared it).
    pub fn level(&self) -> u8 {
        if self.ok_at >= self.last.at {
            0
        } else {
            self.last.level
        }
    }

    fn counters(&self) -> (u8, u8) {
        if self.ok_at >= self.last.at {
            (0, 0)
        } else {
            (self.last.auth_failures, self.last.rejections)
        }
    }

    /// Whether the last failure is still on record (not cleared by a success).
    pub fn has_error(&self) -> bool {
        self.last.reason.is_some() && self.ok_at < self.last.at
    }

    /// A cooldown for the provider's own trouble, ended early by a later success.
    pub fn lifted(&self) -> bool {
        self.ok_at.max(self.probe_ok_at) >= self.last.at
            && self.last.reason.is_some_and(Reason::trips_breaker)
    }

    /// Whether a probe's answer may end this cooldown: it is for the provider's own trouble
    /// (5xx, overload, timeout, transport) and the trouble is the provider's as a whole: its
    /// breaker is open, or every key of it is down the same way before the first byte. A model
    /// list that answers says nothing about one key's or one model's trouble while the
    /// provider's other keys serve, nor about a stream cut after its first byte: those timers
    /// run. Nor does a probe overrule the provider's own `Retry-After`.
    pub fn probe_may_lift(&self, trouble: Trouble) -> bool {
        self.has_error()
            && !self.last.hinted
            && self.last.reason.is_some_and(Reason::trips_breaker)
            && (trouble.breaker_open || (trouble.every_key_down && !self.last.mid_stream))
    }

    /// Whether this key is down for the provider's own trouble met before the first byte.
    pub fn down_before_first_byte(&self, now: u64) -> bool {
        self.cooling(now)
            && self.last.reason.is_some_and(Reason::trips_breaker)
            && !self.last.mid_stream
    }

    /// When a probe may first lift this cooldown, probes `every_ms` apart: at once after a
    /// first failure, then later for each failure in a row (1, 3, 7 … probe spacings after
    /// it), so a key that answers probes but fails requests is tried less and less often.
    pub fn probe_due(&self, every_ms: u64) -> u64 {
        let steps = (1u64 << self.level().saturating_sub(1).min(10)) - 1;
        self.last.at.saturating_add(every_ms.saturating_mul(steps))
    }

    /// When the cooldown ends (0: it was lifted).
    pub fn cool_end(&self) -> u64 {
        if self.lifted() { 0 } else { self.until }
    }

    pub fn cooling(&self, now: u64) -> bool {
        self.cool_end() > now
    }

    /// Merge another replica's snapshot (idempotent, commutative).
    pub fn merge(&mut self, other: &ConnState) {
        if other.epoch < self.epoch {
            return;
        }
        if other.epoch > self.epoch {
            *self = ConnState {
                epoch: other.epoch,
                ..Default::default()
            };
        }
        self.ok_at = self.ok_at.max(other.ok_at);
        self.probe_ok_at = self.probe_ok_at.max(other.probe_ok_at);
        // `until` belongs to the failure it was computed for: a lifted cooldown's old end does
        // not outlast a newer, shorter one.
        let (theirs, ours) = (
            (other.last.at, other.last.level),
            (self.last.at, self.last.level),
        );
        if theirs > ours {
            self.last = other.last;
            self.until = other.until;
        } else if theirs == ours {
            self.until = self.until.max(other.until);
        }
        if self.terminal.is_none() {
            self.terminal = other.terminal;
        }
    }

    /// Record a failure judged by `v`; `None` when nothing changed (no event to send).
    pub fn on_failure(&mut self, v: &Verdict, now: u64, p: &CooldownProfile) -> Option<ConnState> {
        if self.terminal.is_some() {
            return None; // never overwritten by a transient failure
        }
        let (auth, rejections) = self.counters();
        let terminal = match v.reason {
            // Words of a message alone never end a connection (they may quote the client).
            Reason::Banned | Reason::CreditsExhausted if !v.lasting => None,
            Reason::Banned => Some(Terminal::Banned),
            Reason::CreditsExhausted => Some(Terminal::CreditsExhausted),
            Reason::AuthFailure if auth + 1 >= p.auth_retries => Some(Terminal::Expired),
            Reason::TokenRefreshFailed => Some(Terminal::Expired),
            Reason::Rejected if rejections + 1 >= p.rejections_to_ban => Some(Terminal::Banned),
            _ => None,
        };
        if terminal.is_none() && self.cooling(now) {
            // Anti-thundering-herd: concurrent failures of a cooling connection do not stack.
            return None;
        }
        let (cooldown, new_level) = cooldown_for(v, self.level(), now, p);
        self.last = Failure {
            at: now.max(self.last.at + 1).max(self.ok_at + 1),
            level: new_level,
            status: v.status,
            reason: Some(v.reason),
            // Consecutive: any other outcome in between starts the count again.
            auth_failures: if v.reason == Reason::AuthFailure {
                auth + 1
            } else {
                0
            },
            rejections: if v.reason == Reason::Rejected {
                rejections + 1
            } else {
                0
            },
            mid_stream: v.mid_stream,
            hinted: v.hint.is_some_and(|h| h.source.is_header()),
        };
        match terminal {
            Some(t) => self.terminal = Some(t),
            // (Not cooling here: an earlier end is over, or was lifted.)
            None => self.until = now + cooldown,
        }
        Some(*self)
    }

    /// Record a success; `None` when there was nothing to clear (the common case: no event).
    pub fn on_success(&mut self, now: u64) -> Option<ConnState> {
        if self.terminal.is_some() || self.ok_at >= self.last.at {
            return None;
        }
        self.ok_at = now.max(self.last.at);
        Some(*self)
    }

    /// A probe's answer lifts the cooldown (the caller checked `probe_may_lift`); `None` when
    /// it was lifted already.
    pub fn on_probe_ok(&mut self, now: u64) -> Option<ConnState> {
        if self.terminal.is_some() || self.lifted() {
            return None;
        }
        self.probe_ok_at = now.max(self.last.at);
        Some(*self)
    }

    /// Operator reset: a new epoch discards cooldowns and terminal states everywhere.
    pub fn reset(&mut self) -> ConnState {
        *self = ConnState {
            epoch: self.epoch + 1,
            ..Default::default()
        };
        *self
    }
}

/// How long a failure judged by `v` cools what failed, and the backoff level after it: a rule's
/// fixed cooldown, the upstream's hint, a quota wall's default, or `base · 2^level` (capped).
/// Shared by a connection's cooldown and a rate-limited model's (`rate_limit_scope`).
pub fn cooldown_for(v: &Verdict, level: u8, now: u64, p: &CooldownProfile) -> (u64, u8) {
    match (v.cooldown_ms, v.hint, v.reason) {
        (Some(ms), _, _) => (ms, 0),
        // The upstream's own reset is honoured as given; an assumed daily reset is capped.
        (None, Some(h), Reason::QuotaExhausted)
            if v.lasting && h.source != super::hints::HintSource::DailyReset =>
        {
            (h.ms, 0)
        }
        (None, Some(h), _) => (h.ms.min(p.max_ms), 0),
        (None, None, Reason::QuotaExhausted) if v.lasting => {
            (super::jitter::spread(p.quota_ms, p.jitter_pct, now), 0)
        }
        (None, None, _) => {
            let steps = u32::from(level.min(p.max_level));
            let ms = p
                .base_ms
                .saturating_mul(1u64 << steps.min(40))
                .min(p.max_ms);
            let ms = super::jitter::spread(ms, p.jitter_pct, now).min(p.max_ms);
            (ms, level.saturating_add(1).min(p.max_level))
        }
    }
}

#[cfg(test)]
mod tests;
