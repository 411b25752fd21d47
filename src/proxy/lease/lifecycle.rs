//! `POST /v1/session-leases`: acquire, renew and release an exclusive session lease.
//! Errors use the lease envelope `{"error":{"type":"lease_error","code","message"}}` with the
//! statuses of the reference's wire contract; answers never carry the connection, a credential
//! or (except the one acquire that created it) the owner value.

use super::{GENERATION_HEADER, OWNER_HEADER, Refusal, ask_writer, lease_key, public};
use crate::clients::Auth;
use crate::dialect::ApiError;
use crate::http::response::whole;
use crate::ids::ConnId;
use crate::proxy::exchange::Request;
use crate::resilience::Site;
use crate::store::leases::{MAX_TTL_MS, MIN_TTL_MS, Op, Outcome};
use bytes::Bytes;
use monoio::io::AsyncWriteRentExt;
use monoio::net::tcp::TcpOwnedWriteHalf;
use serde_json::{Value, json};

/// `OPTIONS /v1/session-leases`: the CORS preflight answer.
pub(crate) async fn preflight(ctx: &mut Request<'_>, wr: &mut TcpOwnedWriteHalf) -> bool {
    ctx.record.status = 204;
    ctx.record.outcome = crate::audit::Outcome::Ok;
    let allow =
        format!("authorization, content-type, x-api-key, {OWNER_HEADER}, {GENERATION_HEADER}");
    let headers = [
        ("access-control-allow-methods", "POST, OPTIONS"),
        ("access-control-allow-headers", allow.as_str()),
        ("access-control-max-age", "600"),
        ("x-request-id", ctx.record.request_id.as_str()),
    ];
    let bytes = whole(204, "application/json", &headers, b"", ctx.keep_alive);
    let (res, _) = wr.write_all(bytes).await;
    res.is_ok() && ctx.keep_alive
}

async fn answer(
    ctx: &mut Request<'_>,
    wr: &mut TcpOwnedWriteHalf,
    status: u16,
    body: Value,
    extra: &[(&str, String)],
) -> bool {
    ctx.record.status = status;
    if status >= 400 {
        ctx.record.outcome = crate::audit::Outcome::Rejected;
    } else {
        ctx.record.outcome = crate::audit::Outcome::Ok;
    }
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut headers: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("x-request-id", ctx.record.request_id.as_str()));
    ctx.record.bytes_out = body.len() as u64;
    let bytes = whole(status, "application/json", &headers, &body, ctx.keep_alive);
    let (res, _) = wr.write_all(bytes).await;
    res.is_ok() && ctx.keep_alive
}

async fn fail(ctx: &mut Request<'_>, wr: &mut TcpOwnedWriteHalf, e: ApiError) -> bool {
    ctx.record.error_code = Some(e.code);
    let err = json!({"type": "lease_error", "code": e.code, "message": e.message});
    let mut body = json!({"request_id": ctx.record.request_id});
    // Capacity answers carry their state at the top level too (reference wire format).
    if let Some(Value::Object(extra)) = e.extra.as_deref() {
        for (k, v) in extra {
            body[k] = v.clone();
        }
    }
    body["error"] = err;
    let headers = e.headers();
    answer(ctx, wr, e.status, body, &headers).await
}

/// Serve one lifecycle request (the body is read; `auth` is what the key check said).
pub(crate) async fn serve(
    ctx: &mut Request<'_>,
    wr: &mut TcpOwnedWriteHalf,
    auth: Auth,
    body: Bytes,
) -> bool {
    let ask = match read_ask(ctx, auth, &body) {
        Ok(ask) => ask,
        Err(e) => return fail(ctx, wr, e).await,
    };
    let result = match ask.req["action"].as_str().unwrap_or_default() {
        "acquire" => acquire(ctx, &ask.client, ask.owner.as_deref(), &ask.req, ask.ttl_ms).await,
        action @ ("renew" | "release") => renew_or_release(ctx, &ask, action == "renew").await,
        _ => Err(Refusal::ActionInvalid.error("`action` must be acquire, renew or release")),
    };
    match result {
        Ok((body, created_owner)) => {
            let mut headers = Vec::new();
            if let Some(g) = body["generation"].as_u64() {
                ctx.record.lease_generation = Some(g);
                headers.push((GENERATION_HEADER, g.to_string()));
            }
            let mut body = body;
            if let Some(o) = created_owner {
                // The only time the owner value is ever sent: it is not kept anywhere.
                body["lease_owner"] = json!(o);
            }
            answer(ctx, wr, 200, body, &headers).await
        }
        Err(e) => fail(ctx, wr, e).await,
    }
}

