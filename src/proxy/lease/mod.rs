//! Exclusive session leases on the request path: the owner token, the lease headers of an
//! inference request, the fence checked before dispatch (and again after any admission wait),
//! and the move of a lease to another free eligible connection when its own cannot serve.
//! The lifecycle endpoint (`POST /v1/session-leases`) is in [`lifecycle`].

pub mod lifecycle;
mod refusal;

pub use refusal::Refusal;

use super::exchange::{Ctx, Request};
use crate::clients::{Client, Scope};
use crate::dialect::{ApiError, Endpoint};
use crate::ids::ConnId;
use crate::resilience::Exclusion;
use crate::route::Candidate;
use crate::store::leases::{Fence, Lease, Op, Outcome};
use base64::Engine;
use serde_json::json;
use std::time::Duration;

pub const OWNER_HEADER: &str = "x-ringside-lease-owner";
pub const GENERATION_HEADER: &str = "x-ringside-lease-generation";
/// How long a core waits for the store writer's answer before calling the store unavailable.
const WRITER_TIMEOUT: Duration = Duration::from_secs(5);

/// A new owner value: `vlo_` + 43 base64url characters (32 random bytes). Returned once.
pub fn new_owner() -> String {
    let mut raw = [0u8; 32];
    rand::Rng::fill(&mut rand::thread_rng(), &mut raw);
    format!(
        "vlo_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    )
}

/// `^vlo_[A-Za-z0-9_-]{43}$`
pub fn valid_owner(v: &str) -> bool {
    v.strip_prefix("vlo_").is_some_and(|rest| {
        rest.len() == 43
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// What is stored instead of the owner value.
pub fn owner_hash(owner: &str) -> String {
    crate::clients::hex(&crate::clients::digest(owner.as_bytes()))
}

/// `^[1-9]\d*$` and a safe integer (≤ 2^53 − 1, what a JSON client can hold exactly).
pub fn parse_generation(v: &str) -> Option<u64> {
    let ok = !v.is_empty()
        && v.len() <= 16
        && !v.starts_with('0')
        && v.bytes().all(|b| b.is_ascii_digit());
    v.parse::<u64>().ok().filter(|&g| ok && g < (1 << 53))
}

pub use super::exchange::Binding;

/// Endpoints whose requests a lease-scoped key must bind to its lease.
fn fenced_endpoint(e: Endpoint) -> bool {
    matches!(
        e,
        Endpoint::ChatCompletions
            | Endpoint::Completions
            | Endpoint::Messages
            | Endpoint::Responses
    )
}

/// Read and check a request's lease headers. `Ok(None)`: not a leased request.
pub(crate) fn bind(
    ctx: &Request<'_>,
    client: Option<&Client>,
    endpoint: Endpoint,
) -> Result<Option<Binding>, ApiError> {
    let owner = ctx.head.get_str(OWNER_HEADER);
    let generation = ctx.head.get_str(GENERATION_HEADER);
    let has_headers =
        ctx.head.get(OWNER_HEADER).is_some() || ctx.head.get(GENERATION_HEADER).is_some();
    let keyed = client.is_some();
    let Some(client) = client.filter(|c| c.has(Scope::LeaseExclusive)) else {
        // Open (sidecar) mode has no leases: the headers are dropped like every internal one.
        // A key without the scope is told, so that it never believes it is fenced.
        if has_headers && keyed {
            return Err(Refusal::ScopeRequired
                .error("lease headers need a client key with scope lease:exclusive"));
        }
        return Ok(None);
    };
    if !has_headers && !fenced_endpoint(endpoint) {
        return Ok(None);
    }
    let Some(owner) = owner else {
        return Err(Refusal::ContextRequired.error(format!(
            "this key's requests must carry {OWNER_HEADER} and {GENERATION_HEADER}"
        )));
    };
    if !valid_owner(owner.trim()) {
        return Err(Refusal::ContextInvalid.error(format!(
            "{OWNER_HEADER} is not a lease owner (vlo_ + 43 base64url characters)"
        )));
    }
    let Some(generation) = generation.and_then(|g| parse_generation(g.trim())) else {
        return Err(Refusal::ContextInvalid
            .error(format!("{GENERATION_HEADER} must be a positive integer")));
    };
    // Its connection is found by the fence (`refence`), before anything is sent upstream.
    Ok(Some(Binding {
        owner: owner_hash(owner.trim()),
        generation,
        client: client.id.clone(),
        conn: ConnId::NONE,
        moves: 0,
    }))
}

/// Check the binding against the lease book now (in fleet mode a round trip to Redis): the
/// connection the lease holds, or why not. A book that cannot be read refuses (fail closed).
pub(crate) async fn refence(ctx: &Request<'_>, b: &Binding) -> Result<ConnId, ApiError> {
    let shared = &ctx.core.shared;
    let Ok(row) = shared.store.fence_row(&b.owner).await else {
        return Err(lifecycle::unavailable());
    };
    match crate::store::leases::fence(
        row.as_ref(),
        b.generation,
        &b.client,
        crate::clock::unix_ms(),
    ) {
        Fence::Valid(label) => ctx.generation.conn_by_label(&label).ok_or_else(|| {
            Refusal::Required
                .error("the leased connection is no longer configured; acquire a new lease")
        }),
        Fence::Required => {
            Err(Refusal::Required.error("no active lease for this owner; acquire one first"))
        }
        Fence::Stale => {
            Err(Refusal::FenceStale
                .error("the lease generation is stale (or belongs to another key)"))
        }
    }
}

/// Wait for the store writer's answer (bounded; a dead writer reads as unavailable).
pub async fn ask_writer(store: &crate::store::Store, op: Op) -> Outcome {
    match crate::timer::timeout(WRITER_TIMEOUT, store.lease(op)).await {
        Ok(Ok(o)) => o,
        _ => Outcome::Unavailable,
    }
}

/// Move a bound lease to the first free connection among `alternatives` (same generation).
pub(crate) async fn transition(
    ctx: &Ctx<'_, '_>,
    b: &Binding,
    alternatives: &[ConnId],
    reason: &str,
) -> Outcome {
    let labels = &ctx.generation.conn_labels;
    let candidates = alternatives
        .iter()
        .filter_map(|&c| labels.get(c.index()).map(|(p, n)| format!("{p}/{n}")))
        .collect();
    ask_writer(
        ctx.core.shared.store,
        Op::Transition {
            owner: b.owner.clone(),
            generation: b.generation,
            client: b.client.clone(),
            candidates,
            reason: reason.to_string(),
        },
    )
    .await
}

/// The longest `Retry-After` a lease refusal carries (the documented range is 1 to 120 s): a
/// lease that expires later is retried sooner and refused again, never promised.
pub const MAX_RETRY_AFTER_S: u64 = 120;

/// Seconds until the earliest relevant lease expiry, as `Retry-After` (1–120; 1 unknown),
/// jittered by ±`jitter_pct` % so that owners refused together do not return together.
pub fn retry_after_s(earliest_unix_ms: Option<u64>, now_unix: u64, jitter_pct: u8) -> u64 {
    earliest_unix_ms.map_or(1, |t| {
        let ms = t.saturating_sub(now_unix);
        crate::resilience::jitter::spread(ms, jitter_pct, now_unix)
            .div_ceil(1000)
            .clamp(1, MAX_RETRY_AFTER_S)
    })
}

/// 429: every free eligible connection is held by another owner's lease.
pub fn capacity(retry_s: u64, eligible: usize) -> ApiError {
    let message =
        "every eligible connection is leased by another session; retry after the earliest expiry";
    Refusal::CapacityUnavailable
        .error(message)
        .retry_after(retry_s)
        .extra(json!({
            "state": "WAITING_FOR_CAPACITY",
            "reason": "NO_FREE_ELIGIBLE_CONNECTION",
            "retryAfter": retry_s,
            "eligibleCount": eligible,
            "freeCount": 0,
        }))
}

/// The key may hold leases: scope and a non-empty allow-list.
pub fn lease_key(client: Option<&Client>) -> Result<&Client, ApiError> {
    let Some(c) = client else {
        return Err(Refusal::AuthenticationRequired
            .error("leases need a Ringside client key (Authorization: Bearer or x-api-key)"));
    };
    if !c.has(Scope::LeaseExclusive) {
        return Err(Refusal::ScopeRequired.error("this key lacks scope lease:exclusive"));
    }
    if c.allowed.as_ref().is_none_or(Vec::is_empty) {
        return Err(Refusal::KeyConfigurationInvalid
            .error("a lease key needs a non-empty allowed_connections list"));
    }
    Ok(c)
}

/// What the public answer may say about a lease (never the connection, owner or key).
pub fn public(l: &Lease, now_unix: u64) -> serde_json::Value {
    json!({
        "state": l.state_at(now_unix),
        "generation": l.generation,
        "expires_at_ms": l.expires_at,
        "ttl_remaining_ms": l.expires_at.saturating_sub(now_unix),
    })
}

/// Why a lease moves: what keeps its connection from serving this request.
/// What became of a request's lease when no candidate could serve it.
pub(crate) enum LeaseMove {
    /// It moved to a free eligible connection (same generation): select again.
    Moved,
    /// It stays where it is (nowhere to go, or another request moved it first).
    Stayed,
    /// The lease cannot be used: answer the client with this.
    Refused(ApiError),
}

/// Move the request's lease off a connection that cannot serve it, to one of the free eligible
/// connections the selection found (`NotThisLease`), at most twice per request.
pub(crate) async fn move_off(
    ctx: &mut Ctx<'_, '_>,
    excluded: &[(Candidate, Exclusion)],
) -> LeaseMove {
    let Some(b) = ctx.admitted.lease.clone() else {
        return LeaseMove::Stayed;
    };
    let mut free: Vec<ConnId> = Vec::new();
    for (c, e) in excluded {
        if *e == Exclusion::Ineligible(crate::resilience::Ineligible::NotThisLease)
            && !free.contains(&c.connection)
        {
            free.push(c.connection);
        }
    }
    if free.is_empty() || b.moves >= 2 {
        return LeaseMove::Stayed;
    }
    let why = move_reason(excluded, b.conn);
    match transition(ctx, &b, &free, why).await {
        Outcome::Transitioned(l) => {
            let moved_to = ctx.generation.conn_by_label(&l.connection);
            if let (Some(lb), Some(i)) = (ctx.admitted.lease.as_mut(), moved_to) {
                lb.conn = i;
                lb.moves += 1;
            }
            LeaseMove::Moved
        }
        Outcome::Busy { .. } | Outcome::Reused(_) => LeaseMove::Stayed,
        Outcome::Unavailable => LeaseMove::Refused(lifecycle::unavailable()),
        _ => match refence(ctx, &b).await {
            Err(e) => LeaseMove::Refused(e),
            Ok(_) => LeaseMove::Stayed,
        },
    }
}

pub(crate) fn move_reason(excluded: &[(Candidate, Exclusion)], conn: ConnId) -> &'static str {
    match excluded.iter().find(|(c, _)| c.connection == conn) {
        Some((_, Exclusion::Lockout { .. })) => "MODEL_INELIGIBLE",
        Some((_, Exclusion::Terminal(crate::resilience::cooldown::Terminal::CreditsExhausted))) => {
            "QUOTA_UNAVAILABLE"
        }
        Some((_, Exclusion::Ineligible(_))) => "CONNECTION_INELIGIBLE",
        Some(_) => "HEALTH_OR_COOLDOWN",
        None => "MODEL_INELIGIBLE",
    }
}

/// 429 `LEASE_CAPACITY_UNAVAILABLE` when what stands between the request and a connection is
/// other sessions' leases (not ordinary unavailability, which keeps its own answers).
pub(crate) fn capacity_answer(
    ctx: &Ctx<'_, '_>,
    excluded: &[(Candidate, Exclusion)],
    unix_now: u64,
) -> Option<ApiError> {
    let leased: Vec<u64> = excluded
        .iter()
        .filter_map(|(_, e)| match e {
            Exclusion::Leased { ms } => Some(*ms),
            _ => None,
        })
        .collect();
    let earliest = leased.iter().min()?;
    let others_only = excluded.iter().all(|(c, e)| {
        matches!(e, Exclusion::Leased { .. } | Exclusion::Tried)
            || ctx
                .admitted
                .lease
                .as_ref()
                .is_some_and(|b| b.conn == c.connection)
    });
    others_only.then(|| {
        let mut conns: Vec<ConnId> = excluded.iter().map(|(c, _)| c.connection).collect();
        conns.sort_unstable();
        conns.dedup();
        capacity(
            retry_after_s(
                Some(unix_now + earliest),
                unix_now,
                ctx.config().resilience.jitter_pct,
            ),
            conns.len(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_tokens_have_the_documented_shape_and_only_their_hash_is_kept() {
        let a = new_owner();
        assert!(valid_owner(&a), "{a}");
        assert_eq!(a.len(), 47);
        assert_ne!(a, new_owner(), "random");
        let h = owner_hash(&a);
        assert_eq!(h.len(), 64);
        assert!(!h.contains(&a[4..]));
        for bad in [
            "vlo_short",
            "",
            "vlo_",
            &a[..46],
            &format!("{a}x"),
            &a.replace("vlo_", "vlx_"),
        ] {
            assert!(!valid_owner(bad), "{bad}");
        }
        assert!(!valid_owner(&format!("vlo_{}", "+".repeat(43))));
    }

    #[test]
    fn generations_are_exact_positive_safe_integers() {
        assert_eq!(parse_generation("1"), Some(1));
        assert_eq!(parse_generation("9007199254740991"), Some((1 << 53) - 1));
        for bad in [
            "0",
            "01",
            "-1",
            "1.0",
            " 1",
            "",
            "9007199254740992",
            "1e3",
            "abc",
        ] {
            assert_eq!(parse_generation(bad), None, "{bad}");
        }
    }

    #[test]
    fn retry_after_is_bounded() {
        assert_eq!(retry_after_s(None, 0, 0), 1);
        assert_eq!(retry_after_s(Some(500), 1_000, 0), 1);
        assert_eq!(retry_after_s(Some(120_000), 0, 0), 120);
        assert_eq!(retry_after_s(Some(119_001), 0, 0), 120);
        assert_eq!(retry_after_s(Some(10_000_000), 0, 0), 120);
        // A refusal computed a moment before the writer stamped the expiry (50 racing acquires).
        assert_eq!(retry_after_s(Some(120_400), 0, 0), 120);
        // Jittered, and still in range.
        for now in 0..200 {
            let s = retry_after_s(Some(now + 60_000), now, 20);
            assert!((48..=72).contains(&s), "{s}");
            assert!((1..=120).contains(&retry_after_s(Some(now + 119_000), now, 20)));
        }
    }
}
