//! Intake: everything decided before the first upstream attempt. Who is calling (from the head,
//! before the body is read), the body and its facts (model, stream), the lease fence, the route
//! and the tenant's quota. Each refusal is answered here in the client's dialect.

use super::client_body::{drain_body, drain_small_body, read_client_body};
use super::exchange::{Admitted, Request};
use super::models::models;
use super::respond::finish_error;
use super::stop::Stop;
use crate::dialect::Endpoint;
use crate::dialect::facts::{FactsError, scan};
use crate::dialect::needs::Needs;
use crate::flow::bill::RequestBill;
use crate::route::Entry;
use bytes::{Bytes, BytesMut};
use monoio::net::tcp::{TcpOwnedReadHalf, TcpOwnedWriteHalf};

/// How intake ended.
pub(super) enum Intake<'c> {
    /// Answered here (a refusal, the models list, a lease lifecycle call): whether the
    /// connection stays open, and the route index its metrics go to.
    Answered { keep: bool, route: usize },
    /// Admitted: what intake admitted, the route to try and what the request needs; the
    /// tenant's quota share is held until the request ends.
    Admitted {
        admitted: Admitted,
        entry: crate::route::Resolved<'c>,
        needs: Needs,
        tenant: Option<Box<RequestBill>>,
    },
}

/// Everything before the first upstream attempt, for a request to a known endpoint.
pub(super) async fn intake<'c>(
    ctx: &mut Request<'c>,
    endpoint: Endpoint,
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
) -> Intake<'c> {
    let other = ctx.generation.routes.other_index;
    let auth = match on_the_head(ctx, endpoint) {
        OnTheHead::Go(auth) => auth,
        // (The rare paths get their own future: the common one does not carry it.)
        OnTheHead::Answer(refused) => {
            return answer_on_the_head(ctx, (endpoint, refused), rd, wr, buf).await;
        }
    };
    ctx.conn.ticket.authenticated();
    let body = match read_client_body(ctx, rd, wr, buf).await {
        Ok(b) => b,
        Err(e) => return refuse(ctx, wr, &e, false, other).await,
    };
    if endpoint == Endpoint::SessionLeases {
        return Intake::Answered {
            keep: super::lease::lifecycle::serve(ctx, wr, auth, body).await,
            route: other,
        };
    }
    let client = match auth {
        crate::clients::Auth::Known(c) => Some(take_client(ctx, c)),
        _ => None,
    };
    if let Some(t) = super::client_facts::gateway_tenant(ctx) {
        ctx.tenant = t;
    }
    if endpoint == Endpoint::Models {
        return Intake::Answered {
            keep: models(ctx, wr).await,
            route: other,
        };
    }
    let (model, admitted) = match check_request(ctx, endpoint, body, client).await {
        Ok(checked) => checked,
        Err(e) => return refuse(ctx, wr, &e, true, other).await,
    };
    let entry = match route_for(ctx, &model, crate::route::Reach::of(endpoint)) {
        Ok(entry) => entry,
        Err((e, route)) => return refuse(ctx, wr, &e, true, route).await,
    };
    let claim = match idempotency(ctx, &admitted, &entry, wr).await {
        Ok(claim) => claim,
        Err(keep) => {
            let route = entry.index;
            return Intake::Answered { keep, route };
        }
    };
    let tenant = tenant_quota(ctx, &admitted.body, &entry).await;
    let tenant = tenant.and_then(|(needs, mut hold)| {
        super::bill::reserve(ctx, &entry, &needs, &mut hold)?;
        Ok((needs, hold))
    });
    let tenant = match tenant {
        // The fleet's spend is asked only in fleet mode, for a tenant with budgets.
        Ok((needs, hold)) if super::bill::in_fleet(ctx, &hold) => {
            let hold = Box::pin(super::bill::reserve_in_fleet(ctx, hold)).await;
            hold.map(|h| (needs, h))
        }
        other => other,
    };
    match tenant {
        Ok((needs, mut tenant)) => {
            if let Some(claim) = claim {
                tenant.get_or_insert_with(Default::default).idempotency = Some(claim);
            }
            Intake::Admitted {
                admitted,
                entry,
                needs,
                tenant,
            }
        }
        Err(e) => refuse(ctx, wr, &e, true, entry.index).await,
    }
}

