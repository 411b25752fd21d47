//! Session pins and managed client keys across the fleet. Each instance keeps them in its own
//! store, where the request path reads them as in one instance; every write of one is also
//! kept in Redis (a pin until it ends) and told to the other instances, which write it into
//! their stores. An instance that starts reads them all before it serves, so a session pinned
//! by one instance stays on its connection when its next request lands on another, and a key
//! created on one instance's admin port works on all of them.

use super::leases::scan;
use super::link::{Backoff, Link, describe};
use super::signed::FleetKey;
use super::trust::Reader;
use super::wire::Names;
use crate::config::FleetSettings;
use crate::resilience::Event;
use crate::state::core::Shared;
use crate::store::remote::Replicated;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};

pub(super) struct Kv {
    pub link: Link,
    pub stop: Arc<AtomicBool>,
    pub settings: FleetSettings,
    pub rx: Receiver<Replicated>,
    /// What every entry and message is signed with.
    pub key: FleetKey,
}

pub(super) fn channel(s: &FleetSettings) -> String {
    s.key("kv")
}

fn redis_key(s: &FleetSettings, key: &str) -> String {
    s.key(&format!("kv:{key}"))
}

/// Send this instance's writes of shared entries to Redis and the other instances; a write
/// made while Redis is away is sent when it is back (the latest per entry).
pub(super) fn run(k: Kv) {
    let mut con: Option<redis::Connection> = None;
    let mut backoff = Backoff::default();
    let mut retry_at = Instant::now();
    let mut pending: std::collections::HashMap<String, Option<Value>> = Default::default();
    loop {
        match k.rx.recv_timeout(Duration::from_millis(100)) {
            Ok(w) => {
                pending.insert(w.key, w.value);
                for w in k.rx.try_iter().take(1023) {
                    pending.insert(w.key, w.value);
                }
            }
            Err(RecvTimeoutError::Timeout) if k.stop.load(Acquire) && pending.is_empty() => {
                return;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if pending.is_empty() {
            continue;
        }
        if con.is_none() && Instant::now() >= retry_at {
            match k.link.connect() {
                Ok(c) => {
                    con = Some(c);
                    backoff.reset();
                }
                Err(e) => {
                    say_lost(&backoff, &e);
                    retry_at = Instant::now() + backoff.next();
                }
            }
        }
        let Some(c) = con.as_mut() else {
            if k.stop.load(Acquire) {
                return; // leaving with Redis away: the entries stay in this instance's store
            }
            continue;
        };
        match send(&k, c, &pending) {
            Ok(()) => pending.clear(),
            Err(e) => {
                say_lost(&backoff, &e);
                con = None;
                retry_at = Instant::now() + backoff.next();
            }
        }
    }
}

fn say_lost(backoff: &Backoff, e: &redis::RedisError) {
    if backoff.is_fresh() {
        crate::log::event(
            "warn",
            "fleet: cannot share session pins and client keys while Redis is away; they are sent when it is back",
            serde_json::json!({"error": describe(e)}),
        );
    }
}

fn send(
    k: &Kv,
    con: &mut redis::Connection,
    writes: &std::collections::HashMap<String, Option<Value>>,
) -> redis::RedisResult<()> {
    let now = crate::clock::unix_ms();
    let mut pipe = redis::pipe();
    for (key, value) in writes {
        let rk = redis_key(&k.settings, key);
        match value {
            Some(v) => {
                let text = k.key.sign(&rk, now, &v.to_string());
                match v["until"].as_u64().filter(|_| key.starts_with("pin/")) {
                    Some(until) if until <= now => continue, // already over
                    Some(until) => pipe
                        .cmd("SET")
                        .arg(&rk)
                        .arg(&text)
                        .arg("PX")
                        .arg(until - now),
                    None => pipe.cmd("SET").arg(&rk).arg(&text),
                };
                pipe.ignore();
            }
            None => {
                pipe.del(&rk).ignore();
            }
        }
        let news = serde_json::json!({"from": k.settings.instance_id, "key": key, "value": value});
        let on = channel(&k.settings);
        let signed = k.key.sign(&on, now, &news.to_string());
        pipe.publish(on, signed).ignore();
    }
    pipe.query::<()>(con)
}

/// Every shared entry the fleet keeps, into this instance's store (at start, and after Redis
/// was away); how many.
pub(super) fn load(
    shared: &Shared,
    settings: &FleetSettings,
    con: &mut redis::Connection,
    reader: &mut Reader,
) -> redis::RedisResult<usize> {
    let prefix = settings.key("kv:");
    let keys = scan(con, &format!("{prefix}*"))?;
    let mut n = 0;
    let names = Names::of(&shared.staged());
    for chunk in keys.chunks(500) {
        let values: Vec<Option<String>> = redis::cmd("MGET").arg(chunk).query(con)?;
        for (rk, v) in chunk.iter().zip(values) {
            let (Some(key), Some(v)) = (rk.strip_prefix(&prefix), v) else {
                continue;
            };
            let Some(body) = reader.entry(rk, &v) else {
                continue; // not a member's: counted and said
            };
            match serde_json::from_str::<Value>(body) {
                Ok(value) if valid(key, Some(&value), &names) => {
                    apply(shared, &names, key.to_string(), Some(value));
                    n += 1;
                }
                _ => reader.invalid(rk),
            }
        }
    }
    Ok(n)
}

/// A message from another instance's `run`: into this instance's store.
pub(super) fn news(
    shared: &Shared,
    settings: &FleetSettings,
    names: &Names,
    text: &str,
    reader: &Reader,
) {
    let v = serde_json::from_str::<Value>(text).unwrap_or_default();
    if v["from"].as_str() == Some(settings.instance_id.as_str()) {
        return;
    }
    let value = Some(v["value"].clone()).filter(|x| !x.is_null());
    match v["key"].as_str() {
        Some(key) if valid(key, value.as_ref(), names) => {
            apply(shared, names, key.to_string(), value);
        }
        _ => reader.invalid(&channel(settings)),
    }
}

/// Whether a shared entry follows the rules its local writer follows: a session pin names a
/// connection of this instance, a client key the id, scopes and settings the admin API
/// accepts. A deletion needs only a well-formed key.
fn valid(key: &str, value: Option<&Value>, names: &Names) -> bool {
    if let Some(session) = key.strip_prefix("pin/") {
        let well_formed = session.len() == 32 && session.bytes().all(|b| b.is_ascii_hexdigit());
        return well_formed
            && value.is_none_or(|v| {
                v["until"].is_u64()
                    && v["conn"]
                        .as_str()
                        .is_some_and(|l| names.slot_of_label(l).is_some())
            });
    }
    crate::clients::managed::valid_entry(key, value)
}

/// Write a shared entry here; a pin also reaches the cores' own tables, a client key closes
/// open mode as a local one would.
fn apply(shared: &Shared, names: &Names, key: String, value: Option<Value>) {
    if !crate::store::remote::SHARED
        .iter()
        .any(|p| key.starts_with(p))
    {
        return; // not an entry the fleet shares
    }
    if key.starts_with("clientkey/") && value.is_some() {
        shared.managed_keys.store(true, Relaxed);
    }
    if key.starts_with("pin/")
        && let Some(v) = &value
        && let (Some(conn), Some(until)) = (
            v["conn"].as_str().and_then(|l| names.slot_of_label(l)),
            v["until"].as_u64(),
        )
    {
        let ev = Event::Pin {
            key: Arc::from(key.as_str()),
            conn,
            until,
        };
        shared.bus.broadcast(shared.bus.fleet(), &ev);
    }
    shared.store.apply_replicated(key, value);
}
