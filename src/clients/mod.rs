//! Client keys: who may call Ringside. A key is kept only as its SHA-256; each has scopes
//! (`inference`, `lease:exclusive`, `admin`), an optional list of connections it may use, a
//! tenant (for quotas and fair queueing) and a priority class. Without any key configured
//! Ringside runs open (sidecar mode) and says so at start.

pub mod managed;

use crate::ids::ConnId;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Inference,
    LeaseExclusive,
    Admin,
    /// May lengthen its deadline past the route's (`x-ringside-deadline-ms`) and raise its
    /// priority above its class (`x-ringside-priority`); others may only shorten and lower.
    Overrides,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        Some(match s {
            "inference" => Scope::Inference,
            "lease:exclusive" => Scope::LeaseExclusive,
            "admin" => Scope::Admin,
            "overrides" => Scope::Overrides,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    pub id: String,
    pub scopes: Vec<Scope>,
    /// Flat connection indices this key may use; `None` = all.
    pub allowed: Option<Vec<ConnId>>,
    /// Tenant id hash (quotas, fair queueing).
    pub tenant: u64,
    /// Default priority 0–9 of its requests (its class).
    pub priority: u8,
    /// Whether its streams' events are joined (`None`: `stream.coalesce_events`).
    pub coalesce_events: Option<crate::sse::Coalesce>,
}

impl Client {
    pub fn has(&self, s: Scope) -> bool {
        self.scopes.contains(&s)
    }

    pub fn may_use(&self, conn: ConnId) -> bool {
        self.allowed.as_ref().is_none_or(|a| a.contains(&conn))
    }
}

pub use crate::secret::{digest, hex};

/// A stable tenant id for a name (not secret).
pub fn tenant_id(name: &str) -> u64 {
    let d = digest(name.as_bytes());
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]) | 1
}

/// The configured keys, by digest. Shared, not copied, with each request that presents one (a
/// copy was a `String` and two `Vec`s per request).
#[derive(Clone, Debug, Default)]
pub struct Clients {
    by_digest: HashMap<[u8; 32], usize>,
    pub list: Vec<Arc<Client>>,
}

/// What the request's credential says.
#[derive(Debug, PartialEq, Eq)]
pub enum Auth {
    /// No keys configured: everyone is in.
    Open,
    Known(Arc<Client>),
    Missing,
    Unknown,
}

impl Clients {
    pub fn new(entries: Vec<([u8; 32], Client)>) -> Self {
        let mut c = Clients::default();
        for (d, client) in entries {
            c.by_digest.insert(d, c.list.len());
            c.list.push(Arc::new(client));
        }
        c
    }

    pub fn is_open(&self) -> bool {
        self.list.is_empty()
    }

    /// Check a presented key (`Authorization: Bearer`, or `x-api-key`) against the configured
    /// keys, then against `managed` (keys created through the admin API, by digest).
    /// `any_managed` says whether managed keys exist at all (else, with no configured key,
    /// Ringside is open).
    pub fn check(
        &self,
        presented: Option<&[u8]>,
        any_managed: bool,
        managed: impl FnOnce(&[u8; 32]) -> Option<Client>,
    ) -> Auth {
        if self.is_open() && !any_managed {
            return Auth::Open;
        }
        let Some(key) = presented.filter(|k| !k.is_empty()) else {
            return Auth::Missing;
        };
        let d = digest(key);
        match self.by_digest.get(&d) {
            Some(&i) => Auth::Known(Arc::clone(&self.list[i])),
            None => managed(&d).map_or(Auth::Unknown, |c| Auth::Known(Arc::new(c))),
        }
    }
}

/// The key a request presents: `Authorization: Bearer <key>`, else `x-api-key`.
pub fn presented(head: &crate::http::Head) -> Option<&[u8]> {
    if let Some(v) = head.get("authorization") {
        let v = v
            .strip_prefix(b"Bearer ")
            .or_else(|| v.strip_prefix(b"bearer "))?;
        return Some(v.trim_ascii());
    }
    head.get("x-api-key").map(<[u8]>::trim_ascii)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: &str, scopes: &[Scope]) -> Client {
        Client {
            id: id.into(),
            scopes: scopes.to_vec(),
            allowed: Some(vec![ConnId::new(1)]),
            tenant: tenant_id(id),
            priority: 5,
            coalesce_events: None,
        }
    }

    #[test]
    fn open_without_keys_and_checked_with_them() {
        let none = |_: &[u8; 32]| None;
        assert_eq!(Clients::default().check(None, false, none), Auth::Open);
        assert_eq!(
            Clients::default().check(None, true, none),
            Auth::Missing,
            "managed keys close it"
        );
        let c = Clients::new(vec![(
            digest(b"sk-team-a"),
            client("a", &[Scope::Inference]),
        )]);
        assert!(matches!(c.check(Some(b"sk-team-a"), false, none), Auth::Known(k) if k.id == "a"));
        assert_eq!(c.check(Some(b"sk-other"), false, none), Auth::Unknown);
        assert_eq!(c.check(None, false, none), Auth::Missing);
        assert_eq!(c.check(Some(b""), false, none), Auth::Missing);
        let managed =
            |d: &[u8; 32]| (*d == digest(b"rsk_m")).then(|| client("m", &[Scope::Inference]));
        assert!(matches!(c.check(Some(b"rsk_m"), true, managed), Auth::Known(k) if k.id == "m"));
        let Auth::Known(k) = c.check(Some(b"sk-team-a"), false, none) else {
            unreachable!()
        };
        assert!(k.has(Scope::Inference) && !k.has(Scope::Admin));
        assert!(k.may_use(ConnId::new(1)) && !k.may_use(ConnId::new(0)));
        assert_ne!(tenant_id("a"), tenant_id("b"));
    }

    #[test]
    fn hex_is_lower_case_two_digits_per_byte() {
        let d = digest(b"x");
        let want: String = d.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&d), want);
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
