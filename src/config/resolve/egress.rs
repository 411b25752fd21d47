//! How a provider is reached through an enterprise's egress proxy: an HTTP `CONNECT` tunnel,
//! named per provider (`proxy`, `proxy_auth_env`) or taken from `HTTPS_PROXY` and `NO_PROXY`
//! as curl and the providers' SDKs read them (`[upstream] proxy_from_env`, on by default; for
//! `https://` providers, never for a loopback host).

use super::super::problems::Problems;
use super::super::schema::ProviderSection;
use super::super::{EnvLookup, Secret};
use base64::Engine;

/// An HTTP proxy a provider's connections tunnel through (`CONNECT host:port`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Egress {
    pub host: String,
    pub port: u16,
    /// The `Proxy-Authorization` value (`Basic …`), when the proxy asks for credentials.
    pub authorization: Option<Secret>,
    /// Where it came from, for `check` and the admin view: `config` or the variable's name.
    pub from: &'static str,
}

/// The egress proxy of provider `ps` (at `at`) whose upstream is `host` (`tls`: `https://`).
pub(in crate::config) fn egress(
    p: &mut Problems,
    at: &str,
    ps: &ProviderSection,
    (host, tls): (&str, bool),
    from_env: bool,
    env: EnvLookup,
) -> Option<Egress> {
    let auth = ps
        .proxy_auth_env
        .as_deref()
        .and_then(|name| p.secret_env(&format!("{at}.proxy_auth_env"), name, env))
        .map(|s| basic(s.expose()));
    match ps.proxy.as_deref() {
        Some("none") => None,
        Some(url) => match parse(url) {
            Ok((h, port, userinfo)) => Some(Egress {
                host: h,
                port,
                authorization: auth.or_else(|| userinfo.map(|u| basic(&u))),
                from: "config",
            }),
            Err(e) => {
                p.add(format!("{at}.proxy"), format!("`{}` {e}", redacted(url)));
                None
            }
        },
        None if from_env && tls && !loopback(host) => from_environment(p, at, host, env),
        None => None,
    }
}

/// How provider `pr` (at `at`, from section `ps`) is reached: its own TLS settings
/// (`provider_tls`), its egress proxy, and its OAuth keys' token endpoints' proxy (reached the
/// same way; their problems were said once, for the provider).
pub(in crate::config) fn route_through(
    p: &mut Problems,
    at: &str,
    ps: &ProviderSection,
    pr: &mut super::super::Provider,
    from_env: bool,
    env: EnvLookup,
) {
    let e = &pr.endpoint;
    pr.endpoint.own_tls = super::provider_tls::provider_tls(p, at, ps, e.tls);
    pr.endpoint.http2 = http2(p, at, ps);
    let e = &pr.endpoint;
    pr.endpoint.via = egress(p, at, ps, (&e.host, e.tls), from_env, env);
    for c in &mut pr.connections {
        if let Some(o) = c.oauth.as_mut() {
            let t = &o.token_url;
            let quiet = &mut Problems::default();
            o.token_url.via = egress(quiet, at, ps, (&t.host, t.tls), from_env, env);
        }
    }
}

/// The provider's `http2` setting.
fn http2(p: &mut Problems, at: &str, ps: &ProviderSection) -> super::super::Http2 {
    use super::super::Http2;
    match ps.http2.as_deref() {
        None | Some("auto") => Http2::Auto,
        Some("always") => Http2::Always,
        Some("never") => Http2::Never,
        Some(other) => {
            p.add(
                format!("{at}.http2"),
                format!("`{other}` is not one of auto, always, never"),
            );
            Http2::Auto
        }
    }
}

/// `HTTPS_PROXY` (or `https_proxy`), unless `NO_PROXY` (or `no_proxy`) names `host`.
fn from_environment(p: &mut Problems, at: &str, host: &str, env: EnvLookup) -> Option<Egress> {
    let (name, url) = ["HTTPS_PROXY", "https_proxy"]
        .into_iter()
        .find_map(|n| env(n).filter(|v| !v.trim().is_empty()).map(|v| (n, v)))?;
    let no_proxy = env("NO_PROXY")
        .or_else(|| env("no_proxy"))
        .unwrap_or_default();
    if bypassed(&no_proxy, host) {
        return None;
    }
    match parse(url.trim()) {
        Ok((h, port, userinfo)) => Some(Egress {
            host: h,
            port,
            authorization: userinfo.map(|u| basic(&u)),
            from: name,
        }),
        Err(e) => {
            p.add(
                format!("{at}.proxy"),
                format!(
                    "{name} `{}` {e} (set `proxy = \"none\"` to go direct)",
                    redacted(&url)
                ),
            );
            None
        }
    }
}

