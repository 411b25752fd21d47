//! The head of the answer the client gets: the upstream's headers with hygiene applied (hop-by-hop
//! and `Connection`-named headers dropped, `x-ringside-*` never relayed, the connection's key
//! redacted wherever an upstream echoes it) plus Ringside's own (request id, route, connection,
//! attempts), and the framing the client can read (chunked for HTTP/1.1, unframed for 1.0).

use super::forward::Relay;
use crate::dialect::Endpoint;
use crate::http::head::{is_hop_by_hop, is_ringside_header, listed_in};
use crate::http::response::HeadWriter;
use crate::http::{Framing, Head};

/// How the client's head is framed.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    pub status: u16,
    /// A close-delimited body re-framed as chunks for a keep-alive client.
    pub rechunk: bool,
    pub keep_alive: bool,
    pub is_sse: bool,
    /// A buffered body's length, replacing the upstream's framing.
    pub length: Option<usize>,
    /// Room for the body bytes that follow the head in the same buffer.
    pub then: usize,
    /// The body is not the upstream's (translated): its Content-Length does not hold.
    pub rewritten: bool,
}

/// `first_body` is how many body bytes will be appended to the head (one write for both).
pub(super) fn client_head(
    up: &Head,
    r: &Relay,
    rechunk: bool,
    keep_alive: bool,
    is_sse: bool,
    first_body: usize,
) -> Vec<u8> {
    let shape = Shape {
        status: up.status,
        rechunk,
        keep_alive,
        is_sse,
        length: None,
        then: first_body,
        rewritten: false,
    };
    head_for_client(up, r, &shape, &[])
}

/// The client's response head: the upstream's headers (hygiene applied) plus ours, framed as
/// `shape` says; `extra` overrides headers (an empty value drops the upstream's).
pub(crate) fn head_for_client(
    up: &Head,
    r: &Relay,
    shape: &Shape,
    extra: &[(&str, String)],
) -> Vec<u8> {
    let Shape {
        status,
        rechunk,
        keep_alive,
        is_sse,
        length,
        then,
        rewritten,
    } = *shape;
    let mut w = HeadWriter::with_capacity(status, up.raw().len() + 256 + then);
    // 1xx and 204 never carry Content-Length (RFC 9110 8.6): an upstream's would make a client
    // wait for a body that never comes. A 304 keeps the upstream's (the representation's
    // size) but gets none of ours.
    let never_length = status == 204 || status < 200;
    let drop_length = length.is_some() || never_length || rewritten;
    let bodiless = !carries_body(status);
    // The Anthropic SDKs read `request-id` (not `x-request-id`) as the request's id.
    let mut has_request_id = !matches!(r.endpoint, Endpoint::Messages | Endpoint::CountTokens);
    let options = up.connection_options();
    for (name, value) in up.iter() {
        if is_hop_by_hop(name)
            || is_ringside_header(name)
            || listed_in(options, name)
            || (drop_length && name.eq_ignore_ascii_case("content-length"))
            || extra.iter().any(|(n, _)| name.eq_ignore_ascii_case(n))
        {
            continue;
        }
        if name.eq_ignore_ascii_case("x-request-id") {
            w.header("x-upstream-request-id", value);
            continue;
        }
        has_request_id |= name.eq_ignore_ascii_case("request-id");
        // Most values are shorter than a key: the search runs only where one could fit.
        if r.secrets.found_in(value) {
            w.header(name, r.secrets.redact(value));
            continue;
        }
        w.header(name, value);
    }
    w.header("x-request-id", r.request_id);
    if !has_request_id {
        w.header("request-id", r.request_id);
    }
    w.header("x-ringside-route", r.route);
    if let Some(label) = r.connection_label {
        w.header("x-ringside-connection", label);
    }
    w.header("x-ringside-attempts", r.attempts);
    if let Some((percent, limit)) = r.budget_warning {
        let v = format!("{percent}% of {}", limit.as_str());
        w.header("x-ringside-budget-warning", &v);
    }
    for (n, v) in extra.iter().filter(|(_, v)| !v.is_empty()) {
        w.header(n, v);
    }
    if bodiless {
        // No body follows, whatever the upstream's framing said.
    } else if let Some(n) = length {
        w.header_u64("content-length", n as u64);
    } else if (up.framing == Framing::Chunked && r.client_http11) || rechunk {
        // An HTTP/1.0 client cannot read chunks: its body is sent unframed and ends at close.
        w.header("transfer-encoding", "chunked");
    }
    if is_sse {
        // Ask intermediaries (nginx in front of us) not to buffer the stream.
        w.header("x-accel-buffering", "no");
    }
    if !keep_alive {
        w.header("connection", "close");
    }
    w.finish(b"")
}

/// Whether a response with this status has a body at all (RFC 9112 6.3).
pub(super) fn carries_body(status: u16) -> bool {
    !(status < 200 || status == 204 || status == 304)
}
