//! Flow control end to end, with 2 workers, on io_uring and on epoll: the global concurrency
//! cap, queue depth, the two budgets, cancellation and tenant fairness.

mod common;
use common::*;
use ringside::demo::client;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

both_drivers!(
    concurrency_cap_holds_across_cores,
    an_account_cap_holds_across_its_keys,
    full_queue_rejects_the_newest_fast,
    queued_request_times_out_on_its_budget,
    execution_timeout_closes_the_upstream_before_the_slot_frees,
    random_cancels_leave_nothing_behind,
    one_tenants_burst_does_not_starve_anothers_trickle,
    admin_settings_change_the_budget,
    tenant_quota_holds_across_keys_and_cores,
    reject_policy_moves_on_to_the_next_key,
);

fn sim_with(faults: &[&str]) -> ringside::simulate::Simulator {
    let mut opts = SimOptions::default();
    for f in faults {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    start_sim(opts)
}

/// One key `a` with the given connection settings.
fn one_key(sim: SocketAddr, conn_extra: &str) -> String {
    priority_keys(sim, &["a"], "")
        .replace("  priority = 0\n", &format!("  priority = 0\n{conn_extra}"))
}

/// Client keys for `tenants`, each its own tenant (without keys, a tenant is the client's
/// address, which every test client shares). The key is the name given; the client's id is
/// that name without an `sk-` prefix (so that a view may name ids and still show no key).
fn client_keys(tenants: &[&str]) -> String {
    tenants
        .iter()
        .map(|t| {
            let id = t.trim_start_matches("sk-");
            format!(
                "[[clients]]\nid = \"{id}\"\nkey_sha256 = \"{}\"\n",
                key_sha256(t)
            )
        })
        .collect()
}

fn post_in(
    addr: SocketAddr,
    headers: Vec<(String, String)>,
) -> std::thread::JoinHandle<(u16, Duration, String)> {
    std::thread::spawn(move || {
        let (status, took, code, _) = post_ended(addr, headers);
        (status, took, code)
    })
}

/// One request: status, time taken, error code and when the answer was in.
fn post_ended(
    addr: SocketAddr,
    headers: Vec<(String, String)>,
) -> (u16, Duration, String, Instant) {
    let h: Vec<(&str, &str)> = headers
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let t0 = Instant::now();
    match client::request(
        addr,
        "POST",
        "/v1/chat/completions",
        &h,
        chat("m", false).as_bytes(),
        T,
    ) {
        Ok(r) => {
            let code = r.json()["error"]["code"].as_str().unwrap_or("").to_string();
            (r.status, t0.elapsed(), code, Instant::now())
        }
        Err(_) => (0, t0.elapsed(), String::new(), Instant::now()),
    }
}

fn latency(ms: u64) -> Vec<(String, String)> {
    vec![("x-sim-latency-ms".into(), ms.to_string())]
}

fn peak(sim: &ringside::simulate::Simulator, key: &str) -> u64 {
    sim_stats(sim)["keys"][key]["peak_concurrency"]
        .as_u64()
        .unwrap_or(0)
}

fn an_account_cap_holds_across_its_keys(driver: &str) {
    // Keys a and b are unlimited each, but their account allows one request at a time: four
    // concurrent requests run one by one, and none is refused.
    let sim = sim_with(&[]);
    let body = priority_keys(sim.addr, &["a", "b"], "")
        .replace("  id = \"a\"\n", "  id = \"a\"\n  account = \"org-1\"\n")
        .replace("  id = \"b\"\n", "  id = \"b\"\n  account = \"org-1\"\n")
        + "  [[providers.accounts]]\n  id = \"org-1\"\n  max_concurrent = 1\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let handles: Vec<_> = (0..4).map(|_| post_in(proxy.addr, latency(300))).collect();
    for h in handles {
        assert_eq!(h.join().unwrap().0, 200);
    }
    assert_eq!(
        peak(&sim, "sk-sim-a") + peak(&sim, "sk-sim-b"),
        1,
        "{}",
        sim_stats(&sim)
    );
    let (_, q) = proxy.admin("GET", "/admin/queues");
    let waited: u64 = q["queues"]
        .as_array()
        .map(|l| l.iter().filter_map(|c| c["waited"].as_u64()).sum())
        .unwrap_or(0);
    assert!(waited >= 3, "{q}");
    assert_eq!(q["accounts"][0]["account"], "org-1", "{q}");
    assert_eq!(q["accounts"][0]["max_concurrent"], 1);
    assert_eq!(q["accounts"][0]["running"], 0);
    let m = proxy.metrics();
    assert!(
        m.contains("ringside_account_running{account=\"org-1\"} 0"),
        "{m}"
    );
    assert!(m.contains("ringside_account_max_concurrent{account=\"org-1\"} 1"));
}

fn concurrency_cap_holds_across_cores(driver: &str) {
    let sim = sim_with(&[]);
    let proxy = Proxy::start(driver, 2, "", &one_key(sim.addr, "  max_concurrent = 2\n"));
    let hs: Vec<_> = (0..12).map(|_| post_in(proxy.addr, latency(150))).collect();
    let results: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(results.iter().all(|r| r.0 == 200), "{results:?}");
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 12);
    assert!(
        peak(&sim, "sk-sim-a") <= 2,
        "peak {}",
        peak(&sim, "sk-sim-a")
    );
    let (_, q) = proxy.admin("GET", "/admin/queues");
    assert_eq!(q["queues"][0]["running"], 0, "{q}");
    assert_eq!(q["queues"][0]["queued"], 0);
    assert!(q["queues"][0]["waited"].as_u64().unwrap_or(0) >= 6, "{q}");
}

