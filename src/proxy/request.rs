//! One client request as a single state machine with one owner of retries:
//! body -> facts -> route -> loop { candidate -> connect -> send -> await head -> relay }.
//! Before the first client byte anything may be retried; after it, nothing is replayed.

use super::client_body::{drain_body, drain_small_body, read_client_body};
use super::client_facts::{client_request_id, priority_of, tenant_of};
use super::forward::{Relay, relay};
use super::models::models;
use super::watch::ClientWatch;
use crate::audit::{AttemptOutcome, AttemptRecord, Decision, Outcome, Record};
use crate::dialect::facts::{FactsError, scan};
use crate::dialect::{ApiError, Dialect, Endpoint, dialect_for_path};
use crate::http::Head;
use crate::route::{Candidate, Entry};
use crate::state::core::Core;
use crate::upstream::UpConn;
use bytes::{Bytes, BytesMut};
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

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
        Some(ep) => serve(&mut ctx, ep, rd, wr, buf).await,
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

async fn serve(
    ctx: &mut Ctx<'_>,
    endpoint: Endpoint,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
) -> (bool, usize) {
    let other = ctx.core.shared.routes.other_index;
    let want_get = endpoint == Endpoint::Models;
    let method = ctx.head.method();
    if endpoint == Endpoint::SessionLeases && method == "OPTIONS" {
        let ok = drain_body(ctx, rd, wr, buf).await;
        ctx.keep_alive &= ok;
        return (super::lease::lifecycle::preflight(ctx, wr).await, other);
    }
    if (want_get && method != "GET") || (!want_get && method != "POST") {
        let ok = drain_body(ctx, rd, wr, buf).await;
        let err = ApiError::new(
            405,
            "method_not_allowed",
            format!("{method} is not allowed on {}", ctx.head.path()),
        );
        return (finish_error(ctx, wr, &err, ok).await, other);
    }
    if let Some(err) = super::caller::cross_origin_form(ctx.head) {
        let ok = drain_body(ctx, rd, wr, buf).await;
        return (finish_error(ctx, wr, &err, ok).await, other);
    }
    // Who is calling, decided on the head: a caller without a valid key is answered before any
    // byte of its body is read, and is never sent `100 Continue`.
    let (auth, refusal) = super::caller::identify(ctx.core, ctx.head, endpoint);
    if let Some(err) = refusal {
        let body_ok = drain_small_body(ctx, rd, wr, buf).await;
        if endpoint == Endpoint::SessionLeases {
            ctx.keep_alive &= body_ok;
            let keep = super::lease::lifecycle::serve(ctx, wr, auth, Bytes::new()).await;
            return (keep, other);
        }
        return (finish_error(ctx, wr, &err, body_ok).await, other);
    }
    ctx.ticket.authenticated();
    let body = match read_client_body(ctx, rd, wr, buf).await {
        Ok(b) => b,
        Err(e) => return (finish_error(ctx, wr, &e, false).await, other),
    };
    if endpoint == Endpoint::SessionLeases {
        return (
            super::lease::lifecycle::serve(ctx, wr, auth, body).await,
            other,
        );
    }
    if let crate::clients::Auth::Known(c) = auth {
        ctx.reveal = c.has(crate::clients::Scope::Admin);
        ctx.tenant = c.tenant;
        // A key's class is its first place in line: its requests may ask to go later, not
        // earlier, unless the key may override.
        if ctx.head.get("x-ringside-priority").is_none() {
            ctx.priority = c.priority;
        } else if !c.has(crate::clients::Scope::Overrides) {
            ctx.priority = ctx.priority.max(c.priority);
        }
        ctx.record.client = Some(c.id.clone());
        ctx.client = Some(c);
    }
    if endpoint == Endpoint::Models {
        return (models(ctx, wr).await, other);
    }
    // Lease headers are checked (and the lease fenced) first: a request that may not run on
    // its lease hears why, whatever else is wrong with it, and nothing is sent upstream.
    match super::lease::bind(ctx, endpoint) {
        Ok(b) => {
            ctx.record.lease_generation = b.as_ref().map(|b| b.generation);
            ctx.lease = b;
        }
        Err(err) => return (finish_error(ctx, wr, &err, true).await, other),
    }
    let facts = match scan(&body) {
        Ok(f) => f,
        Err(FactsError::Malformed(m)) => {
            let err = ApiError::bad_request(
                "invalid_json",
                format!("request body is not a JSON object: {m}"),
            );
            return (finish_error(ctx, wr, &err, true).await, other);
        }
        Err(FactsError::BadField(f)) => {
            let err = ApiError::bad_request("invalid_field", format!("`{f}` has the wrong type"));
            return (finish_error(ctx, wr, &err, true).await, other);
        }
    };
    ctx.record.stream = facts.stream;
    ctx.model_span = facts.model_span;
    let Some(model) = facts.model else {
        let err = ApiError::bad_request("missing_model", "the request has no `model`");
        return (finish_error(ctx, wr, &err, true).await, other);
    };
    if let Some(why) = crate::dialect::facts::model_problem(&model) {
        let err = ApiError::bad_request("invalid_model", why);
        return (finish_error(ctx, wr, &err, true).await, other);
    }
    // The client's model name lives in the decision record only (one copy per request).
    ctx.record.model = Some(model.clone());
    ctx.body = body;
    // A plain borrow: cloning the Arc here would bounce its refcount between cores per request.
    let core = ctx.core;
    let shared = &*core.shared;
    let Some(entry) = shared.routes.lookup(&shared.config, &model) else {
        let err = ApiError::new(
            404,
            "model_not_found",
            format!("no route or model named `{model}`"),
        )
        .should_retry(false);
        return (finish_error(ctx, wr, &err, true).await, other);
    };
    ctx.record.route = Some(entry.name.clone());
    if !shared.routes.serves(&entry, ctx.dialect) {
        let why = if shared.routes.other_dialect_only(&entry, ctx.dialect) {
            format!(
                "`{model}` is served only by providers of another dialect than {}",
                ctx.dialect.as_str()
            )
        } else {
            format!("`{model}` has no connection that can serve it")
        };
        let err = ApiError::new(404, "no_executable_targets", why).should_retry(false);
        return (finish_error(ctx, wr, &err, true).await, entry.index);
    }
    let tenants = &shared.flow.tenants;
    let counts_tokens = tenants.limits.tokens_per_minute > 0;
    let restricted = entry.targets.iter().any(|t| t.caps.restricts()) || counts_tokens;
    let needs = crate::dialect::needs::needs(&ctx.body, ctx.head, restricted);
    // Tenant quotas hold across every connection and core, for the whole request.
    let _tenant_permit = if tenants.limits.any() {
        match tenants.admit(ctx.tenant, needs.context_tokens, crate::clock::now_ms()) {
            Ok(p) => Some(p),
            Err(over) => {
                let (why, retry_ms) = match over {
                    crate::flow::tenant::OverQuota::Concurrent => ("requests at once", 1_000),
                    crate::flow::tenant::OverQuota::RequestsPerMinute { retry_ms } => {
                        ("requests per minute", retry_ms)
                    }
                    crate::flow::tenant::OverQuota::TokensPerMinute { retry_ms } => {
                        ("tokens per minute", retry_ms)
                    }
                };
                let err = ApiError::new(
                    429,
                    "TENANT_QUOTA_EXCEEDED",
                    format!("this client key is over its quota of {why}"),
                )
                .retry_after(retry_ms.div_ceil(1000))
                .should_retry(retry_ms <= 60_000);
                return (finish_error(ctx, wr, &err, true).await, entry.index);
            }
        }
    } else {
        None
    };
    let keep = super::attempts::run(ctx, &entry, &needs, rd, wr, buf).await;
    (keep, entry.index)
}

