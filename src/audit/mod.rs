//! The decision record of one request: every attempt (target, connection, outcome, status,
//! retry hint, decision, budget left), every wait, and what was excluded when Ringside gave up.
//! It becomes the access log line, the `x-ringside-attempts` header and an entry of the admin
//! ring of recent decisions.

mod log_line;
mod outcome;
pub mod trace;

pub use outcome::{AttemptOutcome, Decision, Outcome};
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct AttemptRecord {
    pub provider: &'static str,
    pub connection: &'static str,
    pub model: crate::names::Name,
    pub outcome: AttemptOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Classified reason of a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// What the failure was judged to say something about: `request`, `model` (the model on
    /// this key), `connection` (the key; its account's keys too for an account-wide limit) or
    /// `provider`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<&'static str>,
    /// The rule that decided (an operator's or a built-in's id; `status_default` when none
    /// matched and the status alone did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Where `retry_after_ms` came from: `retry_after_ms`, `retry_after`, `openai_reset`,
    /// `anthropic_reset`, `rate_limit_reset`, `body`, `restated`, `daily_reset`, or `rule` (a
    /// rule's fixed cooldown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint_source: Option<&'static str>,
    /// Status before a restatement rule changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restated_from: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    pub decision: Decision,
    /// Why a usage wall sent the request to the same account again (`SameAccount`):
    /// `low-priority-accepted`, `slot-busy`, `capacity-busy` or `limit-reset`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<&'static str>,
    pub attempts_left: u32,
    pub ms_left: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub ms: u64,
    /// When the attempt ended, from the request's start (microseconds): where its span sits
    /// in an exported trace (`telemetry`); not in the log, whose `ms` says its length.
    #[serde(skip)]
    pub ended_us: u64,
}

/// A candidate that was not used, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Excluded {
    pub target: String,
    pub connection: String,
    pub reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_s: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Record {
    pub request_id: String,
    pub core: usize,
    /// Static for the usual methods and endpoint paths (no allocation per request).
    pub method: crate::names::Name,
    pub path: crate::names::Name,
    /// The client key's id (never the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<crate::names::Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<crate::names::Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection: Option<&'static str>,
    pub status: u16,
    pub stream: bool,
    pub attempts: Vec<AttemptRecord>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<Excluded>,
    #[serde(skip_serializing_if = "is_zero32")]
    pub waited_ms: u32,
    /// What the latest wait for a usable key waited out (the exclusion whose end it followed,
    /// its remaining time when the wait began): a request that waited and was then served
    /// is explained as well as one given up on. Boxed: most records never wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_for: Option<Box<Excluded>>,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<u32>,
    /// (u32 like the other millisecond figures: 49 days.)
    pub total_ms: u32,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// When the request ended (Unix ms).
    pub ts_ms: u64,
    /// The lease generation the request was fenced with (never the owner value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_generation: Option<u64>,
    /// The client's retry: its attempt budget was smaller by N, the retry number its header
    /// said (`resilience.client_retry_header`) or the attempts the same request cost before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_retry: Option<u32>,
    /// Known as a retry by what it sent: the same request from the same client or session
    /// was given up on within `resilience.retry_window_ms` (`resilience::repeats`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub same_request_retry: bool,
    /// The client had a waiting stream's head and keep-alives before the answer (its status
    /// went out as an event of that stream: `stream.keepalive_ms`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub early_head: bool,
    /// What the SSE scanner saw in a streamed answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_stats: Option<StreamStats>,
    /// What the answer's `usage` said (JSON answers and streams).
    #[serde(skip_serializing_if = "Tokens::is_empty")]
    pub tokens: Tokens,
    /// What the request cost its tenant, in micro-dollars (only where a budget counts it;
    /// 32-bit, saturating at $4,294: the record lives in every held stream's task), shown in
    /// dollars as `cost_usd`.
    #[serde(
        rename = "cost_usd",
        skip_serializing_if = "is_zero32",
        serialize_with = "micro_as_usd"
    )]
    pub cost_micro_usd: u32,
    /// The request from its head to its end, in microseconds.
    pub total_us: u64,
    /// Time spent in upstream attempts, in microseconds (u32 like the three below: 71
    /// minutes at most, a longer one is kept at the most; the record lives as long as its
    /// request, so it is kept small).
    pub upstream_us: u32,
    /// Deliberate waits (queue, fleet pacing, waiting out a short cooldown), in microseconds.
    #[serde(skip_serializing_if = "is_zero32")]
    pub waits_us: u32,
    /// The delivered attempt: from sending it to the upstream's response head.
    #[serde(skip_serializing_if = "is_zero32")]
    pub head_us: u32,
    /// A stream: from the request's head to the first event with text, a tool call or
    /// reasoning sent to the client.
    #[serde(skip_serializing_if = "is_zero32")]
    pub ttft_us: u32,
    /// The W3C trace this request belongs to (`trace_id`; each attempt's span id derives from
    /// it).
    #[serde(rename = "trace_id")]
    pub trace: trace::Trace,
}

/// What the access log says about the client, besides the record.
#[derive(Default)]
pub struct LogClient<'a> {
    /// The connection's peer address.
    pub peer: Option<std::net::IpAddr>,
    /// The first `X-Forwarded-For` hop, when the peer is a trusted proxy.
    pub forwarded_for: Option<std::net::IpAddr>,
    /// The `User-Agent` header (escaped as JSON; never reaches a response).
    pub user_agent: Option<&'a str>,
}

