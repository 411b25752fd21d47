//! What a drill runs: scenarios (a fault, where it hits, how long each phase lasts) and the
//! budgets each verdict is held against. The built-in scenarios follow the 429 runbook; a drill
//! file (`--drill FILE`) may add scenarios and change budgets.

use serde::{Deserialize, Serialize};

/// Where a fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The key (connection) the first route tries first.
    Key,
    /// Every key of the first route's provider.
    Provider,
    /// The first route's upstream model, on every key.
    Model,
    /// Every key of one upstream account (`account =` on the connections; without accounts,
    /// every key of the first route's provider, as if it were one organisation).
    Account,
    /// Every route's primary model at once, on every key: routes that share a fallback send it
    /// all their traffic together.
    Primaries,
    /// Every key of the primary provider of the first route whose targets speak more than one
    /// API: its fallback is translated (a config without such a route skips the scenario).
    CrossDialect,
}

/// The limits a scenario's figures are held to.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budgets {
    /// Upstream attempts per client request (client retries included), at most.
    pub max_amplification: f64,
    /// Client requests that end in a 2xx, at least (0: no floor).
    pub min_success: f64,
    /// Answers later than the client's deadline (plus 250 ms), at most.
    pub max_after_deadline: u64,
    /// Seconds after the fault ends until requests succeed again, at most.
    pub max_recovery_s: f64,
    /// A key above its `max_concurrent` at the simulator, at most this many times over (0).
    pub max_cap_overshoot: u64,
    /// Requests sent to a model that lacks what they need (tools, structured output, a
    /// region, a policy tag), at most (0).
    pub max_contract_violations: u64,
    /// How long past the moment a retry would have succeeded a fail-fast answer's
    /// `Retry-After` may tell clients to wait (90th percentile), in seconds.
    pub max_retry_after_overstatement_s: f64,
    /// Of the requests whose client hung up, the share Ringside still sent upstream.
    pub max_sent_after_cancel: f64,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_amplification: 1.5,
            min_success: 0.95,
            max_after_deadline: 0,
            max_recovery_s: 5.0,
            max_cap_overshoot: 0,
            max_contract_violations: 0,
            max_retry_after_overstatement_s: 5.0,
            max_sent_after_cancel: 0.05,
        }
    }
}

/// Budget changes a drill file makes (each one optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetChanges {
    pub max_amplification: Option<f64>,
    pub min_success: Option<f64>,
    pub max_after_deadline: Option<u64>,
    pub max_recovery_s: Option<f64>,
    pub max_cap_overshoot: Option<u64>,
    pub max_contract_violations: Option<u64>,
    pub max_retry_after_overstatement_s: Option<f64>,
    pub max_sent_after_cancel: Option<f64>,
}

