//! Exclusive session leases across the fleet: the lease book lives in Redis and every instance
//! applies operations to it with the single instance's own rules (`store::lease_book::Book`),
//! made atomic by an optimistic transaction: the rows an operation reads are watched, the book
//! decides, and its changes commit only if none of those rows changed meanwhile (else it runs
//! again). An operation is acknowledged only after Redis applied it; generations climb per
//! owner as in one instance. Each inference request of a lease key is fenced against Redis
//! before it is sent upstream. Redis unreachable: every lease operation and fence fails closed
//! (`LEASE_SERVICE_UNAVAILABLE`), never open.
//!
//! Keys: `{prefix}:lease:o:<owner>` the owner's row (JSON; kept a day past its end, so that an
//! owner's generation keeps climbing), `{prefix}:lease:c:<provider/connection>` the owner
//! holding the connection, `{prefix}:lease:k:<client>` the owners of a client key.

use super::link::{Backoff, Link};
use super::signed::FleetKey;
use super::trust::Reader;
use crate::config::FleetSettings;
use crate::state::core::Shared;
use crate::store::leases::{Book, ENDED_RETENTION_MS, Lease, Op, Outcome, State};
use crate::store::remote::{BookUnavailable, Remote};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};

/// How many times an operation runs again when a row it read changed under it.
const TRIES: usize = 16;

/// Delete the connection's holder entry only if it still names this owner.
const UNHOLD: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

pub(super) struct Leases {
    pub link: Link,
    pub shared: Arc<Shared>,
    pub stop: Arc<AtomicBool>,
    pub settings: FleetSettings,
    pub rx: Receiver<Remote>,
    /// What every row and message is signed with, and what checks the rows read.
    pub key: FleetKey,
    pub reader: Reader,
}

impl Leases {
    fn owner_key(&self, owner: &str) -> String {
        self.settings.key(&format!("lease:o:{owner}"))
    }
    fn conn_key(&self, conn: &str) -> String {
        self.settings.key(&format!("lease:c:{conn}"))
    }
    fn client_key(&self, client: &str) -> String {
        self.settings.key(&format!("lease:k:{client}"))
    }
    pub(super) fn channel(s: &FleetSettings) -> String {
        s.key("leases")
    }
}

pub(super) fn run(mut l: Leases) {
    let mut con: Option<redis::Connection> = None;
    let mut backoff = Backoff::default();
    let mut retry_at = Instant::now();
    loop {
        let req = match l.rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) if l.stop.load(Acquire) => return,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if con.is_none() && Instant::now() >= retry_at {
            match l.link.connect() {
                Ok(c) => {
                    con = Some(c);
                    backoff.reset();
                }
                Err(_) => retry_at = Instant::now() + backoff.next(),
            }
        }
        let ok = match con.as_mut() {
            Some(c) => answer(&mut l, c, req),
            None => {
                refuse(&l, req);
                true
            }
        };
        if !ok {
            con = None;
            retry_at = Instant::now() + backoff.next();
        }
    }
}

/// Redis is away: the asker hears that the book cannot be reached (an idempotency key goes to
/// the instance's own book).
fn refuse(l: &Leases, req: Remote) {
    match req {
        Remote::Lease(_, reply) => reply.send(Outcome::Unavailable),
        Remote::Row(_, tx) => {
            let _ = tx.send(Err(BookUnavailable));
        }
        Remote::Rows(tx) => {
            let _ = tx.send(Err(BookUnavailable));
        }
        Remote::Idempotency(op, reply) => l.shared.store.idempotency_here(op, reply),
    }
}

/// Answer one request; false when the connection to Redis failed.
fn answer(l: &mut Leases, con: &mut redis::Connection, req: Remote) -> bool {
    match req {
        Remote::Lease(op, reply) => {
            let out = apply(l, con, op);
            let ok = out.is_ok();
            reply.send(out.unwrap_or(Outcome::Unavailable));
            ok
        }
        Remote::Row(owner, tx) => {
            let row = get_row(l, con, &owner);
            let ok = row.is_ok();
            let _ = tx.send(row.map_err(|_| BookUnavailable));
            ok
        }
        Remote::Rows(tx) => {
            let rows = all_rows(l, con);
            let ok = rows.is_ok();
            let _ = tx.send(rows.map_err(|_| BookUnavailable));
            ok
        }
        Remote::Idempotency(op, reply) => match super::idempotency::apply(l, con, &op) {
            Ok(outcome) => {
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
                true
            }
            Err(_) => {
                l.shared.store.idempotency_here(op, reply);
                false
            }
        },
    }
}

