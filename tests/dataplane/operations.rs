//! What an operator relies on: credentials and internal headers never forwarded, a graceful
//! shutdown that drains a live stream, `/v1/models` and the metrics, and running out of file
//! descriptors blaming no key.

use crate::both_drivers;
use crate::common::*;
use crate::sim_proxy;
use ringside::demo::client;
use ringside::simulate::SimOptions;
use std::io::{Read, Write};

both_drivers!(
    credentials_and_internal_headers_never_forwarded,
    graceful_shutdown_drains_a_live_stream,
    models_and_metrics,
    running_out_of_descriptors_blames_no_key,
);

fn credentials_and_internal_headers_never_forwarded(driver: &str) {
    let (sim, proxy) = sim_proxy(driver, SimOptions::default());
    let headers = [
        ("authorization", "Bearer client-secret-123"),
        ("x-api-key", "client-secret-456"),
        ("x-ringside-session", "sess-1"),
        ("x-ringside-lease-owner", "vlo_secret"),
        ("x-session-id", "sess-2"),
        (
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ),
    ];
    let r = proxy.post("/v1/chat/completions", &headers, &chat("smart", false));
    assert_eq!(r.status, 200);
    let seen = sim.state.stats.recent_json().to_string();
    assert!(
        !seen.contains("client-secret"),
        "client credentials forwarded: {seen}"
    );
    assert!(
        !seen.contains("sess-1") && !seen.contains("sess-2") && !seen.contains("vlo_secret"),
        "{seen}"
    );
    assert!(!seen.to_ascii_lowercase().contains("x-ringside"), "{seen}");
    assert!(
        seen.contains("sk-sim-a") || seen.contains("sk-sim-b"),
        "the connection's key is injected"
    );
    assert!(
        seen.contains("0af7651916cd43dd8448eb211c80319c"),
        "traceparent passes through"
    );
    // And the upstream key never reaches the client.
    assert!(!String::from_utf8_lossy(&r.raw_body).contains("sk-sim"));
    assert!(!r.headers.iter().any(|(_, v)| v.contains("sk-sim")));
}

fn graceful_shutdown_drains_a_live_stream(driver: &str) {
    let (_sim, mut proxy) = sim_proxy(
        driver,
        SimOptions {
            events: 8,
            interval_ms: 100,
            ..Default::default()
        },
    );
    let mut s = raw_client(proxy.addr);
    let req = raw_chat("smart", true);
    s.write_all(req.as_bytes()).unwrap();
    let mut tmp = [0u8; 4096];
    let mut got = Vec::new();
    while !got.windows(6).any(|w| w == b"data: ") {
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&tmp[..n]);
    }
    // SIGTERM mid-stream: the stream still completes, then the process exits 0.
    let p = proxy.child.id();
    // SAFETY: kill(2) on our own child's pid.
    let killer = std::thread::spawn(move || unsafe { libc::kill(p as i32, libc::SIGTERM) });
    got.extend_from_slice(&read_all(s));
    killer.join().unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.contains("data: [DONE]"),
        "stream cut by shutdown: {text}"
    );
    assert!(text.to_ascii_lowercase().contains("connection: close") || text.ends_with("0\r\n\r\n"));
    let status = proxy.terminate();
    assert!(status.success(), "exit status {status:?}");
}

fn models_and_metrics(driver: &str) {
    let (_sim, proxy) = sim_proxy(driver, SimOptions::default());
    let r = client::request(proxy.addr, "GET", "/v1/models", &[], b"", T).unwrap();
    let ids: Vec<String> = r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        ids.contains(&"smart".into())
            && ids.contains(&"gpt-4o-mini".into())
            && ids.contains(&"claude-x".into()),
        "{ids:?}"
    );
    // One model, in each dialect's shape; an id with a slash may come percent-encoded.
    let get = |path: &str, headers: &[(&str, &str)]| {
        client::request(proxy.addr, "GET", path, headers, b"", T).unwrap()
    };
    let r = get("/v1/models/smart", &[]);
    assert_eq!(
        (r.status, r.json()["object"].as_str()),
        (200, Some("model"))
    );
    assert_eq!(r.json()["id"], "smart");
    let r = get("/v1/models/sim%2Fgpt-4o-mini", &[]);
    assert_eq!(r.json()["id"], "sim/gpt-4o-mini", "{}", r.text());
    let r = get(
        "/v1/models/claude-x",
        &[("anthropic-version", "2023-06-01")],
    );
    assert_eq!(
        (r.json()["type"].as_str(), r.json()["id"].as_str()),
        (Some("model"), Some("claude-x"))
    );
    let r = get("/v1/models/nope", &[]);
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    let r = get("/v1/models/nope", &[("anthropic-version", "2023-06-01")]);
    assert_eq!(
        (r.status, r.json()["error"]["type"].as_str()),
        (404, Some("not_found_error"))
    );
    proxy.post("/v1/chat/completions", &[], &chat("smart", false));
    let m = proxy.metrics();
    let want = if driver == "uring" {
        "io_uring"
    } else {
        "epoll"
    };
    assert!(
        m.contains(&format!(
            "ringside_driver{{core=\"0\",driver=\"{want}\"}} 1"
        )),
        "{m}"
    );
    assert!(
        m.contains("ringside_requests_total{route=\"smart\",status=\"200\"} 1"),
        "{m}"
    );
    assert!(m.contains("outcome=\"ok\"} 1"), "{m}");
    assert!(!m.contains("sk-sim"));
}

