//! A malformed answer from an HTTP/2 provider, end to end on both drivers through the
//! simulator's TLS front: an answer longer than its `content-length` (RFC 9113 §8.1.1) fails
//! its attempt before the client has any of it, and the request goes again. Read to its
//! length and passed on, the client would get the first half of an answer as all of it.

use super::h2::{count, metric_sum, sim_opts};
use crate::both_drivers;
use crate::common::sim_tls::SimTls;
use crate::common::*;
use ringside::simulate::front::H2Faults;

both_drivers!(an_answer_longer_than_its_length_goes_again,);

fn an_answer_longer_than_its_length_goes_again(driver: &str) {
    // Every second stream's answer says half its length and sends all of it.
    let faults = H2Faults {
        short_length_every: 2,
        ..Default::default()
    };
    let sim = SimTls::start(sim_opts(3, 0), true, faults);
    // Neither the breaker nor a cooldown in the way: what the request does next is the
    // failure's own rule (another key).
    let quiet = "  [providers.breaker]\n  open_at = 1000\n  [providers.cooldown]\n  base_ms = 0\n";
    let config = sim.config("auto", "m") + quiet;
    let proxy = Proxy::start(driver, 1, "# access log to file", &config);
    let mut attempts = Vec::new();
    for i in 0..4 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200, "request {i}: {}", r.text());
        attempts.push(
            r.header("x-ringside-attempts")
                .unwrap_or_default()
                .to_string(),
        );
        let answer: serde_json::Value = serde_json::from_str(&r.text())
            .unwrap_or_else(|e| panic!("request {i}, not the whole answer ({e}): {}", r.text()));
        assert!(
            answer["choices"][0]["message"]["content"].is_string(),
            "request {i}: {answer}"
        );
    }
    // Streams 2, 4 and 6 were the malformed ones, each followed by its request's next attempt.
    assert_eq!(count(&sim.front(), "streams"), 7, "{}", sim.front());
    let m = proxy.metrics();
    let reset = metric_sum(
        &m,
        "ringside_upstream_attempts_total",
        &["outcome=\"reset\""],
    );
    assert_eq!(reset, 3.0, "{m}");
    assert!(attempts[0].starts_with("1;"), "{attempts:?}");
    for a in &attempts[1..] {
        assert!(
            a.starts_with("2;") && a.contains(" - transport next; "),
            "{attempts:?}"
        );
    }
}
