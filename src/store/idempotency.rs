//! One answer per `Idempotency-Key`: the book of keys the store writer keeps (the single
//! writer is the serialization point, so two cores racing with one key get one owner). A key
//! (already hashed with its tenant by the caller: the client's value is never kept) is claimed
//! by the first request that carries it; while that one runs, a duplicate hears `InFlight`; a
//! completed JSON answer is kept for the window and replayed to duplicates; a different body
//! under the same key hears `Mismatch`. Completed answers are written to the store under
//! `idem/` and survive a restart; claims in flight live in memory only (a crash releases them).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The store key of a completed answer.
pub fn store_key(key: &str) -> String {
    format!("idem/{key}")
}

/// What a request asks of the book.
#[derive(Clone, Debug)]
pub enum Op {
    /// Claim `key` for a request whose body hashes to `digest`: a claim in flight lasts until
    /// `until` (the request's deadline) unless finished before; the book keeps at most `max`
    /// keys.
    Claim {
        key: String,
        digest: u64,
        until: u64,
        max: usize,
    },
    /// The owner's request ended: its answer kept until `until`, or (`None`) the key released.
    Finish {
        key: String,
        digest: u64,
        answer: Option<Answer>,
        until: u64,
    },
}

impl Op {
    /// The key the operation is about.
    pub fn key(&self) -> &str {
        match self {
            Op::Claim { key, .. } | Op::Finish { key, .. } => key,
        }
    }
}

/// A completed answer, as kept and replayed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub status: u16,
    /// The JSON answer the first request's client received.
    pub body: String,
}

/// What a claim hears.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The request owns the key: it goes upstream, and its end finishes the key.
    Claimed,
    /// Another request with the same key and body is running.
    InFlight,
    /// The key was used with another body.
    Mismatch,
    /// The key's answer, completed within the window.
    Replay(Answer),
    /// The book could not answer (the store is away): the request goes on unguarded.
    Unavailable,
}

/// A request's claim on its key, held until the request ends: finished with the answer its
/// client was sent, or released when dropped unfinished (a failure, a client gone, a panic),
/// so that a duplicate may go upstream in its place.
pub struct Claim {
    store: &'static super::Store,
    key: String,
    digest: u64,
    window_ms: u64,
    max_answer_bytes: usize,
    /// The answer read whole before the commit (its bytes, whether its body ended cleanly).
    pub whole: Option<(bytes::Bytes, bool)>,
    /// What the client was sent: kept for duplicates when the request ends well.
    pub sent: Option<bytes::Bytes>,
    finished: bool,
}

impl Claim {
    pub fn new(
        store: &'static super::Store,
        key: String,
        digest: u64,
        window_ms: u64,
        max_answer_bytes: usize,
    ) -> Claim {
        Claim {
            store,
            key,
            digest,
            window_ms,
            max_answer_bytes,
            whole: None,
            sent: None,
            finished: false,
        }
    }

    /// The request ended with `status`: a whole 2xx JSON answer is kept for the window, anything
    /// else releases the key.
    pub fn finish(mut self, status: u16) {
        let answer = self
            .sent
            .take()
            .filter(|b| (200..300).contains(&status) && b.len() <= self.max_answer_bytes)
            .and_then(|b| String::from_utf8(b.to_vec()).ok())
            .map(|body| Answer { status, body });
        self.send(answer);
    }

    fn send(&mut self, answer: Option<Answer>) {
        self.finished = true;
        self.store.idempotency_nowait(Op::Finish {
            key: std::mem::take(&mut self.key),
            digest: self.digest,
            answer,
            until: crate::clock::unix_ms() + self.window_ms,
        });
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.finished {
            self.send(None);
        }
    }
}

/// A key's row: in the store a completed answer; in the fleet's Redis a claim in flight too.
#[derive(Serialize, Deserialize)]
struct Row {
    digest: u64,
    until: u64,
    /// `None`: a claim in flight.
    #[serde(default)]
    answer: Option<Answer>,
}

enum Entry {
    InFlight {
        digest: u64,
        until: u64,
    },
    Done {
        digest: u64,
        until: u64,
        answer: Answer,
    },
}

impl Entry {
    fn until(&self) -> u64 {
        match self {
            Entry::InFlight { until, .. } | Entry::Done { until, .. } => *until,
        }
    }
}

/// The writer's book of keys.
#[derive(Default)]
pub struct Book {
    entries: HashMap<String, Entry>,
}

/// A change the writer commits for the book: a row written, or a row deleted.
pub enum Change {
    Put(String, serde_json::Value),
    Delete(String),
}

