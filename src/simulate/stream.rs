//! A streamed (SSE) answer: the head, then one write per event as a provider sends tokens,
//! with the stream faults (stall, heartbeats, drip, malformed, in-band error, reset mid-way).

use super::answer::{reset, until_closed};
use super::body::{self, Api};
use super::fault::{Fault, FaultKind};
use crate::http::response::HeadWriter;
use monoio::buf::IoBuf;
use monoio::io::AsyncWriteRentExt;
use monoio::net::TcpStream;
use std::io::Write;
use std::time::Duration;

/// What one streamed answer sends.
pub struct StreamPlan<'a> {
    pub api: Api,
    pub model: &'a str,
    /// Text deltas.
    pub events: u32,
    /// Pause between events (drip faults have their own).
    pub interval_ms: u64,
    pub seq: u64,
    pub include_usage: bool,
    pub fault: &'a Fault,
    /// Whether the client may send another request on this connection.
    pub keep: bool,
    /// More headers (a usage wall's lane).
    pub extra: &'a [(String, String)],
    /// The tool the answer calls instead of writing text (`--call-tools`).
    pub tool: Option<&'a str>,
}

/// Send the stream; returns the connection if it can serve another request.
pub async fn answer(plan: StreamPlan<'_>, mut stream: TcpStream) -> Option<TcpStream> {
    let fault = plan.fault;
    let close_delimited = fault.kind == FaultKind::CloseDelimited;
    let mut w = HeadWriter::new(200);
    w.header("content-type", "text/event-stream")
        .header("cache-control", "no-cache");
    for (n, v) in super::provider_head::of_stream(plan.api, plan.seq, fault) {
        w.header(n, &v);
    }
    for (n, v) in plan.extra {
        w.header(n, v);
    }
    if close_delimited {
        w.header("connection", "close");
    } else {
        w.header("transfer-encoding", "chunked");
    }
    if stream.write_all(w.finish(b"")).await.0.is_err() {
        return None;
    }
    if fault.kind == FaultKind::StallAfterHead {
        until_closed(&mut stream).await;
        return None;
    }
    if fault.kind == FaultKind::Heartbeats {
        let every = Duration::from_millis(fault.interval_ms.unwrap_or(100));
        for _ in 0..fault.after {
            monoio::time::sleep(every).await;
            let mut ping = Vec::new();
            push_event(&mut ping, b": keep-alive\n\n", !close_delimited);
            if stream.write_all(ping).await.0.is_err() {
                return None;
            }
        }
    }
    let evs = events_for(&plan);
    // Every event, framed, in one buffer; each write sends one event's slice of it, so a
    // stream costs the simulator two allocations, not two per event.
    let mut all = Vec::with_capacity(evs.iter().map(|e| e.len() + 16).sum::<usize>() + 8);
    let mut ends = Vec::with_capacity(evs.len());
    for ev in &evs {
        push_event(&mut all, ev, !close_delimited);
        ends.push(all.len());
    }
    let drip = matches!(fault.kind, FaultKind::SlowDrip | FaultKind::ToolDrip);
    let interval = if drip {
        fault.interval_ms.unwrap_or(1000)
    } else {
        plan.interval_ms
    };
    let mut start = 0;
    for (i, &end) in ends.iter().enumerate() {
        if fault.kind == FaultKind::ResetMidStream && i as u32 >= fault.after {
            reset(stream);
            return None;
        }
        if i > 0 && interval > 0 {
            monoio::time::sleep(Duration::from_millis(interval)).await;
        }
        let (r, back) = stream.write_all(all.slice(start..end)).await;
        all = back.into_inner();
        if r.is_err() {
            return None;
        }
        start = end;
    }
    if close_delimited {
        return None;
    }
    if stream.write_all(&b"0\r\n\r\n"[..]).await.0.is_err() {
        return None;
    }
    plan.keep.then_some(stream)
}

/// The events of the answer, after the fault has had its say.
fn events_for(plan: &StreamPlan<'_>) -> Vec<Vec<u8>> {
    let (api, model, seq, fault) = (plan.api, plan.model, plan.seq, plan.fault);
    let mut evs = match plan.tool {
        Some(name) => super::tools::events(api, model, seq, name, plan.include_usage),
        None => body::sse_events(api, model, plan.events, seq, plan.include_usage),
    };
    match fault.kind {
        FaultKind::MalformedSse => {
            evs.truncate(2);
            evs.push(b"data: {\"choices\": [ {broken json\n\nevent\n: nonsense\r\n\n".to_vec());
        }
        FaultKind::NoTerminalMarker => {
            evs.pop();
        }
        FaultKind::ToolDrip => {
            let args = |a: &str| {
                let v = serde_json::json!({"id": format!("chatcmpl-sim{seq}"), "object": "chat.completion.chunk", "created": 0, "model": model,
                    "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": a}}]}, "finish_reason": null}]});
                format!("data: {v}\n\n").into_bytes()
            };
            let first = evs.first().cloned().unwrap_or_default();
            let mut tool = vec![first];
            for i in 0..plan.events {
                tool.push(args(if i == 0 { "{\"q\":\"" } else { "x" }));
            }
            tool.push(b"data: [DONE]\n\n".to_vec());
            evs = tool;
        }
        FaultKind::SseErrorAfter => {
            // The lifecycle event, `after` content events, then the error and nothing more.
            evs.truncate(1 + plan.fault.after as usize);
            let kind = fault.error_type.as_deref().unwrap_or("overloaded_error");
            let msg = fault.message.as_deref().unwrap_or("Overloaded");
            let error = serde_json::json!({"type": kind, "message": msg});
            evs.push(error_event(api, error));
        }
        FaultKind::SseError => {
            // Lifecycle events first (Anthropic message_start, Responses response.created),
            // then the error where content should begin.
            let plain = matches!(api, Api::Chat | Api::Completions);
            evs.truncate(usize::from(!plain));
            let msg = fault.message.as_deref().unwrap_or("Rate limit exceeded");
            let error = serde_json::json!({"type": "rate_limit_error", "code": "rate_limit_exceeded", "message": msg});
            evs.push(error_event(api, error));
        }
        _ => {}
    }
    evs
}

/// An in-band error event in the API's own shape: OpenAI's `data: {"error": …}`, else
/// `event: error` with Anthropic's `{"type": "error", "error": …}`.
fn error_event(api: Api, error: serde_json::Value) -> Vec<u8> {
    if matches!(api, Api::Chat | Api::Completions | Api::Gemini) {
        format!("data: {}\n\n", serde_json::json!({ "error": error })).into_bytes()
    } else {
        let err = serde_json::json!({"type": "error", "error": error});
        format!("event: error\ndata: {err}\n\n").into_bytes()
    }
}

/// Append one event, as an HTTP/1.1 chunk when `chunked`.
fn push_event(out: &mut Vec<u8>, ev: &[u8], chunked: bool) {
    if chunked {
        let _ = write!(out, "{:x}\r\n", ev.len());
        out.extend_from_slice(ev);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(ev);
    }
}