impl BudgetChanges {
    fn apply(&self, b: &mut Budgets) {
        if let Some(v) = self.max_amplification {
            b.max_amplification = v;
        }
        if let Some(v) = self.min_success {
            b.min_success = v;
        }
        if let Some(v) = self.max_after_deadline {
            b.max_after_deadline = v;
        }
        if let Some(v) = self.max_recovery_s {
            b.max_recovery_s = v;
        }
        if let Some(v) = self.max_cap_overshoot {
            b.max_cap_overshoot = v;
        }
        if let Some(v) = self.max_contract_violations {
            b.max_contract_violations = v;
        }
        if let Some(v) = self.max_retry_after_overstatement_s {
            b.max_retry_after_overstatement_s = v;
        }
        if let Some(v) = self.max_sent_after_cancel {
            b.max_sent_after_cancel = v;
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    pub name: String,
    pub what: String,
    /// A simulator fault spec (`docs/simulator.md`).
    pub fault: String,
    pub scope: Scope,
    /// Steady traffic, the fault, recovery (the fault is gone, traffic goes on), in seconds.
    pub phases_s: [f64; 3],
    pub budgets: Budgets,
    /// Clients hang up on a request not answered within this many ms (none: they wait).
    pub cancel_after_ms: Option<u64>,
    /// The recovery phase lasts at least this long (seconds; 0: as given).
    pub min_recovery_s: f64,
    /// The recovery phase also outlasts the first route's breaker, if it is open when the
    /// fault ends: an outage's recovery is only seen once the breaker lets a probe through.
    pub waits_for_breaker: bool,
}

/// How a built-in scenario is judged.
#[derive(Clone, Copy)]
enum Judged {
    /// Rate limits and failures that other keys or targets can absorb: the defaults.
    Absorbed,
    /// A full outage: nothing can succeed; what matters is that nobody hammers it, and that
    /// traffic comes back once the breaker has let a probe through (its open time: 15–60 s by
    /// profile; the recovery phase must be longer to see it).
    Outage,
    /// Streams cut after their first bytes: those cannot be replayed.
    CutStreams,
    /// Streams that trickle: those started during the fault run to their end in the
    /// recovery phase (8 events half a second apart), which must outlast them.
    SlowStreams,
    /// Clients that hang up after half a second while their request waits for a key: what
    /// matters is that a request whose client left is not sent upstream after all.
    ClientsHangUp,
}

impl Judged {
    fn budgets(self) -> Budgets {
        match self {
            Judged::Absorbed => Budgets::default(),
            Judged::Outage => Budgets {
                max_amplification: 1.2,
                min_success: 0.0,
                max_recovery_s: 75.0,
                ..Budgets::default()
            },
            Judged::CutStreams => Budgets {
                min_success: 0.8,
                ..Budgets::default()
            },
            Judged::ClientsHangUp => Budgets {
                min_success: 0.0,
                ..Budgets::default()
            },
            Judged::SlowStreams => Budgets {
                max_recovery_s: 10.0,
                ..Budgets::default()
            },
        }
    }

    fn min_recovery_s(self) -> f64 {
        if matches!(self, Judged::SlowStreams) {
            6.0
        } else {
            0.0
        }
    }

    fn cancel_after_ms(self) -> Option<u64> {
        matches!(self, Judged::ClientsHangUp).then_some(500)
    }
}

/// The built-in scenarios: name, what happens, the simulator fault, where, how judged.
const BUILTIN: [(&str, &str, &str, Scope, Judged); 14] = [
    (
        "key-429-retry-after",
        "the first key answers 429 with Retry-After: 2",
        "429;retry-after=2",
        Scope::Key,
        Judged::Absorbed,
    ),
    (
        "key-429-no-hint",
        "the first key answers 429 without any hint",
        "429",
        Scope::Key,
        Judged::Absorbed,
    ),
    (
        "key-429-reset-headers",
        "the first key answers 429 with only x-ratelimit-reset-* headers",
        "429;ratelimit-headers",
        Scope::Key,
        Judged::Absorbed,
    ),
    (
        "account-429",
        "every key of the first key's account answers 429 with Retry-After: 2",
        "429;retry-after=2",
        Scope::Account,
        Judged::Absorbed,
    ),
    (
        "token-budget-429",
        "the first key's tokens per minute are spent (429, x-ratelimit-reset-tokens: 2s)",
        "429;tokens-per-minute",
        Scope::Key,
        Judged::Absorbed,
    ),
    (
        "model-429",
        "the first route's model answers 429 on every key",
        "429;retry-after=2",
        Scope::Model,
        Judged::Absorbed,
    ),
    (
        "primaries-fail-together",
        "every route's primary model answers 429 at once (a shared fallback takes it all)",
        "429;retry-after=2",
        Scope::Primaries,
        Judged::Absorbed,
    ),
    (
        "provider-wall-cross-dialect",
        "every key of the first cross-API route's provider is at a usage wall (429, Retry-After: 60); its fallback speaks another API",
        "429;retry-after=60",
        Scope::CrossDialect,
        Judged::Absorbed,
    ),
    (
        "provider-outage",
        "every key of the first route's provider answers 500",
        "500",
        Scope::Provider,
        Judged::Outage,
    ),
    (
        "provider-resets",
        "every key of the first route's provider resets connections",
        "reset-before-headers",
        Scope::Provider,
        Judged::Outage,
    ),
    (
        "quota-wall-403",
        "the first key is a relay answering quota exhaustion as 403 额度不足",
        "403-quota",
        Scope::Key,
        Judged::Absorbed,
    ),
    (
        "stream-fails-after-first-byte",
        "the first key's streams reset after 3 events",
        "reset-mid-stream;after=3",
        Scope::Key,
        Judged::CutStreams,
    ),
    (
        "clients-cancel-mid-queue",
        "every key of the first route's model answers 429 with Retry-After: 3; clients hang up after 500 ms",
        "429;retry-after=3",
        Scope::Model,
        Judged::ClientsHangUp,
    ),
    (
        "slow-streams",
        "the first key's streams trickle one event every half second",
        "slow-drip;interval=500",
        Scope::Key,
        Judged::SlowStreams,
    ),
];

/// A scenario's phases for `--phase`: the fault and the recovery that long, the steady traffic
/// before them half as long (it only shows the figures a healthy route has; a shorter run).
pub fn phases(phase_s: f64) -> [f64; 3] {
    [phase_s / 2.0, phase_s, phase_s]
}

/// The built-in scenarios, phased by `--phase` ([`phases`]).
pub fn builtin(phase_s: f64) -> Vec<Scenario> {
    BUILTIN
        .iter()
        .map(|&(name, what, fault, scope, judged)| Scenario {
            name: name.into(),
            what: what.into(),
            fault: fault.into(),
            scope,
            phases_s: phases(phase_s),
            budgets: judged.budgets(),
            cancel_after_ms: judged.cancel_after_ms(),
            min_recovery_s: judged.min_recovery_s(),
            waits_for_breaker: matches!(judged, Judged::Outage),
        })
        .collect()
}

/// A drill file: budget changes for every scenario, and scenarios of the operator's own.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrillFile {
    #[serde(default)]
    pub budgets: BudgetChanges,
    #[serde(default)]
    pub scenarios: Vec<FileScenario>,
    /// What models really support, where the config does not say (or says it in one route
    /// and not in another): the contract check holds what reached each model against this.
    #[serde(default)]
    pub models: Vec<super::contract::Declared>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileScenario {
    pub name: String,
    pub fault: String,
    #[serde(default = "key_scope")]
    pub scope: Scope,
    pub steady_s: Option<f64>,
    pub fault_s: Option<f64>,
    pub recovery_s: Option<f64>,
    /// Clients hang up on a request not answered within this many ms.
    pub cancel_after_ms: Option<u64>,
    #[serde(default)]
    pub budgets: BudgetChanges,
}

fn key_scope() -> Scope {
    Scope::Key
}

/// Read a drill file (none: the defaults).
pub fn read(file: Option<&str>) -> Result<DrillFile, String> {
    match file {
        Some(text) => toml::from_str(text).map_err(|e| format!("drill file: {e}")),
        None => Ok(DrillFile::default()),
    }
}

/// The scenarios to run: built-in and the file's, the file's budget changes applied, only the
/// ones named in `only` when it names any.
pub fn scenarios(file: &DrillFile, only: &[String], phase_s: f64) -> Result<Vec<Scenario>, String> {
    let mut all = builtin(phase_s);
    for f in &file.scenarios {
        crate::simulate::fault::Fault::parse(&f.fault)
            .map_err(|e| format!("drill file: scenario {}: fault: {e}", f.name))?;
        let mut budgets = Budgets::default();
        f.budgets.apply(&mut budgets);
        all.push(Scenario {
            name: f.name.clone(),
            what: format!("{} on the {:?} scope (drill file)", f.fault, f.scope).to_lowercase(),
            fault: f.fault.clone(),
            scope: f.scope,
            phases_s: [
                f.steady_s.unwrap_or(phases(phase_s)[0]),
                f.fault_s.unwrap_or(phase_s),
                f.recovery_s.unwrap_or(phase_s),
            ],
            budgets,
            cancel_after_ms: f.cancel_after_ms,
            min_recovery_s: 0.0,
            waits_for_breaker: false,
        });
    }
    for s in &mut all {
        file.budgets.apply(&mut s.budgets);
    }
    if !only.is_empty() {
        if let Some(unknown) = only.iter().find(|n| !all.iter().any(|s| &s.name == *n)) {
            let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "no scenario {unknown}; there are: {}",
                names.join(", ")
            ));
        }
        all.retain(|s| only.contains(&s.name));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drill_file_adds_scenarios_and_changes_budgets() {
        let file = r#"
[budgets]
max_amplification = 2.0
[[scenarios]]
name = "slow"
fault = "slow-drip"
scope = "model"
fault_s = 1
[scenarios.budgets]
min_success = 0.5
"#;
        let all = scenarios(&read(Some(file)).unwrap_or_default(), &[], 2.0).unwrap_or_default();
        let slow = all
            .iter()
            .find(|s| s.name == "slow")
            .expect("the file's scenario");
        assert_eq!(slow.phases_s, [1.0, 1.0, 2.0]);
        assert_eq!(slow.scope, Scope::Model);
        assert_eq!(slow.budgets.min_success, 0.5);
        assert!(all.iter().all(|s| s.budgets.max_amplification == 2.0));
        let none = DrillFile::default();
        let only = scenarios(&none, &["model-429".into()], 1.0).unwrap_or_default();
        assert_eq!(only.len(), 1);
        assert!(scenarios(&none, &["nope".into()], 1.0).is_err());
        let bogus = read(Some("[[scenarios]]\nname=\"x\"\nfault=\"bogus\"")).unwrap_or_default();
        assert!(scenarios(&bogus, &[], 1.0).is_err());
    }
}
