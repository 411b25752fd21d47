//! What one instance tells the others: resilience events by name and wall-clock time. Slots
//! and the monotonic clock are each process's own, so a connection travels as its
//! `provider/connection` label and its key's fingerprint (the first 12 hex digits of the key's
//! SHA-256, as `GET /admin/config` shows it: enough to tell two keys apart, nothing to use),
//! a provider as its id, and every time as Unix milliseconds.

use crate::ids::ConnId;
use crate::resilience::Event;
use crate::resilience::classify::Reason;
use crate::resilience::cooldown::ConnState;
use crate::resilience::lockout::{Lock, LockScope};
use crate::state::generation::Gen;
pub use clocks::Clocks;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// One message on the fleet's channel (and, for states, in its hashes).
#[derive(Debug, Deserialize, Serialize, PartialEq)]
pub struct Message {
    /// The instance that learned it (its own messages come back to it and are skipped).
    pub from: String,
    #[serde(flatten)]
    pub fact: Fact,
}

/// A resilience event by name.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Fact {
    Conn {
        conn: String,
        key: String,
        state: ConnState,
    },
    Lock {
        conn: String,
        key: String,
        model: String,
        scope: LockScope,
        reason: Reason,
        until: u64,
        failures: u32,
        last_failure: u64,
        last_cooldown: u64,
    },
    LockDecay {
        conn: String,
        key: String,
        model: String,
    },
    LockClear {
        conn: String,
        key: String,
        model: Option<String>,
    },
    BreakerFailure {
        provider: String,
        at: u64,
        tenant: u64,
    },
    BreakerSuccess {
        provider: String,
        at: u64,
    },
    BreakerReset {
        provider: String,
    },
    BreakerProbeOk {
        provider: String,
        at: u64,
    },
    GateFailure {
        provider: String,
        at: u64,
    },
    GateSuccess {
        provider: String,
    },
}

impl Fact {
    /// Whether every name in it follows the rules local input does: a connection as
    /// `provider/connection` with its key's fingerprint, a provider id, a model name a client
    /// could have sent (no control, invisible or direction-changing character).
    pub fn valid(&self) -> bool {
        let conn_ok = |conn: &str, key: &str| {
            crate::fleet::leases::valid_label(conn)
                && key.len() == 12
                && key.bytes().all(|b| b.is_ascii_hexdigit())
        };
        let model_ok = |m: &str| crate::dialect::facts::model_problem(m).is_none();
        match self {
            Fact::Conn { conn, key, .. } => conn_ok(conn, key),
            Fact::Lock {
                conn, key, model, ..
            }
            | Fact::LockDecay { conn, key, model } => conn_ok(conn, key) && model_ok(model),
            Fact::LockClear { conn, key, model } => {
                conn_ok(conn, key) && model.as_deref().is_none_or(model_ok)
            }
            Fact::BreakerFailure { provider, .. }
            | Fact::BreakerSuccess { provider, .. }
            | Fact::BreakerReset { provider }
            | Fact::BreakerProbeOk { provider, .. }
            | Fact::GateFailure { provider, .. }
            | Fact::GateSuccess { provider } => crate::names::valid_id(provider),
        }
    }

    /// Where a state is kept in the fleet's hashes (facts that are not states are only sent).
    pub fn field(&self) -> Option<(&'static str, String)> {
        match self {
            Fact::Conn { conn, key, .. } => Some(("conn", format!("{conn}#{key}"))),
            Fact::Lock {
                conn,
                key,
                model,
                scope,
                ..
            } => Some(("lock", format!("{conn}#{key}#{scope:?}#{model}"))),
            _ => None,
        }
    }
}

/// The names of one generation's slots, both ways.
#[derive(Default)]
pub struct Names {
    pub generation: u64,
    conns: Vec<Option<(String, String)>>,
    by_conn: HashMap<(String, String), ConnId>,
    providers: HashMap<usize, String>,
    by_provider: HashMap<String, usize>,
    /// Connections with a concurrency cap: slot, `label#key`, cap.
    capped: Vec<(ConnId, String, u32)>,
    /// Accounts with a concurrency cap: index, id, cap.
    capped_accounts: Vec<(usize, String, u32)>,
}

