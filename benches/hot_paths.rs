//! criterion: the per-request and per-read work of the data plane.

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use ringside::config::load_str;
use ringside::dialect::{Endpoint, facts};
const CHAT: ringside::route::Reach = ringside::route::Reach::of(Endpoint::ChatCompletions);
use ringside::flow::gate::Gate;
use ringside::flow::tenant::{TenantLimits, Tenants};
use ringside::http::chunk::ChunkTracker;
use ringside::http::head::{HeadLimits, parse_request};
use ringside::ids::ConnId;
use ringside::resilience::classify::{Reason, Scope, Verdict};
use ringside::resilience::cooldown::ConnState;
use ringside::resilience::{Event, Probes, Site, Tables};
use ringside::route::RouteTable;
use ringside::route::load::Load;
use ringside::route::strategy::SelectorState;

const HEAD: &[u8] = b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: OpenAI/Python 1.54.0\r\n\
Authorization: Bearer sk-client-0123456789abcdef\r\nContent-Type: application/json\r\nAccept: application/json\r\n\
Accept-Encoding: gzip, deflate\r\nX-Stainless-Lang: python\r\nX-Stainless-Package-Version: 1.54.0\r\n\
X-Stainless-Runtime: CPython\r\nX-Session-Id: 4f1c2d\r\nContent-Length: 512\r\n\r\n";

fn sse_stream(events: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..events {
        let ev = format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"
        );
        out.extend_from_slice(format!("{:x}\r\n", ev.len()).as_bytes());
        out.extend_from_slice(ev.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn anthropic_stream(events: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..events {
        out.extend_from_slice(format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\" tok{i}\"}}}}\n\n").as_bytes());
    }
    out.extend_from_slice(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    out
}

fn responses_stream(events: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..events {
        out.extend_from_slice(format!("event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{i},\"item_id\":\"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654\",\"output_index\":0,\"content_index\":0,\"delta\":\" tok{i}\"}}\n\n").as_bytes());
    }
    out
}

fn config_with(n: usize) -> String {
    let mut s = String::from(
        "[[providers]]\nid = \"p\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    );
    for i in 0..n {
        s.push_str(&format!("  [[providers.connections]]\n  id = \"c{i}\"\n  key_env = \"K\"\n  models = [\"gpt-4o\"]\n  weight = {}\n", 1 + i % 3));
    }
    s.push_str("[[routes]]\nname = \"r\"\nstrategy = \"weighted\"\ntargets = [{ provider = \"p\", model = \"gpt-4o\" }]\n");
    s
}

/// The HTTP head parser, the chunk tracker and the SSE scanner.
fn http_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("http");
    g.throughput(Throughput::Bytes(HEAD.len() as u64));
    g.bench_function("parse_request_head", |b| {
        b.iter(|| {
            parse_request(black_box(HEAD), HeadLimits::default())
                .unwrap()
                .unwrap()
                .1
        })
    });
    let stream = sse_stream(200);
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("chunk_tracker_sse_200_events", |b| {
        b.iter(|| {
            let mut t = ChunkTracker::new();
            let mut n = 0usize;
            for part in black_box(&stream).chunks(1460) {
                t.feed(part, |p| n += p.len()).unwrap();
            }
            n
        })
    });
    // The stream guard's scanner reading along the same stream (through the chunk tracker).
    g.bench_function("chunk_tracker_plus_sse_scanner_200_events", |b| {
        b.iter(|| {
            let mut t = ChunkTracker::new();
            let mut s = ringside::sse::Scanner::default();
            for part in black_box(&stream).chunks(1460) {
                t.feed(part, |p| s.feed(p, |_| {})).unwrap();
            }
            s.totals.text_bytes
        })
    });
    // The same scanner over the other dialects' event shapes (plain bytes, no chunk framing).
    for (name, stream) in [
        ("sse_scanner_anthropic_200_events", anthropic_stream(200)),
        ("sse_scanner_responses_200_events", responses_stream(200)),
    ] {
        g.throughput(Throughput::Bytes(stream.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut s = ringside::sse::Scanner::default();
                for part in black_box(&stream).chunks(1460) {
                    s.feed(part, |_| {});
                }
                s.totals.text_bytes
            })
        });
    }
    g.finish();
}

