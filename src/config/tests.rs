use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "KEY_A" => Some("sk-a".into()),
        "KEY_B" => Some("sk-b".into()),
        _ => None,
    }
}

const GOOD: &str = r#"
[server]
listen = "127.0.0.1:9100"
admin_listen = "127.0.0.1:9101"
workers = 2

[[providers]]
id = "oa"
dialect = "openai"
base_url = "http://127.0.0.1:9000/v1"
  [[providers.connections]]
  id = "a"
  key_env = "KEY_A"
  models = ["gpt-4o"]

[[routes]]
name = "smart"
targets = [{ provider = "oa", model = "gpt-4o" }]
"#;

#[test]
fn loads_a_good_config() {
    let c = load_str(GOOD, "t.toml", &env).unwrap();
    assert_eq!(c.server.workers, 2);
    assert_eq!(c.providers[0].endpoint.base_path, "/v1");
    assert_eq!(c.providers[0].endpoint.port, 9000);
    assert_eq!(c.providers[0].connections[0].secret.expose(), "sk-a");
    assert!(
        !format!("{c:?}").contains("sk-a"),
        "Debug must never show a secret"
    );
}

#[test]
fn reports_every_problem_with_its_location() {
    let bad = GOOD
        .replace("KEY_A", "MISSING_KEY")
        .replace("\"openai\"", "\"cohere\"")
        .replace("provider = \"oa\"", "provider = \"nope\"");
    let errs = load_str(&bad, "t.toml", &env).unwrap_err();
    let text: Vec<String> = errs.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|t| t.starts_with("providers[0].connections[0].key_env")
                && t.contains("MISSING_KEY")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|t| t.starts_with("providers[0].dialect")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t.starts_with("routes[0].targets[0].provider")),
        "{text:?}"
    );
}

#[test]
fn syntax_errors_name_the_line() {
    let errs = load_str("[server]\nlisten = \n", "f.toml", &env).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert!(errs[0].at.starts_with("f.toml:"), "{errs:?}");
    let errs = load_str("[server]\nlisten_typo = \"x\"\n", "f.toml", &env).unwrap_err();
    assert!(errs[0].message.contains("listen_typo"), "{errs:?}");
}

#[test]
fn base_urls() {
    let e = resolve::parse_base_url("https://api.openai.com/v1/").unwrap();
    assert_eq!(
        (e.tls, e.host.as_str(), e.port, e.base_path.as_str()),
        (true, "api.openai.com", 443, "/v1")
    );
    assert_eq!(e.authority(), "api.openai.com");
    let mut w = Vec::new();
    e.write_authority(&mut w);
    assert_eq!(w, b"api.openai.com");
    let e = resolve::parse_base_url("http://[::1]:9000").unwrap();
    assert_eq!(
        (e.host.as_str(), e.port, e.authority()),
        ("::1", 9000, "[::1]:9000".to_string())
    );
    let mut w = Vec::new();
    e.write_authority(&mut w);
    assert_eq!(w, b"[::1]:9000");
    // A private endpoint by address: requests name it by its server name, the tunnel and the
    // connection still go to the address.
    let mut e = resolve::parse_base_url("https://10.0.0.5:8443/v1").unwrap();
    e.own_tls = Some(std::sync::Arc::new(ProviderTls {
        ca_pem: None,
        client_cert_pem: None,
        client_key_pem: None,
        server_name: Some("aoai.example.com".into()),
    }));
    let (mut w, mut h) = (Vec::new(), Vec::new());
    e.write_authority(&mut w);
    e.write_host(&mut h);
    assert_eq!(
        (&w[..], &h[..]),
        (&b"aoai.example.com:8443"[..], &b"10.0.0.5"[..])
    );
    assert_eq!(e.authority(), "aoai.example.com:8443");
    assert!(resolve::parse_base_url("ftp://x").is_err());
    assert!(resolve::parse_base_url("http://user:pw@x").is_err());
    assert!(resolve::parse_base_url("http://x/v1\r\nx-evil: 1").is_err());
    assert!(resolve::parse_base_url("http://x/v 1").is_err());
    assert!(resolve::parse_base_url("http://x:99999").is_err());
}

