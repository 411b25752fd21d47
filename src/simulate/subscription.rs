//! The simulator's Claude subscription mode (fault `usage-wall`, per key): an account at its
//! five-hour usage wall, as Anthropic answers it. A request without `anthropic-usage-limit:
//! slow` gets the wall's 429 with the `anthropic-ratelimit-unified-*` headers and a slow-lane
//! offer; one with it is served on the lane, after the scripted `slot-busy` 429s and `capacity`
//! 529s. The weekly limit reset's endpoints answer as the spec has them; a granted claim lifts
//! the key's wall. Parameters:
//! `usage-wall;offer=treatment|control|none;slot-busy=N;capacity=N;slow-retry-after=S;reset-in=S;limit-reset=RESULT`
//! (`limit-reset` absent: the reset is not offered).
//!
//! OAuth: fault `expired-token` answers a key with Anthropic's expired-token 401; the token
//! endpoint (`POST …/oauth/token`) takes a refresh token the simulator issued, or one starting
//! `sim-refresh` once, and issues a new access token (good for `SimOptions::token_lifetime_s`)
//! and a new refresh token: the one presented is spent, as Anthropic rotates them.

use super::body::{Api, error_body};
use super::{FaultEntry, Selector, SimState};
use crate::http::response::HeadWriter;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The scripted wall of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WallSpec {
    /// `treatment`, `control`, or empty for no offer.
    pub offer: String,
    pub slot_busy: u64,
    pub capacity: u64,
    pub slow_retry_after: Option<u64>,
    /// Seconds from the first wall answer to the announced reset.
    pub reset_in: u64,
    /// What the reset claim answers (`reset`, `already_used`, …); `None`: not offered.
    pub limit_reset: Option<String>,
}

impl Default for WallSpec {
    fn default() -> Self {
        WallSpec {
            offer: "treatment".into(),
            slot_busy: 0,
            capacity: 0,
            slow_retry_after: None,
            reset_in: 3_600,
            limit_reset: None,
        }
    }
}

