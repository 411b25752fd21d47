//! The lease book: the store writer's authoritative, in-memory record of every owner's lease,
//! and the operations on it (acquire, renew, release, transition, revoke). Each operation
//! returns its outcome and the rows to persist; the writer commits them before it answers.

use super::leases::{ENDED_RETENTION_MS, Lease, Op, Outcome, State};
use std::collections::HashMap;

/// Who asks, for the operations that name a lease they hold.
struct Holder<'a> {
    owner: &'a str,
    generation: u64,
    client: &'a str,
}

impl Holder<'_> {
    /// `l` is this holder's live lease: its generation, through its key.
    fn holds(&self, l: &Lease, now: u64) -> bool {
        l.live(now) && l.generation == self.generation && l.client == self.client
    }
}

/// A live lease runs `ttl_ms` from `now` again; the row to persist, and to answer with.
fn extend(l: &mut Lease, now: u64, ttl_ms: u64, changed: &mut Vec<Lease>) -> Lease {
    l.expires_at = now + ttl_ms;
    l.renewed_at = now;
    changed.push(l.clone());
    l.clone()
}

/// The writer's authoritative book.
#[derive(Default, Debug)]
pub struct Book {
    by_owner: HashMap<String, Lease>,
    /// Connection -> owner of its ACTIVE row (possibly past expiry; checked lazily).
    by_conn: HashMap<String, String>,
}

impl Book {
    pub fn load(rows: impl IntoIterator<Item = Lease>) -> Book {
        let mut b = Book::default();
        for l in rows {
            if l.state == State::Active {
                // Two ACTIVE rows for one connection cannot be written by one writer; if a
                // damaged store had them, the later expiry wins and the other is ignored.
                let keep = match b.by_conn.get(&l.connection).and_then(|o| b.by_owner.get(o)) {
                    Some(other) => other.expires_at < l.expires_at,
                    None => true,
                };
                if keep {
                    b.by_conn.insert(l.connection.clone(), l.owner.clone());
                }
            }
            b.by_owner.insert(l.owner.clone(), l);
        }
        b
    }

    pub fn get(&self, owner: &str) -> Option<&Lease> {
        self.by_owner.get(owner)
    }

    pub fn all(&self) -> impl Iterator<Item = &Lease> {
        self.by_owner.values()
    }

    /// The live holder of a connection, expiring a stale one on the way.
    fn holder(&mut self, conn: &str, now: u64, changed: &mut Vec<Lease>) -> Option<&Lease> {
        let owner = self.by_conn.get(conn)?.clone();
        let live = self.by_owner.get(&owner).is_some_and(|l| l.live(now));
        if !live {
            self.expire(&owner, now, changed);
            return None;
        }
        self.by_owner.get(&owner)
    }

    fn expire(&mut self, owner: &str, now: u64, changed: &mut Vec<Lease>) {
        if let Some(l) = self.by_owner.get_mut(owner)
            && l.state == State::Active
            && l.expires_at <= now
        {
            l.state = State::Expired;
            l.ended_at = Some(l.expires_at);
            l.end_reason = Some("TTL_EXPIRED".into());
            if self.by_conn.get(&l.connection).map(String::as_str) == Some(owner) {
                self.by_conn.remove(&l.connection);
            }
            changed.push(l.clone());
        }
    }

    fn end(&mut self, owner: &str, state: State, reason: &str, now: u64) -> Option<Lease> {
        let l = self.by_owner.get_mut(owner)?;
        l.state = state;
        l.ended_at = Some(now);
        l.end_reason = Some(reason.to_string());
        if self.by_conn.get(&l.connection).map(String::as_str) == Some(owner) {
            self.by_conn.remove(&l.connection);
        }
        Some(l.clone())
    }

    /// The first candidate nobody else holds, or the earliest expiry among the holders.
    fn first_free(
        &mut self,
        candidates: &[String],
        me: &str,
        now: u64,
        changed: &mut Vec<Lease>,
    ) -> Result<String, Option<u64>> {
        let mut earliest: Option<u64> = None;
        for c in candidates {
            match self.holder(c, now, changed) {
                None => return Ok(c.clone()),
                Some(l) if l.owner == me => return Ok(c.clone()),
                Some(l) => earliest = Some(earliest.map_or(l.expires_at, |e| e.min(l.expires_at))),
            }
        }
        Err(earliest)
    }

