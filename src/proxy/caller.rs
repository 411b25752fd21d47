//! Who is calling, from the request head alone: the client key (configured or managed), what
//! it may do here, and browser-style requests from another origin. Decided before any byte of
//! the body is read.

use super::stop::Stop;
use crate::clients::{Auth, Scope};
use crate::dialect::Endpoint;
use crate::http::Head;
use crate::state::core::Core;
use crate::state::generation::Gen;
use std::sync::atomic::Ordering::Relaxed;

/// The key check for `head`, and the refusal it earns on `endpoint`, if any. Open when no key
/// is configured or managed.
pub(super) fn identify(
    core: &Core,
    generation: &Gen,
    head: &Head,
    endpoint: Endpoint,
) -> (Auth, Option<Stop>) {
    let shared = &*core.shared;
    let any_managed = shared.managed_keys.load(Relaxed);
    let managed = |d: &[u8; 32]| {
        if any_managed {
            crate::clients::managed::lookup(shared.store, d, &generation.conn_labels)
        } else {
            None
        }
    };
    let auth =
        generation
            .config
            .clients
            .check(crate::clients::presented(head), any_managed, managed);
    let refusal = match &auth {
        Auth::Open => None,
        // The lease endpoints answer a missing scope in their own wire format.
        Auth::Known(c) => (endpoint != Endpoint::SessionLeases && !c.has(Scope::Inference))
            .then_some(Stop::InsufficientScope),
        Auth::Missing | Auth::Unknown => Some(Stop::Unauthenticated),
    };
    (auth, refusal)
}

/// A browser page on another origin can post a form or `text/plain` body without asking first
/// (no CORS preflight), and would spend the operator's provider keys in open mode. Such a
/// request carries `Origin` and a non-JSON content type; SDKs and `curl` send no `Origin`.
pub(super) fn cross_origin_form(head: &Head) -> Option<Stop> {
    if head.method() != "POST" {
        return None;
    }
    head.get("origin")?;
    (!head.content_type_is_json()).then_some(Stop::CrossOriginForm)
}

/// DNS rebinding: a page on the attacker's name, re-pointed at this host, would reach an open
/// data port (no client keys) as same-origin and spend the operator's provider keys. Such a
/// request names the attacker's domain in `Host`. Without client keys, a `Host` must be an IP
/// literal, a local name (`localhost`, a name without a dot as containers and Kubernetes give,
/// or one under a suffix no public DNS serves: `.localhost`, `.local`, `.internal`, `.lan`,
/// `.home.arpa`, `.localdomain`, `.svc`), or a name in `server.hosts`; else 421.
pub(super) fn foreign_host(head: &Head, hosts: &[String]) -> Option<Stop> {
    let host = head.get("host")?;
    (!local_host(host) && !listed(host, hosts)).then_some(Stop::MisdirectedHost)
}

/// The name in a `Host` value, without its port and the trailing dots of a fully qualified name.
/// (Bytes, not text: a `Host` value is ASCII, and this runs for every request of an open port.)
fn host_name(host: &[u8]) -> &[u8] {
    let host = host.trim_ascii();
    let name = if let Some(rest) = host.strip_prefix(b"[") {
        rest.split(|b| *b == b']').next().unwrap_or(rest)
    } else {
        match host.iter().rposition(|b| *b == b':') {
            Some(i) if host[i + 1..].iter().all(u8::is_ascii_digit) => &host[..i],
            _ => host,
        }
    };
    &name[..name.iter().rposition(|b| *b != b'.').map_or(0, |i| i + 1)]
}

/// An IP literal or a name no public DNS resolves.
pub(super) fn local_host(host: &[u8]) -> bool {
    let name = host_name(host);
    if name.is_empty() {
        return false;
    }
    // IP literals first (the common case): digits and dots (no public DNS name is digits and
    // dots alone, and a browser takes such a host for an address), or an IPv6 literal.
    if name.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
        return true;
    }
    if name.contains(&b':') {
        return std::str::from_utf8(name).is_ok_and(|n| n.parse::<std::net::Ipv6Addr>().is_ok());
    }
    if !name.contains(&b'.') {
        return true; // localhost, a container's or a Kubernetes service's short name
    }
    const LOCAL: [&[u8]; 7] = [
        b".localhost",
        b".local",
        b".internal",
        b".lan",
        b".home.arpa",
        b".localdomain",
        b".svc",
    ];
    LOCAL.iter().any(|s| ends_with_ignoring_case(name, s))
}

fn ends_with_ignoring_case(name: &[u8], suffix: &[u8]) -> bool {
    name.len() >= suffix.len() && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// Whether `host` is named in `server.hosts` (lower case; `*.x` covers x's subdomains).
fn listed(host: &[u8], hosts: &[String]) -> bool {
    let name = host_name(host);
    hosts.iter().any(|h| match h.strip_prefix("*.") {
        // A proper subdomain: at least one label, then a dot, then the domain.
        Some(domain) => {
            name.len() > domain.len() + 1
                && ends_with_ignoring_case(name, domain.as_bytes())
                && name[name.len() - domain.len() - 1] == b'.'
        }
        None => name.eq_ignore_ascii_case(h.as_bytes()),
    })
}

#[cfg(test)]
mod tests {
    use super::{listed, local_host};

    #[test]
    fn local_names_and_ip_literals_are_this_host_and_public_names_are_not() {
        for ok in [
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:8080",
            "localhost:8080",
            "ringside",
            "ringside:8080",
            "ringside.default.svc",
            "ringside.default.svc.cluster.local:8080",
            "llm.internal",
            "box.lan",
            "api.localhost",
            "localhost.:8080",
            " 10.0.0.1 ",
        ] {
            assert!(local_host(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "",
            "svc.evil.example",
            "evil.example.",
            "...",
            ":8080",
        ] {
            assert!(!local_host(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn listed_names_and_their_subdomains() {
        let hosts = vec!["llm.corp.example".to_string(), "*.ai.example".to_string()];
        assert!(listed(b"llm.corp.example:443", &hosts));
        assert!(listed(b"LLM.corp.example", &hosts));
        assert!(listed(b"eu.ai.example", &hosts));
        assert!(!listed(b"ai.example", &hosts));
        assert!(!listed(b"evilai.example", &hosts));
        assert!(!listed(b"x.llm.corp.example", &hosts));
    }
}