/// A key's fingerprint as the fleet names it.
pub fn fingerprint(secret: &str) -> String {
    crate::secret::hex(&crate::secret::digest(secret.as_bytes())[..6])
}

impl Names {
    pub fn of(g: &Gen) -> Names {
        let mut n = Names {
            generation: g.number,
            conns: vec![None; g.config.slot_count()],
            ..Default::default()
        };
        for (i, a) in g.config.accounts.iter().enumerate() {
            if a.max_concurrent > 0 {
                n.capped_accounts.push((i, a.id.clone(), a.max_concurrent));
            }
        }
        for p in &g.config.providers {
            n.providers.insert(p.slot, p.id.clone());
            n.by_provider.insert(p.id.clone(), p.slot);
            for c in &p.connections {
                let label = format!("{}/{}", p.id, c.id);
                let key = fingerprint(c.secret.expose());
                n.by_conn.insert((label.clone(), key.clone()), c.index);
                if c.flow.max_concurrent > 0 {
                    let name = format!("{label}#{key}");
                    n.capped.push((c.index, name, c.flow.max_concurrent));
                }
                n.conns[c.index] = Some((label, key));
            }
        }
        n
    }

    /// The capped connections: slot, `label#key` (the fleet's name for its slots), cap.
    pub fn capped(&self) -> impl Iterator<Item = (ConnId, &str, u32)> {
        self.capped.iter().map(|(s, n, c)| (*s, n.as_str(), *c))
    }

    /// The accounts with a cap of their own: index, id, cap.
    pub fn capped_accounts(&self) -> impl Iterator<Item = (usize, &str, u32)> {
        self.capped_accounts
            .iter()
            .map(|(i, n, c)| (*i, n.as_str(), *c))
    }

    /// `provider/connection#key` of a slot (the fleet's name for a connection's pace).
    pub fn label_with_key(&self, slot: ConnId) -> Option<String> {
        self.conn(slot).map(|(l, k)| format!("{l}#{k}"))
    }

    /// The slot named `provider/connection#key` (`label_with_key`'s inverse): none when the key
    /// changed since the name was written.
    pub fn slot_of_label_with_key(&self, name: &str) -> Option<ConnId> {
        let (label, key) = name.rsplit_once('#')?;
        self.slot(label, key)
    }

    /// The slot of `provider/connection`, whatever its key (session pins name no key).
    pub fn slot_of_label(&self, label: &str) -> Option<ConnId> {
        self.conns
            .iter()
            .position(|c| c.as_ref().is_some_and(|(l, _)| l == label))
            .map(ConnId::new)
    }

    fn conn(&self, slot: ConnId) -> Option<(String, String)> {
        self.conns.get(slot.index()).cloned().flatten()
    }

    fn slot(&self, conn: &str, key: &str) -> Option<ConnId> {
        self.by_conn
            .get(&(conn.to_string(), key.to_string()))
            .copied()
    }

    fn provider(&self, slot: usize) -> Option<String> {
        self.providers.get(&slot).cloned()
    }

    fn provider_slot(&self, id: &str) -> Option<usize> {
        self.by_provider.get(id).copied()
    }
}

fn state_times(s: &ConnState, f: impl Fn(u64) -> u64) -> ConnState {
    let mut s = *s;
    s.until = f(s.until);
    s.ok_at = f(s.ok_at);
    s.probe_ok_at = f(s.probe_ok_at);
    s.last.at = f(s.last.at);
    s
}

