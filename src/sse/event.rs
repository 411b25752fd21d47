//! What one SSE event means for the stream (its kind, its text) and what a stream has seen so
//! far: the stream guard judges on these.

use super::json::Counts;

/// What one event means for the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Output the user reads; `bytes` of UTF-8 text.
    Text,
    /// A tool call or reasoning in progress (protected from the throughput judge).
    Protected,
    /// Usage figures only.
    Usage,
    /// Lifecycle or empty (`message_start`, `response.created`, role-only deltas).
    Lifecycle,
    /// A comment or `ping`: keeps the stream alive, is not progress.
    Heartbeat,
    /// An in-band error.
    Error,
    /// The stream's terminal marker (`[DONE]`, `message_stop`, `response.completed`).
    Terminal,
}

/// One classified event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: Kind,
    /// Useful text bytes in it.
    pub text_bytes: u32,
    pub counts: Counts,
}

/// Running totals of a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub events: u64,
    pub text_bytes: u64,
    pub heartbeats: u64,
    pub errors: u64,
    pub terminal: bool,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// A tool call or reasoning is in progress (set by such an event, cleared by text).
    pub protected: bool,
    /// At least one event that is not lifecycle, heartbeat or usage (text, tool, reasoning,
    /// error or terminal) has been seen.
    pub decisive: bool,
    pub first_error_seen: bool,
}
