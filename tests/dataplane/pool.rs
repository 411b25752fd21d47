//! The per-core upstream pool's rules, end to end against a scripted raw upstream that keeps
//! every connection open and counts them: an answer that says `Connection: close`, or that
//! carries bytes past its body's end, never puts its connection back; a pooled connection
//! idle past `pool_idle_timeout_ms` is not used again; `pool_max_idle_per_upstream = 0` pools
//! nothing.

use crate::both_drivers;
use crate::common::*;
use std::sync::atomic::Ordering;
use std::time::Duration;

both_drivers!(
    upstream_connection_close_is_not_pooled,
    bytes_past_the_body_end_keep_a_connection_out_of_the_pool,
    pooled_connection_expires_after_its_idle_timeout,
    no_pool_when_max_idle_is_zero,
    unsolicited_bytes_on_an_idle_connection_keep_it_out_of_use,
);

const BODY: &[u8] = b"{\"ok\":true}";

/// A Content-Length answer with `extra_headers`, then `trailing` bytes the head did not count.
fn answer(extra_headers: &str, trailing: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra_headers}\r\n",
        BODY.len()
    )
    .into_bytes();
    r.extend_from_slice(BODY);
    r.extend_from_slice(trailing);
    r
}

fn pool_proxy(driver: &str, up: &RawUpstream, upstream_section: &str) -> Proxy {
    let body = format!(
        "[upstream]\n{upstream_section}\n[[providers]]\nid = \"raw\"\ndialect = \"openai\"\nbase_url = \"http://{}/v1\"\n  [[providers.connections]]\n  id = \"k\"\n  key_env = \"SIM_KEY_A\"\n  models = [\"m\"]\n",
        up.addr
    );
    // One core: one pool, so the counts below are exact.
    Proxy::start(driver, 1, "", &body)
}

/// `n` requests one after another, each answered 200 with the upstream's body intact.
fn requests(proxy: &Proxy, n: usize, pause: Duration) {
    for i in 0..n {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200, "request {i}: {}", r.text());
        assert_eq!(r.body, BODY, "request {i}");
        assert_eq!(attempt_count(&r), 1, "request {i}");
        std::thread::sleep(pause);
    }
}

fn upstream_connection_close_is_not_pooled(driver: &str) {
    // The upstream says close but leaves the socket open: reusing it would still "work", so
    // only the connection count shows whether the header was honoured.
    let up = raw_upstream(answer("connection: close\r\n", b""), false);
    let proxy = pool_proxy(driver, &up, "");
    requests(&proxy, 3, Duration::ZERO);
    assert_eq!(up.connections.load(Ordering::SeqCst), 3);
}

fn bytes_past_the_body_end_keep_a_connection_out_of_the_pool(driver: &str) {
    // Garbage after the counted body: the next answer on that connection would be corrupt.
    let up = raw_upstream(answer("", b"HTTP/1.1 418 garbage\r\n\r\n"), false);
    let proxy = pool_proxy(driver, &up, "");
    requests(&proxy, 3, Duration::ZERO);
    assert_eq!(up.connections.load(Ordering::SeqCst), 3);
}

fn pooled_connection_expires_after_its_idle_timeout(driver: &str) {
    let up = raw_upstream(answer("", b""), false);
    let proxy = pool_proxy(driver, &up, "pool_idle_timeout_ms = 300");
    // Within the timeout: one connection for both.
    requests(&proxy, 2, Duration::ZERO);
    assert_eq!(up.connections.load(Ordering::SeqCst), 1);
    // Past it (twice over, for a loaded machine): a fresh one.
    std::thread::sleep(Duration::from_millis(700));
    requests(&proxy, 1, Duration::ZERO);
    assert_eq!(up.connections.load(Ordering::SeqCst), 2);
}

fn no_pool_when_max_idle_is_zero(driver: &str) {
    let up = raw_upstream(answer("", b""), false);
    let proxy = pool_proxy(driver, &up, "pool_max_idle_per_upstream = 0");
    requests(&proxy, 3, Duration::ZERO);
    assert_eq!(up.connections.load(Ordering::SeqCst), 3);
}

fn unsolicited_bytes_on_an_idle_connection_keep_it_out_of_use(driver: &str) {
    // After its answer the upstream sends a whole second response nobody asked for, while the
    // connection idles in the pool. Reusing it would hand that stale answer to the next client.
    use std::io::Write;
    let up = scripted_upstream(|s| {
        if s.write_all(&answer("", b"")).is_err() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
        let stale = b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\nstale!!";
        s.write_all(stale).is_ok()
    });
    let proxy = pool_proxy(driver, &up, "");
    requests(&proxy, 3, Duration::from_millis(300));
}