fn basic(userinfo: &str) -> Secret {
    let encoded = base64::engine::general_purpose::STANDARD.encode(userinfo);
    Secret::new(format!("Basic {encoded}"))
}

/// `[http://][user:password@]host[:port][/]`: the host, the port (80 unless given), the
/// credentials (percent-decoded).
fn parse(url: &str) -> Result<(String, u16, Option<String>), String> {
    // Without a scheme it is `http://`, as curl, Python and Go read `HTTPS_PROXY=proxy:3128`.
    let rest =
        match url.split_once("://") {
            None => url,
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some(_) => return Err(
                "must be http://host:port or host:port (a CONNECT proxy spoken to in plain HTTP)"
                    .into(),
            ),
        };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#']) {
        return Err("must be the proxy's address only, without a path".into());
    }
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(percent_decoded(u)?), h),
        None => (None, authority),
    };
    let (host, port) = match hostport.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        Some(v6) => {
            let (h, after) = v6.split_once(']').ok_or("has an unclosed `[`")?;
            (h, after.strip_prefix(':'))
        }
        None => match hostport.rsplit_once(':') {
            Some((h, port)) => (h, Some(port)),
            None => (hostport, None),
        },
    };
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("has a bad port `{p}`"))?,
        None => 80,
    };
    if host.is_empty() || port == 0 {
        return Err("has an empty host or port 0".into());
    }
    Ok((host.to_string(), port, userinfo))
}

fn percent_decoded(s: &str) -> Result<String, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = bytes.by_ref().take(2).map(char::from).collect();
            let v = u8::from_str_radix(&hex, 16).map_err(|_| "has a bad %-escape".to_string())?;
            out.push(v);
        } else {
            out.push(b);
        }
    }
    let s = String::from_utf8(out).map_err(|_| "has credentials that are not UTF-8")?;
    if s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("has a control character in its credentials".into());
    }
    Ok(s)
}

/// The URL as problems may show it: without its credentials.
fn redacted(url: &str) -> String {
    match (url.split_once("://"), url.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, host))) => format!("{scheme}://***@{host}"),
        // Without a scheme (`user:password@proxy:3128`), the credentials are hidden all the same.
        (None, Some((_, host))) => format!("***@{host}"),
        _ => url.to_string(),
    }
}

fn loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || ip_of(host).is_some_and(|ip| ip.is_loopback())
}

/// Whether `NO_PROXY` names `host`: `*`, the host itself, or a domain it is in (`example.com`
/// and `.example.com` both cover `api.example.com`); for an address, the same address or a
/// network holding it (`10.0.0.0/8`, `fd00::/8`). An entry's port is not read.
pub fn bypassed(no_proxy: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let ip = ip_of(&host);
    no_proxy.split(',').map(str::trim).any(|entry| {
        if let (Some(ip), Some((net, bits))) = (ip, entry.split_once('/')) {
            return in_network(ip, net, bits);
        }
        if let (Some(ip), Some(other)) = (ip, entry_ip(entry)) {
            return ip == other;
        }
        let entry = entry.split(':').next().unwrap_or(entry);
        let entry = entry.trim_start_matches("*.").trim_start_matches('.');
        let entry = entry.to_ascii_lowercase();
        entry == "*"
            || (!entry.is_empty() && (host == entry || host.ends_with(&format!(".{entry}"))))
    })
}

/// A host that is an address (`10.0.0.7`, `fd00::1`, `[fd00::1]`).
fn ip_of(host: &str) -> Option<std::net::IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// A `NO_PROXY` entry that is an address, perhaps with a port: `10.0.0.7`, `10.0.0.7:8443`,
/// `fd00::1`, `[fd00::1]:8443`.
fn entry_ip(entry: &str) -> Option<std::net::IpAddr> {
    if let Ok(ip) = entry.parse() {
        return Some(ip);
    }
    let bare = match entry.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => entry.rsplit_once(':')?.0,
    };
    bare.parse().ok()
}

/// `ip` within `net/bits` (CIDR, as curl and Go read `NO_PROXY=10.0.0.0/8`).
fn in_network(ip: std::net::IpAddr, net: &str, bits: &str) -> bool {
    use std::net::IpAddr;
    let (Some(net), Ok(bits)) = (ip_of(net), bits.trim().parse::<u32>()) else {
        return false;
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "egress_tests.rs"]
mod tests;