/// The test environment with `RINGSIDE_WORKERS` set to `workers`.
fn with_workers(workers: &'static str) -> impl Fn(&str) -> Option<String> {
    move |n: &str| {
        if n == "RINGSIDE_WORKERS" {
            Some(workers.into())
        } else {
            env(n)
        }
    }
}

#[test]
fn env_overrides_win() {
    let c = load_str(GOOD, "t.toml", &with_workers("3")).unwrap();
    assert_eq!(c.server.workers, 3);
}

#[test]
fn the_example_config_in_the_repo_is_valid() {
    let text = include_str!("../../ringside.example.toml");
    let any = |n: &str| {
        n.ends_with("_KEY_A")
            .then(|| "k".to_string())
            .or_else(|| n.ends_with("_KEY_B").then(|| "k".into()))
    };
    let c = load_str(text, "ringside.example.toml", &any).unwrap();
    assert_eq!(c.providers.len(), 2);
    assert_eq!(c.routes[0].targets.len(), 2);
    // The second route falls back from Claude to GPT: across APIs.
    assert!(c.routes[1].cross_dialect && c.routes[1].targets.len() == 2);
}

#[test]
fn resilience_section_resolves_with_locations_for_problems() {
    let text = format!(
        "{GOOD}\n[resilience]\nmax_wait_ms = 5000\n[resilience.lockout]\nenabled = true\n\
         [[resilience.rules]]\nid = \"gw\"\nprovider = \"oa\"\nstatuses = [429]\nheader_markers = [\"x-kind: daily\"]\nreason = \"quota_exhausted\"\nscope = \"provider\"\ncooldown_ms = 60000\n\
         [[resilience.restate]]\nid = \"r\"\nfrom = [400]\nmarkers = [\"Out Of Juice\"]\n"
    );
    let c = load_str(&text, "t.toml", &env).unwrap();
    let s = &c.resilience;
    assert_eq!(s.max_wait_ms, 5000);
    assert!(s.lockout.enabled);
    assert_eq!(
        s.operator_rules[0].header_markers,
        [("x-kind".to_string(), "daily".to_string())]
    );
    assert_eq!(
        s.restate[0].markers,
        ["out of juice"],
        "markers are matched lower-cased"
    );
    assert_eq!(s.restate.len(), 2, "the built-in restatement stays");
    // Loopback upstreams get the local profile.
    assert_eq!(s.providers[0].kind.as_str(), "local");

    let bad = format!(
        "{GOOD}\n[[resilience.rules]]\nid = \"x\"\nprovider = \"nope\"\nreason = \"sad\"\nscope = \"planet\"\n"
    );
    let errs = load_str(&bad, "t.toml", &env).unwrap_err();
    let at: Vec<&str> = errs.iter().map(|p| p.at.as_str()).collect();
    for want in [
        "resilience.rules[0].provider",
        "resilience.rules[0].reason",
        "resilience.rules[0].scope",
        "resilience.rules[0]",
    ] {
        assert!(at.contains(&want), "{want} missing in {at:?}");
    }
    let bad = GOOD.replace(
        "dialect = \"openai\"",
        "dialect = \"openai\"\nprofile = \"fast\"",
    );
    let errs = load_str(&bad, "t.toml", &env).unwrap_err();
    assert_eq!(errs[0].at, "providers[0].profile");
    // What a plain 429 cools: the model by default, the key on request, nothing else.
    use crate::resilience::rate_limit_scope::RateLimitScope;
    let c = load_str(GOOD, "t.toml", &env).unwrap();
    assert_eq!(c.resilience.rate_limit_scope, RateLimitScope::Model);
    let key_wide = format!("{GOOD}\n[resilience]\nrate_limit_scope = \"connection\"\n");
    let c = load_str(&key_wide, "t.toml", &env).unwrap();
    assert_eq!(c.resilience.rate_limit_scope, RateLimitScope::Connection);
    let bad = format!("{GOOD}\n[resilience]\nrate_limit_scope = \"key\"\n");
    let errs = load_str(&bad, "t.toml", &env).unwrap_err();
    assert_eq!(errs[0].at, "resilience.rate_limit_scope");
}

