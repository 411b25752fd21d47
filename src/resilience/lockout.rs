//! Model lockout: disable one model (or its quota family) on one connection without taking the
//! connection out of rotation. Opt-in for status-driven locks (reference defaults); a rule with
//! scope `model` always locks.
//!
//! Key shapes: a 429/403/402 locks the connection's quota family, a 404 the one model, any
//! other status the exact (provider, connection, model) triple. Entries live in a small vector
//! per connection: empty in the common case, so the hot-path check is one length test.

use super::classify::Reason;
use crate::ids::ConnId;
use serde::Serialize;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockScope {
    Family,
    Model,
    Exact,
}

impl LockScope {
    pub fn for_status(status: u16) -> LockScope {
        match status {
            402 | 403 | 429 => LockScope::Family,
            404 => LockScope::Model,
            _ => LockScope::Exact,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockoutSettings {
    pub enabled: bool,
    pub codes: Vec<u16>,
    pub base_ms: u64,
    pub max_ms: u64,
    pub max_steps: u32,
    pub exponential: bool,
    /// Escalation memory: a failure within this (plus the last cooldown) escalates.
    pub reset_after_ms: u64,
}

impl Default for LockoutSettings {
    fn default() -> Self {
        LockoutSettings {
            enabled: false,
            codes: vec![403, 404, 429, 502, 503, 504],
            base_ms: 120_000,
            max_ms: 1_800_000,
            max_steps: 10,
            exponential: true,
            reset_after_ms: 1_800_000,
        }
    }
}

/// One lock; also the replication event for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lock {
    pub conn: ConnId,
    /// The model id, or its quota family.
    pub key: Arc<str>,
    pub scope: LockScope,
    pub reason: Reason,
    pub until: u64,
    pub failures: u32,
    pub last_failure: u64,
    pub last_cooldown: u64,
}

/// Where a failure happened: the connection, the model, and the model's quota family.
#[derive(Clone, Copy, Debug)]
pub struct LockAt<'a> {
    pub conn: ConnId,
    pub model: &'a str,
    pub family: &'a str,
}

/// The lock table of one core.
#[derive(Debug, Default)]
pub struct Lockouts {
    by_conn: Vec<Vec<Lock>>,
    count: usize,
    /// The latest end of any lock merged in: nothing is locked from then on. Entries outlive
    /// their locks (escalation memory), so the request path's quick test is this, not `count`.
    latest_until: u64,
}

const MAX_ENTRIES: usize = 1000;

impl Lockouts {
    pub fn new(connections: usize) -> Self {
        Lockouts {
            by_conn: vec![Vec::new(); connections],
            count: 0,
            latest_until: 0,
        }
    }

    fn key_matches(l: &Lock, model: &str, family: &str) -> bool {
        match l.scope {
            LockScope::Family => &*l.key == family,
            LockScope::Model | LockScope::Exact => l.key.eq_ignore_ascii_case(model),
        }
    }

    /// The active lock with the most time left for this model on this connection.
    pub fn locked(&self, conn: ConnId, model: &str, family: &str, now: u64) -> Option<&Lock> {
        let list = self.by_conn.get(conn.index())?;
        if list.is_empty() {
            return None;
        }
        list.iter()
            .filter(|l| l.until > now && Self::key_matches(l, model, family))
            .max_by_key(|l| l.until)
    }

    /// Record a failure of `at`; returns the lock to replicate.
    pub fn on_failure(
        &mut self,
        s: &LockoutSettings,
        at: LockAt<'_>,
        scope: LockScope,
        reason: Reason,
        exact_ms: Option<(u64, bool)>,
        now: u64,
    ) -> Option<Lock> {
        let LockAt {
            conn,
            model,
            family,
        } = at;
        let key: &str = if scope == LockScope::Family {
            family
        } else {
            model
        };
        let failures = self.remembered(conn, scope, key, now, s.reset_after_ms)? + 1;
        let cooldown = match exact_ms {
            // An upstream header reset is authoritative; prose hints stay capped.
            Some((ms, true)) if ms > 0 => ms,
            Some((ms, false)) if ms > 0 => ms.min(s.max_ms),
            _ if s.exponential => {
                let steps = (failures - 1).min(s.max_steps).min(40);
                s.base_ms.saturating_mul(1 << steps).min(s.max_ms)
            }
            _ => s.base_ms.min(s.max_ms),
        };
        Some(self.put(conn, key, scope, reason, now, failures, cooldown))
    }

    /// The failures the entry `(scope, key)` of `conn` still remembers at `now` (its lock plus
    /// `memory_ms`); 0 without one. `None`: no such connection.
    fn remembered(
        &self,
        conn: ConnId,
        scope: LockScope,
        key: &str,
        now: u64,
        memory_ms: u64,
    ) -> Option<u32> {
        let prev = self
            .by_conn
            .get(conn.index())?
            .iter()
            .find(|l| l.scope == scope && &*l.key == key);
        Some(match prev {
            Some(p) if now <= p.last_failure + memory_ms + p.last_cooldown => p.failures,
            _ => 0,
        })
    }

    /// Lock `(conn, scope, key)` for `cooldown` from `now` (merged like any replica's lock);
    /// the lock to replicate.
    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        conn: ConnId,
        key: &str,
        scope: LockScope,
        reason: Reason,
        now: u64,
        failures: u32,
        cooldown: u64,
    ) -> Lock {
        let lock = Lock {
            conn,
            key: Arc::from(key),
            scope,
            reason,
            until: now + cooldown,
            failures,
            last_failure: now,
            last_cooldown: cooldown,
        };
        self.merge(lock.clone());
        lock
    }

