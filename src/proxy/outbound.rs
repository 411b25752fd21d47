//! The request we send upstream: the client's headers minus hop-by-hop headers, client
//! credentials and every internal header, plus the connection's credential.

use crate::config::{AuthKind, Connection, Provider};
use crate::dialect::{Dialect, Endpoint};
use crate::http::Head;
use crate::http::head::{is_hop_by_hop, is_ringside_header, listed_in};
use crate::http::response::push_u64;
use crate::resilience::usage_wall::headers::SLOW_HEADER;
use bytes::Bytes;

/// Bodies up to this size are copied behind the head and sent in one write; larger ones go in
/// the same system call as the head without being copied (a vectored write, [`HeadAndBody`]).
/// Measured: copying a 32 KB body was about 5% of the proxy's CPU for such a request.
const COALESCE_BODY: usize = 4 * 1024;

/// Headers a client may send that must never reach a provider.
fn is_dropped(name: &str) -> bool {
    // By length first (every client header passes through here): most names have no dropped
    // name of their length to compare with.
    let candidates: &[&str] = match name.len() {
        4 => &["host"],
        6 => &["cookie", "expect"],
        7 => &["api-key"],
        9 => &["x-api-key"],
        // Replaced by Ringside's own hop (`audit::trace`).
        11 => &["traceparent"],
        12 => &["x-request-id", "x-session-id"],
        13 => &["authorization"],
        14 => &["content-length"],
        // We must read error bodies and SSE ourselves: ask for identity encoding.
        15 => &["accept-encoding"],
        18 => &["x-codex-session-id"],
        _ => &[],
    };
    candidates.iter().any(|d| d.eq_ignore_ascii_case(name))
        || is_hop_by_hop(name)
        || is_ringside_header(name)
}

/// Query parameters that carry credentials (some APIs take `?key=`): never forwarded. A name
/// is compared as the upstream would read it: percent-decoded, in lower case, with `-` and `_`
/// alike (`%6bey`, `X_API_KEY`, `access-token`). Besides these names, any name ending in
/// `key`, `token`, `secret` or `password` (`subscription_key`, `id_token`) is taken for a
/// credential. Every other parameter (`api-version`, `beta`, ...) goes upstream as the client
/// wrote it.
pub const CREDENTIAL_PARAMS: &[&str] = &[
    "key",
    "apikey",
    "auth",
    "authorization",
    "token",
    "password",
    "passwd",
    "pwd",
    "secret",
    "client_secret",
    "signature",
    "sig",
    "credential",
    "credentials",
    "session",
    "sessionid",
];

/// The suffixes of a normalised name that make it a credential.
const CREDENTIAL_SUFFIXES: &[&str] = &["key", "token", "secret", "password"];

/// A parameter name as an upstream reads it: percent-decoded (ASCII), lower case, `-` as `_`.
fn normalised(name: &str) -> String {
    let bytes = name.as_bytes();
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(name.get(i + 1..i + 3).unwrap_or(""), 16) {
                    Ok(d) => {
                        i += 2;
                        d
                    }
                    Err(_) => b'%',
                }
            }
            b'+' => b' ',
            b => b,
        };
        out.push(match b.to_ascii_lowercase() {
            b'-' => '_',
            c if c.is_ascii() => char::from(c),
            _ => '?',
        });
        i += 1;
    }
    out
}

/// Whether a query parameter's name carries a credential.
pub fn is_credential_param(name: &str) -> bool {
    let n = normalised(name);
    let n = n.trim_matches(|c: char| c == ' ' || c == '_');
    CREDENTIAL_PARAMS.contains(&n) || CREDENTIAL_SUFFIXES.iter().any(|s| n.ends_with(s))
}

/// Append `query` without its credential parameters (and `?` only if something is left).
fn push_query(h: &mut Vec<u8>, query: &str) {
    let mut first = true;
    for pair in query.split('&') {
        let name = pair.split_once('=').map_or(pair, |(n, _)| n);
        if pair.is_empty() || is_credential_param(name) {
            continue;
        }
        h.push(if first { b'?' } else { b'&' });
        h.extend_from_slice(pair.as_bytes());
        first = false;
    }
}

/// A ready-to-send request: head, and body kept separate when large (zero-copy).
#[derive(Clone)]
pub struct Outbound {
    pub head: Bytes,
    pub body: Bytes,
}

/// A head and a body written by one vectored write, neither copied.
pub struct HeadAndBody {
    /// Boxed: the runtime reads the vectors through a pointer that must not move.
    iov: Box<[libc::iovec; 2]>,
    // Keep the bytes the vectors point into alive (and where they are) until the write ends.
    _head: Bytes,
    _body: Bytes,
}

