//! One answer per `Idempotency-Key` (per tenant): an SDK that times out and sends the same
//! request again must not be billed twice. The first request with a key claims it in the store
//! (`store::idempotency`, one writer: one owner whatever the cores). While it runs, a duplicate
//! JSON request waits for it and gets the same answer (or, if the first failed, goes upstream
//! in its place); a duplicate stream gets 409 `duplicate_in_flight`. A completed JSON answer is
//! replayed for `[idempotency] window_s` (`idempotent-replayed: true`); the same key with
//! another body is a 422. The key is kept as a hash with its tenant, never as sent.

use super::exchange::{Admitted, Ctx, Request};
use super::respond::finish_error;
use crate::dialect::ApiError;
use crate::flow::bill::RequestBill;
use crate::store::idempotency::{Answer, Claim, Op, Outcome};
use bytes::Bytes;
use monoio::io::AsyncWriteRentExt;
use monoio::net::tcp::TcpOwnedWriteHalf;
use std::time::Duration;

pub(crate) const HEADER: &str = "idempotency-key";

/// How often a duplicate looks again whether the first request ended.
const POLL_MS: u64 = 50;

/// What the key said of this request.
pub(super) enum Begun {
    /// No key (or keys not honoured, or the store away): the request goes on as usual.
    Unguarded,
    /// This request owns the key.
    Claimed(Claim),
    /// The client has its answer (a replay or a refusal): whether the connection stays open.
    Answered(bool),
}

/// Claim the request's key, waiting while a duplicate JSON request's first is in flight (up to
/// `deadline_ms`).
pub(super) async fn begin(
    ctx: &mut Request<'_>,
    admitted: &Admitted,
    wr: &mut TcpOwnedWriteHalf,
    deadline_ms: u64,
) -> Begun {
    let cfg = &ctx.config().idempotency;
    if cfg.window_s == 0 {
        return Begun::Unguarded;
    }
    let Some(value) = ctx.head.get(HEADER) else {
        return Begun::Unguarded;
    };
    if value.is_empty() || value.len() > 255 || !value.iter().all(|b| (0x21..0x7f).contains(b)) {
        let err = ApiError::bad_request(
            "invalid_header",
            "`Idempotency-Key` must be 1-255 visible ASCII characters",
        );
        return Begun::Answered(finish_error(ctx, wr, &err, true).await);
    }
    let key = key_of(ctx.tenant, value);
    let digest = digest_of(ctx.head.path(), &admitted.body);
    let (window_ms, max_keys, max_answer) =
        (cfg.window_s * 1000, cfg.max_keys, cfg.max_answer_bytes);
    let store = ctx.core.shared.store;
    let give_up_at = crate::clock::unix_ms() + deadline_ms;
    loop {
        let now = crate::clock::unix_ms();
        let op = Op::Claim {
            key: key.clone(),
            digest,
            // A claim outlives its owner's deadline a little, never for ever (a crash).
            until: now + deadline_ms + 10_000,
            max: max_keys,
        };
        let outcome = store.idempotency(op).await.unwrap_or(Outcome::Unavailable);
        let refusal = match outcome {
            Outcome::Claimed => {
                return Begun::Claimed(Claim::new(store, key, digest, window_ms, max_answer));
            }
            Outcome::Unavailable => return Begun::Unguarded,
            Outcome::Replay(answer) => return Begun::Answered(replay(ctx, wr, answer).await),
            Outcome::Mismatch => ApiError::new(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was used with another request body",
            )
            .should_retry(false),
            Outcome::InFlight if admitted.stream || now >= give_up_at => in_flight(),
            Outcome::InFlight => {
                let at = crate::clock::instant() + Duration::from_millis(POLL_MS);
                crate::timer::sleep_until(at).await;
                continue;
            }
        };
        return Begun::Answered(finish_error(ctx, wr, &refusal, true).await);
    }
}

fn in_flight() -> ApiError {
    ApiError::new(
        409,
        "duplicate_in_flight",
        "a request with this Idempotency-Key is still in flight",
    )
    .retry_after(1)
    .should_retry(true)
}

/// The key as kept: the tenant's and the client's value, hashed (stable across restarts).
fn key_of(tenant: u64, value: &[u8]) -> String {
    let mut v = tenant.to_le_bytes().to_vec();
    v.extend_from_slice(value);
    crate::secret::hex(&crate::secret::digest(&v)[..16])
}

/// What the request asks: its endpoint and its body.
fn digest_of(path: &str, body: &[u8]) -> u64 {
    let mut v = Vec::with_capacity(path.len() + 1 + body.len());
    v.extend_from_slice(path.as_bytes());
    v.push(0);
    v.extend_from_slice(body);
    let d = crate::secret::digest(&v);
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// The first request's answer, sent again.
async fn replay(ctx: &mut Request<'_>, wr: &mut TcpOwnedWriteHalf, a: Answer) -> bool {
    let keep = ctx.keep_alive;
    let headers = [
        ("x-request-id", ctx.record.request_id.as_str()),
        ("idempotent-replayed", "true"),
    ];
    let bytes = crate::http::response::whole(
        a.status,
        "application/json",
        &headers,
        a.body.as_bytes(),
        keep,
    );
    let (res, _) = wr.write_all(bytes).await;
    let r = &mut ctx.record;
    r.status = a.status;
    r.outcome = crate::audit::Outcome::Replayed;
    r.bytes_out = a.body.len() as u64;
    r.ttfb_ms = Some(crate::clock::since(ctx.started).as_millis() as u32);
    res.is_ok() && keep
}

/// Whether an attempt's JSON answer is read whole before the commit, to be kept for
/// duplicates (this request owns a key).
pub(super) fn keeps_answer(ctx: &Ctx<'_, '_>) -> bool {
    ctx.bill.as_ref().is_some_and(|b| b.idempotency.is_some())
}

/// An answer read whole for the key's owner (`keeps_answer`).
pub(super) fn keep(ctx: &mut Ctx<'_, '_>, body: Bytes, complete: bool) {
    if let Some(claim) = ctx.bill.as_mut().and_then(|b| b.idempotency.as_mut()) {
        claim.whole = Some((body, complete));
    }
}

/// The answer read whole to relay now (kept as sent too), if one was.
pub(super) fn take_whole(bill: &mut Option<Box<RequestBill>>) -> Option<(Bytes, bool)> {
    let claim = bill.as_mut()?.idempotency.as_mut()?;
    let (body, complete) = claim.whole.take()?;
    claim.sent = Some(body.clone());
    Some((body, complete))
}

/// A translated answer sent whole: kept for duplicates too.
pub(super) fn sent(bill: &mut Option<Box<RequestBill>>, body: &Bytes) {
    if let Some(claim) = bill.as_mut().and_then(|b| b.idempotency.as_mut()) {
        claim.sent = Some(body.clone());
    }
}

/// The request ended: its key keeps the answer for the window, or is released.
pub(super) fn finish(bill: &mut Option<Box<RequestBill>>, status: u16) {
    if let Some(claim) = bill.as_mut().and_then(|b| b.idempotency.take()) {
        claim.finish(status);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_per_tenant_and_bodies_per_endpoint() {
        use super::{digest_of, key_of};
        assert_eq!(key_of(1, b"k"), key_of(1, b"k"));
        assert_ne!(key_of(1, b"k"), key_of(2, b"k"));
        assert_eq!(key_of(1, b"k").len(), 32);
        assert_ne!(digest_of("/a", b"x"), digest_of("/b", b"x"));
        assert_ne!(digest_of("/a", b"x"), digest_of("/a", b"y"));
    }
}