/// The descriptors a process holds, by `/proc`: how many, and the highest.
fn descriptors(pid: u32) -> (u64, u64) {
    let fds: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    (fds.len() as u64, fds.iter().copied().max().unwrap_or(0))
}

/// A stream request whose first event has arrived: held open until dropped.
fn open_stream(proxy: &Proxy) -> std::net::TcpStream {
    let mut s = raw_client(proxy.addr);
    s.write_all(raw_chat("smart", true).as_bytes()).unwrap();
    let mut tmp = [0u8; 4096];
    let mut got = Vec::new();
    while !got.windows(6).any(|w| w == b"data: ") {
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0, "closed before the first event");
        got.extend_from_slice(&tmp[..n]);
    }
    s
}

/// Lower the proxy's open-file limit to the highest descriptor it holds, and fill the gaps
/// below it with idle client connections (the limit bounds descriptor numbers, and a new one
/// takes the lowest free), so that no socket can be made or accepted. Two more clients wait in
/// the listen queue. What it held before, and the clients.
fn use_up_descriptors(proxy: &Proxy) -> (u64, Vec<std::net::TcpStream>) {
    let pid = proxy.child.id();
    let (count, highest) = descriptors(pid);
    let limit = libc::rlimit {
        rlim_cur: highest + 1,
        rlim_max: highest + 1,
    };
    // SAFETY: prlimit(2) on our own child, with a struct we own.
    let set = unsafe {
        libc::prlimit(
            pid as i32,
            libc::RLIMIT_NOFILE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
    let fill = highest + 1 - count + 2;
    let idle: Vec<_> = (0..fill).map(|_| raw_client(proxy.addr)).collect();
    let deadline = std::time::Instant::now() + T;
    while descriptors(pid).0 < highest + 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "idle clients not accepted: {:?} of {}",
            descriptors(pid),
            highest + 1
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    (count, idle)
}

/// With its descriptors used up (the limit lowered under it so that a client's socket can be
/// accepted but no upstream socket made), a request is answered 503
/// `local_resources_exhausted` with `Retry-After`, and nothing is cooled or opened: once
/// streams end, the next request is served by the same keys at once. (Before, both keys were
/// cooled for a failed connect and the breaker opened, so the next requests were refused too.)
fn running_out_of_descriptors_blames_no_key(driver: &str) {
    let (_sim, proxy) = sim_proxy(
        driver,
        SimOptions {
            events: 400,
            interval_ms: 50,
            ..Default::default()
        },
    );
    let pid = proxy.child.id();
    let held: Vec<_> = (0..4).map(|_| open_stream(&proxy)).collect();
    // A client connection accepted before the descriptors run out.
    let before = descriptors(pid).0;
    let mut client = raw_client(proxy.addr);
    let deadline = std::time::Instant::now() + T;
    while descriptors(pid).0 == before && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (count, idle) = use_up_descriptors(&proxy);

    let body = chat("smart", false);
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    client.write_all(request.as_bytes()).unwrap();
    let answer = String::from_utf8_lossy(&read_all(client)).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 503"), "{answer}");
    assert!(answer.contains("\"local_resources_exhausted\""), "{answer}");
    assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer}");

    // The held streams end (the client leaves): their descriptors come back.
    drop((held, idle));
    let deadline = std::time::Instant::now() + T;
    while descriptors(pid).0 > count - 6 {
        assert!(
            std::time::Instant::now() < deadline,
            "descriptors not given back: {:?}, {count} before",
            descriptors(pid)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let m = proxy.metrics();
    let counted = m
        .lines()
        .find_map(|l| l.strip_prefix("ringside_local_resource_exhaustions_total "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(counted.is_some_and(|n| n >= 1), "{m}");
    assert!(
        m.contains("ringside_breaker_state{provider=\"sim\"} 0"),
        "the breaker opened: {m}"
    );
    assert!(
        m.lines()
            .filter(|l| l.contains("to=\"cooling\"}"))
            .all(|l| l.ends_with(" 0")),
        "a key was cooled: {m}"
    );
    let r = proxy.post("/v1/chat/completions", &[], &chat("smart", false));
    assert_eq!(r.status, 200, "{}", r.text());
}
