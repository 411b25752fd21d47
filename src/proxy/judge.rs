//! Judging an upstream answer before commit: read an error body whole (bounded), or hold a 200
//! event stream until its first useful event to catch an in-band error; then restate and
//! classify. Nothing here has reached the client yet, so whatever it finds may be retried.

use super::watch::{ClientWatch, Raced};
use crate::http::chunk::ChunkTracker;
use crate::http::io::read_more;
use crate::http::{Framing, Head};
use crate::resilience::classify::{Verdict, classify};
use crate::resilience::hints::{self, Hint, HintSource};
use crate::resilience::{Settings, restate};
use crate::upstream::UpConn;
use bytes::Bytes;
use std::time::{Duration, Instant};

/// Error bodies larger than this are relayed unjudged (nobody sends a 1 MiB error).
pub const MAX_ERROR_BODY: usize = 256 * 1024;

pub enum Read<T> {
    Ok(T),
    ClientGone,
    /// The upstream failed or ran out of time while we read.
    Failed {
        detail: String,
        timeout: bool,
    },
}

/// Payload bytes of `raw` (de-chunked when chunked). `Err` on bad framing.
fn payload(raw: &[u8], framing: Framing) -> Result<(Vec<u8>, bool), ()> {
    match framing {
        Framing::Chunked => {
            let mut t = ChunkTracker::new();
            let mut out = Vec::with_capacity(raw.len());
            t.feed(raw, |p| out.extend_from_slice(p)).map_err(|_| ())?;
            Ok((out, t.is_done()))
        }
        Framing::Length(n) => {
            let end = (n as usize).min(raw.len());
            Ok((raw[..end].to_vec(), raw.len() as u64 >= n))
        }
        Framing::Empty => Ok((Vec::new(), true)),
        Framing::Close => Ok((raw.to_vec(), false)),
    }
}

/// Read a whole (error) body into memory; `up.buf` keeps the raw bytes so that the connection
/// may be pooled afterwards. Returns the payload and whether the body ended cleanly.
pub async fn read_error_body(
    up: &mut UpConn,
    head: &Head,
    deadline: Instant,
    watch: &mut ClientWatch<'_>,
) -> Read<Option<(Bytes, bool)>> {
    loop {
        let Ok((body, done)) = payload(&up.buf, head.framing) else {
            return Read::Failed {
                detail: "bad framing in the error body".into(),
                timeout: false,
            };
        };
        if done {
            return Read::Ok(Some((Bytes::from(body), true)));
        }
        if up.buf.len() > MAX_ERROR_BODY {
            return Read::Ok(None);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let read = monoio::time::timeout(left, read_more(&mut up.stream, &mut up.buf));
        match watch.race(read).await {
            Raced::ClientGone => return Read::ClientGone,
            Raced::Done(Err(_)) => {
                return Read::Failed {
                    detail: "error body not received in time".into(),
                    timeout: true,
                };
            }
            Raced::Done(Ok(Ok(0))) if head.framing == Framing::Close => {
                return Read::Ok(Some((Bytes::from(body), false)));
            }
            Raced::Done(Ok(Ok(0))) | Raced::Done(Ok(Err(_))) => {
                return Read::Failed {
                    detail: "upstream closed inside the error body".into(),
                    timeout: false,
                };
            }
            Raced::Done(Ok(Ok(_))) => {}
        }
    }
}

/// What the first events of a 200 stream showed.
pub enum Peek {
    /// A useful event (or the window ended): commit and relay.
    Clean,
    /// An in-band error before any content: its JSON text.
    Error(String),
}

/// Kind of one SSE event for the pre-commit decision.
enum Kind {
    Lifecycle,
    Useful,
    Error,
}

fn event_kind(event: &str, data: &str) -> Kind {
    match event {
        "error" | "response.failed" => return Kind::Error,
        "ping" | "message_start" | "response.created" | "response.in_progress" => {
            return Kind::Lifecycle;
        }
        _ => {}
    }
    let d = data.trim_start();
    if d.starts_with("{\"error\"") || d.starts_with("{\"type\":\"error\"") {
        return Kind::Error;
    }
    if d.starts_with('{') && (d.contains("\"error\":{") || d.contains("\"error\": {")) {
        // A chunk object with an error member (the OpenAI SDK raises on these).
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(d)
            && v.get("error").is_some_and(|e| e.is_object())
        {
            return Kind::Error;
        }
    }
    if event.is_empty() && d.is_empty() {
        return Kind::Lifecycle;
    }
    Kind::Useful
}

/// Scan complete events in `p`; the first non-lifecycle one decides.
fn first_decisive(p: &[u8]) -> Option<Peek> {
    let text = String::from_utf8_lossy(p);
    let text = text.replace("\r\n", "\n");
    let mut rest = text.as_str();
    while let Some(end) = rest.find("\n\n") {
        let block = &rest[..end];
        rest = &rest[end + 2..];
        let mut event = "";
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim();
            } else if let Some(v) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if block.lines().all(|l| l.starts_with(':') || l.is_empty()) {
            continue; // comment / heartbeat
        }
        match event_kind(event, &data) {
            Kind::Lifecycle => {}
            Kind::Useful => return Some(Peek::Clean),
            Kind::Error => return Some(Peek::Error(data)),
        }
    }
    None
}

