//! OAuth connections that stay signed in: the refresh token and expiry from the environment
//! (never the file), the token endpoint and client id; and the key that seals refreshed tokens
//! in the store.

use super::super::problems::Problems;
use super::super::schema::ConnectionSection;
use super::super::*;
use super::providers::parse_base_url;

/// Anthropic's token endpoint and Claude Code's public client id: what a Claude subscription's
/// tokens are refreshed with unless the connection says otherwise.
pub const ANTHROPIC_TOKEN_URL: &str = "https://console.anthropic.com/v1/oauth/token";
pub const CLAUDE_CODE_CLIENT_ID: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";

/// The connection's refresh settings, or `None` when it has no refresh token.
pub(super) fn refresh(
    p: &mut Problems,
    cat: &str,
    cs: &ConnectionSection,
    env: EnvLookup,
    auth: AuthKind,
) -> Option<Box<OAuthRefresh>> {
    let named = cs.refresh_token_env.is_some()
        || cs.expires_at_env.is_some()
        || cs.token_url.is_some()
        || cs.client_id.is_some();
    if auth != AuthKind::OAuth {
        if named {
            p.add(
                cat.to_string(),
                "refresh_token_env, expires_at_env, token_url and client_id are for auth = \"oauth\"",
            );
        }
        return None;
    }
    let Some(name) = cs.refresh_token_env.as_deref() else {
        if named {
            p.add(
                cat.to_string(),
                "expires_at_env, token_url and client_id need refresh_token_env",
            );
        }
        return None;
    };
    let refresh = p.secret_env(&format!("{cat}.refresh_token_env"), name, env)?;
    let url = cs.token_url.as_deref().unwrap_or(ANTHROPIC_TOKEN_URL);
    let token_url = match parse_base_url(url) {
        Ok(e) => e,
        Err(e) => {
            p.add(format!("{cat}.token_url"), format!("`{url}` {e}"));
            return None;
        }
    };
    let client_id = cs.client_id.clone().unwrap_or(CLAUDE_CODE_CLIENT_ID.into());
    if client_id.is_empty() || !client_id.bytes().all(|b| b.is_ascii_graphic()) {
        p.add(format!("{cat}.client_id"), "visible ASCII, not empty");
    }
    let expires_at_ms = cs.expires_at_env.as_deref().and_then(|n| {
        let v = env(n).filter(|v| !v.is_empty());
        let ms = v.as_deref().and_then(|v| v.trim().parse::<u64>().ok());
        if ms.is_none() {
            p.add(
                format!("{cat}.expires_at_env"),
                format!("environment variable {n} must hold a Unix time (s or ms)"),
            );
        }
        // Seconds, or milliseconds: no expiry in seconds is past the year 33658.
        ms.map(|t| if t < 1_000_000_000_000 { t * 1_000 } else { t })
    });
    Some(Box::new(OAuthRefresh {
        refresh,
        token_url,
        client_id,
        expires_at_ms,
    }))
}

/// The key that seals refreshed tokens, if `[store] token_key_env` names one.
pub(super) fn token_key(p: &mut Problems, name: Option<&str>, env: EnvLookup) -> Option<Secret> {
    let key = p.secret_env("store.token_key_env", name?, env)?;
    if key.expose().len() < 16 {
        p.add(
            "store.token_key_env",
            "the token key needs at least 16 characters",
        );
        return None;
    }
    Some(key)
}