    /// Apply one operation; returns the outcome and the rows to persist.
    pub fn apply(&mut self, op: Op, now: u64) -> (Outcome, Vec<Lease>) {
        let mut changed = Vec::new();
        let outcome = self.apply_inner(op, now, &mut changed);
        (outcome, changed)
    }

    fn apply_inner(&mut self, op: Op, now: u64, changed: &mut Vec<Lease>) -> Outcome {
        match op {
            Op::Acquire {
                owner,
                client,
                candidates,
                ttl_ms,
            } => {
                self.expire(&owner, now, changed);
                self.acquire(owner, client, &candidates, ttl_ms, (now, changed))
            }
            Op::Renew {
                owner,
                generation,
                client,
                ttl_ms,
            } => {
                self.expire(&owner, now, changed);
                let who = Holder {
                    owner: &owner,
                    generation,
                    client: &client,
                };
                match self.by_owner.get_mut(&owner) {
                    Some(l) if who.holds(l, now) => {
                        Outcome::Renewed(extend(l, now, ttl_ms, changed))
                    }
                    _ => Outcome::Stale,
                }
            }
            Op::Release {
                owner,
                generation,
                client,
                reason,
            } => {
                self.expire(&owner, now, changed);
                let who = Holder {
                    owner: &owner,
                    generation,
                    client: &client,
                };
                self.release(&who, &reason, now, changed)
            }
            Op::Transition {
                owner,
                generation,
                client,
                candidates,
                reason,
            } => {
                self.expire(&owner, now, changed);
                let who = Holder {
                    owner: &owner,
                    generation,
                    client: &client,
                };
                self.transition(&who, &candidates, &reason, now, changed)
            }
            Op::Revoke { owner, reason } => {
                self.expire(&owner, now, changed);
                if self.by_owner.get(&owner).is_some_and(|l| l.live(now)) {
                    changed.extend(self.end(&owner, State::Invalidated, &reason, now));
                    Outcome::Revoked(1)
                } else {
                    Outcome::Revoked(0)
                }
            }
            Op::RevokeClient { client, reason } => {
                self.revoke_where(|l| l.client == client, &reason, now, changed)
            }
            Op::RevokeConnection { connection, reason } => {
                self.revoke_where(|l| l.connection == connection, &reason, now, changed)
            }
        }
    }

    /// End every live lease that `which` picks, with `reason`.
    fn revoke_where(
        &mut self,
        which: impl Fn(&Lease) -> bool,
        reason: &str,
        now: u64,
        changed: &mut Vec<Lease>,
    ) -> Outcome {
        let owners: Vec<String> = self
            .by_owner
            .values()
            .filter(|l| which(l) && l.live(now))
            .map(|l| l.owner.clone())
            .collect();
        for o in &owners {
            changed.extend(self.end(o, State::Invalidated, reason, now));
        }
        Outcome::Revoked(owners.len())
    }