#[test]
fn client_keys_are_validated_and_hashed() {
    let text = format!(
        "{GOOD}\n[[clients]]\nid = \"a\"\nkey_env = \"KEY_A\"\nallowed_connections = [\"oa/a\"]\n\
         [[clients]]\nid = \"b\"\nkey_sha256 = \"{}\"\nscopes = [\"inference\", \"admin\"]\n",
        "ab".repeat(32)
    );
    let c = load_str(&text, "t.toml", &env).unwrap();
    assert!(!c.clients.is_open());
    assert!(
        matches!(c.clients.check(Some(b"sk-a"), false, |_| None), crate::clients::Auth::Known(k) if k.id == "a" && k.allowed == Some(vec![ConnId::new(0)]))
    );
    assert!(
        !format!("{:?}", c.clients).contains("sk-a"),
        "only digests are kept"
    );
    let bad = format!(
        "{GOOD}\n[[clients]]\nid = \"x\"\nkey_sha256 = \"zz\"\nscopes = [\"root\"]\nallowed_connections = [\"oa/nope\"]\n[[clients]]\nid = \"x\"\n"
    );
    let errs = load_str(&bad, "t.toml", &env).unwrap_err();
    let at: Vec<&str> = errs.iter().map(|p| p.at.as_str()).collect();
    for want in [
        "clients[0].key_sha256",
        "clients[0].scopes",
        "clients[0].allowed_connections",
        "clients[1].id",
        "clients[1]",
    ] {
        assert!(at.contains(&want), "{want} missing in {at:?}");
    }
    // A lease key must say which connections it may lease.
    let lease = format!(
        "{GOOD}\n[[clients]]\nid = \"l\"\nkey_sha256 = \"{}\"\nscopes = [\"lease:exclusive\"]\n",
        "cd".repeat(32)
    );
    let errs = load_str(&lease, "t.toml", &env).unwrap_err();
    assert!(
        errs.iter()
            .any(|p| p.at == "clients[0].allowed_connections"),
        "{errs:?}"
    );
}

#[test]
fn check_never_prints_a_base_url_password_and_refuses_keys_with_line_breaks() {
    let file = r#"
[[providers]]
id = "p"
dialect = "openai"
base_url = "https://admin:hunter2secret@relay.example/v1"
  [[providers.connections]]
  id = "a"
  key_env = "K"
"#;
    let env = |n: &str| (n == "K").then(|| "sk-abc\r\nx-evil: 1".to_string());
    let problems = super::load_str(file, "t.toml", &env).expect_err("two problems");
    let text: String = problems.iter().map(|p| p.to_string()).collect();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("***@relay.example"), "{text}");
    assert!(text.contains("control character"), "{text}");
    assert!(!text.contains("sk-abc"), "{text}");
}

#[test]
fn a_bad_environment_override_is_a_problem_named_after_its_variable() {
    let Err(problems) = load_str(GOOD, "t.toml", &with_workers("abc")) else {
        panic!("a bad RINGSIDE_WORKERS was accepted");
    };
    assert!(
        problems
            .iter()
            .any(|p| p.to_string().contains("RINGSIDE_WORKERS") && p.to_string().contains("abc")),
        "{problems:?}"
    );
}

