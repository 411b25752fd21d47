//! Hot reload, from outside: a reload under load (64 clients busy, 20 streams open across it)
//! drops nothing and cuts nothing; a connection's cooldown set before it is still there after
//! it; new connections and routes serve at once; an invalid file leaves the running config
//! serving and is reported; a removed connection goes; a new key starts clean; settings that
//! need a restart are said;
//! `ringside reload` and SIGHUP do what `POST /admin/reload` does; a reload that would leave
//! the running admin port open to the network without a token is refused, and a refused
//! reload never writes the file's text (a pasted key) into its answer or the log.

mod common;
use common::*;
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

both_drivers!(
    a_reload_under_load_keeps_state_and_drops_nothing,
    an_invalid_file_changes_nothing_and_a_removed_connection_goes,
    a_removed_connection_s_lease_ends_with_a_reason,
    a_reload_cannot_leave_the_running_admin_port_open,
);

fn sim(events: u32) -> ringside::simulate::Simulator {
    let mut opts = SimOptions {
        events,
        interval_ms: 100,
        ..Default::default()
    };
    // Key a always answers 429 with a minute's Retry-After: the cooldown to keep.
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=429;retry-after=60").expect("fault"));
    start_sim(opts)
}

fn config_path(proxy: &Proxy) -> std::path::PathBuf {
    proxy.dir.0.join("ringside.toml")
}

fn generation(proxy: &Proxy) -> u64 {
    let (_, cfg) = proxy.admin("GET", "/admin/config");
    cfg["generation"].as_u64().unwrap_or(0)
}

fn state_of(proxy: &Proxy, conn: &str) -> String {
    let (_, c) = proxy.admin("GET", "/admin/connections");
    c["connections"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["connection"] == conn))
        .map(|x| x["state"].as_str().unwrap_or("").to_string())
        .unwrap_or_else(|| "absent".into())
}

fn signal(proxy: &Proxy, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(proxy.child.id() as i32, sig);
    }
}

/// Open a stream and read it to its end; true when it ended with `[DONE]`.
fn whole_stream(addr: std::net::SocketAddr, started: &AtomicUsize) -> bool {
    let mut s = raw_client(addr);
    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
    if s.write_all(raw_chat("m", true).as_bytes()).is_err() {
        return false;
    }
    let mut got = Vec::new();
    let mut tmp = [0u8; 4096];
    let mut counted = false;
    loop {
        match s.read(&mut tmp) {
            Ok(n) if n > 0 => got.extend_from_slice(&tmp[..n]),
            _ => return false,
        }
        if !counted && find(&got, b"data: ").is_some() {
            counted = true;
            started.fetch_add(1, Ordering::SeqCst);
        }
        if find(&got, b"data: [DONE]").is_some() {
            return find(&got, b"\"error\"").is_none();
        }
    }
}

/// 64 clients sending requests back to back, and 20 streams open (about 2 s each).
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    busy: Vec<std::thread::JoinHandle<()>>,
    streams: Vec<std::thread::JoinHandle<bool>>,
}

impl Load {
    /// Start it, and return once every stream has its first event.
    fn start(addr: std::net::SocketAddr) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let started = Arc::new(AtomicUsize::new(0));
        let streams = (0..20)
            .map(|_| {
                let started = started.clone();
                std::thread::spawn(move || whole_stream(addr, &started))
            })
            .collect();
        let busy = (0..64)
            .map(|_| {
                let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let body = chat("m", false);
                        match ringside::demo::client::request(
                            addr,
                            "POST",
                            "/v1/chat/completions",
                            &[],
                            body.as_bytes(),
                            Duration::from_secs(20),
                        ) {
                            Ok(r) if r.status == 200 => ok.fetch_add(1, Ordering::SeqCst),
                            _ => failed.fetch_add(1, Ordering::SeqCst),
                        };
                    }
                })
            })
            .collect();
        let until = Instant::now() + Duration::from_secs(10);
        while started.load(Ordering::SeqCst) < 20 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(started.load(Ordering::SeqCst), 20, "streams running");
        Load {
            stop,
            ok,
            failed,
            busy,
            streams,
        }
    }

    /// Stop the clients, wait for the streams: nothing failed, every stream whole.
    fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.busy {
            t.join().expect("client thread");
        }
        let whole = self
            .streams
            .into_iter()
            .map(|t| t.join().expect("stream thread"))
            .filter(|&whole| whole)
            .count();
        assert_eq!(
            whole, 20,
            "every stream open across the reload finished whole"
        );
        assert_eq!(self.failed.load(Ordering::SeqCst), 0, "no request failed");
        assert!(self.ok.load(Ordering::SeqCst) > 64, "the clients were busy");
    }
}

