//! Relaying the upstream response: the head as soon as it arrives, then each upstream read as
//! one client write of the same bytes (no copy on plain TCP, no per-event flush). A chunk
//! tracker reads along to find the end of the body; close-delimited bodies are re-framed as
//! chunked for keep-alive clients.

use super::client_head::{Shape, carries_body, head_for_client};
use super::deadline::{Timer, before, set_timer};
pub use super::relay_failure::RelayFailure;
use super::watch::ClientWatch;
use crate::dialect::ApiError;
use crate::http::Head;
use crate::http::chunk::size_line;
use crate::http::nowait::Push;
use crate::upstream::stream::BodyRead;
use bytes::{Bytes, BytesMut};
use monoio::io::AsyncWriteRentExt;
use monoio::net::tcp::TcpOwnedWriteHalf;
use std::os::fd::RawFd;
use std::time::Duration;

/// What the client is owed and how to frame it.
pub struct Relay<'a> {
    /// The client's endpoint: a stream that fails after commit ends as its API ends one.
    pub endpoint: crate::dialect::Endpoint,
    pub request_id: &'a str,
    pub route: &'a str,
    /// `provider/connection`; `None` when this client may not see it.
    pub connection_label: Option<&'a str>,
    /// `x-ringside-attempts` (the decision record so far).
    pub attempts: &'a str,
    /// The connection's secrets: redacted wherever an upstream header echoes one.
    pub secrets: super::redact::Secrets<'a>,
    pub client_keep_alive: bool,
    pub client_http11: bool,
    /// The client has its head already (a waiting stream's, `proxy::keepalive`): the answer
    /// goes out as chunks of that body.
    pub head_sent: bool,
    /// The tenant has spent this share (percent, 80 or more) of this budget.
    pub budget_warning: Option<(u8, crate::flow::spend::Limit)>,
    /// When the stream's writes are joined into fuller segments (`stream.coalesce_events`,
    /// or the client key's own choice).
    pub coalesce: crate::sse::Coalesce,
    /// How long the upstream may send nothing, in milliseconds (durations here are 32-bit:
    /// this lives in every held stream's task).
    pub idle_timeout_ms: u32,
    /// How long the client may accept nothing before it counts as gone, in milliseconds.
    pub send_timeout_ms: u32,
    /// The execution budget's end: the stream is cut (upstream closed) when it passes.
    pub hard_deadline: Option<std::time::Instant>,
    /// The stream guard's settings (readiness, total time, throughput watchdog); borrowed:
    /// the relay's state lives in every held stream's task.
    pub stream: &'a crate::sse::StreamSettings,
    /// The client's socket, for writes that do not wait (`http::nowait`); negative: every
    /// write goes through the runtime. (A plain descriptor, not an `Option`: 4 bytes fewer in
    /// every held stream's task.)
    pub client_fd: std::os::fd::RawFd,
    /// What judging the stream's end may read of the response head (the rest of an event
    /// stream's head is let go once the client has its copy).
    pub judging: &'a crate::resilience::settings::Settings,
}

impl Relay<'_> {
    fn client_fd(&self) -> Option<RawFd> {
        (self.client_fd >= 0).then_some(self.client_fd)
    }

    fn send_timeout(&self) -> Duration {
        Duration::from_millis(self.send_timeout_ms.into())
    }
}

/// When a stream's events are joined: the client key's own choice, else the instance's.
pub fn coalesce_for(
    client: Option<&crate::clients::Client>,
    s: &crate::sse::StreamSettings,
) -> crate::sse::Coalesce {
    client
        .and_then(|c| c.coalesce_events)
        .unwrap_or(s.coalesce_events)
}

/// A duration from the configuration, in milliseconds, as the relay keeps it (32-bit: up to
/// 49 days).
pub fn ms32(ms: u64) -> u32 {
    ms.min(u64::from(u32::MAX)) as u32
}

