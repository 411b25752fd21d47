//! HTTP/2 to a provider served by another implementation than ours and the simulator's: Node's
//! `http2` (nghttp2, as curl and many edges use; `tests/fixtures/h2_provider.mjs`). Its answers
//! are Huffman-coded and indexed in its dynamic table, it paces its own windows, and it closes
//! sessions gracefully with GOAWAY while requests are in flight. Every stream comes back
//! whole, over HTTP/2 only, a 300 KB prompt goes as its windows open, a rate-limited key is
//! failed over as over HTTP/1.1, and an answer read to its length is not cancelled while its
//! END_STREAM is on its way.

use crate::both_drivers;
use crate::common::sim_tls::{certificates, tls_provider_config};
use crate::common::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

both_drivers!(
    nghttp2_as_the_provider,
    a_server_limit_of_five_streams_is_honoured
);

/// The Node provider, stopped when dropped (its stdin closes, and it is killed).
struct NodeProvider {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    port: u16,
    ca_file: std::path::PathBuf,
    _dir: tempdir::Dir,
}

impl NodeProvider {
    /// Started with `close_after` streams per session before a graceful close (0: never), and
    /// `max_streams` at once per session.
    fn start(close_after: usize, max_streams: usize) -> NodeProvider {
        apt::ensure("node", "nodejs");
        let dir = tempdir::new();
        let (ca_file, cert, key) = certificates(&dir.0);
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/h2_provider.mjs"
        );
        let mut child = Command::new("node")
            .args([script, &cert, &key])
            .env("CLOSE_AFTER", close_after.to_string())
            .env("MAX_STREAMS", max_streams.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("node runs (the tests need Node.js)");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("its port");
        let port = line.trim().parse().expect("a port number");
        NodeProvider {
            child,
            stdin,
            stdout,
            port,
            ca_file,
            _dir: dir,
        }
    }

    /// What it saw so far.
    fn seen(&mut self) -> serde_json::Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(b"seen\n").expect("ask");
        stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("an answer");
        serde_json::from_str(&line).expect("JSON")
    }

    /// A provider there (`http2 = "auto"`, the default), keys a and b serving `m`.
    fn config(&self) -> String {
        tls_provider_config(&self.ca_file, self.port, "auto", "m")
    }
}

impl Drop for NodeProvider {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nghttp2_as_the_provider(driver: &str) {
    // Each session closed after 40 streams: a burst of 200 meets several GOAWAYs.
    let mut node = NodeProvider::start(40, 100);
    let proxy = Proxy::start(driver, 2, "", &node.config());