/// Commit: relay the upstream response to the client (nothing may be retried after this).
#[allow(clippy::too_many_arguments)]
pub(super) async fn commit(
    ctx: &mut Ctx<'_>,
    entry: &Entry,
    cand: Candidate,
    provider_index: usize,
    mut up: UpConn,
    head: Head,
    wr: &mut TcpOwnedWriteHalf,
    watch: &mut ClientWatch<'_>,
) -> AttemptEnd {
    let core = ctx.core;
    let cfg = core.config();
    let Some(&names) = core.shared.conn_names.get(cand.connection) else {
        return AttemptEnd::Failed {
            verdict: crate::resilience::classify::transport(false),
            kind: AttemptOutcome::ProtocolError,
            detail: "unknown connection".into(),
            response: None,
            restated_from: None,
            self_inflicted: true,
        };
    };
    let label = names.2;
    let attempts = ctx.attempts_header(Some((label, head.status)));
    ctx.record.ttfb_ms = Some(crate::clock::since(ctx.started).as_millis() as u64);
    let secret = cfg
        .connection(cand.connection)
        .map(|(_, c)| c.secret.expose().as_bytes())
        .unwrap_or_default();
    let r = Relay {
        secret,
        dialect: ctx.dialect,
        request_id: &ctx.request_id,
        route: &entry.name,
        connection_label: if ctx.reveal { label } else { "" },
        attempts: &attempts,
        client_keep_alive: ctx.keep_alive,
        client_http11: ctx.head.version_minor >= 1,
        idle_timeout: Duration::from_millis(cfg.upstream.idle_read_timeout_ms),
        send_timeout: Duration::from_millis(cfg.limits.client_send_timeout_ms),
        hard_deadline: ctx.exec_deadline,
        stream: cfg.stream,
    };
    let t0 = crate::clock::instant();
    let res = relay(wr, watch, &mut up, &head, &r).await;
    if !res.committed {
        let detail = res
            .failure
            .unwrap_or(super::forward::RelayFailure::BadFraming)
            .as_str()
            .to_string();
        return AttemptEnd::Failed {
            verdict: crate::resilience::classify::transport(false),
            kind: AttemptOutcome::ProtocolError,
            detail,
            response: None,
            restated_from: None,
            self_inflicted: false,
        };
    }
    if let Some(t) = res.sse {
        ctx.record.stream_stats = Some(crate::audit::StreamStats {
            events: t.events,
            text_bytes: t.text_bytes,
            terminal: t.terminal,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
        });
    }
    let outcome = match (res.client_gone, res.failure) {
        (true, _) => AttemptOutcome::ClientGone,
        (false, Some(f)) => f.outcome(),
        (false, None) => AttemptOutcome::of_status(head.status),
    };
    core.metrics.attempt(cand.connection, outcome);
    if res.failure.is_some() {
        core.metrics
            .streams_failed_after_commit
            .fetch_add(1, Relaxed);
    }
    if res.failure == Some(super::forward::RelayFailure::ExecutionTimeout) {
        core.shared.flow.gates[cand.connection]
            .stats
            .execution_timeouts
            .fetch_add(1, Relaxed);
    }
    let (provider_name, conn_name, _) = names;
    // Most requests make one attempt: room for exactly one (Vec's first growth is four).
    ctx.record.attempts.reserve_exact(1);
    ctx.record.attempts.push(AttemptRecord {
        provider: provider_name,
        connection: conn_name,
        model: entry.targets[cand.target].model.clone(),
        outcome,
        status: Some(head.status),
        decision: Decision::Deliver,
        detail: res.failure.map(|f| f.as_str().to_string()),
        ms: crate::clock::since(t0).as_millis() as u64,
        ..Default::default()
    });
    ctx.record.status = if res.client_gone { 499 } else { head.status };
    ctx.record.outcome = if res.client_gone {
        Outcome::ClientGone
    } else if res.failure.is_some() {
        Outcome::FailedAfterCommit
    } else {
        Outcome::Ok
    };
    ctx.record.error_code = res.failure.map(super::forward::RelayFailure::as_str);
    ctx.record.bytes_out = res.body_bytes;
    ctx.record.target = Some(entry.targets[cand.target].label.clone());
    ctx.record.connection = Some(label);
    if res.upstream_complete && head.keep_alive && !core.drain.is_draining() {
        core.pool
            .borrow_mut()
            .put(provider_index, up, crate::clock::now_ms());
    }
    AttemptEnd::Done {
        keep_alive: res.client_keep_alive,
    }
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