/// A lifecycle request, checked: the client key, the JSON body, the owner header, the TTL.
struct Ask {
    client: std::sync::Arc<crate::clients::Client>,
    req: Value,
    /// The owner value the caller sent (`None` on a first acquire). A copy: the request's head
    /// is the context's, which the lifecycle step borrows mutably.
    owner: Option<String>,
    ttl_ms: u64,
}

fn read_ask(ctx: &mut Request<'_>, auth: Auth, body: &[u8]) -> Result<Ask, ApiError> {
    let client = match auth {
        Auth::Known(c) => c,
        Auth::Unknown => {
            return Err(Refusal::ApiKeyInvalid.error("unknown client key"));
        }
        Auth::Open | Auth::Missing => {
            return Err(lease_key(None).err().unwrap_or_else(unavailable));
        }
    };
    ctx.record.client = Some(client.id.clone());
    lease_key(Some(&client))?;
    if !ctx.head.content_type_is_json() {
        return Err(Refusal::ContentTypeRequired
            .error("send the lease request as Content-Type: application/json"));
    }
    let req: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return Err(Refusal::ActionInvalid.error("the body must be a JSON object"));
        }
    };
    let owner = ctx.head.get_str(OWNER_HEADER).map(|o| o.trim().to_string());
    if let Some(o) = &owner
        && !super::valid_owner(o)
    {
        return Err(Refusal::ContextInvalid.error(format!(
            "{OWNER_HEADER} is not a lease owner (vlo_ + 43 base64url characters)"
        )));
    }
    let ttl_ms = match &req["ttl_ms"] {
        Value::Null => ctx.config().lease_ttl_ms,
        v => match v.as_u64() {
            Some(t) => t.clamp(MIN_TTL_MS, MAX_TTL_MS),
            None => {
                return Err(Refusal::ActionInvalid.error("`ttl_ms` must be a number"));
            }
        },
    };
    Ok(Ask {
        client,
        req,
        owner,
        ttl_ms,
    })
}

/// Renew or release the lease the caller names (owner header and generation).
async fn renew_or_release(ctx: &mut Request<'_>, ask: &Ask, renew: bool) -> Acquired {
    let action = if renew { "renew" } else { "release" };
    let Some(owner) = ask.owner.as_deref() else {
        return Err(
            Refusal::ContextRequired.error(format!("{action} needs the {OWNER_HEADER} header"))
        );
    };
    let generation = generation_of(ctx, &ask.req)?;
    let owner = super::owner_hash(owner);
    let client = ask.client.id.clone();
    let op = if renew {
        Op::Renew {
            owner,
            generation,
            client,
            ttl_ms: ask.ttl_ms,
        }
    } else {
        let reason = ask.req["reason"].as_str().unwrap_or("OWNER_EXIT");
        if !matches!(reason, "OWNER_EXIT" | "CLIENT_CANCELLED") {
            return Err(Refusal::ActionInvalid.error("`reason` is OWNER_EXIT or CLIENT_CANCELLED"));
        }
        Op::Release {
            owner,
            generation,
            client,
            reason: reason.into(),
        }
    };
    let now = crate::clock::unix_ms();
    match ask_writer(ctx.core.shared.store, op).await {
        Outcome::Renewed(l) | Outcome::Released(l) => Ok((public(&l, now), None)),
        Outcome::Unavailable => Err(unavailable()),
        _ => Err(Refusal::FenceStale.error("no active lease with that generation for this key")),
    }
}

pub(super) fn unavailable() -> ApiError {
    Refusal::ServiceUnavailable
        .error("the lease store did not answer; try again")
        .retry_after(1)
}

/// The generation from the body or the header (they must agree when both are sent).
fn generation_of(ctx: &Request<'_>, req: &Value) -> Result<u64, ApiError> {
    let bad = || {
        Refusal::ContextInvalid
            .error("`generation` (or the generation header) must be a positive integer")
    };
    let from_body = match &req["generation"] {
        Value::Null => None,
        v => Some(
            v.as_u64()
                .filter(|g| (1..1 << 53).contains(g))
                .ok_or_else(bad)?,
        ),
    };
    let from_header = match ctx.head.get_str(GENERATION_HEADER) {
        None => None,
        Some(h) => Some(super::parse_generation(h.trim()).ok_or_else(bad)?),
    };
    match (from_body, from_header) {
        (Some(a), Some(b)) if a != b => Err(bad()),
        (Some(g), _) | (None, Some(g)) => Ok(g),
        (None, None) => Err(bad()),
    }
}

