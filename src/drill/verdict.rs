//! A scenario's figures, measured from what the clients saw and what the simulator counted, and
//! each held against its budget.

use super::contract::Violation;
use super::plan::{Budgets, Scenario};
use super::traffic::Done;
use serde::Serialize;
use std::time::Duration;

/// An answer this much past the client's deadline counts as late.
pub const LATE_TOLERANCE: Duration = Duration::from_millis(250);

/// What the simulator counted during a scenario.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Upstream {
    pub attempts: u64,
    /// Keys whose peak concurrency went over their `max_concurrent`: (key label, peak, cap).
    pub over_cap: Vec<(String, u64, u64)>,
    /// Requests that reached a model without what they needed.
    pub contract: Vec<Violation>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Figures {
    pub requests: usize,
    /// Of them, streamed.
    pub streams: usize,
    pub succeeded: usize,
    pub success_ratio: f64,
    /// HTTP requests the clients sent, retries included.
    pub client_sends: u64,
    pub upstream_attempts: u64,
    /// Upstream attempts per client request, over the whole scenario.
    pub amplification: f64,
    /// Upstream attempts while the fault was on per client request started then (the judged
    /// figure: healthy phases would dilute it, and once a breaker fails requests fast the
    /// whole scenario's falls below 1 whatever happened during the fault).
    pub fault_amplification: f64,
    /// Upstream attempts per client request started in each phase: steady, fault, recovery
    /// (what the fault cost, and whether recovery went back to one attempt per request).
    pub phase_amplification: [f64; 3],
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub after_deadline: u64,
    /// Seconds from the fault's end until a whole second of requests succeeded (`None`: never).
    pub recovery_s: Option<f64>,
    pub over_cap: Vec<(String, u64, u64)>,
    pub contract_violations: Vec<Violation>,
    pub retry_after: super::honesty::Honesty,
    /// Connections' queues that were used, against their caps (from the admin API).
    pub queues: Vec<super::watch::QueueFigures>,
    /// Requests whose client hung up before the answer (`cancel_after_ms`), and of those, the
    /// ones Ringside still sent upstream (decision records `client_gone` with attempts).
    pub cancelled: usize,
    pub sent_after_cancel: usize,
    /// Connections by state and requests queued, per second.
    pub states: Vec<super::watch::StateSecond>,
    /// Requests by status over time: (second from the scenario's start, status, count).
    pub timeline: Vec<(u32, u16, u32)>,
    /// What the scenario spent: tokens the upstreams reported, and their price in dollars
    /// (each connection's tokens at its first model's price; unpriced models count $0).
    pub spent: super::spend::Spent,
}

#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub figure: &'static str,
    pub value: String,
    pub budget: String,
    pub held: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub scenario: Scenario,
    pub figures: Figures,
    pub checks: Vec<Check>,
    pub held: bool,
    /// Decision records of a few requests that failed or needed more than one attempt.
    pub samples: Vec<serde_json::Value>,
    /// The metrics an operator would have seen move (series, increase).
    pub signals: Vec<(String, f64)>,
    /// The operational log messages that fired (only when the drill ran Ringside itself).
    pub logged: Vec<super::signals::Logged>,
    /// For a budget that did not hold: its likely cause and the config change that removes it.
    pub findings: Vec<String>,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The figures of the requests that started in `[from, to)`; `fault_end` from the drill's start.
