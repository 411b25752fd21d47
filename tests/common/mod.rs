//! Shared harness: start the real `ringside` binary against the in-repo simulator (or a
//! scripted raw upstream) on loopback, with either I/O driver.
#![allow(dead_code)]

use ringside::demo::client::{self, Reply};
use ringside::simulate::{self, SimOptions, Simulator};
use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub const T: Duration = Duration::from_secs(10);

/// The admin token every test proxy is started with (unless the test sets its own).
pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789";
pub const ADMIN_AUTH: (&str, &str) = ("authorization", "Bearer test-admin-token-0123456789");
/// The fleet's shared secret in the tests' fleets (`[fleet] secret_env`).
pub const FLEET_SECRET: &str = "test-fleet-secret-0123456789abcdef";

/// The proxy under test: this build's binary, or `RINGSIDE_BIN` (e.g. the profile-guided
/// release build: `RINGSIDE_BIN=target/release/ringside cargo test --test dataplane`).
/// The environment every test proxy runs with: the simulator's keys and the admin token.
pub fn proxy_env() -> [(&'static str, &'static str); 11] {
    [
        ("SIM_EXPIRES_PAST", "1000000000"),
        ("SIM_REFRESH_A", "sim-refresh-a"),
        ("SIM_REFRESH_B", "sim-refresh-b"),
        (
            "RINGSIDE_TEST_TOKEN_KEY",
            "ringside-test-token-key-0123456789",
        ),
        ("SIM_KEY_A", "sk-sim-a"),
        ("SIM_KEY_B", "sk-sim-b"),
        ("SIM_KEY_C", "sk-sim-c"),
        ("SIM_KEY_D", "sk-sim-d"),
        ("SIM_KEY_BAD", "sk-sim-bad"),
        ("RINGSIDE_TEST_ADMIN_TOKEN", ADMIN_TOKEN),
        ("RINGSIDE_TEST_FLEET_SECRET", FLEET_SECRET),
    ]
}

pub fn binary() -> std::path::PathBuf {
    match std::env::var_os("RINGSIDE_BIN") {
        Some(p) if !p.is_empty() => std::path::PathBuf::from(p),
        _ => env!("CARGO_BIN_EXE_ringside").into(),
    }
}

/// The `key_sha256` a config gives for a client key (the library's own digest and hex).
pub fn key_sha256(key: &str) -> String {
    ringside::secret::hex(&ringside::secret::digest(key.as_bytes()))
}

pub fn port() -> u16 {
    ringside::demo::free_port().expect("free port")
}

pub fn addr(p: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], p))
}

/// Set (or, with `None`, clear) the simulator's fault for requests with `key`
/// (`POST /_sim/faults`).
pub fn set_fault(sim: SocketAddr, key: &str, spec: Option<&str>) {
    let body = match spec {
        Some(s) => serde_json::json!({"key": key, "spec": s}),
        None => serde_json::json!({"key": key}),
    };
    let r = client::request(
        sim,
        "POST",
        "/_sim/faults",
        &[],
        body.to_string().as_bytes(),
        T,
    )
    .expect("simulator control");
    assert_eq!(r.status, 200);
}

/// Start the simulator on a free port. A port found free can be taken by a parallel test
/// before the simulator binds it: then another is tried.
pub fn start_sim(mut opts: SimOptions) -> Simulator {
    let mut tries = 0;
    loop {
        opts.listen = addr(port());
        match simulate::start(opts.clone()) {
            Ok(sim) => return sim,
            Err(e) if tries < 5 => {
                tries += 1;
                eprintln!("simulator did not start ({e}), another port");
            }
            Err(e) => panic!("simulator starts: {e}"),
        }
    }
}

pub struct Proxy {
    pub child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub dir: tempdir::Dir,
}

pub mod apt;
pub mod cross;
mod launch;
pub mod leases;
pub mod node;
mod raw;
mod requests;
#[allow(unused_imports)] // not every test binary uses raw sockets
pub use raw::*;
pub use requests::*;
pub mod connect_proxy;
pub mod redis;
pub mod sim_tls;
pub mod tls_upstream;
pub mod venv;

pub mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    /// A directory of its own: the pid and a per-process count. (A free port number, used here
    /// before, can be handed to two parallel tests in turn, and then two Ringsides shared one
    /// `data_dir`: the second refused to start, "another Ringside is running".)
    pub fn new() -> Dir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "ringside-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // A leftover of an earlier process with the same pid is not this test's state.
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        Dir(p)
    }
}

impl Proxy {
    /// Start the binary with `body` (providers, routes, extra sections) appended to a [server]
    /// section that picks ports and the driver.
    pub fn start(driver: &str, workers: usize, extra_server: &str, body: &str) -> Proxy {
        Self::start_in(driver, workers, extra_server, body, tempdir::new())
    }

