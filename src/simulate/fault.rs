//! Fault specs for the simulator: `kind[;param=value]...`, chosen per key, per model or per
//! request (header `x-sim-fault`).

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Answer with this status and an error body in the request's dialect.
    Status(u16),
    /// 403 whose body says the quota is used up (a relay that misstates quota exhaustion).
    QuotaMessage,
    /// Close the socket with RST before any response byte.
    ResetBeforeHeaders,
    /// Send the head and `after` events, then RST.
    ResetMidStream,
    /// Never answer (until the client goes away).
    Hang,
    /// Send the head, then nothing (stall before the first event).
    StallAfterHead,
    /// Events `interval` apart with tiny payloads.
    SlowDrip,
    /// An event stream with broken lines and no terminal marker.
    MalformedSse,
    /// A body without Content-Length or chunking, ended by closing the connection.
    CloseDelimited,
    /// A stream that ends cleanly at the HTTP level but without its terminal marker.
    NoTerminalMarker,
    /// A 200 event stream whose first content is an in-band error event (`message` as text).
    SseError,
    /// A 200 event stream with `after` content events, then an in-band error event of
    /// `error-type` (default `overloaded_error`) with `message`, then the end of the body.
    SseErrorAfter,
    /// Like slow-drip, but the events are a tool call's argument deltas (no text).
    ToolDrip,
    /// `after` keep-alive comments, `interval` apart, before the normal stream.
    Heartbeats,
    /// 400 that quotes the client's input back, as providers do for an invalid value: the
    /// first message's `role` in OpenAI's or Anthropic's wording.
    QuoteInput,
    /// A Claude subscription account at its usage wall (`subscription.rs`).
    UsageWall,
    /// Anthropic's 401 for an expired OAuth access token.
    ExpiredToken,
    /// Healthy: only the params (latency, events) apply.
    None,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub retry_after: Option<String>,
    pub retry_after_ms: Option<u64>,
    /// Add OpenAI/Anthropic rate-limit headers to the answer (an error's, or a stream's head,
    /// saying the limit is spent).
    pub ratelimit_headers: bool,
    /// Send a success with the head a provider sends (`provider_head`), not the plain one.
    pub provider_head: bool,
    /// A token-budget 429 as OpenAI sends it: tokens per minute spent (requests left), reset
    /// in 2 s, said in the headers and the message.
    pub tokens_per_minute: bool,
    /// Events before a mid-stream reset.
    pub after: u32,
    pub latency_ms: u64,
    pub interval_ms: Option<u64>,
    /// Apply to this many requests, then behave healthily (0 = always).
    pub times: u64,
    /// Custom body text for status faults.
    pub message: Option<String>,
    /// The in-band error's type (`sse-error-after`).
    pub error_type: Option<String>,
    /// The scripted usage wall (`usage-wall`).
    pub wall: Option<Box<super::subscription::WallSpec>>,
    /// A status error that quotes the credential it was sent, in its message and in an
    /// `x-echo-key` header (`echo-key`): what a careless relay does.
    pub echo_key: bool,
}

impl Fault {
    pub fn parse(spec: &str) -> Result<Fault, String> {
        let mut parts = spec.split(';').map(str::trim);
        let kind_s = parts.next().unwrap_or("");
        let kind = match kind_s {
            "" | "none" | "ok" => FaultKind::None,
            "403-quota" | "quota" => FaultKind::QuotaMessage,
            "reset-before-headers" | "reset" => FaultKind::ResetBeforeHeaders,
            "reset-mid-stream" => FaultKind::ResetMidStream,
            "hang" => FaultKind::Hang,
            "stall" | "stall-after-head" => FaultKind::StallAfterHead,
            "slow-drip" => FaultKind::SlowDrip,
            "malformed-sse" => FaultKind::MalformedSse,
            "close-delimited" => FaultKind::CloseDelimited,
            "no-terminal" => FaultKind::NoTerminalMarker,
            "sse-error" => FaultKind::SseError,
            "sse-error-after" => FaultKind::SseErrorAfter,
            "tool-drip" => FaultKind::ToolDrip,
            "heartbeats" => FaultKind::Heartbeats,
            "quote" | "quote-input" => FaultKind::QuoteInput,
            "usage-wall" => FaultKind::UsageWall,
            "expired-token" => FaultKind::ExpiredToken,
            s => match s.parse::<u16>() {
                Ok(code) if (100..=599).contains(&code) => FaultKind::Status(code),
                _ => return Err(format!("unknown fault `{s}`")),
            },
        };
        let mut f = Fault {
            kind: kind.clone(),
            retry_after: None,
            retry_after_ms: None,
            ratelimit_headers: false,
            provider_head: false,
            tokens_per_minute: false,
            after: 2,
            latency_ms: 0,
            interval_ms: None,
            times: 0,
            message: None,
            error_type: None,
            wall: (kind == FaultKind::UsageWall).then(Default::default),
            echo_key: false,
        };
        for p in parts {
            if p.is_empty() {
                continue;
            }
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let num = || {
                v.parse::<u64>()
                    .map_err(|_| format!("`{k}` needs a number, got `{v}`"))
            };
            if let Some(w) = f.wall.as_mut()
                && w.param(k, v)?
            {
                continue;
            }
            match k {
                "retry-after" | "retry_after" => f.retry_after = Some(v.to_string()),
                "retry-after-ms" | "retry_after_ms" => f.retry_after_ms = Some(num()?),
                "ratelimit-headers" | "ratelimit_headers" => f.ratelimit_headers = true,
                "provider-head" | "provider_head" => f.provider_head = true,
                "echo-key" | "echo_key" => f.echo_key = true,
                "tokens-per-minute" | "tpm" => f.tokens_per_minute = true,
                "after" => f.after = num()? as u32,
                "latency" | "latency-ms" => f.latency_ms = num()?,
                "interval" | "interval-ms" => f.interval_ms = Some(num()?),
                "times" => f.times = num()?,
                "message" => f.message = Some(v.to_string()),
                "error-type" | "error_type" => f.error_type = Some(v.to_string()),
                _ => return Err(format!("unknown fault parameter `{k}`")),
            }
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let f = Fault::parse("429;retry-after=5;ratelimit-headers").unwrap();
        assert_eq!(f.kind, FaultKind::Status(429));
        assert_eq!(f.retry_after.as_deref(), Some("5"));
        assert!(f.ratelimit_headers);
        let f = Fault::parse("reset-mid-stream;after=3;times=2").unwrap();
        assert_eq!(
            (f.kind, f.after, f.times),
            (FaultKind::ResetMidStream, 3, 2)
        );
        assert!(Fault::parse("teapot").is_err());
        let f = Fault::parse("usage-wall;slot-busy=2;offer=none;limit-reset=reset").unwrap();
        let w = f.wall.expect("a wall");
        assert_eq!((w.slot_busy, w.offer.as_str()), (2, ""));
        assert_eq!(w.limit_reset.as_deref(), Some("reset"));
        assert!(Fault::parse("429;slot-busy=2").is_err(), "not a wall's");
        assert!(Fault::parse("500;latency=x").is_err());
    }
}