pub fn figures(
    done: &[Done],
    window: (Duration, Duration),
    fault_end: Duration,
    deadline: Duration,
    up: Upstream,
) -> Figures {
    let mine: Vec<&Done> = done
        .iter()
        .filter(|d| d.started >= window.0 && d.started < window.1)
        .collect();
    let requests = mine.len();
    let succeeded = mine.iter().filter(|d| d.ok()).count();
    let mut lat: Vec<f64> = mine.iter().map(|d| d.took.as_secs_f64() * 1e3).collect();
    lat.sort_by(f64::total_cmp);
    let mut timeline = std::collections::BTreeMap::new();
    for d in &mine {
        let sec = (d.started - window.0).as_secs() as u32;
        *timeline.entry((sec, d.status)).or_insert(0u32) += 1;
    }
    Figures {
        requests,
        streams: mine.iter().filter(|d| d.stream).count(),
        succeeded,
        success_ratio: if requests == 0 {
            0.0
        } else {
            succeeded as f64 / requests as f64
        },
        client_sends: mine.iter().map(|d| u64::from(d.sends)).sum(),
        upstream_attempts: up.attempts,
        amplification: if requests == 0 {
            0.0
        } else {
            up.attempts as f64 / requests as f64
        },
        fault_amplification: 0.0,
        phase_amplification: [0.0; 3],
        p50_ms: quantile(&lat, 0.5),
        p99_ms: quantile(&lat, 0.99),
        after_deadline: mine
            .iter()
            .filter(|d| d.took > deadline + LATE_TOLERANCE)
            .count() as u64,
        recovery_s: recovery(&mine, fault_end),
        over_cap: up.over_cap,
        contract_violations: up.contract,
        retry_after: super::honesty::measure(&mine),
        queues: Vec::new(),
        cancelled: mine.iter().filter(|d| d.cancelled.is_some()).count(),
        sent_after_cancel: 0,
        states: Vec::new(),
        timeline: timeline
            .into_iter()
            .map(|((s, st), n)| (s, st, n))
            .collect(),
        spent: Default::default(),
    }
}

/// A request counts as served promptly when its first send got a 2xx within this: the
/// simulator answers in milliseconds, so anything longer waited inside Ringside (for a cooling
/// key or an open breaker) and says the route was not back yet.
pub const PROMPT: Duration = Duration::from_secs(2);

/// The first second after `fault_end` (on 100 ms steps) in which requests started and every
/// one was served promptly on its first send (a client's retry does not count: it hides a
/// Ringside still failing fast; a long wait inside Ringside does not either): how long
/// recovery took. When no request at all came between the fault's end and that second (the
/// clients were all still held by answers from the fault, as trickling streams hold them),
/// nothing showed the route unrecovered: it was back when first asked, 0.
fn recovery(mine: &[&Done], fault_end: Duration) -> Option<f64> {
    let last = mine.iter().map(|d| d.started).max()?;
    let mut t = fault_end;
    let mut asked = false;
    while t <= last {
        let window: Vec<&&Done> = mine
            .iter()
            .filter(|d| d.started >= t && d.started < t + Duration::from_secs(1))
            .collect();
        // A whole second of requests, or at the end of the drill's traffic at least three.
        let enough = t + Duration::from_secs(1) <= last || window.len() >= 3;
        let prompt = |d: &&&Done| d.first_ok && d.took <= PROMPT;
        if enough && !window.is_empty() && window.iter().all(prompt) {
            return Some(if asked {
                (t - fault_end).as_secs_f64()
            } else {
                0.0
            });
        }
        asked |= !window.is_empty();
        t += Duration::from_millis(100);
    }
    None
}

/// Hold the figures against the budgets.
pub fn judge(scenario: Scenario, figures: Figures) -> Verdict {
    let b: &Budgets = &scenario.budgets;
    let f = &figures;
    let checks = vec![
        Check {
            figure: "amplification",
            value: format!("{:.2}x", f.fault_amplification),
            budget: format!("<= {:.2}x", b.max_amplification),
            held: f.fault_amplification <= b.max_amplification,
        },
        Check {
            figure: "success",
            value: format!("{:.1}%", f.success_ratio * 100.0),
            budget: format!(">= {:.1}%", b.min_success * 100.0),
            held: f.success_ratio >= b.min_success,
        },
        Check {
            figure: "after deadline",
            value: f.after_deadline.to_string(),
            budget: format!("<= {}", b.max_after_deadline),
            held: f.after_deadline <= b.max_after_deadline,
        },
        Check {
            figure: "recovery",
            value: f.recovery_s.map_or("never".into(), |s| format!("{s:.1}s")),
            budget: format!("<= {:.1}s", b.max_recovery_s),
            held: f.recovery_s.is_some_and(|s| s <= b.max_recovery_s),
        },
        Check {
            figure: "keys over their cap",
            value: f.over_cap.len().to_string(),
            budget: format!("<= {}", b.max_cap_overshoot),
            held: f.over_cap.len() as u64 <= b.max_cap_overshoot,
        },
        contract_check(&f.contract_violations, b.max_contract_violations),
        queue_check(&f.queues),
        cancel_check(f.cancelled, f.sent_after_cancel, b.max_sent_after_cancel),
        Check {
            figure: "retry-after overstatement (p90)",
            value: format!(
                "{:.1}s ({} answers, {} early)",
                f.retry_after.overstatement_p90_s, f.retry_after.answers, f.retry_after.early
            ),
            budget: format!("<= {:.1}s", b.max_retry_after_overstatement_s),
            held: f.retry_after.overstatement_p90_s <= b.max_retry_after_overstatement_s,
        },
    ];
    let held = checks.iter().all(|c| c.held);
    Verdict {
        scenario,
        figures,
        checks,
        held,
        samples: Vec::new(),
        signals: Vec::new(),
        logged: Vec::new(),
        findings: Vec::new(),
    }
}