    /// Start with a given directory (its `data` holds the durable store, kept across restarts).
    // Every child is either waited for here or handed to `Proxy`, whose Drop waits for it.
    #[allow(clippy::zombie_processes)]
    pub fn start_in(
        driver: &str,
        workers: usize,
        extra_server: &str,
        body: &str,
        dir: tempdir::Dir,
    ) -> Proxy {
        // A port picked free a moment ago can be taken meanwhile (an ephemeral client port):
        // if the binary exits before it is ready, try again with new ports.
        let mut why = Vec::new();
        for attempt in 0..3 {
            let (p, a) = (port(), port());
            let cfg = launch::config_text(
                p,
                a,
                driver,
                workers,
                extra_server,
                body,
                &dir.0.join("data"),
            );
            let path = dir.0.join("ringside.toml");
            std::fs::write(&path, cfg).expect("write config");
            // `# access log to file`: stdout (the access log) goes to `access.log` in the dir.
            let stdout = if extra_server.contains("# access log to file") {
                Stdio::from(std::fs::File::create(dir.0.join("access.log")).expect("log file"))
            } else {
                Stdio::null()
            };
            // Its operational messages go to a file, quoted if it never becomes ready.
            let log = dir.0.join(format!("stderr.{attempt}.log"));
            let stderr = std::fs::File::create(&log).map_or(Stdio::null(), Stdio::from);
            let mut child = launch::spawn(&path, extra_server, stdout, stderr);
            // Generous: on a loaded 2-core machine a start has been seen to take over 10 s.
            let deadline = Instant::now() + 3 * T;
            let mut exited = false;
            while Instant::now() < deadline {
                if let Ok(r) =
                    client::request(addr(a), "GET", "/readyz", &[], b"", Duration::from_secs(1))
                    && r.status == 200
                {
                    // Two tests can be handed the same free port: the answer may be another
                    // test's server, whose own port this one failed to take.
                    if someone_else_s(addr(a), &dir.0.join("data")) {
                        let _ = child.kill();
                        let _ = child.wait();
                        why.push(format!("port {a} answered for another server"));
                        exited = true;
                        break;
                    }
                    return Proxy {
                        child,
                        addr: addr(p),
                        admin: addr(a),
                        dir,
                    };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    let _ = child.wait();
                    exited = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(30));
            }
            if exited && why.last().is_some_and(|w| w.contains("another server")) {
                continue;
            }
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: String = said.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
            if !exited {
                let _ = child.kill();
                let _ = child.wait();
                why.push(format!(
                    "no ready answer on port {a} in {:?} ({tail})",
                    3 * T
                ));
                break;
            }
            why.push(format!("exited ({tail})"));
        }
        panic!("ringside did not become ready: {}", why.join("; "));
    }

    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        client::request(self.addr, "POST", path, headers, body.as_bytes(), T).expect("request")
    }

    pub fn metrics(&self) -> String {
        client::request(self.admin, "GET", "/metrics", &[ADMIN_AUTH], b"", T)
            .expect("metrics")
            .text()
    }

    pub fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "ringside did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Generate a pair of #[test]s (io_uring and epoll) for one scenario `fn(&str)`.
/// A test server's configuration: its ports, driver and workers, the tests' admin token, a
/// short drain, then the test's own lines.
/// Whether the admin port at `admin` belongs to a server whose data directory is not `data`:
/// another test's, started on a port number both were handed. (A server whose admin API takes
/// another token than the tests' cannot be asked, and is taken as this test's.)
pub fn someone_else_s(admin: SocketAddr, data: &std::path::Path) -> bool {
    let Ok(r) = client::request(admin, "GET", "/admin/config", &[ADMIN_AUTH], b"", T) else {
        return false;
    };
    if r.status != 200 {
        return false;
    }
    let cfg = r.json();
    cfg["server"]["data_dir"]
        .as_str()
        .is_some_and(|d| std::path::Path::new(d) != data)
}

#[macro_export]
macro_rules! both_drivers {
    ($($name:ident),* $(,)?) => {
        mod uring { $( #[test] fn $name() { super::$name("uring") } )* }
        mod epoll { $( #[test] fn $name() { super::$name("epoll") } )* }
    };
}

impl Proxy {
    /// Call the admin API and parse its JSON answer.
    pub fn admin(&self, method: &str, path: &str) -> (u16, serde_json::Value) {
        let r = client::request(self.admin, method, path, &[ADMIN_AUTH], b"", T)
            .expect("admin request");
        (r.status, r.json())
    }

    /// Call the admin API with the token and a JSON body.
    pub fn admin_with(&self, method: &str, path: &str, body: &str) -> Reply {
        client::request(
            self.admin,
            method,
            path,
            &[ADMIN_AUTH, ("content-type", "application/json")],
            body.as_bytes(),
            T,
        )
        .expect("admin request")
    }

    /// A request's decision record. It is kept once the request is finalised, which can be a
    /// moment after the client has read the end of its answer: asked again until it is there
    /// (for up to two seconds).
    pub fn decision(&self, request_id: &str) -> serde_json::Value {
        self.decision_within(request_id, std::time::Duration::from_secs(2))
    }

    /// The same, waiting up to `limit` (for a request still running when asked).
    pub fn decision_within(
        &self,
        request_id: &str,
        limit: std::time::Duration,
    ) -> serde_json::Value {
        let give_up = std::time::Instant::now() + limit;
        loop {
            let d = self
                .admin("GET", &format!("/admin/decisions/{request_id}"))
                .1;
            if !d["outcome"].is_null() || std::time::Instant::now() >= give_up {
                return d;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
