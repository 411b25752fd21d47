//! One bill per request against its tenant's budgets (`[[tenants]]`, `flow::spend`): admission
//! reserves an estimate on every budget the tenant has (its prompt and requested output, at
//! the dearest price among the route's targets), and the request's end settles it with what
//! the provider billed: the usage its answer or stream reported, priced for the model that
//! served (`flow::price`). An answer that reported no usage is billed by estimate (the prompt's
//! estimate, and the text it carried at four bytes a token); a request that reached no
//! upstream answer bills nothing. The cost goes to the decision record and the access log.
//!
//! A request may carry its own cap (`x-ringside-max-tokens-budget`, `x-ringside-max-cost-usd`):
//! a target whose attempt could cost more (the prompt and the requested output, at that
//! target's price) is passed over (`Ineligible::OverRequestBudget`), and a request no target
//! fits is refused (`request_budget_exhausted`).

use super::exchange::Request;
use super::stop::Stop;
use crate::dialect::needs::Needs;
use crate::flow::bill::{FleetHold, RequestBill};
use crate::flow::spend::Spent;
use crate::route::Entry;

/// Whether the request's own cap admits an attempt on target `c` (always, without a cap).
pub(super) fn within_cap(
    ctx: &super::exchange::Ctx<'_, '_>,
    entry: &Entry,
    needs: &Needs,
    c: crate::route::Candidate,
) -> bool {
    let Some(cap) = ctx.bill.as_ref().and_then(|b| b.cap) else {
        return true;
    };
    let cfg = ctx.config();
    let t = &entry.targets[c.target];
    let price = cfg
        .providers
        .get(t.provider)
        .and_then(|p| cfg.prices.of(&p.id, &t.model));
    cap.admits(needs, price)
}

/// A Chat stream with a bill asks the provider for its usage chunk when the client did not
/// (`stream_options.include_usage`), so that what the provider billed is counted; the chunk is
/// left out of what the client reads (`forward::translated`). A body that says anything of
/// `stream_options` is sent as it is.
pub(super) fn ask_for_usage(ctx: &mut super::exchange::Ctx<'_, '_>) {
    let Some(bill) = ctx
        .bill
        .as_mut()
        .filter(|b| b.spend.is_some() || b.cap.is_some())
    else {
        return;
    };
    let a = &mut ctx.admitted;
    if !a.stream || a.endpoint != crate::dialect::Endpoint::ChatCompletions {
        return;
    }
    if memchr::memmem::find(&a.body, b"\"stream_options\"").is_some() {
        return;
    }
    let Some(open) = a.body.iter().position(|b| !b.is_ascii_whitespace()) else {
        return;
    };
    if a.body[open] != b'{' {
        return;
    }
    // (A chat request has a model and messages: a comma always follows.)
    const ASK: &[u8] = b"\"stream_options\":{\"include_usage\":true},";
    let mut body = Vec::with_capacity(a.body.len() + ASK.len());
    body.extend_from_slice(&a.body[..=open]);
    body.extend_from_slice(ASK);
    body.extend_from_slice(&a.body[open + 1..]);
    a.body = bytes::Bytes::from(body);
    if let Some(span) = a.model_span.as_mut() {
        let n = ASK.len() as u32;
        *span = span.start + n..span.end + n;
    }
    bill.usage_asked = true;
}

/// Reserve the request's estimate on its tenant's budgets; `Err`: one is spent.
pub(super) fn reserve(
    ctx: &mut Request<'_>,
    entry: &Entry,
    needs: &Needs,
    hold: &mut Option<Box<RequestBill>>,
) -> Result<(), Stop> {
    let cfg = ctx.config();
    let Some(rule) = cfg.tenants.of(ctx.tenant).filter(|r| r.budget.any()) else {
        return Ok(());
    };
    let estimate = estimate(ctx, entry, needs);
    let ledgers = &ctx.core.shared.flow.spend;
    let now = crate::clock::unix_ms();
    let reserved = ledgers
        .reserve(ctx.tenant, &rule.budget, estimate, now)
        .map_err(Stop::TenantBudget)?;
    hold.get_or_insert_with(|| Box::new(RequestBill::default()))
        .spend = Some(reserved);
    // The answer says so when 80 % of a budget or more is spent (this request's share too).
    ctx.budget_warning = ledgers.warning(ctx.tenant, &rule.budget, now);
    Ok(())
}

/// What the request may cost at most on its route: its prompt (at the bytes per token each
/// target's provider has shown, `flow::estimate`) and the output it asks for, at the dearest
/// target.
fn estimate(ctx: &Request<'_>, entry: &Entry, needs: &Needs) -> Spent {
    let cfg = ctx.config();
    let ratios = &ctx.core.shared.flow.ratios;
    let mut most = Spent::default();
    for t in &entry.targets {
        let tokens = ratios
            .tokens(t.provider, needs.prompt_bytes)
            .saturating_add(needs.output_tokens);
        let price = cfg
            .providers
            .get(t.provider)
            .and_then(|p| cfg.prices.of(&p.id, &t.model))
            .map_or(0.0, |p| p.input.max(p.output));
        most.tokens = most.tokens.max(tokens);
        most.micro_usd = most.micro_usd.max((tokens as f64 * price).round() as u64);
    }
    most
}

