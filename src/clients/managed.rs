//! Client keys created through the admin API. The key is returned once and stored only as its
//! SHA-256 (`clientkey/<hex>` holds the client, `client/<id>` points at the digest).

use super::{Client, Clients, Scope, digest, hex, tenant_id};
use crate::names::conn_by_label;
use crate::store::Store;
use base64::Engine;
use serde_json::{Value, json};

fn scope_name(s: Scope) -> &'static str {
    match s {
        Scope::Inference => "inference",
        Scope::LeaseExclusive => "lease:exclusive",
        Scope::Admin => "admin",
        Scope::Overrides => "overrides",
    }
}

/// Whether any managed key exists (the store is scanned; used at start and after changes).
pub fn any(store: &Store) -> bool {
    !store.scan("clientkey/").is_empty()
}

/// The managed client for a key digest, if any.
pub fn lookup(store: &Store, d: &[u8; 32], labels: &[(String, String)]) -> Option<Client> {
    let v = store.get(&format!("clientkey/{}", hex(d)))?;
    from_json(&v, labels)
}

fn from_json(v: &Value, labels: &[(String, String)]) -> Option<Client> {
    let id = v["id"].as_str()?.to_string();
    let scopes = v["scopes"]
        .as_array()?
        .iter()
        .filter_map(|s| Scope::parse(s.as_str()?))
        .collect();
    let allowed = v["allowed_connections"].as_array().map(|list| {
        list.iter()
            .filter_map(|n| conn_by_label(labels, n.as_str()?))
            .collect()
    });
    Some(Client {
        tenant: tenant_id(v["tenant"].as_str().unwrap_or(&id)),
        priority: v["priority"].as_u64().unwrap_or(5).min(9) as u8,
        coalesce_events: crate::sse::Coalesce::from_json(&v["coalesce_events"]),
        id,
        scopes,
        allowed,
    })
}

/// Create a key. Returns the client JSON (with the key, shown this once) or a problem.
pub fn create(
    store: &Store,
    config: &Clients,
    body: &[u8],
    labels: &[(String, String)],
) -> Result<Value, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let id = check_settings(&v)?;
    if config.list.iter().any(|c| c.id == id) || store.get(&format!("client/{id}")).is_some() {
        return Err(format!("a client `{id}` already exists"));
    }
    let scopes: Vec<&str> = match v.get("scopes") {
        None => vec!["inference"],
        Some(s) => s
            .as_array()
            .ok_or("`scopes` must be a list")?
            .iter()
            .map(|x| {
                x.as_str()
                    .filter(|x| Scope::parse(x).is_some())
                    .ok_or("unknown scope")
            })
            .collect::<Result<_, _>>()?,
    };
    if let Some(list) = v.get("allowed_connections") {
        for n in list
            .as_array()
            .ok_or("`allowed_connections` must be a list")?
        {
            let ok = n.as_str().and_then(|n| conn_by_label(labels, n)).is_some();
            if !ok {
                return Err(format!("no connection {n} (write provider/connection)"));
            }
        }
    }
    let mut raw = [0u8; 32];
    rand::Rng::fill(&mut rand::thread_rng(), &mut raw);
    let key = format!(
        "rsk_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    );
    let d = digest(key.as_bytes());
    let stored = json!({
        "id": id,
        "scopes": scopes,
        "allowed_connections": v.get("allowed_connections"),
        "tenant": v.get("tenant"),
        "priority": v.get("priority"),
        "coalesce_events": v.get("coalesce_events"),
        // Created by an authenticated admin (keys from before admin changes needed one lack
        // this, and are listed as such at start).
        "authenticated": true,
    });
    store.put(format!("clientkey/{}", hex(&d)), stored.clone());
    store.put(format!("client/{id}"), json!({"digest": hex(&d)}));
    store.flush();
    let mut out = stored;
    out["key"] = json!(key);
    Ok(out)
}