    /// Whether a rate limit holds a model other than `model` locked on `conn`: a second model
    /// limited as well says the limit is the connection's, not one model's.
    pub fn rate_limited_other(&self, conn: ConnId, model: &str, now: u64) -> bool {
        self.by_conn.get(conn.index()).is_some_and(|list| {
            list.iter().any(|l| {
                l.until > now
                    && l.reason == Reason::RateLimited
                    && !l.key.eq_ignore_ascii_case(model)
            })
        })
    }

    /// Lock `model` on `conn` after a rate limit. `cooldown(level)` gives the lock's length and
    /// the level after it (the connection's own backoff formula); the level is remembered in
    /// the entry's failure count (`level + 1`) for `memory_ms` past the lock. `None` while the
    /// model is still locked: concurrent failures of a locked model do not stack.
    pub fn on_rate_limit(
        &mut self,
        conn: ConnId,
        model: &str,
        now: u64,
        memory_ms: u64,
        cooldown: impl FnOnce(u8) -> (u64, u8),
    ) -> Option<Lock> {
        let scope = LockScope::Family;
        // Concurrent failures of a locked model do not stack (a 404's or a 5xx's lock of the
        // model is another entry and does not count).
        let list = self.by_conn.get(conn.index())?;
        if list
            .iter()
            .any(|l| l.scope == scope && &*l.key == model && l.until > now)
        {
            return None;
        }
        let failures = self.remembered(conn, scope, model, now, memory_ms)?;
        let level = u8::try_from(failures.saturating_sub(1)).unwrap_or(u8::MAX);
        let (ms, next) = cooldown(level);
        let failures = u32::from(next) + 1;
        Some(self.put(conn, model, scope, Reason::RateLimited, now, failures, ms))
    }

    /// When the entry `lock` would merge into ends now, if there is one.
    pub fn until_of(&self, lock: &Lock) -> Option<u64> {
        self.by_conn
            .get(lock.conn.index())?
            .iter()
            .find(|l| l.scope == lock.scope && l.key == lock.key)
            .map(|l| l.until)
    }

    /// Every lock on record (ended ones too: their counts are escalation memory).
    pub fn iter(&self) -> impl Iterator<Item = &Lock> {
        self.by_conn.iter().flatten()
    }

    /// Merge a lock (from this core or another): the later end and the higher count win.
    pub fn merge(&mut self, lock: Lock) {
        let Some(list) = self.by_conn.get_mut(lock.conn.index()) else {
            return;
        };
        self.latest_until = self.latest_until.max(lock.until);
        match list
            .iter_mut()
            .find(|l| l.scope == lock.scope && l.key == lock.key)
        {
            Some(l) => {
                if lock.until > l.until {
                    l.until = lock.until;
                    l.reason = lock.reason;
                    l.last_cooldown = lock.last_cooldown;
                }
                l.failures = l.failures.max(lock.failures);
                l.last_failure = l.last_failure.max(lock.last_failure);
            }
            None => {
                list.push(lock);
                self.count += 1;
            }
        }
    }

    /// Whether a success on (conn, model) has anything to decay (checked before sending events).
    pub fn has_entry(&self, conn: ConnId, model: &str, family: &str) -> bool {
        self.by_conn
            .get(conn.index())
            .is_some_and(|l| !l.is_empty() && l.iter().any(|x| Self::key_matches(x, model, family)))
    }

    /// A success halves the failure count of every matching entry; at zero the entry goes.
    pub fn on_success(&mut self, conn: ConnId, model: &str, family: &str) {
        let Some(list) = self.by_conn.get_mut(conn.index()) else {
            return;
        };
        let before = list.len();
        list.retain_mut(|l| {
            if !Self::key_matches(l, model, family) {
                return true;
            }
            l.failures /= 2;
            l.failures > 0
        });
        self.count -= before - list.len();
    }

    /// Room for `connections` slots; the `fresh` ones start without locks.
    pub fn fit(&mut self, connections: usize, fresh: &[ConnId]) {
        if self.by_conn.len() < connections {
            self.by_conn.resize(connections, Vec::new());
        }
        for &i in fresh {
            self.clear(i, None);
        }
    }

    /// Operator re-enable: drop matching locks (`model` None: all of the connection's).
    pub fn clear(&mut self, conn: ConnId, model: Option<&str>) -> usize {
        let Some(list) = self.by_conn.get_mut(conn.index()) else {
            return 0;
        };
        let before = list.len();
        list.retain(|l| model.is_some_and(|m| !l.key.eq_ignore_ascii_case(m)));
        let n = before - list.len();
        self.count -= n;
        n
    }

    /// Drop expired entries whose escalation memory has lapsed; keep the table bounded.
    pub fn sweep(&mut self, s: &LockoutSettings, now: u64) {
        if self.count == 0 {
            return;
        }
        let over = self.count > MAX_ENTRIES;
        for list in &mut self.by_conn {
            let before = list.len();
            list.retain(|l| {
                l.until > now
                    || (!over && now <= l.last_failure + s.reset_after_ms + l.last_cooldown)
            });
            self.count -= before - list.len();
        }
    }

    /// The active locks of one connection.
    pub fn active_on(&self, conn: ConnId, now: u64) -> impl Iterator<Item = &Lock> {
        self.by_conn
            .get(conn.index())
            .into_iter()
            .flatten()
            .filter(move |l| l.until > now)
    }

    pub fn active(&self, now: u64) -> impl Iterator<Item = &Lock> {
        self.by_conn.iter().flatten().filter(move |l| l.until > now)
    }

    /// Whether some lock may still be active at `now` (false: none is).
    #[inline]
    pub fn any_active(&self, now: u64) -> bool {
        self.latest_until > now
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

#[cfg(test)]
mod tests;