fn a_reload_under_load_keeps_state_and_drops_nothing(driver: &str) {
    // 20 events 100 ms apart: each stream runs about 2 s, across the reload.
    let sim = sim(20);
    let mut proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let first = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(first.status, 200);
    assert_eq!(state_of(&proxy, "a"), "cooling");
    assert_eq!(generation(&proxy), 1);

    let load = Load::start(proxy.addr);
    // A new key, and a route that did not exist: appended under the provider, then a route.
    let path = config_path(&proxy);
    let text = std::fs::read_to_string(&path).expect("config");
    let more = "  [[providers.connections]]\n  id = \"c\"\n  key_env = \"SIM_KEY_C\"\n  models = [\"m\"]\n  priority = 2\n[[routes]]\nname = \"alias\"\ntargets = [ { provider = \"sim\", model = \"m\" } ]\n";
    std::fs::write(&path, format!("{text}{more}")).expect("write");
    signal(&proxy, libc::SIGHUP);
    let until = Instant::now() + Duration::from_secs(10);
    while generation(&proxy) != 2 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(generation(&proxy), 2, "SIGHUP applied the file");
    let r = proxy.post("/v1/chat/completions", &[], &chat("alias", false));
    assert_eq!(r.status, 200, "the new route serves: {}", r.text());
    std::thread::sleep(Duration::from_millis(300));
    load.finish();
    // State stayed with the connection whose identity is unchanged.
    assert_eq!(state_of(&proxy, "a"), "cooling", "the cooldown survived");
    assert_eq!(state_of(&proxy, "c"), "active");
    let (_, cfg) = proxy.admin("GET", "/admin/config");
    let last = &cfg["last_reload"];
    assert_eq!(last["status"], "applied", "{last}");
    assert_eq!(last["cause"], "signal", "{last}");
    assert_eq!(last["changes"]["connections_added"][0], "sim/c", "{last}");
    assert_eq!(last["changes"]["routes_added"][0], "alias", "{last}");
    assert!(!cfg.to_string().contains("sk-sim-"), "no secret shown");
    let m = proxy.metrics();
    assert!(m.contains("ringside_config_generation 2"), "{m}");
    assert!(
        m.contains("ringside_config_reloads_total{result=\"applied\"} 1"),
        "{m}"
    );
    assert!(
        proxy.child.try_wait().expect("wait").is_none(),
        "the process is still serving"
    );
}

fn an_invalid_file_changes_nothing_and_a_removed_connection_goes(driver: &str) {
    let sim = sim(2);
    let proxy = Proxy::start(driver, 2, "", &priority_keys(sim.addr, &["a", "b"], ""));
    let path = config_path(&proxy);
    let good = std::fs::read_to_string(&path).expect("config");

    // An invalid file: refused with every problem, the old config keeps serving.
    std::fs::write(&path, format!("{good}\n[server]\nworkers = \"many\"\n")).expect("write");
    let r = proxy.admin_with("POST", "/admin/reload", "");
    assert_eq!(r.status, 422, "{}", r.text());
    let out = r.json();
    assert_eq!(out["status"], "rejected");
    assert!(
        !out["problems"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .is_empty(),
        "{out}"
    );
    assert_eq!(generation(&proxy), 1);
    let served = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(served.status, 200);
    assert!(
        proxy
            .metrics()
            .contains("ringside_config_reloads_total{result=\"rejected\"} 1")
    );

    // `ringside reload`: b removed, d added, the listen address changed (needs a restart).
    let a_port = proxy.addr.port();
    let next = good
        .replace(
            "  [[providers.connections]]\n  id = \"b\"\n  key_env = \"SIM_KEY_B\"\n  models = [\"m\"]\n  priority = 1\n",
            "  [[providers.connections]]\n  id = \"d\"\n  key_env = \"SIM_KEY_D\"\n  models = [\"m\"]\n  priority = 1\n",
        )
        .replace(&format!("127.0.0.1:{a_port}"), "127.0.0.1:1");
    assert_ne!(next, good);
    std::fs::write(&path, &next).expect("write");
    let cli = std::process::Command::new(binary())
        .args(["reload", "--config", path.to_str().unwrap_or_default()])
        .envs(proxy_env())
        .output()
        .expect("ringside reload");
    let said = String::from_utf8_lossy(&cli.stdout).to_string();
    assert!(
        cli.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let out: serde_json::Value = serde_json::from_str(said.trim()).expect("json outcome");
    assert_eq!(out["generation"], 2, "{out}");
    assert_eq!(out["changes"]["connections_removed"][0], "sim/b", "{out}");
    assert_eq!(out["changes"]["connections_added"][0], "sim/d", "{out}");
    assert_eq!(out["needs_restart"][0], "server.listen", "{out}");
    assert_eq!(state_of(&proxy, "b"), "absent");
    assert_eq!(state_of(&proxy, "a"), "cooling", "the cooldown survived");
    // Still listening where it started; d serves now that a cools and b is gone.
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-ringside-connection"), Some("sim/d"));
    // Per-connection metrics no longer name b.
    let m = proxy.metrics();
    assert!(!m.contains("connection=\"b\""), "{m}");

    // A new key behind a: a new credential, its state starts clean (and it serves again).
    std::fs::write(&path, next.replace("SIM_KEY_A", "SIM_KEY_C")).expect("write");
    let r = proxy.admin_with("POST", "/admin/reload", "");
    assert_eq!(r.status, 200, "{}", r.text());
    let out = r.json();
    assert_eq!(out["changes"]["keys_changed"][0], "sim/a", "{out}");
    assert_eq!(state_of(&proxy, "a"), "active");
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.header("x-ringside-connection"), Some("sim/a"));
}

const LEASE_KEY: &str = "sk-ringside-lease-a-0123456789";

/// Keys `conns`, and a client key that may lease any of them.
fn lease_config(sim: std::net::SocketAddr, conns: &[&str]) -> String {
    let allowed: Vec<String> = conns.iter().map(|c| format!("\"sim/{c}\"")).collect();
    priority_keys(sim, conns, "")
        + &format!(
            "[[clients]]\nid = \"lease-a\"\nkey_sha256 = \"{}\"\nscopes = [\"inference\", \"lease:exclusive\"]\nallowed_connections = [{}]\n",
            key_sha256(LEASE_KEY),
            allowed.join(", ")
        )
}

fn a_removed_connection_s_lease_ends_with_a_reason(driver: &str) {
    let sim = start_sim(SimOptions::default());
    let proxy = Proxy::start(driver, 2, "", &lease_config(sim.addr, &["a", "b"]));
    let owner = format!("vlo_{}", "A".repeat(43));
    let r = proxy.post(
        "/v1/session-leases",
        &[
            ("x-api-key", LEASE_KEY),
            ("content-type", "application/json"),
            ("x-ringside-lease-owner", &owner),
        ],
        r#"{"action":"acquire","model":"m"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let (_, l) = proxy.admin("GET", "/admin/leases");
    let held = l["leases"][0]["connection"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(held.starts_with("sim/"), "{l}");
    // The leased connection goes; the other stays.
    let (gone, stays) = if held == "sim/a" {
        ("a", "b")
    } else {
        ("b", "a")
    };
    let path = config_path(&proxy);
    let text = std::fs::read_to_string(&path).expect("config");
    let body_at = text.find("[[providers]]").unwrap_or(0);
    let head = &text[..body_at];
    std::fs::write(&path, format!("{head}{}", lease_config(sim.addr, &[stays]))).expect("write");
    let r = proxy.admin_with("POST", "/admin/reload", "");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["changes"]["connections_removed"][0],
        format!("sim/{gone}")
    );
    // Phase two ends the lease through the store writer: a moment later it shows.
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, l) = proxy.admin("GET", "/admin/leases");
        let row = l["leases"]
            .as_array()
            .and_then(|v| v.first().cloned())
            .unwrap_or_default();
        if row["end_reason"] == "CONNECTION_REMOVED" {
            assert_ne!(row["state"], "ACTIVE", "{row}");
            break;
        }
        assert!(Instant::now() < until, "the lease did not end: {l}");
        std::thread::sleep(Duration::from_millis(30));
    }
}

