//! The publishing half: every resilience event of this instance (its cores' and its admin
//! port's) goes to the fleet's channel, and each state (a connection's, a model lockout's) is
//! also kept in this instance's hash, where an instance that starts or comes back reads it.
//! While Redis is away the states are kept here and sent again when it is back.

use super::link::{Backoff, Link, describe};
use super::signed::FleetKey;
use super::wire::{Clocks, Fact, Message, Names, outgoing};
use crate::log::event;
use crate::resilience::Event;
use crate::state::core::Shared;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};

/// A state kept in Redis this long after its instance last wrote (a gone instance's views
/// expire; the others' carry on).
const KEEP_MS: u64 = 7 * 24 * 3_600_000;
/// The most facts sent in one round trip.
const BATCH: usize = 256;

pub(super) struct Publisher {
    pub link: Link,
    pub shared: Arc<Shared>,
    pub inbox: Receiver<Event>,
    pub stop: Arc<AtomicBool>,
    pub instance: String,
    pub channel: String,
    /// What every state and fact is signed with.
    pub key: FleetKey,
    /// This instance's hashes: connection states, lockouts.
    pub hashes: [(&'static str, String); 2],
}

struct Conn {
    con: Option<redis::Connection>,
    backoff: Backoff,
    retry_at: Instant,
}

pub(super) fn run(p: Publisher) {
    let mut names = Names::default();
    // Every state this instance published, by its field: sent again after Redis was away.
    let mut mine: HashMap<(&'static str, String), String> = HashMap::new();
    let mut link = Conn {
        con: None,
        backoff: Backoff::default(),
        retry_at: Instant::now(),
    };
    loop {
        let stopping = p.stop.load(Acquire);
        let batch = next_batch(&p, &mut names, stopping);
        for (fact, json) in &batch {
            if let Some((kind, field)) = fact.field() {
                mine.insert((kind, field), json.clone());
            }
        }
        if link.con.is_none() && Instant::now() >= link.retry_at {
            reconnect(&p, &mut link, &mine);
        }
        if let Some(con) = link.con.as_mut()
            && !batch.is_empty()
        {
            match send(&p, con, &batch) {
                Ok(()) => {
                    p.shared
                        .fleet
                        .published
                        .fetch_add(batch.len() as u64, Relaxed);
                }
                Err(e) => lost(&p, &mut link, &e),
            }
        }
        if stopping && p.inbox.is_empty() {
            return;
        }
    }
}

/// The next facts to send, named for the newest generation (waits up to 100 ms for one).
fn next_batch(p: &Publisher, names: &mut Names, stopping: bool) -> Vec<(Fact, String)> {
    let wait = if stopping {
        Duration::ZERO
    } else {
        Duration::from_millis(100)
    };
    let first = match p.inbox.recv_timeout(wait) {
        Ok(ev) => ev,
        Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => return Vec::new(),
    };
    if p.shared.newest.load(Acquire) != names.generation {
        *names = Names::of(&p.shared.staged());
    }
    let clocks = Clocks::now();
    let mut out = Vec::new();
    for ev in std::iter::once(first).chain(p.inbox.try_iter().take(BATCH - 1)) {
        let Some(fact) = outgoing(&ev, names, clocks) else {
            continue;
        };
        let msg = Message {
            from: p.instance.clone(),
            fact,
        };
        if let Ok(json) = serde_json::to_string(&msg) {
            out.push((msg.fact, json));
        }
    }
    out
}

fn hash_of<'a>(p: &'a Publisher, kind: &str) -> &'a str {
    p.hashes
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("", |(_, h)| h.as_str())
}

/// A state into this instance's hash, signed for its hash and field.
fn keep(p: &Publisher, pipe: &mut redis::Pipeline, kind: &str, field: &str, json: &str, now: u64) {
    let hash = hash_of(p, kind);
    let signed = p.key.sign(&super::entry_place(hash, field), now, json);
    pipe.hset(hash, field, signed).ignore();
}

/// One round trip: each state into this instance's hash, every fact onto the channel.
fn send(
    p: &Publisher,
    con: &mut redis::Connection,
    batch: &[(Fact, String)],
) -> redis::RedisResult<()> {
    let mut pipe = redis::pipe();
    let now = crate::clock::unix_ms();
    for (fact, json) in batch {
        if let Some((kind, field)) = fact.field() {
            keep(p, &mut pipe, kind, &field, json, now);
        }
        pipe.publish(&p.channel, p.key.sign(&p.channel, now, json))
            .ignore();
    }
    for (_, h) in &p.hashes {
        pipe.pexpire(h, KEEP_MS as i64).ignore();
    }
    pipe.query::<()>(con)
}

/// Connect, and send again every state learned meanwhile.
fn reconnect(p: &Publisher, link: &mut Conn, mine: &HashMap<(&'static str, String), String>) {
    let result = p.link.connect().and_then(|mut con| {
        if !mine.is_empty() {
            // Kept, and told: an instance that read the hashes meanwhile hears them too.
            let mut pipe = redis::pipe();
            let now = crate::clock::unix_ms();
            for ((kind, field), json) in mine {
                keep(p, &mut pipe, kind, field, json, now);
                pipe.publish(&p.channel, p.key.sign(&p.channel, now, json))
                    .ignore();
            }
            pipe.query::<()>(&mut con)?;
            p.shared
                .fleet
                .republished
                .fetch_add(mine.len() as u64, Relaxed);
        }
        Ok(con)
    });
    match result {
        Ok(con) => {
            link.con = Some(con);
            link.backoff.reset();
        }
        Err(e) => lost(p, link, &e),
    }
}

fn lost(p: &Publisher, link: &mut Conn, e: &redis::RedisError) {
    if link.con.take().is_some() || link.backoff_fresh() {
        event(
            "warn",
            "fleet: cannot publish to Redis; health stays local and is sent again when it is back",
            serde_json::json!({"error": describe(e)}),
        );
    }
    p.shared.fleet.disconnects.fetch_add(1, Relaxed);
    link.retry_at = Instant::now() + link.backoff.next();
}

impl Conn {
    /// The first failure of a run of them (said once, not at every retry).
    fn backoff_fresh(&self) -> bool {
        self.backoff.is_fresh()
    }
}
