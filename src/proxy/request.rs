//! One client request, driven from its head to its finalisation: intake (`intake`: caller,
//! body, facts, route, quota), the attempt loop (`attempts`), the commit (`deliver`), and the
//! record kept once at the end (metrics, access log, decision ring). Before the first client
//! byte anything may be retried; after it, nothing is replayed.

use super::client_body::drain_body;
use super::client_facts::{client_request_id, priority_of, tenant_of};
use crate::audit::{AttemptOutcome, Record};
use crate::dialect::{ApiError, Dialect, Endpoint, dialect_for_path};
use crate::http::Head;
use crate::state::core::Core;
use bytes::{Bytes, BytesMut};
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// How one attempt ended.
pub(super) enum AttemptEnd {
    /// The response was committed to the client (successfully or not): the request is over.
    Done {
        keep_alive: bool,
    },
    /// Failed before commit: judged, and possibly worth trying elsewhere.
    Failed {
        verdict: crate::resilience::classify::Verdict,
        /// Metrics outcome (`http_429`, `tls_error`, ...).
        kind: AttemptOutcome,
        detail: String,
        /// The upstream's error answer, read whole (absent for transport failures).
        response: Option<Box<super::answer::Buffered>>,
        restated_from: Option<u16>,
        /// Cut short by the request's own deadline: says nothing about the upstream.
        self_inflicted: bool,
    },
    ClientGone,
}

pub(crate) struct Ctx<'a> {
    pub core: &'a Core,
    pub head: &'a Head,
    pub endpoint: Endpoint,
    pub dialect: Dialect,
    pub request_id: String,
    pub body: Bytes,
    /// Where the top-level `model` value is in `body` (found by the body check, so that
    /// rewriting it does not walk the body again).
    pub model_span: Option<std::ops::Range<usize>>,
    pub keep_alive: bool,
    pub record: Record,
    pub started: Instant,
    /// The client (tenant) as a stable hash of its credential; 0 when it sent none.
    pub tenant: u64,
    /// 0 (first) to 9, from `x-ringside-priority`; 5 by default.
    pub priority: u8,
    /// Set once a flow permit is held: when the execution budget ends.
    pub exec_deadline: Option<Instant>,
    /// The client key, when keys are configured.
    pub client: Option<crate::clients::Client>,
    /// The exclusive lease this request is fenced to (only its connection may serve it).
    pub lease: Option<super::lease::Binding>,
    /// The client connection's place under the connection caps.
    pub ticket: &'a crate::state::conn_caps::Ticket<'a>,
    /// Whether this client may see provider and connection names and upstream error text in
    /// answers (the operator: open mode or an `admin`-scoped key). Tenants' keys get the
    /// request id instead; the decision record keeps everything.
    pub reveal: bool,
}

impl Ctx<'_> {
    /// `x-ringside-attempts` as this client may see it: the whole trail, or only the count.
    pub fn attempts_header(&self, current: Option<(&str, u16)>) -> String {
        if self.reveal {
            self.record.attempts_header(current)
        } else {
            (self.record.attempts.len() + usize::from(current.is_some())).to_string()
        }
    }
}

/// What a request knows of the client connection it came on.
pub struct Conn<'a> {
    pub ticket: &'a crate::state::conn_caps::Ticket<'a>,
    /// The connection's last request (`max_requests_per_connection`): answered with close.
    pub last_request: bool,
}

/// Handle one request whose head has been read. Returns whether the connection stays open.
pub async fn handle(
    core: &Rc<Core>,
    head: Head,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
    conn: Conn<'_>,
) -> bool {
    let last_on_connection = conn.last_request;
    let started = crate::clock::instant();
    let in_flight = InFlightGauge::enter(&core.metrics.in_flight);
    let dialect = dialect_for_path(head.path());
    let request_id = client_request_id(&head).unwrap_or_else(|| core.next_request_id());
    let keep_alive = head.keep_alive && !last_on_connection;
    let endpoint = Endpoint::from_path(head.path());
    let record = Record {
        request_id: request_id.clone(),
        core: core.id,
        method: match head.method() {
            "POST" => Cow::Borrowed("POST"),
            "GET" => Cow::Borrowed("GET"),
            "OPTIONS" => Cow::Borrowed("OPTIONS"),
            other => Cow::Owned(other.to_string()),
        },
        path: match endpoint {
            Some(e) if e.path() == head.path() => Cow::Borrowed(e.path()),
            _ => Cow::Owned(head.path().to_string()),
        },
        ..Default::default()
    };
    let mut ctx = Ctx {
        core,
        head: &head,
        endpoint: endpoint.unwrap_or(Endpoint::Models),
        dialect,
        request_id,
        body: Bytes::new(),
        model_span: None,
        keep_alive,
        record,
        started,
        tenant: tenant_of(&head),
        priority: priority_of(&head),
        exec_deadline: None,
        client: None,
        lease: None,
        ticket: conn.ticket,
        reveal: true,
    };
    let (keep, route_index) = match endpoint {
        None => {
            let body_ok = drain_body(&mut ctx, rd, wr, buf).await;
            let err = ApiError::new(
                404,
                "unknown_endpoint",
                format!("no endpoint {} {}", head.method(), head.path()),
            );
            (
                finish_error(&mut ctx, wr, &err, body_ok).await,
                core.shared.routes.other_index,
            )
        }
        Some(ep) => super::intake::serve(&mut ctx, ep, rd, wr, buf).await,
    };
    ctx.record.total_ms = crate::clock::since(started).as_millis() as u64;
    core.metrics.request(route_index, ctx.record.status);
    drop(in_flight);
    if let Some(log) = &core.shared.log
        && !log.send(ctx.record.log_line())
    {
        core.metrics.log_lines_dropped.fetch_add(1, Relaxed);
    }
    ctx.record.ts_ms = crate::clock::unix_ms();
    core.remember(std::mem::take(&mut ctx.record));
    core.metrics.finalized.fetch_add(1, Relaxed);
    keep && !core.drain.is_draining()
}

/// Write an error, record it, and say whether the connection stays open.
pub(super) async fn finish_error(
    ctx: &mut Ctx<'_>,
    wr: &mut TcpOwnedWriteHalf,
    err: &ApiError,
    body_ok: bool,
) -> bool {
    ctx.record.status = err.status;
    ctx.record.error_code = Some(err.code);
    ctx.record.outcome = crate::audit::Outcome::Rejected;
    if ctx.record.ttfb_ms.is_none() {
        ctx.record.ttfb_ms = Some(crate::clock::since(ctx.started).as_millis() as u64);
    }
    super::respond_error_to(
        wr,
        ctx.dialect,
        err,
        &ctx.request_id,
        ctx.keep_alive && body_ok,
        ctx.head.method() == "HEAD",
    )
    .await
}

/// The in-flight gauge's share of one request: given back when the request ends, or when its
/// task is dropped half-way (a contained panic, see `runtime::contain`).
struct InFlightGauge<'a>(&'a std::sync::atomic::AtomicI64);

impl<'a> InFlightGauge<'a> {
    fn enter(gauge: &'a std::sync::atomic::AtomicI64) -> Self {
        gauge.fetch_add(1, Relaxed);
        InFlightGauge(gauge)
    }
}

impl Drop for InFlightGauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}
