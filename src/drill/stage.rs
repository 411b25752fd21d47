//! The operator's config made into the drill's: every provider's base URL points at the
//! simulator, every key is a made-up one (`sk-drill-…`, from the variable's name: real keys are
//! never read, never sent), the ports are free loopback ones, the data dir is a temporary one,
//! and what would reach outside (fleet mode, the admin token) is left out. What the drill needs
//! to know about the config (routes, their primary targets, connections and their caps) is kept
//! beside it.

use super::contract::Declared;
use super::env::FAR_EXPIRY;
use super::env::fake_key;
use std::net::SocketAddr;
use toml::{Table, Value};

/// One connection as the drill sees it.
#[derive(Clone, Debug)]
pub struct Key {
    pub provider: String,
    pub connection: String,
    /// The made-up key the simulator sees.
    pub key: String,
    /// The variable its `key_env` names.
    pub var: String,
    pub models: Vec<String>,
    pub max_concurrent: Option<u64>,
    /// The upstream account it belongs to, if the config says.
    pub account: Option<String>,
}

/// One route: the model clients ask for, the dialect they speak to it, its first target.
#[derive(Clone, Debug)]
pub struct Route {
    pub name: String,
    pub anthropic: bool,
    /// (provider, upstream model, connection if the target names one)
    pub primary: (String, String, Option<String>),
    /// What the config says the primary target supports.
    pub declared: Declared,
    /// Its targets speak more than one API: a fallback may be translated.
    pub crosses: bool,
}

#[derive(Clone, Debug)]
pub struct Stage {
    pub text: String,
    pub keys: Vec<Key>,
    pub routes: Vec<Route>,
    /// What every target of every route declares it supports.
    pub declared: Vec<Declared>,
    /// The variables the config names (`*_env`), and whether each is an expiry.
    pub vars: Vec<(String, bool)>,
}

impl Stage {
    /// The drill's environment: every variable the config names in a `*_env` field is a
    /// made-up key (an `expires_at_env` a time far ahead), whatever its name; nothing else is
    /// read (the `RINGSIDE_*` overrides and the budgets' variables: the drill sets its own
    /// ports and data dir).
    pub fn env(&self, var: &str) -> Option<String> {
        let (_, expiry) = self.vars.iter().find(|(v, _)| v == var)?;
        Some(if *expiry {
            FAR_EXPIRY.to_string()
        } else {
            fake_key(var)
        })
    }
}

/// Rewrite `text` (the operator's config) for a drill against the simulator at `sim`.
pub fn prepare(
    text: &str,
    sim: SocketAddr,
    ports: (u16, u16),
    data_dir: &str,
) -> Result<Stage, String> {
    let mut doc: Table = text
        .parse()
        .map_err(|e| format!("the config is not TOML: {e}"))?;
    lean_server(&mut doc, ports, data_dir)?;
    let mut keys = Vec::new();
    let mut apis = Vec::new();
    let mut regions = Vec::new();
    for p in tables_mut(&mut doc, "providers") {
        let id = str_of(p, "id");
        regions.push(Declared {
            provider: id.clone(),
            region: p.get("region").and_then(Value::as_str).map(str::to_string),
            tags: Some(strings(p.get("tags"))),
            ..Default::default()
        });
        apis.push((id.clone(), api_of(&str_of(p, "dialect"))));
        let url = str_of(p, "base_url");
        // `profile = "auto"` picks the local profile for a loopback upstream: the simulator
        // is one, the real provider is not. Keep the profile the real URL gets.
        let profile = str_of(p, "profile");
        if (profile.is_empty() || profile == "auto") && !is_loopback(&url) {
            let auth = str_of(p, "auth");
            let by_auth = if auth == "oauth" { "oauth" } else { "api_key" };
            p.insert("profile".into(), by_auth.into());
        }
        p.insert("base_url".into(), point_at(&url, sim).into());
        for c in tables_mut(p, "connections") {
            let models = strings(c.get("models"));
            keys.push(Key {
                provider: id.clone(),
                connection: str_of(c, "id"),
                key: fake_key(&str_of(c, "key_env")),
                var: str_of(c, "key_env"),
                models,
                // (0: no cap.)
                max_concurrent: c
                    .get("max_concurrent")
                    .and_then(Value::as_integer)
                    .filter(|&n| n > 0)
                    .map(|n| n as u64),
                account: c.get("account").and_then(Value::as_str).map(str::to_string),
            });
        }
    }
    let (routes, declared) = routes_of(&mut doc, &keys, &apis, &regions);
    if routes.is_empty() {
        return Err("the config has no route and no connection serving a model".into());
    }
    let text =
        toml::to_string(&doc).map_err(|e| format!("cannot write the drill's config: {e}"))?;
    let mut vars = Vec::new();
    super::env::named_vars(&doc, &mut vars);
    Ok(Stage {
        text,
        keys,
        routes,
        declared,
        vars,
    })
}

