//! Where a provider lives and how its requests name it: the endpoint its `base_url`, egress
//! and TLS settings resolve to, and which HTTP version its connections speak.

use super::{Egress, ProviderTls};

/// Where a provider lives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash, e.g. "/v1" or "".
    pub base_path: String,
    /// The egress proxy its connections tunnel through, if any.
    pub via: Option<Egress>,
    /// The provider's own TLS settings, if any.
    pub own_tls: Option<std::sync::Arc<ProviderTls>>,
    /// Whether its connections speak HTTP/2 (`http2`).
    pub http2: Http2,
}

/// Append `host`, an IPv6 address in brackets.
fn push_host(host: &str, out: &mut Vec<u8>) {
    let bracket = host.contains(':');
    if bracket {
        out.push(b'[');
    }
    out.extend_from_slice(host.as_bytes());
    if bracket {
        out.push(b']');
    }
}

/// A provider's `http2` setting: which protocol its connections speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Http2 {
    /// HTTP/2 where the provider's TLS handshake (ALPN) chooses it, else HTTP/1.1; plaintext
    /// providers are reached over HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/2 only: over TLS a provider that does not choose it fails the connect; over
    /// plaintext it is spoken with prior knowledge (h2c).
    Always,
    /// HTTP/1.1 only.
    Never,
}

impl Endpoint {
    /// Whether its settings alone make its connections HTTP/1.1 ones (`never`, or plaintext
    /// under `auto`): one stream, one connection, one more descriptor. (Over TLS under `auto`
    /// its handshake decides.)
    pub fn set_to_http1(&self) -> bool {
        matches!(
            (self.http2, self.tls),
            (Http2::Never, _) | (Http2::Auto, false)
        )
    }

    /// Append the host, an IPv6 address in brackets.
    pub fn write_host(&self, out: &mut Vec<u8>) {
        push_host(&self.host, out);
    }

    /// The name requests carry in `Host` (`:authority`): the provider's `tls_server_name`
    /// where its `base_url` names an address (a front that routes by name, as an ingress or a
    /// cloud's private endpoint does, needs the name), else the URL's host.
    fn name(&self) -> &str {
        match &self.own_tls {
            Some(own) => own.server_name.as_deref().unwrap_or(&self.host),
            None => &self.host,
        }
    }

    /// Append the `Host` header value to an outgoing head (no allocation per request).
    pub fn write_authority(&self, out: &mut Vec<u8>) {
        push_host(self.name(), out);
        if self.port != if self.tls { 443 } else { 80 } {
            out.push(b':');
            crate::http::response::push_u64(out, u64::from(self.port));
        }
    }

    /// `Host` header value.
    pub fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        let name = self.name();
        let host = if name.contains(':') {
            format!("[{name}]")
        } else {
            name.to_string()
        };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}
