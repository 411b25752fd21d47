//! The stream guard end to end (what exists of it so far), on io_uring and on epoll: a stream
//! that ends without its terminal marker is a failure the client is told about, and the
//! scanner's figures reach the decision record.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::io::{Read, Write};

both_drivers!(
    missing_terminal_marker_is_a_failure_after_commit,
    stream_figures_reach_the_decision_record,
    stall_before_the_first_event_retries_elsewhere,
    slow_drip_is_aborted_by_the_watchdog,
    a_silent_stream_is_aborted_by_the_watchdog_not_the_idle_timeout,
    a_tool_call_in_progress_is_not_aborted,
    finalisation_runs_once_per_request,
    heartbeats_keep_a_stream_alive_but_are_not_progress,
    silence_after_commit_ends_the_stream_with_an_error_event,
    a_client_that_stops_reading_is_cut_after_the_send_timeout,
    two_thousand_streams_leave_memory_flat,
    coalesced_events_arrive_whole_in_fewer_reads,
    a_batch_client_key_joins_its_streams,
    a_busy_core_joins_events_by_default,
    a_core_that_waits_for_a_cpu_is_busy,
);

fn sim_with(faults: &[&str], events: u32) -> ringside::simulate::Simulator {
    let mut opts = SimOptions {
        events,
        ..Default::default()
    };
    for f in faults {
        opts.faults.push(parse_fault_arg(f).expect("fault"));
    }
    start_sim(opts)
}

const FAST_WATCHDOG: &str = "[stream]\nwatchdog = true\nwatchdog_warmup_ms = 200\nwatchdog_window_ms = 400\nwatchdog_min_bytes_per_second = 60\n";

fn stall_before_the_first_event_retries_elsewhere(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=stall-after-head"], 4);
    let body = priority_keys(sim.addr, &["a", "b"], "") + "[stream]\nreadiness_timeout_ms = 300\n";
    let proxy = Proxy::start(driver, 2, "", &body);
    let t0 = std::time::Instant::now();
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-ringside-connection"), Some("sim/b"));
    let text = r.text();
    assert!(
        text.ends_with("data: [DONE]\n\n") && !text.contains("error"),
        "one clean stream: {text}"
    );
    assert!(t0.elapsed() >= std::time::Duration::from_millis(280));
    let trail = r.header("x-ringside-attempts").unwrap_or("");
    assert!(trail.contains("stream_readiness_timeout") || attempt_count(&r) == 2);
    // One rule for stalls, before the first byte as after it: the key cools for a timeout.
    let (_, c) = proxy.admin("GET", "/admin/connections");
    let a = &c["connections"][0];
    assert!(
        a["state"] == "cooling" && a["last_error"]["reason"] == "timeout",
        "{c}"
    );
}

fn slow_drip_is_aborted_by_the_watchdog(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=slow-drip;interval=100"], 30);
    let body = priority_keys(sim.addr, &["a"], "") + FAST_WATCHDOG;
    let proxy = Proxy::start(driver, 1, "", &body);
    let t0 = std::time::Instant::now();
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    let took = t0.elapsed();
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.contains("STREAM_THROUGHPUT_TOO_LOW"), "{text}");
    assert!(!text.contains("[DONE]"));
    assert!(
        took < std::time::Duration::from_millis(2_500),
        "aborted after warm-up + window, not at the end: {took:?}"
    );
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert_eq!(d["outcome"], "failed_after_commit", "{d}");
    assert_eq!(d["error_code"], "STREAM_THROUGHPUT_TOO_LOW");
}

fn a_silent_stream_is_aborted_by_the_watchdog_not_the_idle_timeout(driver: &str) {
    // One event, then 20 s of silence (the idle timeout is 600 s): the watchdog, which judges
    // when bytes arrive, must also judge when none do. (No hold-back: the stream is committed
    // at its head, so the silence falls to the relay.)
    let sim = sim_with(&["key:sk-sim-a=none;interval=20000"], 3);
    let body = priority_keys(sim.addr, &["a"], "") + FAST_WATCHDOG + "holdback_ms = 0\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let t0 = std::time::Instant::now();
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    let took = t0.elapsed();
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.contains("STREAM_THROUGHPUT_TOO_LOW"), "{text}");
    assert!(
        took < std::time::Duration::from_secs(10),
        "aborted after warm-up + window, not after the silence: {took:?}"
    );
}

