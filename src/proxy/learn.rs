//! What every answer's head teaches: the connection's quota figures for the load table, and the
//! pacing a key's remaining requests call for.

use crate::dialect::ratelimit::unified::Unified;
use crate::dialect::ratelimit::{Family, RateLimits};
use crate::http::Head;
use crate::route::Candidate;

/// What every answer's head teaches, read in one pass: the connection's quota figures and its
/// pacing; for an account whose usage wall is opted in (`with_wall`), what the wall's headers
/// say. An error answer's figures are kept for its judge (retry hints), when it had any.
/// (Boxed: 8 bytes each in every attempt's state, not 400 and 140.)
pub(super) fn from_head(
    core: &crate::state::core::Core,
    cand: Candidate,
    head: &Head,
    with_wall: bool,
) -> (Option<Box<RateLimits>>, Option<Box<Unified>>) {
    let mut wall = with_wall.then(Box::<Unified>::default);
    let limits = RateLimits::read_with(head, crate::clock::unix_ms(), wall.as_deref_mut());
    if !limits.any() {
        return (None, wall);
    }
    core.loads
        .borrow_mut()
        .observe_quota(cand.connection, &limits, crate::clock::now_ms());
    let success = (200..300).contains(&head.status);
    if success {
        // Pacing is learned from answers that served: a 429's window is its cooldown's or its
        // lockout's (judged with its hint), and spacing the key by it as well held requests that
        // had already chosen the key for the whole window (20 s in the drill's
        // `key-429-reset-headers`) while its siblings were free.
        learn_pacing(&core.shared.flow.gates[cand.connection], &limits);
    }
    let kept = (!success).then(|| Box::new(limits));
    (kept, wall)
}

/// Let the connection's gate learn from the upstream's rate-limit headers.
fn learn_pacing(gate: &crate::flow::gate::Gate, limits: &RateLimits) {
    let window = [Family::OpenAiRequests, Family::AnthropicRequests]
        .into_iter()
        .map(|f| limits.window(f))
        .find(|w| w.remaining.is_some());
    if let Some(w) = window {
        gate.learn(w.remaining, w.limit, w.reset_ms);
    }
}
