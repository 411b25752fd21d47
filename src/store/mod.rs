//! The durable store: one LMDB (heed) environment under `data_dir`, opened once. Cores and the
//! admin read it inline with read transactions that never cross an `.await`; only the store
//! writer thread writes, batching everything queued into one commit. What lives here survives a
//! restart: terminal connection states (with their reset epochs), settings changed through
//! the admin API, and the resilience state with time left on it (`saved`).

pub mod idempotency;
pub mod lease_book;
pub mod lease_view;
pub mod leases;
pub mod pins;
pub mod remote;
pub mod sealed;
mod writer;

use heed::types::{SerdeJson, Str};
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions, WithoutTls};
use serde_json::Value;

enum Op {
    Put(String, Value),
    Delete(String),
    /// Answered once everything queued before it is committed.
    Flush(crossbeam_channel::Sender<()>),
    /// A lease operation, decided by the writer's book and answered after its commit.
    Lease(leases::Op, Reply),
    /// From now on, keep this view of leased connections up to date.
    AttachView(&'static leases::LeaseView),
    /// An `Idempotency-Key` claim or finish, decided by the writer's book (a claim answered
    /// after its commit).
    Idempotency(
        idempotency::Op,
        Option<futures_channel::oneshot::Sender<idempotency::Outcome>>,
    ),
}

pub struct Store {
    env: &'static Env<WithoutTls>,
    db: Database<'static, Str, SerdeJson<Value>>,
    tx: crossbeam_channel::Sender<Op>,
    /// In fleet mode, where the lease book is (`remote`).
    remote: std::sync::OnceLock<crossbeam_channel::Sender<remote::Remote>>,
    /// In fleet mode, where writes of shared entries go too (`remote::SHARED`).
    replica: std::sync::OnceLock<crossbeam_channel::Sender<remote::Replicated>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

/// Where a lease answer goes: a core's task (woken across threads), a plain thread, nowhere.
pub enum Reply {
    Task(futures_channel::oneshot::Sender<leases::Outcome>),
    Thread(crossbeam_channel::Sender<leases::Outcome>),
    None,
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
        .spawn(move || writer::writer(env, db, rx))
        .map_err(|e| format!("cannot start the store writer: {e}"))?;
    Ok(Box::leak(Box::new(Store {
        env,
        db,
        tx,
        remote: Default::default(),
        replica: Default::default(),
    })))
}

/// Every entry under `prefix` in the store under `dir`, read without writing anything: for
/// `ringside check`, which may run beside a live server (LMDB readers never block its writer).
/// No store yet is no entries.
pub fn read_saved(
    dir: &str,
    map_size: usize,
    prefix: &str,
) -> Result<Vec<(String, Value)>, String> {
    let path = std::path::Path::new(dir).join("store");
    if !path.join("data.mdb").exists() {
        return Ok(Vec::new());
    }
    let mut opts = EnvOpenOptions::new().read_txn_without_tls();
    opts.map_size(map_size).max_dbs(4);
    // SAFETY: READ_ONLY never writes the files; the server that owns them may run meanwhile.
    unsafe {
        opts.flags(EnvFlags::READ_ONLY);
    }
    // SAFETY: opened once in this short-lived process, read-only.
    let env = unsafe { opts.open(&path) }
        .map_err(|e| format!("cannot read the store at {}: {e}", path.display()))?;
    let rtxn = env.read_txn().map_err(|e| format!("store: {e}"))?;
    let db: Option<Database<Str, SerdeJson<Value>>> = env
        .open_databases_and_commit(rtxn, |dbo, rtxn| {
            dbo.open_database(rtxn, Some("state"))
                .map(CommitOrAbort::<_, ()>::Commit)
        })
        .map_err(|e: heed::Error| format!("store: {e}"))?
        .commit()
        .flatten();
    let Some(db) = db else {
        return Ok(Vec::new());
    };
    let r = env.read_txn().map_err(|e| format!("store: {e}"))?;
    let rows = db
        .prefix_iter(&r, prefix)
        .map_err(|e| format!("store: {e}"))?
        .filter_map(Result::ok)
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Ok(rows)
}

impl Store {
    /// Queue a write (never blocks the caller).
    pub fn put(&self, key: String, value: Value) {
        self.replicate(&key, Some(&value));
        let _ = self.tx.send(Op::Put(key, value));
    }

    pub fn delete(&self, key: String) {
        self.replicate(&key, None);
        let _ = self.tx.send(Op::Delete(key));
    }