type Acquired = Result<(Value, Option<String>), ApiError>;

async fn acquire(
    ctx: &mut Request<'_>,
    client: &crate::clients::Client,
    owner_header: Option<&str>,
    req: &Value,
    ttl_ms: u64,
) -> Acquired {
    let model = match &req["model"] {
        Value::Null => None,
        Value::String(m) if !m.is_empty() => Some(m.as_str()),
        _ => {
            return Err(Refusal::ModelInvalid.error("`model` must be a non-empty string"));
        }
    };
    let usable = usable_connections(ctx, client, model)?;
    let created = owner_header.is_none().then(super::new_owner);
    let owner = owner_header.or(created.as_deref()).unwrap_or_default();
    let labels = &ctx.generation.conn_labels;
    let candidates: Vec<String> = usable
        .iter()
        .filter_map(|&c| labels.get(c.index()).map(|(p, n)| format!("{p}/{n}")))
        .collect();
    let op = Op::Acquire {
        owner: super::owner_hash(owner),
        client: client.id.clone(),
        candidates,
        ttl_ms,
    };
    let now = crate::clock::unix_ms();
    match ask_writer(ctx.core.shared.store, op).await {
        Outcome::Acquired(l) | Outcome::Reused(l) | Outcome::Transitioned(l) => {
            Ok((public(&l, now), created))
        }
        Outcome::OwnerAlreadyActive => {
            Err(Refusal::OwnerActive.error("this owner already holds a lease through another key"))
        }
        Outcome::Busy { retry_at } => Err(super::capacity(
            super::retry_after_s(retry_at, now, ctx.config().resilience.jitter_pct),
            usable.len(),
        )),
        _ => Err(unavailable()),
    }
}

/// The key's allowed connections that serve `model` (any, without one) and are usable now, in
/// preference order (fewest requests in flight first).
fn usable_connections(
    ctx: &Request<'_>,
    client: &crate::clients::Client,
    model: Option<&str>,
) -> Result<Vec<ConnId>, ApiError> {
    let core = ctx.core;
    let cfg = ctx.config();
    let allowed = client.allowed.clone().unwrap_or_default();
    let mut eligible: Vec<(ConnId, String)> = Vec::new();
    match model {
        Some(m) => {
            let Some(entry) = ctx.generation.routes.lookup(cfg, m) else {
                return Err(Refusal::ModelInvalid.error(format!("no route or model named `{m}`")));
            };
            for t in &entry.targets {
                for &c in &t.connections {
                    if allowed.contains(&c) && !eligible.iter().any(|(x, _)| *x == c) {
                        eligible.push((c, t.model.to_string()));
                    }
                }
            }
        }
        None => eligible.extend(allowed.iter().map(|&c| (c, String::new()))),
    }
    if eligible.is_empty() {
        return Err(Refusal::NoEligibleConnection
            .error("none of this key's allowed connections serves that model"));
    }
    core.sync();
    let s = &cfg.resilience;
    let t = crate::clock::now_ms();
    let mut tables = core.tables.borrow_mut();
    let mut usable = Vec::new();
    let mut earliest: Option<u64> = None;
    for (c, m) in &eligible {
        let site = Site {
            provider: cfg.provider_of(*c).unwrap_or(0),
            conn: *c,
            model: m,
            tenant: 0,
            sent: t,
            probe: false,
        };
        match tables.blocked(s, site, t) {
            None => usable.push(*c),
            Some(e) => {
                if let Some(ms) = e.remaining_ms() {
                    earliest = Some(earliest.map_or(ms, |x| x.min(ms)));
                }
            }
        }
    }
    if usable.is_empty() {
        // Ordinary unavailability, not lease contention.
        let mut e = Refusal::EligibilityUnavailable
            .error("every eligible connection is cooling down or unusable");
        if let Some(ms) = earliest {
            e = e.retry_after(ms.div_ceil(1000));
        }
        return Err(e);
    }
    usable.sort_by_key(|&c| core.shared.in_flight[c].load(std::sync::atomic::Ordering::Relaxed));
    Ok(usable)
}
