//! `Idempotency-Key` across the fleet: the key's row lives in Redis, signed like every entry
//! of the fleet, and each instance decides with the single instance's own rules
//! (`store::idempotency::Book`) inside an optimistic transaction (the row is watched, the book
//! decides, its change commits only if nobody wrote the row meanwhile; else it runs again).
//! A claim in flight is a row too, so a duplicate on another instance waits for it or gets its
//! answer. A row that is not a member's (unsigned, forged, moved) is ignored as if absent: a
//! Redis writer cannot hand clients an answer. Redis away: the instance's own book decides.
//!
//! Key: `{prefix}:idem:<key>` (the key is already a hash of tenant and client value).

use super::leases::Leases;
use crate::store::idempotency::{Book, Change, Op, Outcome};

/// How many times an operation runs again when its row changed under it.
const TRIES: usize = 16;

/// Apply `op` to the fleet's book; `Err`: Redis failed (the asker's instance decides alone).
pub(super) fn apply(
    l: &mut Leases,
    con: &mut redis::Connection,
    op: &Op,
) -> redis::RedisResult<Outcome> {
    for _ in 0..TRIES {
        if let Some(out) = try_apply(l, con, op)? {
            return Ok(out);
        }
    }
    Ok(Outcome::Unavailable)
}

fn try_apply(
    l: &mut Leases,
    con: &mut redis::Connection,
    op: &Op,
) -> redis::RedisResult<Option<Outcome>> {
    let place = l.settings.key(&format!("idem:{}", op.key()));
    redis::cmd("WATCH").arg(&place).query::<()>(con)?;
    let text: Option<String> = redis::cmd("GET").arg(&place).query(con)?;
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con)?;
    let now = secs * 1000 + micros / 1000;
    let row = text
        .as_deref()
        .and_then(|t| l.reader.entry(&place, t))
        .and_then(|body| serde_json::from_str::<serde_json::Value>(body).ok());
    let local = format!("idem/{}", op.key());
    let mut book = Book::load(row.map(|v| (local, v)).into_iter(), now);
    let before = book.row(op.key());
    let outcome = book.apply(op.clone(), now, &mut Vec::<Change>::new());
    let after = book.row(op.key());
    if before == after {
        redis::cmd("UNWATCH").query::<()>(con)?;
        return Ok(Some(outcome.unwrap_or(Outcome::Claimed)));
    }
    let mut pipe = redis::pipe();
    pipe.atomic();
    match after {
        Some((row, until)) => {
            let signed = l.key.sign(&place, now, &row.to_string());
            pipe.cmd("SET")
                .arg(&place)
                .arg(signed)
                .arg("PX")
                .arg(until.saturating_sub(now).max(1))
                .ignore();
        }
        None => {
            pipe.cmd("DEL").arg(&place).ignore();
        }
    }
    let committed: Option<redis::Value> = pipe.query(con)?;
    Ok(committed.map(|_| outcome.unwrap_or(Outcome::Claimed)))
}
