//! One client request, driven from its head to its finalisation: intake (`intake`: caller,
//! body, facts, route, quota), the attempt loop (`attempts`), the commit (`deliver`), and the
//! record kept once at the end (metrics, access log, decision ring). Before the first client
//! byte anything may be retried; after it, nothing is replayed.

use super::client_body::drain_body;
use super::client_facts::{client_request_id, forwarded_for, priority_of, tenant_of};
use super::exchange::{Conn, Ctx, Request};
use super::intake::{Intake, intake};
use super::respond::finish_error;
use crate::audit::Record;
use crate::dialect::{Endpoint, dialect_for_path};
use crate::http::Head;
use crate::state::core::Core;
use bytes::BytesMut;
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;

/// Handle one request whose head has been read. Returns whether the connection stays open.
#[allow(clippy::manual_async_fn)] // an async block: see `crate::proxy`, *Arguments in place*
pub fn handle(
    core: &Rc<Core>,
    head: &mut Head,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
    conn: Conn<'_>,
) -> impl std::future::Future<Output = bool> {
    async move {
        let started = crate::clock::instant();
        let endpoint = Endpoint::from_path(head.path());
        let request_id = client_request_id(head).unwrap_or_else(|| core.next_request_id());
        let generation = core.generation();
        let (dialect, record) = (
            dialect_for_path(head.path()),
            record_for(core, head, endpoint, request_id),
        );
        let (keep_alive, tenant, priority) = (
            head.keep_alive && !conn.last_request,
            {
                let peer = conn.link.ticket.peer;
                let trusted = &generation.config.server.trusted_proxies;
                tenant_of(forwarded_for(head, peer, trusted).or(peer))
            },
            priority_of(head),
        );
        let mut request = Request {
            core,
            generation: &generation,
            head,
            dialect,
            record,
            keep_alive,
            started,
            tenant,
            priority,
            conn: conn.link,
            reveal: true,
            early_head: None,
            budget_warning: None,
        };
        // The guard borrows the request (moving it into the guard would copy it).
        // The in-flight gauge counts the request from here to its finalisation (no await between
        // the request's start and here).
        core.metrics.in_flight.fetch_add(1, Relaxed);
        let mut req = Finalize {
            req: &mut request,
            route: generation.routes.other_index,
        };
        let r = &mut *req.req;
        let (keep, route_index) = match endpoint {
            None => {
                let body_ok = drain_body(r, rd, wr, buf).await;
                let err = super::answer::of(r, &super::stop::Stop::UnknownEndpoint);
                let keep = finish_error(r, wr, &err, body_ok).await;
                (keep, generation.routes.other_index)
            }
            Some(ep) => 'admitted: {
                // Taken apart in a statement of its own, so that the intake's answer is not kept in
                // this future's state for the whole request.
                let (entry, needs, tenant, admitted) = match intake(r, ep, rd, wr, buf).await {
                    Intake::Answered { keep, route } => break 'admitted (keep, route),
                    Intake::Admitted {
                        entry,
                        needs,
                        tenant,
                        admitted,
                    } => (entry, needs, tenant, admitted),
                };
                let mut ctx = Ctx {
                    req: r,
                    admitted,
                    exec_deadline: None,
                    lane: None,
                    translation: None,
                    bill: tenant,
                };
                before_attempts(&mut ctx, &entry);
                let keep = super::attempts::run(&mut ctx, &entry, &needs, rd, wr, buf).await;
                super::idempotent::finish(&mut ctx.bill, ctx.req.record.status);
                let hold = ctx.bill.take();
                super::bill::settle(ctx.req, hold, &needs);
                (keep, entry.index)
            }
        };
        req.route = route_index;
        drop(req);
        keep && !core.drain.is_draining()
    }
}