/// The rows a member wrote at `keys` (read as `rows`): what another writer put there is
/// counted, said and left out, as if the row were absent (a fence then refuses the request).
fn parse(reader: &mut Reader, keys: &[String], rows: Vec<Option<String>>) -> Vec<Lease> {
    let mut out = Vec::new();
    for (key, row) in keys.iter().zip(rows) {
        let Some(row) = row else { continue };
        let Some(body) = reader.entry(key, &row) else {
            continue;
        };
        match serde_json::from_str::<Lease>(body) {
            Ok(lease) if valid_row(&lease, key) => out.push(lease),
            _ => reader.invalid(key),
        }
    }
    out
}

/// Whether a row holds what the book writes: an owner digest (the row's own key), a client
/// id, a `provider/connection` label and a short printable reason.
fn valid_row(row: &Lease, key: &str) -> bool {
    key.strip_suffix(row.owner.as_str())
        .is_some_and(|k| k.ends_with("lease:o:"))
        && row.owner.len() == 64
        && row.owner.bytes().all(|b| b.is_ascii_hexdigit())
        && crate::names::valid_id(&row.client)
        && valid_label(&row.connection)
        && row
            .end_reason
            .as_deref()
            .is_none_or(|r| r.len() <= 64 && r.bytes().all(|b| b.is_ascii_graphic()))
}

/// `provider/connection`, each part an id.
pub(super) fn valid_label(label: &str) -> bool {
    label
        .split_once('/')
        .is_some_and(|(p, c)| crate::names::valid_id(p) && crate::names::valid_id(c))
}

fn get_row(
    l: &mut Leases,
    con: &mut redis::Connection,
    owner: &str,
) -> redis::RedisResult<Option<Lease>> {
    let key = l.owner_key(owner);
    let row: Option<String> = redis::cmd("GET").arg(&key).query(con)?;
    Ok(parse(&mut l.reader, &[key], vec![row]).pop())
}

/// Every row of the fleet's book.
pub(super) fn all_rows(
    l: &mut Leases,
    con: &mut redis::Connection,
) -> redis::RedisResult<Vec<Lease>> {
    let keys = scan(con, &l.settings.key("lease:o:*"))?;
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(con)?;
    Ok(parse(&mut l.reader, &keys, rows))
}

pub(super) fn scan(con: &mut redis::Connection, pattern: &str) -> redis::RedisResult<Vec<String>> {
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(500)
            .query(con)?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            return Ok(keys);
        }
    }
}

/// The owners an operation names, the connections it looks at, and the client it sweeps.
fn reads(op: &Op) -> (Vec<String>, Vec<String>, Option<String>) {
    match op {
        Op::Acquire {
            owner, candidates, ..
        }
        | Op::Transition {
            owner, candidates, ..
        } => (vec![owner.clone()], candidates.clone(), None),
        Op::Renew { owner, .. } | Op::Release { owner, .. } | Op::Revoke { owner, .. } => {
            (vec![owner.clone()], Vec::new(), None)
        }
        Op::RevokeClient { client, .. } => (Vec::new(), Vec::new(), Some(client.clone())),
        Op::RevokeConnection { connection, .. } => (Vec::new(), vec![connection.clone()], None),
    }
}

/// Apply `op` to the fleet's book, running it again while rows it read change under it.
fn apply(l: &mut Leases, con: &mut redis::Connection, op: Op) -> redis::RedisResult<Outcome> {
    for _ in 0..TRIES {
        if let Some(out) = try_apply(l, con, op.clone())? {
            return Ok(out);
        }
    }
    Ok(Outcome::Unavailable) // contended beyond reason: the asker may try again
}