/// An event of this instance, by name; `None` for what the fleet does not share (decision
/// queries, session pins) or a slot this generation does not name.
pub fn outgoing(ev: &Event, names: &Names, clocks: Clocks) -> Option<Fact> {
    let conn = |slot: ConnId| names.conn(slot);
    Some(match ev {
        Event::Conn { conn: c, state } => {
            let (conn, key) = conn(*c)?;
            Fact::Conn {
                conn,
                key,
                state: state_times(state, |t| clocks.to_unix(t)),
            }
        }
        Event::Lock(l) => {
            let (conn, key) = conn(l.conn)?;
            Fact::Lock {
                conn,
                key,
                model: l.key.to_string(),
                scope: l.scope,
                reason: l.reason,
                until: clocks.to_unix(l.until),
                failures: l.failures,
                last_failure: clocks.to_unix(l.last_failure),
                last_cooldown: l.last_cooldown,
            }
        }
        Event::LockDecay { conn: c, model } => {
            let (conn, key) = conn(*c)?;
            Fact::LockDecay {
                conn,
                key,
                model: model.to_string(),
            }
        }
        Event::LockClear { conn: c, model } => {
            let (conn, key) = conn(*c)?;
            Fact::LockClear {
                conn,
                key,
                model: model.as_ref().map(|m| m.to_string()),
            }
        }
        Event::BreakerFailure {
            provider,
            at,
            tenant,
        } => Fact::BreakerFailure {
            provider: names.provider(*provider)?,
            at: clocks.to_unix(*at),
            tenant: *tenant,
        },
        Event::BreakerSuccess { provider, at } => Fact::BreakerSuccess {
            provider: names.provider(*provider)?,
            at: clocks.to_unix(*at),
        },
        Event::BreakerReset { provider } => Fact::BreakerReset {
            provider: names.provider(*provider)?,
        },
        Event::BreakerProbeOk { provider, at } => Fact::BreakerProbeOk {
            provider: names.provider(*provider)?,
            at: clocks.to_unix(*at),
        },
        Event::GateFailure { provider, at } => Fact::GateFailure {
            provider: names.provider(*provider)?,
            at: clocks.to_unix(*at),
        },
        Event::GateSuccess { provider } => Fact::GateSuccess {
            provider: names.provider(*provider)?,
        },
        Event::Pin { .. } | Event::DecisionQuery { .. } => return None,
    })
}

/// Another instance's fact as this instance's event; `None` for a connection or provider this
/// instance does not have (or has with another key).
pub fn incoming(f: Fact, names: &Names, clocks: Clocks) -> Option<Event> {
    let provider = |id: &str| names.provider_slot(id);
    Some(match f {
        Fact::Conn { conn, key, state } => Event::Conn {
            conn: names.slot(&conn, &key)?,
            state: state_times(&state, |t| clocks.to_mono(t)),
        },
        Fact::Lock {
            conn,
            key,
            model,
            scope,
            reason,
            until,
            failures,
            last_failure,
            last_cooldown,
        } => Event::Lock(Lock {
            conn: names.slot(&conn, &key)?,
            key: Arc::from(model),
            scope,
            reason,
            until: clocks.to_mono(until),
            failures,
            last_failure: clocks.to_mono(last_failure),
            last_cooldown,
        }),
        Fact::LockDecay { conn, key, model } => Event::LockDecay {
            conn: names.slot(&conn, &key)?,
            model: Arc::from(model),
        },
        Fact::LockClear { conn, key, model } => Event::LockClear {
            conn: names.slot(&conn, &key)?,
            model: model.map(Arc::from),
        },
        Fact::BreakerFailure {
            provider: p,
            at,
            tenant,
        } => Event::BreakerFailure {
            provider: provider(&p)?,
            at: clocks.to_mono(at),
            tenant,
        },
        Fact::BreakerSuccess { provider: p, at } => Event::BreakerSuccess {
            provider: provider(&p)?,
            at: clocks.to_mono(at),
        },
        Fact::BreakerReset { provider: p } => Event::BreakerReset {
            provider: provider(&p)?,
        },
        Fact::BreakerProbeOk { provider: p, at } => Event::BreakerProbeOk {
            provider: provider(&p)?,
            at: clocks.to_mono(at),
        },
        Fact::GateFailure { provider: p, at } => Event::GateFailure {
            provider: provider(&p)?,
            at: clocks.to_mono(at),
        },
        Fact::GateSuccess { provider: p } => Event::GateSuccess {
            provider: provider(&p)?,
        },
    })
}

mod clocks;

#[cfg(test)]
mod tests;
