//! `[[providers]]` and their connections: ids, dialects, base URLs, credentials from the
//! environment (never printed, refused with a control character), flow settings.

use super::super::problems::Problems;
use super::super::schema::{ConnectionSection, FileConfig, ProviderSection};
use super::super::*;
use crate::ids::ConnId;
use std::collections::HashSet;

/// Resolve every provider and its connections (flat connection indices in file order).
pub(in crate::config) fn providers(
    p: &mut Problems,
    file: &FileConfig,
    env: EnvLookup,
) -> Vec<Provider> {
    let mut providers = Vec::new();
    let mut provider_ids = HashSet::new();
    let mut index = 0usize;
    for (i, ps) in file.providers.iter().enumerate() {
        let at = format!("providers[{i}]");
        if !crate::names::valid_id(&ps.id) {
            p.add(
                format!("{at}.id"),
                format!("`{}` must be 1-64 of A-Z a-z 0-9 _ - .", ps.id),
            );
        }
        if !provider_ids.insert(ps.id.clone()) {
            p.add(
                format!("{at}.id"),
                format!("duplicate provider id `{}`", ps.id),
            );
        }
        let mut provider = provider(p, &at, ps, env, &mut index);
        super::egress::route_through(p, &at, ps, &mut provider, file.upstream.proxy_from_env, env);
        providers.push(provider);
    }
    providers
}

/// One provider at `at`; its connections take the flat indices from `index` on.
fn provider(
    p: &mut Problems,
    at: &str,
    ps: &ProviderSection,
    env: EnvLookup,
    index: &mut usize,
) -> Provider {
    let dialect = dialect_of(p, at, ps);
    let azure_api_version = azure_version(p, at, ps);
    let auth = match ps.auth.as_str() {
        "api_key" => AuthKind::ApiKey,
        "oauth" => AuthKind::OAuth,
        other => {
            p.add(
                format!("{at}.auth"),
                format!("`{other}` is not one of api_key, oauth"),
            );
            AuthKind::ApiKey
        }
    };
    let endpoint = parse_base_url(&ps.base_url).unwrap_or_else(|e| {
        // The URL is quoted without its user:password part, if it has one.
        p.add(
            format!("{at}.base_url"),
            format!("`{}` {e}", without_userinfo(&ps.base_url)),
        );
        Endpoint {
            host: "invalid".into(),
            port: 1,
            ..Endpoint::default()
        }
    });
    if ps.connections.is_empty() {
        p.add(
            format!("{at}.connections"),
            "a provider needs at least one connection",
        );
    }
    let mut conn_ids = HashSet::new();
    let mut connections = Vec::new();
    for (j, cs) in ps.connections.iter().enumerate() {
        let cat = format!("{at}.connections[{j}]");
        if !crate::names::valid_id(&cs.id) {
            p.add(
                format!("{cat}.id"),
                format!("`{}` must be 1-64 of A-Z a-z 0-9 _ - .", cs.id),
            );
        }
        if !conn_ids.insert(cs.id.clone()) {
            p.add(
                format!("{cat}.id"),
                format!("duplicate connection id `{}` in provider", cs.id),
            );
        }
        connections.push(connection(p, &cat, cs, env, (*index, dialect, auth)));
        *index += 1;
    }
    Provider {
        id: ps.id.clone(),
        dialect,
        azure_api_version,
        auth,
        endpoint,
        anthropic_version: ps
            .anthropic_version
            .clone()
            .unwrap_or_else(|| "2023-06-01".into()),
        oauth_beta: oauth_beta(p, at, ps, dialect, auth),
        connections,
        region: ps.region.clone(),
        tags: ps.tags.clone(),
        slot: 0,
        forward_headers: ps
            .forward_headers
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
    }
}

/// One connection at `cat`: its credential from the environment, weight and flow.
/// What Anthropic requires OAuth clients to send in `anthropic-beta`.
pub const DEFAULT_OAUTH_BETA: &str = "oauth-2025-04-20";