fn a_tool_call_in_progress_is_not_aborted(driver: &str) {
    let sim = sim_with(&["key:sk-sim-a=tool-drip;interval=100"], 12);
    let body = priority_keys(sim.addr, &["a"], "") + FAST_WATCHDOG;
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert!(!text.contains("STREAM_THROUGHPUT_TOO_LOW"));
}

fn finalisation_runs_once_per_request(driver: &str) {
    let sim = sim_with(&["key:sk-sim-b=reset-mid-stream;after=2"], 4);
    let proxy = Proxy::start(
        driver,
        2,
        "",
        &priority_keys(sim.addr, &["a", "b"], "").replace("priority = 1", "priority = 0"),
    );
    let mut n = 0;
    for i in 0..20 {
        let stream = i % 2 == 0;
        let _ = proxy.post("/v1/chat/completions", &[], &chat("m", stream));
        n += 1;
    }
    // Bad input, unknown model, client gone: every path finalises exactly once.
    let _ = proxy.post("/v1/chat/completions", &[], "{not json");
    let _ = proxy.post("/v1/chat/completions", &[], &chat("nope", false));
    n += 2;
    {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(proxy.addr).unwrap();
        let req = chat("m", true);
        let _ = write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-sim-latency-ms: 300\r\ncontent-length: {}\r\n\r\n{req}",
            req.len()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
        n += 1;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let m = proxy.metrics();
        let sum = |prefix: &str| -> u64 {
            m.lines()
                .filter(|l| l.starts_with(prefix))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .sum()
        };
        let requests = sum("ringside_requests_total{");
        let finalized = sum("ringside_requests_finalized_total");
        if requests == n && finalized == n {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "requests {requests}, finalized {finalized}, sent {n}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn missing_terminal_marker_is_a_failure_after_commit(driver: &str) {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=no-terminal").unwrap());
    let sim = start_sim(opts);
    // After commit (no holdback) it ends with the dialect's error event.
    let body = priority_keys(sim.addr, &["a"], "") + "[stream]\nholdback_ms = 0\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(!text.contains("[DONE]"), "{text}");
    assert!(
        text.trim_end().ends_with("}") && text.contains("upstream_no_terminal"),
        "ends with the dialect's error event: {text}"
    );
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert_eq!(d["outcome"], "failed_after_commit", "{d}");
    assert_eq!(d["stream_stats"]["terminal"], false);
    assert!(
        proxy
            .metrics()
            .contains("ringside_streams_failed_after_commit_total 1")
    );
    // A Responses client gets the failure as the Responses API sends one (`response.failed`,
    // which its SDKs and Codex read), not a Chat-shaped `data: {"error":…}`.
    let r = proxy.post(
        "/v1/responses",
        &[],
        r#"{"model":"m","stream":true,"input":"hi"}"#,
    );
    assert_eq!(r.status, 200);
    let text = r.text();
    let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
    assert!(
        last.starts_with("event: response.failed\ndata: {"),
        "{text}"
    );
    let data: serde_json::Value =
        serde_json::from_str(last.split_once("data: ").map_or("", |(_, d)| d)).unwrap();
    assert_eq!(data["type"], "response.failed", "{data}");
    assert_eq!(data["response"]["status"], "failed", "{data}");
    assert_eq!(
        data["response"]["error"]["code"], "upstream_no_terminal",
        "{data}"
    );
    // A healthy stream is untouched.
    let opts = SimOptions {
        events: 3,
        ..Default::default()
    };
    let sim = start_sim(opts);
    let proxy = Proxy::start(driver, 1, "", &priority_keys(sim.addr, &["a"], ""));
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert!(r.text().ends_with("data: [DONE]\n\n"));
}

