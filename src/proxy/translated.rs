//! A translated attempt in the request path (a fallback to a provider of another API): the
//! request read once for the route's other APIs, each attempt's body written for its target,
//! an error answer put in the client's shape, a JSON answer written for the client before the
//! commit, and how the answer is delivered. A request whose route has no target of another
//! API never builds any of it.

use super::exchange::Ctx;
use super::forward::translated::Translating;
use super::forward::{Relay, Relayed, relay_buffered};
use super::outbound::Outbound;
use crate::config::{Connection, Provider};
use crate::http::Head;
use crate::route::Entry;
use crate::translate::session::{Session, target_api};
use crate::translate::{Api, Cannot};
use bytes::Bytes;
use monoio::net::tcp::TcpOwnedWriteHalf;

/// The largest translated JSON answer read whole.
pub(super) const MAX_ANSWER: usize = 32 * 1024 * 1024;

/// When the route reaches targets of another API than the client's, the request is read once
/// for them (out of line: a pass-through request only looks at its targets' dialects).
#[inline(never)]
pub(super) fn prepare(ctx: &mut Ctx<'_, '_>, entry: &Entry) {
    let endpoint = ctx.admitted.endpoint;
    let Some(client) = Api::of_endpoint(endpoint) else {
        return;
    };
    if !entry.cross_dialect {
        return;
    }
    let routes = &ctx.generation.routes;
    let mut apis: Vec<(Api, &str)> = Vec::new();
    for t in &entry.targets {
        if let Some(api) = target_api(endpoint, routes.dialect_of(t))
            && !apis.iter().any(|(a, _)| *a == api)
        {
            apis.push((api, &t.model));
        }
    }
    if !apis.is_empty() {
        ctx.translation = Some(Box::new(Session::new(client, &ctx.admitted.body, apis)));
    }
}

/// The attempt in flight is translated.
pub(super) fn is_translated(ctx: &Ctx<'_, '_>) -> bool {
    ctx.translation
        .as_deref()
        .is_some_and(|t| t.current.is_some())
}

/// A translated attempt's request, when the target speaks another API than the client (`None`:
/// the same API, built as usual). `Err`: the target cannot take this request.
pub(super) fn request(
    ctx: &mut Ctx<'_, '_>,
    (provider, conn): (&Provider, &Connection),
    model: &str,
    slow: bool,
    credential: Option<&str>,
) -> Option<Result<Outbound, Cannot>> {
    let endpoint = ctx.admitted.endpoint;
    let session = ctx.translation.as_deref_mut()?;
    let Some(api) = target_api(endpoint, provider.dialect) else {
        session.current = None;
        return None;
    };
    let body = match session.body_for(api, model) {
        Ok(b) => b,
        Err(c) => return Some(Err(c)),
    };
    let marks = super::outbound::Marks {
        request_id: &ctx.req.record.request_id,
        trace: &ctx.req.record.trace,
        attempt: ctx.req.record.attempts.len(),
        slow,
        credential,
        model,
    };
    let secret = credential.unwrap_or(conn.secret.expose());
    let stream = ctx.admitted.stream;
    let out = super::outbound::build_translated(provider, secret, api, stream, body, marks);
    Some(Ok(out))
}

/// An error answer as the client reads it: the provider's own when it speaks the client's API,
/// else its message in the client's error shape with Ringside's code for the status.
pub(super) fn error_for_client(
    ctx: &Ctx<'_, '_>,
    (provider, conn): (&Provider, &Connection),
    status: u16,
    body: Bytes,
) -> Bytes {
    if !is_translated(ctx) {
        return body;
    }
    let secrets = super::redact::Secrets::of(ctx.core, ctx.config(), conn.index);
    let message = crate::translate::answer::error_message(&secrets.redact(&body));
    let code = crate::translate::session::error_code(status);
    // Only a client that may see names is told which provider said it.
    let message = if ctx.reveal {
        format!("{}: {message}", provider.id)
    } else {
        message
    };
    let err = crate::dialect::ApiError::new(status, code, message);
    Bytes::from(err.body(ctx.dialect, &ctx.record.request_id))
}

/// A translated attempt's JSON answer, read whole: written in the client's API and kept for the
/// commit. `Err`: it does not read as the provider's API says (another candidate is tried).
pub(super) fn keep_answer(
    ctx: &mut Ctx<'_, '_>,
    body: super::judge::ErrorBody,
) -> Result<(), String> {
    if body.oversized {
        return Err(format!("a translated answer over {MAX_ANSWER} bytes"));
    }
    let request_id = ctx.req.record.request_id.clone();
    let Some(session) = ctx.translation.as_deref_mut() else {
        return Ok(());
    };
    let Some((api, _)) = session.current else {
        return Ok(());
    };
    let stamp = crate::translate::answer::Stamp {
        model: session.client_model(),
        created: crate::clock::unix_ms() / 1000,
        request_id: &request_id,
        tools: session.client_tools(),
    };
    let answer = crate::translate::answer::translate(api, session.client, &body.body, stamp)
        .map_err(|g| g.0)?;
    session.answer = Some((Bytes::from(answer), body.complete));
    Ok(())
}

/// A whole translated answer: its bytes, whether the provider's body ended cleanly, head lines.
pub(super) type Whole = (Bytes, bool, Vec<(&'static str, String)>);

/// How a translated attempt's answer goes to the client.
pub(super) enum Delivery {
    /// A JSON answer, written for the client already (boxed: kept small in the relay's task).
    Whole(Box<Whole>),
    /// An event stream, translated as it is relayed.
    Stream(Box<Translating>),
}

/// The translated answer's delivery, when the attempt was translated (out of line: rare).
#[inline(never)]
pub(super) fn delivery(session: &mut Session, request_id: &str) -> Option<Delivery> {
    let (api, _) = session.current.as_ref()?;
    let api = *api;
    let headers = crate::translate::session::headers(session);
    if let Some((answer, complete)) = session.answer.take() {
        return Some(Delivery::Whole(Box::new((answer, complete, headers))));
    }
    let t = crate::translate::stream::Translator::new(
        api,
        session.client,
        session.client_model(),
        request_id,
        crate::clock::unix_ms() / 1000,
        session.include_usage(),
        session.client_tools().clone(),
    );
    Some(Delivery::Stream(Box::new(Translating::new(t, headers))))
}

/// A translated JSON answer, read and written for the client before the commit, relayed whole.
pub(super) async fn relay_whole(
    wr: &mut TcpOwnedWriteHalf,
    head: &Head,
    buf: &mut bytes::BytesMut,
    r: &Relay<'_>,
    (answer, complete, extra): Whole,
) -> Relayed {
    let keep = relay_buffered(wr, head, head.status, &answer, r, &extra).await;
    let _ = buf.split();
    Relayed {
        status: head.status,
        body_bytes: answer.len() as u64,
        upstream_complete: complete,
        client_keep_alive: keep,
        client_gone: !keep && r.client_keep_alive,
        committed: true,
        ..Default::default()
    }
}
