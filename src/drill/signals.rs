//! What an operator watching Ringside's metrics would have seen during a scenario: the counters
//! that moved (connection transitions, breaker opens, lockouts, answers by status, failed
//! streams, queue refusals), from a scrape before and after.

use std::collections::BTreeMap;

/// The counter families worth an alert.
const WATCHED: [&str; 6] = [
    "ringside_connection_transitions_total",
    "ringside_breaker_transitions_total",
    "ringside_model_lockouts_total",
    "ringside_requests_total",
    "ringside_streams_failed_after_commit_total",
    "ringside_queue_rejections_total",
];

/// Tokens the upstream reported, by connection and kind: what a scenario spent.
const TOKENS: &str = "ringside_tokens_total";

/// The watched samples of a Prometheus text exposition, by series (name and labels), and the
/// tokens reported.
pub fn scrape(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| WATCHED.iter().any(|w| l.starts_with(w)) || l.starts_with(TOKENS))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The series that moved from `before` to `after`, with how much.
pub fn moved(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
    after
        .iter()
        .filter_map(|(series, v)| {
            let d = v - before.get(series).copied().unwrap_or(0.0);
            (d > 0.0 && !is_plain_success(series)).then(|| (series.clone(), d))
        })
        .collect()
}

/// Answers that went well, and tokens spent, are traffic, not a signal.
fn is_plain_success(series: &str) -> bool {
    (series.starts_with("ringside_requests_total") && series.contains("status=\"200\""))
        || series.starts_with(TOKENS)
}

/// What the upstreams reported spending between two scrapes, by connection (`provider/
/// connection`): prompt, completion and cached prompt tokens.
pub fn tokens_moved(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, [u64; 3]> {
    let mut out: BTreeMap<String, [u64; 3]> = BTreeMap::new();
    for (series, v) in after.range(TOKENS.to_string()..) {
        if !series.starts_with(TOKENS) {
            break;
        }
        let d = v - before.get(series).copied().unwrap_or(0.0);
        let label = |name: &str| {
            let at = series.find(&format!("{name}=\""))? + name.len() + 2;
            let len = series[at..].find('"')?;
            Some(&series[at..at + len])
        };
        let (Some(p), Some(c), Some(kind)) =
            (label("provider"), label("connection"), label("kind"))
        else {
            continue;
        };
        let k = match kind {
            "prompt" => 0,
            "completion" => 1,
            "cached" => 2,
            _ => continue,
        };
        out.entry(format!("{p}/{c}")).or_default()[k] += d.max(0.0) as u64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_spend_not_signals() {
        let before =
            scrape("ringside_tokens_total{provider=\"p\",connection=\"a\",kind=\"prompt\"} 10\n");
        let after = scrape(
            "ringside_tokens_total{provider=\"p\",connection=\"a\",kind=\"prompt\"} 30\n\
             ringside_tokens_total{provider=\"p\",connection=\"a\",kind=\"completion\"} 8\n",
        );
        assert!(moved(&before, &after).is_empty());
        let spent = tokens_moved(&before, &after);
        assert_eq!(spent.get("p/a"), Some(&[20, 8, 0]));
    }

    #[test]
    fn only_watched_counters_that_moved_are_signals() {
        let before = scrape(
            "# HELP x\nringside_requests_total{route=\"m\",status=\"200\"} 5\nringside_breaker_transitions_total{provider=\"p\",to=\"open\"} 0\nringside_in_flight_requests 3\n",
        );
        let after = scrape(
            "ringside_requests_total{route=\"m\",status=\"200\"} 9\nringside_requests_total{route=\"m\",status=\"503\"} 2\nringside_breaker_transitions_total{provider=\"p\",to=\"open\"} 1\nringside_in_flight_requests 7\n",
        );
        let m = moved(&before, &after);
        assert_eq!(
            m,
            vec![
                (
                    "ringside_breaker_transitions_total{provider=\"p\",to=\"open\"}".to_string(),
                    1.0
                ),
                (
                    "ringside_requests_total{route=\"m\",status=\"503\"}".to_string(),
                    2.0
                ),
            ]
        );
    }
}

/// One operational message as it fired during a scenario: how often, and for whom.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct Logged {
    pub level: String,
    pub msg: String,
    pub count: u64,
    /// The first few `provider/connection` (or `provider`) it named, with the reason if any.
    pub subjects: Vec<String>,
}

/// The operational messages Ringside wrote (kept by `log::start_capture`), by level and
/// message, warnings first.
pub fn logged(events: &[serde_json::Value]) -> Vec<Logged> {
    let mut by: BTreeMap<(u8, String, String), Logged> = BTreeMap::new();
    for e in events {
        let level = e["level"].as_str().unwrap_or("info").to_string();
        let msg = e["msg"].as_str().unwrap_or_default().to_string();
        let rank = match level.as_str() {
            "error" => 0,
            "warn" => 1,
            _ => 2,
        };
        let entry = by
            .entry((rank, msg.clone(), level.clone()))
            .or_insert(Logged {
                level,
                msg,
                count: 0,
                subjects: Vec::new(),
            });
        entry.count += 1;
        let mut who = match (e["provider"].as_str(), e["connection"].as_str()) {
            (Some(p), Some(c)) => format!("{p}/{c}"),
            (Some(p), None) => p.to_string(),
            _ => continue,
        };
        if let Some(r) = e["reason"].as_str() {
            who = format!("{who} ({r})");
        }
        if entry.subjects.len() < 4 && !entry.subjects.contains(&who) {
            entry.subjects.push(who);
        }
    }
    by.into_values().collect()
}

#[cfg(test)]
mod logged_tests {
    use super::*;

    #[test]
    fn messages_are_counted_by_kind_warnings_first() {
        let e = |level: &str, msg: &str, conn: &str| serde_json::json!({"level": level, "msg": msg, "provider": "p", "connection": conn, "reason": "rate_limited"});
        let all = logged(&[
            e("info", "connection cooling", "a"),
            e("info", "connection cooling", "b"),
            e("info", "connection cooling", "a"),
            e("warn", "breaker opened", "a"),
        ]);
        assert_eq!(all[0].msg, "breaker opened");
        assert_eq!(all[1].count, 3);
        assert_eq!(
            all[1].subjects,
            vec![
                "p/a (rate_limited)".to_string(),
                "p/b (rate_limited)".to_string()
            ]
        );
    }
}