fn full_queue_rejects_the_newest_fast(driver: &str) {
    let sim = sim_with(&[]);
    let conn = "  max_concurrent = 1\n  max_queue_depth = 2\n";
    let proxy = Proxy::start(driver, 2, "", &one_key(sim.addr, conn));
    let first = post_in(proxy.addr, latency(600));
    std::thread::sleep(Duration::from_millis(100));
    let queued: Vec<_> = (0..2).map(|_| post_in(proxy.addr, latency(0))).collect();
    std::thread::sleep(Duration::from_millis(100));
    let rejected: Vec<_> = (0..3).map(|_| post_in(proxy.addr, latency(0))).collect();
    for h in rejected {
        let (status, took, code) = h.join().unwrap();
        assert_eq!((status, code.as_str()), (429, "RATE_LIMIT_QUEUE_FULL"));
        assert!(took < Duration::from_millis(300), "rejected fast: {took:?}");
    }
    // The refusal's wait is jittered in `retry-after-ms` (whole seconds cannot spread it).
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 429, "the queue is still full: {}", r.text());
    let ms: u64 = r
        .header("retry-after-ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!((800..=1_200).contains(&ms), "{ms}");
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(first.join().unwrap().0, 200);
    for h in queued {
        assert_eq!(h.join().unwrap().0, 200);
    }
    assert_eq!(
        attempts_for(&sim, "sk-sim-a"),
        3,
        "rejected requests never reached the upstream"
    );
}

fn queued_request_times_out_on_its_budget(driver: &str) {
    let sim = sim_with(&[]);
    let conn = "  max_concurrent = 1\n  max_wait_ms = 400\n";
    let proxy = Proxy::start(driver, 2, "", &one_key(sim.addr, conn));
    let holder = post_in(proxy.addr, latency(1_500));
    std::thread::sleep(Duration::from_millis(100));
    let (status, took, code) = post_in(proxy.addr, latency(0)).join().unwrap();
    assert_eq!((status, code.as_str()), (503, "RATE_LIMIT_QUEUE_TIMEOUT"));
    assert!(took >= Duration::from_millis(380), "{took:?}");
    assert!(
        took < Duration::from_millis(650),
        "within 250 ms of the budget: {took:?}"
    );
    assert_eq!(holder.join().unwrap().0, 200);
    assert_eq!(attempts_for(&sim, "sk-sim-a"), 1);
    // Local overload is never the upstream's fault.
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "active", "{c}");
}

