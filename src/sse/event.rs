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
    /// Usage figures (u32: no answer reports four billion tokens).
    pub input_tokens: Option<u32>,
    pub output_tokens: Option<u32>,
    pub cached_tokens: Option<u32>,
    /// A tool call or reasoning is in progress (set by such an event, cleared by text).
    pub protected: bool,
    /// At least one event that is not lifecycle, heartbeat or usage (text, tool, reasoning,
    /// error or terminal) has been seen.
    pub decisive: bool,
    /// At least one event with text, a tool call or reasoning (the time to first token).
    pub useful: bool,
    pub first_error_seen: bool,
}

/// The data of the first error event in SSE bytes (rare path: allocation is fine). Chunk-size
/// lines among them are skipped like any line that is not a field.
pub fn error_text(p: &[u8]) -> String {
    let text = String::from_utf8_lossy(p).replace("\r\n", "\n");
    for block in text.split("\n\n") {
        let mut event = "";
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim();
            } else if let Some(v) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        let d = data.trim_start();
        if event == "error" || event == "response.failed" || d.contains("\"error\"") {
            return data;
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_of_the_first_error_event() {
        let p = b"event: message_start\ndata: {}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"quota\"}}\n\n";
        assert!(error_text(p).contains("quota"));
        let p = b"data: {\"error\":{\"message\":\"x\"}}\r\n\r\n";
        assert!(error_text(p).starts_with("{\"error\""));
        assert_eq!(error_text(b"data: {\"choices\":[]}\n\n"), "");
    }

    #[test]
    fn error_text_inside_chunk_framing() {
        let raw = b"3e\r\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n\r\n";
        assert!(error_text(raw).contains("overloaded_error"));
    }
}
