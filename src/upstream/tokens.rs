//! OAuth access tokens that change at run time, one cell per connection slot, shared by the
//! cores. The environment seeds a cell (its refresh token and, if known, the expiry); a
//! refresh replaces the access token (and a rotated refresh token) and bumps the cell's
//! version, which each core compares with its own copy before a send: the send path reads one
//! atomic, and takes the cell's lock only after a refresh. One refresh is in flight per
//! connection; the request that leads it makes the call, the others wait for its outcome.
//! Refreshed tokens are kept in the store only sealed (`store::sealed`), under the digest of
//! the refresh token the environment gave, so that a new one from the operator wins.

use crate::config::{Connection, Secret};
use crate::ids::ConnId;
use crate::store::sealed::SealKey;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// An access token is refreshed this long before its expiry.
pub const REFRESH_AHEAD_MS: u64 = 5 * 60_000;
/// After a refresh that failed (not refused), the next waits this long: ahead of the expiry,
/// and after a 401.
const AHEAD_BACK_OFF_MS: u64 = 30_000;
const REFUSED_BACK_OFF_MS: u64 = 5_000;

/// How the last refresh ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refresh {
    Refreshed,
    /// The token endpoint refused the refresh token for good (revoked, rotated elsewhere).
    Rejected,
    /// The call failed or ran out of time: tried again by a later request.
    Failed,
}

/// New tokens from the token endpoint.
pub struct Fresh {
    pub access: String,
    /// A rotated refresh token, when the endpoint sent one.
    pub refresh: Option<String>,
    pub expires_at_ms: u64,
}

/// Whose turn it is to refresh.
pub enum Turn {
    /// This caller makes the call with this refresh token, then [`TokenCell::finish`].
    Lead(Secret),
    /// Another request's refresh is in flight.
    Follow,
    /// Nothing to do: the token is fresh, or was refreshed since it was used.
    Fresh,
    /// The refresh token was refused for good: the reason.
    Dead(String),
    /// A refresh failed a moment ago: not again yet.
    Later,
}

#[derive(Default)]
struct State {
    /// The digest of the environment's refresh token this state grew from.
    origin: Option<[u8; 32]>,
    access: Option<Arc<str>>,
    refresh: Option<Secret>,
    refreshing: bool,
    last: Option<(Refresh, u64)>,
    refreshes: u64,
    failures: u64,
    dead: Option<String>,
}

/// One connection's tokens.
#[derive(Default)]
pub struct TokenCell {
    /// Bumped by every refresh (0: the environment's access token is current).
    version: AtomicU64,
    /// Unix ms; 0 when unknown.
    expires_at_ms: AtomicU64,
    state: Mutex<State>,
}

/// What the admin API shows (never a token).
#[derive(serde::Serialize)]
pub struct View {
    pub expires_at_ms: Option<u64>,
    pub refreshing: bool,
    pub refreshes: u64,
    pub failures: u64,
    pub last: Option<(Refresh, u64)>,
    pub dead: Option<String>,
}