#[test]
fn an_anthropic_oauth_provider_has_its_beta_and_no_other_may_set_one() {
    let oauth = GOOD
        .replace(
            "dialect = \"openai\"",
            "dialect = \"anthropic\"\nauth = \"oauth\"",
        )
        .replace("\"gpt-4o\"", "\"claude-sonnet-4\"");
    let c = load_str(&oauth, "t.toml", &env).unwrap();
    assert_eq!(c.providers[0].oauth_beta, "oauth-2025-04-20");
    let own = oauth.replace(
        "auth = \"oauth\"",
        "auth = \"oauth\"\noauth_beta = \"oauth-2026-01-01\"",
    );
    let c = load_str(&own, "t.toml", &env).unwrap();
    assert_eq!(c.providers[0].oauth_beta, "oauth-2026-01-01");
    let bad = oauth.replace(
        "auth = \"oauth\"",
        "auth = \"oauth\"\noauth_beta = \"a\\r\\nx-evil: 1\"",
    );
    let e = load_str(&bad, "t.toml", &env).unwrap_err();
    assert!(
        e.iter().any(|p| p.to_string().contains("oauth_beta")),
        "{e:?}"
    );
    let misplaced = GOOD.replace(
        "dialect = \"openai\"",
        "dialect = \"openai\"\noauth_beta = \"x\"",
    );
    let e = load_str(&misplaced, "t.toml", &env).unwrap_err();
    assert!(
        e.iter().any(|p| p.to_string().contains("only for dialect")),
        "{e:?}"
    );
    assert_eq!(
        load_str(GOOD, "t.toml", &env).unwrap().providers[0].oauth_beta,
        ""
    );
}

#[test]
fn usage_wall_opt_ins_are_off_by_default_real_booleans_and_for_subscriptions_only() {
    let oauth = GOOD
        .replace(
            "dialect = \"openai\"",
            "dialect = \"anthropic\"\nauth = \"oauth\"",
        )
        .replace("\"gpt-4o\"", "\"claude-sonnet-4\"");
    let c = load_str(&oauth, "t.toml", &env).unwrap();
    assert!(!c.providers[0].connections[0].usage_wall.any());
    let on = oauth.replace(
        "key_env = \"KEY_A\"",
        "key_env = \"KEY_A\"\n  low_priority_lane = true\n  auto_limit_reset = true\n  organization_uuid = \"0f3a-77\"",
    );
    let c = load_str(&on, "t.toml", &env).unwrap();
    let conn = &c.providers[0].connections[0];
    assert!(conn.usage_wall.low_priority_lane && conn.usage_wall.auto_limit_reset);
    assert_eq!(conn.organization.as_deref(), Some("0f3a-77"));
    // The string "true" is not a boolean.
    let string = oauth.replace(
        "key_env = \"KEY_A\"",
        "key_env = \"KEY_A\"\n  low_priority_lane = \"true\"",
    );
    assert!(load_str(&string, "t.toml", &env).is_err());
    // An API key has no usage wall.
    let api_key = GOOD.replace(
        "key_env = \"KEY_A\"",
        "key_env = \"KEY_A\"\n  low_priority_lane = true",
    );
    let e = load_str(&api_key, "t.toml", &env).unwrap_err();
    assert!(
        e.iter()
            .any(|p| p.to_string().contains("Claude subscription")),
        "{e:?}"
    );
    // Refresh settings without a refresh token would be ignored: refused instead.
    let lone = oauth.replace(
        "key_env = \"KEY_A\"",
        "key_env = \"KEY_A\"\n  expires_at_env = \"KEY_A\"",
    );
    let e = load_str(&lone, "t.toml", &env).unwrap_err();
    assert!(
        e.iter()
            .any(|p| p.to_string().contains("need refresh_token_env")),
        "{e:?}"
    );
    // The organization goes into a URL path.
    let org = on.replace("0f3a-77", "../x");
    let e = load_str(&org, "t.toml", &env).unwrap_err();
    assert!(
        e.iter()
            .any(|p| p.to_string().contains("organization_uuid")),
        "{e:?}"
    );
}
