//! The status page (`GET /` on the admin port) in a real headless browser: Chromium from the
//! Debian packages (installed if missing), driven by Playwright (pinned in
//! tests/watch/requirements.txt) through tests/watch/check_status_page.py.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::process::Command;

/// An upstream whose every answer is a 500 whose message holds markup.
fn markup_in_errors() -> RawUpstream {
    let body = r#"{"error":{"message":"<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">","type":"server_error"}}"#;
    let answer = format!(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    raw_upstream(answer.into_bytes(), false)
}

/// The status page in a real browser (tests/watch/check_status_page.py): Chromium from the
/// Debian packages (installed here if missing), driven by Playwright. The screenshot lands in
/// `target/status-page.png`.
#[test]
fn the_status_page_shows_state_live_escapes_upstream_text_and_resets() {
    common::apt::ensure("chromium", "chromium");
    let python = common::venv::python("watch-venv", "tests/watch/requirements.txt")
        .unwrap_or_else(|e| panic!("python environment: {e}"));
    let sim = start_sim(SimOptions {
        faults: vec![parse_fault_arg("key:sk-sim-a=429;retry-after=300").expect("fault")],
        ..SimOptions::default()
    });
    let evil = markup_in_errors();
    let body = priority_keys(sim.addr, &["a", "b"], "")
        + &openai_provider("evil", evil.addr, &[("e", "SIM_KEY_C")], "\"x\"")
        + "[[tenants]]\nid = \"team-red\"\ntokens_per_day = 1000\n";
    let proxy = Proxy::start("uring", 2, "", &body);
    // The same config on a port without a token: read-only.
    let read_only = Proxy::start("uring", 1, "# no admin token", &body);
    // Key a is cooling (its 429), b serves.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200);
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap_or(std::path::Path::new("target"))
        .join("status-page.png");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/watch/check_status_page.py"
    );
    let out = Command::new(python)
        .args([
            script,
            &format!("http://{}", proxy.admin),
            &format!("http://{}", proxy.addr),
            ADMIN_TOKEN,
            shot.to_str().unwrap_or("status-page.png"),
            &format!("http://{}", read_only.admin),
        ])
        .output()
        .expect("run the browser check");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("status page checks passed"), "{said}");
    assert!(shot.exists());
}