/// Requests whose client hung up that Ringside sent upstream after it had: an attempt that
/// started (by its decision record: the deadline the send gave less the budget left at the
/// attempt) at or after the moment the client hung up is a slot and a rate-limit token spent
/// on nobody. An attempt already under way when the client left is not counted.
pub fn sent_after_cancel(
    done: &[Done],
    decisions: &[serde_json::Value],
    cancel_after_ms: Option<u64>,
) -> usize {
    let Some(cancel_at) = cancel_after_ms else {
        return 0;
    };
    done.iter()
        .filter_map(|d| d.cancelled.as_ref())
        .filter(|(id, deadline_ms)| {
            let record = decisions.iter().find(|r| r["request_id"] == id.as_str());
            let attempts = record.and_then(|r| r["attempts"].as_array());
            attempts.into_iter().flatten().any(|a| {
                let left = a["ms_left"].as_u64().unwrap_or(u64::MAX);
                deadline_ms.saturating_sub(left) >= cancel_at
            })
        })
        .count()
}

/// Of the requests clients hung up on, the share Ringside still sent upstream.
fn cancel_check(cancelled: usize, sent: usize, budget: f64) -> Check {
    let share = if cancelled == 0 {
        0.0
    } else {
        sent as f64 / cancelled as f64
    };
    Check {
        figure: "sent upstream after the client hung up",
        value: format!("{:.1}% ({sent} of {cancelled})", share * 100.0),
        budget: format!("<= {:.1}%", budget * 100.0),
        held: share <= budget,
    }
}

/// Queues deeper than their `max_queue_depth` (a cap Ringside must never exceed).
fn queue_check(q: &[super::watch::QueueFigures]) -> Check {
    let over: Vec<String> = q
        .iter()
        .filter(|x| x.depth_cap > 0 && x.peak_queued > x.depth_cap)
        .map(|x| format!("{} {}/{}", x.connection, x.peak_queued, x.depth_cap))
        .collect();
    let deepest = q.iter().map(|x| x.peak_queued).max().unwrap_or(0);
    Check {
        figure: "queues over their depth cap",
        value: if over.is_empty() {
            format!("0 (deepest {deepest})")
        } else {
            format!("{} ({})", over.len(), over.join(", "))
        },
        budget: "<= 0".into(),
        held: over.is_empty(),
    }
}

/// Requests sent where their contract could not be kept, naming the first few (model, need).
fn contract_check(v: &[Violation], budget: u64) -> Check {
    let total: u64 = v.iter().map(|x| x.requests).sum();
    let named: Vec<String> = v
        .iter()
        .take(3)
        .map(|x| format!("{} at {}", x.need, x.target))
        .collect();
    Check {
        figure: "contract violations",
        value: if named.is_empty() {
            total.to_string()
        } else {
            format!("{total} ({})", named.join(", "))
        },
        budget: format!("<= {budget}"),
        held: total <= budget,
    }
}

#[cfg(test)]
mod tests;