impl Book {
    /// The book from the store's rows (`idem/` keys and their values), the expired left out.
    pub fn load(rows: impl Iterator<Item = (String, serde_json::Value)>, now: u64) -> Book {
        let mut entries = HashMap::new();
        for (k, v) in rows {
            let (Some(key), Ok(row)) = (k.strip_prefix("idem/"), serde_json::from_value::<Row>(v))
            else {
                continue;
            };
            if row.until > now {
                let (digest, until) = (row.digest, row.until);
                let entry = match row.answer {
                    Some(answer) => Entry::Done {
                        digest,
                        until,
                        answer,
                    },
                    None => Entry::InFlight { digest, until },
                };
                entries.insert(key.to_string(), entry);
            }
        }
        Book { entries }
    }

    /// Apply `op` at `now`: its outcome (for a claim) and the rows to write.
    pub fn apply(&mut self, op: Op, now: u64, changes: &mut Vec<Change>) -> Option<Outcome> {
        match op {
            Op::Claim {
                key,
                digest,
                until,
                max,
            } => Some(self.claim(key, digest, until, max, now, changes)),
            Op::Finish {
                key,
                digest,
                answer,
                until,
            } => {
                // Only the claim this request holds is finished (a claim that expired and was
                // taken by another request is that one's).
                let ours = matches!(
                    self.entries.get(&key),
                    Some(Entry::InFlight { digest: d, .. }) if *d == digest
                );
                if !ours {
                    return None;
                }
                match answer {
                    Some(answer) if until > now => {
                        let row = Row {
                            digest,
                            until,
                            answer: Some(answer.clone()),
                        };
                        let v = serde_json::to_value(&row).unwrap_or(serde_json::Value::Null);
                        changes.push(Change::Put(store_key(&key), v));
                        let done = Entry::Done {
                            digest,
                            until,
                            answer,
                        };
                        self.entries.insert(key, done);
                    }
                    _ => {
                        self.entries.remove(&key);
                    }
                }
                None
            }
        }
    }

    fn claim(
        &mut self,
        key: String,
        digest: u64,
        until: u64,
        max: usize,
        now: u64,
        changes: &mut Vec<Change>,
    ) -> Outcome {
        match self.entries.get(&key) {
            Some(e) if e.until() > now => {
                return match e {
                    Entry::InFlight { digest: d, .. } | Entry::Done { digest: d, .. }
                        if *d != digest =>
                    {
                        Outcome::Mismatch
                    }
                    Entry::InFlight { .. } => Outcome::InFlight,
                    Entry::Done { answer, .. } => Outcome::Replay(answer.clone()),
                };
            }
            Some(Entry::Done { .. }) => changes.push(Change::Delete(store_key(&key))),
            _ => {}
        }
        if self.entries.len() >= max.max(1) && !self.entries.contains_key(&key) {
            self.make_room(max.max(1), now, changes);
        }
        self.entries.insert(key, Entry::InFlight { digest, until });
        Outcome::Claimed
    }

    /// Bounded: the expired go first, then the answers nearest their end (a claim in flight is
    /// never dropped for room; past the bound, the oldest answers make way).
    fn make_room(&mut self, max: usize, now: u64, changes: &mut Vec<Change>) {
        self.prune(now, changes);
        while self.entries.len() >= max {
            let oldest = self
                .entries
                .iter()
                .filter(|(_, e)| matches!(e, Entry::Done { .. }))
                .min_by_key(|(_, e)| e.until())
                .map(|(k, _)| k.clone());
            let Some(k) = oldest else {
                break;
            };
            self.entries.remove(&k);
            changes.push(Change::Delete(store_key(&k)));
        }
    }

    /// Let go of every expired key (their rows deleted).
    pub fn prune(&mut self, now: u64, changes: &mut Vec<Change>) {
        self.entries.retain(|k, e| {
            let live = e.until() > now;
            if !live && matches!(e, Entry::Done { .. }) {
                changes.push(Change::Delete(store_key(k)));
            }
            live
        });
    }

    /// `key`'s entry as a row (a claim in flight too) and when it ends; `None`: no entry.
    pub fn row(&self, key: &str) -> Option<(serde_json::Value, u64)> {
        let (digest, until, answer) = match self.entries.get(key)? {
            Entry::InFlight { digest, until } => (*digest, *until, None),
            Entry::Done {
                digest,
                until,
                answer,
            } => (*digest, *until, Some(answer.clone())),
        };
        let row = Row {
            digest,
            until,
            answer,
        };
        Some((serde_json::to_value(&row).ok()?, until))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
#[path = "idempotency_tests.rs"]
mod tests;
