//! Answering one simulated request: the fault it draws (by key, model or `x-sim-fault`), the
//! latency, then a status error, a reset, a hang, an event stream or a JSON body.

use super::ask::Ask;
use super::body::{self, Api};
use super::control::pick_fault;
use super::fault::{Fault, FaultKind};
use super::stats::{InFlight, SeenRequest};
use super::subscription::WallAnswer;
use super::{SimState, key_of, stream};
use crate::http::response::{HeadWriter, whole};
use bytes::Bytes;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Read and discard until the client closes or the connection fails (a hung upstream).
pub(super) async fn until_closed(stream: &mut TcpStream) {
    let mut b = vec![0u8; 1024];
    loop {
        let (r, back) = stream.read(b).await;
        b = back;
        if !matches!(r, Ok(n) if n > 0) {
            return;
        }
    }
}

/// Close with RST (SO_LINGER 0), as a crashed or reset upstream would.
pub(super) fn reset(stream: TcpStream) {
    // (Without the option the close is a FIN: the fault is weaker, not wrong.)
    let _ = crate::http::nowait::reset_on_close(stream.as_raw_fd());
    drop(stream);
}

fn header_num(head: &crate::http::Head, name: &str) -> Option<u64> {
    head.get_str(name).and_then(|v| v.parse().ok())
}

/// Answer one request; returns the stream if it can serve another.
pub(super) async fn answer(
    state: &SimState,
    head: &crate::http::Head,
    body: Bytes,
    mut stream: TcpStream,
) -> Option<TcpStream> {
    let keep = head.keep_alive;
    let (api, ask) = match read_ask(state, head, &body) {
        Ok(asked) => asked,
        Err(refusal) => {
            let _ = stream.write_all(refusal).await;
            return Some(stream);
        }
    };
    let key = key_of(head);
    let seen = SeenRequest {
        head: head.clone(),
        key: key.clone(),
        model: ask.model.clone(),
        body_bytes: body.len(),
    };
    let (seq, counted) = state.stats.begin(seen);
    let mut guard = InFlight::new(&state.stats, key, counted);
    let picked = if state.accounts.expired(&guard.key) {
        super::fault::Fault::parse("expired-token")
    } else {
        pick_fault(state, head, &guard.key, ask.model.as_deref())
    };
    let fault = match picked {
        Ok(f) => f,
        Err(e) => {
            guard.status = 400;
            let b = body::error_body(api, 400, &format!("bad x-sim-fault: {e}"));
            let _ = stream
                .write_all(whole(400, "application/json", &[], &b, keep))
                .await;
            return Some(stream);
        }
    };
    let latency =
        header_num(head, "x-sim-latency-ms").unwrap_or(fault.latency_ms.max(state.opts.latency_ms));
    if latency > 0 {
        monoio::time::sleep(Duration::from_millis(latency)).await;
    }
    let mut extra = Vec::new();
    if let Some(spec) = fault.wall.as_deref() {
        let slow = head
            .get_str("anthropic-usage-limit")
            .is_some_and(|v| v.trim() == "slow");
        match state.accounts.answer(&guard.key, spec, slow, keep) {
            WallAnswer::Refused(status, bytes) => {
                guard.status = status;
                let _ = stream.write_all(bytes).await;
                return Some(stream);
            }
            WallAnswer::Served(headers) => extra = headers,
        }
    }
    let reply = Reply {
        api,
        keep,
        seq,
        events: header_num(head, "x-sim-events")
            .map(|n| n as u32)
            .unwrap_or(state.opts.events),
        interval_ms: header_num(head, "x-sim-interval-ms")
            .or(fault.interval_ms)
            .unwrap_or(state.opts.interval_ms),
        model: ask.model.unwrap_or_else(|| "sim-model".into()),
        wants_stream: ask.wants_stream,
        base64: ask.base64,
        include_usage: ask.include_usage,
        extra,
        tool: state
            .opts
            .call_tools
            .then(|| super::tools::to_call(api, &body))
            .flatten(),
    };
    respond(&reply, &fault, &body, &mut guard, stream).await
}

/// The request's API and what it asks for (Gemini says the model and whether to stream in its
/// path), or the 404 of an unknown path, or, running strict, the 400 a real provider would give
/// a body that breaks its API's rules.
fn read_ask(
    state: &SimState,
    head: &crate::http::Head,
    body: &[u8],
) -> Result<(Api, Ask), Vec<u8>> {
    let Some(api) = Api::from_path(head.path()) else {
        let b = body::error_body(Api::Chat, 404, "unknown path");
        return Err(whole(404, "application/json", &[], &b, head.keep_alive));
    };
    let mut ask = Ask::read(body);
    if let Some((model, stream)) = super::gemini::call(head.path()) {
        ask.model = Some(model.to_string());
        ask.wants_stream = stream;
    }
    if state.opts.strict
        && let Some(problem) = super::shape::problem(api, body)
    {
        let b = body::error_body(api, 400, &problem);
        return Err(whole(400, "application/json", &[], &b, head.keep_alive));
    }
    Ok((api, ask))
}

/// What the answer to one request is made of.
struct Reply {
    api: Api,
    keep: bool,
    /// The request's number (ids in the answer).
    seq: u64,
    events: u32,
    interval_ms: u64,
    model: String,
    wants_stream: bool,
    base64: bool,
    include_usage: bool,
    /// Headers for a success (a usage wall's lane).
    extra: Vec<(String, String)>,
    /// The tool this answer calls (`--call-tools`).
    tool: Option<String>,
}

