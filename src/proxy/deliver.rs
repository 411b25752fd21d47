//! Deliver: the commit. The upstream's answer is relayed to the client (`forward`), and what
//! came of it is recorded; nothing is retried after this.

use super::exchange::{AttemptEnd, Ctx, Delivered, Failed};
use super::forward::{Relay, RelayFailure, Relayed, Request, coalesce_for, ms32, relay};
use super::judge;
use super::translated::{Delivery, relay_whole};
use super::watch::ClientWatch;
use crate::audit::{AttemptOutcome, AttemptRecord, Decision, Outcome};
use crate::http::Head;
use crate::ids::ConnNames;
use crate::resilience::classify;
use crate::route::{Candidate, Entry};
use crate::upstream::UpConn;
use crate::upstream::stream::{H2Body, Layered, PlainBody, TlsBody, UpStream};
use monoio::net::tcp::TcpOwnedWriteHalf;
use std::sync::atomic::Ordering::Relaxed;

/// The upstream answer an attempt got ready to deliver.
pub(super) struct Upstream {
    pub cand: Candidate,
    pub provider_index: usize,
    pub up: UpConn,
    pub head: Head,
}

/// An attempt's end, with an answer to deliver taken out.
pub(super) enum Attempted {
    Ready(Upstream),
    Ended(AttemptEnd),
}

impl Upstream {
    /// The answer an attempt got ready, or how else it ended.
    pub fn from_end(end: AttemptEnd, cand: Candidate) -> Attempted {
        match end {
            AttemptEnd::Ready {
                up,
                head,
                provider_index,
            } => Attempted::Ready(Upstream {
                cand,
                provider_index,
                up,
                head,
            }),
            end => Attempted::Ended(end),
        }
    }

    /// Back to the core's idle pool, once its answer was read to the end (`generation`: the
    /// config generation its request started on).
    pub fn pool(self, core: &crate::state::core::Core, generation: u64) {
        let now = crate::clock::now_ms();
        core.pool
            .borrow_mut()
            .put(self.provider_index, self.up, now, generation);
    }
}