/// The client's id, if its settings follow the admin API's rules (the same rules hold for a
/// key another instance of the fleet made).
fn check_settings(v: &Value) -> Result<&str, String> {
    let id = v["id"]
        .as_str()
        .filter(|s| crate::names::valid_id(s))
        .ok_or("`id` is required: 1-64 letters, digits, `_`, `-` or `.`")?;
    let present = |name: &str| v.get(name).filter(|x| !x.is_null());
    if let Some(t) = present("tenant")
        && !t.as_str().is_some_and(crate::names::valid_id)
    {
        return Err("`tenant` must be 1-64 letters, digits, `_`, `-` or `.`".into());
    }
    if let Some(p) = present("priority")
        && p.as_u64().is_none_or(|p| p > 9)
    {
        return Err("`priority` must be a whole number from 0 to 9".into());
    }
    if present("coalesce_events").is_some_and(|c| crate::sse::Coalesce::from_json(c).is_none()) {
        let spellings = crate::sse::COALESCE_SPELLINGS;
        return Err(format!("`coalesce_events` must be {spellings}"));
    }
    Ok(id)
}

/// Whether a shared entry another instance of the fleet wrote (`clientkey/<digest>`,
/// `client/<id>`; `None`: deleted) is one this instance's admin API could have written.
pub fn valid_entry(key: &str, value: Option<&Value>) -> bool {
    let hex64 = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some(d) = key.strip_prefix("clientkey/") {
        return hex64(d) && value.is_none_or(valid_client);
    }
    if let Some(id) = key.strip_prefix("client/") {
        return crate::names::valid_id(id)
            && value.is_none_or(|v| {
                v["digest"].as_str().is_some_and(hex64)
                    && v.as_object().is_some_and(|o| o.len() == 1)
            });
    }
    false
}

fn valid_client(v: &Value) -> bool {
    let scopes_ok = v["scopes"].as_array().is_some_and(|list| {
        !list.is_empty()
            && list
                .iter()
                .all(|s| s.as_str().and_then(Scope::parse).is_some())
    });
    let connections_ok = match &v["allowed_connections"] {
        Value::Null => true,
        Value::Array(list) => list.iter().all(|n| {
            n.as_str()
                .and_then(|l| l.split_once('/'))
                .is_some_and(|(p, c)| crate::names::valid_id(p) && crate::names::valid_id(c))
        }),
        _ => false,
    };
    check_settings(v).is_ok() && scopes_ok && connections_ok && v.is_object()
}

/// Revoke a managed key by id.
pub fn delete(store: &Store, id: &str) -> bool {
    let Some(p) = store.get(&format!("client/{id}")) else {
        return false;
    };
    if let Some(d) = p["digest"].as_str() {
        store.delete(format!("clientkey/{d}"));
    }
    store.delete(format!("client/{id}"));
    store.flush();
    true
}

/// Managed keys created before the admin API required authentication for changes (anyone on
/// the host could have minted them): `(id, scopes)` each, for the warning at start.
pub fn minted_without_authentication(store: &Store) -> Vec<(String, Value)> {
    store
        .scan("clientkey/")
        .into_iter()
        .filter(|(_, v)| v["authenticated"] != json!(true))
        .map(|(_, v)| {
            (
                v["id"].as_str().unwrap_or("?").to_string(),
                v["scopes"].clone(),
            )
        })
        .collect()
}

/// Every client (configured and managed), never a key.
pub fn list(store: &Store, config: &Clients) -> Value {
    let mut out: Vec<Value> = config
        .list
        .iter()
        .map(|c| json!({"id": c.id, "source": "config", "scopes": c.scopes.iter().map(|s| scope_name(*s)).collect::<Vec<_>>()}))
        .collect();
    for (_, v) in store.scan("clientkey/") {
        let mut c = json!({"id": v["id"], "source": "admin", "scopes": v["scopes"], "allowed_connections": v["allowed_connections"]});
        if v["authenticated"] != json!(true) {
            c["minted_without_authentication"] = json!(true);
        }
        out.push(c);
    }
    json!({"clients": out})
}
