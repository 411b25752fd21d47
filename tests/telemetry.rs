//! OpenTelemetry export: a collector stand-in on loopback receives each request's span and its
//! attempts' spans over OTLP/HTTP (protobuf), with the GenAI semantic conventions' attributes,
//! in the trace the client sent, the attempt spans' ids the ones that went upstream.

mod common;
use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

both_drivers!(spans_reach_the_collector_with_genai_attributes);

/// A collector: each POST's body, kept; every request answered 200.
fn collector() -> (std::net::SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            if let Some(body) = read_post(s) {
                keep.lock().unwrap_or_else(|p| p.into_inner()).push(body);
            }
        }
    });
    (addr, got)
}

fn read_post(mut s: std::net::TcpStream) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
        let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&raw[..end]).to_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())?;
        if raw.len() >= end + 4 + len {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n");
            return Some(raw[end + 4..end + 4 + len].to_vec());
        }
    }
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    let kv = attrs.iter().find(|kv| kv.key == key)?;
    kv.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref())
}

fn text(attrs: &[KeyValue], key: &str) -> String {
    match attr(attrs, key) {
        Some(Value::StringValue(s)) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attrs, key) {
        Some(Value::IntValue(n)) => Some(*n),
        _ => None,
    }
}

/// The spans the collector has received, with their resource's attributes, once there are
/// `n` (or 20 s have passed).
fn received(got: &Mutex<Vec<Vec<u8>>>, n: usize) -> Vec<(Vec<KeyValue>, Span)> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let bodies = got.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut spans = Vec::new();
        for b in &bodies {
            let req = ExportTraceServiceRequest::decode(b.as_slice()).expect("OTLP protobuf");
            for rs in req.resource_spans {
                let resource = rs.resource.map(|r| r.attributes).unwrap_or_default();
                for ss in rs.scope_spans {
                    spans.extend(ss.spans.into_iter().map(|s| (resource.clone(), s)));
                }
            }
        }
        if spans.len() >= n || Instant::now() > until {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn spans_reach_the_collector_with_genai_attributes(driver: &str) {
    let (at, got) = collector();
    // Key a is rate limited: two attempts, the second delivered.
    let sim = start_sim(SimOptions {
        faults: vec![parse_fault_arg("key:sk-sim-a=429;retry-after=300").expect("fault")],
        ..SimOptions::default()
    });
    let body = priority_keys(sim.addr, &["a", "b"], "")
        + &format!("[telemetry]\notlp_endpoint = \"http://{at}\"\nservice_name = \"edge-1\"\n");
    let proxy = Proxy::start(driver, 1, "", &body);
    let (trace, parent) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let traceparent = format!("00-{trace}-{parent}-01");
    let r = proxy.post(
        "/v1/chat/completions",
        &[("traceparent", &traceparent)],
        &chat("m", false),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let spans = received(&got, 3);
    assert_eq!(
        spans.len(),
        3,
        "a request span and two attempt spans: {spans:#?}"
    );
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let (resource, server) = spans
        .iter()
        .find(|(_, s)| s.kind == 2)
        .expect("a server span");
    assert_eq!(text(resource, "service.name"), "edge-1");
    assert_eq!(hex(&server.trace_id), trace);
    assert_eq!(
        hex(&server.parent_span_id),
        parent,
        "a child of the client's span"
    );
    let a = &server.attributes;
    assert_eq!(text(a, "gen_ai.operation.name"), "chat");
    assert_eq!(text(a, "gen_ai.request.model"), "m");
    assert_eq!(text(a, "gen_ai.system"), "openai");
    assert_eq!(int(a, "http.response.status_code"), Some(200));
    assert!(int(a, "gen_ai.usage.input_tokens").is_some(), "{a:#?}");
    assert!(int(a, "gen_ai.usage.output_tokens").is_some(), "{a:#?}");
    let attempts: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.kind == 3)
        .collect();
    assert_eq!(attempts.len(), 2);
    for s in &attempts {
        assert_eq!(
            s.parent_span_id, server.span_id,
            "attempts are the request's children"
        );
        assert_eq!(hex(&s.trace_id), trace);
    }
    let limited = attempts
        .iter()
        .find(|s| int(&s.attributes, "http.response.status_code") == Some(429));
    assert!(
        limited.is_some_and(|s| !text(&s.attributes, "error.type").is_empty()),
        "{attempts:#?}"
    );
    // The delivered attempt's span is the parent the provider was told.
    let seen = ringside::demo::client::request(sim.addr, "GET", "/_sim/requests", &[], b"", T)
        .expect("requests")
        .text();
    let delivered = attempts
        .iter()
        .find(|s| int(&s.attributes, "http.response.status_code") == Some(200))
        .expect("the delivered attempt");
    assert!(
        seen.contains(&format!("00-{trace}-{}-01", hex(&delivered.span_id))),
        "{seen}"
    );
    let m = proxy.metrics();
    assert!(m.contains("ringside_otlp_spans_exported_total 1"), "{m}");
}