fn stream_figures_reach_the_decision_record(driver: &str) {
    let opts = SimOptions {
        events: 4,
        ..Default::default()
    };
    let sim = start_sim(opts);
    let body = priority_keys(sim.addr, &["a"], "")
        .replace("dialect = \"openai\"", "dialect = \"anthropic\"");
    let proxy = Proxy::start(driver, 1, "", &body);
    let msg = r#"{"model":"m","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = proxy.post("/v1/messages", &[], msg);
    assert_eq!(r.status, 200);
    assert!(r.text().contains("message_stop"));
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    let s = &d["stream_stats"];
    assert_eq!(s["terminal"], true, "{d}");
    assert!(s["text_bytes"].as_u64().unwrap_or(0) > 0, "{d}");
    assert!(d["tokens"]["completion"].as_u64().is_some(), "{d}");
    assert!(d["tokens"]["prompt"].as_u64().is_some(), "{d}");
    // The first useful event came after the head, within the whole request.
    let ttft = d["ttft_us"].as_u64().unwrap_or(0);
    assert!(
        ttft > 0 && ttft <= d["total_us"].as_u64().unwrap_or(0),
        "{d}"
    );
    assert_eq!(d["outcome"], "ok");
}

fn heartbeats_keep_a_stream_alive_but_are_not_progress(driver: &str) {
    // Ten keep-alive comments 100 ms apart, then the content: a 300 ms idle timeout never fires.
    let sim = sim_with(&["key:sk-sim-a=heartbeats;after=10;interval=100"], 3);
    let body = priority_keys(sim.addr, &["a"], "")
        + "[upstream]\nidle_read_timeout_ms = 300\n[stream]\nholdback_ms = 50\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert_eq!(r.status, 200);
    assert!(r.text().ends_with("data: [DONE]\n\n"), "{}", r.text());
    // With the watchdog on, a second of heartbeats is no progress: aborted.
    let sim = sim_with(&["key:sk-sim-a=heartbeats;after=20;interval=100"], 3);
    let body = priority_keys(sim.addr, &["a"], "") + FAST_WATCHDOG + "holdback_ms = 50\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    assert!(
        r.text().contains("STREAM_THROUGHPUT_TOO_LOW"),
        "{}",
        r.text()
    );
}

fn silence_after_commit_ends_the_stream_with_an_error_event(driver: &str) {
    // Events 1.5 s apart against a 300 ms idle timeout: the first event commits the stream, the
    // silence after it is cut with the dialect's error event long before the second arrives.
    let sim = sim_with(&["key:sk-sim-a=slow-drip;interval=1500"], 4);
    let body = priority_keys(sim.addr, &["a"], "")
        + "[upstream]\nidle_read_timeout_ms = 300\n[stream]\nholdback_ms = 0\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let t0 = std::time::Instant::now();
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
    let took = t0.elapsed();
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.contains("upstream_idle_timeout"), "{text}");
    assert!(!text.contains("[DONE]"), "{text}");
    assert!(
        took < std::time::Duration::from_millis(3_000),
        "cut at the first silence, not after the whole drip: {took:?}"
    );
    let id = r.header("x-request-id").unwrap_or_default().to_string();
    let d = proxy.decision(&id);
    assert_eq!(d["outcome"], "failed_after_commit", "{d}");
    assert_eq!(d["error_code"], "upstream_idle_timeout", "{d}");
}