impl HeadAndBody {
    pub fn new(head: Bytes, body: Bytes) -> Self {
        let vec = |b: &Bytes| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        };
        HeadAndBody {
            iov: Box::new([vec(&head), vec(&body)]),
            _head: head,
            _body: body,
        }
    }
}

// SAFETY: the vectors point into the two `Bytes`, which this value owns and never changes, so
// they stay valid (a `Bytes`' data does not move when the handle does); the array is boxed, so
// its address is stable while the runtime holds the value.
unsafe impl monoio::buf::IoVecBuf for HeadAndBody {
    fn read_iovec_ptr(&self) -> *const libc::iovec {
        self.iov.as_ptr()
    }
    fn read_iovec_len(&self) -> usize {
        2
    }
}

/// Send a request upstream: the head alone, or head and body in one vectored write that owns
/// both. Owned, not borrowed: if the client goes away mid-write this future is dropped, and the
/// runtime keeps an in-flight operation's buffers alive until the kernel is done with them, so
/// the kernel never reads memory that was freed (and perhaps reused for another request).
/// monoio's own `write_vectored_all` passes the kernel a copy of the vectors and keeps the
/// buffers in the future, so it is not used here.
pub async fn send(stream: &mut crate::upstream::UpStream, out: &Outbound) -> std::io::Result<()> {
    use monoio::io::{AsyncWriteRent, AsyncWriteRentExt};
    let (head, body) = (&out.head, &out.body);
    if let Some(h2) = stream.h2_mut() {
        return h2.send(head, body).await;
    }
    if body.is_empty() {
        return stream.write_all(head.clone()).await.0.map(drop);
    }
    let (res, _) = stream
        .writev(HeadAndBody::new(head.clone(), body.clone()))
        .await;
    let sent = match res {
        Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => 0,
        Err(e) => return Err(e),
    };
    // A partial write: the rest, each part owned by its own write.
    if sent < head.len() {
        stream.write_all(head.slice(sent..)).await.0?;
        stream.write_all(body.clone()).await.0?;
    } else if sent < head.len() + body.len() {
        stream.write_all(body.slice(sent - head.len()..)).await.0?;
    }
    Ok(())
}

/// What marks one attempt's request besides the client's own headers.
pub struct Marks<'a> {
    pub request_id: &'a str,
    pub trace: &'a crate::audit::trace::Trace,
    /// The attempt's number (the trace's span).
    pub attempt: usize,
    /// The account is on its usage wall's low-priority lane: `anthropic-usage-limit: slow`.
    pub slow: bool,
    /// An OAuth access token refreshed at run time, sent instead of the connection's own.
    pub credential: Option<&'a str>,
    /// The target's model (Azure names the deployment in the path).
    pub model: &'a str,
}

impl Marks<'_> {
    // (Inlined: every request's head writes these; the translated builder is the other caller.)
    #[inline(always)]
    fn write(&self, h: &mut Vec<u8>) {
        if self.slow {
            for part in [SLOW_HEADER.0, ": ", SLOW_HEADER.1, "\r\n"] {
                h.extend_from_slice(part.as_bytes());
            }
        }
        h.extend_from_slice(b"accept-encoding: identity\r\nx-request-id: ");
        h.extend_from_slice(self.request_id.as_bytes());
        h.extend_from_slice(b"\r\n");
        self.trace.write_header(self.attempt, h);
    }
}