/// Hold a 200 event stream until its first useful event, an in-band error, `max_bytes`, or
/// `window`. The raw bytes stay in `up.buf` for the relay.
pub async fn peek_stream(
    up: &mut UpConn,
    head: &Head,
    window: Duration,
    max_bytes: usize,
    deadline: Instant,
    watch: &mut ClientWatch<'_>,
) -> Read<Peek> {
    let window_end = Instant::now() + window;
    let until = window_end.min(deadline);
    loop {
        let Ok((p, done)) = payload(&up.buf, head.framing) else {
            return Read::Ok(Peek::Clean); // the relay reports the framing error
        };
        if let Some(verdict) = first_decisive(&p) {
            return Read::Ok(verdict);
        }
        if done || p.len() >= max_bytes {
            return Read::Ok(Peek::Clean);
        }
        let left = until.saturating_duration_since(Instant::now());
        // The request's own deadline (or execution budget) ends first: nothing useful came.
        let out_of_time = || Read::Failed {
            detail: "no stream event before the deadline".into(),
            timeout: true,
        };
        if left.is_zero() {
            return if deadline <= window_end {
                out_of_time()
            } else {
                Read::Ok(Peek::Clean)
            };
        }
        let read = monoio::time::timeout(left, read_more(&mut up.stream, &mut up.buf));
        match watch.race(read).await {
            Raced::ClientGone => return Read::ClientGone,
            Raced::Done(Err(_)) if deadline <= window_end => return out_of_time(),
            Raced::Done(Err(_)) => return Read::Ok(Peek::Clean),
            Raced::Done(Ok(Ok(0))) | Raced::Done(Ok(Err(_))) if p.is_empty() => {
                return Read::Failed {
                    detail: "stream ended before its first event".into(),
                    timeout: false,
                };
            }
            // Cut after some lifecycle events: let the relay deliver what there is.
            Raced::Done(Ok(Ok(0))) | Raced::Done(Ok(Err(_))) => return Read::Ok(Peek::Clean),
            Raced::Done(Ok(Ok(_))) => {}
        }
    }
}

/// Restate, find the retry hint, classify. `status` is 200 for an in-band stream error.
pub fn judge(
    s: &Settings,
    provider: &str,
    status: u16,
    head: &Head,
    body: &[u8],
    now_unix: u64,
) -> (Verdict, Option<restate::Restated>) {
    let lower = String::from_utf8_lossy(body).to_lowercase();
    let get = |n: &str| head.get_str(n).map(str::to_string);
    let restated = restate::apply(&s.restate, provider, status, &lower);
    let status = match (&restated, status) {
        (Some(r), _) => r.to,
        // An in-band error is judged by its body; 502 is the neutral stand-in.
        (None, 200) => 502,
        (None, s) => s,
    };
    let mut hint = hints::from_headers(&get, now_unix).or_else(|| hints::from_text(&lower));
    if hint.is_none()
        && let Some(r) = &restated
    {
        hint = Some(Hint {
            ms: r.default_retry_after_ms,
            source: HintSource::Restated,
        });
    }
    let v = classify(
        &s.operator_rules,
        &s.builtin_rules,
        provider,
        status,
        &lower,
        &get,
        hint,
    );
    (v, restated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_decisive_event() {
        assert!(first_decisive(b"event: message_start\ndata: {}\n\n").is_none());
        assert!(matches!(
            first_decisive(b": keepalive\n\nevent: message_start\ndata: {}\n\nevent: error\ndata: {\"type\":\"error\"}\n\n"),
            Some(Peek::Error(_))
        ));
        assert!(matches!(
            first_decisive(b"data: {\"error\":{\"message\":\"x\"}}\r\n\r\n"),
            Some(Peek::Error(_))
        ));
        assert!(matches!(
            first_decisive(b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"),
            Some(Peek::Clean)
        ));
        assert!(first_decisive(b"data: {\"choices\":[{\"delta\":{\"content\":\"hi").is_none());
        assert!(matches!(
            first_decisive(b"data: [DONE]\n\n"),
            Some(Peek::Clean)
        ));
    }

    #[test]
    fn payload_dechunks() {
        let (p, done) = payload(b"5\r\nhello\r\n0\r\n\r\n", Framing::Chunked).unwrap();
        assert_eq!((p.as_slice(), done), (&b"hello"[..], true));
        let (p, done) = payload(b"5\r\nhel", Framing::Chunked).unwrap();
        assert_eq!((p.as_slice(), done), (&b"hel"[..], false));
        assert!(payload(b"zz\r\n", Framing::Chunked).is_err());
        assert!(payload(b"abc", Framing::Length(3)).unwrap().1);
    }
}
