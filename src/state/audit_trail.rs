//! The audit trail of admin changes: who changed what, with the state before and after, and
//! when. Every change made through the admin port, the control socket or SIGHUP (keys minted
//! or revoked, settings changed, resets, reloads, drains, leases released) is appended here,
//! written as a log line, and kept in the store under `audit/` (the newest `KEPT` entries, so
//! it survives a restart and never grows without bound). `GET /admin/audit` and the status
//! page read it.
//!
//! A change is an operator's act, not the request path's: the mutex here is taken a few times
//! a minute at most, never by a core serving traffic.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Mutex;

/// Entries kept (in the store and in memory).
pub const KEPT: usize = 1_000;
/// The store's key prefix; keys sort by time (`audit/<unix ms, 16 digits>-<seq, 6 digits>`).
const PREFIX: &str = "audit/";

/// Who made a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    /// The admin port, with the admin token.
    AdminToken,
    /// The admin port, with an `admin`-scoped client key (its id).
    ClientKey(String),
    /// The local control socket (the peer's uid, from `SO_PEERCRED`).
    Socket { uid: u32 },
    /// A signal to the process (SIGHUP).
    Signal(&'static str),
}

impl Actor {
    fn to_json(&self) -> Value {
        match self {
            Actor::AdminToken => json!({"via": "admin_port", "token": "admin_token"}),
            Actor::ClientKey(id) => json!({"via": "admin_port", "client_key": id}),
            Actor::Socket { uid } => json!({"via": "control_socket", "uid": uid}),
            Actor::Signal(s) => json!({"via": "signal", "signal": s}),
        }
    }
}

/// One change as recorded.
pub struct Change<'a> {
    pub actor: &'a Actor,
    /// What was done (`reload`, `settings.patch`, `client_key.mint`...).
    pub action: &'a str,
    /// What it was done to (a path, a key id), when there is one.
    pub target: &'a str,
    /// The status it was answered with.
    pub status: u16,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// The trail: the newest entries in memory, and their keys in the store.
#[derive(Default)]
pub struct AuditTrail {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: VecDeque<(String, Value)>,
    seq: u64,
}

impl AuditTrail {
    /// The trail as the store kept it.
    pub fn load(store: &crate::store::Store) -> AuditTrail {
        let mut rows = store.scan(PREFIX);
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let skip = rows.len().saturating_sub(KEPT);
        AuditTrail {
            inner: Mutex::new(Inner {
                entries: rows.into_iter().skip(skip).collect(),
                seq: 0,
            }),
        }
    }

    /// Append a change: kept, stored (the oldest beyond `KEPT` deleted), and logged.
    pub fn record(&self, store: &crate::store::Store, c: Change) {
        let ts_ms = crate::clock::unix_ms();
        let entry = json!({
            "ts_ms": ts_ms,
            "actor": c.actor.to_json(),
            "action": c.action,
            "target": c.target,
            "status": c.status,
            "before": c.before.map(redacted),
            "after": c.after.map(redacted),
        });
        crate::log::event("info", "admin change", entry.clone());
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.seq = (g.seq + 1) % 1_000_000;
        let key = format!("{PREFIX}{ts_ms:016}-{:06}", g.seq);
        store.put(key.clone(), entry.clone());
        g.entries.push_back((key, entry));
        while g.entries.len() > KEPT {
            if let Some((old, _)) = g.entries.pop_front() {
                store.delete(old);
            }
        }
    }

    /// A command from outside the admin port (the control socket's, a signal's): done, with
    /// the state before (if any) and what it answered.
    pub fn record_command(
        &self,
        store: &crate::store::Store,
        (actor, action): (&Actor, &str),
        before: Option<Value>,
        after: Option<Value>,
    ) {
        let change = Change {
            actor,
            action,
            target: "",
            status: 200,
            before,
            after,
        };
        self.record(store, change);
    }

    /// The newest entries first, at most `limit`.
    pub fn newest(&self, limit: usize) -> Vec<Value> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.entries
            .iter()
            .rev()
            .take(limit)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// What a reload changes, as it was: the config generation it starts from.
pub fn generation(number: u64) -> Value {
    json!({ "generation": number })
}

/// Field names whose values are secrets: never kept in the trail, whatever answer carried them
/// (a minted client key is shown once, to its minter, and only its hash is stored).
const SECRET_FIELDS: [&str; 6] = [
    "key",
    "token",
    "secret",
    "password",
    "access_token",
    "refresh_token",
];

/// `v` with every secret field's value replaced.
fn redacted(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if SECRET_FIELDS.contains(&k.to_ascii_lowercase().as_str()) {
                        *x = Value::String("[redacted]".into());
                    } else {
                        walk(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_reach_the_trail() {
        let v = redacted(
            json!({"id": "bot", "key": "sk-ringside-abc", "nested": [{"token": "t", "ok": 1}]}),
        );
        let s = v.to_string();
        assert!(
            !s.contains("sk-ringside-abc") && !s.contains("\"t\""),
            "{s}"
        );
        assert!(s.contains("\"bot\"") && s.contains("\"ok\":1"), "{s}");
    }

    #[test]
    fn the_trail_keeps_the_newest_and_survives_a_reopen() {
        let dir = std::env::temp_dir().join(format!("ringside-audit-{}", std::process::id()));
        let d = dir.to_string_lossy().to_string();
        let store = crate::store::open(&d, 1 << 24, false).expect("store");
        let trail = AuditTrail::load(store);
        let actor = Actor::Socket { uid: 1000 };
        for i in 0..KEPT + 5 {
            let target = i.to_string();
            trail.record(
                store,
                Change {
                    actor: &actor,
                    action: "reload",
                    target: &target,
                    status: 200,
                    before: None,
                    after: None,
                },
            );
        }
        let newest = trail.newest(2);
        assert_eq!(newest[0]["target"], (KEPT + 4).to_string());
        assert_eq!(newest[1]["target"], (KEPT + 3).to_string());
        assert_eq!(newest[0]["actor"]["uid"], 1000);
        store.flush();
        let again = AuditTrail::load(store);
        assert_eq!(again.newest(usize::MAX).len(), KEPT);
        assert_eq!(again.newest(1)[0]["target"], (KEPT + 4).to_string());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