/// How the relay ended. (What the SSE scanner saw comes beside it, from `relay`: kept in
/// here, its 64 bytes were carried by every held stream's task.)
#[derive(Debug, Default)]
pub struct Relayed {
    pub status: u16,
    pub body_bytes: u64,
    /// The upstream body was read to its end (the connection may be pooled).
    pub upstream_complete: bool,
    /// The client connection can serve another request.
    pub client_keep_alive: bool,
    /// Set when the relay failed after the head went out.
    pub failure: Option<RelayFailure>,
    pub client_gone: bool,
    /// Whether any byte reached the client (after that, nothing may be retried).
    pub committed: bool,
    /// The data of the upstream's own in-band error event, when one came after the commit (it
    /// reached the client as the upstream sent it; the engine judges it like an error answer).
    pub upstream_error: Option<String>,
    /// When the first event with text, a tool call or reasoning went to the client (streams),
    /// in microseconds from the relay's start plus one (0: none yet).
    pub first_useful_us: u32,
    /// A JSON answer's usage (streams: in `sse`): prompt, completion and cached prompt
    /// tokens, each plus one, 0 where it said nothing (packed: this lives as long as the relay).
    pub usage: [u32; 3],
}

/// Send a response whose body was read whole while judging it (an upstream error passed
/// through). Returns whether the client connection stays usable.
pub async fn relay_buffered(
    wr: &mut TcpOwnedWriteHalf,
    up: &Head,
    status: u16,
    body: &[u8],
    r: &Relay<'_>,
    extra: &[(&str, String)],
) -> bool {
    let body = if carries_body(status) { body } else { &[] };
    if r.head_sent {
        // A waiting stream's head went out: the body is its last chunk.
        let mut h = as_chunk(body);
        h.extend_from_slice(b"0\r\n\r\n");
        return write(wr, Bytes::from(h)).await && r.client_keep_alive;
    }
    let shape = Shape {
        status,
        rechunk: false,
        keep_alive: r.client_keep_alive,
        is_sse: false,
        length: Some(body.len()),
        then: body.len(),
        rewritten: false,
    };
    let mut h = head_for_client(up, r, &shape, extra);
    h.extend_from_slice(body);
    write(wr, Bytes::from(h)).await && r.client_keep_alive
}

/// How long the next upstream read may wait, and what it is when that runs out: idle silence,
/// unless the execution budget, the stream's readiness (no useful event yet: `decisive` false)
/// or its total time end sooner.
fn next_wait(
    r: &Relay<'_>,
    decisive: Option<bool>,
    started: std::time::Instant,
    now: std::time::Instant,
) -> (Duration, RelayFailure) {
    let mut wait = Duration::from_millis(r.idle_timeout_ms.into());
    let mut why = RelayFailure::IdleTimeout;
    let mut tighter = |at: Option<std::time::Instant>, reason: RelayFailure| {
        if let Some(at) = at {
            let left = at.saturating_duration_since(now);
            if left < wait {
                wait = left;
                why = reason;
            }
        }
    };
    tighter(r.hard_deadline, RelayFailure::ExecutionTimeout);
    if let Some(decisive) = decisive {
        let st = &r.stream;
        if !decisive {
            tighter(
                Some(started + Duration::from_millis(st.readiness_timeout_ms)),
                RelayFailure::ReadinessTimeout,
            );
        }
        if st.total_timeout_ms > 0 {
            tighter(
                Some(started + Duration::from_millis(st.total_timeout_ms)),
                RelayFailure::TotalTimeout,
            );
        }
    }
    (wait, why)
}

