//! The upstream request of a translated attempt: the body written for the target's API, a head
//! of our own (the client's headers belong to the client's API: its version and beta headers,
//! its SDK's, mean nothing to another provider), the connection's credential as the target
//! takes it, and Azure's and Gemini's paths.

use super::{COALESCE_BODY, Marks, Outbound, push_credential};
use crate::config::Provider;
use crate::http::response::push_u64;
use crate::translate::Api;
use bytes::Bytes;

/// Azure's path for an OpenAI endpoint: the deployment (the target's model) in a dated path,
/// or the `/openai/v1/` API (which takes the deployment as the body's model).
pub(super) fn azure_path(
    h: &mut Vec<u8>,
    provider: &Provider,
    version: &str,
    suffix: &str,
    model: &str,
) {
    h.extend_from_slice(provider.endpoint.base_path.trim_end_matches('/').as_bytes());
    match version {
        "v1" | "preview" => {
            h.extend_from_slice(b"/openai/v1");
            h.extend_from_slice(suffix.as_bytes());
            if version == "preview" {
                h.extend_from_slice(b"?api-version=preview");
            }
            return;
        }
        _ if suffix == "/responses" => h.extend_from_slice(b"/openai/responses"),
        _ => {
            h.extend_from_slice(b"/openai/deployments/");
            h.extend_from_slice(model.as_bytes());
            h.extend_from_slice(suffix.as_bytes());
        }
    }
    h.extend_from_slice(b"?api-version=");
    h.extend_from_slice(version.as_bytes());
}

/// A translated request to `provider` in `api`.
pub fn build_translated(
    provider: &Provider,
    credential: &str,
    api: Api,
    stream: bool,
    body: Bytes,
    marks: Marks<'_>,
) -> Outbound {
    let mut h = Vec::with_capacity(512 + body.len().min(COALESCE_BODY));
    h.extend_from_slice(b"POST ");
    let suffix = crate::translate::upstream_path(api, marks.model, stream);
    match &provider.azure_api_version {
        Some(v) => azure_path(&mut h, provider, v, &suffix, marks.model),
        None => {
            h.extend_from_slice(provider.endpoint.base_path.as_bytes());
            h.extend_from_slice(suffix.as_bytes());
        }
    }
    h.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    provider.endpoint.write_authority(&mut h);
    h.extend_from_slice(b"\r\ncontent-type: application/json\r\naccept: ");
    h.extend_from_slice(if stream {
        b"text/event-stream".as_slice()
    } else {
        b"application/json"
    });
    h.extend_from_slice(b"\r\nuser-agent: ringside/");
    h.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    h.extend_from_slice(b"\r\n");
    push_credential(&mut h, provider, credential, false);
    if !provider.oauth_beta.is_empty() {
        h.extend_from_slice(b"anthropic-beta: ");
        h.extend_from_slice(provider.oauth_beta.as_bytes());
        h.extend_from_slice(b"\r\n");
    }
    marks.write(&mut h);
    h.extend_from_slice(b"content-length: ");
    push_u64(&mut h, body.len() as u64);
    h.extend_from_slice(b"\r\n\r\n");
    if body.len() <= COALESCE_BODY {
        h.extend_from_slice(&body);
        return Outbound {
            head: Bytes::from(h),
            body: Bytes::new(),
        };
    }
    Outbound {
        head: Bytes::from(h),
        body,
    }
}
