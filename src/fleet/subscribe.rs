//! The listening half: what the other instances learn reaches this one's cores as ordinary
//! bus events, merged by the same rules as the cores' own (idempotent, order-independent; an
//! operator reset wins over older failures). After every (re)connection the states the
//! instances keep in Redis are read again, since the channel does not replay what was missed.

use super::link::{Backoff, Link, describe};
use super::trust::Reader;
use super::wire::{Clocks, Message, Names, incoming};
use crate::log::event;
use crate::state::core::Shared;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::Duration;

pub(super) struct Subscriber {
    pub link: Link,
    pub shared: Arc<Shared>,
    pub stop: Arc<AtomicBool>,
    pub instance: String,
    pub channel: String,
    /// Where lease changes are told (`leases`).
    pub lease_channel: String,
    /// `SCAN` pattern of every instance's state hashes.
    pub pattern: String,
    pub settings: crate::config::FleetSettings,
}

/// How often a quiet subscription looks whether the instance is stopping.
const POLL: Duration = Duration::from_millis(250);

pub(super) fn run(s: Subscriber, mut reader: Reader) {
    let mut backoff = Backoff::default();
    let mut names = Names::default();
    while !s.stop.load(Acquire) {
        let err = match session(&s, &mut names, &mut backoff, &mut reader) {
            Ok(()) => return,
            Err(e) => e,
        };
        if s.shared.fleet.connected.swap(false, AcqRel) || backoff.is_fresh() {
            event(
                "warn",
                "fleet: lost Redis; health is local until it is back",
                serde_json::json!({"error": describe(&err)}),
            );
        }
        s.shared.fleet.disconnects.fetch_add(1, Relaxed);
        let until = std::time::Instant::now() + backoff.next();
        while std::time::Instant::now() < until && !s.stop.load(Acquire) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Subscribe, read the kept states, then apply what comes until the link breaks or the
/// instance stops.
fn session(
    s: &Subscriber,
    names: &mut Names,
    backoff: &mut Backoff,
    reader: &mut Reader,
) -> redis::RedisResult<()> {
    let mut con = s.link.connect()?;
    let mut sub = con.as_pubsub();
    sub.subscribe(&s.channel)?;
    sub.subscribe(&s.lease_channel)?;
    let kv_channel = super::kv::channel(&s.settings);
    sub.subscribe(&kv_channel)?;
    sub.set_read_timeout(Some(POLL))?;
    // Subscribed first: what is published while the states are read is not missed (a fact
    // seen twice merges to the same state).
    let n = load(s, names, reader)?;
    s.shared.fleet.connected.store(true, Release);
    backoff.reset();
    event(
        "info",
        "fleet: connected to Redis",
        serde_json::json!({"instance": s.instance, "states_loaded": n}),
    );
    while !s.stop.load(Acquire) {
        match sub.get_message() {
            Ok(msg) => {
                let Ok(text) = msg.get_payload::<String>() else {
                    continue;
                };
                let on = msg.get_channel_name();
                let Some(body) = reader.message(on, &text) else {
                    continue; // not a member's, or a replay: counted and said
                };
                if on == s.lease_channel {
                    lease_news(s, body, reader);
                } else if on == kv_channel {
                    refresh(s, names);
                    super::kv::news(&s.shared, &s.settings, names, body, reader);
                } else {
                    apply(s, names, body, Clocks::now(), (reader, on));
                }
            }
            Err(e) if e.is_timeout() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Read every instance's kept states and apply them; how many applied.
pub(super) fn load(
    s: &Subscriber,
    names: &mut Names,
    reader: &mut Reader,
) -> redis::RedisResult<usize> {
    let mut con = s.link.connect()?;
    let mut keys: Vec<String> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&s.pattern)
            .arg("COUNT")
            .arg(200)
            .query(&mut con)?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    super::leases::load_view(&s.shared, &s.settings, &mut con, reader)?;
    if super::kv::load(&s.shared, &s.settings, &mut con, reader)? > 0 {
        s.shared.store.flush(); // in the store before the instance serves from it
    }
    let clocks = Clocks::now();
    let mut applied = 0;
    for key in keys {
        let entries: Vec<(String, String)> = redis::cmd("HGETALL").arg(&key).query(&mut con)?;
        for (field, text) in entries {
            let place = super::entry_place(&key, &field);
            if let Some(body) = reader.entry(&place, &text) {
                applied += usize::from(apply(s, names, body, clocks, (reader, &place)));
            }
        }
    }
    Ok(applied)
}

/// The names of the newest generation.
fn refresh(s: &Subscriber, names: &mut Names) {
    if s.shared.newest.load(Acquire) != names.generation {
        *names = Names::of(&s.shared.staged());
    }
}

/// A connection taken or freed by a lease on any instance: this instance's view follows.
fn lease_news(s: &Subscriber, text: &str, reader: &Reader) {
    let v = serde_json::from_str::<serde_json::Value>(text).unwrap_or_default();
    match (v["conn"].as_str(), v["until"].as_u64()) {
        (Some(conn), Some(until)) if super::leases::valid_label(conn) => {
            s.shared.leases.set(conn, until);
        }
        _ => reader.invalid(&s.lease_channel),
    }
}

/// One fact from another instance onto this instance's bus; whether it applied.
fn apply(
    s: &Subscriber,
    names: &mut Names,
    text: &str,
    clocks: Clocks,
    (reader, place): (&Reader, &str),
) -> bool {
    let msg = match serde_json::from_str::<Message>(text) {
        Ok(msg) if msg.fact.valid() => msg,
        _ => {
            reader.invalid(place); // signed, yet not what a member of this version says
            return false;
        }
    };
    if msg.from == s.instance {
        return false;
    }
    refresh(s, names);
    let fleet = &s.shared.fleet;
    match incoming(msg.fact, names, clocks) {
        Some(ev) => {
            s.shared.bus.broadcast(s.shared.bus.fleet(), &ev);
            fleet.received.fetch_add(1, Relaxed);
            true
        }
        None => {
            fleet.unknown.fetch_add(1, Relaxed);
            false
        }
    }
}