/// End a failed event stream with one error event in the client's dialect (and the last
/// chunk, for a chunked answer). True when it went out.
async fn send_error_event(
    wr: &mut TcpOwnedWriteHalf,
    r: &Relay<'_>,
    failure: RelayFailure,
    client_chunked: bool,
    send_timer: Timer<'_>,
) -> bool {
    let err = if failure == RelayFailure::Shutdown {
        ApiError::new(
            503,
            failure.as_str(),
            "the server is shutting down: its drain grace ended before this stream did",
        )
    } else {
        ApiError::new(
            502,
            failure.as_str(),
            "the upstream stream failed after it had started",
        )
    };
    let ev = err.sse_event(r.endpoint, r.request_id);
    let mut bytes = if client_chunked { as_chunk(&ev) } else { ev };
    if client_chunked {
        bytes.extend_from_slice(b"0\r\n\r\n");
    }
    matches!(
        send(
            wr,
            r.client_fd(),
            Push::Now,
            Bytes::from(bytes),
            send_timer,
            r.send_timeout()
        )
        .await,
        Sent::Done
    )
}

/// When the kernel sends a write to the client: at once, unless the stream's events are
/// joined now (`stream.coalesce_events`, or the client key's `coalesce_events`: always, or
/// while this core is busy). The write with the head (the first token's latency) and the one
/// that ends the message are never held.
fn push_for(r: &Relay<'_>, first: bool, ends_message: bool) -> Push {
    if !first && !ends_message && r.coalesce.joins_now() {
        Push::WithNext
    } else {
        Push::Now
    }
}

/// Frame `data` as one chunk (only for re-framed close-delimited bodies).
fn as_chunk(data: &[u8]) -> Vec<u8> {
    let mut line = [0u8; 18];
    let n = size_line(data.len(), &mut line);
    let mut v = Vec::with_capacity(n + data.len() + 2);
    v.extend_from_slice(&line[..n]);
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

/// How a write to the client went.
enum Sent {
    Done,
    Gone,
    /// The client accepted nothing for `limits.client_send_timeout_ms`: it stopped reading.
    Stalled,
}

/// Write to the client, within the send timeout (measured per write, like nginx's
/// `send_timeout`: a slow reader is fine, one that stops reading is cut).
///
/// What the client's socket takes at once is sent without waiting (`http::nowait`): the read
/// buffer the bytes came in is then free before the task sleeps again, pushed out as `push`
/// says. Only the rest, when the socket is full, goes through the runtime under the timer.
async fn send(
    wr: &mut TcpOwnedWriteHalf,
    fd: Option<RawFd>,
    push: Push,
    mut data: Bytes,
    timer: Timer<'_>,
    limit: Duration,
) -> Sent {
    if data.is_empty() {
        return Sent::Done;
    }
    if let Some(fd) = fd {
        match crate::http::nowait::send_then(fd, &data, push) {
            Ok(n) if n == data.len() => return Sent::Done,
            Ok(n) => bytes::Buf::advance(&mut data, n),
            Err(_) => return Sent::Gone,
        }
    }
    // Boxed: a full socket is the rare case, and the runtime's write future (280 bytes) would
    // otherwise widen every held stream's task.
    Box::pin(send_rest(wr, data, timer, limit)).await
}

/// What the client's socket did not take at once, through the runtime under the send timer.
async fn send_rest(
    wr: &mut TcpOwnedWriteHalf,
    data: Bytes,
    timer: Timer<'_>,
    limit: Duration,
) -> Sent {
    set_timer(timer, crate::clock::instant() + limit);
    match before(wr.write_all(data), timer).await {
        Ok((Ok(_), _)) => Sent::Done,
        Ok((Err(_), _)) => Sent::Gone,
        Err(()) => Sent::Stalled,
    }
}

async fn write(wr: &mut TcpOwnedWriteHalf, data: Bytes) -> bool {
    if data.is_empty() {
        return true;
    }
    let (res, _) = wr.write_all(data).await;
    res.is_ok()
}

/// The client's request, as far as the relay lets it go at the commit (see [`relay`]).
pub(crate) struct Request<'x> {
    /// The body: kept while the answer may still go elsewhere, let go once a byte of the answer
    /// reaches the client (a held stream would otherwise keep its prompt, often tens of
    /// kilobytes, for as long as it runs).
    pub body: &'x mut Bytes,
    /// The head: an event stream keeps of it, from then on, only what the access log reads.
    pub head: &'x mut Head,
    /// The answer is of another API, translated for the client as it is relayed.
    pub translating: Option<Box<translated::Translating>>,
}

