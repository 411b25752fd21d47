//! What an HTTP/2 stream's failure before its answer means for the request: a stream the
//! provider refused unprocessed (`REFUSED_STREAM`, or above a `GOAWAY`'s last stream id) is
//! sent again on another stream, blaming no key; a connection that failed under many streams
//! counts once against the provider (its first stream to report it), not once per stream,
//! before the commit and after it.

use super::exchange::{AttemptEnd, Failed};
use crate::upstream::h2::stream::{Failure, H2Stream};

/// An attempt's end on `up`, its failure judged as its HTTP/2 stream's (if it was one): before
/// the head, or after it and before the commit (an error answer's body, a held stream, an
/// answer read whole).
pub(super) fn judged(up: &crate::upstream::UpConn, mut end: AttemptEnd) -> AttemptEnd {
    if let AttemptEnd::Failed(f) = &mut end
        && let Some(s) = up.stream.h2()
    {
        judge(f, s);
    }
    end
}

fn judge(f: &mut Failed, s: &H2Stream) {
    match s.failure() {
        Some(Failure::Refused) => {
            // Never reached the model: a safe retry of the same candidate, as a stale pooled
            // connection's is.
            f.stale_pooled = true;
            f.self_inflicted = true;
            f.kind = crate::audit::AttemptOutcome::Refused;
        }
        Some(Failure::ConnectionLost) if s.tls_refused() => {
            // Not the connection's bad luck: every connection to the provider presents the
            // same certificate (`proxy::attempt`'s `HeadFail::TlsRefused` over HTTP/1.1).
            use crate::resilience::classify::{Reason, refused_on_the_way};
            f.verdict = refused_on_the_way(Reason::TlsRefused);
            f.kind = crate::audit::AttemptOutcome::TlsError;
            f.self_inflicted = !s.first_to_report();
        }
        Some(Failure::ConnectionLost) => {
            // The connection was lost, not the key tried out: the key may take the request
            // again on another connection (its siblings all failing at once would otherwise
            // leave each request only the other keys, waiting out their cooldowns).
            f.stale_pooled = true;
            if !s.first_to_report() {
                f.self_inflicted = true;
                f.detail = format!("{} (its connection's failure, counted once)", f.detail);
            }
        }
        _ => {}
    }
}

/// A stream that failed after its commit because its connection did: judged once per
/// connection (its first stream to report it), its siblings' same failure not counted again.
pub(super) fn after_commit(delivered: &mut super::exchange::Delivered, s: &H2Stream) {
    use super::exchange::Delivered;
    if matches!(delivered, Delivered::Failed(_)) && !s.first_to_report() {
        *delivered = Delivered::Unjudged;
    }
}