/// Token counts an upstream reported (any may be missing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion: Option<u32>,
    /// Prompt tokens served from the provider's cache (also counted in `prompt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached: Option<u32>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct StreamStats {
    pub events: u64,
    pub text_bytes: u64,
    pub terminal: bool,
}

fn is_zero32(v: &u32) -> bool {
    *v == 0
}

fn micro_as_usd<S: serde::Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(f64::from(*v) / 1e6)
}

/// Microseconds of a duration, as a record keeps them (at most 71 minutes).
pub fn micros32(d: std::time::Duration) -> u32 {
    d.as_micros().min(u128::from(u32::MAX)) as u32
}

impl Tokens {
    pub fn is_empty(&self) -> bool {
        *self == Tokens::default()
    }
}

impl Record {
    /// A first-try success with nothing to explain: no retry, wait, exclusion, restatement,
    /// error status or failure. Such records go to the small ring (`runtime::decisions`).
    pub fn is_plain(&self) -> bool {
        self.outcome == Outcome::Ok
            && self.status < 400
            && self.attempts.len() <= 1
            && self
                .attempts
                .iter()
                .all(|a| a.outcome == AttemptOutcome::Ok && a.restated_from.is_none())
            && self.waited_ms == 0
            && self.excluded.is_empty()
            && self.error_code.is_none()
    }

    /// The access-log line: `kind` and `time` (RFC 3339, milliseconds, UTC) first, the
    /// record (its client key's id as `client_key`), then what the connection and the head say
    /// about the client (`log_line`: written by hand, about a tenth of what serde cost).
    pub fn write_log_line(&self, out: &mut Vec<u8>, client: &LogClient<'_>) {
        log_line::write(self, client, out);
    }

    /// `x-ringside-attempts`: the count, then one `provider/connection status reason decision`
    /// per attempt (`;`-separated, ASCII, at most ~900 bytes).
    pub fn attempts_header(&self, current: Option<(&str, u16)>) -> String {
        let n = self.attempts.len() + usize::from(current.is_some());
        // One buffer written by hand: `write!` cost ~700 instructions per request (callgrind).
        let mut out = String::with_capacity(64 * n.max(1));
        push_num(&mut out, n as u64);
        for a in &self.attempts {
            if out.len() > 800 {
                out.push_str("; ...");
                return out;
            }
            out.push_str("; ");
            push_clean(&mut out, a.provider);
            out.push('/');
            push_clean(&mut out, a.connection);
            out.push(' ');
            match a.status {
                Some(s) => push_num(&mut out, u64::from(s)),
                None => out.push('-'),
            }
            out.push(' ');
            push_clean(&mut out, a.reason.unwrap_or(a.outcome.as_str()));
            out.push(' ');
            out.push_str(a.decision.as_str());
            if let Some(via) = a.via {
                out.push_str(" via ");
                out.push_str(via);
            }
        }
        if let Some((label, status)) = current {
            out.push_str("; ");
            push_clean(&mut out, label);
            out.push(' ');
            push_num(&mut out, u64::from(status));
            out.push_str(" ok deliver");
        }
        out
    }
}

/// A header value may only carry visible ASCII and spaces: anything else is dropped.
fn push_clean(out: &mut String, s: &str) {
    if s.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        out.push_str(s);
    } else {
        out.extend(s.chars().filter(|c| *c == ' ' || c.is_ascii_graphic()));
    }
}

fn push_num(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_header_lists_each_decision() {
        let mut r = Record::default();
        assert_eq!(
            r.attempts_header(Some(("p/a", 200))),
            "1; p/a 200 ok deliver"
        );
        r.attempts.push(AttemptRecord {
            provider: "p",
            connection: "a",
            status: Some(429),
            reason: Some("rate_limited"),
            decision: Decision::Next,
            ..Default::default()
        });
        assert_eq!(
            r.attempts_header(Some(("p/b", 200))),
            "2; p/a 429 rate_limited next; p/b 200 ok deliver"
        );
        // A send to the same account names why.
        let mut lane = Record::default();
        lane.attempts.push(AttemptRecord {
            provider: "c",
            connection: "seat",
            status: Some(429),
            reason: Some("rate_limited"),
            decision: Decision::SameAccount,
            via: Some("low-priority-accepted"),
            ..Default::default()
        });
        assert_eq!(
            lane.attempts_header(Some(("c/seat", 200))),
            "2; c/seat 429 rate_limited same_account via low-priority-accepted; c/seat 200 ok deliver"
        );
        // Control characters and non-ASCII never reach the header.
        assert_eq!(
            r.attempts_header(Some(("p/\u{e9}b\n", 503))),
            "2; p/a 429 rate_limited next; p/b 503 ok deliver"
        );
        r.attempts.push(AttemptRecord {
            provider: "p",
            connection: "c",
            status: None,
            outcome: AttemptOutcome::Timeout,
            decision: Decision::Fail,
            ..Default::default()
        });
        assert_eq!(
            r.attempts_header(None),
            "2; p/a 429 rate_limited next; p/c - timeout fail"
        );
    }
}
