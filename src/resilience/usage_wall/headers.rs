//! The usage wall's wire words: the request header that asks for the low-priority lane, and
//! (read by `dialect::ratelimit` with the rest of an answer's limits) what the answer's
//! `anthropic-ratelimit-unified-*` headers say.

pub use crate::dialect::ratelimit::unified::{Claim, Offer, SlowStatus, Unified};

/// The request header that puts a request in the low-priority lane.
pub const SLOW_HEADER: (&str, &str) = ("anthropic-usage-limit", "slow");
