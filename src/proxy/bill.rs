//! One bill per request against its tenant's budgets (`[[tenants]]`, `flow::spend`): admission
//! reserves an estimate on every budget the tenant has (its prompt and requested output, at
//! the dearest price among the route's targets), and the request's end settles it with what
//! the provider billed: the usage its answer or stream reported, priced for the model that
//! served (`flow::price`). An answer that reported no usage is billed by estimate (the admission's
//! estimate, and a stream's text at four bytes a token); a request that reached no upstream
//! answer bills nothing. The cost goes to the decision record and the access log.

use super::exchange::Request;
use super::stop::Stop;
use crate::dialect::needs::Needs;
use crate::flow::spend::{Hold, Spent};
use crate::flow::tenant::TenantPermit;
use crate::route::Entry;

/// What a request holds of its tenant until it ends: its place under the minute quotas and
/// its reservation on the budgets (boxed, and only made when either is configured: every
/// request's task carries it).
pub(super) struct TenantHold {
    /// Held for its drop, which gives the tenant's place under its quotas back.
    _permit: Option<TenantPermit>,
    spend: Option<(Hold, Spent)>,
}

impl TenantHold {
    pub fn new(permit: Option<TenantPermit>) -> TenantHold {
        TenantHold {
            _permit: permit,
            spend: None,
        }
    }
}

/// Reserve the request's estimate on its tenant's budgets; `Err`: one is spent.
pub(super) fn reserve(
    ctx: &mut Request<'_>,
    entry: &Entry,
    needs: &Needs,
    hold: &mut Option<Box<TenantHold>>,
) -> Result<(), Stop> {
    let cfg = ctx.config();
    let Some(rule) = cfg.tenants.of(ctx.tenant).filter(|r| r.budget.any()) else {
        return Ok(());
    };
    // The dearest target the request may reach prices the estimate.
    let dearest = entry
        .targets
        .iter()
        .filter_map(|t| {
            let provider = &cfg.providers.get(t.provider)?.id;
            cfg.prices.of(provider, &t.model)
        })
        .map(|p| p.input.max(p.output))
        .fold(0.0, f64::max);
    let estimate = Spent {
        tokens: needs.context_tokens,
        micro_usd: (needs.context_tokens as f64 * dearest).round() as u64,
    };
    let ledgers = &ctx.core.shared.flow.spend;
    let now = crate::clock::unix_ms();
    let reserved = ledgers
        .reserve(ctx.tenant, &rule.budget, estimate, now)
        .map_err(Stop::TenantBudget)?;
    hold.get_or_insert_with(|| Box::new(TenantHold::new(None)))
        .spend = Some((reserved, estimate));
    // The answer says so when 80 % of a budget or more is spent (this request's share too).
    ctx.budget_warning = ledgers.warning(ctx.tenant, &rule.budget, now);
    Ok(())
}

/// The request ended: its bill settles its reservation, and goes to its record.
pub(super) fn settle(ctx: &mut Request<'_>, hold: Option<Box<TenantHold>>) {
    let Some((reserved, estimate)) = hold.and_then(|h| h.spend) else {
        return;
    };
    let spent = bill(ctx, estimate);
    ctx.record.cost_micro_usd = spent.micro_usd.min(u64::from(u32::MAX)) as u32;
    reserved.settle(spent, crate::clock::unix_ms());
}

/// What the request spent: the usage its answer reported, priced for the model that served.
fn bill(ctx: &Request<'_>, estimate: Spent) -> Spent {
    let r = &ctx.record;
    let Some(target) = r
        .target
        .as_deref()
        .filter(|_| (200..300).contains(&r.status))
    else {
        return Spent::default();
    };
    let t = &r.tokens;
    let (prompt, completion) = match (t.prompt, t.completion) {
        (None, None) => {
            // No usage reported: the admission estimate (prompt and requested output), and the
            // text a stream carried.
            let streamed = r.stream_stats.as_ref().map_or(0, |s| s.text_bytes / 4);
            (estimate.tokens, streamed)
        }
        (p, c) => (u64::from(p.unwrap_or(0)), u64::from(c.unwrap_or(0))),
    };
    let cached = u64::from(t.cached.unwrap_or(0));
    let (provider, model) = target.split_once('/').unwrap_or(("", target));
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