/// Commit: relay the upstream response to the client (nothing may be retried after this).
/// Also says whether the upstream connection may serve again ([`Upstream::pool`]). The
/// answer is borrowed, not taken: an `async fn`'s arguments stay in its state for its whole
/// life, and this one lives as long as the stream.
#[allow(clippy::manual_async_fn)] // an async block: see `crate::proxy`, *Arguments in place*
pub(super) fn commit(
    ctx: &mut Ctx<'_, '_>,
    entry: &Entry,
    ready: &mut Upstream,
    wr: &mut TcpOwnedWriteHalf,
    watch: &mut ClientWatch<'_>,
) -> impl std::future::Future<Output = (AttemptEnd, bool)> {
    async move {
        // Only what the relay needs is kept across it; the candidate, the head and the names are
        // read again after it (each kept took room in every held stream's task).
        let names = ctx.generation.conn_names.get(ready.cand.connection.index());
        let Some(&ConnNames { label, .. }) = names else {
            return (unknown_connection(), false);
        };
        let attempts = ctx.attempts_header(Some((label, ready.head.status)));
        ctx.record.ttfb_ms = Some(crate::clock::since(ctx.started).as_millis() as u32);
        // When the relay began, in microseconds from the request's head (as an instant it took
        // 16 bytes; 64-bit, as a deadline may allow hours of waiting before it).
        let relay_from_us = crate::clock::since(ctx.started).as_micros() as u64;
        // A waiting stream's keep-alives stop while its answer goes out.
        let head_sent = watch.pause_keepalive(true);
        let (res, sse) = 'relay: {
            let hard_deadline = ctx.exec_deadline;
            // The stages apart: the relay reads the head's facts and takes the admitted body.
            let (req, admitted) = (&mut *ctx.req, &mut ctx.admitted);
            let cfg = req.config();
            let r = Relay {
                secrets: super::redact::Secrets::of(req.core, cfg, ready.cand.connection),
                endpoint: admitted.endpoint,
                request_id: &req.record.request_id,
                route: &entry.name,
                connection_label: req.reveal.then_some(label),
                attempts: &attempts,
                client_keep_alive: req.keep_alive,
                client_http11: req.head.version_minor >= 1,
                head_sent,
                budget_warning: req.budget_warning,
                coalesce: coalesce_for(admitted.client.as_deref(), &cfg.stream),
                idle_timeout_ms: ms32(cfg.upstream.idle_read_timeout_ms),
                send_timeout_ms: ms32(cfg.limits.client_send_timeout_ms),
                hard_deadline,
                stream: &cfg.stream,
                client_fd: req.conn.fd,
                judging: &cfg.resilience,
            };
            let Upstream { up, head, .. } = &mut *ready;
            // The client's body (and a stream's request head) go with the answer's first byte.
            let buf = &mut up.buf;
            let sse = super::attempt::is_event_stream(head);
            let translating = match delivery(&mut ctx.translation, &mut ctx.bill, r.request_id, sse)
            {
                // Boxed: rare, and its answer would otherwise take room in every relay's task.
                Some(Delivery::Whole(w)) => {
                    break 'relay (Box::pin(relay_whole(wr, head, buf, &r, *w)).await, None);
                }
                Some(Delivery::Stream(t)) => Some(t),
                None => None,
            };
            let request = Request {
                body: &mut admitted.body,
                head: &mut *req.head,
                translating,
            };
            // Not boxed: a TLS read is hardly larger than a plain one (`BodyRead`), so a TLS
            // relay fits in the room the plain one takes in the task (boxed, it cost 2 KB per
            // TLS stream).
            match &mut up.stream {
                UpStream::Plain(s) => {
                    relay(wr, watch, &mut PlainBody(s), buf, head, &r, request).await
                }
                UpStream::Layered(l) => match l {
                    Layered::Tls(s) => {
                        relay(wr, watch, &mut TlsBody(s), buf, head, &r, request).await
                    }
                    Layered::H2(s) => {
                        relay(wr, watch, &mut H2Body(s), buf, head, &r, request).await
                    }
                },
            }
        };
        if !res.committed {
            watch.pause_keepalive(false);
            return (uncommitted(&res, &ready.up), false);
        }
        delivered(ctx, entry, ready, &res, (relay_from_us, sse))
    }
}

/// A committed answer's end: judged, recorded, and whether its connection may serve again.
fn delivered(
    ctx: &mut Ctx<'_, '_>,
    entry: &Entry,
    ready: &Upstream,
    res: &Relayed,
    (relay_from_us, sse): (u64, Option<crate::sse::Totals>),
) -> (AttemptEnd, bool) {
    let (cand, head, core) = (ready.cand, &ready.head, ctx.core);
    let (mut delivered, in_band) = judge_delivery(ctx, cand, head, res);
    if let Some(s) = ready.up.stream.h2() {
        super::h2_failure::after_commit(&mut delivered, s);
    }
    let facts = Facts {
        entry,
        cand,
        names: ctx.generation.conn_names[cand.connection],
        status: head.status,
        relay_from_us,
        sse,
    };
    record(ctx, &facts, res, in_band);
    let reusable = res.upstream_complete && head.keep_alive && !core.drain.is_draining();
    let done = AttemptEnd::Done {
        keep_alive: res.client_keep_alive,
        delivered,
    };
    (done, reusable)
}

