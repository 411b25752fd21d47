//! Operating Ringside as a proxy: the command line refuses misuse and says its version; SIGTERM
//! drains in the order load balancers need (`/readyz` 503 while the port still accepts, then
//! refused connections, in-flight streams finishing within the grace, a cut counted in the
//! exit status, each cut stream ending with its error event, a request still waiting for its
//! upstream answered); SIGHUP never ends the process;
//! a start right after SIGKILL always works.

mod common;
use common::*;
use ringside::simulate::SimOptions;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_command_line_says_its_version_and_refuses_misuse_without_serving() {
    let dir = tempdir::new();
    // A config in the working directory that would start a live proxy if misuse fell through.
    let (p, a) = (port(), port());
    let cfg = format!(
        "[server]\nlisten = \"127.0.0.1:{p}\"\nadmin_listen = \"127.0.0.1:{a}\"\ndata_dir = \"data\"\n[[providers]]\nid = \"x\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n  [[providers.connections]]\n  id = \"a\"\n  key_env = \"SIM_KEY_A\"\n"
    );
    std::fs::write(dir.0.join("ringside.toml"), cfg).expect("write");
    let v = ringside(&["--version"], &dir.0);
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(
        v.status.success() && text.contains("commit:") && text.contains("pgo:"),
        "{text}"
    );
    assert!(ringside(&["-V"], &dir.0).status.success());
    for misuse in [
        &["--bogus"][..],
        &["frobnicate"],
        &["serve", "--bogus"],
        &["check", "--conf", "x"],
    ] {
        let out = ringside(misuse, &dir.0);
        assert_eq!(out.status.code(), Some(2), "{misuse:?}");
    }
    // Nothing was started by any of them.
    assert!(std::net::TcpStream::connect(addr(p)).is_err());
    for sub in [
        "serve", "check", "simulate", "drain", "reload", "status", "demo",
    ] {
        let out = ringside(&[sub, "--help"], &dir.0);
        assert!(out.status.success(), "{sub} --help");
    }
    // The help names the variables the code reads, and no other.
    let help = ringside(&["serve", "--help"], &dir.0);
    let help = String::from_utf8_lossy(&help.stdout);
    for name in [
        "RINGSIDE_CONFIG",
        "RINGSIDE_LISTEN",
        "RINGSIDE_WORKERS",
        "RINGSIDE_DATA_DIR",
        "RINGSIDE_LOG",
        "RINGSIDE_RATE_LIMIT_MAX_WAIT_MS",
    ] {
        assert!(help.contains(name), "{name}: {help}");
    }
    assert!(!help.contains("RINGSIDE_MAX_WAIT_MS"), "{help}");
}

fn readyz(proxy: &Proxy) -> Option<u16> {
    ringside::demo::client::request(proxy.admin, "GET", "/readyz", &[], b"", T)
        .ok()
        .map(|r| r.status)
}

fn signal(proxy: &Proxy, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(proxy.child.id() as i32, sig);
    }
}

