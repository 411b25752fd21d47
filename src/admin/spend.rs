//! What each configured tenant spent against its budgets (`[[tenants]]`, `flow::spend`): the
//! admin API's view and reset, and the spend metric (configured tenants only, so its
//! cardinality is the config's).

use crate::state::core::Shared;
use serde_json::{Value, json};

/// `GET /admin/spend`: every configured tenant's budgets, what it spent this day and this
/// month (running requests' reservations included), and when each period starts again. In
/// fleet mode, `fleet` says what the whole fleet spent (Redis's counters, which admission
/// decides on), or `null` when Redis did not answer within a second.
pub(super) async fn view(shared: &Shared) -> (u16, Value) {
    let generation = shared.current();
    let now = crate::clock::unix_ms();
    let (day_end, month_end) = crate::flow::spend::period_ends(now);
    let usd = |micro: u64| micro as f64 / 1e6;
    let share = |used: u64, limit: u64| {
        (limit > 0).then(|| (used as f64 / limit as f64 * 1e3).round() / 10.0)
    };
    let rules = &generation.config.tenants.rules;
    let mut fleet = Vec::with_capacity(rules.len());
    for r in rules {
        fleet.push(fleet_spent(shared, r.id, now).await);
    }
    let period = |used: [u64; 4], i: usize, limit: u64, usd_limit: u64, ends: u64| {
        json!({"tokens": used[i], "usd": usd(used[i + 1]), "resets_in_s": (ends - now).div_ceil(1000),
               "percent": {"tokens": share(used[i], limit), "usd": share(used[i + 1], usd_limit)}})
    };
    let tenants: Vec<Value> = rules
        .iter()
        .zip(fleet)
        .map(|(r, fleet)| {
            let b = r.budget;
            let periods = |used: [u64; 4]| {
                [
                    period(used, 0, b.tokens_per_day, b.micro_usd_per_day, day_end),
                    period(used, 2, b.tokens_per_month, b.micro_usd_per_month, month_end),
                ]
            };
            let [day, month] = periods(shared.flow.spend.spent(r.id, now));
            let fleet = fleet.map(|f| {
                let [day, month] = periods(f);
                json!({"day": day, "month": month})
            });
            json!({
                "tenant": r.name,
                "limits": r.limits,
                "budgets": {
                    "tokens_per_day": (b.tokens_per_day > 0).then_some(b.tokens_per_day),
                    "tokens_per_month": (b.tokens_per_month > 0).then_some(b.tokens_per_month),
                    "usd_per_day": (b.micro_usd_per_day > 0).then(|| usd(b.micro_usd_per_day)),
                    "usd_per_month": (b.micro_usd_per_month > 0).then(|| usd(b.micro_usd_per_month)),
                },
                "day": day,
                "month": month,
                "billed_usd_since_start": usd(shared.flow.spend.billed(r.id)),
                "fleet": fleet,
            })
        })
        .collect();
    let fleet_mode = shared.flow.tenants.fleet().is_some();
    (200, json!({ "tenants": tenants, "fleet_mode": fleet_mode }))
}

/// What tenant `id` spent across the fleet this day and month (`None`: not in fleet mode, or
/// Redis did not answer in time).
async fn fleet_spent(shared: &Shared, id: u64, now: u64) -> Option<[u64; 4]> {
    let to = shared.flow.tenants.fleet()?;
    let (reply, answer) = futures_channel::oneshot::channel();
    let periods = crate::flow::spend::periods(now);
    let ask = crate::flow::tenant::TenantAsk::Spent {
        tenant: id,
        periods,
        reply,
    };
    to.send(ask).ok()?;
    let wait = std::time::Duration::from_secs(1);
    crate::timer::timeout(wait, answer).await.ok()?.ok()
}

/// `POST /admin/spend/{tenant}/reset`: the tenant's day and month start over.
pub(super) fn reset(shared: &Shared, tenant: &str) -> (u16, Value) {
    let generation = shared.current();
    let rules = &generation.config.tenants.rules;
    let Some(rule) = rules.iter().find(|r| r.name == tenant) else {
        let err =
            json!({"error": {"message": "no configured tenant of that name", "code": "not_found"}});
        return (404, err);
    };
    shared.flow.spend.reset(rule.id);
    if let Some(to) = shared.flow.tenants.fleet() {
        // The fleet's counters too, which admission decides on in fleet mode.
        let periods = crate::flow::spend::periods(crate::clock::unix_ms());
        let reset = crate::flow::tenant::TenantAsk::Reset {
            tenant: rule.id,
            periods,
        };
        let _ = to.send(reset);
    }
    crate::log::event(
        "info",
        "admin: a tenant's spend reset for the day and the month",
        json!({"tenant": tenant}),
    );
    (200, json!({"tenant": tenant, "reset": true}))
}

/// `ringside_tenant_spend_usd_total`: dollars billed per configured tenant since the start.
pub(super) fn metrics(text: &mut String, shared: &Shared) {
    let generation = shared.current();
    let rules = &generation.config.tenants.rules;
    if rules.is_empty() {
        return;
    }
    text.push_str("# HELP ringside_tenant_spend_usd_total Dollars billed to each configured tenant since the process started (priced usage).\n# TYPE ringside_tenant_spend_usd_total counter\n");
    for r in rules {
        let micro = shared.flow.spend.billed(r.id);
        let name = crate::metrics::escape(&r.name);
        text.push_str(&format!(
            "ringside_tenant_spend_usd_total{{tenant=\"{name}\"}} {}\n",
            micro as f64 / 1e6
        ));
    }
}
