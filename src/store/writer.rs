//! The store's one writer thread: everything queued is batched into one commit, lease and
//! idempotency operations are decided by the writer's books and answered after it.

use super::{Op, idempotency, leases};
use heed::types::{SerdeJson, Str};
use heed::{Database, Env, WithoutTls};
use serde_json::Value;

fn load_book(env: &Env<WithoutTls>, db: Database<'static, Str, SerdeJson<Value>>) -> leases::Book {
    let Ok(r) = env.read_txn() else {
        return leases::Book::default();
    };
    let Ok(iter) = db.prefix_iter(&r, "lease/") else {
        return leases::Book::default();
    };
    leases::Book::load(
        iter.filter_map(Result::ok)
            .filter_map(|(_, v)| serde_json::from_value(v).ok()),
    )
}

/// The `Idempotency-Key` answers kept within their window.
fn load_idempotency(
    env: &Env<WithoutTls>,
    db: Database<'static, Str, SerdeJson<Value>>,
) -> idempotency::Book {
    let Ok(r) = env.read_txn() else {
        return idempotency::Book::default();
    };
    let Ok(iter) = db.prefix_iter(&r, "idem/") else {
        return idempotency::Book::default();
    };
    let rows = iter.filter_map(Result::ok).map(|(k, v)| (k.to_string(), v));
    idempotency::Book::load(rows, crate::clock::unix_ms())
}

/// The writer's state: the lease and idempotency books and the view it keeps current.
struct Writer {
    book: leases::Book,
    idem: idempotency::Book,
    view: Option<&'static leases::LeaseView>,
    last_prune: u64,
}

impl Writer {
    fn refresh_view(&self, conns: impl IntoIterator<Item = String>, now: u64) {
        if let Some(v) = self.view {
            for c in conns {
                v.set(&c, self.book.until(&c, now));
            }
        }
    }
}

/// What one batch owes once committed: answers, flushes, the connections whose lease changed.
#[derive(Default)]
struct Owed {
    flushes: Vec<crossbeam_channel::Sender<()>>,
    replies: Vec<(super::Reply, leases::Outcome)>,
    idem_replies: Vec<(
        futures_channel::oneshot::Sender<idempotency::Outcome>,
        idempotency::Outcome,
    )>,
    touched: Vec<String>,
    idem_rows: Vec<idempotency::Change>,
}

impl Writer {
    /// One queued operation, inside the batch's write transaction.
    fn apply(
        &mut self,
        db: Database<'static, Str, SerdeJson<Value>>,
        txn: &mut heed::RwTxn<'_>,
        op: Op,
        now: u64,
        owed: &mut Owed,
    ) -> heed::Result<()> {
        match op {
            Op::Put(k, v) => db.put(txn, &k, &v)?,
            Op::Delete(k) => {
                db.delete(txn, &k)?;
            }
            Op::Flush(s) => owed.flushes.push(s),
            Op::Lease(op, reply) => {
                let (outcome, changed) = self.book.apply(op, now);
                for l in changed {
                    let v = serde_json::to_value(&l).unwrap_or(Value::Null);
                    db.put(txn, &leases::Lease::store_key(&l.owner), &v)?;
                    owed.touched.push(l.connection);
                }
                owed.replies.push((reply, outcome));
            }
            Op::Idempotency(op, reply) => {
                let outcome = self.idem.apply(op, now, &mut owed.idem_rows);
                if let (Some(reply), Some(outcome)) = (reply, outcome) {
                    owed.idem_replies.push((reply, outcome));
                }
            }
            Op::AttachView(v) => {
                self.view = Some(v);
                let conns: Vec<String> = self.book.all().map(|l| l.connection.clone()).collect();
                owed.touched.extend(conns);
            }
        }
        Ok(())
    }
}

pub(super) fn writer(
    env: &'static Env<WithoutTls>,
    db: Database<'static, Str, SerdeJson<Value>>,
    rx: crossbeam_channel::Receiver<Op>,
) {
    let mut w = Writer {
        book: load_book(env, db),
        idem: load_idempotency(env, db),
        view: None,
        last_prune: 0,
    };
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        // One commit (one fsync) for everything queued, up to a bound that keeps replies prompt.
        batch.extend(rx.try_iter().take(1023));
        let now = crate::clock::unix_ms();
        let mut owed = Owed::default();
        let pruned = if now.saturating_sub(w.last_prune) > 600_000 {
            w.last_prune = now;
            w.idem.prune(now, &mut owed.idem_rows);
            w.book.prune(now)
        } else {
            Vec::new()
        };
        let result = (|| -> heed::Result<()> {
            let mut txn = env.write_txn()?;
            for owner in &pruned {
                db.delete(&mut txn, &leases::Lease::store_key(owner))?;
            }
            for op in batch {
                w.apply(db, &mut txn, op, now, &mut owed)?;
            }
            for change in owed.idem_rows.drain(..) {
                match change {
                    idempotency::Change::Put(k, v) => db.put(&mut txn, &k, &v)?,
                    idempotency::Change::Delete(k) => {
                        db.delete(&mut txn, &k)?;
                    }
                }
            }
            txn.commit()
        })();
        if let Err(e) = result {
            crate::log::event(
                "error",
                "store commit failed",
                serde_json::json!({"error": e.to_string()}),
            );
            // Nothing of this batch is on disk: the book goes back to what is.
            w.book = load_book(env, db);
            owed.touched
                .extend(w.book.all().map(|l| l.connection.clone()));
            for (_, o) in &mut owed.replies {
                *o = leases::Outcome::Unavailable;
            }
            for (_, o) in &mut owed.idem_replies {
                *o = idempotency::Outcome::Unavailable;
            }
        }
        // The view changes before anyone hears the answer, so a request that follows an
        // acknowledged acquire already sees the connection taken.
        w.refresh_view(owed.touched, now);
        for (reply, outcome) in owed.replies {
            reply.send(outcome);
        }
        for (reply, outcome) in owed.idem_replies {
            let _ = reply.send(outcome);
        }
        for s in owed.flushes {
            let _ = s.send(());
        }
    }
}