/// How the answer goes out when not as the upstream sends it: translated (whole or as a
/// stream), or read whole already for a key's owner (and kept as sent, for its duplicates).
/// An event stream whose usage chunk Ringside asked for goes out without it.
fn delivery(
    translation: &mut Option<Box<crate::translate::session::Session>>,
    bill: &mut Option<Box<crate::flow::bill::RequestBill>>,
    request_id: &str,
    event_stream: bool,
) -> Option<Delivery> {
    let translated = translation
        .as_deref_mut()
        .and_then(|session| super::translated::delivery(session, request_id));
    if let Some(d) = translated {
        if let Delivery::Whole(w) = &d {
            super::idempotent::sent(bill, &w.0);
        }
        return Some(d);
    }
    if let Some((answer, complete)) = super::idempotent::take_whole(bill) {
        return Some(Delivery::Whole(Box::new((answer, complete, Vec::new()))));
    }
    if event_stream && bill.as_ref().is_some_and(|b| b.usage_asked) {
        let t = crate::translate::stream::Translator::without_usage(request_id);
        let t = crate::proxy::forward::translated::Translating::new(t, Vec::new());
        return Some(Delivery::Stream(Box::new(t)));
    }
    None
}

/// A connection slot the generation does not name (never expected): nothing was sent.
fn unknown_connection() -> AttemptEnd {
    let failed = Failed::new(
        classify::transport(false),
        AttemptOutcome::ProtocolError,
        "unknown connection".into(),
        true,
    );
    AttemptEnd::Failed(failed)
}

/// The attempt's final verdict, from how its body ended. An in-band error event is judged by
/// the same rules as an error answer with that type and message (restatement included); a
/// failure of the stream itself is a transport failure of its kind.
fn judge_delivery(
    ctx: &Ctx<'_, '_>,
    cand: Candidate,
    head: &Head,
    res: &Relayed,
) -> (Delivered, Option<judge::InBand>) {
    if res.client_gone {
        return (Delivered::Unjudged, None);
    }
    match res.failure {
        // Not the upstream's doing: the client stopped reading, or our own budget ended it.
        Some(
            RelayFailure::ClientSendTimeout
            | RelayFailure::ExecutionTimeout
            | RelayFailure::Shutdown,
        ) => {
            return (Delivered::Unjudged, None);
        }
        Some(f) => {
            let mut v = classify::transport(f.is_timeout());
            v.mid_stream = true;
            return (Delivered::Failed(v), None);
        }
        None => {}
    }
    let Some(text) = &res.upstream_error else {
        return (Delivered::Clean, None);
    };
    let Some((provider, conn)) = ctx.config().connection(cand.connection) else {
        return (Delivered::Unjudged, None);
    };
    // The relay let the client's body go at the commit (`forward::Request`), so words of the
    // event are not checked against it: an error in the middle of a stream is the provider's
    // own (an answer that quotes the request, a validation error, comes before any byte), and
    // words alone earn a short cooldown at most.
    let b = judge::in_band(ctx, provider, conn, head, text);
    let mut v = b.verdict.clone();
    v.mid_stream = true;
    (Delivered::Failed(v), Some(b))
}

/// What was delivered, for the record.
struct Facts<'a> {
    entry: &'a Entry,
    cand: Candidate,
    /// (provider, connection, `provider/connection`)
    names: ConnNames,
    status: u16,
    /// When the relay began, in microseconds from the request's head.
    relay_from_us: u64,
    /// What the SSE scanner saw (event streams only).
    sse: Option<crate::sse::Totals>,
}