/// The server section for the drill: loopback ports, a temporary data dir, no log, no token,
/// no fleet, no client keys (the drill runs open and alone).
fn lean_server(doc: &mut Table, ports: (u16, u16), data_dir: &str) -> Result<(), String> {
    doc.remove("fleet");
    doc.remove("clients");
    let server = doc
        .entry("server")
        .or_insert_with(|| Value::Table(Table::new()));
    let server = server.as_table_mut().ok_or("[server] is not a table")?;
    for k in [
        "admin_token_env",
        "admin_unauthenticated_ok",
        "admin_hosts",
        "trusted_proxies",
    ] {
        server.remove(k);
    }
    let set = |t: &mut Table, k: &str, v: Value| {
        t.insert(k.to_string(), v);
    };
    set(server, "listen", format!("127.0.0.1:{}", ports.0).into());
    set(
        server,
        "admin_listen",
        format!("127.0.0.1:{}", ports.1).into(),
    );
    set(server, "data_dir", data_dir.into());
    set(server, "access_log", false.into());
    set(server, "pin_workers", false.into());
    set(server, "workers", 2.into());
    set(server, "drain_delay_ms", 0.into());
    Ok(())
}

/// An array of strings (absent or of other types: empty).
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// What a route's target declares it supports, the provider's region and tags where the
/// target does not set its own.
fn declared(target: &Table, providers: &[Declared]) -> Declared {
    let provider = str_of(target, "provider");
    let p = providers.iter().find(|p| p.provider == provider);
    Declared {
        model: str_of(target, "model"),
        tools: target.get("tools").and_then(Value::as_bool),
        structured_output: target.get("structured_output").and_then(Value::as_bool),
        region: (target
            .get("region")
            .and_then(Value::as_str)
            .map(str::to_string))
        .or_else(|| p.and_then(|p| p.region.clone())),
        tags: Some(match target.get("tags") {
            Some(t) => strings(Some(t)),
            None => p.and_then(|p| p.tags.clone()).unwrap_or_default(),
        }),
        provider,
    }
}