impl WallSpec {
    /// Take one `key=value` of the fault spec; `Ok(false)` when it is not the wall's.
    pub fn param(&mut self, k: &str, v: &str) -> Result<bool, String> {
        let num = || {
            v.parse::<u64>()
                .map_err(|_| format!("`{k}` needs a number, got `{v}`"))
        };
        match k {
            "offer" => self.offer = if v == "none" { String::new() } else { v.into() },
            "slot-busy" => self.slot_busy = num()?,
            "capacity" => self.capacity = num()?,
            "slow-retry-after" => self.slow_retry_after = Some(num()?),
            "reset-in" => self.reset_in = num()?,
            "limit-reset" => self.limit_reset = Some(v.into()),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// What the simulator remembers of each key's wall, and the OAuth tokens it issued.
#[derive(Default)]
pub struct Accounts(Mutex<HashMap<String, Account>>, Mutex<Issued>);

/// OAuth tokens the simulator issued.
#[derive(Default)]
struct Issued {
    /// Access token → its expiry (Unix s).
    access: HashMap<String, u64>,
    /// Refresh tokens not spent yet (issued), and those spent (any).
    refresh: std::collections::HashSet<String>,
    spent: std::collections::HashSet<String>,
    calls: u64,
    granted: u64,
}

/// Anthropic's words for an expired OAuth access token.
pub const EXPIRED_TOKEN: &str =
    "OAuth token has expired. Please obtain a new token or refresh your existing token.";

#[derive(Default)]
struct Account {
    /// Epoch seconds of the announced reset, fixed at the first wall answer.
    reset_at: u64,
    lane_sends: u64,
    lifted: bool,
    claims: u64,
}

fn unix_s() -> u64 {
    crate::clock::unix_ms() / 1_000
}

const UNIFIED: &str = "anthropic-ratelimit-unified-";

/// How a request of a key at the wall is answered.
pub(super) enum WallAnswer {
    /// A whole error answer (the wall's 429, a busy slot, capacity).
    Refused(u16, Vec<u8>),
    /// Served (on the lane): these headers go on the success.
    Served(Vec<(String, String)>),
}

impl Accounts {
    fn with<T>(&self, key: &str, f: impl FnOnce(&mut Account) -> T) -> T {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(m.entry(key.to_string()).or_default())
    }

    /// Answer one request of `key` (its wall `spec`), sent on the lane or not.
    pub(super) fn answer(&self, key: &str, spec: &WallSpec, slow: bool, keep: bool) -> WallAnswer {
        self.with(key, |a| {
            if a.lifted {
                return WallAnswer::Served(Vec::new());
            }
            if a.reset_at == 0 {
                a.reset_at = unix_s() + spec.reset_in;
            }
            let reset = a.reset_at.to_string();
            let mut h: Vec<(String, String)> = vec![
                (format!("{UNIFIED}reset"), reset.clone()),
                (format!("{UNIFIED}5h-reset"), reset),
            ];
            let lane = slow && spec.offer == "treatment";
            if !lane {
                h.push((format!("{UNIFIED}status"), "rejected".into()));
                h.push((format!("{UNIFIED}representative-claim"), "five_hour".into()));
                h.push((format!("{UNIFIED}overage-status"), "rejected".into()));
                if !spec.offer.is_empty() {
                    h.push((format!("{UNIFIED}slow-offer"), spec.offer.clone()));
                }
                return WallAnswer::Refused(429, refusal(429, &h, keep));
            }
            let n = a.lane_sends;
            a.lane_sends += 1;
            if let Some(s) = spec.slow_retry_after {
                h.push((format!("{UNIFIED}slow-retry-after"), s.to_string()));
            }
            if n < spec.slot_busy {
                h.push((format!("{UNIFIED}slow-status"), "slot_busy".into()));
                return WallAnswer::Refused(429, refusal(429, &h, keep));
            }
            h.push((format!("{UNIFIED}slow-status"), "active".into()));
            if n < spec.slot_busy + spec.capacity {
                return WallAnswer::Refused(529, refusal(529, &h, keep));
            }
            WallAnswer::Served(h)
        })
    }

    /// The OAuth token endpoint and the weekly limit reset's: `None` when `path` is not one of
    /// them.
    pub(super) fn endpoint(
        &self,
        state: &SimState,
        (method, path, key): (&str, &str, &str),
        body: &[u8],
    ) -> Option<(u16, serde_json::Value)> {
        let spec = wall_of(state, key);
        let offered = spec.as_ref().and_then(|s| s.limit_reset.clone());
        match (method, path.split('?').next().unwrap_or(path)) {
            ("POST", p) if p.ends_with("/oauth/token") => {
                Some(self.token(body, state.opts.token_lifetime_s))
            }
            ("GET", "/api/oauth/usage") => {
                let spent = self.with(key, |a| a.claims > 0);
                let available = offered.is_some() && !spent;
                Some((
                    200,
                    serde_json::json!({"juniper_tide": {
                        "eligible": offered.is_some(), "in_experiment": true,
                        "arm": if offered.is_some() { "reset" } else { "control" },
                        "available": available, "resets_per_week": 1,
                    }}),
                ))
            }
            ("GET", "/api/claude_cli/bootstrap") => Some((
                200,
                serde_json::json!({
                    "account": {"memberships": [{"organization": {"uuid": "sim-org-0001"}}]}
                }),
            )),
            ("POST", p)
                if p.starts_with("/api/organizations/") && p.ends_with("/reset_rate_limits") =>
            {
                let result = offered.unwrap_or_else(|| "ineligible".into());
                self.with(key, |a| {
                    a.claims += 1;
                    if result == "reset" {
                        a.lifted = true;
                    }
                });
                Some((200, serde_json::json!({"result": result})))
            }
            _ => None,
        }
    }

    /// The token endpoint: a refresh grant for a refresh token this simulator issued, or one
    /// starting `sim-refresh` never seen before.
    pub(super) fn token(&self, body: &[u8], lifetime_s: u64) -> (u16, serde_json::Value) {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let presented = v["refresh_token"].as_str().unwrap_or("");
        let mut t = self.1.lock().unwrap_or_else(|e| e.into_inner());
        t.calls += 1;
        let known = t.refresh.remove(presented)
            || (presented.starts_with("sim-refresh") && !t.spent.contains(presented));
        if v["grant_type"] != "refresh_token" || !known {
            let e = serde_json::json!({"error": "invalid_grant", "error_description": "Refresh token not found or invalid"});
            return (400, e);
        }
        t.spent.insert(presented.to_string());
        t.granted += 1;
        let n = t.granted;
        let access = format!("sk-ant-oat01-sim-{n}");
        let refresh = format!("sim-refresh-issued-{n}");
        t.access.insert(access.clone(), unix_s() + lifetime_s);
        t.refresh.insert(refresh.clone());
        (
            200,
            serde_json::json!({
                "token_type": "Bearer", "access_token": access, "refresh_token": refresh,
                "expires_in": lifetime_s,
            }),
        )
    }

    /// Whether `key` is an access token this simulator issued that has expired.
    pub(super) fn expired(&self, key: &str) -> bool {
        let t = self.1.lock().unwrap_or_else(|e| e.into_inner());
        t.access.get(key).is_some_and(|&at| unix_s() >= at)
    }

    /// Reset claims made per key (for `/_sim/stats`).
    pub(super) fn claims(&self) -> serde_json::Value {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let v: serde_json::Map<String, serde_json::Value> = m
            .iter()
            .map(|(k, a)| (k.clone(), serde_json::json!({"claims": a.claims, "lane_sends": a.lane_sends, "lifted": a.lifted})))
            .collect();
        let t = self.1.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::json!({"walls": v, "token_endpoint": {"calls": t.calls, "granted": t.granted}})
    }
}

/// The wall scripted for `key`, if its fault is one.
fn wall_of(state: &SimState, key: &str) -> Option<WallSpec> {
    let faults = state.faults.lock().unwrap_or_else(|e| e.into_inner());
    let found: Option<&Arc<FaultEntry>> = faults
        .iter()
        .find(|f| f.selector == Selector::Key(key.to_string()));
    found.and_then(|f| f.fault.wall.as_deref().cloned())
}

fn refusal(status: u16, headers: &[(String, String)], keep: bool) -> Vec<u8> {
    let message = if status == 429 {
        "You have reached your usage limit for this period."
    } else {
        "Overloaded"
    };
    let b = error_body(Api::Messages, status, message);
    let mut w = HeadWriter::new(status);
    w.header("content-type", "application/json")
        .header_u64("content-length", b.len() as u64);
    for (n, v) in headers {
        w.header(n, v);
    }
    if !keep {
        w.header("connection", "close");
    }
    w.finish(&b)
}
