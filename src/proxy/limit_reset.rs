//! The weekly limit reset's calls to the provider, made by the request that met the wall
//! (`usage_wall::judge`); the memo around them is `resilience::usage_wall::reset`. One round
//! trip per account at a time across all cores: a request that finds one in flight waits for
//! its outcome. Each call has the spec's time limit and never outlasts the request's deadline.

use crate::config::{Connection, Provider};
use crate::resilience::usage_wall::reset::{CLAIM_TIMEOUT_MS, Offer, STATUS_TIMEOUT_MS};
use crate::resilience::usage_wall::walls::{Begin, Wall};
use crate::state::core::Core;
use crate::timer;
use crate::upstream::call::{Call, call, end_within};
use std::time::{Duration, Instant};

const STATUS_PATH: &str = "/api/oauth/usage?at_wall=1&skip_spend=1";
const BOOTSTRAP_PATH: &str = "/api/claude_cli/bootstrap";
const CLAIM_BODY: &[u8] = br#"{"program":"juniper_tide"}"#;

/// Whether the account may be retried at full speed now.
pub(super) async fn attempt(
    core: &Core,
    provider: &Provider,
    conn: &Connection,
    wall: &Wall,
    deadline: Instant,
) -> bool {
    let began = crate::clock::unix_ms();
    match wall.begin_claim(began) {
        Begin::Answered(o) => o.granted(),
        Begin::InFlight => other_claim(wall, began, deadline).await,
        Begin::Call => {
            let mut turn = Turn { wall, done: false };
            let calls = Calls {
                core,
                provider,
                conn,
                deadline,
            };
            let (offer, org, reply) = calls.run().await;
            turn.done = true;
            let now = crate::clock::unix_ms();
            let outcome = wall.claimed(|memo| {
                if let Err(o) = memo.after_status(now, offer.as_ref()) {
                    return o;
                }
                if org.is_none() {
                    return memo.no_organization(now);
                }
                let reply = reply.as_ref().map(|(s, b)| (*s, b));
                memo.after_claim(now, reply, offer.and_then(|o| o.next_available_at))
            });
            outcome.granted()
        }
    }
}

/// Releases the account's claim if the request is dropped while its calls are in flight.
struct Turn<'a> {
    wall: &'a Wall,
    done: bool,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.wall
                .claimed(|memo| memo.after_claim(crate::clock::unix_ms(), None, None));
        }
    }
}

/// Another request is making the calls: its outcome, once it is known (polled; this is a
/// once-a-week event), or no reset when the deadline comes first.
async fn other_claim(wall: &Wall, began: u64, deadline: Instant) -> bool {
    let end = deadline
        .min(crate::clock::instant() + Duration::from_millis(STATUS_TIMEOUT_MS + CLAIM_TIMEOUT_MS));
    let settled = || match wall.last_claim() {
        (false, Some((o, at))) if at >= began => Some(o.granted()),
        _ => None,
    };
    timer::poll_until(end, Duration::from_millis(50), settled)
        .await
        .unwrap_or(false)
}

/// The calls of one attempt.
struct Calls<'a> {
    core: &'a Core,
    provider: &'a Provider,
    conn: &'a Connection,
    deadline: Instant,
}

type Reply = (u16, serde_json::Value);

impl Calls<'_> {
    /// The usage status; if the reset is offered, the organization and the claim.
    async fn run(&self) -> (Option<Offer>, Option<String>, Option<Reply>) {
        let status = self.call("GET", STATUS_PATH, STATUS_TIMEOUT_MS).await;
        let offer = status
            .filter(|(s, _)| (200..300).contains(s))
            .and_then(|(_, body)| Offer::read(&body));
        if !offer.as_ref().is_some_and(Offer::offered) {
            return (offer, None, None);
        }
        let org = match &self.conn.organization {
            Some(org) => Some(org.clone()),
            None => self
                .call("GET", BOOTSTRAP_PATH, STATUS_TIMEOUT_MS)
                .await
                .filter(|(s, _)| (200..300).contains(s))
                .and_then(|(_, body)| organization_in(&body)),
        };
        let Some(org) = org else {
            return (offer, None, None);
        };
        let path = format!("/api/organizations/{org}/reset_rate_limits");
        let reply = self.call("POST", &path, CLAIM_TIMEOUT_MS).await;
        (offer, Some(org), reply)
    }

    /// One call with the account's token and Anthropic's OAuth beta (no client byte).
    async fn call(&self, method: &str, path: &str, timeout_ms: u64) -> Option<Reply> {
        // The account's live access token (refreshed at run time, or the environment's).
        let cell = self.core.shared.tokens.get(self.conn.index);
        let live = cell.and_then(|c| c.current().1);
        let token = live.as_deref().unwrap_or(self.conn.secret.expose());
        let mut headers = Vec::with_capacity(256);
        headers.extend_from_slice(b"authorization: Bearer ");
        headers.extend_from_slice(token.as_bytes());
        headers.extend_from_slice(b"\r\nanthropic-beta: ");
        headers.extend_from_slice(self.provider.oauth_beta.as_bytes());
        headers.extend_from_slice(b"\r\n");
        let c = Call {
            endpoint: &self.provider.endpoint,
            method,
            path,
            headers: &headers,
            body: if method == "POST" { CLAIM_BODY } else { b"" },
            provider: None,
        };
        let end = end_within(self.deadline, timeout_ms);
        call(&self.core.connector, &c, end).await
    }
}

/// The organization id in the bootstrap answer: the first `organization_uuid`, or the `uuid`
/// of an `organization`, anywhere in it; only an id's characters (it goes into a URL path).
fn organization_in(v: &serde_json::Value) -> Option<String> {
    let found = match v {
        serde_json::Value::Object(m) => m
            .get("organization_uuid")
            .and_then(|u| u.as_str().map(str::to_string))
            .or_else(|| {
                m.get("organization")?
                    .get("uuid")?
                    .as_str()
                    .map(str::to_string)
            })
            .or_else(|| m.values().find_map(organization_in)),
        serde_json::Value::Array(a) => a.iter().find_map(organization_in),
        _ => None,
    }?;
    let ok = !found.is_empty()
        && found.len() <= 64
        && found
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    ok.then_some(found)
}

#[cfg(test)]
mod tests {
    use super::organization_in;
    use serde_json::json;

    #[test]
    fn the_organization_is_found_in_the_bootstrap_answer_and_checked() {
        let v = json!({"account": {"memberships": [{"organization": {"uuid": "0f3a-77"}}]}});
        assert_eq!(organization_in(&v).as_deref(), Some("0f3a-77"));
        let v = json!({"oauth_account": {"organization_uuid": "abc-1"}});
        assert_eq!(organization_in(&v).as_deref(), Some("abc-1"));
        // Not an id: never put into a path.
        let v = json!({"organization_uuid": "../x?y"});
        assert_eq!(organization_in(&v), None);
        assert_eq!(organization_in(&json!({"a": 1})), None);
    }
}