impl Request<'_> {
    /// The answer's first byte goes to the client now: nothing is retried after this. Out of
    /// line: once per answer, and the relay's own loop stays as small as it was.
    #[inline(never)]
    fn let_go(&mut self, event_stream: bool) {
        *self.body = Bytes::new();
        if event_stream {
            stream::let_go_of_request_head(self.head);
        }
    }
}

/// Relay the response whose head was just read from `body`. `buf` holds the bytes after the
/// head. What the client sent is let go at the first write (`Request`).
#[allow(clippy::manual_async_fn)] // an async block: see `crate::proxy`, *Arguments in place*
pub(crate) fn relay<B: BodyRead>(
    wr: &mut TcpOwnedWriteHalf,
    watch: &mut ClientWatch<'_>,
    body: &mut B,
    buf: &mut BytesMut,
    head: &mut Head,
    r: &Relay<'_>,
    mut request: Request<'_>,
) -> impl std::future::Future<Output = (Relayed, Option<crate::sse::Totals>)> {
    async move {
        let mut out = Relayed {
            status: head.status,
            ..Default::default()
        };
        let mut s = Stream::start(head, r, buf.len(), request.translating.take());
        // Reads and writes each have one timer for the whole stream: it is moved, not remade.
        let mut timer = None;
        let mut send_timer = None;
        loop {
            let (data, done, edge_now, ends_message, first) = match s.next_write(buf, &mut out) {
                Next::Write {
                    data,
                    done,
                    edge_now,
                    ends_message,
                    first,
                } => (data, done, edge_now, ends_message, first),
                // Nothing reached the client yet: the caller may still try elsewhere.
                Next::Unsent => return (out, None),
                Next::Stop => break,
            };
            if first {
                // (Asked at the write with the head only: the request lives apart from the
                // stream, a cache line of its own to load at every event.)
                request.let_go(s.is_sse());
            }
            let push = push_for(r, first, ends_message);
            match send(
                wr,
                r.client_fd(),
                push,
                data,
                &mut send_timer,
                r.send_timeout(),
            )
            .await
            {
                Sent::Done => {
                    s.clean_edge = edge_now;
                    s.message_whole |= ends_message;
                }
                Sent::Gone => {
                    out.client_gone = true;
                    break;
                }
                Sent::Stalled => {
                    out.client_gone = true;
                    out.failure = Some(RelayFailure::ClientSendTimeout);
                    break;
                }
            }
            if s.too_slow(done) {
                out.failure = Some(RelayFailure::ThroughputTooLow);
                break;
            }
            if done {
                out.upstream_complete = !s.upstream_eof;
                break;
            }
            if s.upstream_eof {
                // Once per response, and rare (a close-delimited body): boxed, so that its future
                // does not widen every held stream's task.
                Box::pin(s.at_upstream_eof(wr, &mut out, &mut send_timer, r.send_timeout())).await;
                break;
            }
            let why = s.arm_read(r, &mut timer);
            let is_sse = s.is_sse();
            // An event stream waits for readiness first: fewer, fuller reads (see
            // `read_when_ready`); other bodies arrive in large pieces anyway.
            let read = before(body.read_body(buf, is_sse), &mut timer);
            let read = watch.race(std::pin::pin!(read)).await;
            if let Err(stop) = s.after_read(read, why) {
                match stop {
                    Some(failure) => out.failure = Some(failure),
                    None => out.client_gone = true,
                }
                break;
            }
        }
        if let Some(failure) = s.error_event_due(&out) {
            let chunked = s.client_chunked();
            // Once per failed stream: boxed for the same reason.
            let sent = Box::pin(send_error_event(wr, r, failure, chunked, &mut send_timer)).await;
            s.error_event_sent(sent);
        }
        let sse = s.finish(&mut out);
        (out, sse)
    }
}

mod stream;
#[cfg(test)]
mod tests;
pub(crate) mod translated;

use stream::{Next, Stream};