/// The `anthropic-beta` value an Anthropic OAuth provider sends: the config's, or Anthropic's
/// OAuth one. It goes into a header: visible ASCII only. Empty for every other provider.
fn oauth_beta(
    p: &mut Problems,
    at: &str,
    ps: &ProviderSection,
    dialect: Dialect,
    auth: AuthKind,
) -> String {
    if dialect != Dialect::Anthropic || auth != AuthKind::OAuth {
        if ps.oauth_beta.is_some() {
            p.add(
                format!("{at}.oauth_beta"),
                "only for dialect = \"anthropic\" with auth = \"oauth\"".to_string(),
            );
        }
        return String::new();
    }
    let v = ps
        .oauth_beta
        .as_deref()
        .unwrap_or(DEFAULT_OAUTH_BETA)
        .trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        p.add(
            format!("{at}.oauth_beta"),
            "a comma-separated list of beta names (visible ASCII)".to_string(),
        );
        return DEFAULT_OAUTH_BETA.into();
    }
    v.to_string()
}

fn connection(
    p: &mut Problems,
    cat: &str,
    cs: &ConnectionSection,
    env: EnvLookup,
    (index, dialect, auth): (usize, Dialect, AuthKind),
) -> Connection {
    let secret = p
        .secret_env(&format!("{cat}.key_env"), &cs.key_env, env)
        .unwrap_or_else(|| Secret::new(""));
    if cs.weight == 0 || cs.weight > 1_000_000 {
        p.add(
            format!("{cat}.weight"),
            format!("{} is out of range (1 to 1000000)", cs.weight),
        );
    }
    let flow = super::sections::conn_flow(p, cat, cs);
    Connection {
        id: cs.id.clone(),
        secret,
        models: cs.models.clone(),
        weight: cs.weight.max(1),
        priority: cs.priority,
        index: ConnId::new(index),
        flow,
        usage_wall: usage_wall(p, cat, cs, dialect, auth),
        oauth: super::oauth::refresh(p, cat, cs, env, auth),
        organization: cs.organization_uuid.clone(),
    }
}

/// The usage-wall opt-ins: only a Claude subscription account (Anthropic with OAuth) has a
/// usage wall, and an organization id goes into a URL path (a UUID's characters only).
fn usage_wall(
    p: &mut Problems,
    cat: &str,
    cs: &ConnectionSection,
    dialect: Dialect,
    auth: AuthKind,
) -> crate::resilience::usage_wall::lane::OptIn {
    let opt = crate::resilience::usage_wall::lane::OptIn {
        low_priority_lane: cs.low_priority_lane,
        auto_limit_reset: cs.auto_limit_reset,
    };
    let subscription = dialect == Dialect::Anthropic && auth == AuthKind::OAuth;
    if (opt.low_priority_lane || opt.auto_limit_reset) && !subscription {
        p.add(
            cat.to_string(),
            "low_priority_lane and auto_limit_reset are for Claude subscription accounts only \
             (dialect = \"anthropic\" with auth = \"oauth\")",
        );
    }
    if let Some(org) = &cs.organization_uuid
        && (org.is_empty()
            || org.len() > 64
            || !org.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    {
        p.add(
            format!("{cat}.organization_uuid"),
            "an organization id: 1-64 of A-Z a-z 0-9 -",
        );
    }
    opt
}

/// `url` with any `user:password@` in its authority replaced by `***@`.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) if !scheme.is_empty() => format!("{scheme}://***@{}", &rest[at + 1..]),
        _ => url.to_string(),
    }
}

