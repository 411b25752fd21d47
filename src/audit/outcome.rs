//! What an attempt and a request came to, as enums. The strings they print as (`as_str`, and
//! serde through it) are the wire format of the access log, `x-ringside-attempts`, the admin API
//! and the metric labels; a unit test pins every one of them.

use serde::{Serialize, Serializer};

/// How one upstream attempt ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    #[default]
    Ok,
    Http4xx,
    Http429,
    Http5xx,
    StreamError,
    StreamReadinessTimeout,
    DnsError,
    ConnectError,
    ConnectTimeout,
    TlsError,
    Timeout,
    ExecutionTimeout,
    Reset,
    ClientGone,
    ProtocolError,
    /// Cut by the server's drain (its grace ended).
    Shutdown,
    /// This host had no descriptor or port for the upstream connection: nothing was sent, and
    /// nothing is learned about the upstream.
    LocalResources,
    /// The provider refused the request unprocessed (HTTP/2 `REFUSED_STREAM`, or above a
    /// `GOAWAY`'s last stream): sent again, blaming no key.
    Refused,
    /// The provider's egress proxy refused the tunnel: nothing reached the provider.
    EgressRefused,
}

impl AttemptOutcome {
    /// Every outcome, in the order of the attempts metric's counters.
    pub const ALL: [AttemptOutcome; 19] = [
        AttemptOutcome::Ok,
        AttemptOutcome::Http4xx,
        AttemptOutcome::Http429,
        AttemptOutcome::Http5xx,
        AttemptOutcome::StreamError,
        AttemptOutcome::StreamReadinessTimeout,
        AttemptOutcome::DnsError,
        AttemptOutcome::ConnectError,
        AttemptOutcome::ConnectTimeout,
        AttemptOutcome::TlsError,
        AttemptOutcome::Timeout,
        AttemptOutcome::ExecutionTimeout,
        AttemptOutcome::Reset,
        AttemptOutcome::ClientGone,
        AttemptOutcome::ProtocolError,
        AttemptOutcome::Shutdown,
        AttemptOutcome::LocalResources,
        AttemptOutcome::Refused,
        AttemptOutcome::EgressRefused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Ok => "ok",
            AttemptOutcome::Http4xx => "http_4xx",
            AttemptOutcome::Http429 => "http_429",
            AttemptOutcome::Http5xx => "http_5xx",
            AttemptOutcome::StreamError => "stream_error",
            AttemptOutcome::StreamReadinessTimeout => "stream_readiness_timeout",
            AttemptOutcome::DnsError => "dns_error",
            AttemptOutcome::ConnectError => "connect_error",
            AttemptOutcome::ConnectTimeout => "connect_timeout",
            AttemptOutcome::TlsError => "tls_error",
            AttemptOutcome::Timeout => "timeout",
            AttemptOutcome::ExecutionTimeout => "execution_timeout",
            AttemptOutcome::Reset => "reset",
            AttemptOutcome::ClientGone => "client_gone",
            AttemptOutcome::ProtocolError => "protocol_error",
            AttemptOutcome::Shutdown => "shutdown",
            AttemptOutcome::LocalResources => "local_resources",
            AttemptOutcome::Refused => "refused",
            AttemptOutcome::EgressRefused => "egress_refused",
        }
    }

    /// The outcome of an HTTP error answer with this status.
    pub fn of_status(status: u16) -> AttemptOutcome {
        match status {
            429 => AttemptOutcome::Http429,
            s if s >= 500 => AttemptOutcome::Http5xx,
            s if s >= 400 => AttemptOutcome::Http4xx,
            _ => AttemptOutcome::Ok,
        }
    }

    /// Its place among the attempts metric's counters.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What was decided after an attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Decision {
    /// This answer goes to the client (JSON or stream); nothing is retried after its first byte.
    #[default]
    Deliver,
    /// On to the next candidate.
    Next,
    /// Answer the client with this failure.
    Fail,
    /// A non-retryable answer, passed through untouched.
    PassThrough,
    /// Sent to the same account again at once or after a wait, on the word of its usage
    /// wall (the record's `via` says why); no cooldown.
    SameAccount,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Deliver => "deliver",
            Decision::Next => "next",
            Decision::Fail => "fail",
            Decision::PassThrough => "pass_through",
            Decision::SameAccount => "same_account",
        }
    }
}

/// How a whole request ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Outcome {
    /// Not recorded yet (printed as an empty string).
    #[default]
    Unset,
    Ok,
    /// Refused by Ringside itself (bad input, a key, a quota, a lease, local overload).
    Rejected,
    /// The attempt budget was spent; the last failure was answered.
    Failed,
    /// A non-retryable upstream answer was passed through.
    PassedThrough,
    /// The answer began and then failed (after commit, never replayed).
    FailedAfterCommit,
    ClientGone,
    /// Still running when the drain's grace ended: cut, with an error event.
    Shutdown,
    /// A duplicate under an `Idempotency-Key`: the first request's answer, sent again.
    Replayed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Unset => "",
            Outcome::Ok => "ok",
            Outcome::Rejected => "rejected",
            Outcome::Failed => "failed",
            Outcome::PassedThrough => "passed_through",
            Outcome::FailedAfterCommit => "failed_after_commit",
            Outcome::ClientGone => "client_gone",
            Outcome::Shutdown => "shutdown",
            Outcome::Replayed => "replayed",
        }
    }
}

macro_rules! serialize_as_str {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    )*};
}
serialize_as_str!(AttemptOutcome, Decision, Outcome);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_on_the_wire_is_pinned() {
        let names: Vec<&str> = AttemptOutcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(
            names,
            [
                "ok",
                "http_4xx",
                "http_429",
                "http_5xx",
                "stream_error",
                "stream_readiness_timeout",
                "dns_error",
                "connect_error",
                "connect_timeout",
                "tls_error",
                "timeout",
                "execution_timeout",
                "reset",
                "client_gone",
                "protocol_error",
                "shutdown",
                "local_resources",
                "refused",
                "egress_refused",
            ]
        );
        for (i, o) in AttemptOutcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
        let d: Vec<&str> = [
            Decision::Deliver,
            Decision::Next,
            Decision::Fail,
            Decision::PassThrough,
            Decision::SameAccount,
        ]
        .iter()
        .map(|d| d.as_str())
        .collect();
        assert_eq!(
            d,
            ["deliver", "next", "fail", "pass_through", "same_account"]
        );
        let o: Vec<String> = [
            Outcome::Unset,
            Outcome::Ok,
            Outcome::Rejected,
            Outcome::Failed,
            Outcome::PassedThrough,
            Outcome::FailedAfterCommit,
            Outcome::ClientGone,
        ]
        .iter()
        .map(|o| serde_json::to_string(o).unwrap_or_default())
        .collect();
        assert_eq!(
            o,
            [
                "\"\"",
                "\"ok\"",
                "\"rejected\"",
                "\"failed\"",
                "\"passed_through\"",
                "\"failed_after_commit\"",
                "\"client_gone\""
            ]
        );
        assert_eq!(AttemptOutcome::of_status(429), AttemptOutcome::Http429);
        assert_eq!(AttemptOutcome::of_status(503), AttemptOutcome::Http5xx);
        assert_eq!(AttemptOutcome::of_status(404), AttemptOutcome::Http4xx);
    }
}
