//! The durable store: one LMDB (heed) environment under `data_dir`, opened once. Cores and the
//! admin read it inline with read transactions that never cross an `.await`; only the store
//! writer thread writes, batching everything queued into one commit. What lives here survives a
//! restart: terminal connection states (with their reset epochs) and settings changed through
//! the admin API.

pub mod pins;

use heed::types::{SerdeJson, Str};
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};
use serde_json::Value;

enum Op {
    Put(String, Value),
    Delete(String),
    /// Answered once everything queued before it is committed.
    Flush(crossbeam_channel::Sender<()>),
}

pub struct Store {
    env: &'static Env<WithoutTls>,
    db: Database<'static, Str, SerdeJson<Value>>,
    tx: crossbeam_channel::Sender<Op>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

/// Durable commits by default; `fast` skips the sync (the last writes may be lost on power loss).
pub fn open(dir: &str, map_size: usize, fast: bool) -> Result<&'static Store, String> {
    let path = std::path::Path::new(dir).join("store");
    std::fs::create_dir_all(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut opts = EnvOpenOptions::new().read_txn_without_tls();
    opts.map_size(map_size).max_dbs(4);
    if fast {
        // SAFETY: NO_SYNC only trades durability of the last commits for speed (documented).
        unsafe {
            opts.flags(EnvFlags::NO_SYNC);
        }
    }
    // SAFETY: the environment is opened once per process and its files are ours alone.
    let env = unsafe { opts.open(&path) }
        .map_err(|e| format!("cannot open the store at {}: {e}", path.display()))?;
    let env: &'static Env<WithoutTls> = Box::leak(Box::new(env));
    let _ = env.clear_stale_readers();
    let wtxn = env.write_txn().map_err(|e| format!("store: {e}"))?;
    let db = env
        .create_databases_and_commit(wtxn, |dbo, w| {
            dbo.create_database::<Str, SerdeJson<Value>>(w, Some("state"))
                .map(CommitOrAbort::<_, ()>::Commit)
        })
        .map_err(|e: heed::Error| format!("store: {e}"))?
        .commit()
        .ok_or("store: database creation aborted")?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("ringside-store".into())
        .spawn(move || writer(env, db, rx))
        .map_err(|e| format!("cannot start the store writer: {e}"))?;
    Ok(Box::leak(Box::new(Store { env, db, tx })))
}

fn writer(
    env: &'static Env<WithoutTls>,
    db: Database<'static, Str, SerdeJson<Value>>,
    rx: crossbeam_channel::Receiver<Op>,
) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut flushes = Vec::new();
        let result = (|| -> heed::Result<()> {
            let mut w = env.write_txn()?;
            for op in batch {
                match op {
                    Op::Put(k, v) => db.put(&mut w, &k, &v)?,
                    Op::Delete(k) => {
                        db.delete(&mut w, &k)?;
                    }
                    Op::Flush(s) => flushes.push(s),
                }
            }
            w.commit()
        })();
        if let Err(e) = result {
            crate::log::event(
                "error",
                "store commit failed",
                serde_json::json!({"error": e.to_string()}),
            );
        }
        for s in flushes {
            let _ = s.send(());
        }
    }
}

impl Store {
    /// Queue a write (never blocks the caller).
    pub fn put(&self, key: String, value: Value) {
        let _ = self.tx.send(Op::Put(key, value));
    }

    pub fn delete(&self, key: String) {
        let _ = self.tx.send(Op::Delete(key));
    }

    /// Wait until everything queued so far is committed (shutdown, tests).
    pub fn flush(&self) {
        let (s, r) = crossbeam_channel::bounded(1);
        if self.tx.send(Op::Flush(s)).is_ok() {
            let _ = r.recv_timeout(std::time::Duration::from_secs(5));
        }
    }

    /// One entry (a short read transaction).
    pub fn get(&self, key: &str) -> Option<Value> {
        let r = self.env.read_txn().ok()?;
        self.db.get(&r, key).ok().flatten()
    }

    /// Every entry under a key prefix (a short read transaction, never held across an await).
    pub fn scan(&self, prefix: &str) -> Vec<(String, Value)> {
        let Ok(r) = self.env.read_txn() else {
            return Vec::new();
        };
        let Ok(iter) = self.db.prefix_iter(&r, prefix) else {
            return Vec::new();
        };
        iter.filter_map(Result::ok)
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_survive_reopening_in_a_new_process_state() {
        let dir = std::env::temp_dir().join(format!("ringside-store-test-{}", std::process::id()));
        let d = dir.to_string_lossy().to_string();
        let s = super::open(&d, 1 << 24, false).unwrap();
        s.put(
            "terminal/p/a".into(),
            serde_json::json!({"kind": "banned", "epoch": 2}),
        );
        s.put(
            "terminal/p/b".into(),
            serde_json::json!({"kind": "expired", "epoch": 0}),
        );
        s.put("settings/flow/max_wait_ms".into(), serde_json::json!(5000));
        s.delete("terminal/p/b".into());
        s.flush();
        let t = s.scan("terminal/");
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].0, "terminal/p/a");
        assert_eq!(t[0].1["epoch"], 2);
        assert_eq!(s.scan("settings/")[0].1, 5000);
        let _ = std::fs::remove_dir_all(dir);
    }
}