fn a_reload_cannot_leave_the_running_admin_port_open(driver: &str) {
    let sim = sim(2);
    let proxy = Proxy::start(
        driver,
        1,
        "# admin on every address\n# access log to file",
        &priority_keys(sim.addr, &["a", "b"], ""),
    );
    let path = config_path(&proxy);
    let good = std::fs::read_to_string(&path).expect("config");
    // The file moves the admin port to loopback and drops its token; the port keeps running
    // on every address until a restart, so the reload is refused.
    let open = good
        .replace("admin_listen = \"0.0.0.0:", "admin_listen = \"127.0.0.1:")
        .replace("admin_token_env = \"RINGSIDE_TEST_ADMIN_TOKEN\"\n", "");
    assert_ne!(open, good);
    std::fs::write(&path, &open).expect("write");
    let r = proxy.admin_with("POST", "/admin/reload", "");
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("admin_token_env"), "{}", r.text());
    let anonymous =
        ringside::demo::client::request(proxy.admin, "GET", "/admin/connections", &[], b"", T)
            .expect("admin");
    assert_eq!(anonymous.status, 401, "the token still holds");
    // A key pasted where a variable's name belongs, quoted and not: never in the answer or
    // the log.
    const PASTED: &str = "sk-proj-pasted0123456789abcdefXYZ";
    for line in [
        format!("key_env = \"{PASTED}\""),
        format!("key_env = {PASTED}"),
    ] {
        let broken = good.replacen("key_env = \"SIM_KEY_A\"", &line, 1);
        assert_ne!(broken, good);
        std::fs::write(&path, &broken).expect("write");
        let r = proxy.admin_with("POST", "/admin/reload", "");
        assert_eq!(r.status, 422, "{}", r.text());
        assert!(!r.text().contains("pasted0123"), "{}", r.text());
        let (_, cfg) = proxy.admin("GET", "/admin/config");
        assert!(!cfg.to_string().contains("pasted0123"), "{cfg}");
    }
    std::thread::sleep(Duration::from_millis(200));
    for entry in std::fs::read_dir(&proxy.dir.0).expect("dir").flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".log") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            assert!(!text.contains("pasted0123"), "{name}: {text}");
        }
    }
}
