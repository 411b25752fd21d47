//! Writing Ringside's own answers: errors in the client's dialect (nothing for `HEAD` but the
//! head), small JSON successes, and `finish_error`, which also records the refusal. A leaf of
//! `proxy`: it imports no phase.

use super::exchange::Request;
use crate::dialect::{ApiError, Dialect};
use crate::http::response::whole;
use bytes::Bytes;
use monoio::io::AsyncWriteRentExt;
use monoio::net::tcp::TcpOwnedWriteHalf;

/// Write a whole error response in the client's dialect.
pub async fn respond_error(
    wr: &mut TcpOwnedWriteHalf,
    dialect: Dialect,
    err: &ApiError,
    request_id: &str,
    keep_alive: bool,
) -> bool {
    respond_error_to(wr, dialect, err, request_id, keep_alive, false).await
}

/// The same, for a request whose method may be `HEAD` (`head_request`: the body is left out).
pub async fn respond_error_to(
    wr: &mut TcpOwnedWriteHalf,
    dialect: Dialect,
    err: &ApiError,
    request_id: &str,
    keep_alive: bool,
    head_request: bool,
) -> bool {
    let body = err.body(dialect, request_id);
    let mut extra: Vec<(&str, String)> = err.headers();
    extra.push(("x-request-id", request_id.to_string()));
    if dialect == Dialect::Anthropic {
        // The Anthropic SDKs read `request-id` as the request's id (`err.request_id`).
        extra.push(("request-id", request_id.to_string()));
    }
    let refs: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut bytes = whole(err.status, "application/json", &refs, &body, keep_alive);
    if head_request {
        bytes = crate::http::response::head_only(bytes);
    }
    let (res, _) = wr.write_all(bytes).await;
    res.is_ok() && keep_alive
}

/// Write an error, record it, and say whether the connection stays open.
pub(crate) async fn finish_error(
    ctx: &mut Request<'_>,
    wr: &mut TcpOwnedWriteHalf,
    err: &ApiError,
    body_ok: bool,
) -> bool {
    ctx.record.status = err.status;
    ctx.record.error_code = Some(err.code);
    ctx.record.outcome = crate::audit::Outcome::Rejected;
    if ctx.record.ttfb_ms.is_none() {
        ctx.record.ttfb_ms = Some(crate::clock::since(ctx.started).as_millis() as u32);
    }
    if let Some(endpoint) = ctx.early_head {
        let bytes = error_event(err, endpoint, &ctx.record.request_id);
        let (res, _) = wr.write_all(bytes).await;
        return res.is_ok() && ctx.keep_alive && body_ok;
    }
    respond_error_to(
        wr,
        ctx.dialect,
        err,
        &ctx.record.request_id,
        ctx.keep_alive && body_ok,
        ctx.head.method() == "HEAD",
    )
    .await
}

/// An error as a waiting stream's last words (`proxy::keepalive`): the dialect's error event
/// as a chunk, and the body's last chunk.
pub(crate) fn error_event(
    err: &ApiError,
    e: crate::dialect::Endpoint,
    request_id: &str,
) -> Vec<u8> {
    let ev = err.sse_event(e, request_id);
    let mut line = [0u8; 18];
    let n = crate::http::chunk::size_line(ev.len(), &mut line);
    let mut out = Vec::with_capacity(n + ev.len() + 7);
    out.extend_from_slice(&line[..n]);
    out.extend_from_slice(&ev);
    out.extend_from_slice(b"\r\n0\r\n\r\n");
    out
}

/// A small JSON success response.
pub async fn respond_json(
    wr: &mut TcpOwnedWriteHalf,
    status: u16,
    body: Bytes,
    request_id: &str,
    keep_alive: bool,
) -> bool {
    let bytes = whole(
        status,
        "application/json",
        &[("x-request-id", request_id)],
        &body,
        keep_alive,
    );
    let (res, _) = wr.write_all(bytes).await;
    res.is_ok() && keep_alive
}
