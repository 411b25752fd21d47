//! What each configured tenant spent against its budgets (`[[tenants]]`, `flow::spend`): the
//! admin API's view and reset, and the spend metric (configured tenants only, so its
//! cardinality is the config's).

use crate::state::core::Shared;
use serde_json::{Value, json};

/// `GET /admin/spend`: every configured tenant's budgets, what it spent this day and this
/// month (running requests' reservations included), and when each period starts again.
pub(super) fn view(shared: &Shared) -> (u16, Value) {
    let generation = shared.current();
    let now = crate::clock::unix_ms();
    let (day_end, month_end) = crate::flow::spend::period_ends(now);
    let usd = |micro: u64| micro as f64 / 1e6;
    let share = |used: u64, limit: u64| {
        (limit > 0).then(|| (used as f64 / limit as f64 * 1e3).round() / 10.0)
    };
    let tenants: Vec<Value> = generation
        .config
        .tenants
        .rules
        .iter()
        .map(|r| {
            let id = r.id;
            let [dt, du, mt, mu] = shared.flow.spend.spent(id, now);
            let b = r.budget;
            json!({
                "tenant": r.name,
                "limits": r.limits,
                "budgets": {
                    "tokens_per_day": (b.tokens_per_day > 0).then_some(b.tokens_per_day),
                    "tokens_per_month": (b.tokens_per_month > 0).then_some(b.tokens_per_month),
                    "usd_per_day": (b.micro_usd_per_day > 0).then(|| usd(b.micro_usd_per_day)),
                    "usd_per_month": (b.micro_usd_per_month > 0).then(|| usd(b.micro_usd_per_month)),
                },
                "day": {"tokens": dt, "usd": usd(du), "resets_in_s": (day_end - now).div_ceil(1000),
                        "percent": {"tokens": share(dt, b.tokens_per_day), "usd": share(du, b.micro_usd_per_day)}},
                "month": {"tokens": mt, "usd": usd(mu), "resets_in_s": (month_end - now).div_ceil(1000),
                          "percent": {"tokens": share(mt, b.tokens_per_month), "usd": share(mu, b.micro_usd_per_month)}},
                "billed_usd_since_start": usd(shared.flow.spend.billed(id)),
            })
        })
        .collect();
    (200, json!({ "tenants": tenants }))
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