fn a_client_that_stops_reading_is_cut_after_the_send_timeout(driver: &str) {
    use std::io::Write;
    // A 17 MB stream to a client that never reads: once the socket buffers are full, 300 ms
    // without a byte accepted cut the client (and the upstream), and the record says why.
    let sim = sim_with(&[], 100_000);
    let body = priority_keys(sim.addr, &["a"], "") + "[limits]\nclient_send_timeout_ms = 300\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let mut s = std::net::TcpStream::connect(proxy.addr).expect("connect");
    let req = raw_chat_with_id("m", true, "stops-reading");
    s.write_all(req.as_bytes()).expect("send");
    let d = proxy.decision_within("stops-reading", std::time::Duration::from_secs(10));
    assert_eq!(d["outcome"], "client_gone", "{d}");
    assert_eq!(d["error_code"], "client_send_timeout", "{d}");
    assert_eq!(d["status"], 499, "{d}");
    drop(s);
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn two_thousand_streams_leave_memory_flat(driver: &str) {
    let sim = sim_with(&[], 3);
    let body = priority_keys(sim.addr, &["a"], "") + "[server]\n";
    let proxy = Proxy::start(driver, 1, "", &body.replace("[server]\n", ""));
    let run = |n: usize| {
        for _ in 0..n {
            let r = proxy.post("/v1/chat/completions", &[], &chat("m", true));
            assert_eq!(r.status, 200);
        }
    };
    // Warm up past the decision ring's capacity (1024 records), then measure.
    run(1_200);
    let before = rss_kib(proxy.child.id());
    run(2_000);
    let after = rss_kib(proxy.child.id());
    assert!(before > 0);
    assert!(
        after <= before + 3 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
}

/// `stream.coalesce_events`: the kernel joins a stream's events into fuller segments. Every
/// event still arrives, in order, with the terminal marker and the chunked body's end; the
/// client reads them in a few pieces (events 20 ms apart, joined for up to ~200 ms), where one
/// write per event would take one read each on an idle machine. (A busy machine only joins
/// more: the bound holds under load.)
fn coalesced_events_arrive_whole_in_fewer_reads(driver: &str) {
    let sim = sim_for_joining();
    let body = priority_keys(sim.addr, &["a"], "") + "[stream]\ncoalesce_events = true\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    // An operator can see why events come in bunches.
    let (_, cfg) = proxy.admin("GET", "/admin/config");
    assert_eq!(cfg["stream"]["coalesce_events"], true, "{cfg}");
    let reads = read_whole_stream(&proxy, "");
    assert!(
        reads <= JOINED_EVENTS as usize / 2,
        "{reads} reads for {JOINED_EVENTS} events: not joined"
    );
}

/// A client key of its own may join its streams while the instance does not (a batch job
/// beside interactive clients); a key without a choice follows the instance.
fn a_batch_client_key_joins_its_streams(driver: &str) {
    let sim = sim_for_joining();
    let (batch, chat_key) = (
        "sk-ringside-batch-0123456789",
        "sk-ringside-chat-0123456789",
    );
    // The instance never joins, however busy the machine running the test is.
    let body = priority_keys(sim.addr, &["a"], "")
        + "[stream]\ncoalesce_events = false\n"
        + &format!(
            "[[clients]]\nid = \"batch\"\nkey_sha256 = \"{}\"\ncoalesce_events = true\n\
             [[clients]]\nid = \"chat\"\nkey_sha256 = \"{}\"\n",
            key_sha256(batch),
            key_sha256(chat_key),
        );
    let proxy = Proxy::start(driver, 1, "", &body);
    let reads = read_whole_stream(&proxy, batch);
    assert!(
        reads <= JOINED_EVENTS as usize / 2,
        "{reads} reads for {JOINED_EVENTS} events: the batch key's stream was not joined"
    );
    // The interactive key's stream arrives whole too (how many reads it takes depends on how
    // busy the machine is, so it is not asserted).
    read_whole_stream(&proxy, chat_key);
}

/// `coalesce_events = "auto"` (the default) joins a stream's events only while its core is
/// busy. Marked busy from any lag (`coalesce_busy_lag_ms = 0`), the core says so in
/// `/metrics` and its streams arrive in joined reads. (That a quiet core sends each event at
/// once is a unit test: how many reads a client needs on a loaded machine is not asserted.)
fn a_busy_core_joins_events_by_default(driver: &str) {
    let sim = sim_for_joining();
    let body = priority_keys(sim.addr, &["a"], "") + "[stream]\ncoalesce_busy_lag_ms = 0\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let (_, cfg) = proxy.admin("GET", "/admin/config");
    assert_eq!(cfg["stream"]["coalesce_events"], "auto", "{cfg}");
    assert_eq!(cfg["stream"]["coalesce_busy_lag_ms"], 0, "{cfg}");
    // The core's first tick (50 ms) marks it busy.
    busy_core_joins(&proxy, "ringside_core_loop_lag_seconds{core=\"0\"}");
}

/// The other sign of a busy core: its wait for a CPU (the kernel's run delay). With the
/// lateness sign out of reach (a tick a minute late) and any wait enough
/// (`coalesce_busy_wait_percent = 0`), the core is busy from its second tick, says how long it
/// waited, and joins its streams' events.
fn a_core_that_waits_for_a_cpu_is_busy(driver: &str) {
    if std::fs::read("/proc/thread-self/schedstat").is_err() {
        eprintln!("this kernel keeps no scheduler statistics: the wait sign is off here");
        return;
    }
    let sim = sim_for_joining();
    let body = priority_keys(sim.addr, &["a"], "")
        + "[stream]\ncoalesce_busy_lag_ms = 60000\ncoalesce_busy_wait_percent = 0\n";
    let proxy = Proxy::start(driver, 1, "", &body);
    let (_, cfg) = proxy.admin("GET", "/admin/config");
    assert_eq!(cfg["stream"]["coalesce_busy_wait_percent"], 0, "{cfg}");
    busy_core_joins(&proxy, "ringside_core_cpu_wait_ratio{core=\"0\"}");
}

/// Wait until core 0 says it is busy, check that `/metrics` shows `sign`, then stream a chat
/// completion and check that its events arrived joined.
fn busy_core_joins(proxy: &Proxy, sign: &str) {
    let busy = "ringside_core_busy{core=\"0\"} 1";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !proxy.metrics().contains(busy) {
        assert!(std::time::Instant::now() < deadline, "{}", proxy.metrics());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(proxy.metrics().contains(sign), "{}", proxy.metrics());
    let reads = read_whole_stream(proxy, "");
    assert!(
        reads <= JOINED_EVENTS as usize / 2,
        "{reads} reads for {JOINED_EVENTS} events on a busy core: not joined"
    );
}

const JOINED_EVENTS: u32 = 24;

/// An upstream whose streams are `JOINED_EVENTS` events 20 ms apart: within the ~200 ms the
/// kernel holds a joined write, far apart enough that each would be a read of its own.
fn sim_for_joining() -> ringside::simulate::Simulator {
    start_sim(SimOptions {
        events: JOINED_EVENTS,
        interval_ms: 20,
        ..Default::default()
    })
}

/// Stream a chat completion through `proxy` on a raw socket (with `key` as its bearer, when
/// given), check that every event arrived in order with the terminal marker and the chunked
/// body's end, and return how many reads after the head it took.
fn read_whole_stream(proxy: &Proxy, key: &str) -> usize {
    let body = chat("m", true);
    let auth = if key.is_empty() {
        String::new()
    } else {
        format!("authorization: Bearer {key}\r\n")
    };
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{auth}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut c = raw_client(proxy.addr);
    c.write_all(req.as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut reads_after_head = 0;
    let mut buf = [0u8; 65536];
    while !got.ends_with(b"data: [DONE]\n\n\r\n0\r\n\r\n") {
        let n = c.read(&mut buf).expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        if find(&got, b"\r\n\r\n").is_some() {
            reads_after_head += 1;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let words: Vec<&str> = text
        .split("\"content\":\"")
        .skip(2) // the head's part, then the role chunk's empty content
        .filter_map(|rest| rest.split('"').next())
        .collect();
    let want: Vec<&str> = (0..JOINED_EVENTS)
        .map(ringside::simulate::body::word)
        .collect();
    assert_eq!(words, want, "every event, in order: {text}");
    reads_after_head
}
