//! Who is calling, from the request head alone: the client key (configured or managed), what
//! it may do here, and browser-style requests from another origin. Decided before any byte of
//! the body is read.

use crate::clients::{Auth, Scope};
use crate::dialect::{ApiError, Endpoint};
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
) -> (Auth, Option<ApiError>) {
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
        Auth::Known(c) => {
            (endpoint != Endpoint::SessionLeases && !c.has(Scope::Inference)).then(|| {
                ApiError::new(
                    403,
                    "insufficient_scope",
                    "this key may not make inference requests",
                )
                .should_retry(false)
            })
        }
        Auth::Missing | Auth::Unknown => Some(
            ApiError::new(
                401,
                "invalid_api_key",
                "a valid Ringside client key is required (Authorization: Bearer or x-api-key)",
            )
            .should_retry(false),
        ),
    };
    (auth, refusal)
}

/// A browser page on another origin can post a form or `text/plain` body without asking first
/// (no CORS preflight), and would spend the operator's provider keys in open mode. Such a
/// request carries `Origin` and a non-JSON content type; SDKs and `curl` send no `Origin`.
pub(super) fn cross_origin_form(head: &Head) -> Option<ApiError> {
    if head.method() != "POST" {
        return None;
    }
    head.get("origin")?;
    (!head.content_type_is_json()).then(|| {
        ApiError::new(
            403,
            "cross_origin_refused",
            "a cross-origin request must send a JSON body (content-type: application/json)",
        )
        .should_retry(false)
    })
}
