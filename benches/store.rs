//! criterion: durable state on the request path (session pin lookup, lease fence read) and the
//! lease acquire round trip through the store writer with durable commits. Then a paced run:
//! 1,000 acquires/s from 4 threads for 3 s (each followed by its release), reporting the
//! round-trip p50/p99 the way a core sees it (batched durable commits).

use criterion::{Criterion, black_box};
use ringside::http::head::{HeadLimits, parse_request};
use ringside::store::leases::{Op, Outcome, fence};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const HEAD: &[u8] = b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.example.com\r\n\
Authorization: Bearer sk-client-0123456789abcdef\r\nContent-Type: application/json\r\n\
X-Session-Id: 4f1c2d9a-6b0e-4c53-9d7e-1b2f3a4c5d6e\r\nContent-Length: 512\r\n\r\n";

fn temp_store(name: &str) -> &'static ringside::store::Store {
    let dir = std::env::temp_dir().join(format!("ringside-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    ringside::store::open(&dir.to_string_lossy(), 1 << 28, false).expect("store")
}

fn acquire(owner: String, conn: usize) -> Op {
    Op::Acquire {
        owner,
        client: "bench".into(),
        candidates: vec![format!("p/c{conn}")],
        ttl_ms: 120_000,
    }
}

fn release(owner: String) -> Op {
    Op::Release {
        owner,
        generation: 0, // patched by the caller
        client: "bench".into(),
        reason: "OWNER_EXIT".into(),
    }
}

fn acquire_release(store: &ringside::store::Store, owner: &str, conn: usize) -> Duration {
    let t = Instant::now();
    let g = match store.lease_blocking(acquire(owner.to_string(), conn)) {
        Outcome::Acquired(l) | Outcome::Reused(l) => l.generation,
        other => panic!("acquire: {other:?}"),
    };
    let took = t.elapsed();
    let mut op = release(owner.to_string());
    if let Op::Release { generation, .. } = &mut op {
        *generation = g;
    }
    store.lease_blocking(op);
    took
}

fn benches(c: &mut Criterion) {
    let store = temp_store("criterion");
    let mut g = c.benchmark_group("store");
    let (head, _) = parse_request(HEAD, HeadLimits::default())
        .expect("head")
        .expect("complete");
    // The core-local pin table as the request path reads it (a hit).
    let mut pins: HashMap<Arc<str>, (usize, u64)> = HashMap::new();
    for i in 0..10_000 {
        pins.insert(Arc::from(format!("pin/{i:032x}")), (i % 8, u64::MAX));
    }
    let key = ringside::store::pins::session_key(&head).expect("session");
    pins.insert(Arc::from(key.as_str()), (3, u64::MAX));
    g.bench_function("pin_lookup_request_path_10k_pins", |b| {
        b.iter(|| {
            let k = ringside::store::pins::session_key(black_box(&head))?;
            pins.get(k.as_str()).copied()
        })
    });
    store.put(
        key.clone(),
        serde_json::json!({"conn": "p/c3", "until": u64::MAX}),
    );
    store.flush();
    g.bench_function("pin_lookup_lmdb_miss_path", |b| {
        b.iter(|| ringside::store::pins::pinned(store, black_box(&key), 1))
    });
    let Outcome::Acquired(l) = store.lease_blocking(acquire("fence-owner".into(), 99)) else {
        panic!("acquire")
    };
    g.bench_function("lease_fence_read", |b| {
        b.iter(|| {
            let row = store.lease_row(black_box("fence-owner"));
            fence(row.as_ref(), l.generation, "bench", 1)
        })
    });
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(4));
    let mut n = 0u64;
    g.bench_function("lease_acquire_round_trip_durable_serial", |b| {
        b.iter(|| {
            n += 1;
            acquire_release(store, &format!("serial-{n}"), (n % 8) as usize)
        })
    });
    g.finish();
}

/// 1,000 acquires/s (plus their releases) from 4 threads for 3 s; durable commits.
fn paced() {
    let store = temp_store("paced");
    let per_thread = Duration::from_micros(4_000); // 4 threads x 250/s
    let run = Duration::from_secs(3);
    let all: Vec<Duration> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                s.spawn(move || {
                    let start = Instant::now();
                    let mut out = Vec::new();
                    let mut next = start;
                    let mut i = 0u64;
                    while start.elapsed() < run {
                        let now = Instant::now();
                        if now < next {
                            std::thread::sleep(next - now);
                        }
                        next += per_thread;
                        i += 1;
                        out.push(acquire_release(
                            store,
                            &format!("t{t}-{i}"),
                            (i % 64) as usize + 64 * t,
                        ));
                    }
                    out
                })
            })
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut v: Vec<u128> = all.iter().map(Duration::as_micros).collect();
    v.sort_unstable();
    let q = |p: f64| {
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "store/lease_acquire_paced_1000_per_s_durable: {} acquires in {:?}, round trip p50 {} us, p99 {} us, max {} us",
        v.len(),
        run,
        q(0.50),
        q(0.99),
        v.last().copied().unwrap_or(0)
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    paced();
}