/// The routes clients can ask for (the declared ones, else one per model a connection serves)
/// and what each target declares.
fn routes_of(
    doc: &mut Table,
    keys: &[Key],
    apis: &[(String, &'static str)],
    providers: &[Declared],
) -> (Vec<Route>, Vec<Declared>) {
    let api = |p: &str| apis.iter().find(|(id, _)| id == p).map(|(_, a)| *a);
    let anthropic = |p: &str| api(p) == Some("anthropic");
    let mut routes = Vec::new();
    let mut all = Vec::new();
    for r in tables_mut(doc, "routes") {
        let targets = r
            .get("targets")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        all.extend(
            targets
                .iter()
                .filter_map(Value::as_table)
                .map(|t| declared(t, providers)),
        );
        let Some(first) = targets.first().and_then(Value::as_table) else {
            continue;
        };
        let provider = str_of(first, "provider");
        let crosses = targets
            .iter()
            .filter_map(Value::as_table)
            .any(|t| api(&str_of(t, "provider")) != api(&provider));
        routes.push(Route {
            name: str_of(r, "name"),
            anthropic: anthropic(&provider),
            primary: (
                provider,
                str_of(first, "model"),
                first
                    .get("connection")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            ),
            declared: declared(first, providers),
            crosses,
        });
    }
    if routes.is_empty() {
        for k in keys {
            for m in &k.models {
                if !routes.iter().any(|r: &Route| &r.name == m) {
                    let mut target = Table::new();
                    target.insert("provider".into(), k.provider.clone().into());
                    target.insert("model".into(), m.clone().into());
                    routes.push(Route {
                        name: m.clone(),
                        anthropic: anthropic(&k.provider),
                        primary: (k.provider.clone(), m.clone(), None),
                        declared: declared(&target, providers),
                        crosses: false,
                    });
                    all.push(declared(&target, providers));
                }
            }
        }
    }
    (routes, all)
}

/// The API a provider's dialect speaks (Azure OpenAI speaks OpenAI's).
fn api_of(dialect: &str) -> &'static str {
    match dialect {
        "anthropic" => "anthropic",
        "gemini" => "gemini",
        _ => "openai",
    }
}

/// `https://api.openai.com/v1` → `http://127.0.0.1:PORT/v1` (the path is kept).
fn point_at(url: &str, sim: SocketAddr) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    format!("http://{sim}{path}")
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', ':']).next().unwrap_or("");
    host == "localhost" || host.starts_with("127.") || rest.starts_with("[::1]")
}

fn str_of(t: &Table, k: &str) -> String {
    t.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn tables_mut<'a>(t: &'a mut Table, k: &str) -> impl Iterator<Item = &'a mut Table> {
    t.get_mut(k)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut().filter_map(Value::as_table_mut))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[server]
listen = "0.0.0.0:8080"
admin_token_env = "TOKEN"
[fleet]
redis_url = "redis://prod:6379"
[[providers]]
id = "openai"
dialect = "openai"
base_url = "https://api.openai.com/v1"
  [[providers.connections]]
  id = "key-a"
  key_env = "OPENAI_KEY_A"
  models = ["gpt-4o"]
  max_concurrent = 4
[[routes]]
name = "smart"
targets = [{ provider = "openai", model = "gpt-4o" }]
"#;

    #[test]
    fn real_keys_and_remote_addresses_are_left_out() {
        let sim: SocketAddr = "127.0.0.1:9999"
            .parse()
            .unwrap_or(([127, 0, 0, 1], 9).into());
        let s = prepare(CONFIG, sim, (1, 2), "/tmp/d").unwrap_or_else(|e| panic!("{e}"));
        assert!(s.text.contains("http://127.0.0.1:9999/v1"), "{}", s.text);
        assert!(
            s.text.contains("profile = \"api_key\""),
            "the real URL's profile: {}",
            s.text
        );
        assert!(
            is_loopback("http://127.0.0.1:8000/v1") && !is_loopback("https://api.openai.com/v1")
        );
        assert!(!s.text.contains("redis") && !s.text.contains("TOKEN"));
        assert!(s.text.contains("127.0.0.1:1") && !s.text.contains("0.0.0.0"));
        assert_eq!(s.keys[0].key, "sk-drill-openai_key_a");
        assert_eq!(s.keys[0].max_concurrent, Some(4));
        assert_eq!(s.routes[0].name, "smart");
        assert_eq!(
            s.env("OPENAI_KEY_A").as_deref(),
            Some("sk-drill-openai_key_a")
        );
        assert_eq!(s.env("RINGSIDE_LISTEN"), None);
        // A key whose variable starts with RINGSIDE_ is a key like any other.
        let named = CONFIG.replace("OPENAI_KEY_A", "RINGSIDE_OPENAI_KEY");
        let s = prepare(&named, sim, (1, 2), "/tmp/d").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s.env("RINGSIDE_OPENAI_KEY").as_deref(),
            Some("sk-drill-ringside_openai_key")
        );
    }
}