impl TokenCell {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The current access token (`None`: the environment's) and its version.
    pub fn current(&self) -> (u64, Option<Arc<str>>) {
        let st = self.lock();
        (self.version(), st.access.clone())
    }

    /// Whether the access token is within [`REFRESH_AHEAD_MS`] of its known expiry.
    pub fn due(&self, now_unix_ms: u64) -> bool {
        let at = self.expires_at_ms.load(Ordering::Relaxed);
        at != 0 && now_unix_ms.saturating_add(REFRESH_AHEAD_MS) >= at
    }

    /// Seed the cell from the connection's environment, unless it already grew from the same
    /// refresh token. `stored`: what the store kept for it (the sealed record's plain JSON).
    pub fn seed(&self, oauth: &crate::config::OAuthRefresh, stored: Option<serde_json::Value>) {
        let origin = crate::secret::digest(oauth.refresh.expose().as_bytes());
        let mut st = self.lock();
        if st.origin == Some(origin) {
            return;
        }
        *st = State {
            origin: Some(origin),
            refresh: Some(oauth.refresh.clone()),
            ..State::default()
        };
        let mut expires = oauth.expires_at_ms.unwrap_or(0);
        if let Some(v) = stored
            && let (Some(access), Some(refresh)) = (v["access"].as_str(), v["refresh"].as_str())
        {
            st.access = Some(Arc::from(access));
            st.refresh = Some(Secret::new(refresh));
            expires = v["expires_at_ms"].as_u64().unwrap_or(0);
        }
        self.expires_at_ms.store(expires, Ordering::Relaxed);
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Begin a refresh: `used`, the version a request's failed send used (`None`: a refresh
    /// ahead of the expiry).
    pub fn begin(&self, now_unix_ms: u64, used: Option<u64>) -> Turn {
        let mut st = self.lock();
        if let Some(why) = &st.dead {
            return Turn::Dead(why.clone());
        }
        if st.refreshing {
            return Turn::Follow;
        }
        let back_off = if used.is_some() {
            REFUSED_BACK_OFF_MS
        } else {
            AHEAD_BACK_OFF_MS
        };
        if let Some((Refresh::Failed, at)) = st.last
            && now_unix_ms < at + back_off
        {
            return Turn::Later;
        }
        let needed = match used {
            Some(v) => v == self.version(),
            None => self.due(now_unix_ms),
        };
        let Some(refresh) = st.refresh.clone().filter(|_| needed) else {
            return Turn::Fresh;
        };
        st.refreshing = true;
        Turn::Lead(refresh)
    }

    /// The leader's call ended. Returns the record to keep in the store after a refresh.
    pub fn finish(
        &self,
        outcome: Result<Fresh, (Refresh, String)>,
        now_unix_ms: u64,
    ) -> Option<serde_json::Value> {
        let mut st = self.lock();
        st.refreshing = false;
        match outcome {
            Ok(fresh) => {
                st.access = Some(Arc::from(fresh.access.as_str()));
                if let Some(r) = fresh.refresh {
                    st.refresh = Some(Secret::new(r));
                }
                st.last = Some((Refresh::Refreshed, now_unix_ms));
                st.refreshes += 1;
                self.expires_at_ms
                    .store(fresh.expires_at_ms, Ordering::Relaxed);
                self.version.fetch_add(1, Ordering::AcqRel);
                let refresh = st.refresh.as_ref().map(|r| r.expose().to_string());
                Some(serde_json::json!({
                    "access": fresh.access, "refresh": refresh, "expires_at_ms": fresh.expires_at_ms,
                }))
            }
            Err((kind, why)) => {
                st.last = Some((kind, now_unix_ms));
                st.failures += 1;
                if kind == Refresh::Rejected {
                    st.dead = Some(why);
                }
                None
            }
        }
    }

    /// Whether a refresh is in flight, and whether the cell is dead.
    pub fn settled(&self) -> (bool, Option<String>) {
        let st = self.lock();
        (st.refreshing, st.dead.clone())
    }

    /// The digest the store record is kept under (the environment's refresh token).
    pub fn origin(&self) -> Option<[u8; 32]> {
        self.lock().origin
    }

    pub fn view(&self) -> View {
        let st = self.lock();
        let at = self.expires_at_ms.load(Ordering::Relaxed);
        View {
            expires_at_ms: (at != 0).then_some(at),
            refreshing: st.refreshing,
            refreshes: st.refreshes,
            failures: st.failures,
            last: st.last,
            dead: st.dead.clone(),
        }
    }
}

/// Every connection slot's cell, and the key that seals them in the store.
pub struct Tokens {
    cells: Vec<TokenCell>,
    key: Option<SealKey>,
}

/// The store key of a connection's sealed tokens.
fn store_key(label: &str) -> String {
    format!("oauth/{label}")
}

impl Tokens {
    /// `key`: the operator's sealing secret; the store keeps its salt.
    pub fn new(capacity: usize, key: Option<&Secret>, store: &crate::store::Store) -> Tokens {
        Tokens {
            cells: (0..capacity).map(|_| TokenCell::default()).collect(),
            key: key.map(|k| SealKey::new(k.expose(), &SealKey::salt(store))),
        }
    }

    pub fn get(&self, conn: ConnId) -> Option<&TokenCell> {
        self.cells.get(conn.index())
    }

    /// Seed every OAuth connection with a refresh token (at start and after a reload), from
    /// the environment and what the store kept sealed under the same origin.
    pub fn seed(&self, config: &crate::config::Config, store: &crate::store::Store) {
        for p in &config.providers {
            for c in &p.connections {
                self.seed_one(&format!("{}/{}", p.id, c.id), c, store);
            }
        }
    }

    fn seed_one(&self, label: &str, c: &Connection, store: &crate::store::Store) {
        let (Some(oauth), Some(cell)) = (&c.oauth, self.cells.get(c.index.index())) else {
            return;
        };
        let origin = crate::secret::hex(&crate::secret::digest(oauth.refresh.expose().as_bytes()));
        let row = store_key(label);
        let stored = self.key.as_ref().and_then(|k| {
            let rec = store.get(&row)?;
            (rec["origin"].as_str() == Some(origin.as_str())).then_some(())?;
            serde_json::from_slice(&k.open(&row, rec["sealed"].as_str()?)?).ok()
        });
        cell.seed(oauth, stored);
    }

    /// Keep a refreshed record sealed (nothing without a key: never in clear).
    pub fn keep(
        &self,
        label: &str,
        cell: &TokenCell,
        record: &serde_json::Value,
        store: &crate::store::Store,
    ) {
        let (Some(key), Some(origin)) = (&self.key, cell.origin()) else {
            return;
        };
        let row = store_key(label);
        let Some(sealed) = key.seal(&row, record.to_string().as_bytes()) else {
            return;
        };
        let v = serde_json::json!({"origin": crate::secret::hex(&origin), "sealed": sealed});
        store.put(row, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    fn oauth(refresh: &str, expires: Option<u64>) -> crate::config::OAuthRefresh {
        crate::config::OAuthRefresh {
            refresh: Secret::new(refresh),
            token_url: crate::config::Endpoint {
                tls: false,
                host: "127.0.0.1".into(),
                port: 1,
                base_path: "/t".into(),
                via: None,
                own_tls: None,
                http2: Default::default(),
            },
            client_id: "c".into(),
            expires_at_ms: expires,
        }
    }

    fn fresh(n: u64) -> Result<Fresh, (Refresh, String)> {
        Ok(Fresh {
            access: format!("at-{n}"),
            refresh: Some(format!("rt-{n}")),
            expires_at_ms: NOW + 3_600_000,
        })
    }

    #[test]
    fn one_refresh_at_a_time_and_a_401_after_it_takes_the_new_token() {
        let cell = TokenCell::default();
        cell.seed(&oauth("rt-0", Some(NOW + 60_000)), None);
        let v0 = cell.version();
        assert!(cell.due(NOW), "within five minutes of the expiry");
        let Turn::Lead(r) = cell.begin(NOW, None) else {
            panic!("the first leads")
        };
        assert_eq!(r.expose(), "rt-0");
        assert!(matches!(cell.begin(NOW, Some(v0)), Turn::Follow));
        let record = cell.finish(fresh(1), NOW).expect("a record to keep");
        assert_eq!(record["refresh"], "rt-1");
        assert_eq!(cell.current(), (v0 + 1, Some(Arc::from("at-1"))));
        assert!(!cell.due(NOW));
        // A send that used the old token was refused: the new one is there already.
        assert!(matches!(cell.begin(NOW, Some(v0)), Turn::Fresh));
        // The same seed again keeps the refreshed state; a new one from the operator wins.
        cell.seed(&oauth("rt-0", None), None);
        assert_eq!(cell.version(), v0 + 1);
        cell.seed(&oauth("rt-new", None), None);
        assert_eq!(
            cell.current().1,
            None,
            "the environment's access token again"
        );
    }

    #[test]
    fn failures_back_off_and_a_refusal_is_final() {
        let cell = TokenCell::default();
        cell.seed(&oauth("rt-0", Some(NOW)), None);
        let v = cell.version();
        assert!(matches!(cell.begin(NOW, None), Turn::Lead(_)));
        assert!(
            cell.finish(Err((Refresh::Failed, "503".into())), NOW)
                .is_none()
        );
        assert!(matches!(cell.begin(NOW + 1_000, None), Turn::Later));
        assert!(matches!(cell.begin(NOW + 1_000, Some(v)), Turn::Later));
        assert!(matches!(cell.begin(NOW + 5_000, Some(v)), Turn::Lead(_)));
        cell.finish(
            Err((Refresh::Rejected, "invalid_grant".into())),
            NOW + 5_000,
        );
        assert!(
            matches!(cell.begin(NOW + 60_000, None), Turn::Dead(ref w) if w == "invalid_grant")
        );
        assert_eq!(cell.view().failures, 2);
    }

    #[test]
    fn a_stored_record_seeds_the_cell() {
        let cell = TokenCell::default();
        let stored = serde_json::json!({"access": "at-9", "refresh": "rt-9", "expires_at_ms": NOW});
        cell.seed(&oauth("rt-0", None), Some(stored));
        assert_eq!(cell.current().1.as_deref(), Some("at-9"));
        let Turn::Lead(r) = cell.begin(NOW, None) else {
            panic!("due")
        };
        assert_eq!(r.expose(), "rt-9", "the rotated refresh token");
    }
}