/// Before the first attempt: the request read for targets of another API, then (the
/// translation having read the client's own body) a billed chat stream asks for its usage.
fn before_attempts(ctx: &mut Ctx<'_, '_>, entry: &crate::route::Entry) {
    if entry.crosses(crate::route::Reach::of(ctx.admitted.endpoint)) {
        super::translated::prepare(ctx, entry);
    }
    if ctx.bill.is_some() {
        super::bill::ask_for_usage(ctx);
    }
}

/// The request's line of the decision record, as it starts: method and path are static for
/// the usual methods and endpoints.
fn record_for(core: &Core, head: &Head, endpoint: Option<Endpoint>, request_id: String) -> Record {
    Record {
        request_id,
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
        trace: crate::audit::trace::Trace::from_header(head.get("traceparent")),
        ..Default::default()
    }
}

/// The request's context, finalized exactly once when it is dropped: at the end of `handle`,
/// or half-way when the connection's task is dropped (a contained panic). Finalizing records
/// the request's metrics, its access log line and its place in the decision ring.
struct Finalize<'a, 'c> {
    req: &'a mut Request<'c>,
    /// The route the request's metrics go to.
    route: usize,
}

impl Drop for Finalize<'_, '_> {
    fn drop(&mut self) {
        let ctx = &mut *self.req;
        let core = ctx.core;
        let total = crate::clock::since(ctx.started);
        let r = &mut ctx.record;
        (r.total_ms, r.total_us) = (total.as_millis() as u32, total.as_micros() as u64);
        let own_us = (r.total_us).saturating_sub(u64::from(r.upstream_us) + u64::from(r.waits_us));
        core.metrics.request_times(
            self.route,
            r.outcome,
            r.total_us,
            own_us,
            u64::from(r.ttft_us),
        );
        core.metrics.request(self.route, ctx.record.status);
        core.metrics.attempts_made(ctx.record.attempts.len());
        core.metrics.in_flight.fetch_sub(1, Relaxed);
        ctx.record.ts_ms = crate::clock::unix_ms();
        if let Some(log) = &core.shared.log {
            let record = &ctx.record;
            let client = log_client(ctx);
            let dropped = core
                .log_batch
                .borrow_mut()
                .push(log, |out| record.write_log_line(out, &client));
            if dropped > 0 {
                core.metrics.log_lines_dropped.fetch_add(dropped, Relaxed);
            }
        }
        if let Some(sink) = &core.shared.telemetry {
            sink.send(span_of(ctx));
        }
        core.remember(std::mem::take(&mut ctx.record));
        core.metrics.finalized.fetch_add(1, Relaxed);
    }
}

/// The request's spans for the OTLP export (only when `[telemetry]` exports): its parent is
/// the client's span, each attempt's GenAI system its provider's API.
fn span_of(ctx: &Request<'_>) -> crate::telemetry::RequestSpan {
    use crate::dialect::Dialect;
    let parent =
        (ctx.head.get(super::exchange::TRACEPARENT)).and_then(crate::audit::trace::parent_of);
    let providers = &ctx.config().providers;
    let system_of = |id: &str| match providers.iter().find(|p| p.id == id) {
        Some(p) if p.azure_api_version.is_some() => "azure.ai.openai",
        Some(p) => match p.dialect {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gcp.gemini",
        },
        None => "_OTHER",
    };
    crate::telemetry::RequestSpan::of(&ctx.record, parent, &system_of)
}

/// What the access log says about the client: its address, the address a trusted proxy in
/// front of Ringside forwarded for (`server.trusted_proxies`), and its user agent.
fn log_client<'c>(ctx: &'c Request<'_>) -> crate::audit::LogClient<'c> {
    let peer = ctx.conn.ticket.peer;
    let trusted = &ctx.config().server.trusted_proxies;
    crate::audit::LogClient {
        peer,
        forwarded_for: forwarded_for(ctx.head, peer, trusted),
        user_agent: ctx.head.get_str(super::exchange::USER_AGENT),
    }
}