/// The request's `Idempotency-Key` claim, if it carries one (`Err`: answered, a replay or a
/// refusal; whether the connection stays open). Boxed: rare.
async fn idempotency(
    ctx: &mut Request<'_>,
    admitted: &Admitted,
    entry: &Entry,
    wr: &mut TcpOwnedWriteHalf,
) -> Result<Option<crate::store::idempotency::Claim>, bool> {
    use super::idempotent::{Begun, HEADER, begin};
    if ctx.head.get(HEADER).is_none() {
        return Ok(None);
    }
    let deadline_ms = entry
        .deadline_ms
        .unwrap_or(ctx.config().resilience.deadline_ms);
    match Box::pin(begin(ctx, admitted, wr, deadline_ms)).await {
        Begun::Unguarded => Ok(None),
        Begun::Claimed(claim) => Ok(Some(claim)),
        Begun::Answered(keep) => Err(keep),
    }
}

/// Answer a refusal in the client's dialect (`body_ok`: the request's body was read whole).
async fn refuse<'c>(
    ctx: &mut Request<'c>,
    wr: &mut TcpOwnedWriteHalf,
    stop: &Stop,
    body_ok: bool,
    route: usize,
) -> Intake<'c> {
    let err = super::answer::of(ctx, stop);
    Intake::Answered {
        keep: finish_error(ctx, wr, &err, body_ok).await,
        route,
    }
}

/// What is decided on the head alone: the method, a cross-origin form, and who is calling.
enum OnTheHead {
    /// Go on and read the body; the caller is `Auth`.
    Go(crate::clients::Auth),
    /// Answered without reading the body.
    Answer(HeadAnswer),
}

/// A request answered on its head.
enum HeadAnswer {
    /// `OPTIONS` on the lease endpoint: the CORS preflight.
    Preflight,
    /// Refused whatever the body says.
    Refused(Stop),
    /// A caller without a valid key: answered before any byte of its body is read, and never
    /// sent `100 Continue`.
    Unauthenticated(crate::clients::Auth, Stop),
}

fn on_the_head(ctx: &Request<'_>, endpoint: Endpoint) -> OnTheHead {
    let want_get = endpoint == Endpoint::Models;
    let method = ctx.head.method();
    if endpoint == Endpoint::SessionLeases && method == "OPTIONS" {
        return OnTheHead::Answer(HeadAnswer::Preflight);
    }
    if (want_get && method != "GET") || (!want_get && method != "POST") {
        return OnTheHead::Answer(HeadAnswer::Refused(Stop::MethodNotAllowed));
    }
    if let Some(err) = super::caller::cross_origin_form(ctx.head) {
        return OnTheHead::Answer(HeadAnswer::Refused(err));
    }
    match super::caller::identify(ctx.core, ctx.generation, ctx.head, endpoint) {
        (crate::clients::Auth::Open, None)
            if let Some(err) =
                super::caller::foreign_host(ctx.head, &ctx.generation.config.server.hosts) =>
        {
            OnTheHead::Answer(HeadAnswer::Refused(err))
        }
        (auth, None) => OnTheHead::Go(auth),
        (auth, Some(err)) => OnTheHead::Answer(HeadAnswer::Unauthenticated(auth, err)),
    }
}

/// Answer a request refused on its head (the body is drained, or for a keyless caller only a
/// small one).
async fn answer_on_the_head<'c>(
    ctx: &mut Request<'c>,
    (endpoint, refused): (Endpoint, HeadAnswer),
    rd: &mut TcpOwnedReadHalf,
    wr: &mut TcpOwnedWriteHalf,
    buf: &mut BytesMut,
) -> Intake<'c> {
    let other = ctx.generation.routes.other_index;
    match refused {
        HeadAnswer::Preflight => {
            let ok = drain_body(ctx, rd, wr, buf).await;
            ctx.keep_alive &= ok;
            Intake::Answered {
                keep: super::lease::lifecycle::preflight(ctx, wr).await,
                route: other,
            }
        }
        HeadAnswer::Refused(stop) => {
            let ok = drain_body(ctx, rd, wr, buf).await;
            refuse(ctx, wr, &stop, ok, other).await
        }
        HeadAnswer::Unauthenticated(auth, stop) => {
            let body_ok = drain_small_body(ctx, rd, wr, buf).await;
            if endpoint == Endpoint::SessionLeases {
                ctx.keep_alive &= body_ok;
                let keep = super::lease::lifecycle::serve(ctx, wr, auth, Bytes::new()).await;
                return Intake::Answered { keep, route: other };
            }
            refuse(ctx, wr, &stop, body_ok, other).await
        }
    }
}

/// A known client key: its tenant, its place in line, whether it may see connection names.
fn take_client(
    ctx: &mut Request<'_>,
    c: std::sync::Arc<crate::clients::Client>,
) -> std::sync::Arc<crate::clients::Client> {
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
    c
}