/// Parse `http(s)://host[:port][/path]`.
pub fn parse_base_url(url: &str) -> Result<Endpoint, String> {
    // The host and path go into every upstream request head as they are.
    if url.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err("must not contain spaces or control characters".into());
    }
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err("must start with http:// or https://".into());
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err("has no host".into());
    }
    if authority.contains('@') {
        return Err("must not carry credentials (use key_env)".into());
    }
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("has an unclosed IPv6 bracket")?;
        let port = match after.strip_prefix(':') {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| format!("has a bad port `{p}`"))?,
            None if after.is_empty() => default_port,
            None => return Err("has garbage after the IPv6 address".into()),
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse::<u16>()
                    .map_err(|_| format!("has a bad port `{p}`"))?,
            ),
            None => (authority.to_string(), default_port),
        }
    };
    if host.is_empty() || port == 0 {
        return Err("has an empty host or port 0".into());
    }
    if path.contains('?') || path.contains('#') {
        return Err("must not have a query or fragment".into());
    }
    Ok(Endpoint {
        tls,
        host,
        port,
        base_path: path.trim_end_matches('/').to_string(),
        ..Endpoint::default()
    })
}

/// Every provider's `[[providers.accounts]]`, as flow limits; each key that names a limited
/// account gets its index (`ConnFlow::account`).
pub(in crate::config) fn accounts(
    p: &mut Problems,
    file: &FileConfig,
    providers: &mut [Provider],
) -> Vec<crate::flow::account::AccountLimits> {
    let mut all = Vec::new();
    for (i, (ps, pr)) in file.providers.iter().zip(providers.iter_mut()).enumerate() {
        let first = all.len();
        for (j, a) in ps.accounts.iter().enumerate() {
            let at = format!("providers[{i}].accounts[{j}]");
            if ps.accounts[..j].iter().any(|b| b.id == a.id) {
                p.add(format!("{at}.id"), format!("duplicate account `{}`", a.id));
            }
            if !ps
                .connections
                .iter()
                .any(|c| c.account.as_deref() == Some(&a.id))
            {
                p.add(
                    format!("{at}.id"),
                    format!("no connection names account `{}`", a.id),
                );
            }
            let max_concurrent = p.clamped(
                &format!("{at}.max_concurrent"),
                a.max_concurrent.into(),
                0,
                100_000,
            );
            let min_time_ms = p.clamped(&format!("{at}.min_time_ms"), a.min_time_ms, 0, 86_400_000);
            all.push(crate::flow::account::AccountLimits {
                id: a.id.clone(),
                max_concurrent: max_concurrent as u32,
                min_time_ms,
            });
        }
        for (cs, c) in ps.connections.iter().zip(pr.connections.iter_mut()) {
            c.flow.account = cs.account.as_deref().and_then(|name| {
                ps.accounts
                    .iter()
                    .position(|a| a.id == name)
                    .map(|k| first + k)
            });
        }
    }
    all
}

/// Azure's `api-version`: required for an `azure` provider (a date, `preview` or `v1`), refused
/// on any other.
fn azure_version(p: &mut Problems, at: &str, ps: &ProviderSection) -> Option<String> {
    let v = ps.api_version.as_deref();
    if ps.dialect != "azure" {
        if v.is_some() {
            p.add(
                format!("{at}.api_version"),
                "only an `azure` provider takes an api_version".to_string(),
            );
        }
        return None;
    }
    let Some(v) = v else {
        p.add(
            format!("{at}.api_version"),
            "an `azure` provider needs its api_version (such as `2024-10-21`, or `v1`)".to_string(),
        );
        return Some("v1".into());
    };
    let dated = v.len() >= 10
        && v.as_bytes()[..10].iter().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                *b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
        && v[10..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !(dated || v == "v1" || v == "preview") {
        p.add(
            format!("{at}.api_version"),
            format!("`{v}` is not a date (YYYY-MM-DD, maybe -preview), `preview` or `v1`"),
        );
    }
    Some(v.to_string())
}

/// The API family a provider speaks (`azure` is OpenAI's, at Azure's paths).
fn dialect_of(p: &mut Problems, at: &str, ps: &ProviderSection) -> Dialect {
    match ps.dialect.as_str() {
        "openai" | "azure" => Dialect::OpenAi,
        "anthropic" => Dialect::Anthropic,
        "gemini" => Dialect::Gemini,
        other => {
            p.add(
                format!("{at}.dialect"),
                format!("`{other}` is not one of openai, anthropic, gemini, azure"),
            );
            Dialect::OpenAi
        }
    }
}
