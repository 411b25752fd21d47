//! criterion: the per-request and per-read work of the data plane.

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use ringside::config::load_str;
use ringside::dialect::{Dialect, facts};
use ringside::http::chunk::ChunkTracker;
use ringside::http::head::{HeadLimits, parse_request};
use ringside::route::RouteTable;
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

fn benches(c: &mut Criterion) {
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
    g.finish();

    let body = br#"{"model":"smart","stream":true,"temperature":0.2,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Write a haiku about proxies and retries, please."}]}"#;
    c.bench_function("facts_scan_chat_body", |b| {
        b.iter(|| facts::scan(black_box(body)).unwrap())
    });

    let cfg = load_str(&config_with(64), "bench", &|n| {
        (n == "K").then(|| "k".to_string())
    })
    .unwrap();
    let table = RouteTable::build(&cfg);
    let mut st = SelectorState::new(table.slot_count(), 42);
    c.bench_function("route_resolve_and_order_64_connections", |b| {
        b.iter(|| {
            let e = table.lookup(&cfg, black_box("r")).unwrap();
            table.candidates(&e, Dialect::OpenAi, &mut st).len()
        })
    });
}

criterion_group!(hot, benches);
criterion_main!(hot);
