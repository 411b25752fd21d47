//! Why a relay that had begun ended early. Each prints as the error code the client's error
//! event and the decision record carry (`as_str`), unchanged from when they were strings.

/// How a committed answer failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayFailure {
    /// The upstream's framing broke (a bad chunk, bytes that cannot be a body).
    BadFraming,
    /// An event stream ended without its terminal event.
    NoTerminal,
    /// The client accepted nothing for `client_send_timeout_ms`.
    ClientSendTimeout,
    /// The stream guard's watchdog: too little useful output.
    ThroughputTooLow,
    /// The upstream closed inside a body of known length or inside a chunk.
    Truncated,
    /// The upstream went silent for `idle_read_timeout_ms`.
    IdleTimeout,
    /// The request's execution budget ended.
    ExecutionTimeout,
    /// No useful event within the stream's readiness timeout.
    ReadinessTimeout,
    /// The stream ran past its total time.
    TotalTimeout,
    /// The upstream connection failed (reset) while reading.
    Reset,
    /// The server's drain ended its grace with the stream still running.
    Shutdown,
}

impl RelayFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            RelayFailure::BadFraming => "upstream_bad_framing",
            RelayFailure::NoTerminal => "upstream_no_terminal",
            RelayFailure::ClientSendTimeout => "client_send_timeout",
            RelayFailure::ThroughputTooLow => "STREAM_THROUGHPUT_TOO_LOW",
            RelayFailure::Truncated => "upstream_truncated",
            RelayFailure::IdleTimeout => "upstream_idle_timeout",
            RelayFailure::ExecutionTimeout => "execution_timeout",
            RelayFailure::ReadinessTimeout => "stream_readiness_timeout",
            RelayFailure::TotalTimeout => "stream_total_timeout",
            RelayFailure::Reset => "upstream_reset",
            RelayFailure::Shutdown => "shutdown",
        }
    }

    /// A wait that ran out (silence, a slow stream, the stream's time limits), as opposed to a
    /// broken connection or body.
    pub fn is_timeout(self) -> bool {
        matches!(
            self,
            RelayFailure::IdleTimeout
                | RelayFailure::ThroughputTooLow
                | RelayFailure::ReadinessTimeout
                | RelayFailure::TotalTimeout
                | RelayFailure::ExecutionTimeout
        )
    }

    /// The attempt outcome it counts as: the stream's own failures, or a transport one.
    pub fn outcome(self) -> crate::audit::AttemptOutcome {
        match self {
            RelayFailure::Shutdown => crate::audit::AttemptOutcome::Shutdown,
            RelayFailure::NoTerminal
            | RelayFailure::ThroughputTooLow
            | RelayFailure::ReadinessTimeout
            | RelayFailure::TotalTimeout => crate::audit::AttemptOutcome::StreamError,
            _ => crate::audit::AttemptOutcome::Reset,
        }
    }

    /// The attempt outcome of a failure before anything reached the client: its connection
    /// reset, or anything else about the answer that broke.
    pub fn outcome_uncommitted(self) -> crate::audit::AttemptOutcome {
        match self {
            RelayFailure::Reset => crate::audit::AttemptOutcome::Reset,
            _ => crate::audit::AttemptOutcome::ProtocolError,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RelayFailure::{self, *};
    use crate::audit::AttemptOutcome;

    #[test]
    fn codes_and_outcomes_are_as_before() {
        let all = [
            BadFraming,
            NoTerminal,
            ClientSendTimeout,
            ThroughputTooLow,
            Truncated,
            IdleTimeout,
            ExecutionTimeout,
            ReadinessTimeout,
            TotalTimeout,
            Reset,
        ];
        assert_eq!(Shutdown.outcome(), AttemptOutcome::Shutdown);
        for f in all {
            let s = f.as_str();
            // The rule the strings were judged by before they were an enum.
            let was_stream = s.starts_with("stream_")
                || s == "upstream_no_terminal"
                || s == "STREAM_THROUGHPUT_TOO_LOW";
            let want = if was_stream {
                AttemptOutcome::StreamError
            } else {
                AttemptOutcome::Reset
            };
            assert_eq!(f.outcome(), want, "{s}");
        }
        assert_eq!(RelayFailure::ExecutionTimeout.as_str(), "execution_timeout");
    }
}