    // A JSON answer, its provider's headers relayed; key a is rate limited (429, retry-after),
    // so a request that meets it is answered by key b.
    for _ in 0..4 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.text().contains("hello over nghttp2"), "{}", r.text());
        assert_eq!(r.header("openai-version"), Some("2020-10-01"));
        assert!(r.header("x-ratelimit-remaining-requests").is_some());
        assert!(r.header("set-cookie").is_some_and(|c| c.len() > 120));
    }

    // A 300 KB prompt: more than nghttp2's first window, sent as its WINDOW_UPDATEs open it.
    let prompt = "x".repeat(300_000);
    let large = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{prompt}"}}]}}"#);
    let r = proxy.post("/v1/chat/completions", &[], &large);
    assert_eq!(r.status, 200, "{}", r.text());

    // Nine answers of 4 MiB each: more than a stream's receive window (1 MiB) each, and more
    // than a connection's whole window (16 MiB) on one of the two connections (one a core)
    // they share: both windows must be given back as they are read, or an answer stalls.
    let long = r#"{"model":"m","messages":[{"role":"user","content":"a long answer"}]}"#;
    for _ in 0..9 {
        let r = proxy.post("/v1/chat/completions", &[], long);
        assert_eq!(r.status, 200);
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("the answer whole");
        let content = v["choices"][0]["message"]["content"].as_str().unwrap_or("");
        assert_eq!(content.len(), 4 << 20);
    }

    let whole = super::h2::streams_at_once(&proxy, 200);
    assert_eq!(whole, 200, "every stream whole through the graceful closes");

    let seen = node.seen();
    assert_eq!(seen["bad_requests"], 0, "{seen}");
    let versions = seen["versions"].as_object().expect("versions");
    assert_eq!(versions.keys().collect::<Vec<_>>(), ["2.0"], "{seen}");
    let count = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    // Key a answered 429 and cooled for 30 s: met at most once per core before the cooldown
    // reached both.
    assert!(count(&seen["keys"]["sk-sim-a"]) <= 2, "{seen}");
    // Each request served once: a stream above a GOAWAY's last one never reached it and went
    // again on another session (an attempt `refused`, blaming no key), the rest ran to their end.
    assert_eq!(count(&seen["keys"]["sk-sim-b"]), 214, "{seen}");
    assert_eq!(
        count(&seen["largest_body"]),
        large.len() as u64,
        "the prompt whole: {seen}"
    );
    let m = proxy.metrics();
    let attempts = |outcome: &str| {
        super::h2::metric_sum(
            &m,
            "ringside_upstream_attempts_total",
            &["connection=\"b\"", &format!("outcome=\"{outcome}\"")],
        )
    };
    assert_eq!(attempts("ok"), 214.0, "{m}");
    let refused = attempts("refused");
    let blamed = super::h2::metric_sum(&m, "ringside_connection_transitions_total", &["\"b\""])
        + super::h2::metric_sum(&m, "ringside_breaker_transitions_total", &[]);
    assert_eq!(
        blamed, 0.0,
        "no key cooled and no breaker moved for the closes: {m}"
    );
    // 214 streams at about 40 a session (more where a close met streams already sent): closed
    // sessions were replaced, and the streams shared a few.
    let sessions = count(&seen["sessions"]);
    assert!((2..=40).contains(&sessions), "{seen}");
    assert!(
        count(&seen["most_open"]) >= 2,
        "streams multiplexed: {seen}"
    );
    // The server's PINGs answered (one per session; a session closed before its answer came
    // counts none, so on a loaded machine not every one need have).
    let pings = count(&seen["pings_answered"]);
    assert!(pings >= 1, "{seen}");
    // The JSON answers' END_STREAM came 20 ms after their bodies: each stream was left to end,
    // not reset, and none is counted open once it did.
    assert_eq!(
        count(&seen["cancelled"]),
        0,
        "answered streams reset: {seen}"
    );
    let streams_open = || {
        let m = proxy.metrics();
        super::h2::metric_sum(&m, "ringside_upstream_h2_streams ", &[])
    };
    // Counted as of each core's last tick: a generous wait for every core's next one.
    let deadline = Instant::now() + Duration::from_secs(20);
    while streams_open() != 0.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(streams_open(), 0.0, "every stream closed once it ended");
    eprintln!(
        "nghttp2: {sessions} sessions, {pings} PINGs answered, {refused} attempts refused by a GOAWAY and sent again"
    );
}

/// A server that takes 5 streams at a time on a session (its SETTINGS say so): 60 streams at
/// once all come back whole, on about a dozen connections, with no key blamed and none
/// refused: the requests that come while a connection opens wait for its server's SETTINGS
/// (the provider never said its limit before) rather than go over the limit.
fn a_server_limit_of_five_streams_is_honoured(driver: &str) {
    let mut node = NodeProvider::start(0, 5);
    // Key b a backup: a is tried first, until its 429 cools it.
    let config = node
        .config()
        .replace("id = \"b\"\n", "id = \"b\"\n  priority = 1\n");
    let proxy = Proxy::start(driver, 2, "", &config);
    // A 300 KB prompt meets key a's 429, answered before its body was read (a window's worth
    // sent): the rest is not sent there, and the whole prompt goes to key b.
    let prompt = "x".repeat(300_000);
    let large = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{prompt}"}}]}}"#);
    let r = proxy.post("/v1/chat/completions", &[], &large);
    assert_eq!(r.status, 200, "{}", r.text());
    let seen = node.seen();
    let count = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    assert_eq!(count(&seen["keys"]["sk-sim-a"]), 1, "{seen}");
    assert_eq!(count(&seen["largest_body"]), large.len() as u64, "{seen}");

    let whole = super::h2::streams_at_once(&proxy, 60);
    let seen = node.seen();
    let m = proxy.metrics();
    assert_eq!(whole, 60, "{seen} {m}");
    assert!(count(&seen["most_open"]) <= 5, "{seen}");
    // Twelve sessions carry 60 streams five at a time; more may have been opened while others
    // were full.
    let sessions = count(&seen["sessions"]);
    assert!((12..=60).contains(&sessions), "{seen}");
    let blamed = super::h2::metric_sum(&m, "ringside_connection_transitions_total", &["\"b\""])
        + super::h2::metric_sum(&m, "ringside_breaker_transitions_total", &[]);
    assert_eq!(blamed, 0.0, "{m}");
    let refused = super::h2::metric_sum(
        &m,
        "ringside_upstream_attempts_total",
        &["outcome=\"refused\""],
    );
    // Streams waited for each new session's SETTINGS (the first on each core) or went by the
    // limit the last one gave: none was sent over it to be refused (151 were before).
    assert_eq!(refused, 0.0, "{m}");
    eprintln!("a limit of 5: {sessions} sessions");
}