pub fn build(
    client: &Head,
    endpoint: Endpoint,
    provider: &Provider,
    conn: &Connection,
    body: &Bytes,
    marks: Marks<'_>,
) -> Outbound {
    let mut h = Vec::with_capacity(client.raw().len() + 256 + body.len().min(COALESCE_BODY));
    let method = if endpoint == Endpoint::Models {
        "GET"
    } else {
        "POST"
    };
    h.extend_from_slice(method.as_bytes());
    h.push(b' ');
    push_path(&mut h, client, endpoint, provider, marks.model);
    h.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    provider.endpoint.write_authority(&mut h);
    h.extend_from_slice(b"\r\n");
    let mut has_version = false;
    let options = client.connection_options();
    // An Anthropic OAuth provider's `anthropic-beta` is one header: its own value first, then
    // the client's (`merge_beta`).
    let merging = !provider.oauth_beta.is_empty();
    let mut client_betas: Vec<&[u8]> = Vec::new();
    for (name, value) in client.iter() {
        if is_dropped(name) || listed_in(options, name) {
            continue;
        }
        if merging && name.eq_ignore_ascii_case("anthropic-beta") {
            client_betas.push(value);
            continue;
        }
        // The lane's header is Ringside's to send: the lane state follows what was sent.
        if merging && name.eq_ignore_ascii_case(SLOW_HEADER.0) {
            continue;
        }
        if withheld::unless_asked(name)
            && !provider
                .forward_headers
                .iter()
                .any(|h| h.eq_ignore_ascii_case(name))
        {
            continue;
        }
        if name.eq_ignore_ascii_case("anthropic-version") {
            has_version = true;
        }
        h.extend_from_slice(name.as_bytes());
        h.extend_from_slice(b": ");
        h.extend_from_slice(value);
        h.extend_from_slice(b"\r\n");
    }
    let credential = marks.credential.unwrap_or(conn.secret.expose());
    push_credential(&mut h, provider, credential, has_version);
    if merging {
        merge_beta(&mut h, &provider.oauth_beta, &client_betas);
    }
    marks.write(&mut h);
    if method == "POST" {
        h.extend_from_slice(b"content-length: ");
        push_u64(&mut h, body.len() as u64);
        h.extend_from_slice(b"\r\n");
    }
    h.extend_from_slice(b"\r\n");
    if method == "POST" && body.len() <= COALESCE_BODY {
        h.extend_from_slice(body);
        return Outbound {
            head: Bytes::from(h),
            body: Bytes::new(),
        };
    }
    let body = if method == "POST" {
        body.clone()
    } else {
        Bytes::new()
    };
    Outbound {
        head: Bytes::from(h),
        body,
    }
}

/// The request target: the provider's base path and the endpoint's, with the client's query
/// (its credentials left out); Azure's own path and query for an Azure provider.
fn push_path(h: &mut Vec<u8>, client: &Head, endpoint: Endpoint, provider: &Provider, model: &str) {
    if let Some(version) = &provider.azure_api_version {
        // Azure takes its own query (`api-version`); the client's is not Azure's.
        translated::azure_path(h, provider, version, endpoint.upstream_suffix(), model);
        return;
    }
    h.extend_from_slice(provider.endpoint.base_path.as_bytes());
    h.extend_from_slice(endpoint.upstream_suffix().as_bytes());
    if let Some(q) = client.query() {
        push_query(h, q);
    }
}

/// `anthropic-beta: <ours>, <the client's>`, each beta name once (the client's values were
/// parsed as header values: they carry no line breaks).
fn merge_beta(h: &mut Vec<u8>, ours: &str, client: &[&[u8]]) {
    h.extend_from_slice(b"anthropic-beta: ");
    h.extend_from_slice(ours.as_bytes());
    let mut seen: Vec<&[u8]> = ours.split(',').map(|b| b.trim().as_bytes()).collect();
    for value in client {
        for name in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            if name.is_empty() || seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
                continue;
            }
            h.extend_from_slice(b",");
            h.extend_from_slice(name);
            seen.push(name);
        }
    }
    h.extend_from_slice(b"\r\n");
}

/// The connection's credential as its provider takes it, and Anthropic's version header when
/// the client sent none.
#[inline(always)]
pub(super) fn push_credential(
    h: &mut Vec<u8>,
    provider: &Provider,
    credential: &str,
    has_version: bool,
) {
    let azure = provider.azure_api_version.is_some();
    match (provider.dialect, provider.auth) {
        (Dialect::Anthropic, AuthKind::ApiKey) => {
            h.extend_from_slice(b"x-api-key: ");
            h.extend_from_slice(credential.as_bytes());
            h.extend_from_slice(b"\r\n");
        }
        (Dialect::Gemini, AuthKind::ApiKey) => {
            h.extend_from_slice(b"x-goog-api-key: ");
            h.extend_from_slice(credential.as_bytes());
            h.extend_from_slice(b"\r\n");
        }
        (Dialect::OpenAi, AuthKind::ApiKey) if azure => {
            h.extend_from_slice(b"api-key: ");
            h.extend_from_slice(credential.as_bytes());
            h.extend_from_slice(b"\r\n");
        }
        _ => {
            h.extend_from_slice(b"authorization: Bearer ");
            h.extend_from_slice(credential.as_bytes());
            h.extend_from_slice(b"\r\n");
        }
    }
    if provider.dialect == Dialect::Anthropic && !has_version {
        h.extend_from_slice(b"anthropic-version: ");
        h.extend_from_slice(provider.anthropic_version.as_bytes());
        h.extend_from_slice(b"\r\n");
    }
}

mod translated;
mod withheld;
pub use translated::build_translated;

#[cfg(test)]
mod tests;
