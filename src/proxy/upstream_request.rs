//! The request an attempt sends upstream: the client's body (its model rewritten for the
//! target), or the request written in the target's API (`translated`), with the connection's
//! credential and its usage-wall lane.

use super::exchange::{AttemptEnd, Ctx, Failed};
use super::outbound::Outbound;
use crate::audit::AttemptOutcome;
use crate::config::{Connection, Provider};
use crate::resilience::classify;

/// The attempt's upstream request, with the connection's credential and lane.
#[inline(always)]
pub(super) fn request_for(
    ctx: &mut Ctx<'_, '_>,
    provider: &Provider,
    conn: &Connection,
    model: &str,
) -> Result<Outbound, Box<AttemptEnd>> {
    let credential = super::oauth::token(ctx, conn);
    let slow = super::usage_wall::slow(ctx, conn);
    let credential = credential.as_deref();
    // (The session is looked at first: a pass-through request goes straight to its builder.)
    let translated = match ctx.translation {
        Some(_) => super::translated::request(ctx, (provider, conn), model, slow, credential),
        None => None,
    };
    let Some(translated) = translated else {
        return Ok(outbound_for(ctx, provider, conn, model, slow, credential));
    };
    translated.map_err(|c| {
        // (Judged at selection for every target API: only a model-specific refusal reaches
        // here, and it says nothing about the connection.)
        let detail = format!("cannot translate: {} ({})", c.what, c.why);
        let kind = AttemptOutcome::ProtocolError;
        Box::new(AttemptEnd::Failed(Failed::new(
            classify::transport(false),
            kind,
            detail,
            true,
        )))
    })
}

/// The upstream request in the client's own API. The model is rewritten in place (its span
/// found when the body was checked) only when the upstream's name differs.
#[inline(never)]
fn outbound_for(
    ctx: &Ctx<'_, '_>,
    provider: &Provider,
    conn: &Connection,
    model: &str,
    slow: bool,
    credential: Option<&str>,
) -> Outbound {
    // The body is rewritten where it names another model than the target's (a name the client
    // spelt with escapes is written plainly: the same name).
    let body = &ctx.admitted.body;
    let span = (ctx.admitted.model_span.clone())
        .map(|r| r.start as usize..r.end as usize)
        .filter(|r| body.get(r.start + 1..r.end.saturating_sub(1)) != Some(model.as_bytes()));
    let body = match span {
        Some(span) => crate::dialect::facts::rewrite_model(body, &span, model),
        None => body.clone(),
    };
    super::outbound::build(
        ctx.head,
        ctx.admitted.endpoint,
        provider,
        conn,
        &body,
        super::outbound::Marks {
            request_id: &ctx.record.request_id,
            trace: &ctx.record.trace,
            attempt: ctx.record.attempts.len(),
            slow,
            credential,
            model,
        },
    )
}
