//! A provider's `GOAWAY` as the operator hears of it: counted by kind on each core
//! (`ringside_upstream_h2_goaways_total`), one warn line for those with an error (paced per
//! core), and a mark on the connection when the server minded Ringside's PINGs.

use super::super::shared::Shared;
use crate::http::h2frame::Reason;

/// Each core tells of a `GOAWAY` with an error at most once per this many ms.
const TELL_EVERY_MS: u64 = 10_000;

thread_local! {
    /// When this core last told of one, and how many it has not told of since.
    static TOLD: std::cell::Cell<(Option<u64>, u64)> = const { std::cell::Cell::new((None, 0)) };
    /// GOAWAYs this core received, by `metrics::upstream::GOAWAY_KINDS`.
    static RECEIVED: std::cell::Cell<[u64; 3]> = const { std::cell::Cell::new([0; 3]) };
}

/// The GOAWAYs this core received since start (graceful, too many PINGs, another error), for
/// its tick to publish.
pub fn goaways_received() -> [u64; 3] {
    RECEIVED.with(std::cell::Cell::get)
}

/// A GOAWAY received: counted, told when it carries an error, and, when it was for too many
/// PINGs, marked on the connection for the pool to PING the provider less.
pub(super) fn received(shared: &Shared, reason: Reason, debug: &[u8]) {
    let pings = reason == Reason::ENHANCE_YOUR_CALM && debug == b"too_many_pings";
    let kind = match reason {
        Reason::NO_ERROR => 0,
        _ if pings => 1,
        _ => 2,
    };
    RECEIVED.with(|r| {
        let mut counts = r.get();
        counts[kind] += 1;
        r.set(counts);
    });
    if pings {
        // (A later GOAWAY on the same connection does not take it back.)
        shared.too_many_pings.set(true);
    }
    if reason == Reason::HTTP_1_1_REQUIRED {
        shared.wants_http1.set(true);
    }
    if reason != Reason::NO_ERROR {
        told_to_go_away(&shared.origin, reason, debug, pings);
    }
}

/// A `GOAWAY` with an error is news for the operator (a graceful one, `NO_ERROR`, is not): a
/// warn line with the server's code and its debug text (printable ASCII, at most 120 bytes),
/// at most one per core every 10 s (with the count of those not told since).
fn told_to_go_away(origin: &str, reason: Reason, debug: &[u8], pings: bool) {
    let text: String = debug
        .iter()
        .take(120)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    // A server that sends every new connection away must not write a line per connection.
    let Some(untold) = TOLD.with(|t| {
        let (last, untold) = t.get();
        let now = crate::clock::now_ms();
        if last.is_some_and(|at| now.saturating_sub(at) < TELL_EVERY_MS) {
            t.set((last, untold + 1));
            None
        } else {
            t.set((Some(now), 0));
            Some(untold)
        }
    }) else {
        return;
    };
    crate::log::event(
        "warn",
        "a provider's server told an HTTP/2 connection to go away with an error",
        serde_json::json!({
            "origin": origin,
            "code": reason.to_string(),
            "debug": text,
            "untold_since_the_last_line": untold,
            "then": if pings {
                "its next connections on this core are PINGed half as often"
            } else {
                "its unstarted streams are sent again; the others run to their end"
            },
        }),
    );
}

#[cfg(test)]
mod goaway_tests {
    use super::super::tests::{feed, link};

    #[test]
    fn a_goaway_with_an_error_is_told_with_its_text_made_safe() {
        let goaway = |code: u32, debug: &[u8]| {
            let len = 8 + debug.len();
            let mut g = vec![0, (len >> 8) as u8, len as u8, 7, 0, 0, 0, 0, 0];
            g.extend_from_slice(&0u32.to_be_bytes());
            g.extend_from_slice(&code.to_be_bytes());
            g.extend_from_slice(debug);
            g
        };
        crate::log::start_capture();
        let l = link();
        feed(&l, &goaway(11, b"too_many_pings")).expect("goaway");
        assert!(l.shared.too_many_pings.get(), "said in gRPC's words");
        // Within 10 s of that line: counted, not told, yet the connection is marked.
        let l = link();
        feed(&l, &goaway(11, b"too_many_pings")).expect("goaway");
        assert!(l.shared.too_many_pings.get());
        // Later, a server's text reaches the log as printable ASCII only.
        super::TOLD.with(|t| t.set((None, t.get().1)));
        let l = link();
        feed(&l, &goaway(11, b"too_many_pings\x1b[2J\n")).expect("goaway");
        assert!(!l.shared.too_many_pings.get(), "not those words");
        // A graceful one is no news.
        super::TOLD.with(|t| t.set((None, 0)));
        let l = link();
        feed(&l, &goaway(0, b"max_age")).expect("goaway");
        let told: Vec<_> = crate::log::take_captured()
            .into_iter()
            .filter(|m| m["msg"].as_str().is_some_and(|s| s.contains("go away")))
            .collect();
        crate::log::stop_capture();
        assert_eq!(told.len(), 2, "{told:?}");
        assert_eq!(told[0]["code"], "ENHANCE_YOUR_CALM");
        assert_eq!(told[0]["debug"], "too_many_pings");
        assert_eq!(told[1]["untold_since_the_last_line"], 1);
        // Each counted by its kind (this test's thread is its own core).
        assert_eq!(super::goaways_received(), [1, 2, 1]);
        assert_eq!(told[1]["debug"], "too_many_pings?[2J?");
    }
}