/// The lease fence, then the body's facts: the model the request names. Lease headers go
/// first: a request that may not run on its lease hears why, whatever else is wrong with it,
/// and nothing is sent upstream.
async fn check_request(
    ctx: &mut Request<'_>,
    endpoint: Endpoint,
    body: Bytes,
    client: Option<std::sync::Arc<crate::clients::Client>>,
) -> Result<(String, Admitted), Stop> {
    let lease = |e| Stop::Lease(Box::new(e));
    let mut bound = super::lease::bind(ctx, client.as_deref(), endpoint).map_err(lease)?;
    if let Some(b) = bound.as_mut() {
        b.conn = super::lease::refence(ctx, b).await.map_err(lease)?;
    }
    ctx.record.lease_generation = bound.as_ref().map(|b| b.generation);
    let facts = scan(&body).map_err(|e| match e {
        FactsError::Malformed(m) => Stop::InvalidJson(m),
        FactsError::BadField(f) => Stop::InvalidField(f),
    })?;
    ctx.record.stream = facts.stream;
    let Some(model) = facts.model else {
        return Err(Stop::MissingModel);
    };
    if let Some(why) = crate::dialect::facts::model_problem(&model) {
        return Err(Stop::InvalidModel(why));
    }
    // The client's model name lives in the decision record only (one copy per request).
    ctx.record.model = Some(model.clone());
    let span =
        |r: std::ops::Range<usize>| Some(u32::try_from(r.start).ok()?..u32::try_from(r.end).ok()?);
    let admitted = Admitted {
        endpoint,
        model_span: facts.model_span.and_then(span),
        stream: facts.stream,
        body,
        client,
        lease: bound.map(Box::new),
    };
    Ok((model, admitted))
}

/// The route that serves `model` in the client's dialect; a refusal names the route its
/// metrics go to.
fn route_for<'c>(
    ctx: &mut Request<'c>,
    model: &str,
    reach: crate::route::Reach,
) -> Result<crate::route::Resolved<'c>, (Stop, usize)> {
    // A plain borrow: cloning the Arc here would bounce its refcount between cores per request.
    let generation: &'c crate::state::generation::CoreGen = ctx.generation;
    let routes = &generation.routes;
    let Some(entry) = routes.lookup(&generation.config, model) else {
        return Err((Stop::ModelNotFound(model.to_string()), routes.other_index));
    };
    ctx.record.route = Some(entry.name.clone());
    if !routes.serves(&entry, reach) {
        let why = if routes.other_dialect_only(&entry, reach) {
            format!(
                "`{model}` is served only by providers of another dialect than {}",
                ctx.dialect.as_str()
            )
        } else {
            format!("`{model}` has no connection that can serve it")
        };
        return Err((Stop::NoTargetFor(why), entry.index));
    }
    Ok(entry)
}

/// What the request needs of a connection, and its tenant's quota share: tenant quotas hold
/// across every connection and core, for the whole request.
async fn tenant_quota(
    ctx: &Request<'_>,
    body: &Bytes,
    entry: &Entry,
) -> Result<(Needs, Option<Box<RequestBill>>), Stop> {
    let tenants = &ctx.core.shared.flow.tenants;
    // A configured tenant's own limits, else `[flow]`'s.
    let rule = ctx.config().tenants.of(ctx.tenant);
    let limits = rule.map_or(tenants.limits, |r| r.limits);
    let cap = crate::flow::bill::RequestCap::from_head(ctx.head).map_err(Stop::InvalidHeader)?;
    let counts_tokens =
        limits.tokens_per_minute > 0 || rule.is_some_and(|r| r.budget.any()) || cap.is_some();
    use crate::dialect::needs::{Scan, needs};
    let scan = if entry.targets.iter().any(|t| t.caps.restricts()) {
        Scan::Full
    } else if counts_tokens {
        Scan::Tokens
    } else {
        Scan::Headers
    };
    let needs = needs(body, ctx.head, scan);
    if !limits.any() {
        return Ok((needs, RequestBill::new(None, cap)));
    }
    let now = crate::clock::now_ms();
    // Fleet mode asks Redis too: boxed, so that every request's task does not carry room for
    // the wait (`proxy::connection`'s size bound).
    let admitted = if tenants.counted_elsewhere() {
        Box::pin(tenants.admit_fleet(ctx.tenant, needs.context_tokens, now, limits)).await
    } else {
        tenants.admit_with(ctx.tenant, needs.context_tokens, now, limits)
    };
    match admitted {
        Ok(p) => Ok((needs, RequestBill::new(Some(p), cap))),
        Err(over) => Err(Stop::TenantQuota(over)),
    }
}