/// Whether the request's budget reservation is to be made across the fleet too.
pub(super) fn in_fleet(ctx: &Request<'_>, hold: &Option<Box<RequestBill>>) -> bool {
    hold.as_ref().is_some_and(|h| h.spend.is_some())
        && ctx.core.shared.flow.tenants.fleet().is_some()
}

/// The reservation made on this instance's ledger, made on the fleet's counters too (fleet
/// mode): refused when a budget is spent fleet-wide; Redis away, this instance's count decides.
pub(super) async fn reserve_in_fleet(
    ctx: &Request<'_>,
    mut hold: Option<Box<RequestBill>>,
) -> Result<Option<Box<RequestBill>>, Stop> {
    let (Some(bill), Some(to)) = (hold.as_mut(), ctx.core.shared.flow.tenants.fleet()) else {
        return Ok(hold);
    };
    let (Some(local), Some(rule)) = (&bill.spend, ctx.config().tenants.of(ctx.tenant)) else {
        return Ok(hold);
    };
    let now = crate::clock::unix_ms();
    let fleet = FleetHold::reserve(to, ctx.tenant, &rule.budget, local, now).await;
    bill.fleet_spend = fleet.map_err(Stop::TenantBudget)?;
    Ok(hold)
}

/// The request ended: its bill settles its reservation, and goes to its record.
pub(super) fn settle(ctx: &mut Request<'_>, hold: Option<Box<RequestBill>>, needs: &Needs) {
    let Some(hold) = hold.filter(|h| h.spend.is_some() || h.cap.is_some()) else {
        return;
    };
    let delivered = bill(ctx, needs);
    let spent = Spent {
        tokens: delivered.tokens + hold.unbilled.tokens,
        micro_usd: delivered.micro_usd + hold.unbilled.micro_usd,
    };
    ctx.record.cost_micro_usd = spent.micro_usd.min(u64::from(u32::MAX)) as u32;
    let hold = *hold;
    if let Some(reserved) = hold.spend {
        reserved.settle(spent, crate::clock::unix_ms());
    }
    if let Some(fleet) = hold.fleet_spend {
        fleet.settle(spent);
    }
}

/// An attempt on `(provider index, model)` failed before the commit after its provider
/// produced output (`judge::Hold::Cut`): the provider billed it, so the request's bill counts
/// it — its reported usage, else its prompt's estimate and its text at four bytes a token.
pub(super) fn produced_before_commit(
    ctx: &mut super::exchange::Ctx<'_, '_>,
    (provider, model): (usize, &str),
    p: super::judge::Produced,
) {
    if !ctx
        .bill
        .as_ref()
        .is_some_and(|b| b.spend.is_some() || b.cap.is_some())
    {
        return;
    }
    let cfg = ctx.config();
    let bytes = ctx.admitted.body.len() as u64;
    let prompt = p.prompt.map_or_else(
        || ctx.core.shared.flow.ratios.tokens(provider, bytes),
        u64::from,
    );
    let completion = p.completion.map_or(p.text_bytes / 4, u64::from);
    let cached = p.cached.map_or(0, u64::from);
    let micro_usd = cfg
        .providers
        .get(provider)
        .and_then(|pr| cfg.prices.of(&pr.id, model))
        .map_or(0, |price| price.micro_usd(prompt, cached, completion));
    if let Some(b) = ctx.bill.as_mut() {
        b.unbilled.tokens += prompt + completion;
        b.unbilled.micro_usd += micro_usd;
    }
}

/// What the request spent: the usage its answer reported, priced for the model that served.
fn bill(ctx: &Request<'_>, needs: &Needs) -> Spent {
    let r = &ctx.record;
    let Some(target) = r
        .target
        .as_deref()
        .filter(|_| (200..300).contains(&r.status))
    else {
        return Spent::default();
    };
    let t = &r.tokens;
    let (provider, model) = target.split_once('/').unwrap_or(("", target));
    let slot = ctx.config().providers.iter().position(|p| p.id == provider);
    let ratios = &ctx.core.shared.flow.ratios;
    let (prompt, completion) = match (t.prompt, t.completion) {
        (None, None) => {
            // No usage reported: the prompt's estimate, and the text the answer carried (a
            // stream's text, or a JSON answer's body) at four bytes a token.
            let text = r
                .stream_stats
                .as_ref()
                .map_or(r.bytes_out, |s| s.text_bytes);
            let prompt = ratios.tokens(slot.unwrap_or(usize::MAX), needs.prompt_bytes);
            (prompt, text / 4)
        }
        (p, c) => (u64::from(p.unwrap_or(0)), u64::from(c.unwrap_or(0))),
    };
    if let (Some(slot), Some(p)) = (slot, t.prompt) {
        ratios.learn(slot, needs.prompt_bytes, u64::from(p));
    }
    let cached = u64::from(t.cached.unwrap_or(0));
    let micro_usd = ctx
        .config()
        .prices
        .of(provider, model)
        .map_or(0, |p| p.micro_usd(prompt, cached, completion));
    Spent {
        tokens: prompt + completion,
        micro_usd,
    }
}