/// Answer as the fault says: a status error, a reset, a hang, an event stream or a JSON body.
async fn respond(
    r: &Reply,
    fault: &Fault,
    request: &Bytes,
    guard: &mut InFlight<'_>,
    mut stream: TcpStream,
) -> Option<TcpStream> {
    let (api, keep) = (r.api, r.keep);
    let streams = matches!(
        fault.kind,
        FaultKind::MalformedSse
            | FaultKind::SlowDrip
            | FaultKind::ToolDrip
            | FaultKind::Heartbeats
            | FaultKind::StallAfterHead
            | FaultKind::SseError
            | FaultKind::SseErrorAfter
    );
    let (status, bytes) = match fault.kind {
        FaultKind::Status(code) => {
            let echo = fault.echo_key.then_some(guard.key.as_str());
            (code, status_answer(api, code, fault, keep, echo))
        }
        FaultKind::ExpiredToken => {
            let b = body::error_body(api, 401, super::subscription::EXPIRED_TOKEN);
            (401, whole(401, "application/json", &[], &b, keep))
        }
        FaultKind::QuotaMessage => {
            let b = body::error_body(api, 403, "额度不足，请充值后再试 (quota exhausted)");
            (403, whole(403, "application/json", &[], &b, keep))
        }
        FaultKind::QuoteInput => {
            let b = body::quoting_error(api, request);
            (400, whole(400, "application/json", &[], &b, keep))
        }
        FaultKind::ResetBeforeHeaders => {
            reset(stream);
            return None;
        }
        FaultKind::Hang => {
            // Hold the request until the client goes away.
            until_closed(&mut stream).await;
            return None;
        }
        _ if r.wants_stream || streams => {
            guard.status = 200;
            let plan = stream::StreamPlan {
                api,
                model: &r.model,
                events: r.events,
                interval_ms: r.interval_ms,
                seq: r.seq,
                include_usage: r.include_usage,
                fault,
                keep,
                extra: &r.extra,
                tool: r.tool.as_deref(),
            };
            return stream::answer(plan, stream).await;
        }
        FaultKind::CloseDelimited => {
            guard.status = 200;
            let b = body::json_body(api, &r.model, r.events, r.seq, r.base64);
            let mut w = HeadWriter::new(200);
            w.header("content-type", "application/json")
                .header("connection", "close");
            let _ = stream.write_all(w.finish(&b)).await;
            return None;
        }
        _ => {
            let b = match &r.tool {
                Some(name) => super::tools::answer(api, &r.model, r.seq, name),
                None => body::json_body(api, &r.model, r.events, r.seq, r.base64),
            };
            let own = super::provider_head::of_success(api, r.seq, fault);
            let mut extra: Vec<_> = own.iter().map(|(n, v)| (*n, v.as_str())).collect();
            extra.extend(r.extra.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            (200, whole(200, "application/json", &extra, &b, keep))
        }
    };
    guard.status = status;
    let _ = stream.write_all(bytes).await;
    Some(stream)
}

/// A status error in the API's own shape, with the fault's `Retry-After` and rate-limit
/// headers.
fn status_answer(api: Api, code: u16, fault: &Fault, keep: bool, echo: Option<&str>) -> Vec<u8> {
    let mut msg = fault.message.clone().unwrap_or_else(|| {
        if fault.tokens_per_minute {
            TPM_MESSAGE.to_string()
        } else {
            body::default_message(code).to_string()
        }
    });
    if let Some(key) = echo {
        msg.push_str(&format!(" (credential: {key})"));
    }
    let b = body::error_body(api, code, &msg);
    let mut w = HeadWriter::new(code);
    w.header("content-type", "application/json")
        .header_u64("content-length", b.len() as u64);
    if let Some(key) = echo {
        w.header("x-echo-key", format!("Bearer {key}"));
    }
    if let Some(ra) = &fault.retry_after {
        w.header("retry-after", ra);
    }
    if let Some(ms) = fault.retry_after_ms {
        w.header_u64("retry-after-ms", ms);
    }
    if fault.ratelimit_headers {
        let reset = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(20));
        w.header("x-ratelimit-limit-requests", "60")
            .header("x-ratelimit-remaining-requests", "0")
            .header("x-ratelimit-reset-requests", "20s")
            .header("x-ratelimit-remaining-tokens", "0")
            .header("x-ratelimit-reset-tokens", "6m0s")
            .header("anthropic-ratelimit-requests-remaining", "0")
            .header("x-sim-reset-date", reset);
    }
    if fault.tokens_per_minute {
        w.header("x-ratelimit-limit-tokens", "30000")
            .header("x-ratelimit-remaining-tokens", "0")
            .header("x-ratelimit-reset-tokens", "2s")
            .header("x-ratelimit-limit-requests", "500")
            .header("x-ratelimit-remaining-requests", "499")
            .header("x-ratelimit-reset-requests", "120ms");
    }
    if !keep {
        w.header("connection", "close");
    }
    w.finish(&b)
}

/// OpenAI's wording for a spent token budget.
const TPM_MESSAGE: &str = "Rate limit reached on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in 2s. Visit https://platform.openai.com/account/rate-limits to learn more.";