fn execution_timeout_closes_the_upstream_before_the_slot_frees(driver: &str) {
    // The head comes at once, then nothing: only the execution budget can end it (it is never
    // shorter than the upstream's first-byte timeout).
    let sim = sim_with(&["key:sk-sim-a=stall-after-head;times=1"]);
    let conn = "  max_concurrent = 1\n  execution_max_wait_ms = 400\n";
    let body = one_key(sim.addr, conn) + "[upstream]\nfirst_byte_timeout_ms = 300\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let hung = std::thread::spawn(move || post_ended(proxy.addr, vec![]));
    std::thread::sleep(Duration::from_millis(100));
    let next = std::thread::spawn(move || post_ended(proxy.addr, vec![]));
    let (status, took, code, hung_end) = hung.join().unwrap();
    assert_eq!(
        (status, code.as_str()),
        (504, "RATE_LIMIT_EXECUTION_TIMEOUT")
    );
    assert!(
        took >= Duration::from_millis(380) && took < Duration::from_millis(900),
        "{took:?}"
    );
    let (status, _, _, next_end) = next.join().unwrap();
    assert_eq!(status, 200);
    // Had it not waited for the slot it would have been answered some 300 ms earlier; compared
    // by when each answer came in, not by durations whose starts a busy machine can shift.
    assert!(
        next_end + Duration::from_millis(50) >= hung_end,
        "the queued one started after the slot freed"
    );
    // The hung upstream connection was closed (the simulator saw its client go).
    let deadline = Instant::now() + Duration::from_secs(3);
    while sim_stats(&sim)["keys"]["sk-sim-a"]["in_flight"].as_u64() != Some(0) {
        assert!(
            Instant::now() < deadline,
            "upstream still open: {}",
            sim_stats(&sim)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Not the upstream's fault either: nothing cooled.
    let (_, c) = proxy.admin("GET", "/admin/connections");
    assert_eq!(c["connections"][0]["state"], "active", "{c}");
}

fn random_cancels_leave_nothing_behind(driver: &str) {
    let sim = sim_with(&[]);
    let conn = "  max_concurrent = 3\n";
    let body = one_key(sim.addr, conn) + "[server]\naccess_log = false\n";
    let proxy = Proxy::start(
        driver,
        2,
        "",
        &body.replace("[server]\naccess_log = false\n", ""),
    );
    let addr = proxy.addr;
    let req = chat("m", false);
    let raw = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-sim-latency-ms: 2\r\ncontent-length: {}\r\n\r\n{req}",
        req.len()
    );
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let raw = raw.clone();
            std::thread::spawn(move || {
                let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
                for _ in 0..1_250 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
                        continue;
                    };
                    let _ = s.write_all(raw.as_bytes());
                    match seed % 4 {
                        // Leave at once, while queued, or mid-request.
                        0 => {}
                        1 => std::thread::sleep(Duration::from_micros(seed % 3_000)),
                        _ => {
                            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                            let mut b = [0u8; 4096];
                            let _ = std::io::Read::read(&mut s, &mut b);
                        }
                    }
                    drop(s);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Everything settles: nothing running, nothing queued, nothing in flight.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, q) = proxy.admin("GET", "/admin/queues");
        let m = proxy.metrics();
        let idle = q["queues"][0]["running"] == 0
            && q["queues"][0]["queued"] == 0
            && m.lines()
                .filter(|l| l.starts_with("ringside_in_flight"))
                .all(|l| l.ends_with(" 0"));
        if idle {
            break;
        }
        assert!(Instant::now() < deadline, "did not settle: {q}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // And every slot is free: 3 slow requests run at once.
    let hs: Vec<_> = (0..3).map(|_| post_in(addr, latency(300))).collect();
    let t0 = Instant::now();
    for h in hs {
        assert_eq!(h.join().unwrap().0, 200);
    }
    assert!(
        t0.elapsed() < Duration::from_millis(850),
        "all three slots were free"
    );
}

fn one_tenants_burst_does_not_starve_anothers_trickle(driver: &str) {
    let sim = sim_with(&[]);
    let body = one_key(sim.addr, "  max_concurrent = 1\n")
        + &client_keys(&["tenant-burst", "tenant-trickle"]);
    let proxy = Proxy::start(driver, 2, "", &body);
    let burst_headers = |_: usize| {
        vec![
            (
                "authorization".to_string(),
                "Bearer tenant-burst".to_string(),
            ),
            ("x-sim-latency-ms".into(), "60".into()),
        ]
    };
    let burst: Vec<_> = (0..16)
        .map(|i| post_in(proxy.addr, burst_headers(i)))
        .collect();
    std::thread::sleep(Duration::from_millis(150));
    let mut trickle = Vec::new();
    for _ in 0..3 {
        let h = vec![
            (
                "authorization".to_string(),
                "Bearer tenant-trickle".to_string(),
            ),
            ("x-sim-latency-ms".into(), "60".into()),
        ];
        trickle.push(post_in(proxy.addr, h).join().unwrap());
    }
    let burst: Vec<_> = burst.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(burst.iter().all(|r| r.0 == 200));
    for (status, took, _) in &trickle {
        assert_eq!(*status, 200);
        // Behind the whole burst it would wait ~16 x 60 ms; taking turns it waits a few slots.
        assert!(
            *took < Duration::from_millis(600),
            "trickle request waited {took:?}"
        );
    }
}

fn admin_settings_change_the_budget(driver: &str) {
    let sim = sim_with(&[]);
    let proxy = Proxy::start(driver, 2, "", &one_key(sim.addr, "  max_concurrent = 1\n"));
    let (_, s) = proxy.admin("GET", "/admin/settings");
    assert_eq!(s["flow"]["max_wait_ms"]["value"], 30_000, "{s}");
    assert_eq!(s["flow"]["max_wait_ms"]["source"], "default");
    let r = proxy.admin_with(
        "PATCH",
        "/admin/settings",
        r#"{"flow":{"max_wait_ms":300}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["flow"]["max_wait_ms"]["source"], "admin");
    let holder = post_in(proxy.addr, latency(1_200));
    std::thread::sleep(Duration::from_millis(100));
    let (status, took, _) = post_in(proxy.addr, latency(0)).join().unwrap();
    assert_eq!(status, 503);
    assert!(took < Duration::from_millis(700), "{took:?}");
    assert_eq!(holder.join().unwrap().0, 200);
    let bad = proxy.admin_with("PATCH", "/admin/settings", r#"{"flow":{"nope":1}}"#);
    assert_eq!(bad.status, 400);
    let m = proxy.metrics();
    assert!(m.contains("ringside_queue_rejections_total{provider=\"sim\",connection=\"a\",reason=\"queue_timeout\"} 1"), "{m}");
}

fn tenant_quota_holds_across_keys_and_cores(driver: &str) {
    let sim = sim_with(&[]);
    let body = priority_keys(sim.addr, &["a", "b"], "")
        + "[flow]\ntenant_requests_per_minute = 4\n"
        + &client_keys(&["sk-client-one", "sk-client-two"]);
    let proxy = Proxy::start(driver, 2, "", &body);
    let ask = |who: &str| {
        let auth = format!("Bearer {who}");
        proxy.post(
            "/v1/chat/completions",
            &[("authorization", auth.as_str())],
            &chat("m", false),
        )
    };
    // Near a minute boundary the window may turn over mid-test (the count restarts), so count
    // refusals: 9 requests over at most two windows of 4 leave at least one refused.
    let statuses: Vec<u16> = (0..9).map(|_| ask("sk-client-one").status).collect();
    let refused = statuses.iter().filter(|&&s| s == 429).count();
    assert!((1..=5).contains(&refused), "{statuses:?}");
    assert_eq!(
        attempts_for(&sim, "sk-sim-a") + attempts_for(&sim, "sk-sim-b"),
        9 - refused as u64
    );
    let r = ask("sk-client-one");
    if r.status == 429 {
        assert_eq!(r.json()["error"]["code"], "TENANT_QUOTA_EXCEEDED");
        assert!(r.header("retry-after").is_some());
    }
    assert_eq!(
        ask("sk-client-two").status,
        200,
        "another tenant is unaffected"
    );
    let (_, t) = proxy.admin("GET", "/admin/tenants");
    assert_eq!(t["tenants"].as_array().map(Vec::len), Some(2), "{t}");
    // Named by the client's id, never by its key.
    assert!(!t.to_string().contains("sk-client"), "{t}");
    let names: Vec<&str> = (t["tenants"].as_array().into_iter().flatten())
        .filter_map(|x| x["name"].as_str())
        .collect();
    assert!(
        names.contains(&"client-one") && names.contains(&"client-two"),
        "{t}"
    );
}

fn reject_policy_moves_on_to_the_next_key(driver: &str) {
    let sim = sim_with(&[]);
    let conn = "  max_concurrent = 1\n  on_saturation = \"reject\"\n";
    let body = priority_keys(sim.addr, &["a", "b"], "")
        .replace("  priority = 0\n", &format!("  priority = 0\n{conn}"))
        .replace("  priority = 1\n", &format!("  priority = 1\n{conn}"));
    let proxy = Proxy::start(driver, 2, "", &body);
    let busy_a = post_in(proxy.addr, latency(800));
    std::thread::sleep(Duration::from_millis(150));
    // a is saturated: the next request goes to b at once, not into a queue.
    let t0 = Instant::now();
    let r = client::request(
        proxy.addr,
        "POST",
        "/v1/chat/completions",
        &[],
        chat("m", false).as_bytes(),
        T,
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    assert!(t0.elapsed() < Duration::from_millis(500));
    // Both saturated: a fast 429.
    let busy_b = post_in(proxy.addr, latency(800));
    std::thread::sleep(Duration::from_millis(150));
    let (status, took, code) = post_in(proxy.addr, latency(0)).join().unwrap();
    assert_eq!((status, code.as_str()), (429, "RATE_LIMIT_QUEUE_FULL"));
    assert!(took < Duration::from_millis(400), "{took:?}");
    assert_eq!(busy_a.join().unwrap().0, 200);
    assert_eq!(busy_b.join().unwrap().0, 200);
}
