//! The lease tests' config, owners and calls (`leases.rs`, `lease_races.rs`).

use super::*;
use ringside::demo::client::Reply;
use serde_json::Value;
use std::net::SocketAddr;

pub const LEASE_A: &str = "sk-ringside-lease-a-0123456789";
pub const LEASE_B: &str = "sk-ringside-lease-b-0123456789";
pub const PLAIN: &str = "sk-ringside-plain-0123456789";

/// Keys `conns` on provider `sim`, two lease keys allowed on all of them and a plain key.
pub fn config(sim: SocketAddr, conns: &[&str], extra: &str) -> String {
    let allowed: Vec<String> = conns.iter().map(|c| format!("\"sim/{c}\"")).collect();
    let allowed = allowed.join(", ");
    let client = |id: &str, key: &str, scopes: &str, allowed: &str| {
        format!(
            "[[clients]]\nid = \"{id}\"\nkey_sha256 = \"{}\"\nscopes = [{scopes}]\n{allowed}\n",
            key_sha256(key)
        )
    };
    let lease_scopes = "\"inference\", \"lease:exclusive\"";
    let list = format!("allowed_connections = [{allowed}]");
    priority_keys(sim, conns, "")
        + extra
        + &client("lease-a", LEASE_A, lease_scopes, &list)
        + &client("lease-b", LEASE_B, lease_scopes, &list)
        + &client("plain", PLAIN, "\"inference\"", "")
}

pub fn owner(n: u8) -> String {
    format!(
        "vlo_{}",
        std::iter::repeat_n(char::from(b'A' + n), 43).collect::<String>()
    )
}

pub fn lease_call(proxy: &Proxy, key: &str, owner: Option<&str>, body: &str) -> Reply {
    let mut h = vec![("x-api-key", key), ("content-type", "application/json")];
    if let Some(o) = owner {
        h.push(("x-ringside-lease-owner", o));
    }
    proxy.post("/v1/session-leases", &h, body)
}

pub fn code(r: &Reply) -> String {
    r.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub fn chat_as(proxy: &Proxy, key: &str, owner: Option<&str>, generation: Option<&str>) -> Reply {
    let mut h = vec![("x-api-key", key), ("x-session-id", "sess-42")];
    if let Some(o) = owner {
        h.push(("x-ringside-lease-owner", o));
    }
    if let Some(g) = generation {
        h.push(("x-ringside-lease-generation", g));
    }
    let mut r = proxy.post("/v1/chat/completions", &h, &chat("m", false));
    // These keys are tenants' (no `admin` scope): they are not told which connection served
    // them. The decision record says; it stands in for the header in these tests.
    assert_eq!(r.header("x-ringside-connection"), None);
    if r.status == 200 {
        let id = r.header("x-request-id").unwrap_or_default().to_string();
        if let Some(c) = proxy.decision(&id)["connection"].as_str() {
            r.headers
                .push(("x-ringside-connection".to_string(), c.to_string()));
        }
    }
    r
}

pub fn total_attempts(sim: &ringside::simulate::Simulator) -> u64 {
    ["sk-sim-a", "sk-sim-b", "sk-sim-c"]
        .iter()
        .map(|k| attempts_for(sim, k))
        .sum()
}

pub fn leases(proxy: &Proxy) -> Value {
    proxy.admin("GET", "/admin/leases").1
}
