//! The drill's clients: a fixed number of them, each sending one request after another to the
//! routes in turn (a share of them streamed), and retrying as the OpenAI and Anthropic SDKs do
//! by default: on 408, 409, 429, 5xx and broken connections, unless `x-should-retry: false`;
//! `Retry-After` when it is at most 60 s, else 0.5 s doubling to 8 s with jitter; the retry
//! number in `x-stainless-retry-count`.

use super::stage::Route;
use crate::demo::client;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Shape {
    pub concurrency: usize,
    /// Every n-th request is streamed (0: none).
    pub stream_every: usize,
    pub client_retries: u32,
    /// The client's own deadline for a request, retries included (sent as
    /// `x-ringside-deadline-ms`).
    pub deadline: Duration,
    /// Hang up on a request not answered within this (none: wait for the answer).
    pub cancel_after: Option<Duration>,
    /// Each request's prompt size (0: one word).
    pub body_bytes: usize,
}

/// One client request, retries included.
#[derive(Clone, Debug)]
pub struct Done {
    /// From the drill's start.
    pub started: Duration,
    pub took: Duration,
    /// The last answer's status (0: no answer at all).
    pub status: u16,
    /// HTTP requests the client sent for it (1 + its retries).
    pub sends: u32,
    /// Its first send was answered with a 2xx: Ringside served it without the client's help.
    pub first_ok: bool,
    pub stream: bool,
    /// Which route (its index in the drill's list).
    pub route: usize,
    /// The client hung up before an answer came: the request id of the send it hung up on
    /// (`x-request-id`, which Ringside keeps as its own), and the deadline that send gave.
    pub cancelled: Option<(String, u64)>,
    /// Fail-fast answers that said when to come back: (when, from the drill's start; the
    /// `Retry-After` in seconds).
    pub told_retry_after: Vec<(Duration, f64)>,
}

impl Done {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// When a scenario's traffic ends, in ms from its start: it can move later while the traffic
/// runs (an outage's recovery waits for the breaker).
pub type Until = std::sync::atomic::AtomicU64;

/// Whether `until` (ms from `t0`) is still ahead.
pub fn before(t0: Instant, until: &Until) -> bool {
    (t0.elapsed().as_millis() as u64) < until.load(std::sync::atomic::Ordering::Acquire)
}

/// Send requests from `shape.concurrency` clients until `until`; every finished request is
/// pushed to `out`.
pub fn run(
    proxy: SocketAddr,
    routes: &[Route],
    shape: &Shape,
    t0: Instant,
    until: &Until,
    out: &Arc<Mutex<Vec<Done>>>,
) {
    std::thread::scope(|scope| {
        for c in 0..shape.concurrency {
            let out = out.clone();
            scope.spawn(move || {
                let mut n = c;
                while before(t0, until) {
                    let index = n % routes.len();
                    let route = &routes[index];
                    let stream = shape.stream_every > 0 && n % shape.stream_every == 0;
                    let needs = super::contract::needs_of(route, n / routes.len());
                    let id = format!("drill-{c}-{n}");
                    let mut done = one(proxy, route, stream, &needs, shape, (t0, &id));
                    done.route = index;
                    out.lock().unwrap_or_else(|e| e.into_inner()).push(done);
                    n += 1;
                }
            });
        }
    });
}

/// The request's path and body: the route's model, streamed or not, with a tool or a JSON
/// schema when it needs one.
fn body(route: &Route, stream: bool, needs: &[String], bytes: usize) -> (&'static str, String) {
    let model = serde_json::to_string(&route.name).unwrap_or_default();
    // The prompt, padded to the traffic's size with plain words (JSON-safe).
    let mut prompt = String::from("drill");
    while prompt.len() + 6 <= bytes {
        prompt.push_str(" drill");
    }
    let need = |n: &str| needs.iter().any(|x| x == n);
    let mut extra = String::new();
    if need("tools") {
        extra.push_str(if route.anthropic {
            r#","tools":[{"name":"lookup","input_schema":{"type":"object"}}]"#
        } else {
            r#","tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]"#
        });
    }
    if need("structured_output") {
        extra.push_str(if route.anthropic {
            r#","output_format":{"type":"json_schema","schema":{"type":"object"}}"#
        } else {
            r#","response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"}}}"#
        });
    }
    if stream && !route.anthropic {
        // (Usage at a Chat stream's end, as clients that count their tokens ask for it.)
        extra.push_str(r#","stream_options":{"include_usage":true}"#);
    }
    if route.anthropic {
        (
            "/v1/messages",
            format!(
                r#"{{"model":{model},"max_tokens":64,"stream":{stream}{extra},"messages":[{{"role":"user","content":"{prompt}"}}]}}"#
            ),
        )
    } else {
        (
            "/v1/chat/completions",
            format!(
                r#"{{"model":{model},"stream":{stream}{extra},"messages":[{{"role":"user","content":"{prompt}"}}]}}"#
            ),
        )
    }
}

/// The headers that state a request's region and tags to Ringside (`x-ringside-*`, never
/// forwarded) and its needs to the simulator (`x-drill-need`, forwarded like any other).
fn need_headers(needs: &[String]) -> Vec<(&'static str, String)> {
    let mut h = Vec::new();
    if needs.is_empty() {
        return h;
    }
    h.push(("x-drill-need", needs.join(",")));
    let of = |kind: &str| -> Vec<&str> {
        needs
            .iter()
            .filter_map(|n| {
                n.split_once('=')
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, v)| v)
            })
            .collect()
    };
    if let Some(r) = of("region").first() {
        h.push(("x-ringside-region", (*r).to_string()));
    }
    let tags = of("tag");
    if !tags.is_empty() {
        h.push(("x-ringside-require-tags", tags.join(",")));
    }
    h
}