/// Record what came of the commit: the metrics, the attempt's line and the request's outcome
/// in the decision record.
fn record(ctx: &mut Ctx<'_, '_>, d: &Facts<'_>, res: &Relayed, in_band: Option<judge::InBand>) {
    let core = ctx.core;
    let (entry, cand) = (d.entry, d.cand);
    if let Some(t) = d.sse {
        ctx.record.stream_stats = Some(crate::audit::StreamStats {
            events: t.events,
            text_bytes: t.text_bytes,
            terminal: t.terminal,
        });
    }
    usage_and_first_token(ctx, d, res);
    let outcome = match (res.client_gone, res.failure) {
        (true, _) => AttemptOutcome::ClientGone,
        (false, Some(f)) => f.outcome(),
        (false, None) if in_band.is_some() => AttemptOutcome::StreamError,
        (false, None) => AttemptOutcome::of_status(d.status),
    };
    core.metrics.attempt(cand.connection, outcome);
    let failed = res.failure.is_some() || in_band.is_some();
    let after_commit = &core.metrics.streams_failed_after_commit;
    if failed {
        after_commit.fetch_add(1, Relaxed);
    }
    if res.failure == Some(super::forward::RelayFailure::ExecutionTimeout) {
        core.shared.flow.gates[cand.connection]
            .stats
            .execution_timeouts
            .fetch_add(1, Relaxed);
    }
    let names = d.names;
    let (ms, ended_us) = relay_ms(ctx, d.relay_from_us);
    // Most requests make one attempt: room for exactly one (Vec's first growth is four).
    ctx.record.attempts.reserve_exact(1);
    ctx.record.attempts.push(AttemptRecord {
        provider: names.provider,
        connection: names.connection,
        model: entry.targets[cand.target].model.clone(),
        outcome,
        status: Some(d.status),
        decision: Decision::Deliver,
        detail: match (&in_band, res.failure) {
            (Some(b), None) => Some(b.detail.clone()),
            (_, f) => f.map(|f| f.as_str().to_string()),
        },
        restated_from: in_band.as_ref().and_then(|b| b.restated_from),
        ms,
        ended_us,
        ..Default::default()
    });
    ctx.record.status = if res.client_gone { 499 } else { d.status };
    ctx.record.outcome = if res.client_gone {
        Outcome::ClientGone
    } else if res.failure == Some(super::forward::RelayFailure::Shutdown) {
        core.shared.lifecycle.count_cut(1);
        Outcome::Shutdown
    } else if failed {
        Outcome::FailedAfterCommit
    } else {
        Outcome::Ok
    };
    ctx.record.error_code = match res.failure {
        Some(f) => Some(f.as_str()),
        None => in_band.map(|_| "upstream_error_event"),
    };
    ctx.record.bytes_out = res.body_bytes;
    ctx.record.target = Some(entry.targets[cand.target].label.clone());
    ctx.record.connection = Some(names.label);
}

/// What the answer's usage said (metrics and record), and when its first token went out.
fn usage_and_first_token(ctx: &mut Ctx<'_, '_>, d: &Facts<'_>, res: &Relayed) {
    let core = ctx.core;
    let cand = d.cand;
    let given = |v: u32| v.checked_sub(1);
    let tokens = match &d.sse {
        Some(t) => (t.input_tokens, t.output_tokens, t.cached_tokens),
        None => (
            given(res.usage[0]),
            given(res.usage[1]),
            given(res.usage[2]),
        ),
    };
    let tokens = crate::audit::Tokens {
        prompt: tokens.0,
        completion: tokens.1,
        cached: tokens.2,
    };
    if !tokens.is_empty() {
        core.metrics.tokens(cand.connection, &tokens);
        ctx.record.tokens = tokens;
    }
    if res.first_useful_us > 0 {
        // From the request's head: to the relay's start, then within the relay.
        let us = d.relay_from_us + u64::from(res.first_useful_us - 1);
        ctx.record.ttft_us = us.clamp(1, u64::from(u32::MAX)) as u32;
    }
}

/// How long the relay that began `relay_from_us` after the request's head has taken, in
/// milliseconds.
// The relayed attempt's length (ms), and its end from the request's start (µs).
fn relay_ms(ctx: &Ctx<'_, '_>, relay_from_us: u64) -> (u64, u64) {
    let now_us = crate::clock::since(ctx.started).as_micros() as u64;
    (now_us.saturating_sub(relay_from_us) / 1_000, now_us)
}

/// Nothing reached the client: the upstream's framing or connection broke before the first
/// byte. A head came, then its HTTP/2 connection died under it and its siblings: counted once.
fn uncommitted(res: &Relayed, up: &UpConn) -> AttemptEnd {
    let failure = res.failure.unwrap_or(RelayFailure::BadFraming);
    let (kind, detail) = (failure.outcome_uncommitted(), failure.as_str().into());
    let f = Failed::new(classify::transport(false), kind, detail, false);
    super::h2_failure::judged(up, AttemptEnd::Failed(f))
}