fn wait_exit(proxy: &mut Proxy, within: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + within;
    loop {
        if let Ok(Some(s)) = proxy.child.try_wait() {
            return s;
        }
        assert!(Instant::now() < until, "ringside did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start a stream and read until its first event.
fn open_stream(proxy: &Proxy) -> std::net::TcpStream {
    let mut s = raw_client(proxy.addr);
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(raw_chat("m", true).as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut tmp = [0u8; 4096];
    while !got.windows(6).any(|w| w == b"data: ") {
        let n = s.read(&mut tmp).expect("read");
        assert!(n > 0, "closed before the first event");
        got.extend_from_slice(&tmp[..n]);
    }
    s
}

/// Two tests can be handed the same free port number; the harness then must not take
/// another test's server for its own. It tells them apart by the data directory the admin API
/// reports (`common::someone_else_s`).
#[test]
fn the_harness_tells_its_own_server_from_another_on_the_same_port() {
    let (_sim, proxy) = drain_proxy("epoll", 1, "");
    assert!(!someone_else_s(proxy.admin, &proxy.dir.0.join("data")));
    let other = tempdir::new();
    assert!(someone_else_s(proxy.admin, &other.0.join("data")));
}

fn drain_proxy(driver: &str, events: u32, server: &str) -> (ringside::simulate::Simulator, Proxy) {
    let sim = start_sim(SimOptions {
        events,
        interval_ms: 100,
        ..Default::default()
    });
    let body = openai_provider("sim", sim.addr, &[("a", "SIM_KEY_A")], "\"m\"");
    (sim, Proxy::start(driver, 1, server, &body))
}

both_drivers!(
    a_drain_is_seen_by_load_balancers_before_the_port_closes,
    ctrl_c_skips_the_drain_delay,
    streams_still_running_when_the_grace_ends_are_counted_in_the_exit_status,
    a_request_still_waiting_for_its_upstream_at_the_grace_s_end_is_answered,
    sighup_never_ends_the_process,
    a_start_right_after_sigkill_always_works,
);

fn a_drain_is_seen_by_load_balancers_before_the_port_closes(driver: &str) {
    let (_sim, mut proxy) = drain_proxy(driver, 20, "drain_delay_ms = 1500\n");
    assert_eq!(readyz(&proxy), Some(200));
    let stream = open_stream(&proxy);
    signal(&proxy, libc::SIGTERM);
    // /readyz says 503 at once, while new requests are still served.
    let until = Instant::now() + Duration::from_secs(1);
    while readyz(&proxy) != Some(503) {
        assert!(Instant::now() < until, "/readyz still ready after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "a request during the drain delay");
    // Then the data port closes.
    let until = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect_timeout(&proxy.addr, T).is_ok() {
        assert!(Instant::now() < until, "the data port never closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The stream that was running finishes whole inside the grace, and the exit is clean.
    let text = String::from_utf8_lossy(&read_all(stream)).to_string();
    assert!(text.contains("data: [DONE]"), "{text}");
    let status = wait_exit(&mut proxy, Duration::from_secs(15));
    assert!(status.success(), "{status:?}");
}

fn ctrl_c_skips_the_drain_delay(driver: &str) {
    let (_sim, mut proxy) = drain_proxy(driver, 2, "drain_delay_ms = 30000\n");
    let t0 = Instant::now();
    signal(&proxy, libc::SIGINT);
    let status = wait_exit(&mut proxy, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    // Far inside the 30 s delay a SIGTERM would have waited.
    assert!(t0.elapsed() < Duration::from_secs(10));
}

fn streams_still_running_when_the_grace_ends_are_counted_in_the_exit_status(driver: &str) {
    // 60 events 100 ms apart: longer than the 300 ms delay plus the 700 ms grace.
    let (_sim, mut proxy) = drain_proxy(driver, 60, "shutdown_grace_ms = 700\n");
    let stream = open_stream(&proxy);
    signal(&proxy, libc::SIGTERM);
    let status = wait_exit(&mut proxy, Duration::from_secs(15));
    assert_eq!(status.code(), Some(3), "{status:?}");
    let text = String::from_utf8_lossy(&read_all(stream)).to_string();
    assert!(
        !text.contains("data: [DONE]"),
        "the stream was not cut: {text}"
    );
    // It ended with the dialect's error event saying why, as a whole chunked message.
    assert!(text.contains("\"code\":\"shutdown\""), "{text}");
    assert!(text.ends_with("0\r\n\r\n"), "{text}");
}

fn a_request_still_waiting_for_its_upstream_at_the_grace_s_end_is_answered(driver: &str) {
    // The upstream takes 30 s to its head (a long non-streaming completion); the grace is 700 ms.
    let sim = start_sim(SimOptions {
        latency_ms: 30_000,
        ..Default::default()
    });
    let body = openai_provider("sim", sim.addr, &[("a", "SIM_KEY_A")], "\"m\"");
    let mut proxy = Proxy::start(driver, 1, "shutdown_grace_ms = 700\n", &body);
    let mut s = raw_client(proxy.addr);
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(raw_chat("m", false).as_bytes()).expect("send");
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    signal(&proxy, libc::SIGTERM);
    let text = String::from_utf8_lossy(&read_all(s)).to_string();
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "answered at the grace's end, not at the upstream's: {:?}",
        t0.elapsed()
    );
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("\"code\":\"shutdown\""), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("x-should-retry: true"),
        "{text}"
    );
    let status = wait_exit(&mut proxy, Duration::from_secs(15));
    assert_eq!(status.code(), Some(3), "counted as cut: {status:?}");
}

fn sighup_never_ends_the_process(driver: &str) {
    let (_sim, mut proxy) = drain_proxy(driver, 2, "");
    for _ in 0..3 {
        signal(&proxy, libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        proxy.child.try_wait().expect("wait").is_none(),
        "SIGHUP ended it"
    );
    // The running config is readable, without a secret in it.
    let (status, cfg) = proxy.admin("GET", "/admin/config");
    assert_eq!(status, 200);
    assert_eq!(cfg["server"]["drain_delay_ms"], 300, "{cfg}");
    assert_eq!(
        cfg["stream"]["coalesce_events"], "auto",
        "only while busy, by default: {cfg}"
    );
    assert_eq!(cfg["stream"]["holdback_ms"], 750, "{cfg}");
    assert_eq!(cfg["providers"][0]["connections"][0]["id"], "a", "{cfg}");
    assert_eq!(
        cfg["providers"][0]["connections"][0]["key_sha256_prefix"]
            .as_str()
            .map(str::len),
        Some(12)
    );
    assert_eq!(cfg["server"]["admin_token"], "set");
    let text = cfg.to_string();
    assert!(
        !text.contains("sk-sim-a") && !text.contains(ADMIN_TOKEN),
        "{text}"
    );
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200);
    // A second SIGTERM ends the drain at once (the delay here is 300 ms, the grace 5 s).
    signal(&proxy, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(50));
    signal(&proxy, libc::SIGTERM);
    let status = wait_exit(&mut proxy, Duration::from_secs(4));
    assert!(status.success(), "{status:?}");
}

fn a_start_right_after_sigkill_always_works(driver: &str) {
    let dir = tempdir::new();
    let (p, a) = (port(), port());
    let cfg = format!(
        "[server]\nlisten = \"127.0.0.1:{p}\"\nadmin_listen = \"127.0.0.1:{a}\"\nworkers = 1\ndriver = \"{driver}\"\ndata_dir = \"{}\"\naccess_log = false\n[[providers]]\nid = \"x\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n  [[providers.connections]]\n  id = \"a\"\n  key_env = \"SIM_KEY_A\"\n",
        dir.0.join("data").display()
    );
    let path = dir.0.join("ringside.toml");
    std::fs::write(&path, cfg).expect("write");
    let start = || {
        Command::new(binary())
            .args(["serve", "--config", path.to_str().unwrap_or_default()])
            .envs(proxy_env())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let ready = |child: &mut std::process::Child| {
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(s)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                panic!("ringside exited at start ({s:?}): {err}");
            }
            let up = ringside::demo::client::request(addr(a), "GET", "/readyz", &[], b"", T)
                .is_ok_and(|r| r.status == 200);
            if up {
                return;
            }
            assert!(Instant::now() < until, "not ready");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let mut child = start();
    ready(&mut child);
    for _ in 0..20 {
        let _ = child.kill();
        let _ = child.wait();
        // At once, as systemd's Restart= would (100 ms later by default).
        child = start();
        ready(&mut child);
    }
    // A second instance beside a live one is still refused, naming the data dir.
    let second = Command::new(binary())
        .args(["serve", "--config", path.to_str().unwrap_or_default()])
        .envs(proxy_env())
        .output()
        .expect("second");
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("another Ringside is running"));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_access_log_has_one_json_line_per_request_including_the_cut_stream() {
    let sim = start_sim(SimOptions {
        events: 60,
        interval_ms: 100,
        ..Default::default()
    });
    let dir = tempdir::new();
    let (p, a) = (port(), port());
    let cfg = format!(
        "[server]\nlisten = \"127.0.0.1:{p}\"\nadmin_listen = \"127.0.0.1:{a}\"\nworkers = 2\ndata_dir = \"{}\"\ndrain_delay_ms = 100\nshutdown_grace_ms = 600\n{}",
        dir.0.join("data").display(),
        openai_provider("sim", sim.addr, &[("a", "SIM_KEY_A")], "\"m\"")
    );
    let path = dir.0.join("ringside.toml");
    std::fs::write(&path, cfg).expect("write");
    let log_path = dir.0.join("access.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let child = Command::new(binary())
        .args(["serve", "--config", path.to_str().unwrap_or_default()])
        .envs(proxy_env())
        .stdout(log)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut proxy = Proxy {
        child,
        addr: addr(p),
        admin: addr(a),
        dir,
    };
    let until = Instant::now() + Duration::from_secs(15);
    while readyz(&proxy) != Some(200) {
        assert!(Instant::now() < until, "not ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..5 {
        let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
        assert_eq!(r.status, 200);
    }
    let stream = open_stream(&proxy);
    signal(&proxy, libc::SIGTERM);
    let status = wait_exit(&mut proxy, Duration::from_secs(15));
    assert_eq!(status.code(), Some(3), "{status:?}");
    drop(stream);
    let text = std::fs::read_to_string(&log_path).expect("read log");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not one JSON line ({e}): {l}")))
        .collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l["kind"] == "access" && l["ts_ms"].as_u64() > Some(0))
    );
    assert_eq!(
        lines.iter().filter(|l| l["outcome"] == "ok").count(),
        5,
        "{text}"
    );
    let cut: Vec<_> = lines
        .iter()
        .filter(|l| l["outcome"] == "shutdown")
        .collect();
    assert_eq!(cut.len(), 1, "{text}");
    assert_eq!(cut[0]["attempts"][0]["outcome"], "shutdown", "{text}");
}