/// One optimistic try: `None` when a watched row changed before the commit.
fn try_apply(
    l: &mut Leases,
    con: &mut redis::Connection,
    op: Op,
) -> redis::RedisResult<Option<Outcome>> {
    let (mut owners, conns, client) = reads(&op);
    let mut watched: Vec<String> = owners.iter().map(|o| l.owner_key(o)).collect();
    watched.extend(conns.iter().map(|c| l.conn_key(c)));
    watched.extend(client.iter().map(|c| l.client_key(c)));
    redis::cmd("WATCH").arg(&watched).query::<()>(con)?;
    if !conns.is_empty() {
        let keys: Vec<String> = conns.iter().map(|c| l.conn_key(c)).collect();
        let holders: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(con)?;
        owners.extend(holders.into_iter().flatten());
    }
    if let Some(c) = &client {
        let members: Vec<String> = redis::cmd("SMEMBERS").arg(l.client_key(c)).query(con)?;
        owners.extend(members);
    }
    owners.sort();
    owners.dedup();
    let owner_keys: Vec<String> = owners.iter().map(|o| l.owner_key(o)).collect();
    let rows: Vec<Lease> = if owner_keys.is_empty() {
        Vec::new()
    } else {
        redis::cmd("WATCH").arg(&owner_keys).query::<()>(con)?;
        let rows = redis::cmd("MGET").arg(&owner_keys).query(con)?;
        parse(&mut l.reader, &owner_keys, rows)
    };
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con)?;
    let now = secs * 1000 + micros / 1000;
    let mut book = Book::load(rows);
    let (outcome, changed) = book.apply(op, now);
    if changed.is_empty() {
        redis::cmd("UNWATCH").query::<()>(con)?;
        return Ok(Some(outcome));
    }
    let mut pipe = redis::pipe();
    pipe.atomic();
    for row in &changed {
        write_row(l, &mut pipe, row, book.until(&row.connection, now), now);
    }
    let committed: Option<redis::Value> = pipe.query(con)?;
    if committed.is_none() {
        return Ok(None);
    }
    for row in &changed {
        l.shared
            .leases
            .set(&row.connection, book.until(&row.connection, now));
    }
    Ok(Some(outcome))
}

/// The writes of one changed row, and the news of its connection for the other instances.
fn write_row(l: &Leases, pipe: &mut redis::Pipeline, row: &Lease, until: u64, now: u64) {
    let keep = if row.state == State::Active {
        row.expires_at.saturating_sub(now) + ENDED_RETENTION_MS
    } else {
        ENDED_RETENTION_MS
    };
    let json = serde_json::to_string(row).unwrap_or_default();
    let key = l.owner_key(&row.owner);
    let signed = l.key.sign(&key, now, &json);
    pipe.cmd("SET")
        .arg(key)
        .arg(signed)
        .arg("PX")
        .arg(keep.max(1))
        .ignore();
    if row.state == State::Active {
        pipe.cmd("SET")
            .arg(l.conn_key(&row.connection))
            .arg(&row.owner)
            .ignore();
        pipe.sadd(l.client_key(&row.client), &row.owner).ignore();
    } else {
        pipe.cmd("EVAL")
            .arg(UNHOLD)
            .arg(1)
            .arg(l.conn_key(&row.connection))
            .arg(&row.owner)
            .ignore();
        pipe.srem(l.client_key(&row.client), &row.owner).ignore();
    }
    let news = serde_json::json!({"conn": row.connection, "until": until});
    let on = Leases::channel(&l.settings);
    let signed = l.key.sign(&on, now, &news.to_string());
    pipe.publish(on, signed).ignore();
}

/// Which connections the fleet's leases hold now, into this instance's view (at start and
/// after Redis was away: what changed meanwhile is not replayed).
pub(super) fn load_view(
    shared: &Shared,
    settings: &FleetSettings,
    con: &mut redis::Connection,
    reader: &mut Reader,
) -> redis::RedisResult<usize> {
    let prefix = settings.key("lease:c:");
    let keys = scan(con, &format!("{prefix}*"))?;
    let mut held = std::collections::HashMap::new();
    if !keys.is_empty() {
        let owners: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(con)?;
        let owner_keys: Vec<String> = owners
            .iter()
            .flatten()
            .map(|o| settings.key(&format!("lease:o:{o}")))
            .collect();
        if !owner_keys.is_empty() {
            let rows = redis::cmd("MGET").arg(&owner_keys).query(con)?;
            let rows = parse(reader, &owner_keys, rows);
            let now = crate::clock::unix_ms();
            for r in rows.into_iter().filter(|r| r.live(now)) {
                held.insert(r.connection.clone(), r.expires_at);
            }
        }
    }
    let generation = shared.staged();
    for (p, c) in generation.conn_labels.iter().filter(|(p, _)| !p.is_empty()) {
        let label = format!("{p}/{c}");
        shared
            .leases
            .set(&label, held.get(&label).copied().unwrap_or(0));
    }
    Ok(held.len())
}