    /// Another instance's write of a shared entry (`remote::SHARED`): kept here, not sent on.
    pub fn apply_replicated(&self, key: String, value: Option<Value>) {
        let _ = self.tx.send(match value {
            Some(v) => Op::Put(key, v),
            None => Op::Delete(key),
        });
    }

    /// Send a lease operation to the writer; the answer comes after its commit.
    pub fn lease(&self, op: leases::Op) -> futures_channel::oneshot::Receiver<leases::Outcome> {
        let (tx, rx) = futures_channel::oneshot::channel();
        self.send_lease(op, Reply::Task(tx));
        rx
    }

    /// An `Idempotency-Key` operation: a claim's answer comes after its commit (a finish has
    /// none; a dropped answer reads as unavailable).
    pub fn idempotency(
        &self,
        op: idempotency::Op,
    ) -> futures_channel::oneshot::Receiver<idempotency::Outcome> {
        let (tx, rx) = futures_channel::oneshot::channel();
        self.send_idempotency(op, Some(tx));
        rx
    }

    /// An `Idempotency-Key` finish (nobody waits for it).
    pub fn idempotency_nowait(&self, op: idempotency::Op) {
        self.send_idempotency(op, None);
    }

    /// To the fleet in fleet mode (its book is shared), else to the writer.
    fn send_idempotency(
        &self,
        op: idempotency::Op,
        reply: Option<futures_channel::oneshot::Sender<idempotency::Outcome>>,
    ) {
        let Some(to) = self.remote.get() else {
            return self.idempotency_here(op, reply);
        };
        if let Err(e) = to.send(remote::Remote::Idempotency(op, reply))
            && let remote::Remote::Idempotency(op, reply) = e.0
        {
            self.idempotency_here(op, reply);
        }
    }

    /// An `Idempotency-Key` operation on this instance's own book (the fleet's when Redis is
    /// away).
    pub fn idempotency_here(
        &self,
        op: idempotency::Op,
        reply: Option<futures_channel::oneshot::Sender<idempotency::Outcome>>,
    ) {
        let _ = self.tx.send(Op::Idempotency(op, reply));
    }

    /// A lease operation whose answer nobody waits for (revocations).
    pub fn lease_nowait(&self, op: leases::Op) {
        self.send_lease(op, Reply::None);
    }

    /// To the fleet's lease thread in fleet mode, else to the writer; a dropped reply reads as
    /// unavailable to whoever waits for it.
    fn send_lease(&self, op: leases::Op, reply: Reply) {
        if let Err((op, reply)) = self.route(op, reply)
            && !self.leases_elsewhere()
        {
            let _ = self.tx.send(Op::Lease(op, reply));
        }
    }

    /// Blocking form for plain threads, never a core (admin, benchmarks, tests).
    pub fn lease_blocking(&self, op: leases::Op) -> leases::Outcome {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.send_lease(op, Reply::Thread(tx));
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or(leases::Outcome::Unavailable)
    }

    /// Keep `view` current with the live leases (at start, before serving).
    pub fn attach_view(&self, view: &'static leases::LeaseView) {
        let _ = self.tx.send(Op::AttachView(view));
        self.flush();
    }

    /// One owner's lease row (a short read transaction).
    pub fn lease_row(&self, owner: &str) -> Option<leases::Lease> {
        serde_json::from_value(self.get(&leases::Lease::store_key(owner))?).ok()
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

    #[test]
    fn expired_pins_are_purged_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("ringside-pins-test-{}", std::process::id()));
        let d = dir.to_string_lossy().to_string();
        let s = super::open(&d, 1 << 24, false).unwrap();
        s.put(
            "pin/old".into(),
            serde_json::json!({"conn": "p/a", "until": 1_000}),
        );
        s.put(
            "pin/live".into(),
            serde_json::json!({"conn": "p/a", "until": 9_000}),
        );
        s.put("pin/broken".into(), serde_json::json!({"conn": "p/a"}));
        s.put("terminal/p/a".into(), serde_json::json!({"kind": "banned"}));
        s.flush();
        assert_eq!(super::pins::purge_expired(s, 5_000), 2);
        let left: Vec<String> = s.scan("pin/").into_iter().map(|(k, _)| k).collect();
        assert_eq!(left, ["pin/live"]);
        assert_eq!(s.scan("terminal/").len(), 1);
        let _ = std::fs::remove_dir_all(dir);
    }
}
