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

/// The watched samples of a Prometheus text exposition, by series (name and labels).
pub fn scrape(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| WATCHED.iter().any(|w| l.starts_with(w)))
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

/// Answers that went well are traffic, not a signal.
fn is_plain_success(series: &str) -> bool {
    series.starts_with("ringside_requests_total") && series.contains("status=\"200\"")
}

#[cfg(test)]
mod tests {
    use super::*;

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
