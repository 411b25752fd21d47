//! What a 429 rate limit cools: the model on that key first, the whole key once a second model
//! is limited too.
//!
//! OpenAI's and Anthropic's request and token limits are counted per model, so a plain 429 for
//! one model says nothing yet about another model on the same key: cooling the key would stall
//! a fallback to a second model that the key still serves (a route's usual shape). The first
//! such 429 locks (key, model) for the connection's own backoff (or the upstream's hint); a
//! 429 for another model while one is locked shows the limit is the key's, and cools the key.
//! Keys of one account share its per-model limits, so the lock covers them too. A key that
//! serves one model only has nothing else to keep serving: it cools as a whole. Quota walls,
//! credits and anything an operator or built-in rule scoped explicitly keep their scope, and
//! `resilience.rate_limit_scope = "connection"` restores a key-wide cooldown for every 429.

use super::Tables;
use super::classify::{Reason, Verdict};
use super::cooldown::cooldown_for;
use super::{Event, Settings, Site};
use serde::Serialize;

/// What a plain 429 (no rule named its scope) cools first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitScope {
    /// The model on the key; the key when a second model is limited too.
    #[default]
    Model,
    /// The whole key, whatever model was asked for.
    Connection,
}

impl RateLimitScope {
    pub fn parse(s: &str) -> Option<RateLimitScope> {
        match s {
            "model" => Some(RateLimitScope::Model),
            "connection" => Some(RateLimitScope::Connection),
            _ => None,
        }
    }
}

impl Tables {
    /// Whether this failure is a plain rate limit on one model of the key (see the module).
    pub(super) fn limits_one_model(&self, s: &Settings, site: Site, v: &Verdict, now: u64) -> bool {
        s.rate_limit_scope == RateLimitScope::Model
            && v.reason == Reason::RateLimited
            && v.status == 429
            && v.rule.is_none()
            && !site.model.is_empty()
            && !s.one_model.get(site.conn.index()).copied().unwrap_or(false)
            && !self.lockouts.rate_limited_other(site.conn, site.model, now)
    }

    /// Lock the model on the key and on its account's other keys.
    pub(super) fn cool_model(
        &mut self,
        s: &Settings,
        site: Site,
        v: &Verdict,
        now: u64,
        emit: &mut dyn FnMut(Event),
    ) {
        let profile = &s.providers[site.provider].cooldown;
        let siblings = s
            .account_siblings
            .get(site.conn.index())
            .map_or(&[][..], |v| &v[..]);
        for &conn in std::iter::once(&site.conn).chain(siblings) {
            let lock = self.lockouts.on_rate_limit(
                conn,
                site.model,
                now,
                s.lockout.reset_after_ms,
                |level| cooldown_for(v, level, now, profile),
            );
            if let Some(l) = lock {
                emit(Event::Lock(l));
            }
        }
    }
}

#[cfg(test)]
mod tests;