/// One client request with the SDK-like retries.
fn one(
    proxy: SocketAddr,
    route: &Route,
    stream: bool,
    needs: &[String],
    shape: &Shape,
    (t0, id): (Instant, &str),
) -> Done {
    let (path, body) = body(route, stream, needs, shape.body_bytes);
    let stated = need_headers(needs);
    let started = Instant::now();
    let end = started + shape.deadline;
    let mut sends = 0;
    let mut status = 0;
    let mut first_ok = false;
    let mut told_retry_after = Vec::new();
    let mut cancelled = None;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let retry = sends.to_string();
        let request_id = format!("{id}-{sends}");
        let deadline_ms = left.as_millis().max(1).to_string();
        let mut headers = vec![
            ("content-type", "application/json"),
            ("anthropic-version", "2023-06-01"),
            ("x-stainless-retry-count", retry.as_str()),
            ("x-ringside-deadline-ms", deadline_ms.as_str()),
            ("x-request-id", request_id.as_str()),
        ];
        headers.extend(stated.iter().map(|(n, v)| (*n, v.as_str())));
        sends += 1;
        // The socket waits past the deadline, so that a late answer is seen (and counted),
        // unless the client is one that hangs up sooner.
        let wait = shape.cancel_after.unwrap_or(left + Duration::from_secs(5));
        let sent_at = Instant::now();
        let reply = client::request(proxy, "POST", path, &headers, body.as_bytes(), wait);
        if reply.is_err() && shape.cancel_after.is_some_and(|c| sent_at.elapsed() >= c) {
            // (The socket is closed as the request returns: the hang-up Ringside must see.)
            cancelled = Some((request_id, left.as_millis().max(1) as u64));
            break;
        }
        let wait = match &reply {
            Ok(r) => {
                status = r.status;
                if matches!(r.status, 429 | 503)
                    && let Some(s) = told_wait(r)
                {
                    told_retry_after.push((t0.elapsed(), s));
                }
                first_ok |= sends == 1 && (200..300).contains(&r.status);
                retry_wait(r, sends)
            }
            Err(_) => Some(backoff(sends)),
        };
        let Some(wait) = wait.filter(|_| sends <= shape.client_retries) else {
            break;
        };
        if Instant::now() + wait >= end {
            break;
        }
        std::thread::sleep(wait);
    }
    Done {
        started: started.duration_since(t0),
        took: started.elapsed(),
        status,
        sends,
        first_ok,
        stream,
        route: 0,
        cancelled,
        told_retry_after,
    }
}

/// The wait an answer told, in seconds, as the OpenAI SDK reads it: `retry-after-ms` first.
fn told_wait(r: &client::Reply) -> Option<f64> {
    let ms = r
        .header("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok());
    ms.map(|ms| ms / 1_000.0).or_else(|| {
        r.header("retry-after")
            .and_then(|v| v.trim().parse::<f64>().ok())
    })
}

/// Whether (and after how long) an SDK would retry this answer.
fn retry_wait(r: &client::Reply, sends: u32) -> Option<Duration> {
    if r.header("x-should-retry") == Some("false") {
        return None;
    }
    let retryable = matches!(r.status, 408 | 409 | 429) || r.status >= 500;
    if r.header("x-should-retry") != Some("true") && !retryable {
        return None;
    }
    let hinted = told_wait(r)
        .filter(|s| (0.0..=60.0).contains(s))
        .map(Duration::from_secs_f64);
    Some(hinted.unwrap_or_else(|| backoff(sends)))
}

/// 0.5 s doubling per retry, at most 8 s, less up to a quarter of jitter.
fn backoff(sends: u32) -> Duration {
    let base = (0.5 * 2f64.powi(sends.saturating_sub(1) as i32)).min(8.0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let jitter = 1.0 - 0.25 * f64::from(nanos % 1000) / 1000.0;
    Duration::from_secs_f64(base * jitter)
}