/// The body scan: facts (model, stream), UTF-8 and the JSON check, on small and large bodies.
fn facts_benches(c: &mut Criterion) {
    let body = br#"{"model":"smart","stream":true,"temperature":0.2,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Write a haiku about proxies and retries, please."}]}"#;
    c.bench_function("facts_scan_chat_body", |b| {
        b.iter(|| facts::scan(black_box(body)).unwrap())
    });
    // An agent's turn: a long conversation (system prompt, tool results, escapes, non-ASCII).
    let mut big = String::from(r#"{"model":"smart","stream":true,"messages":["#);
    for i in 0..40 {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let text = r#"Line of a tool result with \"quotes\", a tab\t, naïve ünïcode and code: fn main() { println!(\"hi\"); }\n"#.repeat(8);
        big.push_str(&format!(
            r#"{}{{"role":"{role}","content":"{text}"}}"#,
            if i > 0 { "," } else { "" }
        ));
    }
    big.push_str(r#"],"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}],"temperature":0.2,"max_tokens":4096}"#);
    let mut g = c.benchmark_group("facts_scan_agent_body");
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function(format!("{}_bytes", big.len()), |b| {
        b.iter(|| facts::scan(black_box(big.as_bytes())).unwrap())
    });
    g.bench_function("utf8_only", |b| {
        b.iter(|| simdutf8::basic::from_utf8(black_box(big.as_bytes())).is_ok())
    });
    g.bench_function("json_check_only", |b| {
        b.iter(|| ringside::dialect::json_check::check_object(black_box(big.as_bytes())).is_ok())
    });
    g.finish();
    escaped_cjk_bench(c);
}

/// The same size in Chinese, every character a `\u` escape (Python's json.dumps default).
fn escaped_cjk_bench(c: &mut Criterion) {
    let mut cjk = String::from(r#"{"model":"smart","messages":["#);
    for i in 0..40 {
        let text: String = "请帮我检查这段代码是否有错误，谢谢。"
            .chars()
            .cycle()
            .take(140)
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        cjk.push_str(&format!(
            r#"{}{{"role":"user","content":"{text}"}}"#,
            if i > 0 { "," } else { "" }
        ));
    }
    cjk.push_str("]}");
    let mut g = c.benchmark_group("facts_scan_escaped_cjk_body");
    g.throughput(Throughput::Bytes(cjk.len() as u64));
    g.bench_function(format!("{}_bytes", cjk.len()), |b| {
        b.iter(|| facts::scan(black_box(cjk.as_bytes())).unwrap())
    });
    g.finish();
}

/// Route lookup and candidate ordering over 64 connections.
fn route_benches(c: &mut Criterion) {
    let cfg = load_str(&config_with(64), "bench", &|n| {
        (n == "K").then(|| "k".to_string())
    })
    .unwrap();
    let table = RouteTable::build(&cfg);
    let mut st = SelectorState::new(table.slot_count(), 42);
    c.bench_function("candidates_where_64_connections_no_filter", |b| {
        let e = table.lookup(&cfg, "r").unwrap();
        b.iter(|| {
            table
                .candidates_where(&e, CHAT, &mut st, &|_| Load::default(), &mut |_| true)
                .len()
        })
    });
    c.bench_function("route_resolve_and_order_64_connections", |b| {
        b.iter(|| {
            let e = table.lookup(&cfg, black_box("r")).unwrap();
            table
                .candidates(&e, CHAT, &mut st, &|_| Load::default())
                .len()
        })
    });
}

/// A failure that cools a connection for a long time.
fn cooling() -> Verdict {
    Verdict {
        reason: Reason::RateLimited,
        scope: Scope::Connection,
        status: 429,
        cooldown_ms: Some(u64::MAX / 4),
        hint: None,
        retryable: true,
        rule: None,
        lasting: true,
        mid_stream: false,
    }
}

fn bench_config(strategy: &str) -> ringside::config::Config {
    load_str(
        &config_with(64).replace("\"weighted\"", &format!("\"{strategy}\"")),
        "bench",
        &|n| (n == "K").then(|| "k".to_string()),
    )
    .unwrap()
}

/// Candidate filtering (cooldown, lockout, breaker checks) plus selection over 64
/// connections, with the first 16 connections cooling.
fn filter_benches(c: &mut Criterion) {
    let cfg = bench_config("weighted");
    let s = &cfg.resilience;
    let probes = Probes::new(1);
    let mut tables = Tables::new(1, 64);
    let cooling = cooling();
    for slot in 0..16 {
        let site = Site {
            provider: 0,
            conn: ConnId::new(slot),
            model: "gpt-4o",
            tenant: 0,
            sent: 1,
            probe: false,
        };
        tables.on_failure(s, site, &cooling, 1, &mut |_| {});
    }
    for strategy in ["weighted", "p2c", "least_in_flight"] {
        let cfg = bench_config(strategy);
        let table = RouteTable::build(&cfg);
        let mut st = SelectorState::new(table.slot_count(), 42);
        let e = table.lookup(&cfg, "r").unwrap();
        c.bench_function(
            &format!("filter_and_select_64_connections_16_cooling_{strategy}"),
            |b| {
                b.iter(|| {
                    // The request path: filter (cooldown, lockout, breaker), let the strategy
                    // choose among the usable, admit the first.
                    let now = 1_000;
                    let load = |c: ConnId| Load {
                        in_flight: (c.index() % 5) as u32,
                        ..Default::default()
                    };
                    let site = |conn: ConnId| Site {
                        provider: 0,
                        conn,
                        model: "gpt-4o",
                        tenant: 0,
                        sent: now,
                        probe: false,
                    };
                    let ordered = table.candidates_where(&e, CHAT, &mut st, &load, |c| {
                        tables.blocked(s, site(c.connection), now).is_none()
                    });
                    ordered.iter().find_map(|c| {
                        tables
                            .admit(s, &probes, site(c.connection), now)
                            .ok()
                            .map(|_| c.connection)
                    })
                })
            },
        );
    }
}

/// Merging one replicated event into a core's tables.
fn event_benches(c: &mut Criterion) {
    let cfg = bench_config("weighted");
    let s = &cfg.resilience;
    let mut other = Tables::new(1, 64);
    let mut state = ConnState::default();
    let ev = Event::Conn {
        conn: ConnId::new(7),
        state: state
            .on_failure(&cooling(), 5, &s.providers[0].cooldown)
            .unwrap(),
    };
    c.bench_function("event_merge_connection_cooldown", |b| {
        b.iter(|| other.apply(black_box(&ev), s))
    });
    let ev = Event::BreakerFailure {
        provider: 0,
        at: 9,
        tenant: 1,
    };
    c.bench_function("event_merge_breaker_failure", |b| {
        b.iter(|| other.apply(black_box(&ev), s))
    });
}

/// Flow control: a slot of a capped connection taken and freed (the admission check), alone
/// and contended, and a tenant's quota check.
fn flow_benches(c: &mut Criterion) {
    let gate = std::sync::Arc::new(Gate::new(8, 0, 0, 0));
    c.bench_function("flow_permit_acquire_release_uncontended", |b| {
        b.iter(|| {
            let ok = gate.try_start(black_box(1)).is_ok();
            gate.release();
            ok
        })
    });
    // The same with another thread hammering the same connection's gate.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rival = {
        let (gate, stop) = (gate.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if gate.try_start(1).is_ok() {
                    gate.release();
                }
            }
        })
    };
    c.bench_function("flow_permit_acquire_release_contended_2_threads", |b| {
        b.iter(|| {
            let ok = gate.try_start(black_box(1)).is_ok();
            if ok {
                gate.release();
            }
            ok
        })
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = rival.join();
    let tenants: &'static Tenants = Box::leak(Box::new(Tenants::new(TenantLimits {
        requests_per_minute: u32::MAX,
        tokens_per_minute: 0,
        max_concurrent: 1_000,
    })));
    c.bench_function("flow_tenant_quota_admit", |b| {
        b.iter(|| tenants.admit(black_box(0xfeed), 100, 5).is_ok())
    });
}

/// One access-log line, as each core writes it into its batch (every request pays this with
/// the shipped `access_log = true`).
fn log_benches(c: &mut Criterion) {
    let mut r = ringside::audit::Record {
        request_id: "rs-1234abcd-0-42".into(),
        status: 200,
        total_ms: 12,
        bytes_in: 72,
        bytes_out: 291,
        ts_ms: 1_796_162_739_922,
        ..Default::default()
    };
    r.attempts.push(ringside::audit::AttemptRecord {
        provider: "sim",
        connection: "a",
        status: Some(200),
        ..Default::default()
    });
    let mut out = Vec::with_capacity(1 << 16);
    let client = ringside::audit::LogClient {
        peer: Some(std::net::Ipv4Addr::LOCALHOST.into()),
        forwarded_for: None,
        user_agent: Some("OpenAI/Python 1.99.0"),
    };
    c.bench_function("access_log_line_one_attempt", |b| {
        b.iter(|| {
            out.clear();
            black_box(&r).write_log_line(&mut out, &client);
            out.len()
        })
    });
}

criterion_group!(
    hot,
    log_benches,
    http_benches,
    facts_benches,
    route_benches,
    filter_benches,
    event_benches,
    flow_benches
);
criterion_main!(hot);
