//! What a scenario's figures say about the config: for a budget that did not hold, the likely
//! cause and the config change that removes it, in the operator's words (a figure alone says
//! that something went wrong, not what to do).

use super::plan::{Scenario, Scope};
use super::stage::Stage;
use super::verdict::Verdict;

/// The findings for one verdict (none when every budget held, or no cause is known).
pub fn of(v: &Verdict, stage: &Stage) -> Vec<String> {
    let failed = |figure: &str| v.checks.iter().any(|c| c.figure == figure && !c.held);
    let mut out = Vec::new();
    if failed("amplification") {
        out.extend(undeclared_account(&v.scenario, stage));
    }
    if failed("retry-after overstatement (p90)") {
        out.push(
            "Clients were told to wait longer than Ringside needed: if `[providers.breaker] \
             probe_interval_ms = 0` is set, remove it so probes, not open times, decide \
             (docs/design/resilience.md, *Probes, not timers*)."
                .into(),
        );
    }
    out
}

/// Keys that failed together (one upstream account's limit) but are not declared as one
/// account: Ringside learns the limit one key at a time and tries each in turn.
fn undeclared_account(s: &Scenario, stage: &Stage) -> Option<String> {
    if s.scope != Scope::Account {
        return None;
    }
    let provider = &stage.routes.first()?.primary.0;
    let keys: Vec<&str> = stage
        .keys
        .iter()
        .filter(|k| &k.provider == provider)
        .map(|k| k.connection.as_str())
        .collect();
    let declared = stage
        .keys
        .iter()
        .any(|k| &k.provider == provider && k.account.is_some());
    (keys.len() > 1 && !declared).then(|| {
        format!(
            "These keys fail together and each was tried in turn: {provider}'s connections {} \
             declare no account. If they belong to one upstream account (one organisation's \
             limits), declare `account = \"<name>\"` on each: one 429 then cools them all.",
            keys.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::verdict::Check;

    #[test]
    fn an_amplified_account_wall_names_the_missing_account() {
        let text = include_str!("../../ringside.example.toml");
        let sim = std::net::SocketAddr::from(([127, 0, 0, 1], 9));
        let mut stage = crate::drill::stage::prepare(text, sim, (1, 2), "/tmp/x").expect("stage");
        let provider = stage.routes[0].primary.0.clone();
        let scenarios = crate::drill::plan::scenarios(
            &crate::drill::plan::read(None).expect("plan"),
            &["account-429".into()],
            1.0,
        )
        .expect("scenario");
        let verdict = |held: bool| {
            let zero = std::time::Duration::ZERO;
            let up = crate::drill::verdict::Upstream::default();
            let f = crate::drill::verdict::figures(&[], (zero, zero), zero, zero, up);
            let mut v = crate::drill::verdict::judge(scenarios[0].clone(), f);
            v.checks = vec![Check {
                figure: "amplification",
                value: "1.67x".into(),
                budget: "<= 1.20x".into(),
                held,
            }];
            v.held = held;
            v
        };
        for k in stage.keys.iter_mut() {
            k.account = None;
        }
        let found = of(&verdict(false), &stage);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("account = "), "{}", found[0]);
        assert!(found[0].contains(&provider), "{}", found[0]);
        // Held, or the keys declared as one account: nothing to say.
        assert!(of(&verdict(true), &stage).is_empty());
        for k in stage.keys.iter_mut() {
            k.account = Some("org".into());
        }
        assert!(of(&verdict(false), &stage).is_empty());
    }
}