    /// Acquire: the owner's live lease is reused (moved when its connection is no longer a
    /// candidate and a candidate is free); otherwise a new generation on the first free one.
    fn acquire(
        &mut self,
        owner: String,
        client: String,
        candidates: &[String],
        ttl_ms: u64,
        (now, changed): (u64, &mut Vec<Lease>),
    ) -> Outcome {
        if let Some(l) = self.by_owner.get(&owner).filter(|l| l.live(now)) {
            if l.client != client {
                return Outcome::OwnerAlreadyActive;
            }
            let (generation, current) = (l.generation, l.connection.clone());
            // Still on an eligible connection (or nowhere better to go): keep it.
            if !candidates.contains(&current)
                && let Ok(next) = self.first_free(candidates, &owner, now, changed)
            {
                let why = "CONNECTION_INELIGIBLE";
                return self.move_to(&owner, generation, next, why, now, changed);
            }
            let Some(l) = self.by_owner.get_mut(&owner) else {
                return Outcome::Stale; // cannot happen: found live just above
            };
            return Outcome::Reused(extend(l, now, ttl_ms, changed));
        }
        let conn = match self.first_free(candidates, &owner, now, changed) {
            Ok(c) => c,
            Err(retry_at) => return Outcome::Busy { retry_at },
        };
        let generation = self.by_owner.get(&owner).map_or(0, |l| l.generation) + 1;
        let l = Lease {
            owner: owner.clone(),
            client,
            connection: conn.clone(),
            generation,
            state: State::Active,
            acquired_at: now,
            renewed_at: now,
            expires_at: now + ttl_ms,
            ended_at: None,
            end_reason: None,
        };
        self.by_conn.insert(conn, owner.clone());
        self.by_owner.insert(owner, l.clone());
        changed.push(l.clone());
        Outcome::Acquired(l)
    }

    /// Release: the holder's lease ends (releasing twice is fine).
    fn release(
        &mut self,
        who: &Holder<'_>,
        reason: &str,
        now: u64,
        changed: &mut Vec<Lease>,
    ) -> Outcome {
        let Some(l) = self.by_owner.get(who.owner) else {
            return Outcome::Stale;
        };
        if l.generation != who.generation || l.client != who.client {
            return Outcome::Stale;
        }
        match l.state {
            State::Active => {
                let l = self.end(who.owner, State::Released, reason, now);
                changed.extend(l.clone());
                l.map_or(Outcome::Stale, Outcome::Released)
            }
            State::Released => Outcome::Released(l.clone()),
            _ => Outcome::Stale,
        }
    }

    /// Transition: a live lease moves to the first free candidate, same generation (it stays
    /// where it is when its connection is still a candidate).
    fn transition(
        &mut self,
        who: &Holder<'_>,
        candidates: &[String],
        reason: &str,
        now: u64,
        changed: &mut Vec<Lease>,
    ) -> Outcome {
        match self.by_owner.get(who.owner) {
            Some(l) if who.holds(l, now) => {
                if candidates.contains(&l.connection) {
                    return Outcome::Reused(l.clone());
                }
            }
            _ => return Outcome::Stale,
        }
        match self.first_free(candidates, who.owner, now, changed) {
            Ok(next) => self.move_to(who.owner, who.generation, next, reason, now, changed),
            Err(retry_at) => Outcome::Busy { retry_at },
        }
    }

    fn move_to(
        &mut self,
        owner: &str,
        generation: u64,
        next: String,
        reason: &str,
        now: u64,
        changed: &mut Vec<Lease>,
    ) -> Outcome {
        let Some(old) = self.end(owner, State::Invalidated, reason, now) else {
            return Outcome::Stale;
        };
        changed.push(old.clone());
        let l = Lease {
            connection: next.clone(),
            generation,
            state: State::Active,
            acquired_at: now,
            renewed_at: now,
            ended_at: None,
            end_reason: None,
            ..old
        };
        self.by_conn.insert(next, owner.to_string());
        self.by_owner.insert(owner.to_string(), l.clone());
        changed.push(l.clone());
        Outcome::Transitioned(l)
    }

    /// Drop rows that ended long ago; returns their owners (to delete from the store).
    pub fn prune(&mut self, now: u64) -> Vec<String> {
        let old: Vec<String> = self
            .by_owner
            .values()
            .filter(|l| l.state_at(now) != State::Active)
            .filter(|l| l.ended_at.unwrap_or(l.expires_at) + ENDED_RETENTION_MS < now)
            .map(|l| l.owner.clone())
            .collect();
        for o in &old {
            self.by_owner.remove(o);
        }
        old
    }

    /// The live expiry of a connection's lease (0 when free).
    pub fn until(&self, conn: &str, now: u64) -> u64 {
        self.by_conn
            .get(conn)
            .and_then(|o| self.by_owner.get(o))
            .filter(|l| l.live(now))
            .map_or(0, |l| l.expires_at)
    }
}
