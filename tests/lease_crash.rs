//! Crash safety of exclusive leases: acquire/renew/release churn from several clients while
//! the server is killed with SIGKILL at random moments and restarted on the same data_dir.
//! Every acknowledged operation must be there after the restart, no connection may have two
//! owners, and no raw owner value or client key may be anywhere in the data directory.

mod common;
use common::*;
use rand::Rng;
use ringside::simulate::SimOptions;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const KEY: &str = "sk-ringside-crash-lease-0123456789";
const CONNS: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ack {
    Active(u64),
    Released(u64),
}

#[derive(Default)]
struct Ledger {
    /// The last acknowledged state per owner value.
    acked: HashMap<String, Ack>,
    /// Owners with an operation whose answer never came (killed mid-flight).
    uncertain: HashSet<String>,
    /// Every owner value ever used or handed out.
    all: HashSet<String>,
}

fn config(sim: std::net::SocketAddr) -> String {
    let mut s = format!(
        "[session]\nlease_ttl_ms = 600000\n[[providers]]\nid = \"sim\"\ndialect = \"openai\"\nbase_url = \"http://{sim}/v1\"\n"
    );
    let mut allowed = Vec::new();
    for i in 0..CONNS {
        s.push_str(&format!(
            "  [[providers.connections]]\n  id = \"c{i}\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n"
        ));
        allowed.push(format!("\"sim/c{i}\""));
    }
    let digest: String = ringside::clients::digest(KEY.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    s + &format!(
        "[[clients]]\nid = \"crash\"\nkey_sha256 = \"{digest}\"\nscopes = [\"inference\", \"lease:exclusive\"]\nallowed_connections = [{}]\n",
        allowed.join(", ")
    )
}

fn random_owner() -> String {
    use base64::Engine;
    let raw: [u8; 32] = rand::thread_rng().r#gen();
    format!(
        "vlo_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    )
}

fn call(
    addr: std::net::SocketAddr,
    owner: Option<&str>,
    body: &str,
) -> Option<ringside::demo::client::Reply> {
    let mut h = vec![("x-api-key", KEY), ("content-type", "application/json")];
    if let Some(o) = owner {
        h.push(("x-ringside-lease-owner", o));
    }
    ringside::demo::client::request(
        addr,
        "POST",
        "/v1/session-leases",
        &h,
        body.as_bytes(),
        Duration::from_secs(5),
    )
    .ok()
}

/// One client: churn on its own owners until the server stops answering.
fn churn(addr: std::net::SocketAddr, ledger: &Mutex<Ledger>, stop: Instant) {
    let mut rng = rand::thread_rng();
    let mut mine: Vec<String> = Vec::new();
    while Instant::now() < stop {
        let pick = if mine.is_empty() || rng.gen_bool(0.3) {
            None
        } else {
            Some(mine[rng.gen_range(0..mine.len())].clone())
        };
        let state = pick
            .as_ref()
            .and_then(|o| ledger.lock().ok()?.acked.get(o).copied());
        let (owner, body) = match (pick, state) {
            (Some(o), Some(Ack::Active(g))) if rng.gen_bool(0.5) => {
                (Some(o), format!(r#"{{"action":"renew","generation":{g}}}"#))
            }
            (Some(o), Some(Ack::Active(g))) => (
                Some(o),
                format!(r#"{{"action":"release","generation":{g}}}"#),
            ),
            (Some(o), _) => (Some(o), r#"{"action":"acquire"}"#.to_string()),
            // A fresh owner: half made here, half made by Ringside and returned once.
            (None, _) if rng.gen_bool(0.5) => {
                (Some(random_owner()), r#"{"action":"acquire"}"#.to_string())
            }
            (None, _) => (None, r#"{"action":"acquire"}"#.to_string()),
        };
        if let Some(o) = &owner
            && let Ok(mut l) = ledger.lock()
        {
            l.all.insert(o.clone());
            l.uncertain.insert(o.clone());
        }
        let Some(r) = call(addr, owner.as_deref(), &body) else {
            return; // killed: the operation in flight stays uncertain
        };
        let v = r.json();
        let owner = owner.or_else(|| v["lease_owner"].as_str().map(str::to_string));
        let Some(o) = owner else { continue };
        let Ok(mut l) = ledger.lock() else { return };
        l.all.insert(o.clone());
        l.uncertain.remove(&o);
        if r.status == 200 {
            let g = v["generation"].as_u64().unwrap_or(0);
            let ack = if v["state"] == "RELEASED" {
                Ack::Released(g)
            } else {
                Ack::Active(g)
            };
            l.acked.insert(o.clone(), ack);
            if !mine.contains(&o) {
                mine.push(o);
            }
        }
    }
}

fn hash(owner: &str) -> String {
    ringside::clients::digest(owner.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn check(proxy: &Proxy, ledger: &Ledger) -> usize {
    let (s, v) = proxy.admin("GET", "/admin/leases");
    assert_eq!(s, 200);
    let rows: HashMap<String, &Value> = v["leases"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| (r["owner_sha256"].as_str().unwrap_or("").to_string(), r))
                .collect()
        })
        .unwrap_or_default();
    let mut holders: HashMap<String, usize> = HashMap::new();
    for r in rows.values().filter(|r| r["state"] == "ACTIVE") {
        *holders
            .entry(r["connection"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    assert!(
        holders.values().all(|&n| n == 1),
        "a connection with two owners: {holders:?}"
    );
    let mut checked = 0;
    for (o, ack) in &ledger.acked {
        let row = rows.get(&hash(o));
        if ledger.uncertain.contains(o) {
            // Its last operation may or may not have landed; what was acknowledged before holds.
            let g = match ack {
                Ack::Active(g) | Ack::Released(g) => *g,
            };
            let got = row.and_then(|r| r["generation"].as_u64()).unwrap_or(0);
            assert!(got >= g, "generation went back for an owner: {got} < {g}");
            continue;
        }
        let row = row.unwrap_or_else(|| panic!("an acknowledged lease is gone: {ack:?}"));
        let want = match ack {
            Ack::Active(g) => ("ACTIVE", *g),
            Ack::Released(g) => ("RELEASED", *g),
        };
        assert_eq!(
            (
                row["state"].as_str().unwrap_or(""),
                row["generation"].as_u64().unwrap_or(0)
            ),
            want,
            "acknowledged state lost"
        );
        checked += 1;
    }
    checked
}

fn files_under(dir: &std::path::Path, out: &mut Vec<Vec<u8>>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                files_under(&p, out);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push(b);
            }
        }
    }
}

#[test]
fn acknowledged_lease_operations_survive_sigkill() {
    let sim = start_sim(SimOptions::default());
    let body = config(sim.addr);
    let ledger = Mutex::new(Ledger::default());
    let dir = tempdir::new();
    let path = dir.0.clone();
    let mut dir = Some(dir);
    let mut checked = 0;
    let mut rng = rand::thread_rng();
    for round in 0..5 {
        let d = dir.take().unwrap_or_else(|| tempdir::Dir(path.clone()));
        let mut proxy = Proxy::start_in("auto", 2, "", &body, d);
        // The store came back: everything acknowledged before the kill is there.
        checked += check(&proxy, &ledger.lock().unwrap_or_else(|e| e.into_inner()));
        // Free the connections for this round's churn (operator revocation).
        let (_, v) = proxy.admin("GET", "/admin/leases");
        for r in v["leases"].as_array().cloned().unwrap_or_default() {
            if r["state"] == "ACTIVE" {
                let o = r["owner_sha256"].as_str().unwrap_or("");
                assert_eq!(proxy.admin("DELETE", &format!("/admin/leases/{o}")).0, 200);
            }
        }
        if let Ok(mut l) = ledger.lock() {
            // Revoked leases read as ended now; forget them so the check stays exact.
            l.acked.retain(|_, a| matches!(a, Ack::Released(_)));
        }
        let kill_after = Duration::from_millis(rng.gen_range(150..700));
        let stop = Instant::now() + Duration::from_secs(5);
        std::thread::scope(|s| {
            for _ in 0..4 {
                let ledger = &ledger;
                let addr = proxy.addr;
                s.spawn(move || churn(addr, ledger, stop));
            }
            std::thread::sleep(kill_after);
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(proxy.child.id() as i32, libc::SIGKILL);
            }
            let _ = proxy.child.wait();
        });
        assert!(round < 5);
        // Keep the directory for the next start.
        proxy.dir.0 = std::path::PathBuf::from("/nonexistent/ringside-crash-test");
    }
    let d = tempdir::Dir(path.clone());
    let mut proxy = Proxy::start_in("auto", 2, "", &body, d);
    let l = ledger.lock().unwrap_or_else(|e| e.into_inner());
    checked += check(&proxy, &l);
    eprintln!(
        "lease crash test: {checked} acknowledged states checked, {} owners, {} uncertain",
        l.all.len(),
        l.uncertain.len()
    );
    assert!(
        checked > 10,
        "the churn acknowledged too little to judge ({checked})"
    );
    proxy.dir.0 = std::path::PathBuf::from("/nonexistent/ringside-crash-test");
    drop(proxy);
    // Removed when the test ends.
    let _cleanup = tempdir::Dir(path.clone());
    // No raw owner value or client key anywhere in the data directory.
    let mut files = Vec::new();
    files_under(&path, &mut files);
    assert!(!files.is_empty());
    let mut needles: Vec<&[u8]> = l.all.iter().map(|o| &o.as_bytes()[4..]).collect();
    needles.push(KEY.as_bytes());
    for f in &files {
        for n in &needles {
            assert!(
                !f.windows(n.len()).any(|w| w == *n),
                "a raw secret is on disk"
            );
        }
    }
}
