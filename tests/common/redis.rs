//! A `redis-server` of a test's own on a loopback port (installed from the Debian packages if
//! missing), and a plain RESP client for what a test writes or reads there as an outsider would.

use super::{Proxy, addr, chat, port, priority_keys, start_sim, tempdir};
use ringside::simulate::{SimOptions, parse_fault_arg};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` of the test's own, without persistence (health needs none).
pub struct Redis {
    child: Child,
    pub port: u16,
    _dir: Option<tempdir::Dir>,
}

fn install_redis() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| super::apt::ensure("redis-server", "redis-server"));
}

impl Redis {
    pub fn start() -> Redis {
        Self::start_on(port())
    }

    pub fn start_on(port: u16) -> Redis {
        let dir = tempdir::new();
        let mut r = Self::start_in(port, &dir.0, false);
        r._dir = Some(dir);
        r
    }

    /// With `durable`, the persistence docs/fleet.md asks for leases: every write on disk
    /// before it is acknowledged (`appendonly yes`, `appendfsync always`).
    // The child is killed and waited for in Drop.
    #[allow(clippy::zombie_processes)]
    pub fn start_in(port: u16, dir: &std::path::Path, durable: bool) -> Redis {
        install_redis();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                if durable { "yes" } else { "no" },
                "--appendfsync",
                "always",
                "--dir",
                dir.to_str().unwrap_or("/tmp"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let r = Redis {
            child,
            port,
            _dir: None,
        };
        let until = Instant::now() + Duration::from_secs(10);
        while !r.ping() {
            assert!(Instant::now() < until, "redis-server did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    pub fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(addr(self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 16];
        s.write_all(b"PING\r\n").is_ok()
            && s.read(&mut buf).is_ok_and(|n| &buf[..n] == b"+PONG\r\n")
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Redis {
    /// One command on a fresh connection, as anyone who can reach Redis could send it; the
    /// reply's text (an integer, a status, a bulk string; arrays flattened with newlines).
    pub fn cmd(&self, args: &[&str]) -> String {
        let mut s = TcpStream::connect(addr(self.port)).expect("connect to redis");
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes()).expect("write to redis");
        let mut r = BufReader::new(s);
        read_reply(&mut r).expect("a reply from redis")
    }
}

fn read_reply(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let line = line.trim_end().to_string();
    let (kind, rest) = line.split_at(1.min(line.len()));
    Some(match kind {
        "$" => {
            let n: i64 = rest.parse().unwrap_or(-1);
            if n < 0 {
                return Some(String::new());
            }
            let mut buf = vec![0u8; n as usize + 2];
            r.read_exact(&mut buf).ok()?;
            String::from_utf8_lossy(&buf[..n as usize]).to_string()
        }
        "*" => {
            let n: i64 = rest.parse().unwrap_or(0);
            let mut parts = Vec::new();
            for _ in 0..n.max(0) {
                parts.push(read_reply(r)?);
            }
            parts.join("\n")
        }
        _ => rest.to_string(),
    })
}

/// Messages published on `channel` from now on (the payloads), read on a thread of their own
/// until the test ends.
pub fn subscribe(redis: &Redis, channel: &str) -> std::sync::mpsc::Receiver<String> {
    let mut s = TcpStream::connect(addr(redis.port)).expect("connect to redis");
    let req = format!(
        "*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{channel}\r\n",
        channel.len()
    );
    s.write_all(req.as_bytes()).expect("subscribe");
    let mut r = BufReader::new(s);
    let _confirmation = read_reply(&mut r);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while let Some(push) = read_reply(&mut r) {
            let mut parts = push.splitn(3, '\n');
            if parts.next() == Some("message") {
                let _channel = parts.next();
                if tx.send(parts.next().unwrap_or("").to_string()).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// A simulator whose key `sk-sim-a` answers 429 with `Retry-After: 30`.
pub fn sim() -> ringside::simulate::Simulator {
    let mut opts = SimOptions::default();
    opts.faults
        .push(parse_fault_arg("key:sk-sim-a=429;retry-after=30").expect("fault"));
    start_sim(opts)
}

/// An instance of the fleet at `redis`, named `name`, with keys `a` and `b` on `sim`.
pub fn instance(
    driver: &str,
    name: &str,
    redis: &str,
    sim: &ringside::simulate::Simulator,
) -> Proxy {
    Proxy::start(
        driver,
        1,
        "",
        &(priority_keys(sim.addr, &["a", "b"], "") + &fleet_section(redis, name)),
    )
}

pub fn state_of(proxy: &Proxy, conn: &str) -> String {
    let (_, c) = proxy.admin("GET", "/admin/connections");
    c["connections"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["connection"] == conn))
        .map(|x| x["state"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// Wait until `conn` cools on `proxy`; how long it took.
pub fn until_cooling(proxy: &Proxy, conn: &str, within: Duration) -> Duration {
    let t0 = Instant::now();
    while state_of(proxy, conn) != "cooling" {
        assert!(
            t0.elapsed() < within,
            "{conn} did not cool within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    t0.elapsed()
}

pub fn served_by(proxy: &Proxy) -> String {
    let r = proxy.post("/v1/chat/completions", &[], &chat("m", false));
    assert_eq!(r.status, 200, "{}", r.text());
    r.header("x-ringside-connection").unwrap_or("").to_string()
}

pub fn with_fleet(redis: &Redis, name: &str) -> String {
    "[session]\naffinity_ttl_ms = 60000\n".to_string() + &fleet_section(&redis.url(), name)
}

/// `n` requests at once as tenant `who`, spread over `addrs`: their statuses.
pub fn burst(addrs: &[std::net::SocketAddr], n: usize, who: &str) -> Vec<u16> {
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let addr = addrs[i % addrs.len()];
            let auth = format!("Bearer {who}");
            std::thread::spawn(move || {
                ringside::demo::client::request(
                    addr,
                    "POST",
                    "/v1/chat/completions",
                    &[("authorization", &auth)],
                    chat("m", false).as_bytes(),
                    Duration::from_secs(30),
                )
                .map(|r| r.status)
                .unwrap_or(0)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect()
}

/// The `[fleet]` section of an instance named `name` at `redis`, with the tests' secret.
pub fn fleet_section(redis: &str, name: &str) -> String {
    format!(
        "[fleet]\nsecret_env = \"RINGSIDE_TEST_FLEET_SECRET\"\nredis_url = \"{redis}\"\ninstance_id = \"{name}\"\n"
    )
}
